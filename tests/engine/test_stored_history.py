"""Request assembly over a stored session reads pages from the newest message backwards
(issue 14.1) and ``Memory.open`` does not load the session (issue 14.2); the request it
builds is exactly the one the whole-session path builds."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.core.assembly import (
    REASON_BUDGET,
    Budget,
    RequestParts,
    assemble,
)
from workbench.core.conversation import Conversation, Message, MessageState
from workbench.core.tokens import get_counter
from workbench.engine.chat import newest_left_out
from workbench.engine.memory import Memory
from workbench.engine.stored_history import StoredHistory
from workbench.engine.turn import preflight_session
from workbench.engine.workspace import Workspace
from workbench.errors import ContextBudgetError

ACTIVE = MessageState.ACTIVE.value

# One step of a random session: what kind of message, how long, and its state.
KINDS = ("user", "assistant", "call", "result", "orphan", "system", "unanswered")
step = st.tuples(
    st.sampled_from(KINDS),
    st.integers(min_value=1, max_value=40),
    st.sampled_from((ACTIVE, ACTIVE, ACTIVE, ACTIVE, "evicted", "folded")),
    st.booleans(),  # token count cached beforehand
    st.booleans(),  # important
)


def _messages(steps: list[tuple[str, int, str, bool, bool]]) -> list[Message]:
    counter = get_counter()
    out: list[Message] = []
    calls = 0
    open_ids: list[str] = []
    for kind, words, state, cached, important in steps:
        text = " ".join(f"w{words}-{i}" for i in range(words))
        if kind == "call" or kind == "unanswered":
            calls += 1
            cid = f"call_{calls}"
            msg = Message(role="assistant", content=text if words % 3 else "",
                          tool_calls=[{"id": cid, "type": "function",
                                       "function": {"name": "look", "arguments": "{}"}}])
            if kind == "call":
                open_ids.append(cid)
        elif kind == "result":
            cid = open_ids.pop(0) if open_ids else "call_missing"
            msg = Message(role="tool", content=text, tool_call_id=cid)
        elif kind == "orphan":
            msg = Message(role="tool", content=text, tool_call_id=f"nowhere_{words}")
        else:
            msg = Message(role=kind, content=text)
        msg.state = state
        msg.important = important
        if cached:
            msg.token_count = counter.count_message(msg)
            msg.token_encoding = counter.encoding_name
        out.append(msg)
    return out


@pytest.fixture(scope="module")
def workspace() -> Iterator[Workspace]:
    with tempfile.TemporaryDirectory(prefix="workbench-stored-history-") as folder:
        with Workspace.open(Path(folder) / "w.db") as ws:
            yield ws


def _store(ws: Workspace, steps: list[tuple[str, int, str, bool, bool]]) -> int:
    if len(steps) % 2:  # half the sessions through the bulk import (triggers paused)
        (outcome,) = ws.repo.import_many([Conversation(title="random",
                                                       messages=_messages(steps))])
        info = outcome.session
        stored = ws.repo.list_messages(info.id)
    else:
        info = ws.repo.create_session(title="random")
        stored = ws.repo.append_messages(info.id, _messages(steps))
    for state in ("evicted", "folded"):
        ids = [m.id for m, s in zip(stored, steps, strict=True) if s[2] == state]
        if ids:
            ws.repo.set_state(ids, state)
    return info.id


def _expand(ranges: list[Any], active: list[Message]) -> list[tuple[Any, Any, str]]:
    """Every message a list of left-out runs stands for, as (id, position, reason)."""
    index = {m.position: i for i, m in enumerate(active)}
    out = []
    for run in ranges:
        first, last = index[run.first_position], index[run.last_position]
        assert last - first + 1 == run.count
        assert (active[first].id, active[last].id) == (run.first_id, run.last_id)
        out += [(m.id, m.position, run.reason) for m in active[first:last + 1]]
    return out


def _shape(assembled: Any) -> tuple[Any, ...]:
    return (
        [(m.role, m.content, m.id, m.tool_call_id, m.tool_calls) for m in assembled.messages],
        assembled.tokens.to_json(),
        [(m.id) for m in assembled.history],
        assembled.left_out_count,
    )


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    steps=st.lists(step, min_size=0, max_size=60),
    window=st.integers(min_value=60, max_value=700),
    exclude_system=st.booleans(),
    summary=st.sampled_from(("", "They talked before.")),
    listed=st.integers(min_value=1, max_value=70),
)
def test_stored_history_assembles_exactly_what_the_whole_session_does(
    workspace: Workspace, steps: list[tuple[str, int, str, bool, bool]], window: int,
    exclude_system: bool, summary: str, listed: int,
) -> None:
    sid = _store(workspace, steps)
    counter = get_counter()
    budget = Budget(context_window=window, reserved_output=20)
    whole = workspace.repo.list_messages(sid, states=(ACTIVE,))
    paged = StoredHistory(workspace.repo, sid)
    assert len(paged) == len(whole)

    def parts(history: Any) -> RequestParts:
        return RequestParts(instructions="Be brief.", summary=summary, history=history,
                            turn=[Message(role="user", content="And now?")],
                            exclude_system=exclude_system)

    try:
        old = assemble(parts(whole), counter=counter, budget=budget)
    except ContextBudgetError as exc:
        with pytest.raises(ContextBudgetError) as raised:
            assemble(parts(paged), counter=counter, budget=budget)
        assert str(raised.value) == str(exc)
        return
    new = assemble(parts(paged), counter=counter, budget=budget)
    assert _shape(new) == _shape(old)
    expected = [(i.message_id, i.position, i.reason) for i in old.left_out]
    assert _expand(new.left_out_ranges(), whole) == expected
    assert _expand(old.left_out_ranges(), whole) == expected
    assert [(i.message_id, i.reason) for i in new.left_out] == [
        (i.message_id, i.reason) for i in old.left_out]
    # The Request panel lists the newest left-out messages from the runs alone.
    tail = newest_left_out(workspace, sid, new.left_out_ranges(), limit=listed)
    assert [(i.message_id, i.position, i.reason) for i in tail] == expected[-listed:]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=st.lists(step, min_size=1, max_size=50),
       window=st.integers(min_value=150, max_value=2000))
def test_preflight_of_a_stored_session_matches_the_whole_session_path(
    workspace: Workspace, steps: list[tuple[str, int, str, bool, bool]], window: int,
) -> None:
    sid = _store(workspace, steps)

    def run() -> dict[str, Any] | str:
        try:
            return preflight_session(workspace, sid, "What next?",
                                     context_window=window).to_json()
        except ContextBudgetError as exc:
            return str(exc)

    new = run()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Memory, "history", Memory.view)  # the whole-session path
        old = run()
    assert new == old


def test_a_long_session_is_read_only_as_far_as_the_request_reaches(
    workspace: Workspace,
) -> None:
    steps = [("user" if i % 2 == 0 else "assistant", 8, ACTIVE, True, False)
             for i in range(3000)]
    sid = _store(workspace, steps)
    memory = Memory.open(workspace, sid)
    history = memory.history()
    assert isinstance(history, StoredHistory)
    assert history.loaded() == 0 and len(memory) == 3000
    result = assemble(
        RequestParts(history=history, turn=[Message(role="user", content="Hi")]),
        counter=get_counter(), budget=Budget(context_window=2000, reserved_output=100))
    kept = len(result.history)
    assert 0 < kept < 3000
    # What fits by the cached counts, read in one page, and not the session.
    assert history.loaded() <= kept + kept // 20 + 16 + 1
    (run,) = result.left_out_ranges()
    assert (run.first_position, run.count, run.reason) == (0, 3000 - kept, REASON_BUDGET)


def test_memory_opens_without_loading_and_still_reads_and_writes(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch,
) -> None:
    sid = _store(workspace, [("user", 3, ACTIVE, True, False),
                             ("call", 3, ACTIVE, True, False)])
    loads: list[int] = []
    original = workspace.repo.list_messages

    def counting(*args: Any, **kwargs: Any) -> list[Message]:
        loads.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(workspace.repo, "list_messages", counting)
    memory = Memory.open(workspace, sid)
    assert len(memory) == 2
    assert [m.role for m in memory.last(1)] == ["assistant"]
    # A tool result answering a call stored earlier is accepted without a full load.
    call_id = memory.last(1)[0].tool_calls[0]["id"]
    memory.append("tool", "found it", tool_call_id=call_id)
    with pytest.raises(Exception, match="no assistant"):
        memory.append("tool", "lost", tool_call_id="call_unknown")
    assert loads == []
    assert [m.role for m in memory.messages()] == ["user", "assistant", "tool"]
    assert loads  # what needs every message still gets them all


def test_a_history_starts_from_the_pages_the_last_one_read_until_the_database_changes(
    workspace: Workspace,
) -> None:
    steps = [("user" if i % 2 == 0 else "assistant", 8, ACTIVE, True, False)
             for i in range(600)]
    sid = _store(workspace, steps)
    other = _store(workspace, steps[:10])
    counter = get_counter()
    budget = Budget(context_window=1500, reserved_output=100)

    def request(prompt: str) -> tuple[StoredHistory, Any]:
        memory = Memory.open(workspace, sid)
        history = memory.history()
        assert isinstance(history, StoredHistory)
        result = assemble(RequestParts(history=history,
                                       turn=[Message(role="user", content=prompt)]),
                          counter=counter, budget=budget)
        return history, result

    first, before = request("Hi")
    read = first.loaded()
    assert 0 < read < 600
    # Another prompt, nothing written: the next history holds those pages already.
    again = Memory.open(workspace, sid).history()
    assert isinstance(again, StoredHistory) and again.loaded() == read
    second, same = request("Hi")
    assert _shape(same) == _shape(before)
    assert Memory.open(workspace, other).history().loaded() == 0  # its own session only

    # A change (here an edit of the newest message) is read again from where it is;
    # what was read before it is kept.
    newest = workspace.repo.list_messages(sid)[-1]
    workspace.repo.update_message(newest.id, content="Edited at the end.")
    fresh = Memory.open(workspace, sid).history()
    assert isinstance(fresh, StoredHistory) and fresh.loaded() == read
    assert fresh[len(fresh) - 1].content == "Edited at the end."
    third, after = request("Hi")
    assert [m.content for m in after.history][-1] == "Edited at the end."
    whole = workspace.repo.list_messages(sid, states=(ACTIVE,))
    assert _shape(after) == _shape(assemble(
        RequestParts(history=whole, turn=[Message(role="user", content="Hi")]),
        counter=counter, budget=budget))


def test_only_the_last_sessions_histories_are_kept(workspace: Workspace) -> None:
    from workbench.engine.stored_history import KEPT_SESSIONS

    steps = [("user", 4, ACTIVE, True, False), ("assistant", 4, ACTIVE, True, False)] * 20
    sessions = [_store(workspace, steps) for _ in range(KEPT_SESSIONS + 1)]
    for sid in sessions:
        history = StoredHistory.latest(workspace.repo, sid)
        assert history[len(history) - 1].content  # the newest page is read
    # The first one was dropped for the later ones; the last ones are still kept.
    assert StoredHistory.latest(workspace.repo, sessions[0]).loaded() == 0
    assert StoredHistory.latest(workspace.repo, sessions[-1]).loaded() > 0


def _same_request(workspace: Workspace, sid: int, history: StoredHistory) -> None:
    """``history`` builds the very request the whole session does."""
    counter = get_counter()
    budget = Budget(context_window=1500, reserved_output=100)
    turn = [Message(role="user", content="Next?")]
    whole = workspace.repo.list_messages(sid, states=(ACTIVE,))
    assert [m.id for m in history] == [m.id for m in whole]
    assert [(m.content, m.token_count) for m in history] == \
        [(m.content, m.token_count) for m in whole]
    assert _shape(assemble(RequestParts(history=history, turn=turn), counter=counter,
                           budget=budget)) == \
        _shape(assemble(RequestParts(history=whole, turn=turn), counter=counter,
                        budget=budget))


def test_a_turn_appended_is_read_onto_the_pages_read_before(tmp_path: Path) -> None:
    steps = [("user" if i % 2 == 0 else "assistant", 8, ACTIVE, True, False)
             for i in range(400)]
    with Workspace.open(tmp_path / "w.db") as ws:
        sid = _store(ws, steps)
        first = StoredHistory.latest(ws.repo, sid)
        list(first[len(first) - 150:])  # the newest 150 are read
        read = first.loaded()
        ws.repo.append_messages(sid, [Message(role="user", content="one more"),
                                      Message(role="assistant", content="and a reply")])
        after = StoredHistory.latest(ws.repo, sid)
        assert len(after) == len(first) + 2 and after.loaded() == read + 2
        assert [m.content for m in after[len(after) - 2:]] == ["one more", "and a reply"]
        _same_request(ws, sid, after)

        # A message folded in the middle of what was read: read again from there.
        # (Checking the whole request below reads the rest of the session.)
        middle = after[len(after) - 60]
        ws.repo.set_state([int(middle.id or 0)], "folded")
        folded = StoredHistory.latest(ws.repo, sid)
        assert len(folded) == len(after) - 1 and folded.loaded() > 0
        _same_request(ws, sid, folded)

        # An edit near the start (everything was read by now): read again from there.
        ws.repo.update_message(int(after[3].id or 0), content="early edit")
        edited = StoredHistory.latest(ws.repo, sid)
        assert edited[3].content == "early edit"
        _same_request(ws, sid, edited)


def test_a_commit_of_another_process_reads_the_history_anew(tmp_path: Path) -> None:
    steps = [("user" if i % 2 == 0 else "assistant", 8, ACTIVE, True, False)
             for i in range(200)]
    with Workspace.open(tmp_path / "w.db") as ws:
        sid = _store(ws, steps)
        first = StoredHistory.latest(ws.repo, sid)
        first[len(first) - 1]
        # A change elsewhere made by this process keeps what was read ...
        ws.repo.create_session(title="another")
        assert StoredHistory.latest(ws.repo, sid).loaded() == first.loaded() > 0
        # ... one made by another connection (a second process) does not.
        with Workspace.open(tmp_path / "w.db") as other:
            other.repo.create_session(title="from elsewhere")
        fresh = StoredHistory.latest(ws.repo, sid)
        assert fresh.loaded() == 0
        _same_request(ws, sid, fresh)


def test_a_change_older_than_the_pages_read_reads_the_history_anew(tmp_path: Path) -> None:
    steps = [("user" if i % 2 == 0 else "assistant", 8, ACTIVE, True, False)
             for i in range(300)]
    with Workspace.open(tmp_path / "w.db") as ws:
        sid = _store(ws, steps)
        first = StoredHistory.latest(ws.repo, sid)
        list(first[len(first) - 50:])
        ws.repo.delete_message(int(ws.repo.list_messages(sid)[5].id or 0))
        fresh = StoredHistory.latest(ws.repo, sid)
        assert fresh.loaded() == 0 and len(fresh) == len(first) - 1
        _same_request(ws, sid, fresh)
