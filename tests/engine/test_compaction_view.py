"""What the Compaction panel asks of the engine: a session's policy as fields (stored as
overrides that differ from the agent's), previews with unsaved fields, and the two
directions of an undo stack (undo unless already undone; apply an undone one again)."""

from __future__ import annotations

import pytest

from workbench.core.compaction import CompactionPolicy
from workbench.core.conversation import Message
from workbench.core.provider import ProviderConfig
from workbench.core.tokens import fill_counts
from workbench.engine import compaction
from workbench.engine.compaction_view import (
    clear_policy,
    offline_window,
    preview_plan,
    read_policy,
    redo_compaction,
    save_agent_policy,
    save_policy,
    undo_applied,
)
from workbench.engine.providers import ProviderSettings
from workbench.engine.workspace import Workspace
from workbench.errors import CompactionError


def _session(ws: Workspace, count: int = 40, **overrides: object) -> int:
    info = ws.repo.create_session("view test", overrides=overrides or None)
    messages = [Message(("user", "assistant")[i % 2], f"Turn {i}: " + "words " * 40)
                for i in range(count)]
    fill_counts(messages)
    ws.repo.append_messages(info.id, messages)
    return info.id


def test_saved_fields_become_overrides_of_what_differs_from_the_agent(
    workspace: Workspace,
) -> None:
    sid = _session(workspace, memory_policy={"scope": "session"})
    view = read_policy(workspace, sid)
    assert view.policy == view.agent_policy == CompactionPolicy() and view.overrides == {}

    saved = save_policy(workspace, sid, {"max_messages": 50, "keep_messages": 12,
                                         "max_tokens": None, "auto": True, "prompt": "  "})
    # Only what differs from the agent's policy is stored; a blank prompt is no prompt.
    assert saved.overrides == {"keep_messages": 12, "max_tokens": None, "auto": True}
    assert saved.policy == CompactionPolicy(keep_messages=12, max_tokens=None, auto=True)
    assert compaction.policy_for(workspace, sid) == saved.policy
    # The session's other overrides are left alone.
    assert workspace.repo.get_session(sid).overrides["memory_policy"] == {"scope": "session"}

    # A later save keeps earlier overrides it does not mention.
    assert save_policy(workspace, sid, {"summarizer": "model"}).policy.keep_messages == 12

    # A bad policy is refused as a whole, naming the setting; nothing is written.
    with pytest.raises(CompactionError, match="'keep_messages' must not exceed"):
        save_policy(workspace, sid, {"max_messages": 10, "keep_messages": 20})
    with pytest.raises(CompactionError, match="no setting 'line_chars'"):
        save_policy(workspace, sid, {"line_chars": 80})
    assert compaction.policy_for(workspace, sid).keep_messages == 12

    cleared = clear_policy(workspace, sid)
    assert cleared.overrides == {} and cleared.policy == CompactionPolicy()
    assert workspace.repo.get_session(sid).overrides == {"memory_policy": {"scope": "session"}}


