"""Pages of a session's messages for request assembly, read for what they cost.

Request assembly over a stored session (``workbench.engine.stored_history``) reads the
newest messages that fit a request, thousands of them in a long session: what
:meth:`Repository.page_state_before <workbench.store.repository.Repository.page_state_before>`
returns, built here from the driver's own rows with the messages' fields in order, which
takes about half the time of building them by name through SQLAlchemy's rows. The
statements are SQLAlchemy Core, compiled once per dialect (SQLite or a team store's
PostgreSQL) and run on the driver's cursor.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, func, select

from workbench.core.conversation import Message
from workbench.store.db import Database
from workbench.store.driver_rows import driver_cursor, driver_rows
from workbench.store.rows import MESSAGE_FIELDS, TIME_MISSING
from workbench.store.schema import MESSAGES
from workbench.store.types import json_value, text_to_time

__all__ = ["count_fitting", "page_after", "page_before", "preview_rows"]

_M = MESSAGES.c
_IN_STATE = (_M.session_id == bindparam("sid"), _M.state == bindparam("state"))
_NEWEST = (
    select(*MESSAGE_FIELDS).where(*_IN_STATE).order_by(_M.position.desc())
    .limit(bindparam("limit"))
)
_BEFORE = (
    select(*MESSAGE_FIELDS).where(*_IN_STATE, _M.position < bindparam("before"))
    .order_by(_M.position.desc()).limit(bindparam("limit"))
)
_AFTER = (
    select(*MESSAGE_FIELDS).where(*_IN_STATE, _M.position > bindparam("after"))
    .order_by(_M.position).limit(bindparam("limit"))
)
_COSTS_NEWEST_FIRST = (
    select(func.coalesce(_M.token_count, 0)).where(*_IN_STATE).order_by(_M.position.desc())
)
_PREVIEWS = (
    select(_M.position, _M.role, _M.content, _M.tool_calls)
    .where(_M.session_id == bindparam("sid"), _M.position > bindparam("after"))
    .order_by(_M.position).limit(bindparam("limit"))
)
# A team store's driver reads a whole result at once: there the costs are read in pages
# newest first, each a LIMIT after the last position read (the window query summing over
# the whole session took 60-90 ms at 100,000 messages, growing with the session).
_COSTS_BEFORE = (
    select(_M.position, func.coalesce(_M.token_count, 0))
    .where(*_IN_STATE, _M.position < bindparam("before"))
    .order_by(_M.position.desc()).limit(bindparam("limit"))
)
_COSTS_PAGE = (1024, 1 << 15)  # the first page, the largest
_NO_POSITION = (1 << 31) - 1  # after every position (an INTEGER column)


def page_before(
    db: Database,
    session_id: int,
    *,
    state: str,
    before_position: int | None = None,
    limit: int = 200,
) -> list[Message]:
    """Up to ``limit`` messages in ``state`` just before ``before_position`` (from the
    newest when ``None``), newest first: the same messages as
    ``Repository.page_state_before``."""
    params: dict[str, Any] = {"sid": session_id, "state": state, "limit": limit}
    statement = _NEWEST
    if before_position is not None:
        statement = _BEFORE
        params["before"] = before_position
    with db.read() as conn:
        rows = driver_rows(conn, statement, params)
    return [_message(r) for r in rows]


def page_after(
    db: Database, session_id: int, *, state: str, after_position: int, limit: int = 200
) -> list[Message]:
    """Up to ``limit`` messages in ``state`` after ``after_position``, oldest first."""
    with db.read() as conn:
        rows = driver_rows(conn, _AFTER, {"sid": session_id, "state": state,
                                    "after": after_position, "limit": limit})
    return [_message(r) for r in rows]


def _message(row: Any) -> Message:
    """``rows.message_from_row``, with the fields given in order."""
    meta_text = row[14]
    meta = (json_value(meta_text) or {}) if meta_text is not None else {}
    if TIME_MISSING in meta:
        meta = {k: v for k, v in meta.items() if k != TIME_MISSING}
        created = None
    else:
        created = text_to_time(row[9])
    parts, calls = row[5], row[7]
    return Message(
        row[3],  # role
        row[4],  # content
        row[0],  # id
        row[1],  # session_id
        row[2],  # position
        row[6],  # name
        json_value(calls) if calls is not None else None,
        row[8],  # tool_call_id
        json_value(parts) if parts is not None else None,
        created,
        row[10],  # token_count
        row[11],  # token_encoding
        row[12],  # state
        bool(row[13]),  # important
        meta,
        row[15],  # compaction_id
    )


def preview_rows(
    db: Database, session_id: int, *, after_position: int = -1, limit: int = 200
) -> list[tuple[int, str, str, list[dict[str, Any]] | None]]:
    """``(position, role, content, tool calls)`` of up to ``limit`` messages after
    ``after_position`` in order, of any state: what ``Repository.page_messages`` reads
    for a list of messages' first words, without the rest."""
    with db.read() as conn:
        rows = driver_rows(conn, _PREVIEWS, {"sid": session_id, "after": after_position,
                                       "limit": limit})
    return [(r[0], r[1], r[2] or "", json_value(r[3]) if r[3] is not None else None)
            for r in rows]


def count_fitting(db: Database, session_id: int, *, state: str, room: int) -> int | None:
    """How many of the session's newest messages in ``state`` fit in ``room`` tokens by
    their cached counts (a message without one counts 0, so this is at least what
    fits); ``None`` when they all do: ``Repository.count_fitting``.

    The costs are read newest first and the walk stops where the room runs out (a window
    query over the whole session took 13 ms on SQLite and 60-90 ms on PostgreSQL at
    100,000 messages where about 6,000 fit): on SQLite from one cursor, on a team store
    in pages after the last position read.
    """
    params = {"sid": session_id, "state": state}
    used = 0
    fitting = 0
    if db.dialect.is_postgresql:
        before, size = _NO_POSITION, _COSTS_PAGE[0]
        with db.read() as conn:
            while True:
                rows = driver_rows(conn, _COSTS_BEFORE,
                                   {**params, "before": before, "limit": size})
                for _, tokens in rows:
                    used += tokens
                    if used > room:
                        return fitting
                    fitting += 1
                if len(rows) < size:
                    return None
                before, size = rows[-1][0], min(size * 4, _COSTS_PAGE[1])
    with db.read() as conn:
        cursor = driver_cursor(conn, _COSTS_NEWEST_FIRST, params)
        try:
            size = 256
            while True:
                rows = cursor.fetchmany(size)
                if not rows:
                    return None
                for (tokens,) in rows:
                    used += tokens
                    if used > room:
                        return fitting
                    fitting += 1
                size = min(size * 2, 8192)
        finally:
            cursor.close()
