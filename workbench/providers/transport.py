"""An httpx transport over an httpcore connection pool of our own.

httpx's ``HTTPTransport`` builds its pool without a way to pass a network backend, and
the clients need theirs (it knows which socket each thread waits on, so a stop can
shut that socket at once). :class:`PoolTransport` is the same bridge written against
the public APIs of both libraries: ``httpx.BaseTransport`` on one side,
``httpcore.ConnectionPool(network_backend=...)`` on the other, with httpcore's
exceptions turned into httpx's of the same name so callers see httpx's error tree.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Iterator
from typing import Any

import httpcore
import httpx

__all__ = ["PoolTransport"]

# httpcore's exceptions and the httpx ones callers catch, most specific first.
_ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


@contextlib.contextmanager
def _as_httpx_errors(request: httpx.Request) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for theirs, ours in _ERRORS:
            if isinstance(exc, theirs):
                raise ours(str(exc), request=request) from exc
        raise


class _ResponseBody(httpx.SyncByteStream):
    """The body of an httpcore response, read through with httpx's errors."""

    def __init__(self, stream: Any, request: httpx.Request) -> None:
        self._stream = stream
        self._request = request

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx_errors(self._request):
            yield from self._stream

    def close(self) -> None:
        close = getattr(self._stream, "close", None)
        if callable(close):
            close()


class PoolTransport(httpx.BaseTransport):
    """Sends httpx requests through an ``httpcore.ConnectionPool`` that uses
    ``network_backend`` (HTTP/1.1, with the client's limits and TLS context)."""

    def __init__(self, network_backend: httpcore.NetworkBackend, limits: httpx.Limits,
                 ssl_context: ssl.SSLContext) -> None:
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=network_backend,
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if not isinstance(request.stream, httpx.SyncByteStream):
            raise TypeError("PoolTransport sends only synchronous request bodies.")
        sent = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx_errors(request):
            answer = self._pool.handle_request(sent)
        return httpx.Response(
            status_code=answer.status,
            headers=answer.headers,
            stream=_ResponseBody(answer.stream, request),
            extensions=answer.extensions,
        )

    def close(self) -> None:
        self._pool.close()
