"""Noticing another writer: ChangeWatch over two workspaces on one database file (two
sets of connections, as two processes have)."""

from __future__ import annotations

from pathlib import Path

from workbench.engine.memory import Memory
from workbench.engine.watch import ChangeWatch, session_mark
from workbench.engine.workspace import Workspace


def test_a_change_by_another_writer_is_reported_once(tmp_path: Path) -> None:
    path = tmp_path / "wb.db"
    mine, theirs = Workspace.open(path), Workspace.open(path)
    try:
        info = mine.repo.create_session("Shared")
        watch = ChangeWatch(mine)
        assert watch.poll() is False  # nothing since the watch began
        before = session_mark(mine, info.id)
        memory = Memory.open(theirs, info.id)
        memory.append("user", "written by the other process")
        assert watch.poll() is True
        assert watch.poll() is False  # reported once
        after = session_mark(mine, info.id)
        assert before is not None and after is not None
        assert after.message_count == before.message_count + 1

        # Seen while the caller is busy: kept until it is quiet.
        memory = Memory.open(theirs, info.id)
        memory.append("assistant", "and a reply")
        assert watch.poll(quiet=False) is False
        assert watch.poll() is True
    finally:
        theirs.close()
        mine.close()


def test_own_writes_are_not_reported_while_they_happen(tmp_path: Path) -> None:
    ws = Workspace.open(tmp_path / "wb.db")
    try:
        watch = ChangeWatch(ws)
        info = ws.repo.create_session("Mine")
        assert watch.poll() is False  # this process wrote in the interval
        # The next interval may report it (it cannot be told from an outside change
        # made at the same moment); the caller then finds nothing new by the mark.
        mark = session_mark(ws, info.id)
        watch.poll()
        assert session_mark(ws, info.id) == mark
        assert watch.poll() is False
        assert session_mark(ws, 10_000) is None
    finally:
        ws.close()
