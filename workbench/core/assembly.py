"""Request assembly: the messages of one model call, fitted to the token budget (SPEC §3).

The parts go in this order: the **system message** (the agent's instructions, with the
recalled memory entries under a heading when they are injected there), the **context
block** (recalled entries when injected as context, and any structured context), the
**summary** of folded history, the **history** (the session's active messages in order),
and the **turn** (the new prompt, then whatever the current turn has added: assistant
tool calls and their results).

Fitting: the budget is the context window minus the tokens reserved for the reply and
for the tool definitions (and at most the policy's cap). The system message, context,
summary, a leading system message of the history and the turn always stay; if they alone
exceed the budget, :class:`~workbench.errors.ContextBudgetError` names every size.
History leaves oldest first, one *unit* at a time: an assistant message with tool calls
and the tool messages answering it form one unit that stays or leaves whole, so the
request never holds half of one. The kept history is always a recent suffix.

Strict role order: after the system messages, the history a request carries starts with
a user message; assistant and tool messages a cut leaves in front of the first kept user
message are left out (``the history may not start with an assistant or tool message``).
For providers whose chat template needs strict alternation,
:func:`alternating_messages` reshapes the payload's messages (never memory).

Two shapes a provider would refuse are left out with a reason rather than sent: a tool
result whose call is not in the history (``tool result without its call``) and an
assistant tool call some of whose results are missing, together with the results it has
(``tool call without its result``). Preflight shows both; memory itself is never changed
by assembly.

Speed: token counts come from each message's cache (``token_count`` with the encoding
that produced it); only messages without a count in the counter's encoding are counted,
and their counts are written back to them (see :attr:`AssembledRequest.counted`). The
history is walked backwards from the newest message and the walk stops at the first unit
that does not fit, so the cost grows with what is kept, not with the session's length.
Everything older is reported as left out lazily, when :attr:`AssembledRequest.left_out`
is read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from workbench.core.conversation import ROLES, Message
from workbench.core.provider import ToolSpec
from workbench.core.records import FieldsJson
from workbench.core.summarizers import SUMMARY_HEADING as EXTRACTIVE_HEADING
from workbench.core.tokens import REPLY_PRIMING_TOKENS, TokenCounter
from workbench.errors import ContextBudgetError, RequestError

__all__ = [
    "MEMORY_HEADING",
    "REASON_BUDGET",
    "REASON_EXCLUDED_SYSTEM",
    "REASON_LEADING_REPLY",
    "REASON_ORPHAN_RESULT",
    "REASON_UNANSWERED_CALL",
    "SUMMARY_HEADING",
    "summary_message_text",
    "AssembledRequest",
    "Budget",
    "LeftOut",
    "LeftOutRange",
    "RequestParts",
    "TokenBreakdown",
    "alternating_messages",
    "assemble",
    "call_ids",
    "context_text",
    "history_shapes",
    "prefix_reasons",
    "tool_units",
    "tools_tokens",
]

MEMORY_HEADING = "Relevant memories from earlier conversations:"
CONTEXT_HEADING = "Context for this conversation:"
STRUCTURED_HEADING = "Structured context:"
SUMMARY_HEADING = "Summary of the earlier conversation:"


def summary_message_text(summary: str) -> str:
    """The text of the system message that carries a session's long-term summary."""
    text = summary.strip()
    if text.startswith(EXTRACTIVE_HEADING):
        return text  # headed already: a second heading would say it twice
    return SUMMARY_HEADING + "\n" + text

REASON_BUDGET = "did not fit the token budget"
REASON_ORPHAN_RESULT = "tool result without its call"
REASON_UNANSWERED_CALL = "tool call without its result"
REASON_EXCLUDED_SYSTEM = "system message excluded by the memory policy"
REASON_LEADING_REPLY = "the history may not start with an assistant or tool message"

#: ``metadata["request_part"]`` of the messages assembly creates, so a viewer can tell
#: them from stored history.
PART_KEY = "request_part"


