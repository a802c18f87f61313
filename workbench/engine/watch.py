"""Noticing changes another process made to the database (the CLI importing or chatting
into it, a second window), so a front end can show the state of the database.

:class:`ChangeWatch` is asked on a timer. SQLite's ``data_version`` tells that some
other connection committed; the database's count of this process's own commits tells
whether this process could have been the writer. A change is reported only after an
interval in which this process wrote nothing: one seen while this process wrote too
may have been only its own, and is reported one interval later rather than lost, so a
caller compares what it shows with the database (:func:`session_mark`) before it reads
anything again.

On the team store (PostgreSQL) the count is the listener's: it hears only other
processes' commits (each names its sessions, :attr:`ChangeWatch.change` hands them
over), so this process's own writes never hold a report back, and nothing asked here
waits on the network. Changes committed while the listener was first connecting are
caught up as "everything changed" once it listens.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from workbench.engine.workspace import Workspace
from workbench.errors import NotFoundError
from workbench.store.db_postgresql import PostgresDatabase

__all__ = ["ChangeWatch", "OutsideChange", "SessionMark", "provider_setup", "session_mark"]


@dataclass(frozen=True)
class OutsideChange:
    """What another writer changed: the sessions it named (the team store says), or
    ``everything`` when that is not known (a SQLite file, a reconnect, a long list)."""

    sessions: frozenset[int] = frozenset()
    everything: bool = True

    def touches(self, session_id: int) -> bool:
        """Whether the change may concern ``session_id``."""
        return self.everything or session_id in self.sessions


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


def provider_setup(ws: Workspace) -> tuple[list[Any], list[Any]]:
    """The stored provider configs and agents: what a window compares with what it last
    read after another writer's change that named no session (a provider or an agent
    saved on another desktop, or by the command line)."""
    return ws.provider_settings().list(), ws.list_agents()


class ChangeWatch:
    """Tells, each time :meth:`poll` is called, whether the database changed in a way
    this process did not make itself (see the module documentation)."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        db = ws.db
        self._team = db if isinstance(db, PostgresDatabase) else None
        self._version = db.data_version()
        self._writes = db.local_writes
        self._dirty = False
        self._listening = False  # the team store's listener has connected once
        self._catch_up = False  # its first connection: report everything once
        self.wrote = False  # whether this process committed in the last interval
        #: What the last report of :meth:`poll` was about.
        self.change = OutsideChange()

    @property
    def others_only(self) -> bool:
        """Whether the database counts only other processes' changes (the team store's
        listener), so this process's writes need not hold a report back."""
        return self._team is not None

    @property
    def listen_problem(self) -> str | None:
        """Why the team store's listener cannot hear other desktops right now (it keeps
        trying, and catches up once it hears again); None when it hears, or on a file."""
        if self._team is None:
            return None
        error = self._team.listener().last_error
        if not error:
            return None
        return (error.strip().splitlines() or [error])[0].rstrip(".")

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
        if self._team is not None and not self._listening \
                and self._team.listener().connections:
            self._listening = True
            self._catch_up = self._dirty = True  # what came before it listened
        self.wrote = writes != self._writes
        self._writes = writes
        if self._dirty and quiet and (self.others_only or not self.wrote):
            self._dirty = False
            self.change = self._take()
            return True
        return False

    def _take(self) -> OutsideChange:
        if self._team is None:
            return OutsideChange()
        heard = self._team.listener().take()
        everything, self._catch_up = heard.everything or self._catch_up, False
        return OutsideChange(heard.sessions, everything)
