"""The provider protocol: what the engine asks of a model server client.

A provider turns a :class:`ChatRequest` (the assembled messages, tools and sampling
settings) into the exact JSON body its API expects (:meth:`Provider.build_payload`),
sends it, and reports the reply as a stream of events (:meth:`Provider.stream`) or as
one :class:`ChatResponse` (:meth:`Provider.complete`). Errors are the typed
:class:`~workbench.errors.ProviderError` subclasses. Tool calls travel in the OpenAI
shape everywhere inside the workbench::

    {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{...}"}}

Providers that speak another shape (Anthropic's ``tool_use`` blocks) convert at their
edge. Stopping is cooperative: the engine passes a :class:`CancelToken`; a provider
checks it between network chunks and closes the connection as soon as it is set.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from workbench.core.conversation import Message
from workbench.core.records import FieldsJson
from workbench.errors import OperationCancelledError


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model sees it: name, description and JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@dataclass
class ChatRequest:
    """Everything a provider needs for one call.

    ``messages`` is the assembled request in order (system first when there is one).
    ``response_schema`` asks for JSON matching a schema where the API supports it.
    """

    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    max_tokens: int | None = None
    temperature: float | None = None
    stream: bool = True
    response_schema: dict[str, Any] | None = None
    stop: list[str] | None = None


@dataclass
class Usage(FieldsJson):
    """Tokens the provider reports for one call."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens


# -- stream events ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TextDelta:
    """A piece of the reply's text."""

    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """A piece of the model's visible reasoning, where the API sends it."""

    text: str


@dataclass(frozen=True)
class ToolCallDelta:
    """A piece of a tool call as it streams (``index`` identifies the call)."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(frozen=True)
class ToolCallReady:
    """A whole tool call, assembled from its deltas (OpenAI shape)."""

    call: dict[str, Any]


@dataclass(frozen=True)
class UsageReport:
    """The provider's token usage for the call (usually near the end)."""

    usage: Usage


@dataclass(frozen=True)
class Finished:
    """The reply is complete; ``reason`` is the API's finish or stop reason."""

    reason: str | None = None
    model: str | None = None


StreamEvent = TextDelta | ReasoningDelta | ToolCallDelta | ToolCallReady | UsageReport | Finished


@dataclass
class ChatResponse:
    """A whole reply: text, tool calls (OpenAI shape), usage and finish reason."""

    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage | None = None
    finish_reason: str | None = None
    model: str | None = None
    reasoning: str = ""
    stopped: bool = False  # the user stopped it; text holds what had arrived


class CancelToken:
    """A flag the user's Stop sets and the provider polls; thread-safe."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._callbacks: list[Any] = []
        self._lock = threading.Lock()

    def cancel(self) -> None:
        with self._lock:
            self._event.set()
            callbacks = list(self._callbacks)
        for callback in callbacks:
            callback()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def on_cancel(self, callback: Any) -> None:
        """Run ``callback`` when cancelled (at once if already); used to close sockets."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return
        callback()

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise OperationCancelledError("The request was stopped.")


@runtime_checkable
class Provider(Protocol):
    """A client for one model on one server."""

    kind: str
    model: str

    def build_payload(self, request: ChatRequest) -> dict[str, Any]:
        """The exact JSON body this provider would send for ``request``."""
        ...

    def describe_request(self, request: ChatRequest) -> dict[str, Any]:
        """``{"method", "url", "headers", "json"}`` with every secret redacted."""
        ...

    def stream(
        self, request: ChatRequest, cancel: CancelToken | None = None
    ) -> Iterator[StreamEvent]:
        """Send the request and yield the reply's events as they arrive."""
        ...

    def complete(self, request: ChatRequest, cancel: CancelToken | None = None) -> ChatResponse:
        """Send the request and return the whole reply."""
        ...

    def context_window(self) -> int | None:
        """The model's context window in tokens, if known."""
        ...


class ToolCallAssembler:
    """Joins :class:`ToolCallDelta` pieces into whole OpenAI-shaped calls."""

    def __init__(self) -> None:
        self._calls: dict[int, dict[str, Any]] = {}

    def add(self, delta: ToolCallDelta) -> None:
        call = self._calls.setdefault(
            delta.index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
        )
        if delta.id:
            call["id"] = delta.id
        if delta.name:
            call["function"]["name"] += delta.name
        call["function"]["arguments"] += delta.arguments

    def calls(self) -> list[dict[str, Any]]:
        out = []
        for index in sorted(self._calls):
            call = self._calls[index]
            if not call["id"]:
                call["id"] = f"call_{index}"
            out.append(call)
        return out


def collect(events: Iterable[StreamEvent]) -> ChatResponse:
    """Fold a stream of events into one :class:`ChatResponse`."""
    text: list[str] = []
    reasoning: list[str] = []
    assembler = ToolCallAssembler()
    ready: list[dict[str, Any]] = []
    response = ChatResponse()
    for event in events:
        if isinstance(event, TextDelta):
            text.append(event.text)
        elif isinstance(event, ReasoningDelta):
            reasoning.append(event.text)
        elif isinstance(event, ToolCallDelta):
            assembler.add(event)
        elif isinstance(event, ToolCallReady):
            ready.append(event.call)
        elif isinstance(event, UsageReport):
            response.usage = event.usage
        elif isinstance(event, Finished):
            response.finish_reason = event.reason
            response.model = event.model or response.model
    response.text = "".join(text)
    response.reasoning = "".join(reasoning)
    response.tool_calls = ready or assembler.calls()
    return response


def arguments_of(call: dict[str, Any]) -> dict[str, Any]:
    """The parsed JSON arguments of an OpenAI-shaped tool call ({} when empty).

    Raises ``ValueError`` when the arguments are not a JSON object.
    """
    raw = (call.get("function") or {}).get("arguments") or "{}"
    value = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(value, dict):
        raise ValueError("tool call arguments must be a JSON object")
    return value


# -- stored provider settings ----------------------------------------------------------------

PROVIDER_KINDS: tuple[str, ...] = ("openai", "anthropic")


@dataclass
class ProviderConfig:
    """A named provider as the user configured it (SPEC §6). Never holds a secret.

    The API key is found through ``api_key_env`` (an environment variable's name) or
    ``api_key_keyring`` (an OS keyring entry's name). ``context_window`` is the user's
    value, used when neither the server nor the known-model table tells. ``timeouts``
    holds ``connect``, ``read`` and ``total`` seconds; ``extra_headers`` go with every
    request (secret-bearing header names are refused where configs are stored).
    """

    name: str
    kind: str
    base_url: str
    model: str
    api_key_env: str | None = None
    api_key_keyring: str | None = None
    context_window: int | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    timeouts: dict[str, float | None] = field(default_factory=dict)
    extra_headers: dict[str, str] = field(default_factory=dict)
    id: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The config as JSON (it holds no secret, so this is safe to print or export)."""
        data = asdict(self)
        del data["id"]
        return data