@dataclass(frozen=True)
class Budget:
    """The tokens a request's messages may use.

    ``context_window`` minus ``reserved_output`` (tokens kept for the reply), capped by
    ``cap`` (a policy's token budget), minus ``tools`` (the tool definitions). ``None``
    for both window and cap means no limit.
    """

    context_window: int | None = None
    reserved_output: int = 0
    tools: int = 0
    cap: int | None = None

    @property
    def available(self) -> int | None:
        """Tokens left for the messages (reply priming included), or ``None``."""
        limits = []
        if self.context_window is not None:
            limits.append(self.context_window - self.reserved_output)
        if self.cap is not None:
            limits.append(self.cap)
        if not limits:
            return None
        return min(limits) - self.tools

    def describe(self) -> str:
        """The budget's arithmetic in words, for error messages."""
        if self.available is None:
            return "no limit"
        parts = []
        if self.context_window is not None:
            parts.append(
                f"a context window of {self.context_window} minus {self.reserved_output} "
                "reserved for the reply"
            )
        if self.cap is not None:
            parts.append(f"the policy's token budget of {self.cap}")
        text = " and at most ".join(parts)
        if self.tools:
            text += f", minus {self.tools} for the tool definitions"
        return text

    def to_json(self) -> dict[str, int | None]:
        return {
            "context_window": self.context_window,
            "reserved_output": self.reserved_output,
            "tools": self.tools,
            "cap": self.cap,
            "available": self.available,
        }


@dataclass
class RequestParts:
    """What goes into a request, before fitting.

    ``memories`` are the recalled entries' texts, best first; ``inject`` says where they
    go (``instructions`` or ``context``). ``context`` is structured context already
    rendered as text (see :func:`context_text`). ``history`` holds the session's active
    messages in order; ``turn`` the new prompt and what the current turn added.
    ``strict_order`` (the default for requests) leaves out the assistant and tool
    messages in front of the first kept user message; measuring a session's history as
    it stands (compaction's figures) turns it off.
    """

    instructions: str | None = None
    memories: Sequence[str] = ()
    inject: str = "instructions"
    context: str | None = None
    summary: str | None = None
    history: Sequence[Message] = ()
    turn: Sequence[Message] = ()
    exclude_system: bool = False
    strict_order: bool = True


@dataclass
class TokenBreakdown:
    """Tokens per part of an assembled request; ``total`` includes the reply priming."""

    system: int = 0
    memory: int = 0
    summary: int = 0
    history: int = 0
    prompt: int = 0

    @property
    def total(self) -> int:
        return (
            self.system + self.memory + self.summary + self.history + self.prompt
            + REPLY_PRIMING_TOKENS
        )

    def to_json(self) -> dict[str, int]:
        return {**asdict(self), "total": self.total}


@dataclass(frozen=True)
class LeftOut(FieldsJson):
    """A history message the request does not carry, and why."""

    message_id: int | None
    position: int | None
    reason: str


@dataclass(frozen=True)
class LeftOutRange(FieldsJson):
    """Consecutive history messages left out of a request for one reason."""

    first_id: int | None
    first_position: int | None
    last_id: int | None
    last_position: int | None
    count: int
    reason: str


