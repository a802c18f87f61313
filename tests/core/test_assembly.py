"""Request assembly and budget fitting (issue 3 "Request assembly", SPEC §3).

The examples pin the order of the parts, what leaves first and why; the property tests
throw random histories with tool groups (answered, half answered, orphaned results) and
budgets at the assembler and check what must always hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.core.assembly import (
    MEMORY_HEADING,
    REASON_BUDGET,
    REASON_EXCLUDED_SYSTEM,
    REASON_LEADING_REPLY,
    REASON_ORPHAN_RESULT,
    REASON_UNANSWERED_CALL,
    SUMMARY_HEADING,
    Budget,
    RequestParts,
    alternating_messages,
    assemble,
    call_ids,
    tool_units,
)
from workbench.core.conversation import Message
from workbench.core.tokens import REPLY_PRIMING_TOKENS, TokenCounter, get_counter
from workbench.errors import ContextBudgetError, RequestError


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return get_counter()


def numbered(messages: Sequence[Message]) -> list[Message]:
    """Give messages ids and positions as the store would."""
    for i, msg in enumerate(messages):
        msg.id = 100 + i
        msg.position = i
    return list(messages)


def call(cid: str, name: str = "lookup") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}


def user(text: str) -> Message:
    return Message(role="user", content=text)


def assistant(text: str, *calls: str) -> Message:
    return Message(role="assistant", content=text, tool_calls=[call(c) for c in calls] or None)


def result(cid: str, text: str = "ok") -> Message:
    return Message(role="tool", content=text, tool_call_id=cid, name="lookup")


def contents(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages]


# -- order of the parts ----------------------------------------------------------------------


def test_parts_go_in_the_specified_order(counter: TokenCounter) -> None:
    history = numbered([user("first question"), assistant("first answer")])
    parts = RequestParts(
        instructions="You are terse.",
        memories=["Ana likes trains."],
        inject="instructions",
        context='{"city": "Porto"}',
        summary="They talked about Porto.",
        history=history,
        turn=[user("new prompt")],
    )
    built = assemble(parts, counter=counter)
    roles = [m.role for m in built.messages]
    assert roles == ["system", "system", "system", "user", "assistant", "user"]
    system, context, summary = built.messages[:3]
    assert system.content.startswith("You are terse.")
    assert MEMORY_HEADING in system.content and "- Ana likes trains." in system.content
    assert '"city": "Porto"' in context.content and MEMORY_HEADING not in context.content
    assert summary.content == SUMMARY_HEADING + "\nThey talked about Porto."
    assert contents(built.messages[3:]) == ["first question", "first answer", "new prompt"]
    assert built.left_out == []


def test_memories_injected_as_context_go_in_their_own_message(counter: TokenCounter) -> None:
    parts = RequestParts(
        instructions="Be brief.",
        memories=["Ana likes trains.", "Ana lives in Porto."],
        inject="context",
        turn=[user("hi")],
    )
    built = assemble(parts, counter=counter)
    assert built.messages[0].content == "Be brief."
    assert built.messages[1].role == "system"
    assert "- Ana likes trains.\n- Ana lives in Porto." in built.messages[1].content
    assert built.tokens.memory == counter.count_message(built.messages[1])
    assert built.tokens.system == counter.count_message(built.messages[0])


def test_token_parts_add_up_to_the_request_count(counter: TokenCounter) -> None:
    history = numbered(
        [Message(role="system", content="Session rules."), user("a"), assistant("b")]
    )
    parts = RequestParts(
        instructions="Agent rules.",
        memories=["m1"],
        summary="s",
        history=history,
        turn=[user("prompt text")],
    )
    built = assemble(parts, counter=counter)
    t = built.tokens
    assert t.total == t.system + t.memory + t.summary + t.history + t.prompt + REPLY_PRIMING_TOKENS
    assert t.total == counter.count_request(built.messages)
    assert t.prompt == counter.count_message(user("prompt text"))
    assert t.summary > 0 and t.memory > 0 and t.history > 0


def test_without_instructions_the_sessions_system_message_takes_the_memories(
    counter: TokenCounter,
) -> None:
    history = numbered([Message(role="system", content="Session rules."), user("q")])
    built = assemble(
        RequestParts(memories=["a fact"], history=history, turn=[user("p")]), counter=counter
    )
    assert built.messages[0].content.startswith("Session rules.")
    assert "- a fact" in built.messages[0].content
    assert history[0].content == "Session rules."  # the stored message is not changed
    assert [m.role for m in built.messages] == ["system", "user", "user"]


# -- fitting -----------------------------------------------------------------------------------


def test_oldest_history_leaves_first_and_the_rest_is_a_recent_suffix(
    counter: TokenCounter,
) -> None:
    history = numbered([user(f"message number {i}") for i in range(10)])
    parts = RequestParts(instructions="sys", history=history, turn=[user("now")])
    whole = assemble(parts, counter=counter)
    per_message = history[0].token_count
    assert per_message is not None
    room = whole.tokens.total - 4 * per_message  # four messages too many
    built = assemble(parts, counter=counter, budget=Budget(cap=room))
    assert contents(built.history) == [f"message number {i}" for i in range(4, 10)]
    assert [(o.message_id, o.reason) for o in built.left_out] == [
        (100 + i, REASON_BUDGET) for i in range(4)
    ]
    assert built.tokens.total <= room
    assert built.messages[0].content == "sys" and built.messages[-1].content == "now"


def test_a_tool_group_leaves_whole(counter: TokenCounter) -> None:
    history = numbered(
        [
            user("old"),
            assistant("checking", "c1", "c2"),
            result("c1", "first result " * 5),
            result("c2", "second result " * 5),
            user("go on"),
            assistant("done"),
        ]
    )
    parts = RequestParts(history=history, turn=[user("next")])
    whole = assemble(parts, counter=counter)
    # Room for the last turn and the second tool result, not for the whole group.
    tail = sum(history[i].token_count or 0 for i in (3, 4, 5))
    budget = Budget(cap=whole.tokens.total - whole.tokens.history + tail)
    built = assemble(parts, counter=counter, budget=budget)
    assert contents(built.history) == ["go on", "done"]
    assert {o.message_id for o in built.left_out} == {100, 101, 102, 103}
    assert all(o.reason == REASON_BUDGET for o in built.left_out)


def test_the_essential_parts_alone_too_big_is_an_error_naming_the_sizes(
    counter: TokenCounter,
) -> None:
    parts = RequestParts(
        instructions="rules " * 50, summary="summary " * 20, turn=[user("prompt " * 30)]
    )
    with pytest.raises(ContextBudgetError) as err:
        assemble(parts, counter=counter, budget=Budget(context_window=100, reserved_output=20))
    message = str(err.value)
    assert err.value.budget == 80
    assert err.value.needed > 80
    assert f"need {err.value.needed} tokens" in message
    assert "only 80 are available" in message
    assert "context window of 100 minus 20 reserved for the reply" in message


def test_budget_arithmetic() -> None:
    assert Budget().available is None
    assert Budget(context_window=1000, reserved_output=100, tools=50).available == 850
    assert Budget(context_window=1000, reserved_output=100, cap=500, tools=50).available == 450
    assert "minus 50 for the tool definitions" in Budget(cap=10, tools=50).describe()


# -- shapes a provider refuses ----------------------------------------------------------------


def test_a_tool_result_without_its_call_is_left_out_with_the_reason(counter: TokenCounter) -> None:
    history = numbered([user("q"), result("ghost"), assistant("a")])
    built = assemble(RequestParts(history=history, turn=[user("p")]), counter=counter)
    assert contents(built.history) == ["q", "a"]
    assert [(o.message_id, o.reason) for o in built.left_out] == [(101, REASON_ORPHAN_RESULT)]


def test_a_call_without_all_its_results_is_left_out_with_them(counter: TokenCounter) -> None:
    history = numbered([user("q"), assistant("", "c1", "c2"), result("c1"), assistant("a")])
    built = assemble(RequestParts(history=history, turn=[user("p")]), counter=counter)
    assert contents(built.history) == ["q", "a"]
    assert [(o.message_id, o.reason) for o in built.left_out] == [
        (101, REASON_UNANSWERED_CALL),
        (102, REASON_UNANSWERED_CALL),
    ]


def test_reused_call_ids_pair_with_the_nearest_call(counter: TokenCounter) -> None:
    history = numbered(
        [
            assistant("", "call_0"),
            result("call_0", "one"),
            assistant("", "call_0"),
            result("call_0", "two"),
        ]
    )
    assert tool_units(history) == [[0, 1], [2, 3]]
    built = assemble(RequestParts(history=[user("q"), *history], turn=[user("p")]),
                     counter=counter)
    assert contents(built.history) == ["q", "", "one", "", "two"]


def test_system_messages_can_be_excluded(counter: TokenCounter) -> None:
    history = numbered(
        [Message(role="system", content="s0"), user("q"), Message(role="system", content="s1")]
    )
    built = assemble(
        RequestParts(instructions="agent", history=history, turn=[user("p")], exclude_system=True),
        counter=counter,
    )
    assert contents(built.messages) == ["agent", "q", "p"]
    assert [o.reason for o in built.left_out] == [REASON_EXCLUDED_SYSTEM] * 2


def test_an_unknown_role_is_a_clear_error(counter: TokenCounter) -> None:
    with pytest.raises(RequestError, match="role 'robot'"):
        assemble(RequestParts(turn=[Message(role="robot", content="x")]), counter=counter)
    history = numbered([Message(role="narrator", content="x")])
    with pytest.raises(RequestError, match="message 100"):
        assemble(RequestParts(history=history, turn=[user("p")]), counter=counter)


# -- cached counts -----------------------------------------------------------------------------


def test_cached_counts_are_used_and_only_missing_ones_counted(counter: TokenCounter) -> None:
    cached = user("a long text " * 40)
    cached.token_count, cached.token_encoding = 7, counter.encoding_name
    stale = user("short")
    stale.token_count, stale.token_encoding = 999, "some_other_encoding"
    missing = user("also short")
    history = numbered([cached, stale, missing])
    built = assemble(RequestParts(history=history, turn=[user("p")]), counter=counter)
    expected = 7 + counter.count_message(stale) + counter.count_message(missing)
    assert built.tokens.history == expected
    assert [m.id for m in built.counted] == [102, 101]  # newest first, as walked
    assert stale.token_count == counter.count_message(stale)
    assert stale.token_encoding == counter.encoding_name
    assert cached.token_count == 7


# -- properties --------------------------------------------------------------------------------

_TEXT = st.text(alphabet="abcdefgh ijk", min_size=0, max_size=40)


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """Random sessions: chat turns, system notes, tool groups (some half answered),
    orphaned results and reused call ids."""
    messages: list[Message] = []
    if draw(st.booleans()):
        messages.append(Message(role="system", content=draw(_TEXT)))
    serial = 0
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["user", "assistant", "system", "group", "group", "orphan"]))
        if kind == "group":
            count = draw(st.integers(1, 3))
            reuse = draw(st.booleans())
            ids = [f"call_{i}" if reuse else f"c{serial}_{i}" for i in range(count)]
            serial += 1
            messages.append(assistant(draw(_TEXT), *ids))
            answered = draw(st.lists(st.booleans(), min_size=count, max_size=count))
            for cid, ok in zip(ids, answered, strict=True):
                if ok or draw(st.booleans()):
                    messages.append(result(cid, draw(_TEXT)))
        elif kind == "orphan":
            messages.append(result(f"ghost{serial}", draw(_TEXT)))
            serial += 1
        else:
            messages.append(Message(role=kind, content=draw(_TEXT)))
    return numbered(messages)


def _check_tool_pairs(messages: Sequence[Message]) -> None:
    """Every tool result answers the nearest earlier call with its id, and every call
    is answered."""
    for i, msg in enumerate(messages):
        if msg.role == "tool":
            callers = [
                j
                for j in range(i)
                if messages[j].role == "assistant" and msg.tool_call_id in call_ids(messages[j])
            ]
            assert callers, f"tool result {msg.id} has no call before it"
        if msg.role == "assistant" and msg.tool_calls:
            later = [m.tool_call_id for m in messages[i + 1 :] if m.role == "tool"]
            for cid in call_ids(msg):
                assert cid in later, f"call {cid} of {msg.id} is unanswered"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=histories(),
    instructions=_TEXT,
    prompt=_TEXT,
    cap=st.integers(1, 400),
    exclude=st.booleans(),
)
def test_assembly_properties(
    history: list[Message], instructions: str, prompt: str, cap: int, exclude: bool
) -> None:
    counter = get_counter("estimate")
    parts = RequestParts(
        instructions=instructions or None,
        history=history,
        turn=[user(prompt)],
        exclude_system=exclude,
    )
    unlimited = assemble(parts, counter=counter)
    essential = unlimited.tokens.total - unlimited.tokens.history
    try:
        built = assemble(parts, counter=counter, budget=Budget(cap=cap))
    except ContextBudgetError as err:
        assert essential > cap
        assert (err.needed, err.budget) == (essential, cap)
        return
    assert essential <= cap
    messages = built.messages
    # Never over the budget, and the count is the true count of what is sent.
    assert built.tokens.total <= cap
    assert built.tokens.total == counter.count_request(messages)
    # The system message and the prompt always stay.
    assert messages[-1].role == "user" and messages[-1].content == prompt
    if instructions.strip():
        assert messages[0].role == "system" and messages[0].content == instructions.strip()
    if history and history[0].role == "system" and not exclude:
        assert any(m is history[0] for m in messages)
    # Never a tool result without its call, never half a group.
    _check_tool_pairs(messages)
    # Every history message is either sent or left out with a reason, never both.
    sent = {m.id for m in built.history}
    left = [o.message_id for o in built.left_out]
    assert len(left) == len(set(left)) == built.left_out_count
    assert sent.isdisjoint(left)
    assert sent | set(left) == {m.id for m in history}
    # What left for the budget is older than everything kept (a recent suffix stays);
    # only tool results of a group that left can sit later, with their call.
    by_id = {m.id: m for m in history}
    budget_out = [
        by_id[o.message_id].position
        for o in built.left_out
        if o.reason == REASON_BUDGET and by_id[o.message_id].role != "tool"
    ]
    kept = [m.position for m in built.history if m is not history[0]]
    if budget_out and kept:
        assert max(p or 0 for p in budget_out) < min(p or 0 for p in kept)
    # More room never sends less.
    if cap < 400:
        bigger = assemble(parts, counter=counter, budget=Budget(cap=cap + 50))
        assert len(bigger.history) >= len(built.history)


def test_a_compaction_summary_is_headed_once_and_a_plain_one_gets_a_heading() -> None:
    from workbench.core.summarizers import SUMMARY_HEADING as EXTRACTIVE
    from workbench.core.summarizers import ExtractiveSummarizer

    folded = [Message("user", "We fly to Porto on Friday."), Message("assistant", "Noted.")]
    extractive = ExtractiveSummarizer().summarize(folded, "").text
    counter = get_counter()
    for summary, heading in ((extractive, EXTRACTIVE), ("The user lives in Porto.", None)):
        request = assemble(
            RequestParts(instructions="Be brief.", summary=summary,
                         history=[Message("user", "hi")]),
            counter=counter,
        )
        carried = [m.content for m in request.messages if summary.strip() in m.content]
        assert len(carried) == 1
        text = carried[0]
        first_line = text.splitlines()[0]
        if heading is not None:
            assert first_line == heading and text.count(heading) == 1
            assert "Summary of the earlier conversation:" not in text
        else:
            assert first_line == "Summary of the earlier conversation:"


def test_a_cut_never_leaves_the_history_starting_with_a_reply(counter: TokenCounter) -> None:
    """Issue 15.2: 40 messages trimmed to the window; the first kept one would have been
    an assistant reply, which Gemma's template and Anthropic's API refuse."""
    turns: list[Message] = []
    for i in range(20):
        turns += [user(f"question {i} " * 3), assistant(f"answer {i} " * 3)]
    history = numbered(turns)
    parts = RequestParts(instructions="Be brief.", history=history, turn=[user("next")])
    whole = assemble(parts, counter=counter)
    # Room for the last seven messages: the oldest of them is an answer.
    tail = sum(m.token_count or 0 for m in history[-7:])
    built = assemble(parts, counter=counter,
                     budget=Budget(cap=whole.tokens.total - whole.tokens.history + tail))
    assert history[-7].role == "assistant"
    assert [m.role for m in built.history][:1] == ["user"]
    assert len(built.history) == 6
    reasons = {o.message_id: o.reason for o in built.left_out}
    assert reasons[history[-7].id] == REASON_LEADING_REPLY
    assert len(built.left_out) == 34
    assert built.tokens.history == sum(m.token_count or 0 for m in history[-6:])
    # A tool group in front of the first user message leaves whole, also reported.
    tools = numbered([assistant("", "c1"), result("c1", "r"), user("hi"), assistant("yo")])
    shaped = assemble(RequestParts(history=tools, turn=[user("p")]), counter=counter)
    assert contents(shaped.history) == ["hi", "yo"]
    assert [o.reason for o in shaped.left_out] == [REASON_LEADING_REPLY] * 2


def test_alternating_messages_merge_roles_in_the_payload_only() -> None:
    messages = [
        Message(role="system", content="Rules."),
        Message(role="system", content="Summary."),
        user("one"),
        user("two"),
        assistant("", "c1"),
        result("c1", "42"),
        Message(role="system", content="Mid note."),
        assistant("done"),
        user("three"),
    ]
    before = [m.copy() for m in messages]
    shaped = alternating_messages(messages)
    roles = [m.role for m in shaped]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    assert shaped[0].content == "Rules.\n\nSummary."
    assert shaped[1].content == "one\n\ntwo"
    assert "[called tool lookup with {}]" in (shaped[2].content or "")
    assert "42" in (shaped[3].content or "") and "Mid note." in (shaped[3].content or "")
    assert all(not m.tool_calls for m in shaped)
    assert messages == before  # the messages given are not changed
