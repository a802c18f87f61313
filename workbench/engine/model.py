"""``Model``: the builder that runs a turn against a provider, with memory and tools.

::

    model = Model(provider, instructions="Be brief.", tools=[weather], memory=memory)
    reply = model.execute("Will it rain in Porto?")
    reply.text, reply.usage, reply.messages

Builders are immutable: ``with_memory``, ``with_tools``, ``without_tools``,
``with_context`` and ``with_options`` return a new model and compose in any order
(``without_tools`` drops the default tools given to ``Model(...)``, never the ones added
by ``with_tools``). ``Model(..., memory=m)`` sets a default memory; ``with_memory`` overrides
it; with neither the model is stateless: the request holds the instructions and the prompt.

A turn (SPEC §3): recall long-term memory for the prompt, assemble and fit the request
(:mod:`workbench.core.assembly`), call the provider (streaming), run the tools the model
asks for (each with a timeout; an exception, a bad argument or a timeout becomes an error
result the model reads), call again, up to ``max_steps`` calls. When the last allowed call
still asks for tools, their calls are answered with a "not run" error result so the
history stays well formed, and the response says ``step_limit_reached``.

Only a successful turn changes anything. Then, when memory is automatic, the prompt, the
assistant's tool-call messages, the tool results and the reply are appended in one step;
the reply's metadata holds the provider-reported ``usage``, the ``model`` and the
``finish_reason``; the session's token usage and tool stats are updated; a
``conversation`` capture writes the turn to long-term memory. A provider error, a stop
(:class:`~workbench.core.provider.CancelToken`) or a budget error appends nothing, except
that a stopped stream keeps its partial reply when asked to (``keep_partial=True``),
marked ``"stopped": true`` in its metadata.

Regenerate (:meth:`Model.stream_regenerate`) asks again for the reply to the last user
message in memory: the request is built from the history before that prompt (the old
reply is not in it), and only when the new reply is complete does it replace the old
one (the messages after the prompt), in one step. A failure or a stop changes nothing:
the old reply stays until a new one has arrived (SPEC §3).

Structured output (:meth:`Model.execute_with_schema`) validates the reply against a
pydantic model or a JSON schema; a failed attempt is retried with a prompt that replaces
the user message and quotes the error; memory receives the original prompt and the valid
reply only, and nothing at all when every attempt fails
(:class:`StructuredOutputError` says why).
"""

from __future__ import annotations

import copy
import json
import logging
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.core.assembly import (
    AssembledRequest,
    Budget,
    RequestParts,
    alternating_messages,
    assemble,
    context_text,
    tools_tokens,
)
from workbench.core.conversation import MemoryEntry, Message, SessionContext, ToolStats
from workbench.core.policy import MemoryPolicy, resolve_namespace
from workbench.core.provider import (
    CancelToken,
    ChatRequest,
    ChatResponse,
    Finished,
    Provider,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallAssembler,
    ToolCallDelta,
    ToolCallReady,
    Usage,
    UsageReport,
    arguments_of,
)
from workbench.core.schema import check_schema, parse_json_reply, validate
from workbench.core.tokens import TokenCounter, get_counter
from workbench.core.tools import Tool, as_tools, tool_result_text
from workbench.engine.compaction import maybe_compact_before_send
from workbench.engine.memory import Memory, copy_message
from workbench.engine.preflight import Preflight, provider_note
from workbench.engine.recall import LongTermMemory
from workbench.errors import (
    OperationCancelledError,
    RequestError,
    StructuredOutputError,
    WorkbenchError,
)

__all__ = [
    "DEFAULT_MAX_STEPS",
    "DEFAULT_TOOL_TIMEOUT",
    "RETRY_PROMPT",
    "Model",
    "Response",
    "ResponseSchema",
    "Run",
    "RunEvent",
    "StructuredResponse",
    "ToolFinished",
    "ToolStarted",
]

DEFAULT_MAX_STEPS = 8
DEFAULT_TOOL_TIMEOUT = 30.0
#: Tokens kept free for the reply when neither the policy, the model nor the provider
#: says how many: a quarter of the window, at most this many.
DEFAULT_RESERVED_OUTPUT = 4096

RETRY_PROMPT = (
    "Your previous reply was not valid: {error}\n\n"
    "Answer the request below again. Reply with only a JSON value that matches the "
    "required schema, with no other text.\n\n"
    "Request: {prompt}"
)

