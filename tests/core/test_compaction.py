"""Compaction planning without a database: policy, triggers, what folds and why, the
extractive summary, facts and tasks."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workbench.core.assembly import RequestParts, assemble, tool_units
from workbench.core.compaction import (
    REASON_IMPORTANT,
    REASON_OUTSIDE_RANGE,
    REASON_RECENT,
    REASON_SYSTEM,
    REASON_TOOL_GROUP,
    REASON_TURN,
    REPLACE,
    SUMMARY_HEADING,
    TRIGGER_KEEP,
    TRIGGER_MESSAGES,
    TRIGGER_RANGE,
    TRIGGER_TOKENS,
    CompactionPlan,
    CompactionPolicy,
    ExtractiveSummarizer,
    SummaryDraft,
    combine_summary,
    count_long_text,
    dedupe_facts,
    message_line,
    normalize_fact,
    plan_compaction,
    prune_tasks,
    shorten,
)
from workbench.core.conversation import Message, SessionContext, Task
from workbench.core.tokens import get_counter
from workbench.errors import CompactionError

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
COUNTER = get_counter()


def tokens(summary: str, history: Sequence[Message]) -> int:
    """The request's tokens, counted the way the engine counts them."""
    return assemble(
        RequestParts(instructions="Be helpful.", summary=summary, history=history),
        counter=COUNTER,
    ).tokens.total


def numbered(messages: Sequence[Message]) -> list[Message]:
    """Give messages the ids and positions the store would."""
    for i, msg in enumerate(messages):
        msg.id = 100 + i
        msg.position = i
    return list(messages)


def chat(count: int, *, system: bool = True, words: int = 60) -> list[Message]:
    """A system message (optional) and ``count`` alternating user/assistant messages."""
    out = [Message("system", "You are a careful travel agent.")] if system else []
    for i in range(count):
        role = "user" if i % 2 == 0 else "assistant"
        text = f"Turn {i}: " + " ".join(f"word{i}x{j}" for j in range(words))
        out.append(Message(role, text))
    return numbered(out)


def plan(
    messages: Sequence[Message],
    context: SessionContext | None = None,
    *,
    policy: CompactionPolicy | None = None,
    **options: Any,
) -> CompactionPlan:
    policy = policy or CompactionPolicy()
    return plan_compaction(
        messages,
        context or SessionContext(),
        policy=policy,
        summarizer=ExtractiveSummarizer(policy.line_chars),
        request_tokens=tokens,
        now=NOW,
        session_id=1,
        **options,
    )


def by_id(messages: Sequence[Message]) -> dict[int, Message]:
    return {int(m.id): m for m in messages if m.id is not None}


def first_kept(messages: Sequence[Message], result: CompactionPlan) -> Message:
    """The first message the plan keeps but system ones."""
    kept = {k.id for k in result.kept}
    return next(m for m in messages if m.id in kept and m.role != "system")


def call(call_id: str, name: str = "lookup") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


# -- the example -----------------------------------------------------------------------


def test_system_and_51_others_compact_to_system_30_and_a_line_per_folded_message() -> None:
    messages = chat(51)
    result = plan(messages)
    assert result.trigger == TRIGGER_MESSAGES
    assert result.changed
    kept_ids = {k.id for k in result.kept}
    remaining = [m for m in messages if m.id in kept_ids]
    assert remaining[0].role == "system"
    # The 30 newest stay; the 30th-newest is a reply, so its question stays too.
    assert messages[22].role == "assistant"
    assert remaining[1] is messages[21] and messages[21].role == "user"
    assert {k.id: k.reason for k in result.kept}[messages[21].id] == REASON_TURN
    assert len([m for m in remaining if m.role != "system"]) == 31
    assert result.active_after == 31
    # The 20 oldest non-system messages fold: one line each under the heading.
    assert result.folded_ids == [m.id for m in messages[1:21]]
    lines = result.summary.splitlines()
    assert lines[0] == SUMMARY_HEADING
    assert len([line for line in lines if line.startswith("- ")]) == 20
    assert result.tokens_after < result.tokens_before
    # The figures are the request the remaining history and the new summary make.
    assert result.tokens_after == tokens(result.new_summary, remaining)
    assert result.tokens_before == tokens("", messages)


