"""Compaction of stored sessions (issue 6): preview, apply, exact undo, the model
summarizer through the scripted provider, and auto-compaction before a send."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select, update

from workbench.core.compaction import (
    SUMMARY_HEADING,
)
from workbench.core.conversation import Message, SessionContext, Task
from workbench.core.tokens import fill_counts, get_counter
from workbench.engine import compaction
from workbench.engine.memory import Memory
from workbench.engine.workspace import Workspace
from workbench.errors import CompactionError, ServerError, UnreachableError
from workbench.store.compactions import load_active
from workbench.store.schema import MESSAGES as M
from workbench.store.schema import SESSION_CONTEXT as SC

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scripted_provider import Reply, ScriptedProvider  # noqa: E402

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
COUNTER = get_counter()
PROPERTY = settings(
    max_examples=25,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def call(cid: str, name: str = "lookup") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}


def long_text(i: int, words: int = 60) -> str:
    return f"Turn {i}: " + " ".join(f"detail{i}x{j}" for j in range(words))


def store_session(
    ws: Workspace,
    messages: list[Message],
    context: SessionContext | None = None,
    *,
    overrides: dict[str, Any] | None = None,
    agent_id: int | None = None,
) -> int:
    info = ws.repo.create_session("compaction test", overrides=overrides, agent_id=agent_id)
    fill_counts(messages, COUNTER)
    ws.repo.append_messages(info.id, messages)
    if context is not None:
        ws.repo.set_context(info.id, context)
    return info.id


def chat_session(ws: Workspace, count: int, **options: Any) -> int:
    messages = [Message("system", "You are a careful travel agent.")]
    messages += [
        Message("user" if i % 2 == 0 else "assistant", long_text(i)) for i in range(count)
    ]
    return store_session(ws, messages, **options)


def snapshot(ws: Workspace, session_id: int) -> dict[str, Any]:
    """Everything compaction may touch, as stored (times of change excluded)."""
    info = ws.repo.get_session(session_id)
    with ws.db.read() as conn:
        raw = conn.execute(
            select(SC.c.facts, SC.c.summary, SC.c.tasks, SC.c.tool_stats, SC.c.token_usage,
                   SC.c.system_state, SC.c.environment).where(SC.c.session_id == session_id)
        ).first()
    return {
        "messages": ws.repo.list_messages(session_id),
        "context": ws.repo.get_context(session_id),
        "raw_context": tuple(raw) if raw is not None else None,
        "counts": (info.message_count, info.token_count),
    }


def active(ws: Workspace, session_id: int) -> list[Message]:
    return ws.repo.list_messages(session_id, states=["active"])


# -- the example -----------------------------------------------------------------------


def test_system_and_51_others_compact_to_system_30_and_a_summary(workspace: Workspace) -> None:
    sid = chat_session(workspace, 51)
    before = workspace.repo.list_messages(sid)
    result = compaction.compact(workspace, sid)
    assert result.changed and result.compaction_id is not None
    remaining = active(workspace, sid)
    assert remaining[0].role == "system"
    # The 30 newest stay; the 30th-newest is a reply, so its question stays too.
    assert len(remaining) == 32
    assert remaining[1].id == before[21].id and remaining[1].role == "user"
    folded = workspace.repo.list_messages(sid, states=["folded"])
    assert [m.id for m in folded] == [m.id for m in before[1:21]]
    assert {m.compaction_id for m in folded} == {result.compaction_id}
    # Nothing deleted: every message is still stored with its content.
    after = workspace.repo.list_messages(sid)
    assert [(m.id, m.content) for m in after] == [(m.id, m.content) for m in before]
    summary = workspace.repo.get_context(sid).summary
    assert summary.startswith(SUMMARY_HEADING)
    assert len([line for line in summary.splitlines() if line.startswith("- ")]) == 20
    plan = result.plan
    assert plan is not None and plan.tokens_after < plan.tokens_before
    # The session's cached totals follow the change of state.
    info = workspace.repo.get_session(sid)
    assert info.token_count == workspace.repo.token_total(sid)
    assert info.token_count == sum(m.token_count or 0 for m in remaining)
    # The compaction is recorded: when, policy, summarizer, tokens saved.
    (record,) = compaction.history(workspace, sid)
    assert record.id == result.compaction_id
    assert record.summarizer == "extractive"
    assert "50" in record.policy
    assert record.tokens_saved == plan.tokens_before - plan.tokens_after > 0
    assert record.folded_count == 20
    assert record.marker_position == before[20].position
    assert not record.undone


def test_preview_writes_nothing(workspace: Workspace) -> None:
    sid = chat_session(workspace, 60)
    before = snapshot(workspace, sid)
    plan = compaction.preview(workspace, sid, keep=5)
    assert plan.changed and plan.folded_count == 54  # the 5th-newest's question stays
    assert snapshot(workspace, sid) == before
    assert compaction.history(workspace, sid) == []


def test_an_empty_or_small_session_has_nothing_to_compact(workspace: Workspace) -> None:
    for count in (0, 3, 50):
        sid = chat_session(workspace, count) if count else workspace.repo.create_session("e").id
        before = snapshot(workspace, sid)
        result = compaction.compact(workspace, sid)
        assert not result.changed
        assert result.message.startswith("Nothing to compact")
        assert snapshot(workspace, sid) == before
        assert compaction.history(workspace, sid) == []


def test_compacting_twice_folds_the_next_oldest_and_builds_on_the_summary(
    workspace: Workspace,
) -> None:
    sid = chat_session(workspace, 40)
    original = snapshot(workspace, sid)
    first = compaction.compact(workspace, sid, keep=20)
    after_first = snapshot(workspace, sid)
    summary_one = workspace.repo.get_context(sid).summary
    still_active = [m.id for m in active(workspace, sid)]
    second = compaction.compact(workspace, sid, keep=10)
    assert second.plan is not None
    # The second folds exactly the ten oldest of the messages the first left active.
    assert second.plan.folded_ids == still_active[1:11]
    summary_two = workspace.repo.get_context(sid).summary
    assert summary_two.startswith(summary_one)
    assert summary_two.count(SUMMARY_HEADING) == 1
    assert len([line for line in summary_two.splitlines() if line.startswith("- ")]) == 30
    # Undo walks back one compaction at a time, each exactly.
    compaction.undo(workspace, sid)
    assert snapshot(workspace, sid) == after_first
    assert compaction.undo(workspace, sid).id == first.compaction_id
    assert snapshot(workspace, sid) == original


# -- undo --------------------------------------------------------------------------------------


def test_undo_restores_summary_facts_and_tasks_exactly(workspace: Workspace) -> None:
    context = SessionContext(
        facts=["Ana flies on Friday.", "ana flies on friday", "Ana has a cat."],
        summary="Ana planned a trip to Porto.",
        tasks=[
            Task("old", "Send the invoice", "completed", 1.0, NOW - timedelta(days=5),
                 NOW - timedelta(days=4)),
            Task("new", "Book the hotel", "running", 0.5, NOW, NOW),
        ],
    )
    sid = chat_session(workspace, 55, context=context)
    before = snapshot(workspace, sid)
    result = compaction.compact(workspace, sid, now=NOW)
    changed = workspace.repo.get_context(sid)
    assert changed.facts == ["Ana flies on Friday.", "Ana has a cat."]
    assert [t.id for t in changed.tasks] == ["new"]
    assert changed.summary.startswith("Ana planned a trip to Porto.\n\n" + SUMMARY_HEADING)
    record = compaction.undo(workspace, sid)
    assert record.id == result.compaction_id and record.undone
    assert snapshot(workspace, sid) == before


def test_undo_keeps_what_happened_after_the_compaction(workspace: Workspace) -> None:
    sid = chat_session(workspace, 55)
    compaction.compact(workspace, sid)
    workspace.repo.append_message(sid, Message("user", "A new question"))
    compaction.undo(workspace, sid)
    messages = active(workspace, sid)
    assert len(messages) == 57
    assert messages[-1].content == "A new question"


def test_undo_errors_clearly(workspace: Workspace) -> None:
    sid = chat_session(workspace, 30)
    with pytest.raises(CompactionError, match="no compaction to undo"):
        compaction.undo(workspace, sid)
    first = compaction.compact(workspace, sid, keep=20)
    second = compaction.compact(workspace, sid, keep=10)
    with pytest.raises(CompactionError, match=f"newer compaction {second.compaction_id}"):
        compaction.undo(workspace, sid, first.compaction_id)
    assert compaction.undo(workspace, sid).id == second.compaction_id
    with pytest.raises(CompactionError, match="already undone"):
        compaction.undo(workspace, sid, second.compaction_id)
    with pytest.raises(CompactionError, match="no compaction with id 999"):
        compaction.undo(workspace, sid, 999)
    # Without an id, undo walks back to the one before.
    assert compaction.undo(workspace, sid).id == first.compaction_id
    last = f"already undone \\(the last, {second.compaction_id}"
    with pytest.raises(CompactionError, match=last):
        compaction.undo(workspace, sid)
    with pytest.raises(CompactionError, match="already undone"):
        compaction.undo(workspace, sid, first.compaction_id)


# -- applying a plan ------------------------------------------------------------------------------


def test_a_plan_is_refused_when_the_session_changed_since(workspace: Workspace) -> None:
    sid = chat_session(workspace, 55, context=SessionContext(facts=["a"]))
    plan = compaction.preview(workspace, sid)
    workspace.repo.set_context(sid, SessionContext(facts=["a", "b"]))
    before = snapshot(workspace, sid)
    with pytest.raises(CompactionError, match="changed after the preview"):
        compaction.apply(workspace, plan)
    assert snapshot(workspace, sid) == before

    plan = compaction.preview(workspace, sid)
    workspace.repo.set_state([plan.folded_ids[3]], "evicted")
    before = snapshot(workspace, sid)
    with pytest.raises(CompactionError, match="no longer active"):
        compaction.apply(workspace, plan)
    assert snapshot(workspace, sid) == before
    assert compaction.history(workspace, sid) == []


def test_an_edited_summary_is_applied_and_its_tokens_counted(workspace: Workspace) -> None:
    sid = chat_session(workspace, 55, context=SessionContext(summary="Before."))
    plan = compaction.preview(workspace, sid)
    result = compaction.apply(workspace, plan, summary="Ana wants a window seat.")
    assert workspace.repo.get_context(sid).summary == "Before.\n\nAna wants a window seat."
    (record,) = compaction.history(workspace, sid)
    assert record.summary == "Ana wants a window seat."
    expected = compaction.request_tokens(
        None, "Before.\n\nAna wants a window seat.", load_active(workspace.db, sid), COUNTER
    )
    assert record.tokens_after == expected
    assert result.plan is not None and result.plan.tokens_after == expected


def test_tool_groups_and_important_messages_stay_in_the_store(workspace: Workspace) -> None:
    messages = [Message("system", "Agent.")]
    for i in range(30):
        messages.append(Message("user", long_text(i, 10), important=(i == 2)))
        messages.append(Message("assistant", "", tool_calls=[call(f"c{i}")]))
        messages.append(Message("tool", f"result {i}", tool_call_id=f"c{i}"))
    sid = store_session(workspace, messages)
    result = compaction.compact(workspace, sid, keep=10)
    assert result.changed
    stored = workspace.repo.list_messages(sid)
    state = {m.id: m.state for m in stored}
    for m in stored:
        if m.role == "tool":
            call_msg = next(
                c for c in stored if c.tool_calls and c.tool_calls[0]["id"] == m.tool_call_id
            )
            assert state[m.id] == state[call_msg.id]
        if m.role == "system" or m.important:
            assert m.state == "active"


# -- properties ------------------------------------------------------------------------------


@st.composite
def stored_sessions(draw: st.DrawFn) -> tuple[list[Message], SessionContext]:
    messages: list[Message] = []
    if draw(st.booleans()):
        messages.append(Message("system", "You are an agent."))
    for n in range(draw(st.integers(0, 45))):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "assistant"]))
        if kind == "tools":
            ids = [f"c{n}_{k}" for k in range(draw(st.integers(1, 2)))]
            messages.append(Message("assistant", "", tool_calls=[call(i) for i in ids]))
            messages.extend(Message("tool", f"ok {i}", tool_call_id=i) for i in ids)
        else:
            messages.append(Message(kind, long_text(n, draw(st.integers(0, 40)))))
    for msg in messages:
        roll = draw(st.integers(0, 9))
        msg.important = msg.role != "system" and roll == 0
        msg.state = "folded" if roll == 1 else "evicted" if roll == 2 else "active"
    facts = draw(st.lists(st.sampled_from(["a", "A.", "b", "B ", "c", ""]), max_size=6))
    tasks = [
        Task(f"t{i}", f"task {i}", status, None, NOW - timedelta(hours=h), NOW - timedelta(hours=h))
        for i, (status, h) in enumerate(
            draw(
                st.lists(
                    st.tuples(st.sampled_from(["running", "completed", "pending"]),
                              st.integers(0, 72)),
                    max_size=4,
                )
            )
        )
    ]
    summary = draw(st.sampled_from(["", "Earlier: tea.", SUMMARY_HEADING + "\n- user: hi"]))
    return messages, SessionContext(facts=facts, summary=summary, tasks=tasks)


@PROPERTY
@given(stored_sessions(), st.integers(0, 40))
def test_apply_then_undo_gives_back_every_field(
    workspace: Workspace, session: tuple[list[Message], SessionContext], keep: int
) -> None:
    messages, context = session
    sid = store_session(workspace, messages, context)
    before = snapshot(workspace, sid)
    result = compaction.compact(workspace, sid, keep=keep, now=NOW)
    if not result.changed:
        assert snapshot(workspace, sid) == before
        return
    compaction.undo(workspace, sid)
    assert snapshot(workspace, sid) == before


@PROPERTY
@given(stored_sessions(), st.integers(0, 40))
def test_a_preview_equals_what_apply_does(
    workspace: Workspace, session: tuple[list[Message], SessionContext], keep: int
) -> None:
    messages, context = session
    sid = store_session(workspace, messages, context)
    stored_context = workspace.repo.get_context(sid)
    plan = compaction.preview(workspace, sid, keep=keep, now=NOW)
    compaction.apply(workspace, plan)
    after = workspace.repo.list_messages(sid)
    newly_folded = [m.id for m in after if m.compaction_id is not None]
    assert newly_folded == plan.folded_ids
    assert workspace.repo.get_context(sid) == plan.context_after(stored_context)
    if plan.folded_ids:
        kept = {k.id for k in plan.kept}
        assert {m.id for m in after if m.state == "active"} == kept
        (record,) = compaction.history(workspace, sid)
        assert (record.tokens_before, record.tokens_after) == (
            plan.tokens_before,
            plan.tokens_after,
        )
        # The figure the preview showed is the request the session now makes.
        now_tokens = compaction.request_tokens(
            None, workspace.repo.get_context(sid).summary, load_active(workspace.db, sid), COUNTER
        )
        assert now_tokens == plan.tokens_after
    else:
        # Nothing folds; a record exists only when the facts or tasks were tidied.
        assert newly_folded == []
        assert len(compaction.history(workspace, sid)) == int(plan.changed)


# -- the model summarizer -------------------------------------------------------------------------


def test_the_model_summarizer_gets_the_prompt_previous_summary_and_folded_messages(
    workspace: Workspace,
) -> None:
    sid = chat_session(workspace, 55, context=SessionContext(summary="Ana likes tea."))
    provider = ScriptedProvider(["Ana likes tea and planned a trip to Porto."])
    plan = compaction.preview(
        workspace, sid, summarizer="model", provider=provider, prompt="Summarize tersely."
    )
    assert plan.summarizer == "model"
    assert plan.new_summary == "Ana likes tea and planned a trip to Porto."
    (request,) = provider.requests
    system, user = request.messages
    assert system.role == "system" and system.content == "Summarize tersely."
    assert "Ana likes tea." in user.content
    # 24 fold: the 30th-newest is a reply and its question stays with it.
    assert plan.folded_count == 24
    folded_texts = [m.content for m in workspace.repo.list_messages(sid)[1:25]]
    assert all(text[:40] in user.content for text in folded_texts)
    compaction.apply(workspace, plan)
    assert workspace.repo.get_context(sid).summary == plan.new_summary
    assert compaction.history(workspace, sid)[0].summarizer == "model"


def test_the_model_summarizer_builds_progressively_in_chunks(workspace: Workspace) -> None:
    sid = chat_session(workspace, 120)
    replies = iter(f"summary {k}" for k in range(1, 100))
    provider = ScriptedProvider(default=lambda request: next(replies), window=2500)
    plan = compaction.preview(workspace, sid, summarizer="model", provider=provider)
    assert provider.calls > 1
    # Each call is given the summary the call before it wrote.
    for k, request in enumerate(provider.requests[1:], start=1):
        assert f"Summary so far:\nsummary {k}\n" in request.messages[1].content
    assert plan.new_summary == f"summary {provider.calls}"
    for request in provider.requests:
        assert COUNTER.count_request(request.messages) < 2500


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        (ServerError("The server failed (500).", status=500), "The server failed"),
        (UnreachableError("Cannot reach 127.0.0.1:9."), "Cannot reach"),
        (Reply(text="   "), "empty summary"),
    ],
)
def test_a_model_summarizer_failure_leaves_the_session_untouched_and_says_why(
    workspace: Workspace, reply: Any, words: str
) -> None:
    sid = chat_session(workspace, 55, context=SessionContext(summary="Kept."))
    before = snapshot(workspace, sid)
    with pytest.raises(CompactionError, match=words) as caught:
        compaction.compact(workspace, sid, summarizer="model", provider=ScriptedProvider([reply]))
    assert "left unchanged" in str(caught.value)
    assert snapshot(workspace, sid) == before
    assert compaction.history(workspace, sid) == []


def test_the_model_summarizer_without_a_configured_provider_says_so(
    workspace: Workspace,
) -> None:
    sid = chat_session(workspace, 55)
    with pytest.raises(CompactionError, match="No provider is configured"):
        compaction.preview(workspace, sid, summarizer="model")
    # A session with nothing to compact never needs the provider.
    small = chat_session(workspace, 4)
    assert not compaction.preview(workspace, small, summarizer="model").changed


# -- policy and auto-compaction ------------------------------------------------------------------


def test_the_agent_policy_applies_with_the_session_override(workspace: Workspace) -> None:
    agent = workspace.repo.create_agent(
        "compacting", memory_policy={"compaction": {"max_messages": 10, "keep_messages": 6}}
    )
    sid = chat_session(workspace, 12, agent_id=agent.id)
    assert compaction.preview(workspace, sid).active_after == 6
    workspace.repo.set_overrides(sid, {"compaction": {"keep_messages": 3}})
    assert compaction.policy_for(workspace, sid).keep_messages == 3
    # The 3rd-newest is a reply: its question stays too.
    assert compaction.preview(workspace, sid).active_after == 4


def test_auto_compaction_is_off_unless_the_session_opts_in(workspace: Workspace) -> None:
    sid = chat_session(workspace, 60)
    before = snapshot(workspace, sid)
    assert compaction.maybe_compact_before_send(Memory.open(workspace, sid)) is None
    assert snapshot(workspace, sid) == before


def test_auto_compaction_before_a_send_compacts_records_and_refreshes_memory(
    workspace: Workspace,
) -> None:
    overrides = {"compaction": {"auto": True, "max_messages": 10, "keep_messages": 4}}
    sid = chat_session(workspace, 12, overrides=overrides)
    memory = Memory.open(workspace, sid)
    assert len(memory) == 13
    result = compaction.maybe_compact_before_send(memory)
    assert result is not None and result.changed
    assert len(memory) == 5
    assert [m.role for m in memory.messages()][0] == "system"
    (record,) = compaction.history(workspace, sid)
    assert record.details["auto"] is True
    assert record.policy.startswith("auto:")
    # Within the policy now: the next send does not compact again.
    again = compaction.maybe_compact_before_send(memory)
    assert again is not None and not again.changed
    assert len(compaction.history(workspace, sid)) == 1
    # An in-memory memory has nothing stored to compact.
    assert compaction.maybe_compact_before_send(Memory()) is None


def test_model_execute_compacts_an_opted_in_session_before_sending(
    workspace: Workspace,
) -> None:
    from workbench.engine.model import Model

    overrides = {"compaction": {"auto": True, "max_messages": 10, "keep_messages": 4}}
    sid = chat_session(workspace, 12, overrides=overrides)
    memory = Memory.open(workspace, sid)
    provider = ScriptedProvider(["fine"])

    response = Model(provider).with_memory(memory, auto=True).execute("and now?")

    (record,) = compaction.history(workspace, sid)
    assert record.details["auto"] is True
    assert response.compaction_id == record.id  # the GUI reloads the session on it
    # The next send stays within the policy: no compaction to report.
    assert Model(ScriptedProvider(["ok"])).with_memory(memory, auto=True).execute(
        "more?"
    ).compaction_id is None
    sent = provider.requests[0].messages
    # The folded history left the request; the summary and the recent turns went.
    assert len([m for m in sent if m.role != "system"]) == 5
    assert any("Previous conversation summary" in m.content for m in sent)


def test_auto_compaction_with_a_failing_model_reports_and_changes_nothing(
    workspace: Workspace,
) -> None:
    overrides = {
        "compaction": {"auto": True, "max_messages": 10, "keep_messages": 4, "summarizer": "model"}
    }
    sid = chat_session(workspace, 12, overrides=overrides)
    before = snapshot(workspace, sid)
    provider = ScriptedProvider([ServerError("The server failed (503).", status=503)])
    result = compaction.maybe_compact_before_send(Memory.open(workspace, sid), provider=provider)
    assert result is not None and not result.changed
    assert "The server failed" in result.message
    assert snapshot(workspace, sid) == before
    ok = ScriptedProvider(["A short summary."])
    result = compaction.maybe_compact_before_send(Memory.open(workspace, sid), provider=ok)
    assert result is not None and result.changed
    assert workspace.repo.get_context(sid).summary == "A short summary."


def test_an_open_memory_keeps_in_step_with_compaction_and_undo(workspace: Workspace) -> None:
    sid = chat_session(workspace, 20)
    memory = Memory.open(workspace, sid)
    assert len(memory.messages()) == 21
    compaction.compact(workspace, sid, keep=5)
    # The system message, the 5 newest and the question of the 5th-newest (a reply).
    assert len(memory) == 7
    assert len(memory.messages()) == 7
    compaction.undo(workspace, sid)
    assert len(memory) == 21
    assert len(memory.messages()) == 21


def test_the_model_summarizer_refuses_a_window_too_small_for_the_summary(
    workspace: Workspace,
) -> None:
    sid = chat_session(workspace, 55, context=SessionContext(summary=long_text(0, 400)))
    before = snapshot(workspace, sid)
    provider = ScriptedProvider(["never sent"], window=400)
    with pytest.raises(CompactionError, match=r"context window \(400 tokens\) has no room"):
        compaction.compact(workspace, sid, summarizer="model", provider=provider)
    assert provider.calls == 0
    assert snapshot(workspace, sid) == before


# -- the pieces the engine relies on ----------------------------------------------------------


@pytest.mark.parametrize("summary", ["", "Short.", SUMMARY_HEADING + "\n- user: hi\n- tool: x"])
@pytest.mark.parametrize("instructions", [None, "Be brief."])
def test_request_tokens_are_what_request_assembly_counts(
    workspace: Workspace,
    build_rich_session: Any,
    summary: str,
    instructions: str | None,
) -> None:
    from workbench.core.assembly import RequestParts, assemble

    sid = build_rich_session(workspace)
    history = load_active(workspace.db, sid)
    # The history as it stands: a leading reply counts (strict order is for requests).
    expected = assemble(
        RequestParts(instructions=instructions, summary=summary, history=history,
                     strict_order=False),
        counter=COUNTER,
    ).tokens.total
    assert compaction.request_tokens(instructions, summary, history, COUNTER) == expected


def test_the_lean_loader_reads_what_the_repository_reads(
    workspace: Workspace, build_rich_session: Any
) -> None:
    sid = build_rich_session(workspace)
    full = workspace.repo.list_messages(sid, states=["active"])
    lean = load_active(workspace.db, sid)
    fields = ("id", "position", "role", "content", "name", "tool_calls", "tool_call_id",
              "token_count", "token_encoding", "important", "metadata", "state",
              "compaction_id", "session_id")
    assert [[getattr(m, f) for f in fields] for m in lean] == [
        [getattr(m, f) for f in fields] for m in full
    ]


def test_a_broken_auto_policy_does_not_stop_a_send(workspace: Workspace) -> None:
    sid = chat_session(workspace, 60, overrides={"compaction": {"auto": True, "keep": 3}})
    before = snapshot(workspace, sid)
    result = compaction.maybe_compact_before_send(Memory.open(workspace, sid))
    assert result is not None and not result.changed
    assert "no setting 'keep'" in result.message
    assert snapshot(workspace, sid) == before
    with pytest.raises(CompactionError, match="no setting 'keep'"):
        compaction.preview(workspace, sid)


def _plain_and_whole_session(workspace: Workspace) -> int:
    """Plain rows with and without details (metadata, a name, a compaction id), whole
    rows of every kind, counts in the counter's encoding, another one, and none."""
    messages = [
        Message("system", "You are an agent."),
        Message("user", long_text(1)),
        Message("assistant", long_text(2), metadata={"model": "m", "usage": {"input": 3}}),
        Message("user", "Named user", name="ana"),
        Message("assistant", "", tool_calls=[call("c1", "search")]),
        Message("tool", "3 flights", tool_call_id="c1", name="search"),
        Message("user", "Pinned one", metadata={"pinned": True}),
        Message("assistant", "Marked", important=True),
        Message("user", "Metadata that mentions important", metadata={"note": "important"}),
        Message("assistant", long_text(3)),
        Message("user", long_text(4)),
    ]
    sid = store_session(workspace, messages)
    ids = [m.id for m in workspace.repo.list_messages(sid)]
    workspace.repo.set_token_counts([(ids[9], 5, "cl100k_base")])
    with workspace.db.write() as conn:
        conn.execute(update(M).where(M.c.id == ids[10]).values(token_count=None,
                                                               token_encoding=None))
        conn.execute(update(M).where(M.c.id == ids[1]).values(compaction_id=99))
    return sid


