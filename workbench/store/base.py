"""The base of the repository's topic stores: the database, and the small reads and
bookkeeping writes every topic shares (existence checks, positions, a session's counts)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Executable, bindparam, case, func, literal, select, update
from sqlalchemy.engine import Connection

from workbench.core.conversation import (
    ROLES,
    STATES,
    Message,
    SessionContext,
    utcnow,
)
from workbench.errors import NotFoundError, StorageError
from workbench.store.db import Database
from workbench.store.rows import (
    context_params,
)
from workbench.store.schema import AGENTS, COMPACTIONS, MEMORY_ENTRIES, MESSAGES, SESSIONS
from workbench.store.types import time_to_text

DEFAULT_AGENT_NAME = "Default"
DEFAULT_AGENT_SETTING = "default_agent_id"
# The columns of a context that says nothing (what most formats bring).
_EMPTY_CONTEXT = context_params(SessionContext())
_UNSET: Any = object()


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise StorageError(f"Role {role!r} is not one of {', '.join(ROLES)}.")


def _check_state(state: str) -> None:
    if state not in STATES:
        raise StorageError(f"State {state!r} is not one of {', '.join(STATES)}.")


def _chunks(ids: Sequence[int], size: int = 500) -> Iterator[Sequence[int]]:
    """``ids`` in runs short enough for one ``IN (...)`` each."""
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


class StoreBase:
    """The database the topic stores work on, and what they share."""

    def __init__(self, db: Database):
        self.db = db
        self.dialect = db.dialect

    def _read_one(self, statement: Executable, row_id: int, missing: str) -> Any:
        """The row ``statement`` selects for ``row_id`` (its parameter ``:id``);
        :class:`NotFoundError` saying ``missing`` when there is none."""
        row = self._first(statement, {"id": row_id})
        if row is None:
            raise NotFoundError(missing)
        return row

    def _first(self, statement: Executable, params: dict[str, Any]) -> Any:
        """The first row ``statement`` selects with ``params`` (None when there is none);
        one statement, so no transaction around it (:meth:`Database.query`)."""
        with self.db.query() as conn:
            return conn.execute(statement, params).first()

    # == internals =====================================================================

    @staticmethod
    def _require(conn: Connection, table: str, row_id: int, what: str) -> None:
        found = conn.execute(
            select(literal(1)).select_from(_BY_NAME[table]).where(_BY_NAME[table].c.id == row_id)
        ).first()
        if found is None:
            raise NotFoundError(f"There is no {what} with id {row_id}.")

    @staticmethod
    def _message_session(conn: Connection, message_id: int) -> int:
        row = conn.execute(_MESSAGE_SESSION, {"id": message_id}).first()
        if row is None:
            raise NotFoundError(f"There is no message with id {message_id}.")
        return int(row[0])

    @staticmethod
    def _next_position(conn: Connection, session_id: int) -> int:
        row = conn.execute(_LAST_POSITION, {"session_id": session_id}).scalar()
        return 0 if row is None else int(row) + 1

    def _touch(self, conn: Connection, session_id: int) -> None:
        conn.execute(_TOUCH, {"session_id": session_id, "now": time_to_text(utcnow())})
        self.db.changed(conn, (session_id,))

    def _bump_counts(self, conn: Connection, session_id: int, messages: Sequence[Message]) -> None:
        tokens = sum(m.token_count or 0 for m in messages if m.state == "active")
        conn.execute(_BUMP_COUNTS, {"session_id": session_id, "count": len(messages),
                                    "tokens": tokens, "now": time_to_text(utcnow())})
        self.db.changed(conn, (session_id,))

    def _refresh_counts(self, conn: Connection, session_id: int, *, touch: bool = True) -> None:
        counts = conn.execute(_COUNTS, {"session_id": session_id}).one()
        values: dict[str, Any] = {"message_count": counts[0], "token_count": counts[1]}
        if touch:
            values["updated_at"] = time_to_text(utcnow())
        conn.execute(update(SESSIONS).where(SESSIONS.c.id == session_id).values(**values))
        self.db.changed(conn, (session_id,))


_BY_NAME = {t.name: t for t in (AGENTS, SESSIONS, MESSAGES, MEMORY_ENTRIES, COMPACTIONS)}
_MESSAGE_SESSION = select(MESSAGES.c.session_id).where(MESSAGES.c.id == bindparam("id"))
_LAST_POSITION = select(func.max(MESSAGES.c.position)).where(
    MESSAGES.c.session_id == bindparam("session_id")
)
_TOUCH = (
    update(SESSIONS)
    .where(SESSIONS.c.id == bindparam("session_id"))
    .values(updated_at=bindparam("now"))
)
_BUMP_COUNTS = (
    update(SESSIONS)
    .where(SESSIONS.c.id == bindparam("session_id"))
    .values(
        message_count=SESSIONS.c.message_count + bindparam("count"),
        token_count=SESSIONS.c.token_count + bindparam("tokens"),
        updated_at=bindparam("now"),
    )
)
_COUNTS = select(
    func.count(),
    func.coalesce(
        func.sum(case((MESSAGES.c.state == "active", MESSAGES.c.token_count))), 0
    ),
).where(MESSAGES.c.session_id == bindparam("session_id"))