def test_a_session_within_the_policy_has_nothing_to_compact() -> None:
    for messages in ([], [Message("system", "Be brief.")], chat(50)):
        result = plan(numbered(messages))
        assert not result.changed
        assert result.reason.startswith("Nothing to compact")
        assert result.folded_ids == []
        assert result.new_summary == ""
        assert result.tokens_after == result.tokens_before


def test_facts_and_tasks_are_tidied_on_every_compact_even_when_nothing_folds() -> None:
    """Seed 002: after the history steps, "Fact Deduplication - Sort facts - Remove
    duplicates" and "Task Pruning - Keep running tasks - Keep completed tasks < 24h old
    - Remove older completed tasks" run on every compact()."""
    context = SessionContext(facts=["x", "X"], tasks=[_task("done", "completed", days=9)])
    result = plan(chat(4), context)
    assert result.changed and result.folded_ids == []
    assert result.context_after(context).facts == ["x"]
    assert result.context_after(context).tasks == []
    assert result.reason.startswith("Nothing folds")
    assert result.new_summary == ""
    tidy = SessionContext(facts=["a"], tasks=[_task("run", "running", days=9)])
    assert not plan(chat(4), tidy).changed


def test_only_active_messages_count() -> None:
    messages = chat(60)
    for msg in messages[1:20]:
        msg.state = "folded"
    result = plan(messages)
    # 41 active non-system messages are within the default trigger of 50.
    assert not result.changed
    assert result.active_before == 41


# -- triggers and manual modes --------------------------------------------------------------------


def test_the_token_trigger_folds_the_oldest_half() -> None:
    """Seed 002: "Tokens > 100k? Yes: Take oldest 50% of entries"."""
    messages = chat(10, words=80)
    policy = CompactionPolicy(max_tokens=2000)
    result = plan(messages, policy=policy)
    assert result.trigger == TRIGGER_TOKENS
    # At least the oldest half folds, and nothing but the oldest; the first kept is a
    # question (the newer half starts with a reply, so its question stays too).
    assert result.folded_ids == [m.id for m in messages[1 : 1 + result.folded_count]]
    assert result.folded_count >= 5
    assert result.active_after == 10 - result.folded_count
    assert first_kept(messages, result).role == "user"
    assert result.tokens_after <= 2000


def test_the_token_step_halves_again_while_still_over() -> None:
    messages = chat(10, words=80)
    result = plan(messages, policy=CompactionPolicy(max_tokens=500))
    assert result.trigger == TRIGGER_TOKENS
    assert result.active_after < 5
    assert first_kept(messages, result).role == "user"
    # Below the trigger, or down to the last turn: its reply keeps its question.
    assert result.tokens_after <= 500 or result.active_after == 2


def test_when_both_triggers_fire_both_steps_run() -> None:
    """Seed 002: "History > 50? Take oldest (len - 30) entries", then "Tokens > 100k?
    Take oldest 50% of entries": both steps, so the session ends below the trigger."""
    messages = chat(60, words=80)
    policy = CompactionPolicy(max_messages=50, keep_messages=30, max_tokens=8000)
    result = plan(messages, policy=policy)
    assert result.trigger == TRIGGER_MESSAGES
    assert result.tokens_before > 8000
    assert result.active_after < 30  # the token step folded more than the message step
    assert result.tokens_after <= 8000
    assert "then over 8000 tokens" in result.policy
    # Only the message step when the rest is under the token trigger.
    roomy = CompactionPolicy(max_messages=50, keep_messages=30, max_tokens=10**6)
    assert plan(messages, policy=roomy).active_after == 30


def test_completed_tasks_match_whatever_the_case_and_facts_are_sorted() -> None:
    """Seed 002: ``task.status != "Completed" || task.updated_at > cutoff`` keeps a task;
    "Sort facts, Remove duplicates"."""
    context = SessionContext(
        facts=["Prefers tea.", "Lives in Porto", "prefers tea", "Book trains"],
        tasks=[_task("old", "Completed", hours=25), _task("new", "COMPLETED", hours=2)],
    )
    result = plan(chat(4), context)
    after = result.context_after(context)
    assert [t.id for t in after.tasks] == ["new"]
    assert after.facts == ["Book trains", "Lives in Porto", "Prefers tea."]
    assert result.facts_removed == ["prefers tea"]


def test_triggers_can_be_turned_off() -> None:
    policy = CompactionPolicy(max_messages=None, max_tokens=None)
    assert not plan(chat(80), policy=policy).changed