@pytest.mark.parametrize("rich", [True, False])
def test_the_table_loader_reads_what_the_lean_loader_reads(
    workspace: Workspace, build_rich_session: Any, rich: bool
) -> None:
    from workbench.store.compactions import load_table

    sid = build_rich_session(workspace) if rich else _plain_and_whole_session(workspace)
    lean = load_active(workspace.db, sid)
    table = load_table(workspace.db, sid, COUNTER.encoding_name)
    assert len(table) == len(lean)
    assert table.whole, "the sessions hold whole rows"
    assert len(table.whole) < len(table), "and plain ones"
    fields = ("id", "position", "role", "content", "name", "tool_calls", "tool_call_id",
              "important", "metadata", "state", "compaction_id", "session_id")
    for i, msg in enumerate(lean):
        built = table.message(i)
        assert [getattr(built, f) for f in fields] == [getattr(msg, f) for f in fields]
        if msg.token_encoding == COUNTER.encoding_name:
            assert table.costs[i] == msg.token_count
            assert (built.token_count, built.token_encoding) == (msg.token_count,
                                                                 msg.token_encoding)
        else:
            assert table.costs[i] is None


@pytest.mark.parametrize("summary", ["", "Short."])
@pytest.mark.parametrize("instructions", [None, "Be brief."])
def test_request_tokens_of_table_rows_are_those_of_their_messages(
    workspace: Workspace, summary: str, instructions: str | None
) -> None:
    from workbench.store.compactions import load_table

    sid = _plain_and_whole_session(workspace)
    table = load_table(workspace.db, sid, COUNTER.encoding_name)
    everything = table.everything()
    rows = [range(len(table)), [1, 2, 3], [0, 4, 5, 9, 10], [5], []]
    for chosen in rows:
        selection = table.select(list(chosen))
        messages = [m.copy() for m in selection]
        assert compaction.request_tokens(instructions, summary, selection, COUNTER) == (
            compaction.request_tokens(instructions, summary, messages, COUNTER)
        )
    # A table read for another encoding has no costs to trust: everything is counted.
    other = load_table(workspace.db, sid, "cl100k_base")
    assert compaction.request_tokens(None, "", other.everything(), COUNTER) == (
        compaction.request_tokens(None, "", [m.copy() for m in everything], COUNTER)
    )


