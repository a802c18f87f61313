"""A protocol-faithful model server on 127.0.0.1 for the provider tests (stdlib only).

It speaks both APIs the workbench uses, over real HTTP/1.1 with keep-alive and chunked
streaming:

- OpenAI chat completions: ``POST /v1/chat/completions`` (JSON or SSE chunks ending in
  ``data: [DONE]``, a usage chunk when ``stream_options.include_usage``), ``GET /v1/models``
  (with llama.cpp's ``meta.n_ctx``) and llama.cpp's ``GET /props``;
- Anthropic messages: ``POST /v1/messages`` (JSON or the event stream ``message_start``,
  ``ping``, ``content_block_start`` / ``content_block_delta`` (``text_delta``,
  ``input_json_delta``) / ``content_block_stop``, ``message_delta``, ``message_stop``);
  with :attr:`ProtocolServer.anthropic_window_check`, like Anthropic, a 400 when the
  input and ``max_tokens`` together exceed the window (``n_ctx``).

The reply is :attr:`ProtocolServer.reply_words` (one word per delta, cut at
``max_tokens``), plus :attr:`ProtocolServer.tool_call` when set. Usage counts the words of
the request and of the reply.

Faults are scripted: :meth:`ProtocolServer.script` queues :class:`Fault` objects, and each
chat request takes the next one (requests after the queue runs dry are served normally).
A request may also name one in an ``X-Test-Fault`` header (``429``, ``500``, ``drop``…).
Every request is recorded (:attr:`ProtocolServer.requests`), and a client that hangs up
during a stall is noticed (:attr:`ProtocolServer.hangups`).
"""

from __future__ import annotations

import json
import select
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OPENAI_CHAT = "/v1/chat/completions"
ANTHROPIC_MESSAGES = "/v1/messages"


@dataclass
class Fault:
    """One injected misbehaviour.

    ``kind``: ``status`` (answer ``status`` with ``body``/``headers`` instead of a reply),
    ``stall`` (stream ``after`` deltas, then send nothing until released or hung up on),
    ``stall_headers`` (send nothing at all until released or hung up on), ``pause``
    (stream ``after`` deltas, wait until released, then finish the reply), ``hangup``
    (close the connection without answering), ``truncate`` (end the body cleanly after
    ``after`` deltas, without the API's end event), ``drop`` (stream
    ``after`` deltas, then cut the connection), ``malformed`` (a ``data:`` line of broken
    JSON after ``after`` deltas), ``junk`` (a line that is no SSE field, which clients must
    ignore), ``error_event`` (an error object inside the stream after ``after`` deltas).
    """

    kind: str
    status: int = 500
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    after: int = 2