def test_manual_keep_count() -> None:
    messages = chat(12)
    result = plan(messages, keep=4)
    assert result.trigger == TRIGGER_KEEP
    assert result.folded_ids == [m.id for m in messages[1:9]]
    assert all(k.reason in (REASON_RECENT, REASON_SYSTEM) for k in result.kept)
    assert not plan(messages, keep=12).changed
    assert plan(messages, keep=0).active_after == 0


def test_manual_range_folds_inside_and_keeps_outside() -> None:
    messages = chat(12)
    result = plan(messages, fold_range=(3, 6))
    assert result.trigger == TRIGGER_RANGE
    assert result.folded_ids == [m.id for m in messages[3:7]]
    reasons = {k.position: k.reason for k in result.kept}
    assert reasons[0] == REASON_SYSTEM
    assert reasons[2] == REASON_OUTSIDE_RANGE
    assert reasons[7] == REASON_OUTSIDE_RANGE
    assert [(r.first_position, r.last_position, r.count) for r in result.ranges] == [(3, 6, 4)]
    assert not plan(messages, fold_range=(40, 50)).changed


def test_bad_manual_arguments_are_refused() -> None:
    with pytest.raises(CompactionError, match="not both"):
        plan(chat(3), keep=1, fold_range=(1, 2))
    with pytest.raises(CompactionError, match="keep count"):
        plan(chat(3), keep=-1)


# -- what never folds -------------------------------------------------------------------------


def test_important_and_pinned_messages_stay_and_say_why() -> None:
    messages = chat(12)
    messages[2].important = True
    messages[4].metadata = {"pinned": True}
    result = plan(messages, keep=2)
    assert messages[2].id not in result.folded_ids
    assert messages[4].id not in result.folded_ids
    reasons = {k.id: k.reason for k in result.kept}
    assert reasons[messages[2].id] == REASON_IMPORTANT
    assert reasons[messages[4].id] == REASON_IMPORTANT
    # The important reply is the first kept message: its question stays with it.
    assert reasons[messages[1].id] == REASON_TURN
    # The others before the cut still fold: the ranges show the gaps.
    assert [(r.first_position, r.last_position) for r in result.ranges] == [(3, 3), (5, 10)]


def test_a_system_message_inside_the_history_never_folds() -> None:
    messages = chat(10)
    messages.insert(4, Message("system", "The user is now in French mode."))
    messages = numbered(messages)
    result = plan(messages, keep=1)
    assert messages[4].id not in result.folded_ids
    assert {k.id: k.reason for k in result.kept}[messages[4].id] == REASON_SYSTEM


def _tool_session(*, earlier: bool = False) -> list[Message]:
    """An agent's turn with a tool-call group; ``earlier`` puts a plain turn before it
    (so the group's turn is not the first and something can fold before it)."""
    first = [Message("user", "Hello."), Message("assistant", "Hi, where to?")] if earlier else []
    return numbered(
        [
            Message("system", "Agent."),
            *first,
            Message("user", "Book a flight."),
            Message("assistant", "", tool_calls=[call("c1", "search"), call("c2", "price")]),
            Message("tool", "3 flights", tool_call_id="c1", name="search"),
            Message("tool", "120 EUR", tool_call_id="c2", name="price"),
            Message("assistant", "Found 3 flights from 120 EUR."),
            Message("user", "Take the first."),
        ]
    )


def test_the_cut_moves_back_to_keep_a_tool_group_whole() -> None:
    messages = _tool_session(earlier=True)
    # Keeping 3 would cut between the tool results: the whole group stays instead (and
    # the question the group answers stays with it).
    result = plan(messages, keep=3)
    assert result.folded_ids == [messages[1].id, messages[2].id]
    reasons = {k.id: k.reason for k in result.kept}
    assert reasons[messages[3].id] == REASON_TURN
    assert reasons[messages[4].id] == REASON_TOOL_GROUP
    assert reasons[messages[5].id] == REASON_TOOL_GROUP
    assert reasons[messages[6].id] == REASON_RECENT
    # Keeping 2 puts the cut after the group but inside its turn: the turn stays.
    after_group = plan(messages, keep=2)
    assert after_group.folded_ids == [messages[1].id, messages[2].id]
    assert {k.id: k.reason for k in after_group.kept if k.position in range(3, 7)} == {
        m.id: REASON_TURN for m in messages[3:7]
    }
    # Keeping 1 puts the cut after the turn: the group folds whole with it.
    assert plan(messages, keep=1).folded_ids == [m.id for m in messages[1:8]]