@dataclass
class AssembledRequest:
    """The fitted messages of a request, their tokens per part, and what was left out."""

    messages: list[Message]
    tokens: TokenBreakdown
    budget: Budget
    history: list[Message]
    counted: list[Message] = field(default_factory=list)
    _source: Sequence[Message] = field(default=(), repr=False)
    _start: int = field(default=0, repr=False)
    _cut: int = field(default=-1, repr=False)
    _failed: tuple[int, ...] = field(default=(), repr=False)
    _leftover: tuple[int, ...] = field(default=(), repr=False)
    _skipped: dict[int, str] = field(default_factory=dict, repr=False)
    _exclude_system: bool = field(default=False, repr=False)
    _left_out: list[LeftOut] | None = field(default=None, repr=False)

    @property
    def left_out(self) -> list[LeftOut]:
        """Every history message not in the request, in order, with its reason."""
        if self._left_out is None:
            self._left_out = self._compute_left_out()
        return self._left_out

    @property
    def left_out_count(self) -> int:
        """How many history messages were left out (without building the list)."""
        if self._left_out is not None:
            return len(self._left_out)
        prefix = max(0, self._cut - self._start + 1)
        return prefix + len(self._failed) + len(self._leftover) + len(self._skipped)

    def _reasons(self) -> tuple[dict[int, str], dict[int, tuple[int | None, int | None]]]:
        """Why each left-out history index left, and the ``(id, position)`` of each."""
        source = self._source
        reasons: dict[int, str] = dict(self._skipped)
        where: dict[int, tuple[int | None, int | None]] = {
            i: (source[i].id, source[i].position) for i in reasons
        }
        issued: set[str] = set()
        # Everything up to the unit that did not fit leaves for the budget, except what
        # would have been left out anyway; a forward pass tells those apart. A source
        # that can tell the shapes of its messages without their text (a stored
        # session's history) is asked for them instead of reading every message.
        for offset, (mid, pos, role, call_id, ids) in enumerate(
            history_shapes(source, self._start, self._cut)
        ):
            i = self._start + offset
            if role == "tool" and (call_id or "") not in issued:
                reasons[i] = REASON_ORPHAN_RESULT
            elif role == "system" and self._exclude_system:
                reasons[i] = REASON_EXCLUDED_SYSTEM
            else:
                reasons[i] = REASON_BUDGET
            where[i] = (mid, pos)
            if role == "assistant" and ids:
                issued.update(ids)
        for i in self._failed:
            reasons[i] = REASON_BUDGET
            where[i] = (source[i].id, source[i].position)
        for i in self._leftover:
            found = (source[i].tool_call_id or "") in issued
            reasons[i] = REASON_BUDGET if found else REASON_ORPHAN_RESULT
            where[i] = (source[i].id, source[i].position)
        return reasons, where

    def _compute_left_out(self) -> list[LeftOut]:
        reasons, where = self._reasons()
        return [LeftOut(*where[i], reason) for i, reason in sorted(reasons.items())]

    def left_out_ranges(self) -> list[LeftOutRange]:
        """The left-out history as runs of consecutive messages with one reason each,
        in order: what preflight reports instead of one entry per message.

        The reasons are those of :attr:`left_out`, but the messages older than the cut
        are not read one by one: only those that may leave for another reason than the
        budget (tool results, system messages, assistant tool calls) are looked at (see
        :func:`sparse_shapes`), so a stored session's long prefix costs one query.
        """
        start, cut = self._start, self._cut
        explicit: dict[int, str] = {
            i: r for i, r in self._skipped.items() if not start <= i <= cut
        }
        asked = sorted({self._source[i].tool_call_id or "" for i in self._leftover})
        prefix, issued, locate = prefix_reasons(
            self._source, start, cut, exclude_system=self._exclude_system, asked=asked
        )
        explicit.update(prefix)
        for i in self._failed:
            explicit[i] = REASON_BUDGET
        for i in self._leftover:
            found = (self._source[i].tool_call_id or "") in issued
            explicit[i] = REASON_BUDGET if found else REASON_ORPHAN_RESULT

        runs: list[list[Any]] = []

        def add(first: int, last: int, reason: str) -> None:
            if runs and runs[-1][2] == reason and runs[-1][1] == first - 1:
                runs[-1][1] = last
            else:
                runs.append([first, last, reason])

        cursor = start  # the next index of the prefix not yet in a run
        for i in sorted(explicit):
            if i > cut and cursor <= cut:
                add(cursor, cut, REASON_BUDGET)
                cursor = cut + 1
            if start <= i <= cut and cursor < i:
                add(cursor, i - 1, REASON_BUDGET)
            if start <= i <= cut:
                cursor = i + 1
            add(i, i, explicit[i])
        if cursor <= cut:
            add(cursor, cut, REASON_BUDGET)
        out: list[LeftOutRange] = []
        for first, last, reason in runs:
            first_id, first_position = locate(first)
            last_id, last_position = locate(last)
            out.append(LeftOutRange(first_id, first_position, last_id, last_position,
                                    last - first + 1, reason))
        return out


Shape = tuple[int | None, int | None, str, str | None, list[str]]


def history_shapes(source: Sequence[Message], start: int, end: int) -> Sequence[Shape]:
    """``(id, position, role, tool_call_id, call ids)`` of ``source[start..end]``.

    A source with a ``shapes(start, end)`` method answers itself (a stored history reads
    them without the messages' text); any other sequence is read message by message.
    """
    if end < start:
        return []
    shapes = getattr(source, "shapes", None)
    if callable(shapes):
        return shapes(start, end)  # type: ignore[no-any-return]
    out: list[Shape] = []
    for i in range(start, end + 1):
        msg = source[i]
        ids = call_ids(msg) if msg.role == "assistant" and msg.tool_calls else []
        out.append((msg.id, msg.position, msg.role, msg.tool_call_id, ids))
    return out


