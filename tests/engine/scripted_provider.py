"""A provider that replays scripted replies, for testing the engine without a server.

It implements :class:`workbench.core.provider.Provider`: ``build_payload`` makes an
OpenAI chat completions body (so preflight has a real payload to show), ``stream`` yields
the scripted reply as events (text in pieces, tool calls as deltas, usage, finish) and
``complete`` folds them. Every request it is sent is recorded (``requests``, and the
payload as it was at that moment in ``payloads``), so a test can check what the engine
sent. A scripted item may be:

* a :class:`Reply` (text, tool calls, usage, how to break);
* a string (a plain text reply);
* an exception instance (raised when the call is made);
* a callable taking the :class:`ChatRequest` and returning one of the above.

Test modules load it with ``sys.path`` pointing at this folder (the suite imports test
files in importlib mode, so there is no package to import it from).
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from workbench.core.provider import (
    CancelToken,
    ChatRequest,
    ChatResponse,
    Finished,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageReport,
    collect,
)
from workbench.engine.preflight import openai_chat_payload
from workbench.errors import OperationCancelledError


def call(name: str, arguments: Any = None, call_id: str | None = None) -> dict[str, Any]:
    """A tool call in the OpenAI shape (arguments given as a value are JSON-encoded)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return {
        "id": call_id or f"call_{name}",
        "type": "function",
        "function": {"name": name, "arguments": text},
    }


@dataclass
class Reply:
    """One scripted reply.

    ``pieces`` splits the text into that many deltas. ``cancel_after`` sets the request's
    cancel token after that many text deltas (as a user pressing Stop would);
    ``fail_after`` raises ``failure`` after that many deltas.
    """

    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage | None = field(default_factory=lambda: Usage(11, 7))
    finish_reason: str | None = None
    reasoning: str = ""
    pieces: int = 3
    cancel_after: int | None = None
    fail_after: int | None = None
    failure: Exception | None = None
    model: str | None = None


Script = Reply | str | Exception | Callable[[ChatRequest], Any]


def _split(text: str, pieces: int) -> list[str]:
    if not text:
        return []
    pieces = max(1, min(pieces, len(text)))
    size = -(-len(text) // pieces)
    return [text[i : i + size] for i in range(0, len(text), size)]


class ScriptedProvider:
    """Replays scripted replies and records what it was sent (thread-safe)."""

    kind = "scripted"

    def __init__(
        self,
        replies: Iterable[Script] = (),
        *,
        model: str = "scripted-model",
        window: int | None = None,
        max_output_tokens: int | None = None,
        default: Script | None = None,
    ):
        self.model = model
        self.window = window
        self.max_output_tokens = max_output_tokens
        self.default = default
        self._script: list[Script] = list(replies)
        self._lock = threading.Lock()
        self.requests: list[ChatRequest] = []
        self.payloads: list[dict[str, Any]] = []

    # -- scripting ---------------------------------------------------------------------

    def add(self, *replies: Script) -> None:
        with self._lock:
            self._script.extend(replies)

    @property
    def calls(self) -> int:
        return len(self.requests)

    def _next(self, request: ChatRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            self.payloads.append(copy.deepcopy(self.build_payload(request)))
            if self._script:
                item = self._script.pop(0)
            elif self.default is not None:
                item = self.default
            else:
                raise AssertionError("the scripted provider has no reply left")
        while callable(item) and not isinstance(item, Reply | Exception):
            item = item(request)
        if isinstance(item, Exception):
            raise item
        if isinstance(item, str):
            return Reply(text=item)
        assert isinstance(item, Reply), item
        return item

    # -- the provider protocol -------------------------------------------------------------

    def build_payload(self, request: ChatRequest) -> dict[str, Any]:
        return openai_chat_payload(request, self.model)

    def describe_request(self, request: ChatRequest) -> dict[str, Any]:
        return {
            "method": "POST",
            "url": "http://127.0.0.1:1/v1/chat/completions",
            "headers": {"authorization": "Bearer [redacted]"},
            "json": self.build_payload(request),
        }

    def stream(
        self, request: ChatRequest, cancel: CancelToken | None = None
    ) -> Iterator[StreamEvent]:
        reply = self._next(request)
        return self._events(reply, cancel)

    def _events(self, reply: Reply, cancel: CancelToken | None) -> Iterator[StreamEvent]:
        sent = 0
        if reply.reasoning:
            yield ReasoningDelta(reply.reasoning)
        for piece in _split(reply.text, reply.pieces):
            if cancel is not None:
                cancel.raise_if_cancelled()
            if reply.fail_after is not None and sent >= reply.fail_after:
                raise reply.failure or RuntimeError("scripted failure")
            yield TextDelta(piece)
            sent += 1
            if reply.cancel_after is not None and sent >= reply.cancel_after and cancel:
                cancel.cancel()
        if cancel is not None:
            cancel.raise_if_cancelled()
        if reply.fail_after is not None and sent >= reply.fail_after:
            raise reply.failure or RuntimeError("scripted failure")
        for index, tool_call in enumerate(reply.tool_calls):
            function = tool_call["function"]
            arguments = function.get("arguments", "")
            half = len(arguments) // 2
            yield ToolCallDelta(index, tool_call.get("id"), function["name"], arguments[:half])
            yield ToolCallDelta(index, None, None, arguments[half:])
        if reply.usage is not None:
            yield UsageReport(reply.usage)
        reason = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        yield Finished(reason, reply.model or self.model)

    def complete(self, request: ChatRequest, cancel: CancelToken | None = None) -> ChatResponse:
        return collect(self.stream(request, cancel))

    def context_window(self) -> int | None:
        return self.window


__all__ = ["OperationCancelledError", "Reply", "ScriptedProvider", "call"]
