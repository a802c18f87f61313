"""Writes that change many messages of one session at once keep the calls' places (0007)
and 0014's orphan list in a statement or two instead of triggers per message.

A compaction folds thousands of messages and its undo brings them back; a message put in
or taken out moves every later message of its session by one. Each tool call among them
would have its trigger move its place in ``message_calls`` (which in turn has the orphan
triggers test its results again), and each tool result would have its trigger test the
orphans again: about 14 ms for a fold of 10,000 messages, and 0.2 s for a message put
in at the top of a 100,000-message session. Both helpers hold those triggers back for
the write (0014's pause, which 0015 extends to the calls' place):

* :func:`orphans_listed_after` moves the session's calls to their messages' places and
  lists its orphans anew once the block is done (the block may fold and unfold
  anything in the session);
* :func:`places_moved` moves the session's calls and orphans from a position on by the
  same step as its messages (a shift keeps the order of everything it moves, so which
  results are orphans does not change).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import text
from sqlalchemy.engine import Connection

from workbench.store.migrations import (
    ORPHANS_OF_SESSION,
    ORPHANS_PAUSE_SETTING,
    PG_ORPHANS_PAUSE_SETTING,
)

__all__ = ["orphans_listed_after", "places_moved"]

_PAUSE = text("INSERT INTO settings (key, value) VALUES (:key, 'true')"
              " ON CONFLICT (key) DO NOTHING")
_LIFT = text("DELETE FROM settings WHERE key = :key")
_PG_SET = text("SELECT set_config(:key, :value, true)")
_FORGET = text("DELETE FROM orphan_results WHERE session_id = :sid")
_LIST = text(ORPHANS_OF_SESSION)
# The same text on both backends (position and state are never NULL).
_CALLS_FOLLOW = text(
    "UPDATE message_calls SET position = m.position, state = m.state FROM messages m"
    " WHERE m.id = message_calls.message_id AND message_calls.session_id = :sid"
    " AND (message_calls.position <> m.position OR message_calls.state <> m.state)"
)
_MOVE_CALLS = text("UPDATE message_calls SET position = position + :by"
                   " WHERE session_id = :sid AND position >= :first")
_MOVE_ORPHANS = text("UPDATE orphan_results SET position = position + :by"
                     " WHERE session_id = :sid AND position >= :first")


@contextmanager
def _paused(conn: Connection) -> Iterator[None]:
    """The triggers of 0014 and 0015 stand aside for what the block writes (within
    ``conn``'s write transaction)."""
    postgresql = conn.dialect.name == "postgresql"
    if postgresql:
        conn.execute(_PG_SET, {"key": PG_ORPHANS_PAUSE_SETTING, "value": "on"})
    else:
        conn.execute(_PAUSE, {"key": ORPHANS_PAUSE_SETTING})
    yield
    if postgresql:
        conn.execute(_PG_SET, {"key": PG_ORPHANS_PAUSE_SETTING, "value": "off"})
    else:
        conn.execute(_LIFT, {"key": ORPHANS_PAUSE_SETTING})


@contextmanager
def orphans_listed_after(conn: Connection, session_id: int) -> Iterator[None]:
    """Within ``conn``'s write transaction: the triggers stand aside for what the block
    writes, then the calls of ``session_id`` take their messages' places and states and
    its orphans are listed anew. The block must change messages of that session alone,
    and move none to another session."""
    with _paused(conn):
        yield
        conn.execute(_CALLS_FOLLOW, {"sid": session_id})
    conn.execute(_FORGET, {"sid": session_id})
    conn.execute(_LIST, {"sid": session_id})


@contextmanager
def places_moved(conn: Connection, session_id: int, first: int, by: int) -> Iterator[None]:
    """Within ``conn``'s write transaction, around a block that moves the messages of
    ``session_id`` at positions ``first`` and after by ``by`` (and writes nothing else):
    the triggers stand aside, and the calls and orphans at those positions move with
    them in one statement each."""
    with _paused(conn):
        yield
        params = {"sid": session_id, "first": first, "by": by}
        conn.execute(_MOVE_CALLS, params)
        conn.execute(_MOVE_ORPHANS, params)
