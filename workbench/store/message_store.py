"""Messages: appending, inserting, editing, states, paging, token counts.

Every statement is SQLAlchemy Core over the storage tables (:mod:`workbench.store.schema`)
and runs alike on SQLite and PostgreSQL; the statements whose shape is fixed are built
once, below the class, with ``bindparam`` names (``:sid`` is always a session id). Where
SQLite's planner must be told which index to read, :func:`indexed_alias` and
:func:`unindexed` say so on SQLite only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import cache
from typing import Any

from sqlalchemy import (
    BigInteger,
    BindParameter,
    ColumnElement,
    Select,
    bindparam,
    case,
    delete,
    func,
    literal,
    literal_column,
    select,
    update,
)
from sqlalchemy.engine import Connection

from workbench.core.assembly import REASON_EXCLUDED_SYSTEM, REASON_ORPHAN_RESULT
from workbench.core.conversation import (
    ROLES,
    STATES,
    Message,
    MessageState,
    utcnow,
)
from workbench.core.summarizers import line_cache
from workbench.errors import ChangedElsewhereError, NotFoundError, StorageError
from workbench.store.base import (
    _UNSET,
    _check_role,
    _check_state,
    _chunks,
)
from workbench.store.context_store import ContextStore
from workbench.store.dialect import indexed_alias, unindexed
from workbench.store.orphans import places_moved
from workbench.store.rows import (
    MESSAGE_FIELDS,
    MESSAGE_INSERT_ROWS,
    message_from_row,
    message_values,
)
from workbench.store.schema import MESSAGE_CALLS, MESSAGES, ORPHAN_RESULTS, SESSIONS
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
            rows = conn.execute(_FROM_POSITION, {"sid": session_id, "start": start}).all()
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
            with places_moved(conn, session_id, position, 1):
                conn.execute(_MAKE_ROOM, {"sid": session_id, "at": position})
            self._insert_messages(
                conn, session_id, position, [message], keep_missing_time=keep_missing_time
            )
            self._refresh_counts(conn, session_id)
            row = conn.execute(_AT_POSITION, {"sid": session_id, "at": position}).one()
        return message_from_row(row)

    def _insert_messages(
        self, conn: Connection, session_id: int, start: int, messages: Sequence[Message],
        *, keep_missing_time: bool = False,
    ) -> None:
        now = utcnow()
        lines, line_tokens = line_cache(messages)
        rows = [
            message_values(m, session_id, start + i, now, keep_missing_time=keep_missing_time,
                           line=line, line_tokens=tokens)
            for i, (m, line, tokens) in enumerate(zip(messages, lines, line_tokens, strict=True))
        ]
        if rows:
            conn.execute(MESSAGE_INSERT_ROWS, rows)

    def get_message(self, message_id: int) -> Message:
        with self.db.read() as conn:
            row = conn.execute(_BY_ID, {"id": message_id}).first()
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
        expected: tuple[str, str] | None = None,
    ) -> Message:
        """Edit a message in place. Changing content or role clears its cached token
        count unless a new one is given.

        ``expected`` is the ``(role, content)`` the caller read: the change is written
        only while the message still holds them, checked by the UPDATE that writes it
        (:class:`ChangedElsewhereError` otherwise; nothing is written)."""
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
                values["important"] = bool(meta.pop("important"))
            values["metadata"] = json_text(meta) if meta else None
        if token_count is not _UNSET:
            values["token_count"] = token_count
            values["token_encoding"] = token_encoding if token_count is not None else None
        elif values.keys() & {"content", "role", "name", "tool_calls", "tool_call_id"}:
            values["token_count"] = None
            values["token_encoding"] = None
        statement = update(MESSAGES).where(MESSAGES.c.id == message_id)
        if expected is not None:
            statement = statement.where(MESSAGES.c.role == expected[0],
                                        MESSAGES.c.content == expected[1])
            values.setdefault("role", expected[0])  # an UPDATE with something to set
        with self.db.write() as conn:
            session_id = self._message_session(conn, message_id)
            if values:
                if not conn.execute(statement.values(values)).rowcount:
                    raise ChangedElsewhereError(
                        f"Message {message_id} was changed since it was read.")
                self._refresh_counts(conn, session_id)
        return self.get_message(message_id)

    def set_important(self, message_id: int, important: bool = True, *,
                      expected: bool | None = None) -> Message:
        """Mark or unmark a message; with ``expected``, only while its mark is that
        (:class:`ChangedElsewhereError` otherwise, checked by the UPDATE itself)."""
        statement = _SET_IMPORTANT
        if expected is not None:
            statement = statement.where(_M.important == bool(expected))
        with self.db.write() as conn:
            session_id = self._message_session(conn, message_id)
            if not conn.execute(statement, {"mid": message_id,
                                            "flag": bool(important)}).rowcount:
                raise ChangedElsewhereError(
                    f"Message {message_id} was changed since it was read.")
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
                sessions.update(
                    r[0] for r in conn.execute(_SESSIONS_OF, {"ids": list(chunk)})
                )
                changed += conn.execute(
                    _SET_STATE,
                    {"ids": list(chunk), "new_state": state, "new_compaction": compaction_id},
                ).rowcount
            if changed < len(ids):
                found: set[int] = set()
                for chunk in _chunks(ids):
                    found.update(r[0] for r in conn.execute(_IDS_IN, {"ids": list(chunk)}))
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
            row = conn.execute(_BY_ID, {"id": message_id}).first()
            if row is None:
                raise NotFoundError(f"There is no message with id {message_id}.")
            msg = message_from_row(row)
            assert msg.session_id is not None and msg.position is not None
            conn.execute(_DELETE, {"id": message_id})
            with places_moved(conn, msg.session_id, msg.position + 1, -1):
                conn.execute(_CLOSE_GAP, {"sid": msg.session_id, "at": msg.position})
            self._refresh_counts(conn, msg.session_id)
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
                row = conn.execute(_BY_ID_IN_SESSION, {"id": message_id, "sid": session_id}).first()
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
            new_ids = [int(r[0]) for r in conn.execute(
                _IDS_FROM_POSITION, {"sid": session_id, "start": start})]
            # From the bottom up, so each position read above is still right.
            for msg in reversed(removed):
                conn.execute(_DELETE, {"id": msg.id})
                assert msg.position is not None
                with places_moved(conn, session_id, msg.position + 1, -1):
                    conn.execute(_CLOSE_GAP, {"sid": session_id, "at": msg.position})
            self._refresh_counts(conn, session_id)
            rows = conn.execute(
                _BY_IDS_IN_SESSION, {"sid": session_id, "ids": new_ids}
            ).all() if new_ids else []
        return removed, [message_from_row(r) for r in rows]

    def message_count(self, session_id: int, *, states: Sequence[str] | None = None) -> int:
        with self.db.read() as conn:
            if not states:
                return int(conn.execute(_COUNT, {"sid": session_id}).scalar_one())
            return int(conn.execute(
                _COUNT_IN_STATES, {"sid": session_id, "states": list(states)}
            ).scalar_one())

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
        params: dict[str, Any] = {"sid": session_id, "after": _bound(after_position),
                                  "limit": limit}
        if states:
            params["states"] = list(states)
        if roles:
            params["roles"] = list(roles)
        with self.db.query() as conn:
            rows = conn.execute(_page(bool(states), bool(roles)), params).all()
        return [message_from_row(r) for r in rows]

    def page_before(
        self, session_id: int, *, before_position: int, limit: int = 200
    ) -> list[Message]:
        """Up to ``limit`` messages just before ``before_position``, in order."""
        with self.db.query() as conn:
            rows = conn.execute(
                _PAGE_BEFORE, {"sid": session_id, "before": _bound(before_position), "limit": limit}
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
        params: dict[str, Any] = {"sid": session_id, "state": state, "limit": limit}
        statement = _STATE_NEWEST
        if before_position is not None:
            statement = _STATE_BEFORE
            params["before"] = _bound(before_position)
        with self.db.query() as conn:
            rows = conn.execute(statement, params).all()
        return [message_from_row(r) for r in rows]

    def count_fitting(self, session_id: int, *, state: str, room: int) -> int | None:
        """How many of the session's newest messages in ``state`` fit in ``room`` tokens
        by their cached counts (a message without one counts 0, so this is at least
        what fits); ``None`` when they all do. One walk backwards that stops there."""
        statement = _FITTING_ORDERED if self.dialect.is_postgresql else _FITTING
        with self.db.query() as conn:
            row = conn.execute(
                statement, {"sid": session_id, "state": state, "room": room}
            ).first()
        return None if row is None else int(row[0]) - 1

    def first_in_state(self, session_id: int, state: str) -> Message | None:
        """The earliest message of a session in ``state``, if any."""
        with self.db.read() as conn:
            row = conn.execute(_FIRST_IN_STATE, {"sid": session_id, "state": state}).first()
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
            rows = conn.execute(_SHAPES, {"sid": session_id, "state": state,
                                          "last": _bound(last_position), "limit": count}).all()
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
        ``asked`` those assistant messages made. Found by the database in the orphans
        ``orphan_results`` lists and the calls ``message_calls`` lists (as many rows as
        there are exceptions, whatever the stretch's length), so only the exceptions
        reach Python. ``None`` when a message's calls there are not JSON, for a state
        other than active, or when the database cannot run the query: the caller then
        reads the messages instead.
        """
        if state != MessageState.ACTIVE.value:
            return None  # orphan_results keeps the active state's alone
        span = {"sid": session_id, "state": state, "after": _bound(after_position),
                "last": _bound(last_position)}
        # The calls are listed one per row in message_calls (0007_message_calls) and the
        # orphaned results in orphan_results (0014), both kept by triggers on both
        # backends: no JSON is read, and no tool result is looked at one by one.
        try:
            with self.db.read() as conn:
                if conn.execute(_UNREADABLE_CALLS, span).first() is not None:
                    return None
                orphans = {(int(r[0]), int(r[1])) for r in conn.execute(_LISTED_ORPHANS, span)}
                before = [r[0] for r in conn.execute(_CALLS_BEFORE, span)]
                for chunk in range(0, len(before), 500):
                    orphans.update(
                        (int(r[0]), int(r[1])) for r in conn.execute(
                            _ANSWERED_BEFORE_ONLY, {**span, "calls": before[chunk:chunk + 500]})
                    )
                rows: list[tuple[int, int, str]] = [
                    (mid, position, REASON_ORPHAN_RESULT) for mid, position in orphans
                ]
                if exclude_system:
                    rows += [
                        (int(r[0]), int(r[1]), REASON_EXCLUDED_SYSTEM)
                        for r in conn.execute(_SYSTEM_IN_SPAN, span)
                    ]
                issued: set[str] = set()
                wanted = sorted(set(asked))
                for chunk in range(0, len(wanted), 500):
                    part = wanted[chunk:chunk + 500]
                    issued.update(
                        str(r[0]) for r in conn.execute(_ISSUED, {**span, "asked": part})
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
        span = {"sid": session_id, "after": _bound(after_position),
                "last": _bound(last_position)}
        with self.db.read() as conn:
            # Dense in the whole session (its kept count of messages is one more than
            # its last position, and the first is 0: two index lookups) implies dense in
            # the span; else the span's rows are counted.
            count, first, last = conn.execute(_DENSITY, span).one()
            if not (first == 0 and last is not None and count == last + 1
                    and after_position >= -1 and last_position <= last):
                total = conn.execute(_COUNT_IN_SPAN, span).scalar_one()
                if total != last_position - after_position:
                    return None
            others = [s for s in STATES if s != state]
            # The other states through the (session, state) index: as cheap as there
            # are such messages in the whole session, and nothing when there are none.
            return sorted(
                int(r[0]) for r in conn.execute(_OTHER_STATES_IN_SPAN, {**span, "states": others})
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
                for r in conn.execute(_PLACES, {"sid": session_id, "state": state,
                                                "first": _bound(first_position),
                                                "last": _bound(last_position), "limit": limit})
            ]

    def active_at(
        self, session_id: int, *, state: str, last_position: int, back: int, gaps: bool
    ) -> tuple[int | None, int | None]:
        """``(id, position)`` of the message in ``state`` ``back`` places before the one
        at ``last_position`` (positions are dense, so without ``gaps`` this is one
        lookup by position)."""
        with self.db.read() as conn:
            if not gaps:
                row = conn.execute(
                    _PLACE_AT, {"sid": session_id, "at": _bound(last_position - back)}
                ).first()
            else:
                row = conn.execute(_PLACE_BACK, {
                    "sid": session_id, "state": state, "last": _bound(last_position),
                    "back": back,
                }).first()
        return (None, None) if row is None else (int(row[0]), int(row[1]))

    def call_ids_made(self, session_id: int, state: str) -> set[str]:
        """The tool call ids the session's assistant messages in ``state`` made."""
        found: set[str] = set()
        with self.db.read() as conn:
            rows = conn.execute(_CALLS_MADE, {"sid": session_id, "state": state}).all()
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
        with self.db.query() as conn:
            return [
                (r[0], r[1], r[2], r[3])
                for r in conn.execute(_INDEX, {"sid": session_id})
            ]

    def role_counts(
        self, session_id: int, *, states: Sequence[str] | None = None
    ) -> dict[str, int]:
        """How many messages of each role (every role present, zeros included)."""
        with self.db.read() as conn:
            if states:
                result = conn.execute(
                    _ROLE_COUNTS_IN_STATES, {"sid": session_id, "states": list(states)}
                )
            else:
                result = conn.execute(_ROLE_COUNTS, {"sid": session_id})
            counts: dict[str, int] = {r[0]: r[1] for r in result}
        return {role: int(counts.get(role, 0)) for role in ROLES}

    def token_total(self, session_id: int, *, states: Sequence[str] = ("active",)) -> int:
        """Sum of the messages' token counts: the cached ones, and messages without a
        count (an import leaves them for :meth:`fill_token_counts`) counted on demand
        with the default encoding (not stored)."""
        with self.db.query() as conn:
            row = conn.execute(
                _TOKEN_TOTAL, {"sid": session_id, "states": list(states)}
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
        if session_ids is not None and not session_ids:
            return {}
        with self.db.query() as conn:
            if session_ids is None:
                rows = conn.execute(_TOKEN_TOTALS, {"states": list(states)}).all()
            else:
                rows = conn.execute(
                    _TOKEN_TOTALS_OF, {"states": list(states), "ids": list(session_ids)}
                ).all()
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
        for chunk in _chunks(ids):
            with self.db.query() as conn:
                rows = conn.execute(
                    _UNCOUNTED_OF, {"states": list(states), "ids": list(chunk)}
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
        params: dict[str, Any] = {"after": after_id, "limit": limit}
        if encoding is not None:
            params["encoding"] = encoding
        if session_id is not None:
            params["sid"] = session_id
        with self.db.read() as conn:
            rows = conn.execute(
                _uncounted(encoding is not None, session_id is not None), params
            ).all()
        return [message_from_row(r) for r in rows]

    def missing_token_counts(self) -> tuple[int, int]:
        """How many messages have no cached token count, and the smallest id among them
        (0 when none). Read from an index, without touching the messages' text."""
        with self.db.query() as conn:
            row = conn.execute(_MISSING_COUNTS).one()
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
            rows = conn.execute(_TO_FILL, {"after": after_id, "limit": limit}).all()
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
            conn.execute(_STORE_COUNT_AND_LINE, [
                {"mid": m.id, "tokens": m.token_count, "encoding": encoding, "line": line,
                 "line_tokens": tokens}
                for m, line, tokens in zip(messages, lines, line_tokens, strict=True)
            ])
            # These messages added nothing to their session's total while uncounted.
            added: dict[int, int] = {}
            for m, c in zip(messages, counts, strict=True):
                assert m.session_id is not None
                if m.state == "active":
                    added[m.session_id] = added.get(m.session_id, 0) + int(c)
            if added:
                conn.execute(_ADD_SESSION_TOKENS, [
                    {"sid": sid, "tokens": tokens} for sid, tokens in added.items()
                ])
            self.db.changed(conn, {int(m.session_id or 0) for m in messages})
        last = messages[-1].id
        assert last is not None
        return len(messages), last

    def set_token_counts(self, counts: Iterable[tuple[int, int, str]]) -> int:
        """Store ``(message_id, token_count, encoding)`` triples; session totals follow."""
        rows = list(counts)
        if not rows:
            return 0
        with self.db.write() as conn:
            conn.execute(_STORE_COUNT, [
                {"mid": mid, "tokens": c, "encoding": enc} for mid, c, enc in rows
            ])
            ids = [r[0] for r in rows]
            sessions: set[int] = set()
            for chunk in _chunks(ids):
                sessions.update(r[0] for r in conn.execute(_SESSIONS_OF, {"ids": list(chunk)}))
            for sid in sessions:
                self._refresh_counts(conn, sid, touch=False)
        return len(rows)


# == statements ========================================================================

# Positions are INTEGER columns; a caller's open bound (``2**62`` for "the end") is
# brought into their range, which PostgreSQL's typed parameters require.
_FIRST_POSITION, _LAST_POSITION = -(2**31), 2**31 - 1


def _bound(position: int) -> int:
    return min(max(int(position), _FIRST_POSITION), _LAST_POSITION)


_M = MESSAGES.c
_SID = _M.session_id == bindparam("sid")
_STATE = _M.state == bindparam("state")
_IDS: BindParameter[Any] = bindparam("ids", expanding=True)
_STATES: BindParameter[Any] = bindparam("states", expanding=True)
_LIMIT: BindParameter[int] = bindparam("limit")
# A constant the planners see (a partial index on role = 'tool' is only usable then).
_ASSISTANT: ColumnElement[str] = literal_column("'assistant'")

_SELECT = select(*MESSAGE_FIELDS)
_BY_ID = _SELECT.where(_M.id == bindparam("id"))
_BY_ID_IN_SESSION = _BY_ID.where(_SID)
_BY_IDS_IN_SESSION = _SELECT.where(_SID, _M.id.in_(_IDS)).order_by(_M.position)
_FROM_POSITION = _SELECT.where(_SID, _M.position >= bindparam("start")).order_by(_M.position)
_IDS_FROM_POSITION = (
    select(_M.id).where(_SID, _M.position >= bindparam("start")).order_by(_M.position)
)
_AT_POSITION = _SELECT.where(_SID, _M.position == bindparam("at"))
# Positions move by one across the rest of a session. The (session_id, position) index
# is not unique, so neither backend minds the order the rows are moved in.
_MAKE_ROOM = (
    update(MESSAGES).where(_SID, _M.position >= bindparam("at"))
    .values(position=_M.position + 1)
)
_CLOSE_GAP = (
    update(MESSAGES).where(_SID, _M.position > bindparam("at"))
    .values(position=_M.position - 1)
)
_DELETE = delete(MESSAGES).where(_M.id == bindparam("id"))
_SET_IMPORTANT = (
    update(MESSAGES).where(_M.id == bindparam("mid")).values(important=bindparam("flag"))
)
_SESSIONS_OF = select(_M.session_id).distinct().where(_M.id.in_(_IDS))
_IDS_IN = select(_M.id).where(_M.id.in_(_IDS))
_SET_STATE = (
    update(MESSAGES).where(_M.id.in_(_IDS))
    .values(state=bindparam("new_state"), compaction_id=bindparam("new_compaction"))
)
_COUNT = select(func.count()).select_from(MESSAGES).where(_SID)
_COUNT_IN_STATES = _COUNT.where(_M.state.in_(_STATES))


@cache
def _page(by_state: bool, by_role: bool) -> Select[Any]:
    """The keyset page after ``:after`` (of some states, of some roles)."""
    statement = _SELECT.where(_SID, _M.position > bindparam("after"))
    if by_state:
        statement = statement.where(_M.state.in_(_STATES))
    if by_role:
        statement = statement.where(_M.role.in_(bindparam("roles", expanding=True)))
    return statement.order_by(_M.position).limit(_LIMIT)


_PAGE_BEFORE = (
    _SELECT.where(_SID, _M.position < bindparam("before"))
    .order_by(_M.position.desc()).limit(_LIMIT)
)
_STATE_NEWEST = _SELECT.where(_SID, _STATE).order_by(_M.position.desc()).limit(_LIMIT)
_STATE_BEFORE = (
    _SELECT.where(_SID, _STATE, _M.position < bindparam("before"))
    .order_by(_M.position.desc()).limit(_LIMIT)
)
_NEWEST_FIRST = _M.position.desc()
_RUNNING = (
    select(
        func.row_number().over(order_by=_NEWEST_FIRST).label("n"),
        func.sum(func.coalesce(_M.token_count, 0)).over(order_by=_NEWEST_FIRST).label("used"),
    )
    .where(_SID, _STATE)
    .subquery("running")
)
# The first message, newest first, past which the running total exceeds the room.
# SQLite walks the window in order and stops at the first row out (the subquery's order
# is kept); PostgreSQL is told the order, which it keeps from the window's sort.
_FITTING = (
    select(_RUNNING.c.n).where(_RUNNING.c.used > bindparam("room", type_=BigInteger)).limit(1)
)
_FITTING_ORDERED = _FITTING.order_by(_RUNNING.c.n)
_FIRST_IN_STATE = _SELECT.where(_SID, _STATE).order_by(_M.position).limit(1)
_SHAPES = (
    select(_M.id, _M.position, _M.role, _M.tool_call_id,
           case((_M.role == _ASSISTANT, _M.tool_calls)))
    .where(_SID, _STATE, _M.position <= bindparam("last"))
    .order_by(_M.position.desc()).limit(_LIMIT)
)

# prefix_exceptions: the stretch is (:after, :last] of the session's messages in :state.
_C = MESSAGE_CALLS.c
_UNREADABLE_CALLS = (
    select(literal(1)).select_from(MESSAGE_CALLS)
    .where(_C.session_id == bindparam("sid"), _C.call_id.is_(None),
           _C.state == bindparam("state"), _C.position > bindparam("after"),
           _C.position <= bindparam("last"))
    .limit(1)
)
# The orphans are listed by triggers (0014_orphan_results): those of the stretch are
# read from that list, as many rows as there are orphans. A result whose only earlier
# calls lie before the stretch is an orphan of the stretch too: those calls are read
# first (none when the stretch starts the session's history in that state, as
# preflight's does), then the results they answer, by call id.
_O = ORPHAN_RESULTS.c
_LISTED_ORPHANS = select(_O.message_id, _O.position).where(
    _O.session_id == bindparam("sid"), _O.state == bindparam("state"),
    _O.position > bindparam("after"), _O.position <= bindparam("last"),
)
_BEFORE = indexed_alias(MESSAGE_CALLS, "b", "ix_message_calls_place")
_CALLS_BEFORE = (
    select(_BEFORE.c.call_id).distinct()
    .where(_BEFORE.c.session_id == bindparam("sid"), _BEFORE.c.state == bindparam("state"),
           _BEFORE.c.position <= bindparam("after"), _BEFORE.c.call_id.is_not(None))
)
_RESULT = indexed_alias(MESSAGES, "t", "ix_messages_results_by_call")
_CALL = indexed_alias(MESSAGE_CALLS, "c", "ix_message_calls_lookup")
_RESULT_CALL_ID = func.coalesce(_RESULT.c.tool_call_id, literal_column("''"))
_ANSWERED_BEFORE_ONLY = select(_RESULT.c.id, _RESULT.c.position).where(
    _RESULT.c.session_id == bindparam("sid"),
    _RESULT_CALL_ID.in_(bindparam("calls", expanding=True)),
    _RESULT.c.state == bindparam("state"),
    _RESULT.c.role == literal_column("'tool'"),
    _RESULT.c.position > bindparam("after"),
    _RESULT.c.position <= bindparam("last"),
    ~select(literal_column("1")).where(
        _CALL.c.session_id == _RESULT.c.session_id,
        _CALL.c.call_id == _RESULT_CALL_ID,
        _CALL.c.state == _RESULT.c.state,
        _CALL.c.position > bindparam("after"),
        _CALL.c.position < _RESULT.c.position,
    ).exists(),
)
_SYSTEM_IN_SPAN = select(_M.id, _M.position).where(
    _SID, _STATE, _M.role == literal_column("'system'"),
    unindexed(_M.position) > bindparam("after"), unindexed(_M.position) <= bindparam("last"),
)
_ISSUED = (
    select(_C.call_id).distinct()
    .where(_C.session_id == bindparam("sid"), _C.call_id.in_(bindparam("asked", expanding=True)),
           _C.state == bindparam("state"), _C.position > bindparam("after"),
           _C.position <= bindparam("last"))
)
_COUNT_IN_SPAN = _COUNT.where(
    _M.position > bindparam("after"), _M.position <= bindparam("last")
)
_DENSITY = select(
    select(SESSIONS.c.message_count).where(SESSIONS.c.id == bindparam("sid"))
    .scalar_subquery(),
    select(func.min(_M.position)).where(_SID).scalar_subquery(),
    select(func.max(_M.position)).where(_SID).scalar_subquery(),
)
_OTHER_STATES_IN_SPAN = select(_M.position).where(
    _SID, _M.state.in_(_STATES),
    unindexed(_M.position) > bindparam("after"), unindexed(_M.position) <= bindparam("last"),
)
_PLACES = (
    select(_M.id, _M.position)
    .where(_SID, _STATE, _M.position.between(bindparam("first"), bindparam("last")))
    .order_by(_M.position.desc()).limit(_LIMIT)
)
_PLACE_AT = select(_M.id, _M.position).where(_SID, _M.position == bindparam("at"))
_PLACE_BACK = (
    select(_M.id, _M.position).where(_SID, _STATE, _M.position <= bindparam("last"))
    .order_by(_M.position.desc()).limit(1).offset(bindparam("back"))
)
_CALLS_MADE = select(_M.tool_calls).where(
    _SID, _STATE, _M.role == _ASSISTANT, _M.tool_calls.is_not(None)
)
_INDEX = select(_M.id, _M.position, _M.role, _M.state).where(_SID).order_by(_M.position)
_ROLE_COUNTS = select(_M.role, func.count()).where(_SID).group_by(_M.role)
_ROLE_COUNTS_IN_STATES = (
    select(_M.role, func.count()).where(_SID, _M.state.in_(_STATES)).group_by(_M.role)
)
_TOTAL_COLUMNS = (
    func.coalesce(func.sum(_M.token_count), 0),
    func.count() - func.count(_M.token_count),
)
_TOKEN_TOTAL = select(*_TOTAL_COLUMNS).where(_SID, _M.state.in_(_STATES))
_TOKEN_TOTALS = (
    select(_M.session_id, *_TOTAL_COLUMNS).where(_M.state.in_(_STATES)).group_by(_M.session_id)
)
_TOKEN_TOTALS_OF = _TOKEN_TOTALS.where(_M.session_id.in_(_IDS))
_UNCOUNTED_OF = _SELECT.where(
    _M.token_count.is_(None), _M.state.in_(_STATES), _M.session_id.in_(_IDS)
)


@cache
def _uncounted(by_encoding: bool, by_session: bool) -> Select[Any]:
    """Messages after ``:after`` without a count (or, by encoding, of another one)."""
    missing: ColumnElement[bool] = _M.token_count.is_(None)
    if by_encoding:
        missing = missing | _M.token_encoding.is_distinct_from(bindparam("encoding"))
    statement = _SELECT.where(_M.id > bindparam("after"), missing)
    if by_session:
        statement = statement.where(_SID)
    return statement.order_by(_M.id).limit(_LIMIT)


_MISSING_COUNTS = select(func.count(), func.min(_M.id)).where(_M.token_count.is_(None))
_TO_FILL = (
    _SELECT.where(_M.id > bindparam("after"), _M.token_count.is_(None))
    .order_by(_M.id).limit(_LIMIT)
)
_STORE_COUNT = (
    update(MESSAGES).where(_M.id == bindparam("mid"))
    .values(token_count=bindparam("tokens"), token_encoding=bindparam("encoding"))
)
_STORE_COUNT_AND_LINE = _STORE_COUNT.values(
    summary_line=bindparam("line"), summary_line_tokens=bindparam("line_tokens")
)
_ADD_SESSION_TOKENS = (
    update(SESSIONS).where(SESSIONS.c.id == bindparam("sid"))
    .values(token_count=SESSIONS.c.token_count + bindparam("tokens"))
)
