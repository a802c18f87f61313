"""Keeping the summary lines of a database written before they were kept, in the
background (workbench.engine.line_upkeep): opened, kept session by session, previewed
alike; stopped at close; an edit made meanwhile never gets a stale line."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from sqlalchemy import select, update

from workbench.core.conversation import Message
from workbench.core.summarizers import line_cache
from workbench.core.tokens import fill_counts, get_counter
from workbench.engine import compaction
from workbench.engine.line_upkeep import LineUpkeep, keep_missing_lines, lines_kept
from workbench.engine.workspace import Workspace
from workbench.store.compactions import forget_tables
from workbench.store.schema import MESSAGES as M
from workbench.store.summary_lines import LINES_KEPT_SETTING, keep_lines_of, unkept_lines

COUNTER = get_counter()


def _session(ws: Workspace, title: str, count: int) -> int:
    """A session of ``count`` turns (a tool call among them), every count filled."""
    messages = [Message("system", "You answer travel questions in short sentences.")]
    for i in range(count):
        if i % 7 == 3:
            call = {"id": f"c{i}", "type": "function",
                    "function": {"name": "search", "arguments": "{}"}}
            messages.append(Message("assistant", "", tool_calls=[call]))
            messages.append(Message("tool", f"result {i}: " + "seat " * (i % 30),
                                    tool_call_id=f"c{i}", name="search"))
        else:
            messages.append(Message("user" if i % 2 == 0 else "assistant",
                                    f"Turn {i} of {title}: " + "window aisle " * (i % 40)))
    fill_counts(messages, COUNTER)
    info = ws.repo.create_session(title)
    ws.repo.append_messages(info.id, messages)
    return info.id


def _written_before_lines(ws: Workspace) -> None:
    """Every line and its count gone, as in a database written before 0003."""
    with ws.db.write() as conn:
        conn.execute(update(M).values(summary_line=None, summary_line_tokens=None))


def _lines(ws: Workspace, session_id: int) -> list[tuple[Any, ...]]:
    with ws.db.read() as conn:
        return [tuple(r) for r in conn.execute(
            select(M.c.summary_line, M.c.summary_line_tokens)
            .where(M.c.session_id == session_id).order_by(M.c.position))]


def _expected_lines(ws: Workspace, session_id: int) -> list[tuple[Any, ...]]:
    bodies, tokens = line_cache(ws.repo.list_messages(session_id))
    return list(zip(bodies, tokens, strict=True))


def _preview(ws: Workspace, session_id: int) -> Any:
    forget_tables()
    return compaction.preview(ws, session_id)


def test_a_database_without_kept_lines_gets_them_in_the_background_and_previews_alike(
    db_target: Path | str,
) -> None:
    with Workspace.open(db_target) as ws:
        sessions = [_session(ws, f"trip {k}", 60 + 25 * k) for k in range(3)]
        _written_before_lines(ws)
        before = {sid: _preview(ws, sid) for sid in sessions}
        assert all(plan.unkept_lines for plan in before.values())
    # Opened again, as the window opens it: the upkeep starts and keeps every line.
    with Workspace.open(db_target) as ws:
        heard: list[tuple[int, int]] = []
        upkeep = ws.keep_summary_lines(on_session=lambda sid, n: heard.append((sid, n)))
        assert upkeep.finished.wait(120)
        assert upkeep.report.complete and not upkeep.report.error
        assert upkeep.report.lines == sum(len(ws.repo.list_messages(s)) for s in sessions)
        # The most recently changed session first, each heard of once.
        assert [sid for sid, _ in heard] == sorted(sessions, reverse=True)
        for sid in sessions:
            assert _lines(ws, sid) == _expected_lines(ws, sid)
            plan = _preview(ws, sid)
            assert plan.unkept_lines == 0
            assert plan.to_json() | {"created_at": None} == \
                before[sid].to_json() | {"created_at": None}
        assert lines_kept(ws.repo)
        # Not announced as this process's changes (no view shows them): a window that
        # sees the database change meanwhile takes it for another writer's.
        assert ws.db.local_writes == 0
    # The next open reads one setting and starts nothing.
    with Workspace.open(db_target) as ws:
        upkeep = ws.keep_summary_lines()
        assert upkeep.finished.wait(120) and upkeep.report.skipped
        assert upkeep.report.lines == 0 and not upkeep.running


def test_the_session_a_window_shows_is_kept_first(workspace: Workspace) -> None:
    sessions = [_session(workspace, f"trip {k}", 40) for k in range(4)]
    _written_before_lines(workspace)
    order: list[int] = []
    wanted = sessions[1]  # neither the newest nor the oldest
    report = keep_missing_lines(workspace.db, batch=16,
                                preferred=lambda: wanted if wanted not in order else None,
                                on_session=lambda sid, _n: order.append(sid))
    assert report.complete
    assert order[0] == wanted
    assert sorted(order) == sorted(sessions)


def test_the_upkeep_stops_between_batches_and_close_waits_for_it(
    db_target: Path | str,
) -> None:
    with Workspace.open(db_target) as ws:
        sessions = [_session(ws, f"trip {k}", 30) for k in range(3)]
        _written_before_lines(ws)
    ws = Workspace.open(db_target)
    first_done = threading.Event()
    go_on = threading.Event()

    def session_done(_sid: int, _lines: int) -> None:
        if not first_done.is_set():
            first_done.set()
            assert go_on.wait(120)

    upkeep = ws.keep_summary_lines(on_session=session_done)
    try:
        assert first_done.wait(120)
        upkeep.request_stop()
        go_on.set()
    finally:
        ws.close()  # returns once the upkeep's thread is out of the database
    assert upkeep.finished.is_set() and not upkeep.running
    assert upkeep.report.sessions == 1 and not upkeep.report.complete
    with Workspace.open(db_target) as ws:
        kept = {sid: [line for line, _ in _lines(ws, sid)] for sid in sessions}
        assert None not in kept[sessions[-1]]  # the newest, done before the stop
        assert all(line is None for sid in sessions[:-1] for line in kept[sid])
        assert not lines_kept(ws.repo)
        # The next open goes on and ends the work.
        upkeep = ws.keep_summary_lines()
        assert upkeep.finished.wait(120) and upkeep.report.complete
        assert upkeep.report.lines == sum(len(kept[sid]) for sid in sessions[:-1])


def test_an_edit_between_finding_and_keeping_a_line_is_not_given_a_stale_line(
    workspace: Workspace,
) -> None:
    sid = _session(workspace, "trip", 20)
    _written_before_lines(workspace)
    found = [mid for mid, _, _ in unkept_lines(workspace.db, sid)]
    messages = workspace.repo.list_messages(sid)
    # Another writer changes two texts after the upkeep found their rows: one through
    # the engine's edit, one as an older writer would (the text alone, no line).
    edited, raw = messages[4], messages[5]
    workspace.editing().edit_message(edited.id, content="Changed: the flight is at 9.")
    with workspace.db.write() as conn:
        conn.execute(update(M).where(M.c.id == raw.id).values(content="Changed by hand."))
    assert keep_lines_of(workspace.db, found) == len(found)
    assert _lines(workspace, sid) == _expected_lines(workspace, sid)
    lines = dict(zip([m.id for m in messages], _lines(workspace, sid), strict=True))
    assert lines[raw.id][0].endswith("Changed by hand.")
    assert lines[edited.id][0].startswith("Changed: the flight is at 9.")


def test_a_stopped_pass_records_nothing_and_an_empty_database_is_kept_at_once(
    workspace: Workspace,
) -> None:
    upkeep = LineUpkeep(workspace.db, rest=0)
    assert upkeep.start()  # nothing recorded yet: one pass, over no session
    assert upkeep.finished.wait(120)
    assert upkeep.report.complete and upkeep.report.lines == 0
    assert lines_kept(workspace.repo)
    with workspace.db.write() as conn:  # as a migration that clears the lines would
        conn.exec_driver_sql(f"DELETE FROM settings WHERE key = '{LINES_KEPT_SETTING}'")
    _session(workspace, "trip", 10)
    _written_before_lines(workspace)
    stop = threading.Event()
    stop.set()
    report = keep_missing_lines(workspace.db, stop=stop)
    assert not report.complete and report.lines == 0
    assert not lines_kept(workspace.repo)
