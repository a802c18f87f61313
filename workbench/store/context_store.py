"""A session's context: facts, summary, tasks, tool statistics, usage, state."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.engine import Connection

from workbench.core.conversation import (
    SessionContext,
    utcnow,
)
from workbench.store.base import (
    _EMPTY_CONTEXT,
)
from workbench.store.dialect import Dialect
from workbench.store.rows import (
    context_from_row,
    context_params,
)
from workbench.store.schema import SESSION_CONTEXT
from workbench.store.session_store import SessionStore
from workbench.store.types import time_to_text

# The columns of :func:`~workbench.store.rows.context_params`, in its order.
_CONTEXT_COLUMNS = ("facts", "summary", "tasks", "tool_stats", "token_usage", "system_state",
                    "environment")
_READ_CONTEXT = select(*(SESSION_CONTEXT.c[name] for name in _CONTEXT_COLUMNS)).where(
    SESSION_CONTEXT.c.session_id == bindparam("session_id")
)


def _carries_context(context: SessionContext) -> bool:
    """Whether an imported conversation brought a context of its own (a context file
    does; most formats bring none)."""
    return context_params(context) != _EMPTY_CONTEXT


@cache
def _upsert_context(dialect: Dialect) -> Any:
    """``INSERT ... ON CONFLICT (session_id) DO UPDATE`` of a whole context (built once
    per backend)."""
    insert = dialect.insert(SESSION_CONTEXT)
    return insert.on_conflict_do_update(
        index_elements=[SESSION_CONTEXT.c.session_id],
        set_={name: insert.excluded[name] for name in (*_CONTEXT_COLUMNS, "updated_at")},
    )


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
        row = conn.execute(_READ_CONTEXT, {"session_id": session_id}).mappings().first()
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
        row = conn.execute(_READ_CONTEXT, {"session_id": session_id}).first()
        incoming = tuple(context_params(context).values())
        return row is None or tuple(row) != incoming

    def _write_context(self, conn: Connection, session_id: int, context: SessionContext) -> None:
        conn.execute(_upsert_context(self.dialect), {
            "session_id": session_id, **context_params(context),
            "updated_at": time_to_text(utcnow()),
        })
        self.db.changed(conn, (session_id,))
