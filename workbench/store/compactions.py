"""Compactions in the store: apply a plan and undo it, each in one transaction.

:func:`apply_plan` folds the plan's messages (state ``folded``, the new compaction's id),
writes the context's new summary, facts and tasks, and records the compaction with a
snapshot of the context row as it was (``before_context``) and what undo needs
(``details``). It first checks that the session still is what the plan was made from:
every message to fold is still active in this session, and the summary, facts and tasks
are unchanged; otherwise nothing is written.

:func:`undo_compaction` puts the folded messages back to ``active`` (with the compaction
id they had before, normally none) and the summary, facts and tasks columns back to
their exact stored text. Only the newest compaction of a session that is not undone can
be undone (a later one was planned on top of it); repeated undos walk back through
them, and undoing one that is already undone is refused.

Message ids travel to SQLite as one JSON array read with ``json_each``, so folding ten
thousand messages is one statement rather than hundreds of ``IN (...)`` chunks.

:func:`load_table` reads a session's active messages for planning as a
:class:`~workbench.core.message_table.MessageTable`: columns for every message, with the
summary line each keeps, and whole messages only for those planning needs whole.
:func:`load_active` reads them all as messages.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import Connection

from workbench.core.compaction import CompactionPlan, CompactionRecord
from workbench.core.conversation import Message, Task, utcnow
from workbench.core.message_table import MessageTable
from workbench.errors import CompactionError, NotFoundError
from workbench.store.base import StoreBase
from workbench.store.db import Database
from workbench.store.types import json_text, json_value, text_to_time, time_to_text

__all__ = [
    "apply_plan",
    "get_compaction",
    "list_compactions",
    "load_active",
    "load_table",
    "undo_compaction",
]

_CONTEXT_COLUMNS = (
    "facts",
    "summary",
    "tasks",
    "tool_stats",
    "token_usage",
    "system_state",
    "environment",
    "updated_at",
)
_RECORD_SELECT = (
    "SELECT id, session_id, created_at, policy, summarizer, tokens_before, tokens_after,"
    " folded_count, summary, undone_at, details FROM compactions"
)
_IDS = "(SELECT value FROM json_each(?))"


def _record(row: Any) -> CompactionRecord:
    return CompactionRecord(
        id=int(row[0]),
        session_id=int(row[1]),
        created_at=text_to_time(row[2]),
        policy=row[3],
        summarizer=row[4],
        tokens_before=int(row[5]),
        tokens_after=int(row[6]),
        folded_count=int(row[7]),
        summary=row[8],
        undone_at=text_to_time(row[9]) if row[9] else None,
        details=json_value(row[10]) or {},
    )


def _require_session(conn: Connection, session_id: int) -> None:
    if conn.exec_driver_sql("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).first() is None:
        raise NotFoundError(f"There is no session with id {session_id}.")


_LEAN_COLUMNS = (
    "id, position, role, content, name, tool_calls, tool_call_id,"
    " token_count, token_encoding, important, metadata, compaction_id"
)


def _lean_messages(rows: list[Any], session_id: int) -> list[Message]:
    loads = json.loads
    # Positional arguments in Message's field order: the cheapest way to build 10,000.
    return [
        Message(
            r[2], r[3], r[0], session_id, r[1], r[4],
            loads(r[5]) if r[5] is not None else None,
            r[6], None, None, r[7], r[8], "active", bool(r[9]),
            loads(r[10]) if r[10] is not None else {},
            r[11],
        )
        for r in rows
    ]


def load_active(db: Database, session_id: int) -> list[Message]:
    """The session's active messages in order, with what planning needs.

    Leaner than the repository's full rows: ``parts`` and ``created_at`` are not read,
    and the rows come straight from the driver's cursor, which matters in a session of
    many thousand messages.
    """
    with db.read() as conn:
        _require_session(conn, session_id)
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            rows = cursor.execute(
                f"SELECT {_LEAN_COLUMNS} FROM messages"
                " WHERE session_id = ? AND state = 'active' ORDER BY position",
                (session_id,),
            ).fetchall()
        finally:
            cursor.close()
    return _lean_messages(rows, session_id)


# Per row: the columns of a MessageTable (the kept summary line, and its count when it is
# in the wanted encoding, last), then what kind of row it is: 1 for a whole row (read
# again in full), NULL for a plain row with nothing else, or the plain row's details as
# JSON text (see workbench.core.message_table).
_TABLE_SELECT = """
SELECT id, position, role, content,
       CASE WHEN token_encoding = ?2 THEN token_count END,
       summary_line,
       CASE WHEN token_encoding = ?2 THEN summary_line_tokens END,
       CASE
         WHEN coalesce(tool_calls, metadata, name, tool_call_id, compaction_id) IS NULL
              AND important = 0 AND role IN ('user', 'assistant') THEN NULL
         WHEN role NOT IN ('user', 'assistant') OR tool_calls IS NOT NULL OR important <> 0
              OR instr(metadata, '"important"') OR instr(metadata, '"pinned"') THEN 1
         ELSE json_array(name, tool_call_id, metadata, compaction_id)
       END
