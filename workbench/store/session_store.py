"""Sessions: creating, finding, listing, renaming, tagging, pinning, archiving, deleting."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection

from workbench.core.conversation import (
    SessionInfo,
    utcnow,
)
from workbench.errors import NotFoundError
from workbench.store.agent_store import AgentStore
from workbench.store.rows import (
    SESSION_FROM,
    SESSION_SELECT,
    session_from_row,
)
from workbench.store.types import json_text, time_to_text


class SessionStore(AgentStore):
    """Sessions: creating, finding, listing, renaming, tagging, pinning, archiving, deleting."""

    # == sessions ======================================================================

    def create_session(
        self,
        title: str,
        *,
        agent_id: int | None = None,
        tags: Sequence[str] = (),
        source: str | None = None,
        source_id: str | None = None,
        created_at: datetime | None = None,
        overrides: dict[str, Any] | None = None,
    ) -> SessionInfo:
        """Create an empty session (for the default agent unless ``agent_id`` is given)."""
        if agent_id is None:
            agent_id = self.default_agent().id
        with self.db.write() as conn:
            self._require(conn, "agents", agent_id, "agent")
            session_id = self._insert_session(
                conn, title, agent_id, tags, source, source_id, created_at, None, overrides
            )
        return self.get_session(session_id)

    def _insert_session(
        self,
        conn: Connection,
        title: str,
        agent_id: int,
        tags: Sequence[str],
        source: str | None,
        source_id: str | None,
        created_at: datetime | None,
        updated_at: datetime | None,
        overrides: dict[str, Any] | None,
        forked_from: tuple[int, int] | None = None,
    ) -> int:
        now = utcnow()
        created = created_at or now
        cur = conn.exec_driver_sql(
            "INSERT INTO sessions (agent_id, title, created_at, updated_at, tags, pinned,"
            " archived, forked_from_session_id, forked_from_message_id, overrides, source,"
            " source_id, message_count, token_count)"
            " VALUES (?, ?, ?, ?, ?, 0, 0, ?, ?, ?, ?, ?, 0, 0)",
            (
                agent_id,
                title,
                time_to_text(created),
                time_to_text(updated_at or created),
                json_text(list(dict.fromkeys(tags))),
                forked_from[0] if forked_from else None,
                forked_from[1] if forked_from else None,
                json_text(overrides or {}),
                source,
                source_id,
            ),
        )
        return int(cur.lastrowid)

    def get_session(self, session_id: int) -> SessionInfo:
        """The session with this id, or :class:`NotFoundError`."""
        return session_from_row(self._read_one(
            f"SELECT {SESSION_SELECT} FROM {SESSION_FROM} WHERE s.id = ?", session_id,
            f"There is no session with id {session_id}."))

    def find_session(self, ref: str | int) -> SessionInfo:
        """A session by id, by source id, or by exact title (the newest of equals)."""
        text = str(ref).strip()
        lookups: list[tuple[str, int | str]] = []
        if text.isdigit():
            lookups.append(("WHERE s.id = ?", int(text)))
        lookups += [("WHERE s.source_id = ? ORDER BY s.id DESC LIMIT 1", text),
                    ("WHERE s.title = ? ORDER BY s.updated_at DESC LIMIT 1", text)]
        with self.db.read() as conn:
            for where, value in lookups:
                row = conn.exec_driver_sql(
                    f"SELECT {SESSION_SELECT} FROM {SESSION_FROM} {where}", (value,)
                ).first()
                if row is not None:
                    return session_from_row(row)
        raise NotFoundError(f"There is no session {text!r} (by id, source id or title).")

    def find_by_source(self, source: str, source_id: str) -> SessionInfo | None:
        """The session imported from ``source_id`` of ``source``, if any."""
        row = self._first(f"SELECT {SESSION_SELECT} FROM {SESSION_FROM} "
                          "WHERE s.source = ? AND s.source_id = ?", (source, source_id))
        return None if row is None else session_from_row(row)

    def list_sessions(
        self,
        *,
        include_archived: bool = False,
        filter_text: str | None = None,
        agent_id: int | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[SessionInfo]:
        """Sessions, pinned first, then most recently updated first.

        ``filter_text`` keeps sessions whose title or tags contain it (case-insensitive);
        ``#text`` keeps those with a tag that starts with ``text``.
        """
        where, params = self._session_filter(include_archived, filter_text, agent_id)
        sql = (
            f"SELECT {SESSION_SELECT} FROM {SESSION_FROM} {where} "
            "ORDER BY s.pinned DESC, s.updated_at DESC, s.id DESC"
        )
        if limit is not None:
            sql += " LIMIT ? OFFSET ?"
            params += [limit, offset]
        with self.db.read() as conn:
            rows = conn.exec_driver_sql(sql, tuple(params)).all()
        return [session_from_row(r) for r in rows]

    def count_sessions(
        self,
        *,
        include_archived: bool = False,
        filter_text: str | None = None,
        agent_id: int | None = None,
    ) -> int:
        where, params = self._session_filter(include_archived, filter_text, agent_id)
        with self.db.read() as conn:
            return int(
                conn.exec_driver_sql(
                    f"SELECT count(*) FROM {SESSION_FROM} {where}", tuple(params)
                ).scalar_one()
            )

    @staticmethod
    def _session_filter(
        include_archived: bool, filter_text: str | None, agent_id: int | None
    ) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        if not include_archived:
            clauses.append("s.archived = 0")
        if filter_text:
            def like(text: str) -> str:
                return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")

            if filter_text.startswith("#"):
                # "#tag", as the session list shows tags: a tag that starts with it (the
                # tags column is a JSON array of strings).
                clauses.append("ifnull(s.tags, '') LIKE ? ESCAPE '\\'")
                params.append('%"' + like(filter_text[1:].strip()) + "%")
            else:
                pattern = "%" + like(filter_text) + "%"
                clauses.append(
                    "(s.title LIKE ? ESCAPE '\\' OR ifnull(s.tags, '') LIKE ? ESCAPE '\\')"
                )
                params += [pattern, pattern]
        if agent_id is not None:
            clauses.append("s.agent_id = ?")
            params.append(agent_id)
        return ("WHERE " + " AND ".join(clauses)) if clauses else "", params

    def rename_session(self, session_id: int, title: str) -> SessionInfo:
        return self._update_session(session_id, title=title)

    def set_pinned(self, session_id: int, pinned: bool) -> SessionInfo:
        return self._update_session(session_id, pinned=1 if pinned else 0)

    def set_archived(self, session_id: int, archived: bool) -> SessionInfo:
        return self._update_session(session_id, archived=1 if archived else 0)

    def set_tags(self, session_id: int, tags: Sequence[str]) -> SessionInfo:
        clean = [t.strip() for t in tags if t and t.strip()]
        return self._update_session(session_id, tags=json_text(list(dict.fromkeys(clean))))

    def add_tag(self, session_id: int, tag: str) -> SessionInfo:
        info = self.get_session(session_id)
        return self.set_tags(session_id, [*info.tags, tag])

    def remove_tag(self, session_id: int, tag: str) -> SessionInfo:
        info = self.get_session(session_id)
        return self.set_tags(session_id, [t for t in info.tags if t != tag])

    def set_overrides(self, session_id: int, overrides: dict[str, Any]) -> SessionInfo:
        return self._update_session(session_id, overrides=json_text(overrides))

    def _update_session(self, session_id: int, **values: Any) -> SessionInfo:
        sets = ", ".join(f"{k} = ?" for k in values)
        with self.db.write() as conn:
            self._require(conn, "sessions", session_id, "session")
            conn.exec_driver_sql(
                f"UPDATE sessions SET {sets}, updated_at = ? WHERE id = ?",
                (*values.values(), time_to_text(utcnow()), session_id),
            )
        return self.get_session(session_id)

    def delete_session(self, session_id: int) -> None:
        """Delete a session with its messages, context, compactions and memory entries."""
        with self.db.write() as conn:
            self._require(conn, "sessions", session_id, "session")
            conn.exec_driver_sql("DELETE FROM sessions WHERE id = ?", (session_id,))