log = logging.getLogger(__name__)


# -- run events ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolStarted:
    """A tool is about to run."""

    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolFinished:
    """A tool ran (or could not); ``error`` says why it failed, if it did."""

    call_id: str
    name: str
    content: str
    error: str | None = None


RunEvent = StreamEvent | ToolStarted | ToolFinished


@dataclass
class Response:
    """What a turn produced.

    ``messages`` are the messages the turn added to memory (as stored), or, when nothing
    was appended (no memory, or manual mode), the messages it would have added.
    ``usage`` sums the provider-reported usage of every call of the turn (``None`` when
    the provider reported none).
    """

    text: str
    usage: Usage | None
    messages: list[Message]
    appended: bool
    finish_reason: str | None = None
    model: str | None = None
    reasoning: str = ""
    steps: int = 1
    stopped: bool = False
    step_limit_reached: bool = False
    recalled: list[MemoryEntry] = field(default_factory=list)
    tool_stats: ToolStats = field(default_factory=ToolStats)
    # The auto-compaction that ran before the send (SPEC §4), when one changed the session,
    # and the sentence that names it ("Folded 41 messages into the summary; …").
    compaction_id: int | None = None
    compaction_note: str = ""
    # Regenerate: the old reply (the messages after the prompt, as they were stored)
    # that the new one replaced; empty for other turns and when nothing was stored.
    replaced: list[Message] = field(default_factory=list)


@dataclass
class StructuredResponse(Response):
    """A response whose reply matched the schema; ``value`` is the parsed reply (an
    instance of the pydantic model, or the JSON value)."""

    value: Any = None
    attempts: int = 1


class Run:
    """A turn in progress: iterate over its events; ``response`` is set at the end.

    ``cancel()`` stops it (from any thread); the iteration then raises
    :class:`~workbench.errors.OperationCancelledError`, unless the partial reply was to be kept.
    """

    def __init__(self, events: Generator[RunEvent, None, Response], cancel: CancelToken):
        self._events = events
        self.cancel_token = cancel
        self.response: Response | None = None

    def __iter__(self) -> Iterator[RunEvent]:
        self.response = yield from self._events

    def cancel(self) -> None:
        self.cancel_token.cancel()


# -- plumbing ------------------------------------------------------------------------------


@dataclass
class _Plan:
    """Everything a turn needs that does not change between its calls."""

    memory: Memory | None
    policy: MemoryPolicy
    auto: bool
    tools: tuple[Tool, ...]
    counter: TokenCounter
    budget: Budget
    long_term: LongTermMemory | None
    recalled: list[MemoryEntry]
    summary: str | None
    history: Sequence[Message]
    context: str | None
    alternate: bool = False


@dataclass
class _Turn:
    """A finished turn that is not yet committed to memory."""

    prompt: str
    messages: list[Message]
    text: str
    usage: Usage | None
    finish_reason: str | None
    model: str | None
    reasoning: str
    steps: int
    stopped: bool
    step_limit_reached: bool
    stats: ToolStats


