"""The HTTP layer under both providers: timeouts, retries, typed errors, prompt stopping.

:class:`HttpClient` wraps one ``httpx.Client`` (a connection pool kept alive between
calls) for one server. It offers a JSON call (:meth:`HttpClient.request_json`) and a
streaming call (:meth:`HttpClient.open_stream`, whose :class:`StreamReply` yields the body's
bytes as they arrive).

**Retries.** A reply of 408, 409, 429 or 5xx, a refused connection, or a connection the
server dropped before answering is retried with exponential backoff and jitter, honouring
``Retry-After`` (and OpenAI's ``retry-after-ms``), at most :attr:`RetryPolicy.attempts`
times and never past the total time limit. Nothing is retried once part of a streamed
reply has been handed to the caller.

**Timeouts.** ``connect`` bounds opening the connection, ``read`` the silence between two
pieces of the reply (a stalled stream), ``total`` the whole call including retries.

**Stopping.** A :class:`~workbench.core.provider.CancelToken` set from any thread shuts
the socket the call is blocked on (before the reply's headers too), so the call ends at
once with :class:`~workbench.errors.OperationCancelledError`. The connection pool's sockets are
created through a small tracking network backend for that reason.

Error messages name the server and never contain the API key: every sentence passes
through :func:`~workbench.providers.failures.scrub`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import random
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpcore
import httpx

from workbench.core.provider import CancelToken
from workbench.errors import (
    OperationCancelledError,
    ProviderError,
    ProviderTimeoutError,
    ServerError,
    StreamInterruptedError,
    UnreachableError,
    WorkbenchError,
)
from workbench.providers.failures import error_from_reply, retry_after_seconds, scrub
from workbench.providers.transport import PoolTransport

log = logging.getLogger("workbench.providers")
_T = TypeVar("_T")

RETRY_STATUSES = frozenset({408, 409, 429})
_ERROR_BODY_LIMIT = 64 * 1024


@dataclass(frozen=True)
class Timeouts:
    """Time limits in seconds: opening a connection, silence while reading, whole call."""

    connect: float = 10.0
    read: float = 300.0
    total: float | None = 900.0

    def to_json(self) -> dict[str, float | None]:
        return {"connect": self.connect, "read": self.read, "total": self.total}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Timeouts:
        """Read the stored form; missing or empty values keep the defaults."""
        data = data or {}
        default = cls()
        total = data.get("total", default.total)
        return cls(
            connect=float(data.get("connect") or default.connect),
            read=float(data.get("read") or default.read),
            total=None if total is None else float(total),
        )


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry a call that may succeed later.

    ``attempts`` counts every try (1 = no retry). The n-th wait is a random value between
    half and all of ``base_delay * 2**(n-1)``, capped at ``max_delay``; a server's
    ``Retry-After`` replaces it, unless it asks for more than ``max_retry_after``, in which
    case the error is raised at once (with the server's hint on it).
    """

    attempts: int = 4
    base_delay: float = 0.5
    max_delay: float = 20.0
    max_retry_after: float = 60.0

    def backoff(self, retry_number: int, rng: random.Random | None = None) -> float:
        """The wait before retry number ``retry_number`` (1-based), with jitter."""
        ceiling = min(self.max_delay, self.base_delay * (2 ** (retry_number - 1)))
        return (rng or random).uniform(ceiling / 2, ceiling)


@dataclass(frozen=True)
class RetryNotice:
    """Told to ``on_retry`` before each wait: why, how long, which attempt comes next."""

    error: ProviderError
    delay: float
    attempt: int  # the attempt about to be made (2 = first retry)
    attempts: int


# -- prompt stopping: a network backend that knows which socket each thread waits on ----------


class _TrackedStream(httpcore.NetworkStream):
    """A network stream that tells its backend which thread last used it."""

    def __init__(self, inner: httpcore.NetworkStream, backend: _TrackingBackend):
        self._inner = inner
        self._backend = backend

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._backend.active[threading.get_ident()] = self
        return self._inner.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._backend.active[threading.get_ident()] = self
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _TrackedStream(
            self._inner.start_tls(ssl_context, server_hostname, timeout), self._backend
        )

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)

    def abort(self) -> None:
        """Shut the socket down so that a read blocked on it in another thread returns."""
        sock = self._inner.get_extra_info("socket")
        if sock is None:
            return
        with contextlib.suppress(OSError):
            # The plain socket method: SSLSocket.shutdown would drop its SSL object under
            # the reading thread's feet.
            socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _TrackingBackend(httpcore.NetworkBackend):
    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()
        self.active: dict[int, _TrackedStream] = {}

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        stream = _TrackedStream(
            self._inner.connect_tcp(host, port, timeout, local_address, socket_options), self
        )
        self.active[threading.get_ident()] = stream
        return stream

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None
                            ) -> httpcore.NetworkStream:
        stream = _TrackedStream(
            self._inner.connect_unix_socket(path, timeout, socket_options), self
        )
        self.active[threading.get_ident()] = stream
        return stream

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    # Loading the CA bundle costs tens of milliseconds; one context serves every client.
    return httpx.create_ssl_context()


