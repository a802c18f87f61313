"""Finding model servers already running on this machine (SPEC §9, first run).

Ollama (port 11434), llama.cpp's server (8080) and LM Studio (1234) all speak the
OpenAI chat API under ``/v1`` and list their models at ``/v1/models``. A first start
asks each port on 127.0.0.1 once, briefly and in parallel, and offers what answered as
a provider; nothing is stored until the person accepts. A closed port, a timeout or an
answer that is not a model list means "nothing there", never an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx

from workbench.core.provider import ProviderConfig
from workbench.engine.providers import ProviderSettings
from workbench.store.repository import Repository

__all__ = [
    "DISCOVERY_SETTING",
    "KNOWN_LOCAL_SERVERS",
    "LocalServer",
    "add_local_server",
    "discover_local_servers",
    "mark_offered",
    "offer_due",
    "probe",
]

#: The kinds of local server looked for, with the port each listens on by default.
KNOWN_LOCAL_SERVERS: tuple[tuple[str, int], ...] = (
    ("Ollama", 11434),
    ("llama.cpp", 8080),
    ("LM Studio", 1234),
)

#: The workspace setting that records that the first-run offer was made.
DISCOVERY_SETTING = "local_servers_offered"

PROBE_TIMEOUT = 0.5


@dataclass(frozen=True)
class LocalServer:
    """A server that answered on a local port: what it probably is, where, its models."""

    label: str
    base_url: str
    models: tuple[str, ...]

    @property
    def suggested_name(self) -> str:
        """The provider name to offer, e.g. ``Ollama (local)``."""
        return f"{self.label} (local)"

    @property
    def model(self) -> str:
        """The model to configure: the first one listed (servers often hold one)."""
        return self.models[0] if self.models else "default"

    def sentence(self) -> str:
        """What was found, in words."""
        if not self.models:
            listed = "no model listed"
        elif len(self.models) == 1:
            listed = f"model {self.models[0]}"
        else:
            listed = f"{len(self.models)} models, first {self.models[0]}"
        return f"Found {self.label} at {self.base_url} ({listed})."


def _model_ids(body: Any) -> tuple[str, ...] | None:
    """The model names of a ``/v1/models`` (``data``) or Ollama ``/api/tags``
    (``models``) answer; None when the body is neither."""
    if not isinstance(body, dict):
        return None
    for key, field in (("data", "id"), ("models", "name")):
        items = body.get(key)
        if isinstance(items, list):
            names = [
                str(item.get(field) or item.get("model") or "")
                for item in items
                if isinstance(item, dict)
            ]
            return tuple(name for name in names if name)
    return None


def probe(
    label: str, port: int, *, host: str = "127.0.0.1", timeout: float = PROBE_TIMEOUT
) -> LocalServer | None:
    """Ask one port for its model list; the server found there, or None."""
    root = f"http://{host}:{port}"
    try:
        with httpx.Client(timeout=timeout, trust_env=False) as client:
            for path in ("/v1/models", "/api/tags"):
                try:
                    response = client.get(root + path)
                except httpx.HTTPError:
                    return None  # closed, refused or too slow: nothing there
                if response.status_code != 200:
                    continue
                try:
                    models = _model_ids(response.json())
                except ValueError:
                    continue
                if models is not None:
                    return LocalServer(label, root + "/v1", models)
    except httpx.HTTPError:
        return None
    return None


def discover_local_servers(
    servers: Sequence[tuple[str, int]] = KNOWN_LOCAL_SERVERS,
    *,
    host: str = "127.0.0.1",
    timeout: float = PROBE_TIMEOUT,
) -> list[LocalServer]:
    """Probe every ``(label, port)`` at once; the servers that answered, in that order.

    Takes at most about two ``timeout``s whatever answers (the probes run in parallel).
    """
    if not servers:
        return []
    with ThreadPoolExecutor(len(servers), thread_name_prefix="discover") as pool:
        found = list(
            pool.map(lambda item: probe(item[0], item[1], host=host, timeout=timeout), servers)
        )
    return [server for server in found if server is not None]


def _same_url(a: str, b: str) -> bool:
    return a.rstrip("/").lower() == b.rstrip("/").lower()


def add_local_server(
    settings: ProviderSettings, server: LocalServer, *, model: str | None = None
) -> ProviderConfig | None:
    """Store ``server`` as an OpenAI-compatible provider (no key: local servers need
    none). Returns the new config, or None when a provider with that base URL is stored
    already. The name is the suggested one, numbered if it is taken."""
    stored = settings.list()
    if any(_same_url(config.base_url, server.base_url) for config in stored):
        return None
    taken = {config.name for config in stored}
    name = server.suggested_name
    number = 2
    while name in taken:
        name = f"{server.suggested_name} {number}"
        number += 1
    return settings.add(
        ProviderConfig(name=name, kind="openai", base_url=server.base_url,
                       model=model or server.model)
    )


def offer_due(repo: Repository) -> bool:
    """Whether this workspace has not yet made its first-run offer of local servers."""
    return not repo.get_setting(DISCOVERY_SETTING, False)


def mark_offered(repo: Repository) -> None:
    """Record that the first-run offer was made (it is made once per database)."""
    repo.set_setting(DISCOVERY_SETTING, True)