Locate = Callable[[int], tuple[int | None, int | None]]


def prefix_reasons(
    source: Sequence[Message],
    start: int,
    end: int,
    *,
    exclude_system: bool,
    asked: Sequence[str] = (),
) -> tuple[dict[int, str], set[str], Locate]:
    """Why the messages ``source[start..end]`` (all left out) leave, where the reason is
    not the budget: ``{index: reason}`` for tool results whose call is not earlier in
    that stretch and, with ``exclude_system``, system messages. Also which of the call
    ids ``asked`` an assistant message of the stretch made, and a function giving
    ``(id, position)`` of any index.

    A source with a ``prefix_reasons`` method of the same signature (a stored session's
    history) answers itself, in the database, without reading the messages one by one.
    """
    own = getattr(source, "prefix_reasons", None)
    if callable(own):
        return own(start, end, exclude_system=exclude_system, asked=asked)  # type: ignore[no-any-return]
    reasons: dict[int, str] = {}
    issued: set[str] = set()
    for i in range(start, end + 1):
        msg = source[i]
        if msg.role == "tool" and (msg.tool_call_id or "") not in issued:
            reasons[i] = REASON_ORPHAN_RESULT
        elif msg.role == "system" and exclude_system:
            reasons[i] = REASON_EXCLUDED_SYSTEM
        if msg.role == "assistant" and msg.tool_calls:
            issued.update(call_ids(msg))

    def locate(index: int) -> tuple[int | None, int | None]:
        return source[index].id, source[index].position

    return reasons, issued & set(asked), locate


def call_ids(message: Message) -> list[str]:
    """The ids of an assistant message's tool calls ('' for a call without an id)."""
    ids = []
    for call in message.tool_calls or ():
        cid = call.get("id") if isinstance(call, dict) else None
        ids.append(cid if isinstance(cid, str) else "")
    return ids


def tool_units(messages: Sequence[Message]) -> list[list[int]]:
    """The messages' indices grouped into units, in order of each unit's first message.

    An assistant message with tool calls and the tool messages answering its calls (the
    nearest earlier call with the same id) are one unit; every other message, and a tool
    result whose call is absent, is a unit of its own.
    """
    units: list[list[int]] = []
    open_calls: dict[str, list[int]] = {}
    for i, msg in enumerate(messages):
        if msg.role == "tool":
            unit = open_calls.get(msg.tool_call_id or "")
            if unit is not None:
                unit.append(i)
                continue
        unit = [i]
        units.append(unit)
        if msg.role == "assistant" and msg.tool_calls:
            for cid in call_ids(msg):
                if cid:
                    open_calls[cid] = unit
    return units


def tools_tokens(tools: Sequence[ToolSpec], counter: TokenCounter) -> int:
    """Tokens the tool definitions take, counted as their JSON text."""
    if not tools:
        return 0
    text = json.dumps([t.to_openai() for t in tools], ensure_ascii=False, sort_keys=True)
    return counter.count_text(text)


