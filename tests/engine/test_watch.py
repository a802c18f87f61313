"""Noticing another writer: ChangeWatch over two workspaces on one database (two sets of
connections, as two processes have), a SQLite file or the team store's server.

A SQLite file's ``data_version`` moves when the other connection commits; the team store
hears the other's change notice on its listener's thread, so there the test waits (for
an event, never for a time) until the listener is connected before the other writes,
and until it has heard the write before polling.
"""

from __future__ import annotations

from pathlib import Path

from workbench.engine.memory import Memory
from workbench.engine.watch import ChangeWatch, session_mark
from workbench.engine.workspace import Workspace
from workbench.store.db_postgresql import PostgresDatabase
from workbench.store.notify_postgresql import ChangeListener

WAIT_S = 30.0  # a bound on waiting for the listener, not a delay


def _listening(ws: Workspace) -> None:
    """On the team store: wait until ``ws``'s listener hears notices."""
    if isinstance(ws.db, PostgresDatabase):
        listener = ws.db.listener()
        assert listener.wait_for(lambda heard: heard.connections > 0, WAIT_S), listener.last_error


def _heard_since(ws: Workspace, version: int) -> None:
    """On the team store: wait until ``ws``'s listener heard a change after ``version``."""
    if isinstance(ws.db, PostgresDatabase):
        assert ws.db.listener().wait_for(lambda heard: heard.version > version, WAIT_S)


def test_a_change_by_another_writer_is_reported_once(db_target: Path | str) -> None:
    mine, theirs = Workspace.open(db_target), Workspace.open(db_target)
    try:
        info = mine.repo.create_session("Shared")
        watch = ChangeWatch(mine)
        _listening(mine)
        watch.poll()  # the team store's listener catches up once when it first listens
        assert watch.poll() is False  # nothing since then
        before = session_mark(mine, info.id)
        version = mine.db.data_version()
        memory = Memory.open(theirs, info.id)
        memory.append("user", "written by the other process")
        _heard_since(mine, version)
        assert watch.poll() is True
        assert watch.poll() is False  # reported once
        after = session_mark(mine, info.id)
        assert before is not None and after is not None
        assert after.message_count == before.message_count + 1

        # Seen while the caller is busy: kept until it is quiet.
        version = mine.db.data_version()
        memory = Memory.open(theirs, info.id)
        memory.append("assistant", "and a reply")
        _heard_since(mine, version)
        assert watch.poll(quiet=False) is False
        assert watch.poll() is True
    finally:
        theirs.close()
        mine.close()


def test_own_writes_are_not_reported_while_they_happen(db_target: Path | str) -> None:
    ws = Workspace.open(db_target)
    try:
        watch = ChangeWatch(ws)
        _listening(ws)
        watch.poll()  # the team store's listener catches up once when it first listens
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


# -- the team store: the listener's count, others' changes only --------------------------------

BOUND = 30.0  # seconds a wait may take before the test fails (never reached when it works)


def _team_listener(ws: Workspace) -> ChangeListener:
    """The team store's listener, once it listens (waited for on its own condition)."""
    assert isinstance(ws.db, PostgresDatabase)
    listener = ws.db.listener()
    assert listener.wait_for(lambda li: li.connections >= 1, BOUND), listener.last_error
    return listener


def test_on_the_team_store_another_desktops_change_names_its_session(pg_db_url: str) -> None:
    mine, theirs = Workspace.open(pg_db_url), Workspace.open(pg_db_url)
    try:
        shared = theirs.repo.create_session("Shared")
        other = theirs.repo.create_session("Other")
        watch = ChangeWatch(mine)
        assert watch.others_only
        listener = _team_listener(mine)
        # Whatever came before the listener listened is caught up once, as "everything".
        assert watch.poll() is True and watch.change.everything
        assert watch.poll() is False

        heard = listener.version
        Memory.open(theirs, shared.id).append("user", "from the other desktop")
        assert listener.wait_for(lambda li: li.version > heard, BOUND)
        # Seen while this window is busy: kept for the next poll, then reported once.
        assert watch.poll(quiet=False) is False
        assert watch.poll() is True
        assert watch.change.touches(shared.id) and not watch.change.touches(other.id)
        assert watch.poll() is False
    finally:
        theirs.close()
        mine.close()


def test_on_the_team_store_own_writes_never_hold_back_theirs(pg_db_url: str) -> None:
    mine, theirs = Workspace.open(pg_db_url), Workspace.open(pg_db_url)
    try:
        info = mine.repo.create_session("Shared")
        watch = ChangeWatch(mine)
        listener = _team_listener(mine)
        watch.poll()  # the catch-up report
        mine.repo.rename_session(info.id, "Renamed here")
        assert watch.poll() is False  # this process's own write is not news
        heard = listener.version
        Memory.open(theirs, info.id).append("user", "at the same time, elsewhere")
        mine.repo.rename_session(info.id, "Renamed here again")
        assert listener.wait_for(lambda li: li.version > heard, BOUND)
        # On a file this interval would be held back (the write may have been its own);
        # the team store knows it was not.
        assert watch.poll() is True and watch.wrote
        assert watch.change.touches(info.id)
        assert session_mark(mine, info.id) == session_mark(theirs, info.id)
    finally:
        theirs.close()
        mine.close()


def test_on_the_team_store_a_lost_listener_catches_up_with_everything(pg_db_url: str) -> None:
    import sqlalchemy as sa

    mine, theirs = Workspace.open(pg_db_url), Workspace.open(pg_db_url)
    admin = sa.create_engine(pg_db_url, isolation_level="AUTOCOMMIT")
    try:
        info = theirs.repo.create_session("Shared")
        watch = ChangeWatch(mine)
        listener = _team_listener(mine)
        watch.poll()  # the catch-up report
        assert watch.poll() is False
        # The listener's connection drops (a server restart, a network cut): what is
        # committed meanwhile is not heard, so the next report says "everything".
        with admin.connect() as conn:
            conn.execute(sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                 "WHERE application_name = :name"),
                         {"name": listener.application_name})
        assert listener.wait_for(lambda li: li.connections >= 2, BOUND), listener.last_error
        assert watch.poll() is True and watch.change.everything
        assert watch.change.touches(info.id)
    finally:
        admin.dispose()
        theirs.close()
        mine.close()