def test_an_important_tool_result_keeps_its_whole_group() -> None:
    messages = _tool_session(earlier=True)
    messages[5].important = True
    result = plan(messages, keep=1)
    assert set(result.folded_ids) == {messages[1].id, messages[2].id, messages[7].id}
    reasons = {k.id: k.reason for k in result.kept}
    assert reasons[messages[5].id] == REASON_IMPORTANT
    assert reasons[messages[4].id] == REASON_TOOL_GROUP
    assert reasons[messages[6].id] == REASON_TOOL_GROUP
    assert reasons[messages[3].id] == REASON_TURN  # the question the group answers


def test_nothing_folds_when_every_candidate_is_protected() -> None:
    messages = chat(6)
    for msg in messages[1:4]:
        msg.important = True
    result = plan(messages, keep=3)
    assert not result.changed
    assert "important" in result.reason


# -- the extractive summary ----------------------------------------------------------------------


def test_lines_are_one_per_message_on_one_line_and_shortened() -> None:
    long = Message("user", "word " * 500 + "\n\nsecond paragraph")
    line = message_line(long, 80)
    assert "\n" not in line
    assert line.startswith("- user: word word")
    assert len(line) <= len("- user: ") + 80
    assert line.endswith("…")
    assert message_line(Message("user", "  short\ttext  "), 80) == "- user: short text"
    assert message_line(Message("assistant", ""), 80) == "- assistant: (empty)"
    tool_call = Message("assistant", "", tool_calls=[call("c1", "search")])
    assert message_line(tool_call) == "- assistant: [called search]"
    result = Message("tool", "3 flights", name="search", tool_call_id="c1")
    assert message_line(result) == "- tool: search → 3 flights"


def test_shorten_keeps_short_texts_and_cuts_long_ones_within_the_limit() -> None:
    assert shorten("a  b", 10) == "a b"
    cut = shorten("x" * 1000, 10)
    assert len(cut) == 10 and cut.endswith("…")
    # Whitespace far beyond the limit is never what decides the cut.
    assert shorten("a" + " " * 100 + "b" * 100, 10).startswith("a b")


def test_a_second_extractive_summary_continues_under_the_same_heading() -> None:
    first = ExtractiveSummarizer().summarize([Message("user", "one")], "")
    once = combine_summary("", first.text, first.mode)
    second = ExtractiveSummarizer().summarize([Message("assistant", "two")], once)
    twice = combine_summary(once, second.text, second.mode)
    assert twice.startswith(once)
    assert twice.count(SUMMARY_HEADING) == 1
    assert twice.splitlines()[1:] == ["- user: one", "- assistant: two"]


def test_appending_to_a_prose_summary_keeps_it_and_adds_a_block() -> None:
    combined = combine_summary("The user likes tea.", SUMMARY_HEADING + "\n- user: hi", "append")
    assert combined == "The user likes tea.\n\n" + SUMMARY_HEADING + "\n- user: hi"
    assert combine_summary("old", "new text", REPLACE) == "new text"
    assert combine_summary("old", "   ", "append") == "old"


def test_an_edited_summary_changes_the_new_summary() -> None:
    result = plan(chat(51), SessionContext(summary="Earlier: tea."))
    edited = result.with_summary("The user planned a trip.")
    assert edited.new_summary == "Earlier: tea.\n\nThe user planned a trip."
    assert result.new_summary.startswith("Earlier: tea.\n\n" + SUMMARY_HEADING)


class _Rewriter:
    name = "model"

    def __init__(self) -> None:
        self.seen: list[tuple[int, str]] = []

    def summarize(self, folded: Sequence[Message], previous: str) -> SummaryDraft:
        self.seen.append((len(folded), previous))
        return SummaryDraft(f"{previous} + {len(folded)} more".strip(), REPLACE)


def test_a_replacing_summarizer_gets_the_previous_summary_and_replaces_it() -> None:
    rewriter = _Rewriter()
    result = plan_compaction(
        chat(51),
        SessionContext(summary="Before."),
        policy=CompactionPolicy(),
        summarizer=rewriter,
        request_tokens=tokens,
        now=NOW,
    )
    # 20 fold: the 30th-newest is a reply, its question stays with it.
    assert rewriter.seen == [(20, "Before.")]
    assert result.new_summary == "Before. + 20 more"
    assert result.summarizer == "model"


