"""The session-context use cases behind the Context panel, and the composer's preflight."""

from __future__ import annotations

from dataclasses import replace

import pytest

from workbench.core.conversation import (
    Conversation,
    Message,
    SessionContext,
    Task,
    TokenUsage,
)
from workbench.core.provider import ProviderConfig
from workbench.engine.chat import left_out_previews, preflight_turn
from workbench.engine.providers import ProviderSettings, build_provider
from workbench.engine.session_context import (
    add_facts,
    add_memory_entry,
    add_task,
    change_context,
    dedupe_session_facts,
    delete_memory_entry,
    memory_entries_for,
    read_session_context,
    remove_fact,
    remove_task,
    restore_memory_entry,
    update_context,
)
from workbench.engine.turn import preflight_session
from workbench.engine.workspace import Workspace
from workbench.errors import RequestError


def _session(ws: Workspace, title: str = "Chat", count: int = 2) -> int:
    messages = [Message(role=("user", "assistant")[i % 2], content=f"Message {i} " + "word " * 20)
                for i in range(count)]
    return ws.repo.import_many([Conversation(title=title, messages=messages)])[0].session.id


def test_update_context_changes_only_the_fields_named(workspace: Workspace) -> None:
    sid = _session(workspace)
    context = workspace.repo.get_context(sid)
    context.token_usage = TokenUsage(input_tokens=100, output_tokens=20)
    context.facts = ["One."]
    workspace.repo.set_context(sid, context)

    change = update_context(workspace, sid, summary="A summary.",
                            tasks=[Task(id="t", description="Do it", progress=0.25)])
    assert change.changed and change.before.summary == "" and change.after.summary == "A summary."
    stored = workspace.repo.get_context(sid)
    assert stored.summary == "A summary." and stored.facts == ["One."]
    assert stored.token_usage == TokenUsage(input_tokens=100, output_tokens=20)
    assert [(t.id, t.progress) for t in stored.tasks] == [("t", 0.25)]

    with pytest.raises(RequestError, match="token_usage"):
        update_context(workspace, sid, token_usage=TokenUsage())
    with pytest.raises(RequestError, match="outside 0 to 1"):
        update_context(workspace, sid, tasks=[Task(id="x", description="x", progress=2.0)])
    with pytest.raises(RequestError, match="list of texts"):
        update_context(workspace, sid, facts="not a list")


def test_dedupe_keeps_the_first_spelling_in_order(workspace: Workspace) -> None:
    sid = _session(workspace)
    update_context(workspace, sid, facts=["A b.", "c", "a  B", "", "C!", "d"])
    change = dedupe_session_facts(workspace, sid)
    assert change.after.facts == ["A b.", "c", "d"]
    assert change.removed == ["a  B", "", "C!"]
    assert read_session_context(workspace, sid).context.facts == ["A b.", "c", "d"]
    assert not dedupe_session_facts(workspace, sid).changed


def test_memory_entries_of_a_session_and_their_round_trip(workspace: Workspace) -> None:
    sid = _session(workspace)
    other = _session(workspace, "Other")
    kept, new = add_memory_entry(workspace, sid, "  Likes tea.  ")
    # The scope the session's policy recalls with: the default agent's is "session".
    assert new and kept.content == "Likes tea." and kept.scope == "session"
    assert kept.session_id == sid
    assert kept.namespace == "default"
    mine, _ = add_memory_entry(workspace, sid, "Only here.", scope="session", namespace="n")
    add_memory_entry(workspace, other, "Only there.", scope="session")
    assert add_memory_entry(workspace, sid, "Likes tea.")[1] is False
    with pytest.raises(RequestError, match="needs some text"):
        add_memory_entry(workspace, sid, "   ")

    listed = memory_entries_for(workspace, sid)
    assert {e.content for e in listed} == {"Likes tea.", "Only here."}
    assert read_session_context(workspace, sid).entries == listed

    gone = delete_memory_entry(workspace, int(mine.id))
    assert {e.content for e in memory_entries_for(workspace, sid)} == {"Likes tea."}
    back = restore_memory_entry(workspace, gone)
    assert (back.content, back.scope, back.namespace, back.session_id) == (
        "Only here.", "session", "n", sid)


