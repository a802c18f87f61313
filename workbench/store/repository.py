"""The repository: every read and change of sessions, messages, context and memory.

Each public method that changes more than one row does it in one transaction. Message
positions are dense (0..n-1 within a session); inserting or deleting shifts the ones
after. ``sessions.message_count`` and ``sessions.token_count`` (tokens of active
messages) are kept current by every change, so listing sessions never aggregates.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection

from workbench.core.assembly import REASON_EXCLUDED_SYSTEM, REASON_ORPHAN_RESULT
from workbench.core.conversation import (
    ROLES,
    STATES,
    Agent,
    Conversation,
    MemoryEntry,
    Message,
    SessionContext,
    SessionInfo,
    utcnow,
)
from workbench.core.identity import fingerprint_messages
from workbench.core.summarizers import line_cache
from workbench.errors import NotFoundError, StorageError
from workbench.store import bulk
from workbench.store.db import Database
from workbench.store.rows import (
    AGENT_SELECT,
    MEMORY_SELECT,
    MESSAGE_INSERT_WITH_LINES,
    MESSAGE_SELECT,
    SESSION_FROM,
    SESSION_SELECT,
    agent_from_row,
    context_from_row,
    context_params,
    memory_from_row,
    message_from_row,
    message_params,
    session_from_row,
)
from workbench.store.types import json_text, json_value, time_to_text

DEFAULT_AGENT_NAME = "Default"
DEFAULT_AGENT_SETTING = "default_agent_id"
# The columns of a context that says nothing (what most formats bring).
_EMPTY_CONTEXT = context_params(SessionContext())
_UNSET: Any = object()


@dataclass
class ImportOutcome:
    """What happened to one conversation handed to :meth:`Repository.import_conversation`."""

    session: SessionInfo
    created: bool  # a new session was made
    status: str = ""
    """``"created"``, ``"unchanged"`` (stored before, nothing changed) or ``"updated"``
    (new turns appended, or replaced)."""
    reused_id: bool = False
    """Created although a different stored conversation has the same source id."""

    def __post_init__(self) -> None:
        if not self.status:
            self.status = "created" if self.created else "unchanged"


@dataclass(frozen=True)
class _Stored:
    """A stored session of a conversation's (source, source id), as import matches it."""

    session_id: int
    source_file: str | None
    fingerprint: str | None  # None: imported before fingerprints were kept
    count: int | None


def _carries_context(context: SessionContext) -> bool:
    """Whether an imported conversation brought a context of its own (a context file
    does; most formats bring none)."""
    return context_params(context) != _EMPTY_CONTEXT


def _import_action(
    conv: Conversation, stored: list[_Stored], replace: bool, full: str | None = None
) -> tuple[str, _Stored | None]:
    """What importing ``conv`` does given the stored sessions of its source id:
    ``"replace"``, ``"unchanged"``, ``"append"`` (with the session) or ``"create"``.
    ``full`` is the fingerprint of all of ``conv``'s messages when already known."""
    if not stored:
        return "create", None
    if replace:
        for candidate in stored:
            # Sessions imported before source files were kept replace as they used to.
            if candidate.source_file in (None, conv.source_file):
                return "replace", candidate
    total = len(conv.messages)
    if full is None:
        full = fingerprint_messages(conv.messages)
    for candidate in stored:
        if candidate.count == total and candidate.fingerprint == full:
            return "unchanged", candidate
    grown = [c for c in stored if c.count is not None and c.count < total]
    for candidate in sorted(grown, key=lambda c: c.count or 0, reverse=True):
        if candidate.fingerprint == fingerprint_messages(conv.messages, candidate.count):
            return "append", candidate
    return "create", None


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