def test_the_summarizer_is_not_called_when_nothing_folds() -> None:
    rewriter = _Rewriter()
    plan_compaction(
        chat(3), SessionContext(), policy=CompactionPolicy(), summarizer=rewriter,
        request_tokens=tokens, now=NOW,
    )
    assert rewriter.seen == []


# -- facts and tasks ---------------------------------------------------------------------------


def test_facts_deduplicate_on_normalised_text_keeping_the_first_spelling_in_order() -> None:
    facts = ["The user is Ana.", "likes tea", "the user  is ana", "", "Likes tea!", "Owns a cat"]
    kept, removed = dedupe_facts(facts)
    assert kept == ["The user is Ana.", "likes tea", "Owns a cat"]
    assert removed == ["the user  is ana", "", "Likes tea!"]
    assert normalize_fact("  A  b. ") == normalize_fact("a B")


def _task(name: str, status: str, *, days: float = 0, hours: float = 0) -> Task:
    stamp = NOW - timedelta(days=days, hours=hours)
    return Task(id=name, description=name, status=status, created_at=stamp, updated_at=stamp)


def test_tasks_prune_only_completed_ones_older_than_a_day() -> None:
    tasks = [
        _task("running", "running", days=30),
        _task("pending", "pending", days=30),
        _task("failed", "failed", days=30),
        _task("fresh", "completed", hours=23),
        _task("stale", "completed", hours=25),
        Task(id="undated", description="undated", status="completed"),
    ]
    kept, pruned = prune_tasks(tasks, NOW)
    assert [t.id for t in pruned] == ["stale"]
    assert [t.id for t in kept] == ["running", "pending", "failed", "fresh", "undated"]
    assert [t.id for t in prune_tasks(tasks, NOW, retention_hours=0)[1]] == ["fresh", "stale"]


def test_the_plan_carries_fact_and_task_changes() -> None:
    context = SessionContext(
        facts=["a", "A.", "b"], tasks=[_task("old", "completed", days=3), _task("r", "running")]
    )
    result = plan(chat(51), context)
    assert result.facts_after == ["a", "b"] and result.facts_removed == ["A."]
    assert [t.id for t in result.tasks_pruned] == ["old"]
    after = result.context_after(context)
    assert after.facts == ["a", "b"] and [t.id for t in after.tasks] == ["r"]
    assert after.summary == result.new_summary
    assert context.facts == ["a", "A.", "b"], "planning must not change its input"


# -- policy --------------------------------------------------------------------------------------


def test_policy_defaults_and_overrides() -> None:
    default = CompactionPolicy.from_dict(None)
    assert (default.max_messages, default.keep_messages, default.max_tokens) == (50, 30, 100_000)
    assert default.summarizer == "extractive" and default.auto is False
    merged = CompactionPolicy.from_dict(
        {"max_messages": 20, "keep_messages": 10, "summarizer": "model", "provider": "local"},
        {"auto": True, "max_tokens": None, "provider": None},
    )
    assert merged.max_messages == 20 and merged.keep_messages == 10
    assert merged.auto and merged.max_tokens is None and merged.provider is None
    assert merged.summarizer == "model"
    assert CompactionPolicy.from_dict(merged.to_dict()) == merged


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"max_mesages": 3}, "no setting 'max_mesages'"),
        ({"keep_messages": 60}, "must not exceed"),
        ({"summarizer": "magic"}, "not one of"),
        ({"max_messages": 0}, "at least 1"),
        ({"auto": "yes"}, "true or false"),
        ({"task_retention_hours": -1}, "0 or more"),
        ([1, 2], "JSON object"),
    ],
)
def test_bad_policies_are_refused_with_a_sentence(data: Any, words: str) -> None:
    with pytest.raises(CompactionError, match=words):
        CompactionPolicy.from_dict(data)


def test_trigger_reports_which_fires() -> None:
    policy = CompactionPolicy()
    assert policy.trigger(50, 100_000) is None
    assert policy.trigger(51, 0) == (TRIGGER_MESSAGES, 30)
    assert policy.trigger(10, 100_001) == (TRIGGER_TOKENS, 5)


