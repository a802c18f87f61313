"""What the OpenAI-compatible and the Anthropic providers share.

:class:`HttpProvider` holds the settings (model, key, limits, sampling defaults), the
:class:`~workbench.providers.http.HttpClient`, the redacted request description for
preflight, ``complete`` built on ``stream`` and the context-window lookup. A subclass
says where requests go (:meth:`HttpProvider.chat_path`), which headers carry the key,
how a request becomes a body and how the reply's events are read.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from workbench.core.provider import (
    CancelToken,
    ChatRequest,
    ChatResponse,
    StreamEvent,
    collect,
)
from workbench.errors import (
    OperationCancelledError,
    ProviderError,
    ProviderTimeoutError,
    UnreachableError,
)
from workbench.providers.context import (
    choose_context_window,
    context_window_from_models,
    context_window_from_props,
)
from workbench.providers.failures import REDACTED, scrub
from workbench.providers.http import HttpClient, RetryNotice, RetryPolicy, Timeouts

# Header names whose values are secrets, whatever the provider.
_SECRET_HEADER = re.compile(r"authorization|api[-_]?key|token|secret|cookie|password", re.I)
_DISCOVERY_LIMITS = Timeouts(connect=3.0, read=5.0, total=8.0)
_DRAIN_LIMIT = 64 * 1024


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """``headers`` with the value of every secret-bearing header replaced."""
    return {k: (REDACTED if _SECRET_HEADER.search(k) else v) for k, v in headers.items()}


def server_root(base_url: str) -> str:
    """The server's root for ``/props``: the base URL without a trailing ``/v1``."""
    base = base_url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