class Repository:
    """Sessions, messages, context, memory entries and agents in one SQLite file."""

    def __init__(self, db: Database):
        self.db = db

    # == agents ========================================================================

    def default_agent(self) -> Agent:
        """The default agent (its id is kept in the settings), created on first use."""
        agent_id = self.get_setting(DEFAULT_AGENT_SETTING)
        if agent_id is not None:
            try:
                return self.get_agent(int(agent_id))
            except NotFoundError:
                pass
        row = self._first(f"SELECT {AGENT_SELECT} FROM agents WHERE name = ?",
                          (DEFAULT_AGENT_NAME,))
        # Long-term memory on for the default agent: the session's own entries, injected
        # into the instructions, 5 at most (seed 004's "Default to scope: :session").
        agent = agent_from_row(row) if row is not None else self.create_agent(
            DEFAULT_AGENT_NAME,
            memory_policy={"scope": "session", "inject": "instructions", "max_entries": 5},
        )
        self.set_setting(DEFAULT_AGENT_SETTING, agent.id)
        return agent

    def create_agent(
        self,
        name: str,
        *,
        instructions: str = "",
        provider: str | None = None,
        model: str | None = None,
        memory_policy: dict[str, Any] | None = None,
        tools: Sequence[str] = (),
    ) -> Agent:
        """Create an agent; a name already taken raises :class:`StorageError`."""
        now = time_to_text(utcnow())
        with self.db.write() as conn:
            if conn.exec_driver_sql("SELECT 1 FROM agents WHERE name = ?", (name,)).first():
                raise StorageError(f"An agent named {name!r} already exists.")
            cur = conn.exec_driver_sql(
                "INSERT INTO agents (name, instructions, provider, model, memory_policy, tools,"
                " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (name, instructions, provider, model, json_text(memory_policy or {}),
                 json_text(list(tools)), now, now),
            )
            agent_id = cur.lastrowid
        return self.get_agent(int(agent_id))

    def get_agent(self, agent_id: int) -> Agent:
        return agent_from_row(self._read_one(
            f"SELECT {AGENT_SELECT} FROM agents WHERE id = ?", agent_id,
            f"There is no agent with id {agent_id}."))

    def list_agents(self) -> list[Agent]:
        with self.db.read() as conn:
            rows = conn.exec_driver_sql(
                f"SELECT {AGENT_SELECT} FROM agents ORDER BY name"
            ).all()
        return [agent_from_row(r) for r in rows]

    def delete_agent(self, agent_id: int) -> int:
        """Delete an agent and its long-term memory entries, in one transaction; returns
        how many entries went with it. The default agent, and an agent that still has
        sessions (archived ones too), are refused with a sentence: sessions need their
        agent."""
        with self.db.write() as conn:
            self._require(conn, "agents", agent_id, "agent")
            name = conn.exec_driver_sql(
                "SELECT name FROM agents WHERE id = ?", (agent_id,)
            ).scalar_one()
            default = self.get_setting(DEFAULT_AGENT_SETTING)
            if name == DEFAULT_AGENT_NAME or default == agent_id:
                raise StorageError(f"Agent {name!r} is the default agent; it cannot be deleted.")
            sessions = int(conn.exec_driver_sql(
                "SELECT count(*) FROM sessions WHERE agent_id = ?", (agent_id,)
            ).scalar_one())
            if sessions:
                noun = "session" if sessions == 1 else "sessions"
                raise StorageError(
                    f"Agent {name!r} still has {sessions} {noun}; delete them or give them "
                    "another agent first."
                )
            removed = conn.exec_driver_sql(
                "DELETE FROM memory_entries WHERE agent_id = ?", (agent_id,)
            ).rowcount
            conn.exec_driver_sql("DELETE FROM agents WHERE id = ?", (agent_id,))
        return int(removed or 0)

    def update_agent(self, agent_id: int, **fields: Any) -> Agent:
        """Change ``name``, ``instructions``, ``provider``, ``model``, ``memory_policy``
        or ``tools`` of an agent."""
        allowed = {"name", "instructions", "provider", "model", "memory_policy", "tools"}
        unknown = set(fields) - allowed
        if unknown:
            raise StorageError(f"Agents have no field {sorted(unknown)[0]!r}.")
        values = {
            k: json_text(v) if k in {"memory_policy", "tools"} else v for k, v in fields.items()
        }
        with self.db.write() as conn:
            self._require(conn, "agents", agent_id, "agent")
            if values:
                sets = ", ".join(f"{k} = ?" for k in values)
                conn.exec_driver_sql(
                    f"UPDATE agents SET {sets}, updated_at = ? WHERE id = ?",
                    (*values.values(), time_to_text(utcnow()), agent_id),
                )
        return self.get_agent(agent_id)

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

    def fork_session(
        self, session_id: int, at_message_id: int, *, title: str | None = None
    ) -> SessionInfo:
        """A new session holding copies of the messages up to and including
        ``at_message_id`` and a copy of the context; it records where it came from."""
        with self.db.write() as conn:
            src = conn.exec_driver_sql(
                "SELECT title, agent_id, tags, overrides FROM sessions WHERE id = ?",
                (session_id,),
            ).first()
            if src is None:
                raise NotFoundError(f"There is no session with id {session_id}.")
            at = conn.exec_driver_sql(
                "SELECT position FROM messages WHERE id = ? AND session_id = ?",
                (at_message_id, session_id),
            ).first()
            if at is None:
                raise NotFoundError(
                    f"Session {session_id} has no message with id {at_message_id}."
                )
            new_id = self._insert_session(
                conn,
                title or f"{src[0]} (fork)",
                src[1],
                json_value(src[2]) or [],
                None,
                None,
                None,
                None,
                json_value(src[3]) or {},
                forked_from=(session_id, at_message_id),
            )
            conn.exec_driver_sql(
                "INSERT INTO messages (session_id, position, role, content, parts, name,"
                " tool_calls, tool_call_id, created_at, token_count, token_encoding, state,"
                " important, metadata, compaction_id, summary_line, summary_line_tokens)"
                " SELECT ?, position, role, content, parts, name, tool_calls, tool_call_id,"
                " created_at, token_count, token_encoding, state, important, metadata, NULL,"
                " summary_line, summary_line_tokens"
                " FROM messages WHERE session_id = ? AND position <= ? ORDER BY position",
                (new_id, session_id, at[0]),
            )
            conn.exec_driver_sql(
                "INSERT INTO session_context (session_id, facts, summary, tasks, tool_stats,"
                " token_usage, system_state, environment, updated_at)"
                " SELECT ?, facts, summary, tasks, tool_stats, token_usage, system_state,"
                " environment, ? FROM session_context WHERE session_id = ?",
                (new_id, time_to_text(utcnow()), session_id),
            )
            self._refresh_counts(conn, new_id)
        return self.get_session(new_id)

    # == messages ======================================================================

    def append_messages(self, session_id: int, messages: Sequence[Message]) -> list[Message]:
        """Append messages at the end of a session (one transaction); returns them stored."""
        for m in messages:
            _check_role(m.role)
            _check_state(m.state)
        with self.db.write() as conn:
            self._require(conn, "sessions", session_id, "session")
            start = self._next_position(conn, session_id)
            self._insert_messages(conn, session_id, start, messages)
            self._bump_counts(conn, session_id, messages)
            rows = conn.exec_driver_sql(
                f"SELECT {MESSAGE_SELECT} FROM messages WHERE session_id = ? AND position >= ?"
                " ORDER BY position",
                (session_id, start),
            ).all()
        return [message_from_row(r) for r in rows]

    def append_message(self, session_id: int, message: Message) -> Message:
        return self.append_messages(session_id, [message])[0]

    def insert_message(
        self, session_id: int, position: int, message: Message, *,
        keep_missing_time: bool = False,
    ) -> Message:
        """Insert a message at ``position`` (0 = first); later messages move down one.

        A message without a time gets the current one, unless ``keep_missing_time``
        (a message put back as it was read: its time stays missing)."""
        _check_role(message.role)
        _check_state(message.state)
        with self.db.write() as conn:
            self._require(conn, "sessions", session_id, "session")
            end = self._next_position(conn, session_id)
            if position < 0 or position > end:
                raise StorageError(
                    f"Position {position} is outside session {session_id} (0 to {end})."
                )
            conn.exec_driver_sql(
                "UPDATE messages SET position = position + 1"
                " WHERE session_id = ? AND position >= ?",
                (session_id, position),
            )
            self._insert_messages(
                conn, session_id, position, [message], keep_missing_time=keep_missing_time
            )
            self._refresh_counts(conn, session_id)
            row = conn.exec_driver_sql(
                f"SELECT {MESSAGE_SELECT} FROM messages WHERE session_id = ? AND position = ?",
                (session_id, position),
            ).one()
        return message_from_row(row)

    def _insert_messages(
        self, conn: Connection, session_id: int, start: int, messages: Sequence[Message],
        *, keep_missing_time: bool = False,
    ) -> None:
        now = utcnow()
        lines, line_tokens = line_cache(messages)
        params = [
            (*message_params(m, session_id, start + i, now, keep_missing_time=keep_missing_time),
             line, tokens)
            for i, (m, line, tokens) in enumerate(zip(messages, lines, line_tokens, strict=True))
        ]
        if params:
            conn.exec_driver_sql(MESSAGE_INSERT_WITH_LINES, params)

    def get_message(self, message_id: int) -> Message:
        with self.db.read() as conn:
            row = conn.exec_driver_sql(
                f"SELECT {MESSAGE_SELECT} FROM messages WHERE id = ?", (message_id,)
            ).first()
        if row is None:
            raise NotFoundError(f"There is no message with id {message_id}.")
        return message_from_row(row)

    def update_message(
        self,
        message_id: int,
        *,
        content: str | None = None,
        role: str | None = None,
        name: Any = _UNSET,
        tool_calls: Any = _UNSET,
        tool_call_id: Any = _UNSET,
        parts: Any = _UNSET,
        metadata: dict[str, Any] | None = None,
        token_count: Any = _UNSET,
        token_encoding: str | None = None,
    ) -> Message:
        """Edit a message in place. Changing content or role clears its cached token
        count unless a new one is given."""
        values: dict[str, Any] = {}
        if content is not None:
            values["content"] = content
        if role is not None:
            _check_role(role)
            values["role"] = role
        if name is not _UNSET:
            values["name"] = name
        if tool_calls is not _UNSET:
            values["tool_calls"] = json_text(tool_calls)
        if tool_call_id is not _UNSET:
            values["tool_call_id"] = tool_call_id
        if parts is not _UNSET:
            values["parts"] = json_text(parts)
        if metadata is not None:
            meta = dict(metadata)
            if "important" in meta:
                values["important"] = 1 if meta.pop("important") else 0
            values["metadata"] = json_text(meta) if meta else None
        if token_count is not _UNSET:
            values["token_count"] = token_count
            values["token_encoding"] = token_encoding if token_count is not None else None
        elif values.keys() & {"content", "role", "name", "tool_calls", "tool_call_id"}:
            values["token_count"] = None
            values["token_encoding"] = None
        with self.db.write() as conn:
            session_id = self._message_session(conn, message_id)
            if values:
                sets = ", ".join(f"{k} = ?" for k in values)
                conn.exec_driver_sql(
                    f"UPDATE messages SET {sets} WHERE id = ?", (*values.values(), message_id)
                )
                self._refresh_counts(conn, session_id)
        return self.get_message(message_id)

    def set_important(self, message_id: int, important: bool = True) -> Message:
        with self.db.write() as conn:
            session_id = self._message_session(conn, message_id)
            conn.exec_driver_sql(
                "UPDATE messages SET important = ? WHERE id = ?",
                (1 if important else 0, message_id),
            )
            self._touch(conn, session_id)
        return self.get_message(message_id)

    def set_state(
        self, message_ids: Sequence[int], state: str, *, compaction_id: int | None = None
    ) -> int:
        """Set the state (and compaction) of several messages at once; returns how many."""
        _check_state(state)
        ids = list(dict.fromkeys(message_ids))
        if not ids:
            return 0
        changed = 0
        with self.db.write() as conn:
            sessions: set[int] = set()
            for chunk in _chunks(ids):
                sessions |= _first_column(
                    conn,
                    f"SELECT DISTINCT session_id FROM messages WHERE id IN {_in_clause(chunk)}",
                    chunk)
                cur = conn.exec_driver_sql(
                    f"UPDATE messages SET state = ?, compaction_id = ? "
                    f"WHERE id IN {_in_clause(chunk)}",
                    (state, compaction_id, *chunk),
                )
                changed += cur.rowcount
            if changed < len(ids):
                found: set[int] = set()
                for chunk in _chunks(ids):
                    found |= _first_column(
                        conn, f"SELECT id FROM messages WHERE id IN {_in_clause(chunk)}", chunk)
                missing = [i for i in ids if i not in found]
                shown = ", ".join(str(i) for i in missing[:10])
                more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
                raise NotFoundError(
                    f"There is no message with id {shown}{more}; no state was changed."
                )
            for sid in sessions:
                self._refresh_counts(conn, sid)
        return changed

    def delete_message(self, message_id: int) -> Message:
        """Delete one message (the user's explicit action); returns what was deleted."""
        with self.db.write() as conn:
            row = conn.exec_driver_sql(
                f"SELECT {MESSAGE_SELECT} FROM messages WHERE id = ?", (message_id,)
            ).first()
            if row is None:
                raise NotFoundError(f"There is no message with id {message_id}.")
            msg = message_from_row(row)
            conn.exec_driver_sql("DELETE FROM messages WHERE id = ?", (message_id,))
            conn.exec_driver_sql(
                "UPDATE messages SET position = position - 1"
                " WHERE session_id = ? AND position > ?",
                (msg.session_id, msg.position),
            )
            self._refresh_counts(conn, int(msg.session_id))  # type: ignore[arg-type]
        return msg

    def replace_messages(
        self, session_id: int, message_ids: Sequence[int], messages: Sequence[Message]
    ) -> tuple[list[Message], list[Message]]:
        """Delete the session's messages ``message_ids`` and append ``messages`` at its
        end, in one transaction (a reply replaced by a new one: either both happen or
        neither). Returns the deleted messages as they were (positions included, oldest
        first) and the appended ones as stored."""
        for m in messages:
            _check_role(m.role)
            _check_state(m.state)
        with self.db.write() as conn:
            self._require(conn, "sessions", session_id, "session")
            removed: list[Message] = []
            for message_id in message_ids:
                row = conn.exec_driver_sql(
                    f"SELECT {MESSAGE_SELECT} FROM messages WHERE id = ? AND session_id = ?",
                    (message_id, session_id),
                ).first()
                if row is None:
                    raise NotFoundError(
                        f"Session {session_id} has no message with id {message_id}."
                    )
                removed.append(message_from_row(row))
            removed.sort(key=lambda m: int(m.position or 0))
            # The new rows go in first, while the old ones still hold their ids: SQLite
            # would otherwise hand a deleted id to a new row, and whatever keyed on the
            # old message's id would take the new one for it.
            start = self._next_position(conn, session_id)
            self._insert_messages(conn, session_id, start, messages)
            new_ids = [int(r[0]) for r in conn.exec_driver_sql(
                "SELECT id FROM messages WHERE session_id = ? AND position >= ?"
                " ORDER BY position",
                (session_id, start),
            ).all()]
            # From the bottom up, so each position read above is still right.
            for msg in reversed(removed):
                conn.exec_driver_sql("DELETE FROM messages WHERE id = ?", (msg.id,))
                conn.exec_driver_sql(
                    "UPDATE messages SET position = position - 1"
                    " WHERE session_id = ? AND position > ?",
                    (session_id, msg.position),
                )
            self._refresh_counts(conn, session_id)
            rows = conn.exec_driver_sql(
                f"SELECT {MESSAGE_SELECT} FROM messages WHERE session_id = ?"
                f" AND id IN {_in_clause(new_ids)} ORDER BY position",
                (session_id, *new_ids),
            ).all() if new_ids else []
        return removed, [message_from_row(r) for r in rows]

    def message_count(self, session_id: int, *, states: Sequence[str] | None = None) -> int:
        with self.db.read() as conn:
            params: tuple[Any, ...]
            if not states:
                sql, params = "SELECT count(*) FROM messages WHERE session_id = ?", (session_id,)
            else:
                sql = (
                    "SELECT count(*) FROM messages WHERE session_id = ? "
                    f"AND state IN {_in_clause(states)}"
                )
                params = (session_id, *states)
            return int(conn.exec_driver_sql(sql, params).scalar_one())

    def page_messages(
        self,
        session_id: int,
        *,
        after_position: int = -1,
        limit: int = 200,
        states: Sequence[str] | None = None,
        roles: Sequence[str] | None = None,
    ) -> list[Message]:
        """Up to ``limit`` messages after ``after_position``, in order (keyset paging).

        Pass the last position of one page as ``after_position`` for the next; the cost
        of a page does not depend on where in the session it is.
        """
        clauses = ["session_id = ?", "position > ?"]
        params: list[Any] = [session_id, after_position]
        if states:
            clauses.append(f"state IN {_in_clause(states)}")
            params += list(states)
        if roles:
            clauses.append(f"role IN {_in_clause(roles)}")
            params += list(roles)
        params.append(limit)
        with self.db.read() as conn:
            rows = conn.exec_driver_sql(
                f"SELECT {MESSAGE_SELECT} FROM messages WHERE {' AND '.join(clauses)}"
                " ORDER BY position LIMIT ?",
                tuple(params),
            ).all()
        return [message_from_row(r) for r in rows]

    def page_before(
        self, session_id: int, *, before_position: int, limit: int = 200
    ) -> list[Message]:
        """Up to ``limit`` messages just before ``before_position``, in order."""
        with self.db.read() as conn:
            rows = conn.exec_driver_sql(
                f"SELECT {MESSAGE_SELECT} FROM messages WHERE session_id = ? AND position < ?"
                " ORDER BY position DESC LIMIT ?",
                (session_id, before_position, limit),
            ).all()
        return [message_from_row(r) for r in reversed(rows)]

    def page_state_before(
        self,
        session_id: int,
        *,
        state: str,
        before_position: int | None = None,
        limit: int = 200,
    ) -> list[Message]:
        """Up to ``limit`` messages in ``state`` just before ``before_position`` (from the
        newest when ``None``), newest first: a keyset walk backwards through a session."""
        sql = f"SELECT {MESSAGE_SELECT} FROM messages WHERE session_id = ? AND state = ?"
        params: list[Any] = [session_id, state]
        if before_position is not None:
            sql += " AND position < ?"
            params.append(before_position)
        params.append(limit)
        with self.db.read() as conn:
            rows = conn.exec_driver_sql(
                sql + " ORDER BY position DESC LIMIT ?", tuple(params)
            ).all()
        return [message_from_row(r) for r in rows]

    def count_fitting(self, session_id: int, *, state: str, room: int) -> int | None:
        """How many of the session's newest messages in ``state`` fit in ``room`` tokens
        by their cached counts (a message without one counts 0, so this is at least
        what fits); ``None`` when they all do. One walk backwards that stops there."""
        with self.db.query() as conn:
            row = conn.exec_driver_sql(
                "SELECT n FROM (SELECT row_number() OVER w AS n,"
                " sum(coalesce(token_count, 0)) OVER w AS used"
                " FROM messages WHERE session_id = ? AND state = ?"
                " WINDOW w AS (ORDER BY position DESC)) WHERE used > ? LIMIT 1",
                (session_id, state, room),
            ).first()
        return None if row is None else int(row[0]) - 1

    def first_in_state(self, session_id: int, state: str) -> Message | None:
        """The earliest message of a session in ``state``, if any."""
        with self.db.read() as conn:
            row = conn.exec_driver_sql(
                f"SELECT {MESSAGE_SELECT} FROM messages WHERE session_id = ? AND state = ?"
                " ORDER BY position LIMIT 1",
                (session_id, state),
            ).first()
        return message_from_row(row) if row is not None else None

    def message_shapes(
        self, session_id: int, *, state: str, last_position: int, count: int
    ) -> list[tuple[int, int, str, str | None, list[str]]]:
        """``(id, position, role, tool_call_id, call ids)`` of the ``count`` messages in
        ``state`` up to ``last_position``, in order, without their text: what tells why
        history left out of a request left (the call ids only for assistant messages
        with tool calls)."""
        out: list[tuple[int, int, str, str | None, list[str]]] = []
        with self.db.read() as conn:
            rows = conn.exec_driver_sql(
                "SELECT id, position, role, tool_call_id,"
                " CASE WHEN role = 'assistant' THEN tool_calls END"
                " FROM messages WHERE session_id = ? AND state = ?"
                " AND position <= ? ORDER BY position DESC LIMIT ?",
                (session_id, state, last_position, count),
            ).all()
        for mid, pos, role, call_id, calls in rows:
            ids: list[str] = []
            if calls is not None:
                value = json_value(calls)
                # As call_ids reads a message's tool calls, whatever their shape.
                for call in value if isinstance(value, list | dict | str) else ():
                    cid = call.get("id") if isinstance(call, dict) else None
                    ids.append(cid if isinstance(cid, str) else "")
            out.append((mid, pos, role, call_id, ids))
        out.reverse()
        return out

    def prefix_exceptions(
        self,
        session_id: int,
        *,
        state: str,
        after_position: int,
        last_position: int,
        exclude_system: bool,
        asked: Sequence[str] = (),
    ) -> tuple[list[tuple[int, int, str]], set[str]] | None:
        """For the messages in ``state`` after ``after_position`` up to
        ``last_position``, all left out of a request: ``(id, position, reason)`` of the
        tool results whose call no earlier assistant message there made and, with
        ``exclude_system``, of the system messages, in order; and which of the call ids
        ``asked`` those assistant messages made. Found by SQLite in the calls
        ``message_calls`` lists (an index lookup per tool result), so only the
        exceptions reach Python. ``None`` when a message's calls there are not JSON (or
        the database is not SQLite): the caller then reads the messages instead.
        """
        span = (session_id, state, after_position, last_position)
        # The calls are listed one per row in message_calls (0007_message_calls), so each
        # tool result of the stretch costs one lookup in an index, and no JSON is read.
        try:
            with self.db.read() as conn:
                if conn.dialect.name != "sqlite":
                    return None
                unreadable = conn.exec_driver_sql(
                    "SELECT 1 FROM message_calls WHERE session_id = ? AND call_id IS NULL"
                    " AND state = ? AND position > ? AND position <= ? LIMIT 1",
                    span,
                ).first()
                if unreadable is not None:
                    return None
                rows: list[tuple[int, int, str]] = [
                    (int(r[0]), int(r[1]), REASON_ORPHAN_RESULT)
                    for r in conn.exec_driver_sql(
                        "SELECT t.id, t.position FROM messages t INDEXED BY"
                        " ix_messages_tool_results"
                        " WHERE t.session_id = ? AND t.state = ? AND t.role = 'tool'"
                        " AND t.position > ? AND t.position <= ?"
                        " AND NOT EXISTS (SELECT 1 FROM message_calls c INDEXED BY"
                        " ix_message_calls_lookup WHERE c.session_id = t.session_id"
                        " AND c.call_id = coalesce(t.tool_call_id, '') AND c.state = t.state"
                        " AND c.position > ? AND c.position < t.position)",
                        (*span, after_position),
                    )
                ]
                if exclude_system:
                    rows += [
                        (int(r[0]), int(r[1]), REASON_EXCLUDED_SYSTEM)
                        for r in conn.exec_driver_sql(
                            "SELECT id, position FROM messages WHERE session_id = ?"
                            " AND state = ? AND role = 'system'"
                            " AND +position > ? AND +position <= ?",
                            span,
                        )
                    ]
                issued: set[str] = set()
                wanted = sorted(set(asked))
                for chunk in range(0, len(wanted), 500):
                    part = wanted[chunk:chunk + 500]
                    issued.update(
                        str(r[0])
                        for r in conn.exec_driver_sql(
                            "SELECT DISTINCT call_id FROM message_calls"
                            f" WHERE session_id = ? AND call_id IN {_in_clause(part)}"
                            " AND state = ? AND position > ? AND position <= ?",
                            (session_id, *part, state, after_position, last_position),
                        )
                    )
        except Exception:  # noqa: BLE001 - a database this query cannot read: read it slowly
            return None
        rows.sort(key=lambda r: r[1])
        return rows, issued

    def positions_not_in_state(
        self, session_id: int, *, state: str, after_position: int, last_position: int
    ) -> list[int] | None:
        """Positions after ``after_position`` up to ``last_position`` whose message is
        not in ``state``, in order (none is the common case, told by one count);
        ``None`` when the positions there are not dense."""
        with self.db.read() as conn:
            total = conn.exec_driver_sql(
                "SELECT count(*) FROM messages WHERE session_id = ?"
                " AND position > ? AND position <= ?",
                (session_id, after_position, last_position),
            ).scalar_one()
            if total != last_position - after_position:
                return None
            others = [s for s in STATES if s != state]
            # The other states through the (session, state) index: as cheap as there
            # are such messages in the whole session, and nothing when there are none.
            return sorted(
                int(r[0])
                for r in conn.exec_driver_sql(
                    "SELECT position FROM messages WHERE session_id = ?"
                    f" AND state IN {_in_clause(others)}"
                    " AND +position > ? AND +position <= ?",
                    (session_id, *others, after_position, last_position),
                )
            )

    def active_places(
        self, session_id: int, *, first_position: int, last_position: int, limit: int,
        state: str = "active",
    ) -> list[tuple[int, int]]:
        """``(id, position)`` of the newest ``limit`` messages in ``state`` from
        ``first_position`` to ``last_position``, newest first (no text is read)."""
        with self.db.read() as conn:
            return [
                (int(r[0]), int(r[1]))
                for r in conn.exec_driver_sql(
                    "SELECT id, position FROM messages WHERE session_id = ? AND state = ?"
                    " AND position BETWEEN ? AND ? ORDER BY position DESC LIMIT ?",
                    (session_id, state, first_position, last_position, limit),
                )
            ]

    def active_at(
        self, session_id: int, *, state: str, last_position: int, back: int, gaps: bool
    ) -> tuple[int | None, int | None]:
        """``(id, position)`` of the message in ``state`` ``back`` places before the one
        at ``last_position`` (positions are dense, so without ``gaps`` this is one
        lookup by position)."""
        with self.db.read() as conn:
            if not gaps:
                row = conn.exec_driver_sql(
                    "SELECT id, position FROM messages WHERE session_id = ? AND position = ?",
                    (session_id, last_position - back),
                ).first()
            else:
                row = conn.exec_driver_sql(
                    "SELECT id, position FROM messages WHERE session_id = ? AND state = ?"
                    " AND position <= ? ORDER BY position DESC LIMIT 1 OFFSET ?",
                    (session_id, state, last_position, back),
                ).first()
        return (None, None) if row is None else (int(row[0]), int(row[1]))

    def call_ids_made(self, session_id: int, state: str) -> set[str]:
        """The tool call ids the session's assistant messages in ``state`` made."""
        found: set[str] = set()
        with self.db.read() as conn:
            rows = conn.exec_driver_sql(
                "SELECT tool_calls FROM messages WHERE session_id = ? AND state = ?"
                " AND role = 'assistant' AND tool_calls IS NOT NULL",
                (session_id, state),
            ).all()
        for (calls,) in rows:
            value = json_value(calls)
            for call in value if isinstance(value, list | dict | str) else ():
                cid = call.get("id") if isinstance(call, dict) else None
                found.add(cid if isinstance(cid, str) else "")
        return found

    def list_messages(
        self, session_id: int, *, states: Sequence[str] | None = None
    ) -> list[Message]:
        """Every message of a session in order (optionally of some states only)."""
        out: list[Message] = []
        after = -1
        while True:
            page = self.page_messages(session_id, after_position=after, limit=5000, states=states)
            out.extend(page)
            if len(page) < 5000:
                return out
            after = int(page[-1].position)  # type: ignore[arg-type]

    def message_index(self, session_id: int) -> list[tuple[int, int, str, str]]:
        """``(id, position, role, state)`` of every message, in order: what a view needs
        to know the shape of a session without loading its text."""
        with self.db.read() as conn:
            return [
                (r[0], r[1], r[2], r[3])
                for r in conn.exec_driver_sql(
                    "SELECT id, position, role, state FROM messages WHERE session_id = ?"
                    " ORDER BY position",
                    (session_id,),
                )
            ]

    def role_counts(
        self, session_id: int, *, states: Sequence[str] | None = None
    ) -> dict[str, int]:
        """How many messages of each role (every role present, zeros included)."""
        sql = "SELECT role, count(*) FROM messages WHERE session_id = ?"
        params: list[Any] = [session_id]
        if states:
            sql += f" AND state IN {_in_clause(states)}"
            params += list(states)
        with self.db.read() as conn:
            counts: dict[str, int] = {
                r[0]: r[1] for r in conn.exec_driver_sql(sql + " GROUP BY role", tuple(params))
            }
        return {role: int(counts.get(role, 0)) for role in ROLES}

    def token_total(self, session_id: int, *, states: Sequence[str] = ("active",)) -> int:
        """Sum of the messages' token counts: the cached ones, and messages without a
        count (an import leaves them for :meth:`fill_token_counts`) counted on demand
        with the default encoding (not stored)."""
        with self.db.query() as conn:
            row = conn.exec_driver_sql(
                "SELECT coalesce(sum(token_count), 0), count(*) - count(token_count)"
                f" FROM messages WHERE session_id = ? AND state IN {_in_clause(states)}",
                (session_id, *states),
            ).one()
        total, missing = int(row[0]), int(row[1])
        if missing:
            total += sum(self._count_missing({session_id: missing}, states).values())
        return total

    def token_totals(
        self, session_ids: Sequence[int] | None = None, *, states: Sequence[str] = ("active",)
    ) -> dict[int, int]:
        """Token totals of many sessions (all when ``session_ids`` is None) in one pass;
        messages without a count are counted on demand, as in :meth:`token_total`."""
        sql = (
            "SELECT session_id, coalesce(sum(token_count), 0), count(*) - count(token_count)"
            f" FROM messages WHERE state IN {_in_clause(states)}"
        )
        params: list[Any] = list(states)
        if session_ids is not None:
            ids = list(session_ids)
            if not ids:
                return {}
            sql += f" AND session_id IN {_in_clause(ids)}"
            params += ids
        with self.db.query() as conn:
            rows = conn.exec_driver_sql(sql + " GROUP BY session_id", tuple(params)).all()
        totals = {int(r[0]): int(r[1]) for r in rows}
        missing = {int(r[0]): int(r[2]) for r in rows if r[2]}
        if missing:
            for sid, extra in self._count_missing(missing, states).items():
                totals[sid] += extra
        if session_ids is not None:
            return {sid: totals.get(sid, 0) for sid in session_ids}
        return totals

    def _count_missing(self, sessions: dict[int, int], states: Sequence[str]) -> dict[int, int]:
        """Tokens of the messages without a cached count in ``sessions`` (by session)."""
        from workbench.core.tokens import get_counter

        counter = get_counter()
        extra: dict[int, int] = {}
        ids = list(sessions)
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            with self.db.query() as conn:
                rows = conn.exec_driver_sql(
                    f"SELECT {MESSAGE_SELECT} FROM messages WHERE token_count IS NULL"
                    f" AND state IN {_in_clause(states)} AND session_id IN {_in_clause(chunk)}",
                    (*states, *chunk),
                ).all()
            messages = [message_from_row(r) for r in rows]
            for m, tokens in zip(messages, counter.count_messages(messages), strict=True):
                assert m.session_id is not None
                extra[m.session_id] = extra.get(m.session_id, 0) + tokens
        return extra

    def uncounted_messages(
        self,
        encoding: str | None,
        *,
        session_id: int | None = None,
        after_id: int = 0,
        limit: int = 5000,
    ) -> list[Message]:
        """Messages whose cached count is missing or (given ``encoding``) from another
        encoding, in id order from ``after_id`` on: pass the last id of one page as the
        next page's ``after_id`` (keyset paging, so a pass over the table is linear)."""
        sql = f"SELECT {MESSAGE_SELECT} FROM messages WHERE id > ? AND "
        params: list[Any] = [after_id]
        if encoding is None:
            sql += "token_count IS NULL"
        else:
            sql += "(token_count IS NULL OR token_encoding IS NOT ?)"
            params.append(encoding)
        if session_id is not None:
            sql += " AND session_id = ?"
            params.append(session_id)
        with self.db.read() as conn:
            rows = conn.exec_driver_sql(sql + " ORDER BY id LIMIT ?", (*params, limit)).all()
        return [message_from_row(r) for r in rows]

    def missing_token_counts(self) -> tuple[int, int]:
        """How many messages have no cached token count, and the smallest id among them
        (0 when none). Read from an index, without touching the messages' text."""
        with self.db.query() as conn:
            row = conn.exec_driver_sql(
                "SELECT count(*), min(id) FROM messages WHERE token_count IS NULL"
            ).one()
        return int(row[0]), int(row[1] or 0)

    def fill_token_counts(
        self,
        count: Callable[[Sequence[Message]], Sequence[int]],
        encoding: str,
        *,
        after_id: int = 0,
        limit: int = 1000,
    ) -> tuple[int, int]:
        """Count up to ``limit`` messages without a cached count, in id order after
        ``after_id``, and store the counts with the session totals: all in one write
        transaction, so an edit can never slip between reading a text and storing its
        count. ``count`` gives the token counts of messages (``encoding`` names it).

        Returns ``(messages counted, last id counted)``; ``(0, after_id)`` when none
        are left. Call again with the returned id to go on.
        """
        with self.db.write() as conn:
            rows = conn.exec_driver_sql(
                f"SELECT {MESSAGE_SELECT} FROM messages WHERE id > ? AND token_count IS NULL"
                " ORDER BY id LIMIT ?",
                (after_id, limit),
            ).all()
            if not rows:
                return 0, after_id
            messages = [message_from_row(r) for r in rows]
            counts = list(count(messages))
            if len(counts) != len(messages):
                raise StorageError(
                    f"The token counter gave {len(counts)} counts for {len(messages)} messages."
                )
            for m, c in zip(messages, counts, strict=True):
                m.token_count, m.token_encoding = int(c), encoding
            # Their summary lines too, now that the encoding of their counts is known.
            lines, line_tokens = line_cache(messages)
            conn.exec_driver_sql(
                "UPDATE messages SET token_count = ?, token_encoding = ?, summary_line = ?,"
                " summary_line_tokens = ? WHERE id = ?",
                [
                    (m.token_count, encoding, line, tokens, m.id)
                    for m, line, tokens in zip(messages, lines, line_tokens, strict=True)
                ],
            )
            # These messages added nothing to their session's total while uncounted.
            added: dict[int, int] = {}
            for m, c in zip(messages, counts, strict=True):
                assert m.session_id is not None
                if m.state == "active":
                    added[m.session_id] = added.get(m.session_id, 0) + int(c)
            conn.exec_driver_sql(
                "UPDATE sessions SET token_count = token_count + ? WHERE id = ?",
                [(tokens, sid) for sid, tokens in added.items()],
            )
        last = messages[-1].id
        assert last is not None
        return len(messages), last

    def set_token_counts(self, counts: Iterable[tuple[int, int, str]]) -> int:
        """Store ``(message_id, token_count, encoding)`` triples; session totals follow."""
        rows = list(counts)
        if not rows:
            return 0
        with self.db.write() as conn:
            conn.exec_driver_sql(
                "UPDATE messages SET token_count = ?, token_encoding = ? WHERE id = ?",
                [(c, enc, mid) for mid, c, enc in rows],
            )
            ids = [r[0] for r in rows]
            sessions: set[int] = set()
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                sessions.update(
                    r[0]
                    for r in conn.exec_driver_sql(
                        f"SELECT DISTINCT session_id FROM messages WHERE id IN {_in_clause(chunk)}",
                        tuple(chunk),
                    )
                )
            for sid in sessions:
                self._refresh_counts(conn, sid, touch=False)
        return len(rows)

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

    # == import ========================================================================

    def import_conversation(
        self,
        conversation: Conversation,
        *,
        agent_id: int | None = None,
        replace: bool = False,
    ) -> ImportOutcome:
        """Store a whole conversation (session, messages, context) in one transaction.

        A conversation is recognised by its ``(source, source_id)`` and the fingerprint
        of its messages (:mod:`workbench.core.identity`):

        * the same messages as a stored session of that id: nothing changes
          (``"unchanged"``);
        * the stored session's messages followed by new ones (the source grew): the new
          ones are appended to it (``"updated"``);
        * with ``replace=True``, a stored session of that id read from the same
          ``source_file``: its messages, context and compactions are replaced
          (``"updated"``);
        * anything else is a new session (``"created"``; ``reused_id`` when another
          stored conversation has the same id).
        """
        for i, m in enumerate(conversation.messages):
            if m.role not in ROLES:
                raise StorageError(f"Message {i}: role {m.role!r} is not one of {ROLES}.")
            _check_state(m.state)
        if agent_id is None:
            agent_id = self.default_agent().id
        with self.db.write() as conn:
            candidates = self._candidates(conn, conversation)
            action, target = _import_action(conversation, candidates, replace)
            reused = action == "create" and bool(candidates)
            if action == "unchanged":
                assert target is not None
                session_id, status = target.session_id, "unchanged"
                if self._context_differs(conn, session_id, conversation.context):
                    # The same turns with new facts, summary or tasks (a context file
                    # saved again): the context is what changed, and it is kept.
                    self._write_context(conn, session_id, conversation.context)
                    status = "updated"
            elif action == "replace":
                assert target is not None
                session_id, status = target.session_id, "updated"
                self._replace_imported(conn, session_id, conversation)
            elif action == "append":
                assert target is not None
                session_id, status = target.session_id, "updated"
                self._append_imported(conn, session_id, conversation, target.count or 0)
            else:
                status = "created"
                times = [m.created_at for m in conversation.messages if m.created_at]
                first, updated = bulk.session_times(conversation, times, utcnow())
                session_id = self._insert_session(
                    conn,
                    conversation.title,
                    agent_id,
                    conversation.tags,
                    conversation.source,
                    conversation.source_id,
                    first,
                    updated,
                    None,
                )
                self._insert_messages(
                    conn, session_id, 0, conversation.messages, keep_missing_time=True
                )
                self._write_context(conn, session_id, conversation.context)
                self._refresh_counts(conn, session_id, touch=False)
                self._set_identity(conn, session_id, conversation)
        return ImportOutcome(
            self.get_session(session_id), status == "created", status, reused_id=reused
        )

    def _candidates(self, conn: Connection, conversation: Conversation) -> list[_Stored]:
        """The stored sessions of the conversation's ``(source, source_id)``, oldest first,
        each with its fingerprint (computed now for sessions imported before 0004)."""
        if conversation.source_id is None or conversation.source is None:
            return []
        rows = conn.exec_driver_sql(
            "SELECT id, source_file, fingerprint, fingerprint_count FROM sessions"
            " WHERE source = ? AND source_id = ? ORDER BY id",
            (conversation.source, conversation.source_id),
        ).all()
        found: list[_Stored] = []
        for session_id, source_file, fp, count in rows:
            if fp is None or count is None:
                fp, count = self._fingerprint_stored(conn, int(session_id))
            found.append(_Stored(int(session_id), source_file, fp, int(count)))
        return found

    def _fingerprint_stored(self, conn: Connection, session_id: int) -> tuple[str, int]:
        """Fingerprint a session imported before fingerprints were kept, and keep it."""
        rows = conn.exec_driver_sql(
            f"SELECT {MESSAGE_SELECT} FROM messages WHERE session_id = ? ORDER BY position",
            (session_id,),
        ).all()
        messages = [message_from_row(r) for r in rows]
        fp = fingerprint_messages(messages)
        conn.exec_driver_sql(
            "UPDATE sessions SET fingerprint = ?, fingerprint_count = ? WHERE id = ?",
            (fp, len(messages), session_id),
        )
        return fp, len(messages)

    @staticmethod
    def _set_identity(conn: Connection, session_id: int, conversation: Conversation) -> None:
        """Keep what a later import recognises the conversation by, and its metadata."""
        conn.exec_driver_sql(
            "UPDATE sessions SET source_file = ?, fingerprint = ?, fingerprint_count = ?,"
            " metadata = ? WHERE id = ?",
            (
                conversation.source_file,
                fingerprint_messages(conversation.messages),
                len(conversation.messages),
                json_text(conversation.metadata) if conversation.metadata else None,
                session_id,
            ),
        )

    def session_metadata(self, session_id: int) -> dict[str, Any]:
        """What the source said about the session as a whole (empty when nothing)."""
        row = self._read_one("SELECT metadata FROM sessions WHERE id = ?", session_id,
                             f"There is no session with id {session_id}.")
        value = json_value(row[0])
        return value if isinstance(value, dict) else {}

    def set_fork_origin(self, session_id: int, from_session_id: int, position: int) -> None:
        """Record that a session was forked from another at the message at ``position``
        (an imported branch of a conversation tree); nothing when that message is gone."""
        self.set_fork_origins([(session_id, from_session_id, position)])

    def set_fork_origins(self, links: Sequence[tuple[int, int, int]]) -> None:
        """:meth:`set_fork_origin` for many ``(session, from session, position)`` links,
        in one transaction (an import links every branch of a tree at once)."""
        if not links:
            return
        with self.db.write() as conn:
            conn.exec_driver_sql(
                "UPDATE sessions SET forked_from_session_id = ?, forked_from_message_id ="
                " (SELECT id FROM messages WHERE session_id = ? AND position = ?)"
                " WHERE id = ? AND EXISTS"
                " (SELECT 1 FROM messages WHERE session_id = ? AND position = ?)",
                [(origin, origin, position, session_id, origin, position)
                 for session_id, origin, position in links],
            )

    def _replace_imported(
        self, conn: Connection, session_id: int, conversation: Conversation
    ) -> None:
        """Replace an imported session's messages, context and compaction records."""
        conn.exec_driver_sql("DELETE FROM messages WHERE session_id = ?", (session_id,))
        # The compactions folded messages that are gone now: undoing one would report
        # messages "active again" that were never folded.
        conn.exec_driver_sql("DELETE FROM compactions WHERE session_id = ?", (session_id,))
        conn.exec_driver_sql(
            "UPDATE sessions SET title = ?, tags = ? WHERE id = ?",
            (
                conversation.title,
                json_text(list(dict.fromkeys(conversation.tags))),
                session_id,
            ),
        )
        self._insert_messages(conn, session_id, 0, conversation.messages, keep_missing_time=True)
        self._write_context(conn, session_id, conversation.context)
        self._refresh_counts(conn, session_id, touch=False)
        self._set_identity(conn, session_id, conversation)

    def _append_imported(
        self, conn: Connection, session_id: int, conversation: Conversation, known: int
    ) -> None:
        """Append the messages after the first ``known`` to an imported session."""
        new = conversation.messages[known:]
        start = int(
            conn.exec_driver_sql(
                "SELECT ifnull(max(position) + 1, 0) FROM messages WHERE session_id = ?",
                (session_id,),
            ).scalar_one()
        )
        self._insert_messages(conn, session_id, start, new, keep_missing_time=True)
        if conversation.context != SessionContext():
            # The grown source's context (a context file's facts, tasks, usage) is newer.
            self._write_context(conn, session_id, conversation.context)
        self._refresh_counts(conn, session_id, touch=False)
        self._set_identity(conn, session_id, conversation)
        times = [m.created_at for m in new if m.created_at is not None]
        latest = max(times) if times else conversation.updated_at
        if latest is not None:
            conn.exec_driver_sql(
                "UPDATE sessions SET updated_at = max(updated_at, ?) WHERE id = ?",
                (time_to_text(latest), session_id),
            )

    def import_many(
        self,
        conversations: Sequence[Conversation | bulk.PreparedConversation],
        *,
        agent_id: int | None = None,
        replace: bool = False,
    ) -> list[ImportOutcome]:
        """Store a batch of conversations in ONE transaction, the fast way (see
        :mod:`workbench.store.bulk`). All or nothing: on an error nothing of the batch
        is stored, so a caller can retry conversations one by one to isolate a bad one.
        Conversations may come already prepared by :func:`workbench.store.bulk.prepare`.

        Conversations whose source id is stored are matched as :meth:`import_conversation`
        says: unchanged ones change nothing and different ones are new sessions of the
        batch; those that grew, those ``replace`` replaces, and a source id repeated in
        the batch go through :meth:`import_conversation` after the batch, one by one.
        """
        if agent_id is None:
            agent_id = self.default_agent().id
        now = utcnow()
        batch = [
            c if isinstance(c, bulk.PreparedConversation) else bulk.prepare(c, now)
            for c in conversations
        ]
        fresh: list[bulk.PreparedConversation] = []
        unchanged: dict[int, int] = {}  # index in batch -> stored session id
        reused: set[int] = set()  # indexes of new sessions whose source id is taken
        deferred: list[int] = []
        with self.db.write() as conn:
            stored = self._stored_sources(conn, [p.conversation for p in batch])
            seen: set[tuple[str | None, str]] = set()
            for i, prepared in enumerate(batch):
                conv = prepared.conversation
                if conv.source_id is not None:
                    key = (conv.source, conv.source_id)
                    if key in seen:
                        deferred.append(i)
                        continue
                    seen.add(key)
                    known = stored.get(key)
                    if known:
                        if any(c.fingerprint is None for c in known):
                            deferred.append(i)  # fingerprinted in import_conversation
                            continue
                        action, target = _import_action(
                            conv, known, replace, full=prepared.session[9]
                        )
                        if action == "unchanged" and target is not None and \
                                not _carries_context(conv.context):
                            unchanged[i] = target.session_id
                        elif action == "create":
                            reused.add(i)
                            fresh.append(prepared)
                        else:
                            deferred.append(i)  # appended to or replaced, one by one
                        continue
                fresh.append(prepared)
            new_ids = bulk.insert_batch(conn, fresh, agent_id)
            infos = self._sessions_by_id(conn, list(unchanged.values()))
            if new_ids:
                agent_name = conn.exec_driver_sql(
                    "SELECT name FROM agents WHERE id = ?", (agent_id,)
                ).scalar_one()
                # Made from the values just written, rather than read back row by row.
                for session_id, prepared in zip(new_ids, fresh, strict=True):
                    infos[session_id] = session_from_row(
                        bulk.session_row(session_id, agent_id, str(agent_name), prepared)
                    )
        outcomes: list[ImportOutcome] = []
        next_new = iter(new_ids)
        later = set(deferred)
        for i, prepared in enumerate(batch):
            if i in later:
                outcomes.append(
                    self.import_conversation(
                        prepared.conversation, agent_id=agent_id, replace=replace
                    )
                )
            elif i in unchanged:
                outcomes.append(ImportOutcome(infos[unchanged[i]], False, "unchanged"))
            else:
                outcomes.append(
                    ImportOutcome(infos[next(next_new)], True, "created", reused_id=i in reused)
                )
        return outcomes

    @staticmethod
    def _stored_sources(
        conn: Connection, conversations: Sequence[Conversation]
    ) -> dict[tuple[str | None, str], list[_Stored]]:
        """The sessions already stored under the conversations' (source, source id)."""
        wanted: dict[str, list[str]] = {}
        for conv in conversations:
            # A NULL source never matches (``source = NULL`` is never true), as before.
            if conv.source_id is not None and conv.source is not None:
                wanted.setdefault(conv.source, []).append(conv.source_id)
        found: dict[tuple[str | None, str], list[_Stored]] = {}
        for source, source_ids in wanted.items():
            # One row of JSON: every fetched row costs a trip through the interpreter
            # lock, which a busy reading thread makes slow.
            text = conn.exec_driver_sql(
                "SELECT json_group_array(json_array(source_id, id, source_file, fingerprint,"
                " fingerprint_count)) FROM sessions"
                " WHERE source = ? AND source_id IN (SELECT value FROM json_each(?))",
                (source, json_text(source_ids)),
            ).scalar_one()
            for sid, rid, source_file, fp, count in json_value(text):
                found.setdefault((source, sid), []).append(
                    _Stored(int(rid), source_file, fp, count)
                )
        return found

    @staticmethod
    def _sessions_by_id(conn: Connection, session_ids: Sequence[int]) -> dict[int, SessionInfo]:
        """The sessions with these ids, read as one row of JSON (see _stored_sources)."""
        if not session_ids:
            return {}
        text = conn.exec_driver_sql(
            f"SELECT json_group_array(json_array({SESSION_SELECT})) FROM {SESSION_FROM}"
            " WHERE s.id IN (SELECT value FROM json_each(?))",
            (json_text(list(dict.fromkeys(session_ids))),),
        ).scalar_one()
        infos = [session_from_row(row) for row in json_value(text)]
        return {info.id: info for info in infos}

    # == memory entries ================================================================

    def add_memory_entry(
        self,
        agent_id: int,
        content: str,
        *,
        scope: str = "agent",
        namespace: str = "default",
        session_id: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> tuple[MemoryEntry, bool]:
        """Store a memory entry once; returns it and whether it was new."""
        if scope not in ("agent", "session"):
            raise StorageError(f"Memory scope {scope!r} is not 'agent' or 'session'.")
        if scope == "session" and session_id is None:
            raise StorageError("A memory entry of scope 'session' needs a session.")
        digest = hashlib.sha256(content.strip().encode("utf-8")).hexdigest()
        with self.db.write() as conn:
            self._require(conn, "agents", agent_id, "agent")
            if session_id is not None:
                self._require(conn, "sessions", session_id, "session")
            found = conn.exec_driver_sql(
                "SELECT id FROM memory_entries WHERE agent_id = ? AND scope = ? AND namespace = ?"
                " AND ifnull(session_id, 0) = ? AND content_hash = ?",
                (agent_id, scope, namespace, session_id or 0, digest),
            ).first()
            if found is not None:
                entry_id, created = int(found[0]), False
            else:
                cur = conn.exec_driver_sql(
                    "INSERT INTO memory_entries (agent_id, session_id, scope, namespace, content,"
                    " content_hash, metadata, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (agent_id, session_id, scope, namespace, content, digest,
                     json_text(metadata or {}), time_to_text(utcnow())),
                )
                entry_id, created = int(cur.lastrowid), True
        return self.get_memory_entry(entry_id), created

    def get_memory_entry(self, entry_id: int) -> MemoryEntry:
        return memory_from_row(self._read_one(
            f"SELECT {MEMORY_SELECT} FROM memory_entries WHERE id = ?", entry_id,
            f"There is no memory entry with id {entry_id}."))

    def list_memory_entries(
        self,
        *,
        agent_id: int | None = None,
        scope: str | None = None,
        namespace: str | None = None,
        session_id: int | None = None,
    ) -> list[MemoryEntry]:
        """Memory entries matching every filter given, newest first."""
        clauses, params = [], []
        for column, value in (
            ("agent_id", agent_id),
            ("scope", scope),
            ("namespace", namespace),
            ("session_id", session_id),
        ):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        with self.db.read() as conn:
            rows = conn.exec_driver_sql(
                f"SELECT {MEMORY_SELECT} FROM memory_entries {where} "
                "ORDER BY created_at DESC, id DESC",
                tuple(params),
            ).all()
        return [memory_from_row(r) for r in rows]

    def delete_memory_entry(self, entry_id: int) -> None:
        with self.db.write() as conn:
            cur = conn.exec_driver_sql("DELETE FROM memory_entries WHERE id = ?", (entry_id,))
            if cur.rowcount == 0:
                raise NotFoundError(f"There is no memory entry with id {entry_id}.")

    # == settings ======================================================================

    def get_setting(self, key: str, default: Any = None) -> Any:
        row = self._first("SELECT value FROM settings WHERE key = ?", (key,))
        return default if row is None else json_value(row[0])

    def set_setting(self, key: str, value: Any) -> None:
        with self.db.write() as conn:
            conn.exec_driver_sql(
                "INSERT INTO settings (key, value) VALUES (?, ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, json_text(value)),
            )

    # == statistics ====================================================================

    def stats(self) -> dict[str, Any]:
        """Counts over the whole database: sessions, messages by role and state, tokens."""
        with self.db.read() as conn:
            sessions = conn.exec_driver_sql(
                "SELECT count(*), coalesce(sum(archived), 0), coalesce(sum(message_count), 0),"
                " coalesce(sum(token_count), 0) FROM sessions"
            ).one()
            by_role: dict[str, int] = {
                r[0]: r[1]
                for r in conn.exec_driver_sql("SELECT role, count(*) FROM messages GROUP BY role")
            }
            by_state: dict[str, int] = {
                r[0]: r[1]
                for r in conn.exec_driver_sql("SELECT state, count(*) FROM messages GROUP BY state")
            }
            memory = conn.exec_driver_sql("SELECT count(*) FROM memory_entries").scalar_one()
            agents = conn.exec_driver_sql("SELECT count(*) FROM agents").scalar_one()
            uncounted = conn.exec_driver_sql(
                "SELECT count(*) FROM messages WHERE token_count IS NULL"
            ).scalar_one()
        return {
            "database": str(self.db.path),
            "sessions": int(sessions[0]),
            "archived_sessions": int(sessions[1]),
            "messages": int(sessions[2]),
            "active_tokens": int(sessions[3]),
            "messages_by_role": {r: int(by_role.get(r, 0)) for r in ROLES},
            "messages_by_state": {s: int(by_state.get(s, 0)) for s in STATES},
            "uncounted_messages": int(uncounted),
            "memory_entries": int(memory),
            "agents": int(agents),
        }

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