# -- properties -------------------------------------------------------------------------------


@st.composite
def sessions(draw: st.DrawFn) -> list[Message]:
    """Sessions with system messages, important ones and tool groups in any order."""
    messages: list[Message] = []
    if draw(st.booleans()):
        messages.append(Message("system", "sys"))
    for n in range(draw(st.integers(0, 40))):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "system"]))
        if kind == "tools":
            ids = [f"c{n}_{k}" for k in range(draw(st.integers(1, 3)))]
            messages.append(Message("assistant", "", tool_calls=[call(i) for i in ids]))
            for i in ids:
                messages.append(Message("tool", f"result {i}", tool_call_id=i))
        elif kind == "system" and draw(st.integers(0, 5)) == 0:
            messages.append(Message("system", f"note {n}"))
        else:
            role = "user" if kind in ("user", "system") else "assistant"
            messages.append(Message(role, f"text {n} " * draw(st.integers(0, 30))))
    for msg in messages:
        msg.important = msg.role != "system" and draw(st.integers(0, 6)) == 0
    return numbered(messages)


@given(sessions(), st.integers(0, 45))
def test_no_tool_group_is_split_and_protected_messages_never_fold(
    messages: list[Message], keep: int
) -> None:
    result = plan(messages, keep=keep)
    folded = set(result.folded_ids)
    for unit in tool_units(messages):
        inside = {messages[i].id in folded for i in unit}
        assert len(inside) == 1, "a tool group was split"
    index = by_id(messages)
    for mid in folded:
        assert index[mid].role != "system"
        assert not index[mid].important
    if result.changed:
        # Every active message is either folded or kept with a reason, never both.
        kept = {k.id for k in result.kept}
        assert kept | folded == set(index)
        assert not kept & folded
        # A kept reply first means no question before it folded (none to keep with it).
        staying = [m for m in messages if m.id in kept and m.role != "system"]
        if staying and staying[0].role != "user":
            before = messages[: messages.index(staying[0])]
            assert not any(m.id in folded and m.role == "user" for m in before)
    # The cut only ever moves towards keeping more.
    non_system = [m for m in messages if m.role != "system"]
    assert result.active_after >= min(keep, len(non_system))
    if result.changed:
        lines = [line for line in result.summary.splitlines() if line.startswith("- ")]
        assert len(lines) == len(folded)


@given(sessions(), st.integers(0, 40), st.integers(0, 40))
def test_a_range_folds_only_inside_it(messages: list[Message], first: int, last: int) -> None:
    result = plan(messages, fold_range=(first, last))
    low, high = min(first, last), max(first, last)
    for mid in result.folded_ids:
        assert low <= int(by_id(messages)[mid].position) <= high  # type: ignore[arg-type]


@given(st.integers(0, 120))
def test_message_trigger_keeps_exactly_the_keep_count_in_a_plain_chat(count: int) -> None:
    messages = chat(count, words=5)
    result = plan(messages)
    if count > 50:
        # The 30 newest stay; when the 30th-newest is a reply, its question stays too.
        thirtieth = messages[count + 1 - 30]
        assert result.active_after == (31 if thirtieth.role == "assistant" else 30)
        assert result.folded_count == count - result.active_after
        assert first_kept(messages, result).role == "user"
    else:
        assert not result.changed


_texts = st.text(
    alphabet=st.sampled_from(list("ab \n\t.-é🎉")), max_size=400
) | st.sampled_from(["", "   ", " " * 300 + "late words", "x" * 1000])


@given(st.lists(st.tuples(st.sampled_from(["user", "assistant", "tool"]), _texts,
                          st.booleans()), max_size=12),
       st.integers(20, 200))
def test_the_summary_has_exactly_each_messages_line(
    items: list[tuple[str, str, bool]], limit: int
) -> None:
    messages = []
    for role, text, extra in items:
        msg = Message(role, text)
        if extra and role == "assistant":
            msg.tool_calls = [call("c", "search")]
        if extra and role == "tool":
            msg.name = "search"
        messages.append(msg)
    draft = ExtractiveSummarizer(limit).summarize(messages, "")
    lines = draft.text.split("\n")
    assert lines[0] == SUMMARY_HEADING
    assert lines[1:] == [message_line(m, limit) for m in messages]
    for line, msg in zip(lines[1:], messages, strict=True):
        assert len(line) <= len(f"- {msg.role}: ") + max(limit, len("(empty)"))