class _CallGuard:
    """Links one call to its cancel token: on cancel, abort whatever the call waits on."""

    def __init__(self, backend: _TrackingBackend) -> None:
        self._backend = backend
        self._thread = threading.get_ident()
        self.response: httpx.Response | None = None
        self.finished = False

    def finish(self) -> None:
        """The call is over: a later cancel must not touch the (pooled) connection."""
        self.finished = True
        self._backend.active.pop(self._thread, None)

    def abort(self) -> None:
        if self.finished:
            return
        stream: Any = None
        if self.response is not None:
            stream = self.response.extensions.get("network_stream")
        if stream is None:
            stream = self._backend.active.get(self._thread)
        if isinstance(stream, _TrackedStream):
            stream.abort()
        elif stream is not None:
            sock = stream.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _Retryable(WorkbenchError):
    """Internal: a failure that a retry may cure, with the server's wait hint if any.

    ``immediate`` marks a kept-alive connection the server had closed meanwhile: the
    first retry of that goes out at once, on a fresh connection.
    """

    def __init__(self, error: ProviderError, wait: float | None = None, *,
                 immediate: bool = False):
        super().__init__(str(error))
        self.error = error
        self.wait = wait
        self.immediate = immediate


def _cancellable_sleep(seconds: float, cancel: CancelToken) -> None:
    woken = threading.Event()
    cancel.on_cancel(woken.set)
    woken.wait(seconds)
    cancel.raise_if_cancelled()


# -- the client -----------------------------------------------------------------------------