class HttpProvider:
    """Common ground of the HTTP providers; see the subclasses for the two APIs."""

    kind: str = ""
    default_max_tokens: int | None = None

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        name: str | None = None,
        timeouts: Timeouts | None = None,
        retry: RetryPolicy | None = None,
        extra_headers: Mapping[str, str] | None = None,
        context_window: int | None = None,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
        key_hint: str = "",
        on_retry: Callable[[RetryNotice], None] | None = None,
        sleep: Callable[[float, CancelToken], None] | None = None,
    ) -> None:
        self.base_url = self.normalize_base_url(base_url)
        self.model = model
        self.name = name
        api_key = api_key or None
        # The key is kept only inside the HTTP client's headers, which no repr shows.
        self.has_key = api_key is not None
        self.max_output_tokens = max_output_tokens
        self.temperature = temperature
        self.extra_headers = dict(extra_headers or {})
        self._configured_window = context_window
        self._window: tuple[int | None, str] | None = None
        self._window_lock = threading.Lock()
        netloc = urlsplit(self.base_url).netloc or self.base_url
        where = f"The provider {name!r} ({netloc})" if name else f"The server at {netloc}"
        headers = {"content-type": "application/json", "accept": "application/json"}
        headers.update(self.extra_headers)
        headers.update(self.auth_headers(api_key))
        secrets = tuple(s for s in (api_key,) if s) + tuple(
            v for k, v in self.extra_headers.items() if _SECRET_HEADER.search(k) and v
        )
        self._http = HttpClient(
            base_url=self.base_url,
            headers=headers,
            secrets=secrets,
            timeouts=timeouts or Timeouts(),
            retry=retry or RetryPolicy(),
            where=where,
            model=model,
            provider=name,
            key_hint=key_hint,
            key_sent=self.has_key,
            on_retry=on_retry,
            sleep=sleep,
        )

    # -- to be provided by the API's class ------------------------------------------------

    @staticmethod
    def normalize_base_url(base_url: str) -> str:
        return base_url.strip().rstrip("/")

    def chat_path(self) -> str:
        raise NotImplementedError

    def models_path(self) -> str:
        raise NotImplementedError

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        raise NotImplementedError

    def build_payload(self, request: ChatRequest) -> dict[str, Any]:
        raise NotImplementedError

    def _events(self, chunks: Iterator[bytes], cancel: CancelToken) -> Iterator[StreamEvent]:
        raise NotImplementedError

    def _parse_reply(self, data: Any) -> ChatResponse:
        raise NotImplementedError

    # -- the provider protocol -------------------------------------------------------------

    @property
    def timeouts(self) -> Timeouts:
        return self._http.timeouts

    def describe_request(self, request: ChatRequest) -> dict[str, Any]:
        """Method, URL, headers (secrets redacted) and the exact JSON body."""
        return {
            "method": "POST",
            "url": self._http.url(self.chat_path()),
            "headers": redact_headers(self._http.headers),
            "json": self.build_payload(request),
        }

    def stream(
        self, request: ChatRequest, cancel: CancelToken | None = None
    ) -> Iterator[StreamEvent]:
        """Send ``request`` streaming and yield its events as they arrive.

        Stopping (``cancel``) closes the connection and raises
        :class:`~workbench.errors.OperationCancelledError` from the iterator.
        """
        cancel = cancel or CancelToken()
        payload = self.build_payload(request)
        payload["stream"] = True
        self._stream_options(payload)
        with self._http.open_stream("POST", self.chat_path(), payload, cancel=cancel) as reply:
            yield from self._events(reply.iter_bytes(), cancel)

    def _stream_options(self, payload: dict[str, Any]) -> None:
        """Add what a streamed call needs beyond the plain body (none by default)."""

    def complete(self, request: ChatRequest, cancel: CancelToken | None = None) -> ChatResponse:
        """The whole reply; streamed underneath when ``request.stream`` is true.

        A stop while streaming returns what had arrived with ``stopped=True``; a stop
        of a non-streamed call raises :class:`~workbench.errors.OperationCancelledError`.
        """
        cancel = cancel or CancelToken()
        if not request.stream:
            payload = self.build_payload(request)
            payload["stream"] = False
            data = self._http.request_json("POST", self.chat_path(), payload, cancel=cancel)
            return self._parse_reply(data)
        events: list[StreamEvent] = []
        try:
            for event in self.stream(request, cancel):
                events.append(event)
        except OperationCancelledError:
            response = collect(events)
            response.stopped = True
            return response
        return collect(events)

    def context_window(self) -> int | None:
        """The window from the server if it says, else the known-model table, else the
        configured value (cached after the first call)."""
        return self.context_window_info()[0]

    def context_window_info(self) -> tuple[int | None, str]:
        """``(tokens, source)`` with source ``server``, ``known model``, ``configured``."""
        with self._window_lock:
            if self._window is None:
                self._window = choose_context_window(
                    self.server_context_window(), self.model, self._configured_window
                )
            return self._window

    def server_context_window(self) -> int | None:
        """Ask the server (``/props``, then the models list); ``None`` if it does not say."""
        return self.ask_server_window()[0]

    def ask_server_window(self) -> tuple[int | None, ProviderError | None]:
        """Ask the server for the context window: ``(tokens, None)`` when it says,
        ``(None, None)`` when it answers without saying, and ``(None, error)`` when it
        cannot be reached (refused, unknown host, no answer in time)."""
        for path, read in (
            (server_root(self.base_url) + "/props", context_window_from_props),
            (self.models_path(), lambda data: context_window_from_models(data, self.model)),
        ):
            try:
                data = self._http.request_json("GET", path, retries=False,
                                               timeouts=_DISCOVERY_LIMITS)
            except (UnreachableError, ProviderTimeoutError) as exc:
                return None, exc  # the next path is on the same server
            except ProviderError:
                continue
            found = read(data)
            if found:
                return found, None
        return None, None

    def list_models(self, cancel: CancelToken | None = None) -> list[str]:
        """The model ids the server lists (raises the typed error when it cannot)."""
        data = self._http.request_json("GET", self.models_path(), cancel=cancel)
        entries = data.get("data") if isinstance(data, dict) else None
        return [str(e.get("id")) for e in entries or [] if isinstance(e, dict) and e.get("id")]

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> HttpProvider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(base_url={self.base_url!r}, model={self.model!r}, "
                f"api_key={'[redacted]' if self.has_key else None})")

    # -- helpers for subclasses -------------------------------------------------------------

    def _max_tokens(self, request: ChatRequest) -> int | None:
        return request.max_tokens or self.max_output_tokens or self.default_max_tokens

    def _temperature(self, request: ChatRequest) -> float | None:
        return request.temperature if request.temperature is not None else self.temperature

    def _stream_error(self, body: Any, status: int = 500) -> ProviderError:
        """The typed error for an error object that arrived inside a stream."""
        from workbench.providers.failures import error_from_reply

        return error_from_reply(
            status, body, {}, where=self._http.where, model=self.model, provider=self.name,
            secrets=self._http.secrets, key_sent=self._http.key_sent,
            key_hint=self._http.key_hint, in_stream=True,
        )

    @staticmethod
    def _drain(chunks: Iterator[bytes]) -> None:
        """Read what follows the end event, so the connection can go back to the pool."""
        drained = 0
        try:
            for chunk in chunks:
                drained += len(chunk)
                if drained > _DRAIN_LIMIT:
                    break
        except (ProviderError, OperationCancelledError):
            return  # the reply is complete; a failure or a stop after its end changes nothing

    def _malformed(self, data: str) -> ProviderError:
        from workbench.errors import ServerError

        shown = scrub(data[:120], self._http.secrets)
        return ServerError(
            f"{self._http.where} sent a stream event that is not valid JSON: {shown!r}.",
            provider=self.name,
        )


def tool_call_json(call: Mapping[str, Any]) -> dict[str, Any]:
    """A stored tool call in the OpenAI shape, arguments as a JSON string."""
    function = dict(call.get("function") or {})
    arguments = function.get("arguments", "")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {
        "id": str(call.get("id") or ""),
        "type": "function",
        "function": {"name": str(function.get("name") or ""), "arguments": arguments or "{}"},
    }


__all__ = ["HttpProvider", "RetryNotice", "redact_headers", "server_root", "tool_call_json"]