def test_many_folded_messages_share_the_summary_budget() -> None:
    summarizer = ExtractiveSummarizer(160, 60_000)
    assert summarizer.line_limit(10) == 160
    assert summarizer.line_limit(1_000) == 60
    assert summarizer.line_limit(10_000) == 40  # never below MIN_LINE_CHARS
    messages = chat(1_000, system=False, words=40)
    lines = summarizer.summarize(messages, "").text.splitlines()[1:]
    assert len(lines) == 1_000
    assert max(len(line) for line in lines) <= len("- assistant: ") + 60


@given(st.lists(_texts, min_size=1, max_size=60), st.integers(1, 400))
def test_counting_a_long_summary_in_pieces_is_exact(texts: list[str], piece: int) -> None:
    summary = SUMMARY_HEADING + "\n" + "\n".join(
        message_line(Message("user", text), 80) for text in texts
    )
    whole = COUNTER.count_text(summary)
    assert count_long_text(COUNTER, summary, piece=piece, workers=4) == whole
    assert count_long_text(COUNTER, summary, piece=piece, workers=1) == whole


@given(st.text(alphabet=st.sampled_from(list("ab -\n.é 1'🎉\t")), max_size=600),
       st.integers(1, 50))
def test_counting_any_text_in_pieces_is_exact(text: str, piece: int) -> None:
    for name in ("o200k_base", "cl100k_base"):
        counter = get_counter(name)
        assert count_long_text(counter, text, piece=piece, workers=4) == counter.count_text(text)


# -- a cut inside a turn ------------------------------------------------------------------------


def assert_every_kept_message_is_sent(messages: Sequence[Message], result: CompactionPlan) -> None:
    """The request assembled (strict role order, as requests are) from the summary and the
    kept messages carries every kept message, and costs the plan's tokens_after."""
    kept_ids = {k.id for k in result.kept}
    remaining = [m for m in messages if m.id in kept_ids]
    request = assemble(
        RequestParts(instructions="Be helpful.", summary=result.new_summary, history=remaining),
        counter=COUNTER,
    )
    assert request.left_out == []
    assert [m.id for m in request.messages if m.id is not None] == [m.id for m in remaining]
    assert request.tokens.total == result.tokens_after


def test_a_cut_inside_a_turn_keeps_the_question_of_the_kept_reply() -> None:
    messages = chat(11)  # ends with a question: keeping 4 starts with a reply
    result = plan(messages, keep=4)
    assert messages[8].role == "assistant" and messages[7].role == "user"
    assert_every_kept_message_is_sent(messages, result)
    assert result.folded_ids == [m.id for m in messages[1:7]]
    reasons = {k.id: k.reason for k in result.kept}
    assert reasons[messages[7].id] == REASON_TURN
    assert [reasons[m.id] for m in messages[8:]] == [REASON_RECENT] * 4
    assert result.active_after == 5
    assert first_kept(messages, result) is messages[7]


def test_an_important_reply_first_kept_brings_its_question() -> None:
    messages = chat(12)
    messages[6].important = True  # a reply inside the folded span
    result = plan(messages, keep=2)
    assert_every_kept_message_is_sent(messages, result)
    reasons = {k.id: k.reason for k in result.kept}
    assert reasons[messages[6].id] == REASON_IMPORTANT
    assert reasons[messages[5].id] == REASON_TURN
    assert result.folded_ids == [m.id for m in messages[1:5] + messages[7:11]]
    assert first_kept(messages, result) is messages[5]


def test_replies_with_no_question_before_the_cut_are_unchanged() -> None:
    messages = numbered(
        [
            Message("system", "Agent."),
            Message("assistant", "Welcome back."),
            Message("assistant", "Your last trip was to Porto."),
            Message("user", "Book it again."),
            Message("assistant", "Booked."),
            Message("user", "Thanks."),
        ]
    )
    result = plan(messages, keep=4)
    assert result.folded_ids == [messages[1].id]
    assert [(k.id, k.reason) for k in result.kept] == [
        (messages[0].id, REASON_SYSTEM), *[(m.id, REASON_RECENT) for m in messages[2:]]
    ]
    # The leading reply reached no request before the compaction either.
    assert first_kept(messages, result).role == "assistant"