def context_text(value: Any) -> str | None:
    """Structured context rendered for the model: text as it is, anything else as JSON."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        value = dump(mode="json")
    else:
        to_json = getattr(value, "to_json", None)
        if callable(to_json):
            value = to_json()
        else:
            import dataclasses

            if dataclasses.is_dataclass(value) and not isinstance(value, type):
                value = dataclasses.asdict(value)
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True, default=str)


def _memory_section(memories: Sequence[str]) -> str:
    return MEMORY_HEADING + "\n" + "\n".join(f"- {m.strip()}" for m in memories)


def _with_part(message: Message, part: str) -> Message:
    message.metadata = {**message.metadata, PART_KEY: part}
    return message


class _Costs:
    """Cached token counts, counting (and caching) only what is missing."""

    def __init__(self, counter: TokenCounter):
        self.counter = counter
        self.encoding = counter.encoding_name
        self.counted: list[Message] = []

    def __call__(self, msg: Message) -> int:
        count = msg.token_count
        if count is None or msg.token_encoding != self.encoding:
            count = self.counter.count_message(msg)
            msg.token_count = count
            msg.token_encoding = self.encoding
            if msg.id is not None:
                self.counted.append(msg)
        return count


def _check_role(msg: Message, where: str) -> None:
    if msg.role not in ROLES:
        ident = f" (message {msg.id})" if msg.id is not None else ""
        raise RequestError(
            f"The {where} holds a message{ident} with role {msg.role!r}; a role must be one of "
            f"{', '.join(ROLES)}."
        )


def assemble(
    parts: RequestParts,
    *,
    counter: TokenCounter,
    budget: Budget | None = None,
) -> AssembledRequest:
    """Build and fit the messages of a request (see the module documentation).

    Raises :class:`ContextBudgetError` when the parts that always stay exceed the budget,
    and :class:`RequestError` for a message whose role is not a chat role.
    """
    budget = budget or Budget()
    cost = _Costs(counter)
    history = parts.history
    for msg in parts.turn:
        _check_role(msg, "prompt")

    # -- the parts that always stay ---------------------------------------------------
    start = 0
    leading: Message | None = None
    if history and history[0].role == "system" and not parts.exclude_system:
        leading = history[0]
        start = 1
    instructions = (parts.instructions or "").strip()
    memories = [m for m in parts.memories if m and m.strip()]
    into_system = parts.inject != "context" and bool(memories)

    head: list[Message] = []
    tokens = TokenBreakdown()
    slot_is_leading = not instructions and leading is not None
    if instructions or slot_is_leading:
        base = (
            _with_part(Message(role="system", content=instructions), "system")
            if instructions
            else leading
        )
        assert base is not None
        tokens.system = cost(base)
        if into_system:
            system = base.copy()
            system.content = (
                (base.content or "").rstrip() + "\n\n" + _memory_section(memories)
            ).lstrip()
            # A new message: its count must not be written back to the stored one.
            system.id = None
            system.token_count = None
            system = _with_part(system, "system")
            tokens.memory = cost(system) - tokens.system
        else:
            system = base
        head.append(system)
    elif into_system:
        system = _with_part(Message(role="system", content=_memory_section(memories)), "memory")
        tokens.memory = cost(system)
        head.append(system)

    block: list[str] = []
    if memories and not into_system:
        block.append(_memory_section(memories))
    if parts.context:
        block.append(STRUCTURED_HEADING + "\n" + parts.context.strip())
    if block:
        context = _with_part(
            Message(role="system", content=CONTEXT_HEADING + "\n\n" + "\n\n".join(block)),
            "context",
        )
        tokens.memory += cost(context)
        head.append(context)
    if parts.summary and parts.summary.strip():
        summary = _with_part(
            Message(role="system", content=summary_message_text(parts.summary)),
            "summary",
        )
        tokens.summary = cost(summary)
        head.append(summary)
    if leading is not None and not slot_is_leading:
        tokens.system += cost(leading)
    tokens.prompt = sum(cost(m) for m in parts.turn)

    fixed = tokens.total
    available = budget.available
    if available is not None and fixed > available:
        raise ContextBudgetError(
            f"The request cannot fit: the system message ({tokens.system} tokens), recalled "
            f"memory and context ({tokens.memory}), summary ({tokens.summary}) and prompt "
            f"({tokens.prompt}) need {fixed} tokens with the reply priming, but only "
            f"{available} are available ({budget.describe()}).",
            needed=fixed,
            budget=available,
        )
    room = None if available is None else available - fixed

    # -- history, newest first ---------------------------------------------------------
    kept: list[int] = []
    skipped: dict[int, str] = {}
    pending: dict[str, list[int]] = {}
    failed: list[int] = []
    used = 0
    cut = start - 1
    exclude_system = parts.exclude_system
    encoding = cost.encoding
    keep = kept.append
    limit = room if room is not None else float("inf")
    expect = getattr(history, "expect_room", None)
    if room is not None and callable(expect):
        expect(room)  # a stored history reads what fits in one page (see StoredHistory)
    i = len(history) - 1
    while i >= start:
        msg = history[i]
        role = msg.role
        # The common case first, inlined: a plain user or assistant message.
        if role == "user" or (role == "assistant" and not msg.tool_calls):
            msg_cost = msg.token_count
            if msg_cost is None or msg.token_encoding != encoding:
                msg_cost = cost(msg)
        elif role == "tool":
            pending.setdefault(msg.tool_call_id or "", []).append(i)
            i -= 1
            continue
        elif role == "assistant":
            members = [i]
            answered = True
            for tool_call in msg.tool_calls or ():
                cid = tool_call.get("id") if isinstance(tool_call, dict) else None
                found = pending.pop(cid, None) if isinstance(cid, str) and cid else None
                if found is None:
                    answered = False
                else:
                    members.extend(found)
            if not answered:
                for j in members:
                    skipped[j] = REASON_UNANSWERED_CALL
                i -= 1
                continue
            unit_cost = 0
            for j in members:
                unit_cost += cost(history[j])
            if used + unit_cost > limit:
                cut = i
                failed = members[1:]
                break
            used += unit_cost
            kept.extend(members)
            i -= 1
            continue
        elif role == "system" and exclude_system:
            skipped[i] = REASON_EXCLUDED_SYSTEM
            i -= 1
            continue
        else:
            if role not in ROLES:
                _check_role(msg, "history")
            msg_cost = cost(msg)
        # A single message (the common case above, or another role): kept while it fits.
        if used + msg_cost > limit:
            cut = i
            break
        used += msg_cost
        keep(i)
        i -= 1

    leftover: list[int] = []
    for indices in pending.values():
        if cut < start:
            for j in indices:
                skipped[j] = REASON_ORPHAN_RESULT
        else:
            leftover.extend(indices)

    kept.sort()
    # Strict role order: after the system messages the history starts with a user turn
    # (providers and chat templates refuse anything else), so the assistant and tool
    # messages that a cut left in front of the first kept user message are left out.
    first_turn = 0
    strict = parts.strict_order
    while strict and first_turn < len(kept) and history[kept[first_turn]].role != "user":
        j = kept[first_turn]
        if history[j].role != "system":
            skipped[j] = REASON_LEADING_REPLY
            used -= cost(history[j])
        first_turn += 1
    if first_turn:
        kept = [j for j in kept[:first_turn] if history[j].role == "system"] + kept[first_turn:]
    kept_messages = [history[j] for j in kept]
    tokens.history = used
    messages = list(head)
    if leading is not None and not slot_is_leading:
        messages.append(leading)
    messages.extend(kept_messages)
    messages.extend(parts.turn)
    return AssembledRequest(
        messages=messages,
        tokens=tokens,
        budget=budget,
        history=([leading] if leading is not None else []) + kept_messages,
        counted=cost.counted,
        _source=history,
        _start=start,
        _cut=cut,
        _failed=tuple(failed),
        _leftover=tuple(leftover),
        _skipped=skipped,
        _exclude_system=exclude_system,
    )


def _call_text(message: Message) -> str:
    lines = [message.content.strip()] if message.content and message.content.strip() else []
    for call in message.tool_calls or ():
        function = call.get("function") if isinstance(call, dict) else None
        function = function if isinstance(function, dict) else {}
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        lines.append(f"[called tool {function.get('name') or '?'} with {arguments or '{}'}]")
    return "\n".join(lines)


def alternating_messages(messages: Sequence[Message]) -> list[Message]:
    """``messages`` reshaped for a provider whose chat template needs strict alternation.

    One system message first (the leading system messages joined), then user and
    assistant turns in alternation: a later system message and a tool result become user
    text, an assistant tool call becomes assistant text naming the call, and consecutive
    messages of one role are joined into one (paragraphs in order). The messages given
    are not changed; this shapes a payload, never memory.
    """
    out: list[Message] = []
    index = 0
    system: list[str] = []
    while index < len(messages) and messages[index].role == "system":
        if messages[index].content and messages[index].content.strip():
            system.append(messages[index].content.strip())
        index += 1
    if system:
        out.append(Message(role="system", content="\n\n".join(system)))
    names: dict[str, str] = {}
    for message in messages[index:]:
        if message.role == "assistant":
            for call in message.tool_calls or ():
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict) and call.get("id"):
                    names[str(call["id"])] = str(function.get("name") or "?")
            role, text = "assistant", _call_text(message)
        elif message.role == "tool":
            name = message.name or names.get(message.tool_call_id or "", "?")
            role, text = "user", f"[result of tool {name}]\n{message.content or ''}".rstrip()
        elif message.role == "system":
            role, text = "user", f"[system note]\n{message.content or ''}".rstrip()
        else:
            role, text = "user", message.content or ""
        if out and out[-1].role == role and role != "system":
            out[-1].content = (out[-1].content or "") + "\n\n" + text
        else:
            out.append(Message(role=role, content=text))
    return out
