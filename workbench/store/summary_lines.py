"""Keeping the summary lines a database written before migration 0003 lacks.

Since migration ``0003_summary_lines`` every message stored by a chat, an import or the
counting pass keeps the body of its extractive summary line and that body's token count
(:func:`workbench.core.summarizers.line_cache`), so that previewing the compaction of a
long session reads its lines instead of writing and counting them. Messages that already
had their token counts when the migration ran got no line: the counting pass only visits
messages without a count. :func:`keep_summary_lines` writes the missing lines of one
session, once, so that its next previews are as fast as in a database written since.

The lines are written from the rows as they are read inside the same write transaction,
as the counting pass does: no edit can slip between reading a text and storing its line.
"""

from __future__ import annotations

from sqlalchemy import bindparam, select, update

from workbench.core.conversation import Message
from workbench.core.summarizers import line_cache
from workbench.store.db import Database
from workbench.store.schema import MESSAGES
from workbench.store.types import json_value

__all__ = ["keep_summary_lines"]

_M = MESSAGES.c
_MISSING = (
    select(_M.id, _M.role, _M.content, _M.name, _M.tool_calls, _M.token_count,
           _M.token_encoding)
    .where(_M.session_id == bindparam("sid"), _M.summary_line.is_(None),
           _M.id > bindparam("after"))
    .order_by(_M.id).limit(bindparam("limit"))
)
_KEEP = (
    update(MESSAGES).where(_M.id == bindparam("mid"))
    .values(summary_line=bindparam("line"), summary_line_tokens=bindparam("tokens"))
)


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
        with db.write() as conn:
            rows = conn.execute(
                _MISSING, {"sid": session_id, "after": after, "limit": batch}
            ).all()
            if not rows:
                return written
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
        written += len(rows)
        after = rows[-1][0]
        if len(rows) < batch:
            return written