@PROPERTY
@given(stored_sessions(), st.integers(0, 40), st.sets(st.integers(0, 90), max_size=10),
       st.sets(st.integers(0, 90), max_size=10))
def test_a_preview_from_kept_summary_lines_equals_one_from_the_texts(
    workspace: Workspace,
    session: tuple[list[Message], SessionContext],
    keep: int,
    no_line: set[int],
    no_count: set[int],
) -> None:
    """Long folds are written and counted from the lines the store keeps (missing ones
    are written on the spot): the plan is the one made from the messages' texts."""
    from workbench.core.compaction import CompactionPolicy, ExtractiveSummarizer, plan_compaction

    messages, context = session
    sid = store_session(workspace, messages, context)
    ids = [m.id for m in workspace.repo.list_messages(sid)]
    with workspace.db.write() as conn:
        for i in no_line:
            if i < len(ids):
                conn.execute(update(M).where(M.c.id == ids[i]).values(
                    summary_line=None, summary_line_tokens=None))
        for i in no_count:
            if i < len(ids):
                conn.execute(update(M).where(M.c.id == ids[i]).values(
                    summary_line_tokens=None))
    # Every line of a fold of 25 messages or more is at most 40 characters: kept lines.
    policy = CompactionPolicy(summary_chars=1000)
    info = workspace.repo.get_session(sid)
    instructions = workspace.repo.get_agent(info.agent_id).instructions or None
    plan = compaction.preview(workspace, sid, keep=keep, policy=policy, now=NOW)
    expected = plan_compaction(
        load_active(workspace.db, sid),
        workspace.repo.get_context(sid),
        policy=policy,
        summarizer=ExtractiveSummarizer(policy.line_chars, policy.summary_chars),
        request_tokens=lambda summary, history: compaction.request_tokens(
            instructions, summary, history, COUNTER
        ),
        now=NOW,
        keep=keep,
        session_id=sid,
    )
    assert plan.to_json() == expected.to_json()


