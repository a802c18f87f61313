"""Messages: appending, inserting, editing, states, paging, token counts."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy.engine import Connection

from workbench.core.assembly import REASON_EXCLUDED_SYSTEM, REASON_ORPHAN_RESULT
from workbench.core.conversation import (
    ROLES,
    STATES,
    Message,
    utcnow,
)
from workbench.core.summarizers import line_cache
from workbench.errors import NotFoundError, StorageError
from workbench.store.base import (
    _UNSET,
    _check_role,
    _check_state,
    _chunks,
    _first_column,
    _in_clause,
)
from workbench.store.context_store import ContextStore
from workbench.store.rows import (
    MESSAGE_INSERT_WITH_LINES,
    MESSAGE_SELECT,
    message_from_row,
    message_params,
)
from workbench.store.types import json_text, json_value


class MessageStore(ContextStore):
    """Messages: appending, inserting, editing, states, paging, token counts."""

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

