"""Sessions: creating, finding, listing, renaming, tagging, pinning, archiving, deleting."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    and_,
    bindparam,
    delete,
    exists,
    func,
    insert,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.engine import Connection

from workbench.core.conversation import (
    SessionInfo,
    utcnow,
)
from workbench.errors import ChangedElsewhereError, NotFoundError
from workbench.store.agent_store import AgentStore
from workbench.store.rows import (
    SESSION_JOIN,
    SESSION_ROW,
    session_from_row,
)
from workbench.store.schema import SESSIONS
from workbench.store.types import json_text, time_to_text

_SESSIONS = select(*SESSION_ROW).select_from(SESSION_JOIN)
_INSERT_SESSION = insert(SESSIONS).returning(SESSIONS.c.id)
_SESSION_BY_ID = _SESSIONS.where(SESSIONS.c.id == bindparam("id"))
_SESSION_BY_SOURCE_ID = _SESSIONS.where(SESSIONS.c.source_id == bindparam("value")).order_by(
    SESSIONS.c.id.desc()
).limit(1)
# The newest of equal titles; equal times go to the higher id.
_SESSION_BY_TITLE = _SESSIONS.where(SESSIONS.c.title == bindparam("value")).order_by(
    SESSIONS.c.updated_at.desc(), SESSIONS.c.id.desc()
).limit(1)
_SESSION_BY_SOURCE = _SESSIONS.where(
    SESSIONS.c.source == bindparam("source"), SESSIONS.c.source_id == bindparam("source_id")
)
# The characters JSON text escapes inside a string.
_ESCAPED = frozenset('"\\' + "".join(chr(i) for i in range(32)))
_LIST_ORDER = (SESSIONS.c.pinned.desc(), SESSIONS.c.updated_at.desc(), SESSIONS.c.id.desc())
# The largest integer the databases compare (a longer run of digits is no id).
_MAX_ID = 2**63 - 1
_DELETE_SESSION = delete(SESSIONS).where(SESSIONS.c.id == bindparam("id"))


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
        session_id = conn.execute(_INSERT_SESSION, {
            "agent_id": agent_id,
            "title": title,
            "created_at": time_to_text(created),
            "updated_at": time_to_text(updated_at or created),
            "tags": json_text(list(dict.fromkeys(tags))),
            "pinned": False,
            "archived": False,
            "forked_from_session_id": forked_from[0] if forked_from else None,
            "forked_from_message_id": forked_from[1] if forked_from else None,
            "overrides": json_text(overrides or {}),
            "source": source,
            "source_id": source_id,
            "message_count": 0,
            "token_count": 0,
        }).scalar_one()
        self.db.changed(conn, (session_id,))
        return int(session_id)

    def get_session(self, session_id: int) -> SessionInfo:
        """The session with this id, or :class:`NotFoundError`."""
        return session_from_row(self._read_one(
            _SESSION_BY_ID, session_id, f"There is no session with id {session_id}."))

    def find_session(self, ref: str | int) -> SessionInfo:
        """A session by id, by source id, or by exact title (the newest of equals)."""
        text = str(ref).strip()
        lookups: list[tuple[Select[Any], dict[str, Any]]] = []
        if text.isascii() and text.isdigit() and int(text) <= _MAX_ID:
            lookups.append((_SESSION_BY_ID, {"id": int(text)}))
        lookups += [(_SESSION_BY_SOURCE_ID, {"value": text}),
                    (_SESSION_BY_TITLE, {"value": text})]
        with self.db.read() as conn:
            for statement, params in lookups:
                row = conn.execute(statement, params).first()
                if row is not None:
                    return session_from_row(row)
        raise NotFoundError(f"There is no session {text!r} (by id, source id or title).")

    def sessions_named(self, ref: str) -> list[int]:
        """The ids of every session whose source id or title is ``ref`` (a name, not
        an id), newest first: more than one when the name is ambiguous."""
        text = str(ref).strip()
        query = (
            select(SESSIONS.c.id)
            .where(or_(SESSIONS.c.source_id == text, SESSIONS.c.title == text))
            .order_by(SESSIONS.c.id.desc())
        )
        with self.db.read() as conn:
            return [int(row[0]) for row in conn.execute(query)]

    def find_by_source(self, source: str, source_id: str) -> SessionInfo | None:
        """The session imported from ``source_id`` of ``source``, if any."""
        row = self._first(_SESSION_BY_SOURCE, {"source": source, "source_id": source_id})
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
        query = _SESSIONS.where(
            self._session_filter(include_archived, filter_text, agent_id)
        ).order_by(*_LIST_ORDER)
        if limit is not None:
            query = query.limit(limit).offset(offset)
        with self.db.read() as conn:
            rows = conn.execute(query).all()
        return [session_from_row(r) for r in rows]

    def count_sessions(
        self,
        *,
        include_archived: bool = False,
        filter_text: str | None = None,
        agent_id: int | None = None,
    ) -> int:
        query = select(func.count()).select_from(SESSIONS).where(
            self._session_filter(include_archived, filter_text, agent_id)
        )
        with self.db.read() as conn:
            return int(conn.execute(query).scalar_one())

    def _session_filter(
        self, include_archived: bool, filter_text: str | None, agent_id: int | None
    ) -> ColumnElement[bool]:
        """The sessions :meth:`list_sessions` keeps (every clause on ``sessions``)."""
        clauses: list[ColumnElement[bool]] = []
        if not include_archived:
            clauses.append(SESSIONS.c.archived.is_(False))
        if filter_text:
            if filter_text.startswith("#"):
                # "#tag", as the session list shows tags: a tag that starts with it.
                prefix = filter_text[1:].strip()
                clauses.append(self._tag_matches(prefix, prefix=True))
            else:
                clauses.append(or_(
                    self.dialect.contains_text(SESSIONS.c.title, filter_text),
                    self._tag_matches(filter_text, prefix=False),
                ))
        if agent_id is not None:
            clauses.append(SESSIONS.c.agent_id == agent_id)
        return and_(true(), *clauses)

    def _tag_matches(self, needle: str, *, prefix: bool) -> ColumnElement[bool]:
        """A tag of the session holds ``needle`` (starts with it when ``prefix``),
        ignoring case; the tags column is a JSON array of strings, read item by item.

        The column's text holding ``needle`` is asked first: JSON writes a string as it
        is but for quotes, backslashes and control characters (``json_text`` keeps other
        characters unescaped), so most sessions are passed over without parsing tags."""
        tags = self.dialect.json_array_items(SESSIONS.c.tags)
        match = self.dialect.starts_with_text if prefix else self.dialect.contains_text
        item = exists(select(tags.c.value).where(match(tags.c.value, needle)))
        if _ESCAPED.intersection(needle):
            return item
        written = '"' + needle if prefix else needle
        return and_(self.dialect.contains_text(SESSIONS.c.tags, written), item)

    # ``expected``: the field's value the caller last saw (an undo: what it wrote). The
    # change is written only while the field still holds it, in the one UPDATE that
    # writes it (:class:`ChangedElsewhereError` otherwise), so another desktop's change
    # in between is never written over.

    def rename_session(self, session_id: int, title: str, *,
                       expected: str | None = None) -> SessionInfo:
        return self._update_session(session_id, _unless_changed("title", expected),
                                    title=title)

    def set_pinned(self, session_id: int, pinned: bool, *,
                   expected: bool | None = None) -> SessionInfo:
        return self._update_session(session_id, _unless_changed("pinned", expected),
                                    pinned=bool(pinned))

    def set_archived(self, session_id: int, archived: bool, *,
                     expected: bool | None = None) -> SessionInfo:
        return self._update_session(session_id, _unless_changed("archived", expected),
                                    archived=bool(archived))

    def set_tags(self, session_id: int, tags: Sequence[str], *,
                 expected: Sequence[str] | None = None) -> SessionInfo:
        clean = [t.strip() for t in tags if t and t.strip()]
        return self._update_session(session_id, _unless_changed("tags", expected),
                                    tags=json_text(list(dict.fromkeys(clean))))

    def add_tag(self, session_id: int, tag: str) -> SessionInfo:
        info = self.get_session(session_id)
        return self.set_tags(session_id, [*info.tags, tag])

    def remove_tag(self, session_id: int, tag: str) -> SessionInfo:
        info = self.get_session(session_id)
        return self.set_tags(session_id, [t for t in info.tags if t != tag])

    def set_overrides(self, session_id: int, overrides: dict[str, Any]) -> SessionInfo:
        return self._update_session(session_id, overrides=json_text(overrides))

    def _update_session(self, session_id: int, unchanged: ColumnElement[bool] | None = None,
                        **values: Any) -> SessionInfo:
        statement = update(SESSIONS).where(SESSIONS.c.id == session_id)
        if unchanged is not None:
            statement = statement.where(unchanged)
        with self.db.write() as conn:
            self._require(conn, "sessions", session_id, "session")
            written = conn.execute(
                statement.values(**values, updated_at=time_to_text(utcnow()))).rowcount
            if not written:
                raise ChangedElsewhereError(
                    f"Session {session_id} was changed since it was read.")
            self.db.changed(conn, (session_id,))
        return self.get_session(session_id)

    def delete_session(self, session_id: int) -> None:
        """Delete a session with its messages, context, compactions and memory entries."""
        with self.db.write() as conn:
            self._require(conn, "sessions", session_id, "session")
            conn.execute(_DELETE_SESSION, {"id": session_id})
            self.db.changed(conn, (session_id,))


def _unless_changed(field: str, expected: Any) -> ColumnElement[bool] | None:
    """The condition that the session's ``field`` still holds ``expected`` (None: no
    condition). Tags compare as the text they are stored as; no tags may be NULL."""
    if expected is None:
        return None
    column = SESSIONS.c[field]
    if field == "tags":
        written = json_text(list(dict.fromkeys(expected)))
        if not expected:
            return or_(column.is_(None), column == written)
        return column == written
    if field in ("pinned", "archived"):
        return column == bool(expected)
    return column == str(expected)