def test_auto_compaction_that_would_not_lower_the_tokens_is_not_applied(
    workspace: Workspace,
) -> None:
    """Issue 15.3: a fold whose summary costs more than what it folds is left alone."""
    overrides = {"compaction": {"auto": True, "max_messages": 3, "keep_messages": 2}}
    messages = [Message("user" if i % 2 == 0 else "assistant", "ok") for i in range(4)]
    sid = store_session(workspace, messages, overrides=overrides)
    plan = compaction.preview(workspace, sid, auto=True)
    assert plan.changed and plan.tokens_after >= plan.tokens_before
    before = snapshot(workspace, sid)
    result = compaction.maybe_compact_before_send(Memory.open(workspace, sid))
    assert result is not None and not result.changed
    assert "would not lower" in result.message
    assert snapshot(workspace, sid) == before
    assert compaction.history(workspace, sid) == []


def test_a_session_that_did_not_change_is_planned_from_the_table_read_before(
    workspace: Workspace, db_target: Path | str
) -> None:
    """Previews of an unchanged session reuse the table read the time before (with the
    lines written for it); any change, by this process or another connection, makes the
    next preview read the session again, and the plans are those of a fresh read."""
    import sqlite3

    from workbench.store.compactions import forget_tables, load_table_kept

    sid = chat_session(workspace, 80)
    db = workspace.db
    first = load_table_kept(db, sid, COUNTER.encoding_name)
    again = load_table_kept(db, sid, COUNTER.encoding_name)
    if not db.is_file:  # the team store is always read
        assert again is not first
        return
    assert again is first
    assert load_table_kept(db, sid, "cl100k_base") is not first  # another encoding
    plan = compaction.preview(workspace, sid, keep=10)
    assert compaction.preview(workspace, sid, keep=10).summary == plan.summary

    # A change through the store: read again, and the preview shows it.
    msgs = workspace.repo.list_messages(sid)
    workspace.repo.update_message(msgs[1].id, content="Changed through the store.")
    changed = load_table_kept(db, sid, COUNTER.encoding_name)
    assert changed is not first
    assert "Changed through the store." in compaction.preview(workspace, sid, keep=10).summary

    # A change by another connection (another process would look the same).
    current = load_table_kept(db, sid, COUNTER.encoding_name)
    raw = sqlite3.connect(str(db_target))
    try:
        raw.execute("UPDATE messages SET content = 'Changed elsewhere.' WHERE id = ?",
                    (msgs[2].id,))
        raw.commit()
    finally:
        raw.close()
    assert load_table_kept(db, sid, COUNTER.encoding_name) is not current
    assert "Changed elsewhere." in compaction.preview(workspace, sid, keep=10).summary

    forget_tables(db)
    assert load_table_kept(db, sid, COUNTER.encoding_name) is not current


