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
    context_fingerprint,
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
_READ_IMPORTED = select(
    *(SESSION_CONTEXT.c[name] for name in _CONTEXT_COLUMNS),
    SESSION_CONTEXT.c.imported_fingerprint,
).where(SESSION_CONTEXT.c.session_id == bindparam("session_id"))

#: What an import does with the context a conversation read again brings
#: (:meth:`ContextStore._imported_context`).
TAKE = "take"  # written: new, or the stored one was not changed here since the import
SAME = "same"  # nothing to write: it says nothing, or nothing the session lacks
KEPT = "kept"  # the session's, changed here since the import, is kept over the file's


def _carries_context(context: SessionContext) -> bool:
    """Whether an imported conversation brought a context of its own (a context file
    does; most formats bring none)."""
    return context_params(context) != _EMPTY_CONTEXT


@cache
def _upsert_context(dialect: Dialect, imported: bool) -> Any:
    """``INSERT ... ON CONFLICT (session_id) DO UPDATE`` of a whole context (built once
    per backend); ``imported``: with the fingerprint an import records, else leaving
    the one recorded as it is (a change made here)."""
    insert = dialect.insert(SESSION_CONTEXT)
    names = (*_CONTEXT_COLUMNS, "updated_at", *(("imported_fingerprint",) if imported else ()))
    return insert.on_conflict_do_update(
        index_elements=[SESSION_CONTEXT.c.session_id],
        set_={name: insert.excluded[name] for name in names},
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
    def _imported_context(conn: Connection, session_id: int, context: SessionContext) -> str:
        """What to do with the ``context`` a conversation read again brings: :data:`TAKE`,
        :data:`SAME` or :data:`KEPT`.

        A context file saved again (an agent's new facts, tasks, usage) is taken, unless
        the session's context was changed here since the import wrote it (an edit, a
        chat's usage, a compaction's summary): then the file's would write over that
        change, and the session's is kept (the caller says so), unless the file holds
        just what the import wrote then. A context written before 0016 has no
        fingerprint: it is taken, as it was then.
        """
        if not _carries_context(context):
            return SAME
        row = conn.execute(_READ_IMPORTED, {"session_id": session_id}).first()
        incoming = tuple(context_params(context).values())
        if row is None:
            return TAKE
        stored, imported = tuple(row[:-1]), row[-1]
        if stored == incoming:
            return SAME
        if imported is None or imported == context_fingerprint(stored):
            return TAKE
        return SAME if imported == context_fingerprint(incoming) else KEPT

    def _write_context(self, conn: Connection, session_id: int, context: SessionContext,
                       *, imported: bool = False) -> None:
        """Write the session's context; ``imported``: an import's, whose fingerprint is
        recorded (see :meth:`_imported_context`)."""
        values = context_params(context)
        params = {"session_id": session_id, **values, "updated_at": time_to_text(utcnow())}
        if imported:
            params["imported_fingerprint"] = context_fingerprint(values.values())
        conn.execute(_upsert_context(self.dialect, imported), params)
        self.db.changed(conn, (session_id,))
