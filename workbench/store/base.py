"""The base of the repository's topic stores: the database, and the small reads and
bookkeeping writes every topic shares (existence checks, positions, a session's counts)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

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


def _first_column(conn: Connection, sql: str, params: Sequence[Any]) -> set[Any]:
    """The values of the first column of the rows ``sql`` selects."""
    return {row[0] for row in conn.exec_driver_sql(sql, tuple(params))}


def _in_clause(values: Sequence[Any]) -> str:
    return "(" + ", ".join("?" for _ in values) + ")"


class StoreBase:
    """The database the topic stores work on, and what they share."""

    def __init__(self, db: Database):
        self.db = db

    def _read_one(self, sql: str, row_id: int, missing: str) -> Any:
        """The row ``sql`` selects for ``row_id``; :class:`NotFoundError` saying
        ``missing`` when there is none."""
        row = self._first(sql, (row_id,))
        if row is None:
            raise NotFoundError(missing)
        return row

    def _first(self, sql: str, params: tuple[Any, ...]) -> Any:
        """The first row ``sql`` selects with ``params`` (None when there is none)."""
        with self.db.read() as conn:
            return conn.exec_driver_sql(sql, params).first()

    # == internals =====================================================================

    @staticmethod
    def _require(conn: Connection, table: str, row_id: int, what: str) -> None:
        if conn.exec_driver_sql(f"SELECT 1 FROM {table} WHERE id = ?", (row_id,)).first() is None:
            raise NotFoundError(f"There is no {what} with id {row_id}.")

    @staticmethod
    def _message_session(conn: Connection, message_id: int) -> int:
        row = conn.exec_driver_sql(
            "SELECT session_id FROM messages WHERE id = ?", (message_id,)
        ).first()
        if row is None:
            raise NotFoundError(f"There is no message with id {message_id}.")
        return int(row[0])

    @staticmethod
    def _next_position(conn: Connection, session_id: int) -> int:
        row = conn.exec_driver_sql(
            "SELECT max(position) FROM messages WHERE session_id = ?", (session_id,)
        ).scalar()
        return 0 if row is None else int(row) + 1

    @staticmethod
    def _touch(conn: Connection, session_id: int) -> None:
        conn.exec_driver_sql(
            "UPDATE sessions SET updated_at = ? WHERE id = ?",
            (time_to_text(utcnow()), session_id),
        )

    @staticmethod
    def _bump_counts(conn: Connection, session_id: int, messages: Sequence[Message]) -> None:
        tokens = sum(m.token_count or 0 for m in messages if m.state == "active")
        conn.exec_driver_sql(
            "UPDATE sessions SET message_count = message_count + ?,"
            " token_count = token_count + ?, updated_at = ? WHERE id = ?",
            (len(messages), tokens, time_to_text(utcnow()), session_id),
        )

    @staticmethod
    def _refresh_counts(conn: Connection, session_id: int, *, touch: bool = True) -> None:
        counts = conn.exec_driver_sql(
            "SELECT count(*), coalesce(sum(CASE WHEN state = 'active' THEN token_count END), 0)"
            " FROM messages WHERE session_id = ?",
            (session_id,),
        ).one()
        if touch:
            conn.exec_driver_sql(
                "UPDATE sessions SET message_count = ?, token_count = ?, updated_at = ?"
                " WHERE id = ?",
                (counts[0], counts[1], time_to_text(utcnow()), session_id),
            )
        else:
            conn.exec_driver_sql(
                "UPDATE sessions SET message_count = ?, token_count = ? WHERE id = ?",
                (counts[0], counts[1], session_id),
            )



