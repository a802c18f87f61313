"""Preflight: the exact request a call would send, its tokens per part, and what was left out.

:meth:`Model.preflight <workbench.engine.model.Model.preflight>` builds the first request
of ``execute`` through the very same code and stops before sending it: the
:class:`Preflight` holds the provider's payload (``provider.build_payload``), the
provider's description of the HTTP request with secrets redacted, the tokens of each part
(system, memory, summary, history, prompt, total), the budget arithmetic, and the history
messages left out with the reason for each.

:func:`~workbench.engine.turn.preflight_session` does it for a stored session, the way
``workbench preflight`` does, through :func:`~workbench.engine.turn.prepare_turn`, the
function chat uses: the same provider (the one named, else the agent's, else the only
one configured), model, tools, ``max_tokens`` and streaming choice; where chat refuses
(several providers and none chosen, the agent's provider gone), preflight refuses with
the same sentence. Only when no provider is configured at all, an
:class:`OfflineProvider` stands in: it builds an OpenAI chat completions body for the
agent's model (``gpt-4o-mini`` when the agent names none) and assumes a context window of
128,000 tokens; the preflight says so in :attr:`Preflight.provider`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from workbench.core.assembly import (
    AssembledRequest,
    Budget,
    LeftOut,
    LeftOutRange,
    TokenBreakdown,
)
from workbench.core.conversation import MemoryEntry, Message
from workbench.core.provider import (
    CancelToken,
    ChatRequest,
    ChatResponse,
    Provider,
    StreamEvent,
)
from workbench.errors import UnreachableError

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_MODEL",
    "OfflineProvider",
    "Preflight",
    "openai_chat_payload",
    "provider_note",
]

DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_CONTEXT_WINDOW = 128_000


def _openai_message(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role}
    if message.role == "assistant" and message.tool_calls:
        out["content"] = message.content or None
        calls = []
        for call in message.tool_calls:
            function = dict(call.get("function") or {})
            arguments = function.get("arguments", "")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            calls.append(
                {
                    "id": str(call.get("id") or ""),
                    "type": "function",
                    "function": {
                        "name": str(function.get("name") or ""),
                        "arguments": arguments or "{}",
                    },
                }
            )
        out["tool_calls"] = calls
    else:
        out["content"] = message.content
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id or ""
    elif message.name:
        out["name"] = message.name
    return out


def openai_chat_payload(request: ChatRequest, model: str) -> dict[str, Any]:
    """An OpenAI chat completions body for ``request`` (what :class:`OfflineProvider`
    and the test suite's scripted provider build)."""
    payload: dict[str, Any] = {
        "model": model,
        "messages": [_openai_message(m) for m in request.messages],
    }
    if request.max_tokens:
        payload["max_tokens"] = request.max_tokens
    if request.temperature is not None:
        payload["temperature"] = request.temperature
    if request.stop:
        payload["stop"] = list(request.stop)
    if request.tools:
        payload["tools"] = [t.to_openai() for t in request.tools]
    if request.response_schema is not None:
        payload["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "response", "schema": request.response_schema},
        }
    payload["stream"] = bool(request.stream)
    return payload


class OfflineProvider:
    """A provider that only builds payloads: for preflight when none is configured.

    Sending raises :class:`~workbench.errors.UnreachableError`.
    """

    kind = "openai"

    def __init__(self, model: str | None = None, *, window: int = DEFAULT_CONTEXT_WINDOW):
        self.model = model or DEFAULT_MODEL
        self._window = window

    def build_payload(self, request: ChatRequest) -> dict[str, Any]:
        return openai_chat_payload(request, self.model)

    def describe_request(self, request: ChatRequest) -> dict[str, Any]:
        return {
            "method": "POST",
            "url": None,
            "headers": {"content-type": "application/json"},
            "json": self.build_payload(request),
        }

    def stream(
        self, request: ChatRequest, cancel: CancelToken | None = None
    ) -> Iterator[StreamEvent]:
        raise UnreachableError(
            "No provider is configured for this agent: the offline stand-in only builds "
            "requests for preflight."
        )

    def complete(self, request: ChatRequest, cancel: CancelToken | None = None) -> ChatResponse:
        raise UnreachableError(
            "No provider is configured for this agent: the offline stand-in only builds "
            "requests for preflight."
        )

    def context_window(self) -> int | None:
        return self._window


def provider_note(provider: Provider, *, assumed: bool = False, why: str = "") -> dict[str, Any]:
    """What preflight says about the provider it built the request for."""
    note: dict[str, Any] = {
        "kind": getattr(provider, "kind", None),
        "model": getattr(provider, "model", None),
        "name": getattr(provider, "name", None),
        "assumed": assumed,
    }
    if why:
        note["note"] = why
    return note


@dataclass
class Preflight:
    """The request a call would send, without sending it."""

    request: ChatRequest
    assembled: AssembledRequest
    payload: dict[str, Any]
    provider: dict[str, Any]
    http: dict[str, Any] = field(default_factory=dict)
    recalled: list[MemoryEntry] = field(default_factory=list)

    @property
    def tokens(self) -> TokenBreakdown:
        """Tokens per part: system, memory, summary, history, prompt, and the total."""
        return self.assembled.tokens

    @property
    def left_out(self) -> list[LeftOut]:
        """History messages the request does not carry, with the reason for each."""
        return self.assembled.left_out

    def left_out_ranges(self) -> list[LeftOutRange]:
        """The left-out history as runs of consecutive messages with one reason each."""
        return self.assembled.left_out_ranges()

    @property
    def budget(self) -> Budget:
        return self.assembled.budget

    @property
    def messages(self) -> list[Message]:
        return self.assembled.messages

    def to_json(self) -> dict[str, Any]:
        """``{"payload", "tokens", "left_out", "budget", "provider", "http", "recalled"}``.

        ``left_out`` lists runs of consecutive history messages left out for one reason:
        ``{"first_id", "first_position", "last_id", "last_position", "count",
        "reason"}``, oldest first (a 100,000-message session gives a handful, not one
        entry per message).
        """
        return {
            "payload": self.payload,
            "tokens": self.tokens.to_json(),
            "left_out": [item.to_json() for item in self.left_out_ranges()],
            "budget": self.budget.to_json(),
            "provider": self.provider,
            "http": self.http,
            "recalled": [{"id": e.id, "content": e.content} for e in self.recalled],
        }

