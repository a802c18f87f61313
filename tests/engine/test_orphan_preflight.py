"""Preflight and compaction over the orphaned tool results that 0014_orphan_results keeps:
an orphan far back in a long left-out stretch is still named, and folding and unfolding
keep the list right."""

from __future__ import annotations

import pytest

from tests.store.test_orphan_results import _call, _check
from workbench.core.assembly import REASON_ORPHAN_RESULT
from workbench.core.conversation import Message
from workbench.engine import compaction
from workbench.engine.memory import Memory
from workbench.engine.turn import preflight_session
from workbench.engine.workspace import Workspace


def test_a_compaction_and_its_undo_keep_the_orphans(workspace: Workspace) -> None:
    history = []
    for i in range(40):
        history.append(Message(role="user", content=f"question {i}"))
        history.append(Message(role="assistant", content="", tool_calls=[_call(f"c{i}")]))
        history.append(Message(role="tool", content=f"answer {i}", tool_call_id=f"c{i}"))
        if i % 10 == 0:
            history.append(Message(role="tool", content="stray", tool_call_id=f"lost{i}"))
        history.append(Message(role="assistant", content=f"reply {i}"))
    info = workspace.repo.create_session(title="long")
    workspace.repo.append_messages(info.id, history)
    before = _check(workspace.db)
    assert len(before) == 4
    result = compaction.compact(workspace, info.id)
    assert result.changed
    # The folded strays leave the list (only active results are kept); any left is active.
    folded = _check(workspace.db)
    assert len(folded) < len(before)
    assert {r[3] for r in folded} <= {"active"}
    compaction.undo(workspace, info.id)
    assert _check(workspace.db) == before
    # The triggers are back at work after both: a stray appended now is listed.
    workspace.repo.append_messages(info.id, [Message(role="tool", content="late stray",
                                                     tool_call_id="never")])
    assert len(_check(workspace.db)) == len(before) + 1


def test_preflight_names_the_orphan_far_back_in_a_long_left_out_stretch(
    workspace: Workspace,
) -> None:
    """An orphan among thousands of left-out messages is reported on its own, and a result
    answered by a call before the stretch (the leading system message's place) is not."""
    info = workspace.repo.create_session(title="long")
    history = [Message(role="system", content="Be brief.")]
    for i in range(600):
        history.append(Message(role="user", content=f"question {i} " * 20))
        history.append(Message(role="assistant", content="", tool_calls=[_call(f"c{i}")]))
        history.append(Message(role="tool", content=f"answer {i}", tool_call_id=f"c{i}"))
        if i == 7:
            history.append(Message(role="tool", content="stray", tool_call_id="lost"))
        history.append(Message(role="assistant", content=f"reply {i} " * 20))
    workspace.repo.append_messages(info.id, history)
    preview = preflight_session(workspace, info.id, "next", context_window=4000)
    stray = next(m for m in workspace.repo.list_messages(info.id) if m.content == "stray")
    ranges = preview.left_out_ranges()
    orphans = [r for r in ranges if r.reason == REASON_ORPHAN_RESULT]
    assert [(r.first_id, r.count) for r in orphans] == [(stray.id, 1)]
    assert sum(r.count for r in ranges) > 2000
    # The whole-session path (every message read and tested in Python) reports the same.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Memory, "history", Memory.view)
        whole = preflight_session(workspace, info.id, "next", context_window=4000)
    assert whole.to_json() == preview.to_json()
