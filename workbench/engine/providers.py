"""Providers of a workspace: stored configs turned into live clients, and connection tests.

:class:`ProviderSettings` is what the command line and the GUI use: it lists, adds,
changes and removes configs (in the store, without secrets), builds a
:class:`~workbench.core.provider.Provider` from one (finding its key in the keyring or the
environment) and tests a connection, answering with a sentence either way.

For settings forms there is also :func:`keyring_state` (can an OS keyring hold keys
here?), :func:`save_key_in_keyring` (the one way a typed key is kept: in the keyring,
never in the database) and :func:`detect_context_window` (ask the server for a config's
window before it is saved).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from workbench.core.conversation import Message
from workbench.core.provider import CancelToken, ChatRequest, ProviderConfig
from workbench.errors import (
    AuthenticationError,
    NoProviderError,
    NotFoundError,
    ProviderError,
    WorkbenchError,
)
from workbench.providers.anthropic import Anthropic
from workbench.providers.base import HttpProvider
from workbench.providers.context import choose_context_window
from workbench.providers.http import RetryNotice, Timeouts
from workbench.providers.keys import (
    KeyLookup,
    describe_key_reference,
    keyring_status,
    resolve_api_key,
    store_in_keyring,
)
from workbench.providers.openai import OpenAICompatible
from workbench.store.db import Database
from workbench.store.provider_configs import ProviderConfigs, check_config

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
    without_key: bool = False,
) -> HttpProvider:
    """A live client for ``config``, its key resolved.

    Raises :class:`AuthenticationError` when the config names a key's place and nothing
    is there, rather than sending a request that can only be refused. ``without_key``
    (for preflight) never looks the key up: a config that names one gets a stand-in,
    which the request description redacts like a real key.
    """
    try:
        cls = _KINDS[config.kind]
    except KeyError:
        raise WorkbenchError(
            f"Provider {config.name!r} has kind {config.kind!r}; use openai or anthropic."
        ) from None
    if without_key:
        named = bool(config.api_key_env or config.api_key_keyring)
        lookup = KeyLookup("[not read]" if named else None, "not read")
    else:
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
    # The window requests are measured against, as a settings form shows it (the same
    # sentence :func:`context_window_in_use` gives); None when the test failed.
    window_in_use: WindowDetection | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "message": self.sentence,
            "context_window": self.context_window,
            "context_window_source": self.window_source,
            "seconds": self.seconds,
            "notices": list(self.notices),
        }


def _cannot_use(label: str, host: str, error: ProviderError) -> str:
    """"Cannot use LABEL: why", naming the provider once (the error's own sentence may
    start by naming it, or its server, again)."""
    text = str(error)
    for lead in (f"The provider {label} ", f"The server at {host} "):
        if text.startswith(lead):
            text = "it " + text[len(lead):]
            break
    return f"Cannot use {label}: {text}"


def test_connection(
    config: ProviderConfig, *, environ: Mapping[str, str] | None = None,
    cancel: CancelToken | None = None,
) -> ConnectionReport:
    """Send the smallest possible request (one output token) and say how it went.
    ``cancel`` stops waiting for it (raising OperationCancelledError): a server that
    takes the request and never answers would otherwise hold it for the read time-out."""
    host = urlsplit(config.base_url).netloc or config.base_url
    label = f"{config.name!r} ({host})"
    notices: list[str] = []
    lookup = find_key(config, environ)
    if lookup.notice:
        notices.append(lookup.notice)
    try:
        provider = build_provider(config, environ=environ)
    except ProviderError as exc:
        return ConnectionReport(False, _cannot_use(label, host, exc), notices=notices,
                                error=exc)
    try:
        started = time.monotonic()
        provider.complete(
            ChatRequest([Message("user", "Reply with OK.")], max_tokens=1, stream=False),
            cancel=cancel,
        )
        seconds = time.monotonic() - started
        window, source = provider.context_window_info()
    except ProviderError as exc:
        return ConnectionReport(False, _cannot_use(label, host, exc), notices=notices,
                                error=exc)
    finally:
        provider.close()
    window_text = (
        f"context window {window:,} tokens ({'from the server' if source == 'server' else source})"
        if window
        else "context window unknown (set it in the provider's settings)"
    )
    return ConnectionReport(
        True,
        f"Connected to {label}: {config.model} answered in {_duration(seconds)}; {window_text}.",
        context_window=window,
        window_source=source,
        seconds=seconds,
        notices=notices,
        window_in_use=describe_window_in_use(config, window, source),
    )


def _duration(seconds: float) -> str:
    """A short time as people read it: "4 ms", "under 1 ms", "1.25 s"."""
    if seconds >= 1:
        return f"{seconds:.2f} s"
    milliseconds = round(seconds * 1000)
    return f"{milliseconds} ms" if milliseconds >= 1 else "under 1 ms"


# pytest would take the function above for a test because of its name.
test_connection.__test__ = False  # type: ignore[attr-defined]


def keyring_state() -> tuple[bool, str]:
    """Whether an OS keyring can hold API keys here, and a phrase naming it or saying
    why not (e.g. "no OS keyring backend is available on this system")."""
    return keyring_status()


def save_key_in_keyring(entry: str, key: str) -> None:
    """Keep ``key`` in the OS keyring under ``entry`` (the config stores only ``entry``).

    Raises :class:`WorkbenchError` with a sentence when there is no keyring backend, the
    entry or key is empty, or the keyring refuses; the sentence never holds the key.
    """
    entry = entry.strip()
    if not entry:
        raise WorkbenchError("Name the keyring entry the key is to be saved under.")
    if not key.strip():
        raise WorkbenchError("There is no key to save: type the API key first.")
    usable, why = keyring_status()
    if not usable:
        raise WorkbenchError(
            f"The key cannot be saved in the OS keyring: {why}. Put the key in an "
            "environment variable and name that variable instead."
        )
    try:
        store_in_keyring(entry, key.strip())
    except Exception as exc:  # the backend's own errors; their text may be unhelpful
        raise WorkbenchError(
            f"The OS keyring did not take the key for entry {entry!r} "
            f"({type(exc).__name__}); put the key in an environment variable instead."
        ) from None


@dataclass(frozen=True)
class WindowDetection:
    """A context window found for a config: tokens (or None), where from, a sentence.

    ``source`` is ``server`` (the server said), ``known model`` (the published size of
    the model's name) or ``unknown``.
    """

    window: int | None
    source: str
    sentence: str


def detect_context_window(
    config: ProviderConfig, *, environ: Mapping[str, str] | None = None
) -> WindowDetection:
    """Ask the server of ``config`` (saved or not) for its context window, else look the
    model up in the known-model table. The user's own value is not consulted: this is
    how a form offers a better one. A key that cannot be found is not needed to ask
    (llama.cpp's ``/props`` is open); the question then goes without it.
    """
    probe = replace(config, context_window=None)
    check_config(probe)
    try:
        provider = build_provider(probe, environ=environ)
    except AuthenticationError:
        provider = build_provider(replace(probe, api_key_env=None, api_key_keyring=None),
                                  environ=environ)
    try:
        from_server, unreachable = provider.ask_server_window()
    finally:
        provider.close()
    window, source = choose_context_window(from_server, config.model, None)
    known = (f"{config.model} is known to have {window:,} tokens." if window
             else f"{config.model} is not in the table of known models, so set the window "
                  "yourself.")
    if window and source == "server":
        sentence = f"The server says the context window is {window:,} tokens."
    elif unreachable is not None:
        sentence = f"{unreachable} {known}"
    else:
        sentence = f"The server answered without giving the window. {known}"
    return WindowDetection(window, source if window else "unknown", sentence)


_WHERE_FROM = {"server": "detected from the server", "configured": "set by you"}


def window_source_phrase(source: str, model: str = "") -> str:
    """Where a window in use came from, as people say it: "detected from the server",
    "set by you", "the published size of MODEL", or "" (a source of
    :meth:`~workbench.providers.base.HttpProvider.context_window_info`)."""
    if source == "known model":
        return f"the published size of {model}" if model else "the published size of the model"
    return _WHERE_FROM.get(source, "")  # unknown: nothing to say


def context_window_in_use(
    config: ProviderConfig, *, environ: Mapping[str, str] | None = None
) -> WindowDetection:
    """The window requests with ``config`` are measured against, and where it comes from:
    the same choice the context gauge and preflight make (the server's, else the known
    model's, else the user's value). The key is not needed to ask (see
    :func:`detect_context_window`)."""
    try:
        provider = build_provider(config, environ=environ)
    except AuthenticationError:
        provider = build_provider(replace(config, api_key_env=None, api_key_keyring=None),
                                  environ=environ)
    try:
        window, source = provider.context_window_info()
    finally:
        provider.close()
    return describe_window_in_use(config, window, source)


def describe_window_in_use(config: ProviderConfig, window: int | None,
                           source: str) -> WindowDetection:
    """The window ``config``'s client reported (:meth:`~workbench.providers.base.
    HttpProvider.context_window_info`), said for people: how much, and whether it is
    the server's, the known model's or the user's own."""
    if not window:
        return WindowDetection(None, "unknown", (
            f"No context window is known: the server gave none (or did not answer) and "
            f"{config.model} is not in the table of known models. Set it here."))
    sentence = (f"Requests are measured against {window:,} tokens, "
                f"{window_source_phrase(source, config.model)}.")
    if source != "configured" and config.context_window and config.context_window != window:
        sentence += (f" Your {config.context_window:,} is used only when the server is "
                     "silent and the model unknown.")
    return WindowDetection(window, source, sentence)


class ProviderSettings:
    """The provider configs of one database, and the clients built from them."""

    def __init__(self, db: Database, *, environ: Mapping[str, str] | None = None):
        self.db = db
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

    def update(self, name: str, /, **fields: Any) -> ProviderConfig:
        """Change fields of the config called ``name``; ``fields`` may rename it
        (``name=...``, the agents that use it follow in the same transaction), so the
        current name is positional only."""
        return self.configs.update(name, **fields)

    def remove(self, name: str) -> None:
        self.configs.remove(name)

    def build(self, name: str, **options: Any) -> HttpProvider:
        """A live client for the config called ``name``."""
        return build_provider(self.get(name), environ=self.environ, **options)

    def test(self, name: str, cancel: CancelToken | None = None) -> ConnectionReport:
        """Test the connection of the config called ``name`` (``cancel`` stops it)."""
        return test_connection(self.get(name), environ=self.environ, cancel=cancel)

    def detect_window(self, config: ProviderConfig) -> WindowDetection:
        """The context window of ``config`` (stored or not): see
        :func:`detect_context_window`."""
        return detect_context_window(config, environ=self.environ)

    def window_in_use(self, name: str) -> WindowDetection:
        """The window the config called ``name`` is used with: see
        :func:`context_window_in_use`."""
        return context_window_in_use(self.get(name), environ=self.environ)

    def choose(self, name: str | None = None, agent_provider: str | None = None) -> str:
        """The provider to use: the one named, else the agent's, else the only one.

        Raises :class:`NoProviderError` when none is configured at all, and
        :class:`NotFoundError` when the one named (or the agent's) is not configured or
        several are and none is named.
        """
        if name:
            return self.get(name).name
        configs = self.list()
        if not configs:
            raise NoProviderError(
                "No provider is configured; add one with: workbench providers add NAME "
                "--kind openai --base-url URL --model MODEL"
            )
        if agent_provider:
            try:
                return self.get(agent_provider).name
            except NotFoundError:
                # Never another server in its place, unasked: it may be a hosted one
                # where the agent's was local.
                raise NotFoundError(
                    f"The agent's provider {agent_provider!r} is not configured (any more); "
                    "choose one with --provider NAME, or give the agent one with: "
                    "workbench agents edit AGENT --provider NAME"
                ) from None
        if len(configs) == 1:
            return configs[0].name
        raise NotFoundError(
            "Several providers are configured ("
            + ", ".join(c.name for c in configs)
            + "); choose one with --provider NAME."
        )