@dataclass
class RecordedRequest:
    """A request as the server saw it (header names in lower case)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes = b""


def openai_error(message: str, type_: str, code: str | int | None = None,
                 **extra: Any) -> dict[str, Any]:
    """An error body the way OpenAI (and llama.cpp) write it."""
    return {"error": {"message": message, "type": type_, "code": code, **extra}}


def anthropic_error(message: str, type_: str) -> dict[str, Any]:
    """An error body the way Anthropic writes it."""
    return {"type": "error", "error": {"type": type_, "message": message}}


# Named faults for the X-Test-Fault header.
HEADER_FAULTS: dict[str, Fault] = {
    "429": Fault("status", 429, openai_error("Rate limit reached", "rate_limit_error"),
                 {"Retry-After": "1"}),
    "500": Fault("status", 500, openai_error("Internal failure", "server_error")),
    "401": Fault("status", 401, openai_error("Invalid key", "authentication_error")),
    "stall": Fault("stall"),
    "drop": Fault("drop"),
    "malformed": Fault("malformed"),
    "junk": Fault("junk"),
}


def _lower(headers: Any) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


def _words(body: Any) -> int:
    """Rough 'tokens' of a request: words in every text it carries."""
    count = 0

    def walk(value: Any) -> None:
        nonlocal count
        if isinstance(value, str):
            count += len(value.split())
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, dict):
            for key in ("content", "text", "system"):
                if key in value:
                    walk(value[key])

    if isinstance(body, dict):
        walk(body.get("messages"))
        walk(body.get("system"))
    return count


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on (for "unreachable" tests)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's name
        return  # keep test output clean

    # -- plumbing ---------------------------------------------------------------------------

    def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")

    def _wait_released(self) -> None:
        """Send nothing until the test releases the stall, or the client hangs up.
        The connection is closed after it (a ``pause`` goes on with the reply first):
        a client still waiting for the rest of an answer learns it will not come."""
        owner = self.server.owner
        owner.stalling.set()
        self.close_connection = True
        while not owner.release.is_set():
            ready, _, _ = select.select([self.connection], [], [], 0.02)
            if ready:
                try:
                    data = self.connection.recv(1024)
                except OSError:
                    data = b""
                if not data:
                    owner.hangups.append(self.path)
                    owner.hung_up.set()
                    self.close_connection = True
                    return

    def _drop(self) -> None:
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True

    # -- requests ---------------------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 - stdlib's name
        owner = self.server.owner
        owner.requests.append(RecordedRequest("GET", self.path, _lower(self.headers), None))
        if self.path == "/v1/models":
            entry: dict[str, Any] = {"id": owner.model, "object": "model", "owned_by": "test"}
            if owner.n_ctx is not None:
                entry["meta"] = {"n_ctx": owner.n_ctx, "n_ctx_train": owner.n_ctx * 8}
            self._json(200, {"object": "list", "data": [entry]})
        elif self.path == "/props" and owner.serve_props:
            self._json(200, {"default_generation_settings": {"n_ctx": owner.n_ctx},
                             "total_slots": 1})
        elif self.path == "/health":
            self._json(200, {"status": "ok"})
        else:
            self._json(404, openai_error("File Not Found", "not_found_error", 404))

    def do_POST(self) -> None:  # noqa: N802 - stdlib's name
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        owner.requests.append(
            RecordedRequest("POST", self.path, _lower(self.headers), body, raw)
        )
        anthropic = self.path == ANTHROPIC_MESSAGES
        if self.path not in (OPENAI_CHAT, ANTHROPIC_MESSAGES):
            self._json(404, openai_error("File Not Found", "not_found_error", 404))
            return
        if not isinstance(body, dict):
            self._json(400, openai_error("Failed to parse the request body as JSON",
                                         "invalid_request_error"))
            return
        if owner.api_key is not None:
            sent = (self.headers.get("x-api-key") if anthropic
                    else (self.headers.get("Authorization") or "").removeprefix("Bearer "))
            if sent != owner.api_key:
                # Like OpenAI, quote the key that was sent: the client must scrub it.
                message = f"Incorrect API key provided: {sent}."
                self._json(401, anthropic_error(message, "authentication_error") if anthropic
                           else openai_error(message, "invalid_request_error", "invalid_api_key"))
                return
        fault = owner.next_fault(self.headers.get("X-Test-Fault"))
        if fault is not None and fault.kind == "status":
            self._json(fault.status, fault.body or {}, fault.headers)
            return
        if fault is not None and fault.kind == "stall_headers":
            self._wait_released()
            return
        if fault is not None and fault.kind == "hangup":
            self._drop()
            return
        words = owner.reply_words
        limit = body.get("max_tokens")
        if anthropic and owner.anthropic_window_check and owner.n_ctx \
                and isinstance(limit, int) and _words(body) + limit > owner.n_ctx:
            # Anthropic refuses a request whose input and max_tokens together exceed
            # the window (the input counted in words here: fewer than its tokens).
            self._json(400, anthropic_error(
                f"input length and `max_tokens` exceed context limit: {_words(body)} + "
                f"{limit} > {owner.n_ctx}, decrease input length or `max_tokens` and try "
                "again", "invalid_request_error"))
            return
        if isinstance(limit, int) and limit > 0:
            words = words[:limit]
        usage = (_words(body), len(words))
        if not body.get("stream"):
            reply = (self._anthropic_json(body, words, usage) if anthropic
                     else self._openai_json(body, words, usage))
            self._json(200, reply)
            return
        self._start_stream()
        if anthropic:
            self._anthropic_stream(body, words, usage, fault)
        else:
            self._openai_stream(body, words, usage, fault)

    # -- OpenAI -----------------------------------------------------------------------------

    def _openai_json(self, body: Any, words: list[str], usage: tuple[int, int]) -> Any:
        owner = self.server.owner
        message: dict[str, Any] = {"role": "assistant", "content": "".join(words)}
        finish = "length" if len(words) < len(owner.reply_words) else "stop"
        if owner.tool_call is not None:
            message["tool_calls"] = [{
                "id": "call_7", "type": "function",
                "function": {"name": owner.tool_call["name"],
                             "arguments": json.dumps(owner.tool_call["arguments"])},
            }]
            finish = "tool_calls"
        return {
            "id": "chatcmpl-1", "object": "chat.completion", "model": owner.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                      "total_tokens": sum(usage)},
        }

    def _openai_stream(self, body: Any, words: list[str], usage: tuple[int, int],
                       fault: Fault | None) -> None:
        owner = self.server.owner

        def event(choices: list[Any], **extra: Any) -> bytes:
            chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk",
                     "model": owner.model, "choices": choices, **extra}
            return b"data: " + json.dumps(chunk).encode() + b"\n\n"

        self._chunk(event([{"index": 0, "delta": {"role": "assistant", "content": ""},
                            "finish_reason": None}]))
        batch: list[bytes] = []
        for n, word in enumerate(words):
            if fault is not None and n == fault.after and self._stream_fault(fault, False):
                return
            batch.append(event([{"index": 0, "delta": {"content": word},
                                 "finish_reason": None}]))
            if len(batch) >= owner.batch:
                self._chunk(b"".join(batch))
                batch = []
        self._chunk(b"".join(batch))
        if fault is not None and fault.after >= len(words) and self._stream_fault(fault, False):
            return
        finish = "length" if len(words) < len(owner.reply_words) else "stop"
        if owner.tool_call is not None:
            arguments = json.dumps(owner.tool_call["arguments"])
            half = len(arguments) // 2
            self._chunk(event([{"index": 0, "delta": {"tool_calls": [{
                "index": 0, "id": "call_7", "type": "function",
                "function": {"name": owner.tool_call["name"], "arguments": arguments[:half]}}]},
                "finish_reason": None}]))
            self._chunk(event([{"index": 0, "delta": {"tool_calls": [{
                "index": 0, "function": {"arguments": arguments[half:]}}]},
                "finish_reason": None}]))
            finish = "tool_calls"
        self._chunk(event([{"index": 0, "delta": {}, "finish_reason": finish}]))
        if (body.get("stream_options") or {}).get("include_usage"):
            self._chunk(event([], usage={"prompt_tokens": usage[0],
                                         "completion_tokens": usage[1],
                                         "total_tokens": sum(usage)}))
        self._chunk(b"data: [DONE]\n\n")
        self._end_stream()

    # -- Anthropic --------------------------------------------------------------------------

    def _anthropic_json(self, body: Any, words: list[str], usage: tuple[int, int]) -> Any:
        owner = self.server.owner
        content: list[dict[str, Any]] = [{"type": "text", "text": "".join(words)}]
        stop = "max_tokens" if len(words) < len(owner.reply_words) else "end_turn"
        if owner.tool_call is not None:
            content.append({"type": "tool_use", "id": "toolu_7", "name": owner.tool_call["name"],
                            "input": owner.tool_call["arguments"]})
            stop = "tool_use"
        return {
            "id": "msg_1", "type": "message", "role": "assistant", "model": owner.model,
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
        }

    def _anthropic_stream(self, body: Any, words: list[str], usage: tuple[int, int],
                          fault: Fault | None) -> None:
        owner = self.server.owner

        def event(kind: str, data: dict[str, Any]) -> bytes:
            return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()

        self._chunk(event("message_start", {"message": {
            "id": "msg_1", "type": "message", "role": "assistant", "content": [],
            "model": owner.model, "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": 1}}}))
        self._chunk(b": keep-alive comment\n\n" + event("ping", {}))
        self._chunk(event("content_block_start",
                          {"index": 0, "content_block": {"type": "text", "text": ""}}))
        batch: list[bytes] = []
        for n, word in enumerate(words):
            if fault is not None and n == fault.after and self._stream_fault(fault, True):
                return
            batch.append(event("content_block_delta",
                               {"index": 0, "delta": {"type": "text_delta", "text": word}}))
            if len(batch) >= owner.batch:
                self._chunk(b"".join(batch))
                batch = []
        self._chunk(b"".join(batch))
        if fault is not None and fault.after >= len(words) and self._stream_fault(fault, True):
            return
        self._chunk(event("content_block_stop", {"index": 0}))
        stop = "max_tokens" if len(words) < len(owner.reply_words) else "end_turn"
        if owner.tool_call is not None:
            arguments = json.dumps(owner.tool_call["arguments"])
            half = len(arguments) // 2
            self._chunk(event("content_block_start", {"index": 1, "content_block": {
                "type": "tool_use", "id": "toolu_7", "name": owner.tool_call["name"],
                "input": {}}}))
            for piece in (arguments[:half], arguments[half:]):
                self._chunk(event("content_block_delta", {"index": 1, "delta": {
                    "type": "input_json_delta", "partial_json": piece}}))
            self._chunk(event("content_block_stop", {"index": 1}))
            stop = "tool_use"
        self._chunk(event("message_delta", {"delta": {"stop_reason": stop,
                                                      "stop_sequence": None},
                                            "usage": {"output_tokens": usage[1]}}))
        self._chunk(event("message_stop", {}))
        self._end_stream()

    def _stream_fault(self, fault: Fault, anthropic: bool) -> bool:
        """Apply a mid-stream fault; True when the stream must end here."""
        if fault.kind == "stall":
            self._wait_released()
            return True
        if fault.kind == "pause":
            self._wait_released()
            return False
        if fault.kind == "drop":
            self._drop()
            return True
        if fault.kind == "malformed":
            self._chunk(b'data: {"choices": [{"delta": {"content": "oops"\n\n')
            return False
        if fault.kind == "junk":
            self._chunk(b"this line is not a field of any event\n")
            return False
        if fault.kind == "truncate":
            self._end_stream()  # a clean end of the body, but without the end event
            return True
        if fault.kind == "error_event":
            error = fault.body or (
                anthropic_error("Overloaded", "overloaded_error") if anthropic
                else openai_error("The server had an error", "server_error", 500)
            )
            if anthropic:
                self._chunk(b"event: error\ndata: " + json.dumps(error).encode() + b"\n\n")
            else:
                self._chunk(b"data: " + json.dumps(error).encode() + b"\n\n")
            self._end_stream()
            return True
        return False


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    owner: ProtocolServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | TimeoutError):
            return  # the client hung up, which several tests do on purpose
        self.owner.errors.append(repr(error))
        super().handle_error(request, client_address)


class ProtocolServer:
    """The server and its script; start with :meth:`start`, end with :meth:`stop`."""

    def __init__(self, *, model: str = "test-model", n_ctx: int | None = 4096) -> None:
        self.model = model
        self.n_ctx = n_ctx
        self.serve_props = True
        # Refuse Anthropic requests whose input and max_tokens exceed n_ctx (off for
        # the tests of the client alone, which send the API's usual 4,096).
        self.anthropic_window_check = False
        self.api_key: str | None = None
        self.reply_words: list[str] = ["Hello", " from", " the", " protocol", " server", "."]
        self.tool_call: dict[str, Any] | None = None
        self.batch = 1  # deltas per network chunk
        self.requests: list[RecordedRequest] = []
        self.hangups: list[str] = []
        self.hung_up = threading.Event()
        self.stalling = threading.Event()
        self.errors: list[str] = []
        self.release = threading.Event()
        self._faults: deque[Fault] = deque()
        self._lock = threading.Lock()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The root URL, e.g. ``http://127.0.0.1:54321``."""
        assert self._httpd is not None, "start() the server first"
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> ProtocolServer:
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def script(self, *faults: Fault) -> None:
        """Queue faults; each chat request takes the next one."""
        with self._lock:
            self._faults.extend(faults)

    def next_fault(self, header: str | None) -> Fault | None:
        if header:
            return HEADER_FAULTS[header]
        with self._lock:
            return self._faults.popleft() if self._faults else None

    def chat_requests(self) -> list[RecordedRequest]:
        """The POSTs to either chat endpoint, in order."""
        return [r for r in self.requests if r.method == "POST"]
