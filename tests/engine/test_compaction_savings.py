"""A compaction that would make the request bigger is not applied when the caller asks
for savings (the desktop's Apply does), also when an edited summary is what grows it."""

from __future__ import annotations

import pytest

from workbench.core.conversation import Conversation, Message
from workbench.engine import compaction
from workbench.engine.workspace import Workspace
from workbench.errors import CompactionError


def _session(ws: Workspace, pairs: list[tuple[str, str]]) -> int:
    messages = [Message(role=r, content=c) for r, c in pairs]
    return ws.repo.import_many([Conversation(title="Chat", messages=messages)])[0].session.id


def test_a_plan_that_grows_the_request_is_refused_and_changes_nothing(
    workspace: Workspace,
) -> None:
    sid = _session(workspace, [("user", "Hi"), ("assistant", "Hello!"), ("user", "Ok"),
                               ("assistant", "Fine."), ("user", "Bye")])
    plan = compaction.preview(workspace, sid, keep=3)
    assert plan.folded_ids and not plan.lowers_tokens
    with pytest.raises(CompactionError, match="Nothing was applied.*would not lower"):
        compaction.apply(workspace, plan, only_if_smaller=True)
    assert compaction.history(workspace, sid) == []
    assert all(m.state == "active" for m in workspace.repo.list_messages(sid))


def test_an_edited_summary_that_grows_the_request_is_refused(workspace: Workspace) -> None:
    words = "notes on the cabinets, the worktop and the hob " * 6
    sid = _session(workspace, [(("user", "assistant")[i % 2], f"Message {i}: {words}")
                               for i in range(30)])
    plan = compaction.preview(workspace, sid, keep=20)
    assert plan.lowers_tokens
    longer = "A summary far longer than what it replaces. " * 400
    with pytest.raises(CompactionError, match="Nothing was applied"):
        compaction.apply(workspace, plan, summary=longer, only_if_smaller=True)
    assert compaction.history(workspace, sid) == []
    applied = compaction.apply(workspace, plan, summary="Kitchen notes.", only_if_smaller=True)
    assert applied.changed and applied.plan.tokens_saved > 0