def test_the_table_leaves_out_texts_it_does_not_need_and_reads_them_when_asked(
    workspace: Workspace,
) -> None:
    """Rows whose summary line and counts are kept are read without their text; asking
    for the texts reads them all, as they are stored."""
    from workbench.store.compactions import load_table

    sid = _plain_and_whole_session(workspace)
    stored = [m.content for m in load_active(workspace.db, sid)]
    table = load_table(workspace.db, sid, COUNTER.encoding_name)
    unread = [i for i, text in enumerate(table._texts) if text is None]
    assert unread, "plain rows with kept lines and counts come without their text"
    assert all(i not in table.whole for i in unread)
    plan = compaction.preview(workspace, sid, keep=1)
    assert plan.folded_ids
    assert list(table.texts) == stored
    # A summary written from the texts (a line length the store does not keep) is the
    # one written from fully read rows.
    fresh = load_table(workspace.db, sid, COUNTER.encoding_name)
    assert [fresh.message(i).content for i in range(len(fresh))] == stored


def _mixed_session(workspace: Workspace, count: int) -> int:
    """Plain turns (some with metadata, a name, a blank or a long text), tool groups,
    important and pinned messages: every kind of row the table loader tells apart."""
    messages = [Message("system", "You are a careful travel agent.")]
    for i in range(count):
        kind = i % 9
        if kind == 3:
            messages.append(Message("assistant", "", tool_calls=[call(f"c{i}")]))
            messages.append(Message("tool", long_text(i, 20), tool_call_id=f"c{i}",
                                    name="lookup"))
        elif kind == 5:
            messages.append(Message("user", long_text(i, 8), metadata={"source": "mail"}))
        elif kind == 7 and i % 2:
            messages.append(Message("assistant", long_text(i, 5), important=True))
        elif kind == 7:
            messages.append(Message("user", "   pinned\n\n  one ", metadata={"pinned": True}))
        else:
            messages.append(Message("user" if i % 2 == 0 else "assistant",
                                    long_text(i, 3 + i % 40), name="ana" if i == 4 else None))
    return store_session(workspace, messages, SessionContext(summary="Earlier: Ana."))