class _Fold:
    """Folds stream events into a reply as they pass."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.assembler = ToolCallAssembler()
        self.ready: list[dict[str, Any]] = []
        self.usage: Usage | None = None
        self.finish: str | None = None
        self.model: str | None = None

    def add(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            self.text.append(event.text)
        elif isinstance(event, ReasoningDelta):
            self.reasoning.append(event.text)
        elif isinstance(event, ToolCallDelta):
            self.assembler.add(event)
        elif isinstance(event, ToolCallReady):
            self.ready.append(event.call)
        elif isinstance(event, UsageReport):
            self.usage = event.usage
        elif isinstance(event, Finished):
            self.finish = event.reason
            self.model = event.model or self.model

    def response(self) -> ChatResponse:
        return ChatResponse(
            text="".join(self.text),
            tool_calls=self.ready or self.assembler.calls(),
            usage=self.usage,
            finish_reason=self.finish,
            model=self.model,
            reasoning="".join(self.reasoning),
        )


def _response_events(reply: ChatResponse) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    if reply.reasoning:
        events.append(ReasoningDelta(reply.reasoning))
    if reply.text:
        events.append(TextDelta(reply.text))
    events.extend(ToolCallReady(call) for call in reply.tool_calls)
    if reply.usage is not None:
        events.append(UsageReport(reply.usage))
    events.append(Finished(reply.finish_reason, reply.model))
    return events


def _add_usage(total: Usage | None, more: Usage | None) -> Usage | None:
    if more is None:
        return total
    if total is None:
        return Usage(more.input_tokens, more.output_tokens)
    return Usage(total.input_tokens + more.input_tokens, total.output_tokens + more.output_tokens)


def _normal_calls(calls: Sequence[dict[str, Any]], step: int) -> list[dict[str, Any]]:
    """Tool calls in the OpenAI shape with an id each (a server may leave ids out)."""
    out = []
    for i, call in enumerate(calls):
        function = dict(call.get("function") or {}) if isinstance(call, dict) else {}
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        cid = call.get("id") if isinstance(call, dict) else None
        out.append(
            {
                "id": cid if isinstance(cid, str) and cid else f"call_{step}_{i}",
                "type": "function",
                "function": {"name": str(function.get("name") or ""), "arguments": arguments},
            }
        )
    return out


class _ToolTimeout(WorkbenchError):
    """A tool did not finish within its time limit (the model is told so)."""


def _call_with_timeout(
    function: Callable[..., Any],
    arguments: dict[str, Any],
    timeout: float | None,
    cancel: CancelToken | None,
    name: str,
) -> Any:
    """Run a tool on a daemon thread, waiting at most ``timeout`` seconds.

    A tool that hangs cannot be killed; its thread is a daemon, so it never keeps the
    process alive, and its eventual result is dropped.
    """
    box: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["value"] = function(**arguments)
        except BaseException as exc:  # noqa: BLE001 - handed to the model as an error result
            box["error"] = exc
        finally:
            done.set()

    thread = threading.Thread(target=target, name=f"tool-{name}", daemon=True)
    thread.start()
    deadline = None if not timeout or timeout <= 0 else time.monotonic() + timeout
    while True:
        wait = 0.05 if cancel is not None else None
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _ToolTimeout
            wait = remaining if wait is None else min(wait, remaining)
        if done.wait(wait):
            break
        if cancel is not None and cancel.cancelled:
            raise OperationCancelledError("The request was stopped while a tool was running.")
    if "error" in box:
        raise box["error"]
    return box.get("value")


ResponseSchema = type[Any] | dict[str, Any]
"""What ``execute_with_schema`` and ``preflight`` take: a pydantic model class (anything
with ``model_json_schema``) or a JSON schema object."""


class _Schema:
    """A pydantic model or a JSON schema, and how to check a reply against it."""

    def __init__(self, schema: ResponseSchema):
        self.model: Any = None
        make_schema = getattr(schema, "model_json_schema", None)
        if isinstance(schema, type) and callable(make_schema):
            self.model = schema
            self.json_schema: dict[str, Any] = dict(make_schema())
        elif isinstance(schema, dict):
            check_schema(schema, where="response schema")
            self.json_schema = schema
        else:
            raise RequestError(
                f"{schema!r} is not a schema: give a pydantic model class or a JSON schema "
                "object."
            )

    def parse(self, text: str) -> tuple[Any, str | None]:
        """``(value, None)`` when the reply is valid, else ``(None, the reason)``."""
        try:
            data = parse_json_reply(text)
        except ValueError as exc:
            return None, str(exc)
        if self.model is not None:
            try:
                return self.model.model_validate(data), None
            except Exception as exc:  # noqa: BLE001 - pydantic's ValidationError and kin
                return None, " ".join(str(exc).split())
        problems = validate(data, self.json_schema)
        if problems:
            return None, "; ".join(problems[:5])
        return data, None


# -- the builder -------------------------------------------------------------------------------


class Model:
    """A provider with instructions, tools, memory and options; immutable (see module)."""

    __slots__ = (
        "provider",
        "instructions",
        "default_tools",
        "memory",
        "policy",
        "max_steps",
        "tool_timeout",
        "max_tokens",
        "temperature",
        "context_window",
        "stream",
        "counter",
        "_call_memory",
        "_auto",
        "_context",
        "_extra_tools",
        "_use_default_tools",
    )

    provider: Provider
    instructions: str | None
    default_tools: tuple[Tool, ...]
    memory: Memory | None
    policy: MemoryPolicy | None
    max_steps: int
    tool_timeout: float | None
    max_tokens: int | None
    temperature: float | None
    context_window: int | None
    stream: bool
    counter: TokenCounter | None
    _call_memory: Memory | None
    _auto: bool | None
    _context: Any
    _extra_tools: tuple[Tool, ...]
    _use_default_tools: bool

    def __init__(
        self,
        provider: Provider,
        *,
        instructions: str | None = None,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        memory: Memory | None = None,
        policy: MemoryPolicy | dict[str, Any] | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        tool_timeout: float | None = DEFAULT_TOOL_TIMEOUT,
        max_tokens: int | None = None,
        temperature: float | None = None,
        context_window: int | None = None,
        stream: bool = True,
        counter: TokenCounter | None = None,
    ):
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise RequestError(f"max_steps must be at least 1, not {max_steps!r}.")
        values: dict[str, Any] = {
            "provider": provider,
            "instructions": instructions,
            "default_tools": as_tools(tools),
            "memory": memory,
            "policy": MemoryPolicy.from_dict(policy) if isinstance(policy, dict) else policy,
            "max_steps": max_steps,
            "tool_timeout": tool_timeout,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "context_window": context_window,
            "stream": stream,
            "counter": counter,
            "_call_memory": None,
            "_auto": None,
            "_context": None,
            "_extra_tools": (),
            "_use_default_tools": True,
        }
        for key, value in values.items():
            object.__setattr__(self, key, value)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("A Model is immutable: use its with_… methods for a changed copy.")

    def _evolve(self, **changes: Any) -> Model:
        new = object.__new__(Model)
        for key in Model.__slots__:
            object.__setattr__(new, key, changes.get(key, getattr(self, key)))
        return new

    def __repr__(self) -> str:
        return (
            f"Model({getattr(self.provider, 'kind', '?')}:{getattr(self.provider, 'model', '?')},"
            f" tools={[t.name for t in self.tools]}, memory={self.active_memory!r})"
        )

    # -- builders ------------------------------------------------------------------------

    def with_memory(self, memory: Memory | None, auto: bool | None = None) -> Model:
        """Use ``memory`` for calls of the new model; ``auto=False`` appends nothing,
        ``True`` appends the turn, ``None`` follows the memory policy (``auto`` by
        default)."""
        return self._evolve(_call_memory=memory, _auto=auto)

    def with_tools(self, tools: Sequence[Tool | Callable[..., Any]]) -> Model:
        """Add tools (functions are made into tools); a name given twice raises."""
        extra = as_tools([*self._extra_tools, *tools])
        return self._evolve(_extra_tools=extra)

    def without_tools(self) -> Model:
        """Drop the default tools (those given to ``Model(...)``)."""
        return self._evolve(_use_default_tools=False)

    def with_context(self, context: Any) -> Model:
        """Structured context (text, a mapping, a dataclass, a pydantic model) sent as
        its own message after the system message."""
        return self._evolve(_context=context)

    def with_options(self, **options: Any) -> Model:
        """Change ``max_steps``, ``tool_timeout``, ``max_tokens``, ``temperature``,
        ``context_window``, ``stream``, ``instructions`` or ``policy``."""
        allowed = {
            "max_steps",
            "tool_timeout",
            "max_tokens",
            "temperature",
            "context_window",
            "stream",
            "instructions",
            "policy",
        }
        unknown = sorted(set(options) - allowed)
        if unknown:
            raise RequestError(f"Models have no option {unknown[0]!r}.")
        if "policy" in options and isinstance(options["policy"], dict):
            options["policy"] = MemoryPolicy.from_dict(options["policy"])
        return self._evolve(**options)

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The tools the model may call: the defaults (unless dropped) and the added."""
        base = self.default_tools if self._use_default_tools else ()
        added = {t.name for t in self._extra_tools}
        return tuple(t for t in base if t.name not in added) + self._extra_tools

    @property
    def active_memory(self) -> Memory | None:
        """The memory calls use: ``with_memory``'s, else the default, else none."""
        return self._call_memory if self._call_memory is not None else self.memory

    # -- planning -------------------------------------------------------------------------

    def _auto_compact(self) -> tuple[int | None, str]:
        """Before a send, compact the session if it opted in and a trigger fires
        (SPEC §4); a failure never stops the send. Returns the new compaction's id (None
        when nothing changed) and the sentence naming it."""
        memory = self.active_memory
        if memory is None or memory.session_id is None:
            return None, ""
        result = maybe_compact_before_send(memory, provider=self.provider)
        if result is None:
            return None, ""
        if result.message:
            log.info("Auto-compaction before send: %s", result.message)
        if result.changed:
            return result.compaction_id, f"Auto-compaction {result.compaction_id}: " + (
                result.message)
        return None, ""

    def _plan(self, prompt: str) -> _Plan:
        memory = self.active_memory
        policy = self.policy or (memory.policy() if memory is not None else MemoryPolicy())
        auto = self._auto if self._auto is not None else policy.auto
        counter = self.counter or get_counter(model=getattr(self.provider, "model", None))
        tools = self.tools
        window = self.context_window or self.provider.context_window()
        reserve = policy.reserve_output
        if reserve is None:
            reserve = self.max_tokens or getattr(self.provider, "max_output_tokens", None)
        if reserve is None:
            # A provider that must send a max_tokens (Anthropic) and has none of its own
            # sends this reserve (see _reply_tokens); with no window to take a quarter
            # of, its own default is both.
            reserve = (min(DEFAULT_RESERVED_OUTPUT, window // 4) if window
                       else getattr(self.provider, "default_max_tokens", None) or 0)
        budget = Budget(
            context_window=window,
            reserved_output=int(reserve),
            tools=tools_tokens([t.spec() for t in tools], counter),
            cap=policy.token_budget,
        )
        if not isinstance(policy.namespace, str) or "{" in policy.namespace:
            # A namespace resolved per turn from the turn's context (seed 004).
            policy = policy.replace(namespace=resolve_namespace(policy.namespace, self._context))
        long_term = memory.long_term(policy) if memory is not None else None
        recalled = long_term.recall(prompt) if long_term is not None else []
        summary = memory.context().summary if memory is not None else None
        history = memory.history() if memory is not None else []
        return _Plan(
            memory=memory,
            policy=policy,
            auto=auto,
            tools=tools,
            counter=counter,
            budget=budget,
            long_term=long_term,
            recalled=recalled,
            summary=summary,
            history=history,
            context=context_text(self._context),
            alternate=self._needs_alternation(),
        )

    def _needs_alternation(self) -> bool:
        """Whether the provider's chat template needs strict user/assistant alternation
        (asked once per client; a provider that cannot tell needs none)."""
        ask = getattr(self.provider, "needs_alternation", None)
        if not callable(ask):
            return False
        try:
            return bool(ask())
        except Exception:  # noqa: BLE001 - a question about shape never stops a send
            return False

    def _assemble(self, plan: _Plan, turn: Sequence[Message]) -> AssembledRequest:
        parts = RequestParts(
            instructions=self.instructions,
            memories=[e.content for e in plan.recalled],
            inject=plan.policy.inject,
            context=plan.context,
            summary=plan.summary,
            history=plan.history,
            turn=turn,
            exclude_system=plan.policy.exclude_system,
        )
        assembled = assemble(parts, counter=plan.counter, budget=plan.budget)
        if plan.memory is not None and assembled.counted:
            plan.memory.save_counts(assembled.counted)
        return assembled

    def _request(
        self, plan: _Plan, assembled: AssembledRequest, schema: dict[str, Any] | None
    ) -> ChatRequest:
        messages = assembled.messages
        if plan.alternate:
            messages = alternating_messages(messages)
        return ChatRequest(
            messages=messages,
            tools=[t.spec() for t in plan.tools],
            max_tokens=self._reply_tokens(plan.budget),
            temperature=self.temperature,
            stream=self.stream,
            response_schema=schema,
        )

    def _reply_tokens(self, budget: Budget) -> int | None:
        """The ``max_tokens`` the request carries: the one given, else none when the
        provider may leave it out or has its own maximum, else (a provider that must
        send one, as Anthropic must) the tokens the budget reserved for the reply, so
        that the reply asked for is the room the request was fitted to leave it."""
        if self.max_tokens:
            return self.max_tokens
        if not getattr(self.provider, "default_max_tokens", None) \
                or getattr(self.provider, "max_output_tokens", None):
            return None
        return budget.reserved_output or None

    @staticmethod
    def _user(prompt: str) -> Message:
        if not isinstance(prompt, str):
            raise RequestError(f"A prompt must be text, not {type(prompt).__name__}.")
        return Message(role="user", content=prompt)

    # -- preflight ------------------------------------------------------------------------

    def preflight(self, prompt: str, *, schema: ResponseSchema | None = None,
                  with_prompt: bool = True) -> Preflight:
        """The request ``execute(prompt)`` would send first, without sending it.

        ``with_prompt=False`` leaves the prompt's user turn out: the request around a
        prompt not typed yet (an application that refuses to send a blank prompt shows
        that rather than an empty user message that never goes out).
        """
        response_schema = _Schema(schema).json_schema if schema is not None else None
        plan = self._plan(prompt)
        user = self._user(prompt)
        assembled = self._assemble(plan, [user] if with_prompt else [])
        request = self._request(plan, assembled, response_schema)
        try:
            described = self.provider.describe_request(request)
        except Exception:  # noqa: BLE001 - the payload is what matters; the rest is a courtesy
            described = {}
        http = {k: v for k, v in described.items() if k != "json"}
        # The description carries the exact body: a long request is not built twice.
        payload = described.get("json")
        if not isinstance(payload, dict):
            payload = self.provider.build_payload(request)
        return Preflight(
            request=request,
            assembled=assembled,
            payload=payload,
            provider=provider_note(self.provider),
            http=http,
            recalled=list(plan.recalled),
        )

    # -- running ---------------------------------------------------------------------------

    def _call(
        self, request: ChatRequest, cancel: CancelToken, keep_partial: bool
    ) -> Generator[RunEvent, None, ChatResponse]:
        fold = _Fold()
        try:
            cancel.raise_if_cancelled()
            if self.stream:
                events = iter(self.provider.stream(request, cancel))
                try:
                    for event in events:
                        fold.add(event)
                        yield event
                        cancel.raise_if_cancelled()
                finally:
                    # Closing the provider's generator closes its connection at once.
                    close = getattr(events, "close", None)
                    if callable(close):
                        close()
                return fold.response()
            reply = self.provider.complete(request, cancel)
            cancel.raise_if_cancelled()
            for event in _response_events(reply):
                yield event
            return reply
        except OperationCancelledError:
            partial = fold.response()
            if keep_partial and partial.text:
                partial.stopped = True
                partial.tool_calls = []
                return partial
            raise

    def _run_tool(
        self,
        call: dict[str, Any],
        tools: dict[str, Tool],
        cancel: CancelToken,
    ) -> tuple[str, str | None]:
        """``(content, error)`` of one tool call; ``error`` is None on success."""
        name = call["function"]["name"]
        found = tools.get(name)
        if found is None:
            known = ", ".join(sorted(tools)) or "none"
            error = f"there is no tool named {name!r} (the tools are: {known})"
            return f"Error: {error}.", error
        try:
            arguments = arguments_of(call)
        except ValueError as exc:
            error = f"the arguments are not a JSON object ({exc})"
            return f"Error: {error}.", error
        problems = found.check_arguments(arguments)
        if problems:
            error = "the arguments do not match the tool's parameters: " + "; ".join(problems)
            return f"Error: {error}.", error
        timeout = found.timeout if found.timeout is not None else self.tool_timeout
        try:
            value = _call_with_timeout(found.function, arguments, timeout, cancel, name)
        except OperationCancelledError:
            raise
        except _ToolTimeout:
            error = f"the tool {name!r} did not finish within {timeout:g} seconds"
            return f"Error: {error}.", error
        except Exception as exc:  # noqa: BLE001 - the model sees the failure and may recover
            error = f"{type(exc).__name__}: {exc}"
            return f"Error: the tool {name!r} failed: {error}", error
        return tool_result_text(value), None

    def _turn(
        self,
        plan: _Plan,
        prompt: str,
        turn_prompt: Message,
        cancel: CancelToken,
        keep_partial: bool,
        schema: dict[str, Any] | None,
    ) -> Generator[RunEvent, None, _Turn]:
        turn: list[Message] = [turn_prompt]
        tools = {t.name: t for t in plan.tools}
        stats = ToolStats()
        usage: Usage | None = None
        reply = ChatResponse()
        step = 0
        step_limit = False
        model_name = getattr(self.provider, "model", None)
        while True:
            step += 1
            assembled = self._assemble(plan, turn)
            request = self._request(plan, assembled, schema)
            reply = yield from self._call(request, cancel, keep_partial)
            usage = _add_usage(usage, reply.usage)
            metadata: dict[str, Any] = {
                "model": reply.model or model_name,
                "finish_reason": reply.finish_reason,
            }
            if reply.usage is not None:
                metadata["usage"] = reply.usage.to_json()
            if reply.stopped:
                metadata["stopped"] = True
            calls = _normal_calls(reply.tool_calls, step)
            assistant = Message(
                role="assistant",
                content=reply.text,
                tool_calls=calls or None,
                metadata=metadata,
                parts=[{"type": "reasoning", "text": reply.reasoning}] if reply.reasoning else None,
            )
            turn.append(assistant)
            if not calls:
                break
            last_step = step >= self.max_steps
            for call in calls:
                name = call["function"]["name"]
                yield ToolStarted(call["id"], name, call["function"]["arguments"])
                error: str | None
                if last_step:
                    error = f"not run: the step limit of {self.max_steps} model calls was reached"
                    content = f"Error: {error}."
                else:
                    content, error = self._run_tool(call, tools, cancel)
                    stats.total_calls += 1
                    stats.by_tool[name] = stats.by_tool.get(name, 0) + 1
                    if error is not None:
                        stats.failures += 1
                tool_meta: dict[str, Any] = {"error": error} if error is not None else {}
                turn.append(
                    Message(
                        role="tool",
                        content=content,
                        tool_call_id=call["id"],
                        name=name,
                        metadata=tool_meta,
                    )
                )
                yield ToolFinished(call["id"], name, content, error)
            if last_step:
                step_limit = True
                break
            cancel.raise_if_cancelled()
        return _Turn(
            prompt=prompt,
            messages=turn,
            text=reply.text,
            usage=usage,
            finish_reason="step_limit" if step_limit else reply.finish_reason,
            model=reply.model or model_name,
            reasoning=reply.reasoning,
            steps=step,
            stopped=reply.stopped,
            step_limit_reached=step_limit,
            stats=stats,
        )

    def _commit(
        self, plan: _Plan, turn: _Turn, replacing: Sequence[Message] | None = None
    ) -> tuple[list[Message], bool]:
        memory = plan.memory
        if memory is None:
            return [copy_message(m) for m in turn.messages], False
        if plan.auto and replacing is not None:
            # Regenerate: the prompt is stored already; the new reply takes the old
            # one's place in one step.
            stored = memory.replace([int(m.id) for m in replacing if m.id is not None],
                                    turn.messages[1:])
            appended = True
        elif plan.auto:
            stored = memory.extend(turn.messages)
            appended = True
        else:
            stored = [copy_message(m) for m in turn.messages]
            appended = False

        def account(context: SessionContext) -> None:
            if turn.usage is not None:
                context.token_usage.input_tokens += turn.usage.input_tokens
                context.token_usage.output_tokens += turn.usage.output_tokens
            context.tool_stats.total_calls += turn.stats.total_calls
            context.tool_stats.failures += turn.stats.failures
            for name, count in turn.stats.by_tool.items():
                context.tool_stats.by_tool[name] = context.tool_stats.by_tool.get(name, 0) + count

        if turn.usage is not None or turn.stats.total_calls:
            memory.update_context(account)
        if plan.long_term is not None and not turn.stopped:
            plan.long_term.capture(turn.prompt, turn.text)
        return stored, appended

    def _response(
        self, plan: _Plan, turn: _Turn, stored: list[Message], appended: bool
    ) -> Response:
        return Response(
            text=turn.text,
            usage=turn.usage,
            messages=stored,
            appended=appended,
            finish_reason=turn.finish_reason,
            model=turn.model,
            reasoning=turn.reasoning,
            steps=turn.steps,
            stopped=turn.stopped,
            step_limit_reached=turn.step_limit_reached,
            recalled=list(plan.recalled),
            tool_stats=copy.deepcopy(turn.stats),
        )

    def _execute(
        self, prompt: str, cancel: CancelToken, keep_partial: bool
    ) -> Generator[RunEvent, None, Response]:
        user = self._user(prompt)
        compaction_id, compaction_note = self._auto_compact()
        plan = self._plan(prompt)
        if plan.memory is not None:
            plan.memory.begin_run()
        turn = yield from self._turn(plan, prompt, user, cancel, keep_partial, None)
        stored, appended = self._commit(plan, turn)
        response = self._response(plan, turn, stored, appended)
        response.compaction_id = compaction_id
        response.compaction_note = compaction_note
        return response

    def _regenerate(self, cancel: CancelToken) -> Generator[RunEvent, None, Response]:
        memory = self.active_memory
        if memory is None:
            raise RequestError("Regenerate asks again for a reply in memory; this model has "
                               "no memory.")
        found = memory.last_turn()
        if found is None:
            raise RequestError("There is no prompt in this session to ask again.")
        before, prompt, old = found
        plan = self._plan(prompt.content or "")
        plan.history = before  # the request as it was before the old reply
        asked = copy_message(prompt)
        asked.id = asked.position = None
        memory.begin_run()
        turn = yield from self._turn(plan, prompt.content or "", asked, cancel, False, None)
        stored, appended = self._commit(plan, turn, replacing=old)
        response = self._response(plan, turn, stored, appended)
        response.replaced = old if appended else []
        return response

    def stream_regenerate(self, *, cancel: CancelToken | None = None) -> Run:
        """Ask again for the reply to the last user message in memory (see the module
        documentation): the request is the one that prompt was sent with, the history
        before it; with automatic memory the new reply replaces the old one (the
        messages after the prompt) in one step once it is complete. A failure or a stop
        changes nothing: the old reply stays. ``Response.replaced`` holds the messages
        that were replaced."""
        token = cancel or CancelToken()
        return Run(self._regenerate(token), token)

    def stream_run(
        self, prompt: str, *, cancel: CancelToken | None = None, keep_partial: bool = False
    ) -> Run:
        """Start a turn whose events are read by iterating over the returned :class:`Run`."""
        token = cancel or CancelToken()
        return Run(self._execute(prompt, token, keep_partial), token)

    def execute(
        self,
        prompt: str,
        *,
        on_event: Callable[[RunEvent], None] | None = None,
        on_text: Callable[[str], None] | None = None,
        cancel: CancelToken | None = None,
        keep_partial: bool = False,
    ) -> Response:
        """Run one turn (see the module documentation) and return its :class:`Response`.

        ``on_text`` receives the reply's text as it streams, ``on_event`` every event
        (stream events, :class:`ToolStarted`, :class:`ToolFinished`).
        """
        run = self.stream_run(prompt, cancel=cancel, keep_partial=keep_partial)
        for event in run:
            if on_event is not None:
                on_event(event)
            if on_text is not None and isinstance(event, TextDelta):
                on_text(event.text)
        assert run.response is not None
        return run.response

    def execute_with_schema(
        self,
        prompt: str,
        schema: ResponseSchema,
        retries: int = 2,
        *,
        on_event: Callable[[RunEvent], None] | None = None,
        cancel: CancelToken | None = None,
    ) -> StructuredResponse:
        """Run a turn whose reply must match ``schema`` (a pydantic model class or a JSON
        schema), retrying up to ``retries`` times; see the module documentation."""
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise RequestError(f"retries must be 0 or more, not {retries!r}.")
        checker = _Schema(schema)
        user = self._user(prompt)
        token = cancel or CancelToken()
        plan = self._plan(prompt)
        if plan.memory is not None:
            plan.memory.begin_run()
        errors: list[str] = []
        replies: list[str] = []
        usage: Usage | None = None
        stats = ToolStats()
        for attempt in range(retries + 1):
            if attempt == 0:
                asked = user
            else:
                asked = Message(
                    role="user", content=RETRY_PROMPT.format(error=errors[-1], prompt=prompt)
                )
            events = self._turn(plan, prompt, asked, token, False, checker.json_schema)
            while True:
                try:
                    event = next(events)
                except StopIteration as done:
                    turn: _Turn = done.value
                    break
                if on_event is not None:
                    on_event(event)
            usage = _add_usage(usage, turn.usage)
            stats.total_calls += turn.stats.total_calls
            stats.failures += turn.stats.failures
            for name, count in turn.stats.by_tool.items():
                stats.by_tool[name] = stats.by_tool.get(name, 0) + count
            replies.append(turn.text)
            value, error = checker.parse(turn.text)
            if error is None:
                # Memory keeps the request as the user asked it, not the retry wording.
                turn.messages[0] = user
                final = turn.messages[-1]
                final.metadata = {**final.metadata, "structured": True, "attempts": attempt + 1}
                turn.usage = usage
                turn.stats = stats
                stored, appended = self._commit(plan, turn)
                base = self._response(plan, turn, stored, appended)
                return StructuredResponse(**vars(base), value=value, attempts=attempt + 1)
            errors.append(error)
        raise StructuredOutputError(
            f"The reply did not match the schema in {retries + 1} attempt"
            f"{'s' if retries else ''}; the last error: {errors[-1]}. Memory was not changed.",
            errors=errors,
            replies=replies,
        )