def test_fields_saved_for_the_agent_become_every_session_s_default(
    workspace: Workspace,
) -> None:
    sid = _session(workspace, memory_policy={"scope": "session"})
    other = _session(workspace)
    save_policy(workspace, sid, {"keep_messages": 12, "auto": True})
    agent_id = workspace.repo.get_session(sid).agent_id
    workspace.repo.update_agent(agent_id, memory_policy={"capture": "off"})

    view = save_agent_policy(workspace, sid, {"max_messages": 40, "keep_messages": 12,
                                              "summarizer": "extractive", "prompt": " "})
    expected = CompactionPolicy(max_messages=40, keep_messages=12)
    assert view.agent_policy == expected
    # The other session, with no overrides, follows the agent now.
    assert compaction.policy_for(workspace, other) == expected
    # This one keeps what still differs (auto) and drops what the agent now says.
    assert view.overrides == {"auto": True}
    assert view.policy == CompactionPolicy(max_messages=40, keep_messages=12, auto=True)
    # Only settings that differ from the defaults are stored; other settings stay.
    stored = workspace.repo.get_agent(agent_id).memory_policy
    assert stored == {"capture": "off", "compaction": {"max_messages": 40, "keep_messages": 12}}
    assert workspace.repo.get_session(sid).overrides["memory_policy"] == {"scope": "session"}

    # A policy that is bad for the agent, or for this session on top of it, is refused
    # as a whole; nothing is written.
    with pytest.raises(CompactionError, match="'keep_messages' must not exceed"):
        save_agent_policy(workspace, sid, {"max_messages": 10, "keep_messages": 20})
    save_policy(workspace, sid, {"keep_messages": 35})
    with pytest.raises(CompactionError, match="'keep_messages' must not exceed"):
        save_agent_policy(workspace, sid, {"max_messages": 30})
    assert compaction.policy_for(workspace, other) == expected


def test_preview_uses_unsaved_fields_and_writes_nothing(workspace: Workspace) -> None:
    sid = _session(workspace, 40)
    # The saved policy does not fire on 40 messages; the fields on screen do.
    assert not preview_plan(workspace, sid).changed
    plan = preview_plan(workspace, sid, {"max_messages": 30, "keep_messages": 25})
    # 14 fold: the 25th-newest is a reply and its question stays with it.
    assert plan.changed and plan.folded_count == 14 and plan.trigger == "messages"
    ranged = preview_plan(workspace, sid, fold_range=(4, 9))
    assert ranged.folded_count == 6
    assert compaction.history(workspace, sid) == []
    assert read_policy(workspace, sid).overrides == {}


def test_model_summary_without_a_provider_is_a_sentence(workspace: Workspace) -> None:
    sid = _session(workspace, 12)
    with pytest.raises(CompactionError, match="model summarizer cannot start: No provider"):
        preview_plan(workspace, sid, {"summarizer": "model"}, keep=4)
    # Nothing to fold: no provider is needed at all.
    assert not preview_plan(workspace, sid, {"summarizer": "model"}, keep=40).changed


def test_undo_then_redo_applies_the_same_compaction_with_its_summary(
    workspace: Workspace,
) -> None:
    sid = _session(workspace, 30)
    plan = compaction.preview(workspace, sid, keep=10)
    result = compaction.apply(workspace, plan, summary="Edited summary.")
    folded = list(plan.folded_ids)

    record = undo_applied(workspace, sid, result.compaction_id)
    assert record is not None and record.undone
    assert undo_applied(workspace, sid, result.compaction_id) is None  # already undone

    again = redo_compaction(workspace, sid, record)
    assert again.changed and again.compaction_id != result.compaction_id
    assert again.plan.folded_ids == folded
    assert workspace.repo.get_context(sid).summary == "Edited summary."
    latest = compaction.history(workspace, sid)[-1]
    assert latest.summary == "Edited summary." and latest.policy == "keep 10"

    # Once the session changed under it, an undone compaction is not applied again.
    undone = compaction.undo(workspace, sid)
    workspace.repo.set_important(folded[3], True)
    with pytest.raises(CompactionError, match="changed since compaction"):
        redo_compaction(workspace, sid, undone)
    assert all(m.state == "active" for m in workspace.repo.list_messages(sid))


def test_offline_window_is_the_configured_value_or_the_known_model(
    workspace: Workspace,
) -> None:
    sid = _session(workspace, 2)
    assert offline_window(workspace, sid) is None
    settings = ProviderSettings(workspace.db)
    settings.add(ProviderConfig(name="local", kind="openai",
                                base_url="http://127.0.0.1:9/v1", model="unknown-model",
                                context_window=8192))
    assert offline_window(workspace, sid) == 8192
    settings.update("local", context_window=None, model="gpt-4o")
    assert offline_window(workspace, sid) == 128_000