FROM messages WHERE session_id = ?1 AND state = 'active' ORDER BY position
"""


def load_table(db: Database, session_id: int, encoding: str | None) -> MessageTable:
    """The session's active messages in order as a :class:`MessageTable`, its costs in
    ``encoding`` (what :func:`load_active` reads, for a fraction of its time: only the
    messages that are not plain are built whole).

    A metadata text that merely mentions ``"important"`` or ``"pinned"`` makes its row
    whole too, which is safe: whole rows are planned by their messages. The table
    carries each message's kept summary line, and its token count where that is in
    ``encoding``.
    """
    with db.read() as conn:
        _require_session(conn, session_id)
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            rows = cursor.execute(_TABLE_SELECT, (session_id, encoding)).fetchall()
            columns: list[tuple[Any, ...]] = list(zip(*rows, strict=True)) or [()] * 8
            ids, positions, roles, texts, costs, lines, line_costs, kinds = columns
            marked = [i for i, kind in enumerate(kinds) if kind is not None]
            wanted = [i for i in marked if kinds[i] == 1]
            # The rest of the whole rows: _LEAN_COLUMNS but those already read.
            rest = (
                cursor.execute(
                    "SELECT id, name, tool_calls, tool_call_id, token_count, token_encoding,"
                    f" important, metadata, compaction_id FROM messages WHERE id IN {_IDS}",
                    (json.dumps([ids[i] for i in wanted]),),
                ).fetchall()
                if wanted
                else []
            )
        finally:
            cursor.close()
    by_id = {r[0]: r[1:] for r in rest}
    lean_rows = [(ids[i], positions[i], roles[i], texts[i], *by_id[ids[i]]) for i in wanted]
    whole = dict(zip(wanted, _lean_messages(lean_rows, session_id), strict=True))
    return MessageTable(
        ids=ids,
        positions=positions,
        roles=roles,
        texts=texts,
        costs=costs,
        encoding=encoding,
        whole=whole,
        details={i: kinds[i] for i in marked if kinds[i] != 1},
        session_id=session_id,
        lines=lines,
        line_costs=line_costs,
    )


def _context_row(conn: Connection, session_id: int) -> dict[str, Any] | None:
    row = (
        conn.exec_driver_sql(
            f"SELECT {', '.join(_CONTEXT_COLUMNS)} FROM session_context WHERE session_id = ?",
            (session_id,),
        )
        .mappings()
        .first()
    )
    return dict(row) if row is not None else None


def _tasks_json(tasks: Sequence[Task]) -> list[dict[str, Any]]:
    return [t.to_json() for t in tasks]


def _check_unchanged(plan: CompactionPlan, row: dict[str, Any] | None) -> None:
    facts = [str(f) for f in (json_value(row["facts"]) if row else None) or []]
    summary = (row["summary"] if row else "") or ""
    raw_tasks = (json_value(row["tasks"]) if row else None) or []
    tasks = [Task.from_json(t).to_json() for t in raw_tasks]
    changed = []
    if summary != plan.previous_summary:
        changed.append("its summary")
    if facts != list(plan.facts_before):
        changed.append("its facts")
    if tasks != _tasks_json(plan.tasks_before):
        changed.append("its tasks")
    if changed:
        raise CompactionError(
            f"Session {plan.session_id} changed after the preview ({' and '.join(changed)}); "
            "nothing was compacted. Preview again."
        )


def apply_plan(db: Database, plan: CompactionPlan, *, tokens_after: int | None = None) -> int:
    """Apply ``plan`` in one transaction; returns the new compaction's id.

    Raises :class:`CompactionError` (and writes nothing) when the plan changes nothing
    or when the session changed since the plan was made.
    """
    if plan.session_id is None:
        raise CompactionError("The plan is not for a stored session.")
    if not plan.changed:
        raise CompactionError(plan.reason or "Nothing to compact.")
    session_id = plan.session_id
    ids_json = json.dumps(plan.folded_ids)
    now = time_to_text(utcnow())
    with db.write() as conn:
        _require_session(conn, session_id)
        before = _context_row(conn, session_id)
        _check_unchanged(plan, before)
        prior = {
            str(r[0]): r[1]
            for r in conn.exec_driver_sql(
                f"SELECT id, compaction_id FROM messages WHERE id IN {_IDS}"
                " AND compaction_id IS NOT NULL",
                (ids_json,),
            )
        }
        details = plan.details()
        if prior:
            details["prior_compaction_ids"] = prior
        cur = conn.exec_driver_sql(
            "INSERT INTO compactions (session_id, created_at, policy, summarizer, tokens_before,"
            " tokens_after, folded_count, summary, before_context, details)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                session_id,
                time_to_text(plan.created_at),
                plan.policy,
                plan.summarizer,
                plan.tokens_before,
                plan.tokens_after if tokens_after is None else tokens_after,
                plan.folded_count,
                plan.summary,
                json_text({"exists": before is not None, "row": before}),
                json_text(details),
            ),
        )
        compaction_id = int(cur.lastrowid)
        folded = conn.exec_driver_sql(
            # By rowid: the (session, state) index would be searched while it is changed.
            "UPDATE messages SET state = 'folded', compaction_id = ?"
            f" WHERE id IN {_IDS} AND +session_id = ? AND +state = 'active'",
            (compaction_id, ids_json, session_id),
        ).rowcount
        if folded != plan.folded_count:
            # Rolled back by the transaction: a message was deleted, moved or already
            # out of view since the preview.
            raise CompactionError(
                f"Session {session_id} changed after the preview ({plan.folded_count - folded}"
                " of the messages to fold are no longer active in it); nothing was "
                "compacted. Preview again."
            )
        _write_context(conn, session_id, json_text(list(plan.facts_after)), plan.new_summary,
                       json_text(_tasks_json(plan.tasks_after)), now)
        StoreBase(db)._refresh_counts(conn, session_id)
    return compaction_id


def _only_compaction_wrote(conn: Connection, session_id: int) -> bool:
    row = conn.exec_driver_sql(
        "SELECT tool_stats, token_usage, system_state, environment FROM session_context"
        " WHERE session_id = ?",
        (session_id,),
    ).first()
    return row is not None and all(value is None for value in row)


def _latest_active(conn: Connection, session_id: int) -> Any:
    return conn.exec_driver_sql(
        _RECORD_SELECT + " WHERE session_id = ? AND undone_at IS NULL ORDER BY id DESC LIMIT 1",
        (session_id,),
    ).first()


def undo_compaction(
    db: Database, session_id: int, compaction_id: int | None = None
) -> CompactionRecord:
    """Undo a compaction of a session in one transaction; returns its record, now undone.

    Without ``compaction_id`` the session's newest compaction that is still applied is
    undone, so repeated undos walk back through them. Raises :class:`CompactionError`
    when the session has none left to undo, when the one named is already undone, or
    when a newer compaction is still applied on top of it.
    """
    now = utcnow()
    with db.write() as conn:
        _require_session(conn, session_id)
        if compaction_id is None:
            row = _latest_active(conn, session_id)
            if row is None:
                last = conn.exec_driver_sql(
                    _RECORD_SELECT + " WHERE session_id = ? ORDER BY id DESC LIMIT 1",
                    (session_id,),
                ).first()
                if last is None:
                    raise CompactionError(f"Session {session_id} has no compaction to undo.")
                done = _record(last)
                raise CompactionError(
                    f"Every compaction of session {session_id} is already undone (the last, "
                    f"{done.id}, at {time_to_text(done.undone_at)}); nothing changed."  # type: ignore[arg-type]
                )
        else:
            row = conn.exec_driver_sql(
                _RECORD_SELECT + " WHERE id = ? AND session_id = ?", (compaction_id, session_id)
            ).first()
            if row is None:
                raise CompactionError(
                    f"Session {session_id} has no compaction with id {compaction_id}."
                )
        record = _record(row)
        if record.undone:
            raise CompactionError(
                f"Compaction {record.id} of session {session_id} was already undone "
                f"(at {time_to_text(record.undone_at)}); nothing changed."  # type: ignore[arg-type]
            )
        latest = _latest_active(conn, session_id)
        if latest is not None and int(latest[0]) != record.id:
            raise CompactionError(
                f"Compaction {record.id} cannot be undone while the newer compaction "
                f"{latest[0]} is applied; undo that one first. Nothing changed."
            )
        snapshot = json_value(
            conn.exec_driver_sql(
                "SELECT before_context FROM compactions WHERE id = ?", (record.id,)
            ).scalar_one()
        ) or {}
        conn.exec_driver_sql(
            "UPDATE messages SET state = 'active', compaction_id = NULL"
            " WHERE session_id = ? AND compaction_id = ? AND state = 'folded'",
            (session_id, record.id),
        )
        prior = record.details.get("prior_compaction_ids") or {}
        if prior:
            conn.exec_driver_sql(
                "UPDATE messages SET compaction_id = ? WHERE id = ? AND session_id = ?"
                " AND state = 'active' AND compaction_id IS NULL",
                [(cid, int(mid), session_id) for mid, cid in prior.items()],
            )
        before = snapshot.get("row") if snapshot.get("exists") else None
        if before is None and _only_compaction_wrote(conn, session_id):
            # The compaction created the row; nothing else has written to it since.
            conn.exec_driver_sql(
                "DELETE FROM session_context WHERE session_id = ?", (session_id,)
            )
        else:
            _write_context(conn, session_id, before["facts"] if before else None,
                           (before["summary"] if before else "") or "",
                           before["tasks"] if before else None, time_to_text(now))
        conn.exec_driver_sql(
            "UPDATE compactions SET undone_at = ? WHERE id = ?", (time_to_text(now), record.id)
        )
        StoreBase(db)._refresh_counts(conn, session_id)
    record.undone_at = now
    return record


def get_compaction(db: Database, compaction_id: int) -> CompactionRecord:
    """One compaction record, or :class:`NotFoundError`."""
    with db.query() as conn:
        row = conn.exec_driver_sql(_RECORD_SELECT + " WHERE id = ?", (compaction_id,)).first()
    if row is None:
        raise NotFoundError(f"There is no compaction with id {compaction_id}.")
    return _record(row)


def list_compactions(db: Database, session_id: int) -> list[CompactionRecord]:
    """Every compaction of a session, oldest first, undone ones included."""
    with db.query() as conn:
        rows = conn.exec_driver_sql(
            _RECORD_SELECT + " WHERE session_id = ? ORDER BY id", (session_id,)
        ).all()
    return [_record(r) for r in rows]


def _write_context(conn: Any, session_id: int, facts: str | None, summary: str,
                   tasks: str | None, updated_at: str) -> None:
    """Store the session's facts, summary and tasks (JSON text), adding its row if needed."""
    conn.exec_driver_sql(
        "INSERT INTO session_context (session_id, facts, summary, tasks, updated_at)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET"
        " facts = excluded.facts, summary = excluded.summary, tasks = excluded.tasks,"
        " updated_at = excluded.updated_at",
        (session_id, facts, summary, tasks, updated_at),
    )