def test_overview_counts_the_active_messages(workspace: Workspace) -> None:
    sid = _session(workspace, count=4)
    first = workspace.repo.list_messages(sid)[0]
    workspace.repo.set_state([int(first.id)], "folded")
    overview = read_session_context(workspace, sid)
    assert overview.active_messages == 3
    assert overview.local_tokens == workspace.repo.token_total(sid)
    assert overview.agent_name == workspace.repo.default_agent().name


def test_preflight_turn_builds_with_the_chosen_provider_and_model(workspace: Workspace) -> None:
    sid = _session(workspace, count=40)
    ProviderSettings(workspace.db).add(ProviderConfig(
        name="p", kind="openai", base_url="http://127.0.0.1:9/v1", model="m",
        context_window=400))
    result = preflight_turn(workspace, sid, "Hi", provider="p", model="other", window=400)
    assert result.payload["model"] == "other"
    assert result.provider["name"] == "p" and not result.provider["assumed"]
    assert result.left_out, "a 400-token window leaves most of 40 messages out"
    # The same as preflight of the session with that client.
    config = ProviderSettings(workspace.db).get("p")
    client = build_provider(replace(config, model="other"))
    try:
        same = preflight_session(workspace, sid, "Hi", provider=client, context_window=400)
    finally:
        client.close()
    assert same.payload == result.payload

    previews = left_out_previews(workspace, sid, result.left_out)
    positions = [int(item.position) for item in result.left_out]
    assert sorted(previews) == positions
    assert previews[positions[0]][0] == "user"
    assert previews[positions[0]][1].startswith(f"Message {positions[0]} word")


def test_load_context_of_a_missing_session_can_create_it(workspace: Workspace) -> None:
    """Seed 002: ``load(session_id)`` "Load context (creates new if not exists)"."""
    from workbench.engine.session_context import load_context
    from workbench.errors import NotFoundError

    with pytest.raises(NotFoundError):
        load_context(workspace, "user1:agent1:123")
    context = load_context(workspace, "user1:agent1:123", create=True)
    assert context.facts == [] and context.summary == ""
    info = workspace.repo.find_session("user1:agent1:123")
    assert info.title == "user1:agent1:123"
    # Loading again finds the same session, and does not create another.
    load_context(workspace, "user1:agent1:123", create=True)
    assert workspace.repo.count_sessions() == 1


def test_adds_append_to_what_is_stored_and_removes_take_out_only_their_own(
    workspace: Workspace,
) -> None:
    sid = _session(workspace)
    update_context(workspace, sid, facts=["Old."])
    # Two front ends that both read ["Old."] add one fact each: both stay.
    add_facts(workspace, sid, ["  First   fact. "])
    change = add_facts(workspace, sid, ["Second fact.", ""])
    assert change.before.facts == ["Old.", "First fact."]
    assert workspace.repo.get_context(sid).facts == ["Old.", "First fact.", "Second fact."]
    remove_fact(workspace, sid, "First fact.")
    assert workspace.repo.get_context(sid).facts == ["Old.", "Second fact."]
    assert not remove_fact(workspace, sid, "Never there.").changed

    _, first = add_task(workspace, sid, "Book  the train")
    _, second = add_task(workspace, sid, "Book the train")
    assert first.id != second.id and first.description == "Book the train"
    assert [t.id for t in workspace.repo.get_context(sid).tasks] == [first.id, second.id]
    remove_task(workspace, sid, first.id)
    _, back = add_task(workspace, sid, first)  # put back as it was
    assert back == first
    assert [t.id for t in workspace.repo.get_context(sid).tasks] == [second.id, first.id]
    with pytest.raises(RequestError):
        add_task(workspace, sid, "   ")
    with pytest.raises(RequestError):
        add_facts(workspace, sid, "not a list")


def test_change_context_works_on_the_stored_context_and_guards_the_bookkeeping(
    workspace: Workspace,
) -> None:
    sid = _session(workspace)
    update_context(workspace, sid, facts=["A.", "B."])

    def drop_a(context: SessionContext) -> None:
        context.facts = [f for f in context.facts if f != "A."]

    add_facts(workspace, sid, ["C."])  # made after the caller read ["A.", "B."]
    change = change_context(workspace, sid, drop_a)
    assert change.after.facts == ["B.", "C."]

    def bill(context: SessionContext) -> None:
        context.token_usage = TokenUsage(input_tokens=5)

    with pytest.raises(RequestError, match="bookkeeping"):
        change_context(workspace, sid, bill)
    assert workspace.repo.get_context(sid).token_usage == TokenUsage()
