"""Noticing changes another process made to the database (the CLI importing or chatting
into it, a second window), so a front end can show the state of the database.

:class:`ChangeWatch` is asked on a timer. SQLite's ``data_version`` tells that some
other connection committed; the database's count of this process's own commits tells
whether this process could have been the writer. A change is reported only after an
interval in which this process wrote nothing: one seen while this process wrote too
may have been only its own, and is reported one interval later rather than lost, so a
caller compares what it shows with the database (:func:`session_mark`) before it reads
anything again.

On the team store (PostgreSQL) the database's ``data_version`` is the count of change
notices from other processes its listener heard (a connection lost and made again counts
too: what was committed meanwhile was not heard); this process's own writes never move
it. Notices arrive on the listener's thread, shortly after the other's commit, so a
change is reported by the first poll after it was heard.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from workbench.engine.workspace import Workspace
from workbench.errors import NotFoundError

__all__ = ["ChangeWatch", "SessionMark", "session_mark"]


@dataclass(frozen=True)
class SessionMark:
    """What tells one state of a session from another: its active message count and
    the time it last changed."""

    message_count: int
    updated_at: datetime


def session_mark(ws: Workspace, session_id: int) -> SessionMark | None:
    """The session's mark, or None when it no longer exists."""
    try:
        info = ws.repo.get_session(session_id)
    except NotFoundError:
        return None
    return SessionMark(info.message_count, info.updated_at)


class ChangeWatch:
    """Tells, each time :meth:`poll` is called, whether the database changed in a way
    this process did not make itself (see the module documentation)."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self._version = ws.db.data_version()
        self._writes = ws.db.local_writes
        self._dirty = False
        self.wrote = False  # whether this process committed in the last interval

    def poll(self, *, quiet: bool = True) -> bool:
        """True when another writer changed the database since the last report.

        ``quiet`` is the caller's own word that it has nothing of its own under way
        (no write it has not shown yet); a change seen while it is not quiet is kept
        for a later poll. :attr:`wrote` then tells whether this process committed in
        the interval.
        """
        version = self.ws.db.data_version()
        writes = self.ws.db.local_writes
        if version != self._version:
            self._version = version
            self._dirty = True
        self.wrote = writes != self._writes
        self._writes = writes
        if self._dirty and quiet and not self.wrote:
            self._dirty = False
            return True
        return False
