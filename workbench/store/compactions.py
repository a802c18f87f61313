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

Message ids travel to the database as one JSON array spread into rows by the dialect
(``json_each`` on SQLite, ``json_array_elements_text`` on PostgreSQL), so folding ten
thousand messages is one statement rather than hundreds of ``IN (...)`` chunks.

The statements are SQLAlchemy Core on the storage tables (:mod:`workbench.store.schema`),
built once per dialect. The two reads of thousands of rows (:func:`load_table`,
:func:`load_active`) run their compiled statements on the driver's own cursor, which
hands back plain tuples: the cheapest rows either driver makes.

:func:`load_table` reads a session's active messages for planning as a
:class:`~workbench.core.message_table.MessageTable`: columns for every message, with the
summary line each keeps, and whole messages only for those planning needs whole.
:func:`load_active` reads them all as messages.
"""

from __future__ import annotations

import json
import operator
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import islice
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Integer,
    Select,
    and_,
    bindparam,
    case,
    cast,
    delete,
    func,
    insert,
    literal,
    literal_column,
    not_,
    null,
    or_,
    select,
    update,
)
from sqlalchemy.engine import Connection

from workbench.core.compaction import CompactionPlan, CompactionRecord
from workbench.core.conversation import Message, Task, utcnow
from workbench.core.message_table import MessageTable
from workbench.errors import CompactionError, NotFoundError
from workbench.store.base import StoreBase
from workbench.store.db import Database
from workbench.store.dialect import Dialect, unindexed
from workbench.store.driver_rows import driver_rows
from workbench.store.orphans import orphans_listed_after
from workbench.store.schema import COMPACTIONS, MESSAGES, SESSION_CONTEXT, SESSIONS
from workbench.store.types import json_text, json_value, text_to_time, time_to_text

__all__ = [
    "apply_plan",
    "get_compaction",
    "list_compactions",
    "load_active",
    "forget_tables",
    "load_table",
    "load_table_kept",
    "undo_compaction",
]

M = MESSAGES
C = COMPACTIONS
SC = SESSION_CONTEXT

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
_SESSION_EXISTS = select(literal(1)).where(SESSIONS.c.id == bindparam("id"))
_RECORD = select(
    C.c.id, C.c.session_id, C.c.created_at, C.c.policy, C.c.summarizer, C.c.tokens_before,
    C.c.tokens_after, C.c.folded_count, C.c.summary, C.c.undone_at, C.c.details,
)
_RECORD_BY_ID = _RECORD.where(C.c.id == bindparam("id"))
_RECORD_IN_SESSION = _RECORD.where(C.c.id == bindparam("id"), C.c.session_id == bindparam("sid"))
_RECORDS_OF_SESSION = _RECORD.where(C.c.session_id == bindparam("sid")).order_by(C.c.id)
_LAST_RECORD = _RECORD.where(C.c.session_id == bindparam("sid")).order_by(C.c.id.desc()).limit(1)
_LATEST_ACTIVE = (
    _RECORD.where(C.c.session_id == bindparam("sid"), C.c.undone_at.is_(None))
    .order_by(C.c.id.desc())
    .limit(1)
)
_BEFORE_CONTEXT = select(C.c.before_context).where(C.c.id == bindparam("id"))
_INSERT_COMPACTION = insert(C).returning(C.c.id)
_MARK_UNDONE = update(C).where(C.c.id == bindparam("cid")).values(undone_at=bindparam("now"))
_CONTEXT_ROW = select(*(SC.c[name] for name in _CONTEXT_COLUMNS)).where(
    SC.c.session_id == bindparam("sid")
)
_CONTEXT_OTHERS = select(SC.c.tool_stats, SC.c.token_usage, SC.c.system_state,
                         SC.c.environment).where(SC.c.session_id == bindparam("sid"))
_DELETE_CONTEXT = delete(SC).where(SC.c.session_id == bindparam("sid"))
_UNFOLD = (
    update(M)
    .where(M.c.session_id == bindparam("sid"), M.c.compaction_id == bindparam("cid"),
           M.c.state == "folded")
    .values(state="active", compaction_id=None)
)
_RESTORE_PRIOR = (
    update(M)
    .where(M.c.id == bindparam("mid"), M.c.session_id == bindparam("sid"),
           M.c.state == "active", M.c.compaction_id.is_(None))
    .values(compaction_id=bindparam("prior"))
)

# What load_active reads of each message: everything planning needs, not parts nor times.
_LEAN = (
    M.c.id, M.c.position, M.c.role, M.c.content, M.c.name, M.c.tool_calls,
    M.c.tool_call_id, M.c.token_count, M.c.token_encoding, M.c.important, M.c.metadata,
    M.c.compaction_id,
)
_ACTIVE_IN_ORDER = (M.c.session_id == bindparam("sid"), M.c.state == "active")
_LEAN_SELECT = select(*_LEAN).where(*_ACTIVE_IN_ORDER).order_by(M.c.position)
# Written into the statement (a list parameter would be expanded at each execution).
_PLAIN_ROLES: tuple[ColumnElement[str], ...] = (
    literal_column("'user'"), literal_column("'assistant'"),
)
# What marks a whole row in load_table's kind column (a plain row's details are JSON
# text, never empty).
_WHOLE = ""


@dataclass(frozen=True)
class _Statements:
    """The statements whose text depends on the dialect."""

    prior: Select[Any]
    fold: Any
    write_context: Any
    table: Select[Any]
    # SQLite: the table's eight columns as eight JSON arrays in one row (None elsewhere).
    columns: Select[Any] | None
    whole_rest: Select[Any]
    texts: Select[Any]


@cache
def _statements(dialect: Dialect) -> _Statements:
    items = dialect.json_array_items(bindparam("ids"))
    ids = select(cast(items.c.value, Integer)).scalar_subquery()
    upsert = dialect.insert(SC)
    write_context = upsert.on_conflict_do_update(
        index_elements=[SC.c.session_id],
        set_={name: upsert.excluded[name] for name in ("facts", "summary", "tasks",
                                                        "updated_at")},
    )
    encoded = M.c.token_encoding == bindparam("encoding")
    # Per row: the columns of a MessageTable (the kept summary line, and its count when
    # it is in the wanted encoding, last), then what kind of row it is: _WHOLE for a
    # whole row (read again in full), NULL for a plain row with nothing else, or the
    # plain row's details as JSON text (see workbench.core.message_table).
    # Never NULL (a NULL would make the text's case below read every text): a row
    # without metadata is told by its other columns alone.
    whole_row = or_(
        M.c.role.not_in(_PLAIN_ROLES), M.c.tool_calls.is_not(None), M.c.important,
        and_(M.c.metadata.is_not(None), or_(M.c.metadata.contains('"important"'),
                                             M.c.metadata.contains('"pinned"'))),
    )
    kind = case(
        (
            and_(M.c.tool_calls.is_(None), M.c.metadata.is_(None), M.c.name.is_(None),
                 M.c.tool_call_id.is_(None), M.c.compaction_id.is_(None),
                 not_(M.c.important), M.c.role.in_(_PLAIN_ROLES)),
            null(),
        ),
        (whole_row, literal_column(f"'{_WHOLE}'")),
        else_=dialect.json_array(M.c.name, M.c.tool_call_id, M.c.metadata, M.c.compaction_id),
    )
    # The text only where planning may need it: a plain row whose summary line and both
    # counts are kept in the wanted encoding is summarized and counted without it (read
    # later, all at once, if something asks: MessageTable.texts).
    text = case(
        (
            and_(not_(whole_row), M.c.summary_line.is_not(None), encoded,
                 M.c.token_count.is_not(None), M.c.summary_line_tokens.is_not(None)),
            null(),
        ),
        else_=M.c.content,
    )
    table = (
        select(
            M.c.id, M.c.position, M.c.role, text, case((encoded, M.c.token_count)),
            M.c.summary_line, case((encoded, M.c.summary_line_tokens)), kind,
        )
        .where(*_ACTIVE_IN_ORDER)
        .order_by(M.c.position)
    )
    # On SQLite the rows come as one JSON array per column, which the JSON decoder turns
    # into lists: no tuple per row, no transposing. In the bench's 10,000-row session
    # 12.5 against 14.8 ms in a new process, and 14 against 20 ms in one whose memory was
    # churned a while (a tuple per row is 10,000 small allocations scattered in a used
    # heap). The arrays follow the subquery's order (an aggregate's subquery with ORDER BY
    # is not flattened; load_table checks the positions all the same). The row kind's
    # JSON details are made plain text first (``|| ''``) so they are kept as a string.
    columns = None
    if not dialect.is_postgresql:
        rows = table.subquery()
        values: list[ColumnElement[Any]] = list(rows.c)
        values[7] = values[7].concat(literal_column("''"))
        columns = select(*(func.json_group_array(value) for value in values))
    return _Statements(
        prior=select(M.c.id, M.c.compaction_id).where(M.c.id.in_(ids),
                                                      M.c.compaction_id.is_not(None)),
        # By the ids: on SQLite, +session_id and +state keep the planner off the
        # (session, state) index the statement changes.
        fold=(
            update(M)
            .where(M.c.id.in_(ids), unindexed(M.c.session_id) == bindparam("sid"),
                   unindexed(M.c.state) == "active")
            .values(state="folded", compaction_id=bindparam("cid"))
        ),
        write_context=write_context,
        table=table,
        columns=columns,
        # The rest of the whole rows: _LEAN but the columns load_table already read.
        whole_rest=select(
            M.c.id, M.c.name, M.c.tool_calls, M.c.tool_call_id, M.c.token_count,
            M.c.token_encoding, M.c.important, M.c.metadata, M.c.compaction_id,
        ).where(M.c.id.in_(ids)),
        texts=select(M.c.id, M.c.content).where(M.c.id.in_(ids)),
    )


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
    if conn.execute(_SESSION_EXISTS, {"id": session_id}).first() is None:
        raise NotFoundError(f"There is no session with id {session_id}.")


# The decoder's scanner, as json.loads runs it (see _loads).
_scan_json: Callable[[str, int], tuple[Any, int]] = (
    json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # set by __init__
)


def _loads(text: Any) -> Any:
    """``json.loads(text)``, in half the time for a text that is one JSON value without
    space around it (as the store writes tool calls and metadata): the scanner alone,
    and ``json.loads`` itself for anything else, so that any text reads (or fails) as
    it would."""
    try:
        value, end = _scan_json(text, 0)
    except (StopIteration, TypeError):
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


def _lean_messages(rows: list[Any], session_id: int) -> list[Message]:
    loads = _loads
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


def _whole_messages(
    rest: list[Any],
    wanted: list[int],
    ids: Sequence[int],
    positions: Sequence[int],
    roles: Sequence[str],
    texts: Sequence[str | None],
    session_id: int,
) -> dict[int, Message]:
    """The whole rows' messages by row index, from their columns read with the table
    and the rest of each (``whole_rest``: id first, in no particular order)."""
    row_of = {ids[i]: i for i in wanted}
    loads = _loads
    whole: dict[int, Message] = {}
    for r in rest:
        i = row_of[r[0]]
        # Positional arguments in Message's field order, as _lean_messages builds them.
        whole[i] = Message(
            roles[i], texts[i], r[0], session_id, positions[i], r[1],  # type: ignore[arg-type]
            loads(r[2]) if r[2] is not None else None,
            r[3], None, None, r[4], r[5], "active", bool(r[6]),
            loads(r[7]) if r[7] is not None else {},
            r[8],
        )
    if len(whole) != len(wanted):
        raise CompactionError(
            f"Session {session_id} changed while it was read; nothing was planned. "
            "Preview again."
        )
    return whole


def load_active(db: Database, session_id: int) -> list[Message]:
    """The session's active messages in order, with what planning needs.

    Leaner than the repository's full rows: ``parts`` and ``created_at`` are not read,
    and the rows come straight from the driver's cursor, which matters in a session of
    many thousand messages.
    """
    with db.read() as conn:
        _require_session(conn, session_id)
        rows = driver_rows(conn, _LEAN_SELECT, {"sid": session_id})
    return _lean_messages(rows, session_id)


def _table_columns(conn: Connection, statements: _Statements, params: dict[str, Any]
                   ) -> Sequence[Sequence[Any]]:
    """The eight columns of the table statement's rows, in the rows' order."""
    if statements.columns is not None:
        arrays = driver_rows(conn, statements.columns, params)[0]
        columns = [json.loads(array) for array in arrays]
        positions = columns[1]
        if all(map(operator.lt, positions, islice(positions, 1, None))):
            return columns
    rows = driver_rows(conn, statements.table, params)  # a team store (or out of order)
    return list(zip(*rows, strict=True)) or [()] * 8


def load_table(db: Database, session_id: int, encoding: str | None) -> MessageTable:
    """The session's active messages in order as a :class:`MessageTable`, its costs in
    ``encoding`` (what :func:`load_active` reads, for a fraction of its time: only the
    messages that are not plain are built whole).

    A metadata text that merely mentions ``"important"`` or ``"pinned"`` makes its row
    whole too, which is safe: whole rows are planned by their messages. The table
    carries each message's kept summary line, and its token count where that is in
    ``encoding``.
    """
    statements = _statements(db.dialect)
    with db.read() as conn:
        _require_session(conn, session_id)
        columns = _table_columns(conn, statements, {"sid": session_id, "encoding": encoding})
        ids, positions, roles, texts, costs, lines, line_costs, kinds = columns
        marked = [i for i, kind in enumerate(kinds) if kind is not None]
        wanted = [i for i in marked if kinds[i] == _WHOLE]
        rest = (
            driver_rows(conn, statements.whole_rest,
                         {"ids": json.dumps([ids[i] for i in wanted])})
            if wanted
            else []
        )
    whole = _whole_messages(rest, wanted, ids, positions, roles, texts, session_id)

    def load_texts(rows: Sequence[int]) -> list[str]:
        # Read later than the rest (outside its snapshot): a message deleted meanwhile
        # makes the preview fail with a sentence rather than plan with a hole.
        wanted_ids = [ids[i] for i in rows]
        with db.query() as conn:
            found = dict(driver_rows(conn, statements.texts,
                                      {"ids": json.dumps(wanted_ids)}))
        if len(found) != len(set(wanted_ids)):
            raise CompactionError(
                f"Session {session_id} changed while it was read; nothing was planned. "
                "Preview again."
            )
        return [found[mid] for mid in wanted_ids]

    return MessageTable(
        ids=ids,
        positions=positions,
        roles=roles,
        texts=texts,
        costs=costs,
        encoding=encoding,
        whole=whole,
        details={i: kinds[i] for i in marked if kinds[i] != _WHOLE},
        session_id=session_id,
        lines=lines,
        line_costs=line_costs,
        load_texts=load_texts,
    )


#: How many tables :func:`load_table_kept` keeps per database (the sessions previewed last).
KEPT_TABLES = 2

# Per database: (session id, encoding) -> (the change mark it was read at, the table).
_kept: weakref.WeakKeyDictionary[
    Database, OrderedDict[tuple[int, str | None], tuple[tuple[int, int], MessageTable]]
] = weakref.WeakKeyDictionary()
_kept_lock = threading.Lock()


def load_table_kept(db: Database, session_id: int, encoding: str | None) -> MessageTable:
    """:func:`load_table`, but the table read last for the session and encoding when the
    database has not changed since (a SQLite file: ``data_version`` and this process's
    commits, both read before the table, so a change that lands while it is read only
    makes the next call read again). Previewing a session again (another keep count, a
    summarizer setting) then plans from the table in memory, with the summary lines
    written for it before. Tables are never changed by planning; a team store is always
    read (its change counter hears of other desktops' changes late)."""
    if not db.is_file:
        return load_table(db, session_id, encoding)
    key = (session_id, encoding)
    mark = (db.data_version(), db.local_writes)
    with _kept_lock:
        tables = _kept.setdefault(db, OrderedDict())
        found = tables.get(key)
        if found is not None and found[0] == mark:
            tables.move_to_end(key)
            return found[1]
    table = load_table(db, session_id, encoding)
    with _kept_lock:
        tables[key] = (mark, table)
        tables.move_to_end(key)
        while len(tables) > KEPT_TABLES:
            tables.popitem(last=False)
    return table


def forget_tables(db: Database | None = None) -> None:
    """Drop the tables :func:`load_table_kept` keeps (of ``db``, or of every database):
    the next preview reads its session from the database, as in a new process."""
    with _kept_lock:
        if db is None:
            _kept.clear()
        else:
            _kept.pop(db, None)


def _context_row(conn: Connection, session_id: int) -> dict[str, Any] | None:
    row = conn.execute(_CONTEXT_ROW, {"sid": session_id}).mappings().first()
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
    statements = _statements(db.dialect)
    session_id = plan.session_id
    ids_json = json.dumps(plan.folded_ids)
    now = time_to_text(utcnow())
    with db.write() as conn:
        _require_session(conn, session_id)
        before = _context_row(conn, session_id)
        _check_unchanged(plan, before)
        prior = {str(r[0]): r[1] for r in conn.execute(statements.prior, {"ids": ids_json})}
        details = plan.details()
        if prior:
            details["prior_compaction_ids"] = prior
        compaction_id = int(
            conn.execute(
                _INSERT_COMPACTION,
                {
                    "session_id": session_id,
                    "created_at": time_to_text(plan.created_at),
                    "policy": plan.policy,
                    "summarizer": plan.summarizer,
                    "tokens_before": plan.tokens_before,
                    "tokens_after": plan.tokens_after if tokens_after is None else tokens_after,
                    "folded_count": plan.folded_count,
                    "summary": plan.summary,
                    "before_context": json_text({"exists": before is not None, "row": before}),
                    "details": json_text(details),
                },
            ).scalar_one()
        )
        with orphans_listed_after(conn, session_id):
            folded = conn.execute(
                statements.fold, {"cid": compaction_id, "ids": ids_json, "sid": session_id}
            ).rowcount
        if folded != plan.folded_count:
            # Rolled back by the transaction: a message was deleted, moved or already
            # out of view since the preview.
            raise CompactionError(
                f"Session {session_id} changed after the preview ({plan.folded_count - folded}"
                " of the messages to fold are no longer active in it); nothing was "
                "compacted. Preview again."
            )
        _write_context(conn, statements, session_id, json_text(list(plan.facts_after)),
                       plan.new_summary, json_text(_tasks_json(plan.tasks_after)), now)
        StoreBase(db)._refresh_counts(conn, session_id)
    return compaction_id


def _only_compaction_wrote(conn: Connection, session_id: int) -> bool:
    row = conn.execute(_CONTEXT_OTHERS, {"sid": session_id}).first()
    return row is not None and all(value is None for value in row)


def _latest_active(conn: Connection, session_id: int) -> Any:
    return conn.execute(_LATEST_ACTIVE, {"sid": session_id}).first()


def undo_compaction(
    db: Database, session_id: int, compaction_id: int | None = None
) -> CompactionRecord:
    """Undo a compaction of a session in one transaction; returns its record, now undone.

    Without ``compaction_id`` the session's newest compaction that is still applied is
    undone, so repeated undos walk back through them. Raises :class:`CompactionError`
    when the session has none left to undo, when the one named is already undone, or
    when a newer compaction is still applied on top of it.
    """
    statements = _statements(db.dialect)
    now = utcnow()
    with db.write() as conn:
        _require_session(conn, session_id)
        if compaction_id is None:
            row = _latest_active(conn, session_id)
            if row is None:
                last = conn.execute(_LAST_RECORD, {"sid": session_id}).first()
                if last is None:
                    raise CompactionError(f"Session {session_id} has no compaction to undo.")
                done = _record(last)
                raise CompactionError(
                    f"Every compaction of session {session_id} is already undone (the last, "
                    f"{done.id}, at {time_to_text(done.undone_at)}); nothing changed."  # type: ignore[arg-type]
                )
        else:
            row = conn.execute(_RECORD_IN_SESSION, {"id": compaction_id, "sid": session_id}).first()
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
            conn.execute(_BEFORE_CONTEXT, {"id": record.id}).scalar_one()
        ) or {}
        with orphans_listed_after(conn, session_id):
            conn.execute(_UNFOLD, {"sid": session_id, "cid": record.id})
        prior = record.details.get("prior_compaction_ids") or {}
        if prior:
            conn.execute(
                _RESTORE_PRIOR,
                [{"prior": cid, "mid": int(mid), "sid": session_id} for mid, cid in prior.items()],
            )
        before = snapshot.get("row") if snapshot.get("exists") else None
        if before is None and _only_compaction_wrote(conn, session_id):
            # The compaction created the row; nothing else has written to it since.
            conn.execute(_DELETE_CONTEXT, {"sid": session_id})
        else:
            _write_context(conn, statements, session_id, before["facts"] if before else None,
                           (before["summary"] if before else "") or "",
                           before["tasks"] if before else None, time_to_text(now))
        conn.execute(_MARK_UNDONE, {"cid": record.id, "now": time_to_text(now)})
        StoreBase(db)._refresh_counts(conn, session_id)
    record.undone_at = now
    return record


def get_compaction(db: Database, compaction_id: int) -> CompactionRecord:
    """One compaction record, or :class:`NotFoundError`."""
    with db.query() as conn:
        row = conn.execute(_RECORD_BY_ID, {"id": compaction_id}).first()
    if row is None:
        raise NotFoundError(f"There is no compaction with id {compaction_id}.")
    return _record(row)


def list_compactions(db: Database, session_id: int) -> list[CompactionRecord]:
    """Every compaction of a session, oldest first, undone ones included."""
    with db.query() as conn:
        rows = conn.execute(_RECORDS_OF_SESSION, {"sid": session_id}).all()
    return [_record(r) for r in rows]


def _write_context(conn: Connection, statements: _Statements, session_id: int,
                   facts: str | None, summary: str, tasks: str | None, updated_at: str) -> None:
    """Store the session's facts, summary and tasks (JSON text), adding its row if needed."""
    conn.execute(
        statements.write_context,
        {"session_id": session_id, "facts": facts, "summary": summary, "tasks": tasks,
         "updated_at": updated_at},
    )
