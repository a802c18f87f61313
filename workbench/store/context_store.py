"""A session's context: facts, summary, tasks, tool statistics, usage, state."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.engine import Connection

from workbench.core.conversation import (
    SessionContext,
    utcnow,
)
from workbench.store.base import (
    _EMPTY_CONTEXT,
)
from workbench.store.rows import (
    context_from_row,
    context_params,
)
from workbench.store.session_store import SessionStore
from workbench.store.types import time_to_text


def _carries_context(context: SessionContext) -> bool:
    """Whether an imported conversation brought a context of its own (a context file
    does; most formats bring none)."""
    return context_params(context) != _EMPTY_CONTEXT


class ContextStore(SessionStore):
    """A session's context: facts, summary, tasks, tool statistics, usage, state."""

    # == context =======================================================================

    def get_context(self, session_id: int) -> SessionContext:
        """The session's context (empty if never written)."""
        with self.db.read() as conn:
            self._require(conn, "sessions", session_id, "session")
            return self._read_context(conn, session_id)

    @staticmethod
    def _read_context(conn: Connection, session_id: int) -> SessionContext:
        row = conn.exec_driver_sql(
            "SELECT facts, summary, tasks, tool_stats, token_usage, system_state,"
            " environment FROM session_context WHERE session_id = ?",
            (session_id,),
        ).mappings().first()
        return context_from_row(row)

    def set_context(self, session_id: int, context: SessionContext) -> None:
        """Replace the session's context as a whole."""
        with self.db.write() as conn:
            self._require(conn, "sessions", session_id, "session")
            self._write_context(conn, session_id, context)
            self._touch(conn, session_id)

    def change_context(
        self, session_id: int, change: Callable[[SessionContext], None]
    ) -> tuple[SessionContext, SessionContext]:
        """Read the session's context, let ``change`` modify it and write it back, all in
        one write transaction (no other writer can slip in between); returns the context
        before and after. Nothing is written when ``change`` leaves it as it was."""
        with self.db.write() as conn:
            self._require(conn, "sessions", session_id, "session")
            before = self._read_context(conn, session_id)
            after = before.copy()
            change(after)
            if after.to_json() != before.to_json():
                self._write_context(conn, session_id, after)
                self._touch(conn, session_id)
        return before, after

    @staticmethod
    def _context_differs(conn: Connection, session_id: int, context: SessionContext) -> bool:
        """Whether an imported ``context`` that says anything differs from the stored one."""
        if not _carries_context(context):
            return False
        row = conn.exec_driver_sql(
            "SELECT facts, summary, tasks, tool_stats, token_usage, system_state,"
            " environment FROM session_context WHERE session_id = ?",
            (session_id,),
        ).first()
        incoming = tuple(context_params(context).values())
        return row is None or tuple(row) != incoming

    def _write_context(self, conn: Connection, session_id: int, context: SessionContext) -> None:
        values = context_params(context)
        conn.exec_driver_sql(
            "INSERT INTO session_context (session_id, facts, summary, tasks, tool_stats,"
            " token_usage, system_state, environment, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (session_id) DO UPDATE SET facts = excluded.facts,"
            " summary = excluded.summary, tasks = excluded.tasks,"
            " tool_stats = excluded.tool_stats, token_usage = excluded.token_usage,"
            " system_state = excluded.system_state, environment = excluded.environment,"
            " updated_at = excluded.updated_at",
            (session_id, *values.values(), time_to_text(utcnow())),
        )