@dataclass
class HttpClient:
    """HTTP calls to one server, with retries, time limits, stopping and typed errors.

    ``base_url`` is the prefix paths are joined to. ``headers`` go with every call (the
    key among them); ``secrets`` are scrubbed from every error sentence. ``where`` names
    the server in sentences; ``model`` and ``key_hint`` make them specific.
    ``sleep(seconds, cancel)`` replaces the cancellable wait between retries (tests).
    """

    base_url: str
    # Never in a repr: the key travels among the headers.
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    secrets: tuple[str, ...] = field(default=(), repr=False)
    timeouts: Timeouts = field(default_factory=Timeouts)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    where: str = ""
    model: str = ""
    provider: str | None = None
    key_hint: str = ""
    key_sent: bool = True
    on_retry: Callable[[RetryNotice], None] | None = None
    sleep: Callable[[float, CancelToken], None] | None = None

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")
        if not self.where:
            parts = urlsplit(self.base_url)
            self.where = f"The server at {parts.netloc or self.base_url}"
        self._backend = _TrackingBackend()
        limits = httpx.Limits(max_connections=16, max_keepalive_connections=8)
        self._client = httpx.Client(
            transport=PoolTransport(self._backend, limits, _ssl_context()),
            headers=dict(self.headers),
            follow_redirects=True,
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def url(self, path: str) -> str:
        """``path`` joined to the base URL (absolute URLs pass through)."""
        if path.startswith(("http://", "https://")):
            return path
        return f"{self.base_url}/{path.lstrip('/')}"

    # -- public calls ---------------------------------------------------------------------

    def request_json(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        cancel: CancelToken | None = None,
        retries: bool = True,
        timeouts: Timeouts | None = None,
    ) -> Any:
        """Send ``body`` as JSON and return the parsed JSON reply (retried as a whole)."""
        cancel = cancel or CancelToken()
        limits = timeouts or self.timeouts
        deadline = _deadline(limits)

        def attempt() -> Any:
            guard, response = self._send(method, path, body, cancel, deadline, limits)
            try:
                try:
                    raw = response.read()
                except httpx.TimeoutException as exc:
                    raise self._timeout_error(exc, limits, deadline) from exc
                except httpx.TransportError as exc:
                    if cancel.cancelled:
                        raise OperationCancelledError("The request was stopped.") from exc
                    # Nothing was handed to the caller yet, so the whole call may be retried.
                    raise _Retryable(ServerError(
                        f"{self.where} closed the connection before its reply was complete "
                        f"({self._scrub(str(exc)) or type(exc).__name__}).",
                        provider=self.provider,
                    )) from exc
            finally:
                guard.finish()
                response.close()
            if cancel.cancelled:
                raise OperationCancelledError("The request was stopped.")
            try:
                return json.loads(raw) if raw else None
            except ValueError as exc:
                raise ServerError(
                    f"{self.where} answered with something that is not JSON: "
                    f"{self._scrub(raw[:200].decode('utf-8', 'replace'))!r}.",
                    status=response.status_code,
                    provider=self.provider,
                ) from exc

        return self._with_retries(attempt, cancel, deadline, retries=retries)

    def open_stream(
        self, method: str, path: str, body: Any = None, *, cancel: CancelToken | None = None
    ) -> StreamReply:
        """Send ``body`` and return the open reply once its headers say success.

        Failures before that are retried; the caller reads with :meth:`StreamReply.iter_bytes`
        and must close the reply (it is a context manager).
        """
        cancel = cancel or CancelToken()
        deadline = _deadline(self.timeouts)

        def attempt() -> StreamReply:
            guard, response = self._send(method, path, body, cancel, deadline, self.timeouts)
            return StreamReply(self, response, guard, cancel, deadline)

        return self._with_retries(attempt, cancel, deadline, retries=True)

    # -- internals ------------------------------------------------------------------------

    def _scrub(self, text: str) -> str:
        return scrub(text, self.secrets)

    def _with_retries(self, attempt: Callable[[], _T], cancel: CancelToken,
                      deadline: float | None, *, retries: bool) -> _T:
        attempts = max(1, self.retry.attempts if retries else 1)
        number = 1
        while True:
            cancel.raise_if_cancelled()
            try:
                return attempt()
            except _Retryable as failure:
                error = failure.error
                delay = self._delay_for(failure, number)
                if (
                    number >= attempts
                    or delay is None
                    or (deadline is not None and time.monotonic() + delay > deadline)
                ):
                    raise error from failure.__cause__
                at_once = failure.immediate and delay == 0.0
            number += 1
            if at_once:
                log.debug("%s; retrying at once on a new connection", error)
                continue
            log.info("%s; retrying in %.2f s (attempt %d of %d)", error, delay, number, attempts)
            if self.on_retry is not None:
                self.on_retry(RetryNotice(error, delay, number, attempts))
            (self.sleep or _cancellable_sleep)(delay, cancel)

    def _delay_for(self, failure: _Retryable, retry_number: int) -> float | None:
        if failure.immediate and retry_number == 1:
            return 0.0
        if failure.wait is not None:
            return failure.wait if failure.wait <= self.retry.max_retry_after else None
        return self.retry.backoff(retry_number)

    def _send(self, method: str, path: str, body: Any, cancel: CancelToken,
              deadline: float | None, limits: Timeouts) -> tuple[_CallGuard, httpx.Response]:
        """One attempt: returns the response once its status is a success."""
        guard = _CallGuard(self._backend)
        cancel.on_cancel(guard.abort)
        read = limits.read
        if deadline is not None:
            read = max(0.01, min(read, deadline - time.monotonic()))
        timeout = httpx.Timeout(connect=limits.connect, read=read, write=read, pool=limits.connect)
        try:
            request = self._client.build_request(
                method, self.url(path), json=body if body is not None else None, timeout=timeout
            )
            response = self._client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            guard.finish()
            if cancel.cancelled:
                raise OperationCancelledError("The request was stopped.") from exc
            timed_out = self._timeout_error(exc, limits, deadline)
            if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
                raise _Retryable(timed_out) from exc
            # A server that went silent is not retried: it would only double the wait.
            raise timed_out from exc
        except httpx.TransportError as exc:
            guard.finish()
            if cancel.cancelled:
                raise OperationCancelledError("The request was stopped.") from exc
            failed = self._connection_error(exc)
            if failed.retryable:
                # A closed keep-alive connection shows as a protocol error before headers.
                stale = not isinstance(exc, httpx.ConnectError)
                raise _Retryable(failed, immediate=stale) from exc
            raise failed from exc
        except BaseException:
            guard.finish()
            raise
        guard.response = response
        if cancel.cancelled:
            guard.finish()
            response.close()
            raise OperationCancelledError("The request was stopped.")
        if response.status_code < 400:
            return guard, response
        try:
            raw = _read_limited(response)
        except httpx.HTTPError:
            raw = b""
        finally:
            guard.finish()
            response.close()
        error = error_from_reply(
            response.status_code,
            raw,
            response.headers,
            where=self.where,
            model=self.model,
            provider=self.provider,
            secrets=self.secrets,
            key_sent=self.key_sent,
            key_hint=self.key_hint,
        )
        status = response.status_code
        if error.retryable and (status in RETRY_STATUSES or status >= 500):
            raise _Retryable(error, retry_after_seconds(response.headers))
        raise error

    def _timeout_error(self, exc: httpx.TimeoutException, limits: Timeouts,
                       deadline: float | None) -> ProviderTimeoutError:
        if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
            return ProviderTimeoutError(
                f"{self.where} did not accept a connection within {limits.connect:g} s.",
                provider=self.provider,
            )
        if deadline is not None and time.monotonic() >= deadline - 0.01 and limits.total:
            error = ProviderTimeoutError(
                f"{self.where} did not finish within the total limit of {limits.total:g} s.",
                provider=self.provider,
            )
        else:
            error = ProviderTimeoutError(
                f"{self.where} sent nothing for {limits.read:g} s, so the request was given up.",
                provider=self.provider,
            )
        return error

    def _connection_error(self, exc: httpx.TransportError) -> ProviderError:
        detail = plain_os_error(self._scrub(str(exc))) or type(exc).__name__
        if isinstance(exc, httpx.ConnectError):
            return UnreachableError(
                f"{self.where} could not be reached ({detail}). "
                "Check that it is running and that the base URL is right.",
                provider=self.provider,
            )
        if isinstance(exc, httpx.UnsupportedProtocol | httpx.LocalProtocolError):
            error: ProviderError = ProviderError(
                f"The request to {self.where} could not be sent ({detail}). "
                "Check the base URL.",
                provider=self.provider,
            )
            return error
        return ServerError(
            f"{self.where} closed the connection without answering ({detail}).",
            provider=self.provider,
        )


_OS_ERRORS = {
    "111": "connection refused: nothing is listening at that address",
    "61": "connection refused: nothing is listening at that address",  # macOS
    "10061": "connection refused: nothing is listening at that address",  # Windows
    "-2": "the host name could not be found",
    "-3": "the host name could not be looked up just now",
    "-5": "the host name could not be found",
    "8": "the host name could not be found",  # macOS
    "11001": "the host name could not be found",  # Windows
    "113": "there is no route to that host",
    "101": "the network cannot be reached",
    "104": "the server reset the connection",
}
_ERRNO = re.compile(r"\[Errno (-?\d+)\]\s*([^\]\[]*)")


def plain_os_error(detail: str) -> str:
    """An operating system's error in words: ``[Errno 111] Connection refused`` becomes
    "connection refused: nothing is listening at that address"; an errno not known here
    loses its number and keeps its text."""
    found = _ERRNO.search(detail)
    if found is None:
        if detail == "All connection attempts failed":
            return "no connection could be made"
        return detail
    number, text = found.group(1), found.group(2).strip().rstrip(".")
    words = _OS_ERRORS.get(number) or (text[:1].lower() + text[1:]) or "an operating system error"
    return detail[:found.start()] + words + detail[found.end():].rstrip()


def _deadline(limits: Timeouts) -> float | None:
    return None if not limits.total else time.monotonic() + limits.total


def _read_limited(response: httpx.Response) -> bytes:
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= _ERROR_BODY_LIMIT:
            break
    return b"".join(chunks)


class StreamReply:
    """An open streamed reply: iterate its bytes, then close it (or use ``with``)."""

    def __init__(self, client: HttpClient, response: httpx.Response, guard: _CallGuard,
                 cancel: CancelToken, deadline: float | None):
        self._client = client
        self.response = response
        self._guard = guard
        self._cancel = cancel
        self._deadline = deadline

    @property
    def status(self) -> int:
        return self.response.status_code

    @property
    def headers(self) -> httpx.Headers:
        return self.response.headers

    def iter_bytes(self) -> Iterator[bytes]:
        """The body's bytes as they arrive; errors come out typed.

        A stop raises :class:`OperationCancelledError`, silence past the read limit
        :class:`ProviderTimeoutError`, a dropped connection :class:`StreamInterruptedError`.
        """
        cancel = self._cancel
        deadline = self._deadline
        client = self._client
        try:
            for chunk in self.response.iter_bytes():
                if cancel.cancelled:
                    raise OperationCancelledError("The request was stopped.")
                if deadline is not None and time.monotonic() > deadline:
                    raise ProviderTimeoutError(
                        f"{client.where} did not finish within the total limit of "
                        f"{client.timeouts.total:g} s.",
                        provider=client.provider,
                    )
                yield chunk
        except httpx.TimeoutException as exc:
            if cancel.cancelled:
                raise OperationCancelledError("The request was stopped.") from exc
            raise client._timeout_error(exc, client.timeouts, deadline) from exc
        except httpx.TransportError as exc:
            if cancel.cancelled:
                raise OperationCancelledError("The request was stopped.") from exc
            raise StreamInterruptedError(
                f"The connection to {client.where} broke while the reply was streaming "
                f"({client._scrub(str(exc)) or type(exc).__name__}).",
                provider=client.provider,
            ) from exc
        if cancel.cancelled:
            raise OperationCancelledError("The request was stopped.")

    def close(self) -> None:
        self._guard.finish()
        self.response.close()

    def __enter__(self) -> StreamReply:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
