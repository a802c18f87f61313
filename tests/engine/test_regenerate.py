"""Regenerate (SPEC §3: failures never corrupt memory): the last reply is asked for
again with the request the prompt was sent with, and replaced only when the new reply
is complete; a failure or a stop leaves the old one as it was."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from workbench.core.conversation import Conversation, Message
from workbench.core.provider import CancelToken
from workbench.engine.chat import regenerate_turn
from workbench.engine.memory import Memory
from workbench.engine.model import Model
from workbench.engine.workspace import Workspace
from workbench.errors import OperationCancelledError, RateLimitError, RequestError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scripted_provider import Reply, ScriptedProvider, call  # noqa: E402


def _stored(ws: Workspace, pairs: list[tuple[str, str]]) -> Memory:
    messages = [Message(role=r, content=c) for r, c in pairs]
    info = ws.repo.import_many([Conversation(title="Chat", messages=messages)])[0].session
    return Memory.open(ws, info.id)


CHAT = [("user", "First question"), ("assistant", "First answer"),
        ("user", "Second question"), ("assistant", "Old second answer")]


def _contents(memory: Memory) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in memory.messages()]


@pytest.mark.parametrize("stored", [True, False], ids=["store", "in-memory"])
def test_regenerate_sends_the_request_without_the_old_reply_and_replaces_it(
    workspace: Workspace, stored: bool,
) -> None:
    if stored:
        memory = _stored(workspace, CHAT)
    else:
        memory = Memory()
        for role, content in CHAT:
            memory.append(role, content)
    prompt_id = memory.messages()[2].id
    old_id = memory.messages()[3].id
    provider = ScriptedProvider(["New second answer"])
    run = Model(provider, memory=memory).stream_regenerate()
    list(run)
    response = run.response
    assert response is not None and response.appended
    sent = [(m["role"], m["content"]) for m in provider.payloads[0]["messages"]]
    assert sent == CHAT[:3]  # the history before the prompt, then the prompt; no old reply
    assert _contents(memory) == [*CHAT[:3], ("assistant", "New second answer")]
    assert memory.messages()[2].id == prompt_id  # the prompt is the same stored message
    assert [(m.id, m.content) for m in response.replaced] == [(old_id, "Old second answer")]
    assert [m.content for m in response.messages] == ["New second answer"]
    # The new reply has an id of its own (never the replaced one's, which a viewer
    # may have cached the old text under).
    assert response.messages[0].id not in {old_id, prompt_id}


def test_a_failed_or_stopped_regenerate_keeps_the_old_reply(workspace: Workspace) -> None:
    memory = _stored(workspace, CHAT)
    before = memory.messages()
    info = workspace.repo.get_session(int(memory.session_id or 0))
    for script in (RateLimitError("slow down"),
                   Reply(text="a new answer being typed", pieces=5, cancel_after=2)):
        with pytest.raises((RateLimitError, OperationCancelledError)):
            list(Model(ScriptedProvider([script]), memory=memory)
                 .stream_regenerate(cancel=CancelToken()))
        assert [(m.id, m.role, m.content) for m in memory.messages()] == [
            (m.id, m.role, m.content) for m in before]
        assert workspace.repo.get_session(info.id).message_count == 4


def test_regenerate_replaces_tool_calls_after_the_prompt_too(workspace: Workspace) -> None:
    memory = _stored(workspace, CHAT[:3])
    memory.extend([Message(role="assistant", content="", tool_calls=[call("clock")]),
                   Message(role="tool", content="12:00", tool_call_id="call_clock"),
                   Message(role="assistant", content="It is noon.")])
    run = Model(ScriptedProvider(["Noon, I think."]), memory=memory).stream_regenerate()
    list(run)
    assert run.response is not None
    assert [m.role for m in run.response.replaced] == ["assistant", "tool", "assistant"]
    assert _contents(memory) == [*CHAT[:3], ("assistant", "Noon, I think.")]
    info = workspace.repo.get_session(int(memory.session_id or 0))
    assert info.message_count == 4


def test_regenerate_turn_in_a_stored_session_and_manual_memory(workspace: Workspace) -> None:
    memory = _stored(workspace, CHAT)
    sid = int(memory.session_id or 0)
    provider = ScriptedProvider(["Not kept", "Kept"])

    def run(**options: Any) -> Any:
        events = regenerate_turn(workspace, sid, client=provider, **options)
        while True:
            try:
                next(events)
            except StopIteration as done:
                return done.value

    manual = run(auto=False)
    assert not manual.appended and manual.text == "Not kept" and manual.replaced == []
    assert [m.content for m in workspace.repo.list_messages(sid)][-1] == "Old second answer"
    kept = run()
    assert kept.appended
    assert [m.content for m in workspace.repo.list_messages(sid)] == [
        "First question", "First answer", "Second question", "Kept"]


def test_regenerate_without_a_prompt_says_so(workspace: Workspace) -> None:
    memory = _stored(workspace, [("system", "Be brief."), ("assistant", "Hello")])
    with pytest.raises(RequestError, match="no prompt"):
        list(Model(ScriptedProvider(["x"]), memory=memory).stream_regenerate())


def test_the_history_before_a_prompt_reads_only_older_messages_in_pages(
    workspace: Workspace,
) -> None:
    pairs = [("user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(700)]
    memory = _stored(workspace, [*pairs, ("user", "last prompt"), ("assistant", "old")])
    found = memory.last_turn()
    assert found is not None
    before, prompt, after = found
    assert prompt.content == "last prompt" and [m.content for m in after] == ["old"]
    assert len(before) == 700
    assert [before[i].content for i in (699, 350, 0, 1)] == ["m699", "m350", "m0", "m1"]
    assert [m.content for m in before] == [c for _, c in pairs]
