"""Writes that change many messages of one session at once keep 0014's orphan list in one
statement instead of a trigger per message.

A compaction folds thousands of messages and its undo brings them back. Each tool call
and tool result among them would have its trigger test the orphans again (about 14 ms
for 10,000 messages); :func:`orphans_listed_after` holds the triggers back for the
write and lists the session's orphans anew once it is done, reading only the session's
active tool results.
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

__all__ = ["orphans_listed_after"]

_PAUSE = text("INSERT INTO settings (key, value) VALUES (:key, 'true')"
              " ON CONFLICT (key) DO NOTHING")
_LIFT = text("DELETE FROM settings WHERE key = :key")
_PG_SET = text("SELECT set_config(:key, :value, true)")
_FORGET = text("DELETE FROM orphan_results WHERE session_id = :sid")
_LIST = text(ORPHANS_OF_SESSION)


@contextmanager
def orphans_listed_after(conn: Connection, session_id: int) -> Iterator[None]:
    """Within ``conn``'s write transaction: the orphan triggers stand aside for what the
    block writes, then the orphans of ``session_id`` are listed anew. The block must
    change messages of that session alone."""
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
    conn.execute(_FORGET, {"sid": session_id})
    conn.execute(_LIST, {"sid": session_id})
