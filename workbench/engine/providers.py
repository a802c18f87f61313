"""Providers of a workspace: stored configs turned into live clients, and connection tests.

:class:`ProviderSettings` is what the command line and the GUI use: it lists, adds,
changes and removes configs (in the store, without secrets), builds a
:class:`~workbench.core.provider.Provider` from one (finding its key in the keyring or the
environment) and tests a connection, answering with a sentence either way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from workbench.core.conversation import Message
from workbench.core.provider import ChatRequest, ProviderConfig
from workbench.errors import AuthenticationError, NotFoundError, ProviderError, WorkbenchError
from workbench.providers.anthropic import Anthropic
from workbench.providers.base import HttpProvider
from workbench.providers.http import RetryNotice, Timeouts
from workbench.providers.keys import KeyLookup, describe_key_reference, resolve_api_key
from workbench.providers.openai import OpenAICompatible
from workbench.store.db import Database
from workbench.store.provider_configs import ProviderConfigs

_KINDS: dict[str, type[HttpProvider]] = {"openai": OpenAICompatible, "anthropic": Anthropic}


def find_key(config: ProviderConfig, environ: Mapping[str, str] | None = None) -> KeyLookup:
    """Look up the API key ``config`` refers to (never stored, never printed)."""
    return resolve_api_key(config.api_key_env, config.api_key_keyring, environ=environ)


def build_provider(
    config: ProviderConfig,
    *,
    environ: Mapping[str, str] | None = None,
    on_retry: Callable[[RetryNotice], None] | None = None,
    sleep: Callable[..., None] | None = None,
) -> HttpProvider:
    """A live client for ``config``, its key resolved.

    Raises :class:`AuthenticationError` when the config names a key's place and nothing
    is there, rather than sending a request that can only be refused.
    """
    try:
        cls = _KINDS[config.kind]
    except KeyError:
        raise WorkbenchError(
            f"Provider {config.name!r} has kind {config.kind!r}; use openai or anthropic."
        ) from None
    lookup = find_key(config, environ)
    if (config.api_key_env or config.api_key_keyring) and not lookup.found:
        raise AuthenticationError(
            f"No API key for provider {config.name!r}: looked in {lookup.source}. "
            "Set the key there and try again.",
            provider=config.name,
        )
    return cls(
        config.base_url,
        config.model,
        lookup.key,
        name=config.name,
        timeouts=Timeouts.from_json(config.timeouts),
        extra_headers=config.extra_headers,
        context_window=config.context_window,
        max_output_tokens=config.max_output_tokens,
        temperature=config.temperature,
        key_hint=describe_key_reference(config.api_key_env, config.api_key_keyring),
        on_retry=on_retry,
        sleep=sleep,
    )


@dataclass
class ConnectionReport:
    """The outcome of a connection test, with a sentence for people."""

    ok: bool
    sentence: str
    context_window: int | None = None
    window_source: str = "unknown"
    seconds: float | None = None
    notices: list[str] = field(default_factory=list)
    error: ProviderError | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "message": self.sentence,
            "context_window": self.context_window,
            "context_window_source": self.window_source,
            "seconds": self.seconds,
            "notices": list(self.notices),
        }


def test_connection(
    config: ProviderConfig, *, environ: Mapping[str, str] | None = None
) -> ConnectionReport:
    """Send the smallest possible request (one output token) and say how it went."""
    host = urlsplit(config.base_url).netloc or config.base_url
    label = f"{config.name!r} ({host})"
    notices: list[str] = []
    lookup = find_key(config, environ)
    if lookup.notice:
        notices.append(lookup.notice)
    try:
        provider = build_provider(config, environ=environ)
    except ProviderError as exc:
        return ConnectionReport(False, f"Cannot use {label}: {exc}", notices=notices, error=exc)
    try:
        started = time.monotonic()
        provider.complete(
            ChatRequest([Message("user", "Reply with OK.")], max_tokens=1, stream=False)
        )
        seconds = time.monotonic() - started
        window, source = provider.context_window_info()
    except ProviderError as exc:
        return ConnectionReport(False, f"Cannot use {label}: {exc}", notices=notices, error=exc)
    finally:
        provider.close()
    window_text = (
        f"context window {window} tokens ({'from the server' if source == 'server' else source})"
        if window
        else "context window unknown (set one with --context-window)"
    )
    return ConnectionReport(
        True,
        f"Connected to {label}: {config.model} answered in {seconds:.2f} s; {window_text}.",
        context_window=window,
        window_source=source,
        seconds=seconds,
        notices=notices,
    )


# pytest would take the function above for a test because of its name.
test_connection.__test__ = False  # type: ignore[attr-defined]


class ProviderSettings:
    """The provider configs of one database, and the clients built from them."""

    def __init__(self, db: Database, *, environ: Mapping[str, str] | None = None):
        self.configs = ProviderConfigs(db)
        self.environ = environ

    def list(self) -> list[ProviderConfig]:
        """Every config, by name."""
        return self.configs.all()

    def get(self, name: str) -> ProviderConfig:
        return self.configs.get(name)

    def add(self, config: ProviderConfig) -> ProviderConfig:
        """Store a new config (secrets refused: see :func:`check_config`)."""
        return self.configs.add(config)

    def update(self, name: str, **fields: Any) -> ProviderConfig:
        return self.configs.update(name, **fields)

    def remove(self, name: str) -> None:
        self.configs.remove(name)

    def build(self, name: str, **options: Any) -> HttpProvider:
        """A live client for the config called ``name``."""
        return build_provider(self.get(name), environ=self.environ, **options)

    def test(self, name: str) -> ConnectionReport:
        """Test the connection of the config called ``name``."""
        return test_connection(self.get(name), environ=self.environ)

    def choose(self, name: str | None = None, agent_provider: str | None = None) -> str:
        """The provider to use: the one named, else the agent's, else the only one."""
        if name:
            return self.get(name).name
        if agent_provider:
            try:
                return self.get(agent_provider).name
            except NotFoundError:
                pass
        configs = self.list()
        if len(configs) == 1:
            return configs[0].name
        if not configs:
            raise NotFoundError(
                "No provider is configured; add one with: workbench providers add NAME "
                "--kind openai --base-url URL --model MODEL"
            )
        raise NotFoundError(
            "Several providers are configured ("
            + ", ".join(c.name for c in configs)
            + "); choose one with --provider NAME."
        )