PREVIEW_SETTINGS: list[dict[str, Any]] = [
    {},
    {"keep": 0},
    {"keep": 7},
    {"keep": 150},
    {"fold_range": (20, 90)},
    {"policy_changes": {"summary_chars": 1000}},
    {"policy_changes": {"line_chars": 60, "max_messages": 100, "keep_messages": 40}},
    {"policy_changes": {"max_tokens": 600, "max_messages": None}},
]


def _policy_and_options(setting: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """One of PREVIEW_SETTINGS as the policy and the other options of a preview."""
    from workbench.core.compaction import CompactionPolicy

    options = dict(setting)
    return CompactionPolicy().replace(**options.pop("policy_changes", {})), options


def _lose_some_lines(workspace: Workspace, ids: list[int]) -> None:
    """Some kept summary lines lost, and some lines' counts."""
    with workspace.db.write() as conn:
        conn.execute(update(M).where(M.c.id.in_(ids[::3])).values(
            summary_line=None, summary_line_tokens=None))
        conn.execute(update(M).where(M.c.id.in_(ids[1::5])).values(summary_line_tokens=None))


def _expected_plan(workspace: Workspace, sid: int, options: dict[str, Any]) -> dict[str, Any]:
    """The plan made from the session's messages (not the store's table)."""
    from workbench.core.compaction import ExtractiveSummarizer, plan_compaction

    policy, options = _policy_and_options(options)
    info = workspace.repo.get_session(sid)
    instructions = workspace.repo.get_agent(info.agent_id).instructions or None
    return plan_compaction(
        load_active(workspace.db, sid),
        workspace.repo.get_context(sid),
        policy=policy,
        summarizer=ExtractiveSummarizer(policy.line_chars, policy.summary_chars),
        request_tokens=lambda summary, history: compaction.request_tokens(
            instructions, summary, history, COUNTER
        ),
        now=NOW,
        session_id=sid,
        **options,
    ).to_json()


@pytest.mark.parametrize("lines", ["all", "some"])
def test_previews_one_after_another_from_one_table_plan_as_the_messages_do(
    workspace: Workspace, lines: str
) -> None:
    """Previews of an unchanged session with one setting after another plan from the
    table read once and continue the summaries counted on it: each plan is still the
    one made from the messages, in any order."""
    from workbench.store.compactions import forget_tables

    sid = _mixed_session(workspace, 240)
    if lines == "some":
        _lose_some_lines(workspace, [m.id for m in workspace.repo.list_messages(sid)])
    expected = [_expected_plan(workspace, sid, options) for options in PREVIEW_SETTINGS]
    forget_tables()
    count = len(PREVIEW_SETTINGS)
    for order in (range(count), range(count - 1, -1, -1), range(1, count, 2)):
        for k in order:
            policy, options = _policy_and_options(PREVIEW_SETTINGS[k])
            plan = compaction.preview(workspace, sid, policy=policy, now=NOW, **options)
            assert plan.to_json() == expected[k], PREVIEW_SETTINGS[k]


@pytest.mark.parametrize("options", PREVIEW_SETTINGS)
def test_previews_from_the_store_plan_as_the_messages_do_with_and_without_kept_lines(
    workspace: Workspace, options: dict[str, Any]
) -> None:
    """The plan a preview makes from the store's table (kept lines, none, or some) is the
    one made from the session's messages, for every kind of setting."""
    from workbench.store.compactions import forget_tables

    sid = _mixed_session(workspace, 240)
    expected = _expected_plan(workspace, sid, options)
    policy, options = _policy_and_options(options)
    assert expected["changed"]

    def previewed() -> dict[str, Any]:
        forget_tables()
        return compaction.preview(workspace, sid, policy=policy, now=NOW, **options).to_json()

    assert previewed() == expected  # every line kept
    ids = [m.id for m in workspace.repo.list_messages(sid)]
    _lose_some_lines(workspace, ids)
    assert previewed() == expected
    with workspace.db.write() as conn:  # as a database written before lines were kept
        conn.execute(update(M).where(M.c.session_id == sid).values(
            summary_line=None, summary_line_tokens=None))
    assert previewed() == expected
    assert compaction.keep_summary_lines(workspace, sid) == len(ids)
    assert previewed() == expected


# -- a cut inside a turn ------------------------------------------------------------------------


def test_after_a_cut_inside_a_turn_chat_sends_every_active_message(
    workspace: Workspace,
) -> None:
    """Keeping 4 of a chat that ends with a question puts the cut after a question: its
    reply, the first kept, keeps it, so the request chat sends (what preflight shows)
    leaves no kept reply out, and the preview's figure is that request's."""
    from workbench.engine.turn import preflight_session

    sid = chat_session(workspace, 11)
    stored = workspace.repo.list_messages(sid)
    plan = compaction.preview(workspace, sid, keep=4)
    compaction.apply(workspace, plan)
    remaining = active(workspace, sid)
    preview = preflight_session(workspace, sid, "")
    assert preview.left_out == []
    sent = [m.id for m in preview.messages if m.id is not None]
    assert sent == [m.id for m in remaining]
    assert preview.tokens.total == plan.tokens_after
    # The question of the first kept reply stayed with it.
    assert stored[8].role == "assistant" and stored[7].role == "user"
    assert plan.folded_ids == [m.id for m in stored[1:7]]
    assert [m.id for m in remaining] == [stored[0].id, *[m.id for m in stored[7:]]]
