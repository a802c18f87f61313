"""Keeping the summary lines a database written before migration 0003 lacks.

Since migration ``0003_summary_lines`` every message stored by a chat, an import or the
counting pass keeps the body of its extractive summary line and that body's token count
(:func:`workbench.core.summarizers.line_cache`), so that previewing the compaction of a
long session reads its lines instead of writing and counting them. Messages that already
had their token counts when the migration ran got no line: the counting pass only visits
messages without a count. :func:`keep_summary_lines` writes the missing lines of one
session, once, so that its next previews are as fast as in a database written since;
:func:`unkept_lines` and :func:`keep_lines_of` let a background upkeep
(:mod:`workbench.engine.line_upkeep`) do the same in small steps, and
:data:`LINES_KEPT_SETTING` records that one such pass found nothing left to keep.

The lines are written from the rows as they are read inside the same write transaction,
as the counting pass does: no edit can slip between reading a text and storing its line
(on PostgreSQL the rows are read ``FOR UPDATE``, so an edit committed meanwhile by
another desktop waits for the line, which its own trigger then forgets, or comes first
and is read).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from typing import Any

from sqlalchemy import Integer, Select, bindparam, cast, select, update
from sqlalchemy.engine import Connection

from workbench.core.conversation import Message
from workbench.core.summarizers import line_cache
from workbench.store.db import Database
from workbench.store.dialect import Dialect
from workbench.store.schema import MESSAGES, SESSIONS, SETTINGS
from workbench.store.types import json_text, json_value

__all__ = [
    "LINES_KEPT_SETTING",
    "keep_lines_of",
    "keep_summary_lines",
    "record_lines_kept",
    "sessions_by_change",
    "unkept_lines",
]

#: The setting recorded (true) when a pass over every session found no message without
#: its summary line; a migration that clears the lines must delete it.
LINES_KEPT_SETTING = "summary_lines_kept"

_M = MESSAGES.c
_LINE_SOURCE = (_M.id, _M.role, _M.content, _M.name, _M.tool_calls, _M.token_count,
                _M.token_encoding)
_MISSING = (
    select(*_LINE_SOURCE)
    .where(_M.session_id == bindparam("sid"), _M.summary_line.is_(None),
           _M.id > bindparam("after"))
    .order_by(_M.id).limit(bindparam("limit"))
    .with_for_update()
)
_KEEP = (
    update(MESSAGES).where(_M.id == bindparam("mid"))
    .values(summary_line=bindparam("line"), summary_line_tokens=bindparam("tokens"))
)
_SESSIONS_BY_CHANGE = select(SESSIONS.c.id).order_by(SESSIONS.c.updated_at.desc(),
                                                     SESSIONS.c.id.desc())
# Along the (session, position) index: a session whose lines are all kept is read once.
_UNKEPT = (
    select(_M.id, _M.position, _M.token_encoding)
    .where(_M.session_id == bindparam("sid"), _M.position > bindparam("after"),
           _M.summary_line.is_(None))
    .order_by(_M.position).limit(bindparam("limit"))
)


@cache
def _missing_by_id(dialect: Dialect) -> Select[Any]:
    items = dialect.json_array_items(bindparam("ids"))
    ids = select(cast(items.c.value, Integer)).scalar_subquery()
    return (select(*_LINE_SOURCE).where(_M.id.in_(ids), _M.summary_line.is_(None))
            .with_for_update())


def _write_lines(conn: Connection, rows: Sequence[Any]) -> None:
    """Write the line (and count) of each row of ``_LINE_SOURCE`` columns."""
    messages = [
        Message(
            role=r[1],
            content=r[2] or "",
            name=r[3],
            tool_calls=json_value(r[4]),
            token_count=r[5],
            token_encoding=r[6],
        )
        for r in rows
    ]
    lines, tokens = line_cache(messages)
    conn.execute(_KEEP, [
        {"mid": r[0], "line": line, "tokens": count}
        for r, line, count in zip(rows, lines, tokens, strict=True)
    ])


def keep_summary_lines(db: Database, session_id: int, *, batch: int = 10_000) -> int:
    """Write the kept summary line (and its count, where the message's count is in a
    known encoding) of every message of ``session_id`` that has none; returns how many
    were written. Each batch of ``batch`` messages is one write transaction.

    A message without a token count gets its line now and its count with the counting
    pass (which writes both again). Unknown sessions write nothing.
    """
    written = 0
    after = 0
    while True:
        with db.write(shown=False) as conn:  # no view shows them: see keep_lines_of
            rows = conn.execute(
                _MISSING, {"sid": session_id, "after": after, "limit": batch}
            ).all()
            if not rows:
                return written
            _write_lines(conn, rows)
        written += len(rows)
        after = rows[-1][0]
        if len(rows) < batch:
            return written


def record_lines_kept(db: Database) -> None:
    """Record :data:`LINES_KEPT_SETTING` (not announced either, see keep_lines_of)."""
    insert = db.dialect.insert(SETTINGS).values(key=LINES_KEPT_SETTING,
                                                value=json_text(True))
    with db.write(shown=False) as conn:
        conn.execute(insert.on_conflict_do_update(
            index_elements=[SETTINGS.c.key], set_={"value": insert.excluded.value}))


def sessions_by_change(db: Database) -> list[int]:
    """Every session's id (archived ones too), the most recently changed first."""
    with db.query() as conn:
        return [int(r[0]) for r in conn.execute(_SESSIONS_BY_CHANGE)]


def unkept_lines(db: Database, session_id: int, *, after: int = -1,
                 limit: int = 500) -> list[tuple[int, int, str | None]]:
    """``(id, position, token encoding)`` of up to ``limit`` messages of ``session_id``
    after position ``after`` that keep no summary line, in order (a plain read: nothing
    is locked)."""
    with db.query() as conn:
        return [(int(r[0]), int(r[1]), r[2]) for r in conn.execute(
            _UNKEPT, {"sid": session_id, "after": after, "limit": limit})]


def keep_lines_of(db: Database, ids: Sequence[int]) -> int:
    """Keep the summary lines of the messages ``ids`` that still have none, in one short
    write transaction (the rows read inside it); returns how many were written. No view
    shows the lines: the write is not announced (``Database.write(shown=False)``), so a
    window never takes it for its own change and overlooks another process's."""
    if not ids:
        return 0
    with db.write(shown=False) as conn:
        rows = conn.execute(_missing_by_id(db.dialect), {"ids": json.dumps(list(ids))}).all()
        if rows:
            _write_lines(conn, rows)
    return len(rows)
