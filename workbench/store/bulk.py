"""Fast import of many conversations at once.

Row-by-row full-text triggers make a large import several times slower than the
insert itself (the index is updated one document at a time). Here a batch of
conversations is written in one transaction with the index triggers paused (a row in
``settings`` the insert triggers check, see
:data:`~workbench.store.migrations.FTS_PAUSE_SETTING`); the new messages and session
titles are then indexed (and the assistant messages' tool calls listed in
``message_calls``) with one statement each and the pause lifted before the commit,
so a reader never sees rows missing from the index and a failed batch leaves nothing
behind. No schema changes on the way, so no prepared statement has to be compiled again.

The work is split in two so that an importer can overlap it: :func:`prepare` turns a
conversation into ready-made row values (validation, JSON, times; pure Python, no
database), and :func:`insert_batch` writes prepared conversations inside the caller's
transaction (session ids are only known there). An importer can prepare the next
conversations on one thread while another writes the previous batch: SQLite lets go of
the interpreter lock while it inserts and indexes.
"""

from __future__ import annotations

import json
import json.encoder
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import chain
from typing import Any

from sqlalchemy import Integer, bindparam, delete, func, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from workbench.core.conversation import ROLES, STATES, Conversation, utcnow
from workbench.core.identity import fingerprint_messages
from workbench.errors import StorageError
from workbench.store.db_postgresql import IMPORTED_TABLES, MERGE_SEARCH_INDEX
from workbench.store.migrations import (
    FTS_PAUSE_SETTING,
    MESSAGE_CALLS_FILL,
    ORPHAN_RESULTS_FILL,
    PG_CALLS_LISTED_SETTING,
    PG_ORPHAN_RESULTS_FILL,
    PG_SEARCH_CHARS,
)
from workbench.store.rows import (
    MESSAGE_COLUMNS,
    TIME_MISSING,
    context_fingerprint,
    context_params,
)
from workbench.store.schema import SETTINGS
from workbench.store.search_postgresql import symbol_runs
from workbench.store.types import finite, json_text, time_to_text

# Each insert is (statement head, one row's VALUES tuple, bound values per row). Rows go
# in hundreds to a statement: after each step SQLite hands back the interpreter lock,
# and taking it again while the reading thread runs Python waits up to the switch
# interval. One step per row made that wait cost far more than the insert.
_SESSION_INSERT = (
    "INSERT INTO sessions (id, agent_id, title, created_at, updated_at, tags, pinned, archived,"
    " overrides, source, source_id, message_count, token_count, source_file, fingerprint,"
    " fingerprint_count, metadata) VALUES ",
    "(?, ?, ?, ?, ?, ?, 0, 0, '{}', ?, ?, ?, ?, ?, ?, ?, ?)",
    14,
)
_CONTEXT_INSERT = (
    "INSERT INTO session_context (session_id, facts, summary, tasks, tool_stats, token_usage,"
    " system_state, environment, imported_fingerprint, updated_at) VALUES ",
    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    10,
)
# The message columns with the session id LAST: a prepared row is completed with the
# session id (known only inside the transaction) by appending it.
assert MESSAGE_COLUMNS[0] == "session_id"
_ROW_COLUMNS = (*MESSAGE_COLUMNS[1:], "session_id")
_CONTENT = _ROW_COLUMNS.index("content")
_MESSAGE_INSERT = (
    f"INSERT INTO messages ({', '.join(_ROW_COLUMNS)}) VALUES ",
    f"({', '.join('?' for _ in _ROW_COLUMNS)})",
    len(_ROW_COLUMNS),
)
ROW_GROUPS = (1000, 100, 10, 1)
# FTS5's in-memory buffer of new terms: its default, and its size during a bulk insert.
FTS_DEFAULT_HASH_SIZE = 1024 * 1024
FTS_BULK_HASH_SIZE = 64 * 1024 * 1024
_SET_FTS_HASH_SIZE = "INSERT INTO messages_fts (messages_fts, rank) VALUES ('hashsize', ?)"
_SQLITE_LIMIT_VARIABLE_NUMBER = 9

_JSON_OPTIONS = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _json_encoder() -> Callable[[Any], str | None]:
    """The text of ``types.json_text`` (compact, not ASCII-escaped; ``None`` stays None).

    ``json.dumps`` with options builds a new encoder for every value; this builds the
    C encoder once (per conversation, so each thread has its own circular-reference
    bookkeeping) and runs it directly.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return json_text
    markers: dict[int, Any] = {}
    chunks = make(
        markers, _JSON_OPTIONS.default, json.encoder.encode_basestring, None, ":", ",",
        False, False, False,  # allow_nan=False: a NaN is kept as text (types.finite)
    )

    def encode(value: Any) -> str | None:
        if value is None:
            return None
        try:
            return "".join(chunks(value, 0))
        except ValueError:
            markers.clear()  # what the failed pass left in its bookkeeping
            return "".join(chunks(finite(value), 0))

    return encode


def _time_text(value: datetime) -> str:
    """``types.time_to_text`` with a fast path for aware UTC times (the usual case)."""
    if value.tzinfo is UTC and value.year >= 1000:
        # "YYYY-MM-DDTHH:MM:SS.ffffff+00:00" -> "...ffffffZ": the same fixed-width text.
        return value.isoformat(timespec="microseconds")[:-6] + "Z"
    return time_to_text(value)


@dataclass(slots=True)
class PreparedConversation:
    """A conversation turned into row values, ready for :func:`insert_batch`."""

    conversation: Conversation
    # title, created_at, updated_at, tags, source, source_id, message_count, token_count,
    # source_file, fingerprint, fingerprint_count, metadata
    session: tuple[Any, ...]
    # one tuple per message in ``_ROW_COLUMNS`` order, without the trailing session id
    messages: list[tuple[Any, ...]]
    # the session_context values after the session id
    context: tuple[Any, ...]


def session_row(
    session_id: int, agent_id: int, agent_name: str, prepared: PreparedConversation
) -> tuple[Any, ...]:
    """The row ``rows.SESSION_ROW`` reads for a session :func:`insert_batch` wrote."""
    title, created, updated, tags, source, source_id, messages, tokens = prepared.session[:8]
    return (
        session_id, title, agent_id, created, updated, tags, 0, 0, None, None, "{}",
        source, source_id, messages, tokens, agent_name,
    )


def validate(conversation: Conversation) -> None:
    """Raise :class:`StorageError` naming the first message the schema would refuse."""
    for i, m in enumerate(conversation.messages):
        if m.role not in ROLES:
            raise StorageError(
                f"Message {i} of {conversation.title!r}: role {m.role!r} is not one of "
                f"{', '.join(ROLES)}."
            )
        if m.state not in STATES:
            raise StorageError(
                f"Message {i} of {conversation.title!r}: state {m.state!r} is not one of "
                f"{', '.join(STATES)}."
            )


def prepare(conversation: Conversation, now: datetime | None = None) -> PreparedConversation:
    """The row values of a whole conversation; raises :class:`StorageError` for one the
    schema would refuse. Needs no database, so it can run on another thread.

    The values are those :func:`workbench.store.rows.message_params` gives, computed
    without its per-call overheads.
    """
    validate(conversation)
    _json = _json_encoder()
    now = now or utcnow()
    now_text = _time_text(now)
    rows: list[tuple[Any, ...]] = []
    tokens = 0
    times: list[datetime] = []
    for position, m in enumerate(conversation.messages):
        meta = m.metadata
        important = m.important
        created = m.created_at
        if created is None:
            # The source gave no time: the column needs one, the mark says it is not.
            meta = {**meta, TIME_MISSING: True}
        if meta:
            if "important" in meta:
                meta = dict(meta)
                important = bool(important or meta.pop("important", False))
            meta_text = _json(meta) if meta else None
        else:
            meta_text = None
        if created is not None:
            times.append(created)
        count = m.token_count
        if count is not None and m.state == "active":
            tokens += count
        rows.append(
            (
                position,
                m.role,
                m.content or "",
                _json(m.parts),
                m.name,
                _json(m.tool_calls),
                m.tool_call_id,
                now_text if created is None else _time_text(created),
                count,
                m.token_encoding if count is not None else None,
                m.state,
                1 if important else 0,
                meta_text,
                m.compaction_id,
            )
        )
    created_at, updated_at = session_times(conversation, times, now)
    session = (
        conversation.title,
        _time_text(created_at),
        _time_text(updated_at),
        _json(list(dict.fromkeys(conversation.tags))),
        conversation.source,
        conversation.source_id,
        len(rows),
        tokens,
        conversation.source_file,
        fingerprint_messages(conversation.messages),
        len(rows),
        _json(conversation.metadata) if conversation.metadata else None,
    )
    values = tuple(context_params(conversation.context, _json).values())
    context = (*values, context_fingerprint(values), now_text)
    return PreparedConversation(conversation, session, rows, context)


def session_times(
    conversation: Conversation, times: Sequence[datetime], now: datetime
) -> tuple[datetime, datetime]:
    """A stored session's created and updated times, from what its source says.

    The source's own times first, else its messages' earliest and latest; a time before
    1971 is a placeholder (epoch 0), not a time. Updated is never before created. With
    no time at all the session gets ``now`` (the columns cannot be empty) and its
    metadata says :data:`SESSION_TIME_MISSING`.
    """
    created = _real(conversation.created_at)
    updated = _real(conversation.updated_at)
    real = [t for t in times if t.year >= _FIRST_YEAR]
    if created is None:
        created = min(real) if real else None
    if updated is None:
        updated = max(real) if real else created
    if created is None:
        conversation.metadata[SESSION_TIME_MISSING] = True
        created = updated = updated or now
    assert updated is not None
    return created, max(created, updated)


_FIRST_YEAR = 1971
SESSION_TIME_MISSING = "time_missing"
"""Session metadata key: the source gave the conversation no time at all."""


def _real(value: datetime | None) -> datetime | None:
    return value if value is not None and value.year >= _FIRST_YEAR else None


def insert_batch(
    conn: Connection,
    conversations: Sequence[Conversation | PreparedConversation],
    agent_id: int,
) -> list[int]:
    """Insert whole conversations inside the caller's write transaction.

    Returns the new session ids in order. The caller has checked that none of them is
    already stored under the same source id.
    """
    if not conversations:
        return []
    now = utcnow()
    batch = [c if isinstance(c, PreparedConversation) else prepare(c, now) for c in conversations]
    if conn.dialect.name == "postgresql":
        return _insert_batch_postgresql(conn, batch, agent_id)
    return _insert_batch_sqlite(conn, batch, agent_id)


def _insert_batch_sqlite(
    conn: Connection, batch: Sequence[PreparedConversation], agent_id: int
) -> list[int]:
    """The SQLite fast path (SQLite's own SQL through the driver, by design): ids handed
    out after the largest, rows inserted many to a statement with the index triggers
    paused, then the new rows indexed and their tool calls listed in one statement each."""
    base = int(conn.exec_driver_sql("SELECT ifnull(max(id), 0) FROM sessions").scalar_one())
    first_message = int(
        conn.exec_driver_sql("SELECT ifnull(max(id), 0) FROM messages").scalar_one()
    ) + 1
    session_rows: list[tuple[Any, ...]] = []
    message_rows: list[tuple[Any, ...]] = []
    context_rows: list[tuple[Any, ...]] = []
    ids = list(range(base + 1, base + 1 + len(batch)))
    for session_id, prepared in zip(ids, batch, strict=True):
        session_rows.append((session_id, agent_id, *prepared.session))
        tail = (session_id,)
        message_rows.extend([row + tail for row in prepared.messages])
        context_rows.append((session_id, *prepared.context))
    conn.exec_driver_sql(
        "INSERT INTO settings (key, value) VALUES (?, 'true') ON CONFLICT (key) DO NOTHING",
        (FTS_PAUSE_SETTING,),
    )
    _insert_rows(conn, _SESSION_INSERT, session_rows)
    conn.exec_driver_sql(
        "INSERT INTO sessions_fts (rowid, title) SELECT id, title FROM sessions WHERE id > ?",
        (base,),
    )
    if message_rows:
        _insert_rows(conn, _MESSAGE_INSERT, message_rows)
        last = int(conn.exec_driver_sql("SELECT max(id) FROM messages").scalar_one())
        if last != first_message + len(message_rows) - 1:
            raise StorageError("Message ids were not assigned in sequence; the batch was undone.")
        _index_messages(conn, first_message)
        # The tool calls of the new assistant messages (their trigger is paused too).
        conn.exec_driver_sql(MESSAGE_CALLS_FILL, (first_message, first_message))
        # And the tool results among them whose call is missing (0014, paused alike).
        conn.exec_driver_sql(ORPHAN_RESULTS_FILL, (first_message,))
    conn.exec_driver_sql("DELETE FROM settings WHERE key = ?", (FTS_PAUSE_SETTING,))
    _insert_rows(conn, _CONTEXT_INSERT, context_rows)
    return ids


def _index_messages(conn: Connection, first_message: int) -> None:
    """Add the messages from ``first_message`` on to the full-text index, in one statement.

    FTS5 writes its pending terms out as a new index segment whenever they pass its hash
    size (1 MB unless configured), and merges segments as they pile up; a batch's text
    is several MB, so for this statement the hash size is raised and then put back (the
    pending terms are written once, at the commit).
    """
    configured = conn.exec_driver_sql(
        "SELECT v FROM messages_fts_config WHERE k = 'hashsize'"
    ).scalar()
    previous = int(configured) if configured is not None else FTS_DEFAULT_HASH_SIZE
    raise_it = previous < FTS_BULK_HASH_SIZE
    if raise_it:
        conn.exec_driver_sql(_SET_FTS_HASH_SIZE, (FTS_BULK_HASH_SIZE,))
    conn.exec_driver_sql(
        "INSERT INTO messages_fts (rowid, content) SELECT id, content FROM messages WHERE id >= ?",
        (first_message,),
    )
    if raise_it:
        conn.exec_driver_sql(_SET_FTS_HASH_SIZE, (previous,))


def _insert_rows(
    conn: Connection, insert: tuple[str, str, int], rows: Sequence[tuple[Any, ...]]
) -> None:
    """Insert ``rows`` in order, many to a statement.

    Statements hold :data:`ROW_GROUPS` rows (the largest the bound-value limit allows,
    then smaller ones for the rest), so the same few statements are compiled once and
    reused from the driver's cache: compiling a statement costs several times what
    running it costs, per row.
    """
    head, values, width = insert
    limit = conn.connection.dbapi_connection.getlimit(  # type: ignore[union-attr]
        _SQLITE_LIMIT_VARIABLE_NUMBER
    )
    groups = [size for size in ROW_GROUPS if size * width <= limit] or [1]
    start = 0
    for size in groups:
        count = (len(rows) - start) // size
        if not count:
            continue
        params = [
            tuple(chain.from_iterable(rows[at : at + size]))
            for at in range(start, start + count * size, size)
        ]
        sql = head + ", ".join([values] * size)
        if count == 1:
            conn.exec_driver_sql(sql, params[0])
        else:
            conn.exec_driver_sql(sql, params)
        start += count * size


# == PostgreSQL ==========================================================================
#
# The team store has no triggers to pause: the rows of ``message_calls`` are kept by the
# messages' triggers, which COPY fires as an INSERT does, and a message's search column
# is filled by its insert trigger when the row comes without one (migration
# 0010_search_upkeep_postgresql). Session ids are drawn from the sessions' own sequence
# (so that the messages can name theirs), and the rows of the batch are sent with COPY
# through the write transaction's own driver connection: one round trip per table instead
# of one per row or per statement, and the ids of the messages come from their identity
# column. Each message row carries its search value when :func:`search_vector` can make
# it exactly as the server would, and then its runs of symbols too
# (:func:`~workbench.store.search_postgresql.symbol_runs`, migration 0012): splitting
# text with regular expressions was the largest part of the server's work, and it runs
# here while the server stores the rows before.

# What the server's workbench_search_vector does to text of ASCII characters only: the
# first PG_SEARCH_CHARS characters, split on every character that is not a letter or a
# digit (there is nothing to strip of accents), lower-cased; each word with its position.
# The server's parser then reads digits, "e" and digits at the start of a word as a
# number in scientific notation and the letters after it as the next word ("1e9x" is
# "1e9" and "x").
# to_tsvector skips a word of MAX_WORD_BYTES bytes or more (without counting it), keeps
# at most MAX_WORD_POSITIONS positions of a word and counts positions up to
# MAX_POSITION; the tsvector input keeps one more position of a word, so text where a
# word repeats more often, and longer text than the positions made here, is left to
# the server.
_ASCII_WORD = re.compile(r"[a-z][a-z0-9]*|[0-9]+(?:e[0-9]+(?=[a-z])|[a-z0-9]*)")
MAX_WORD_BYTES = 2047
MAX_WORD_POSITIONS = 255
_POSITIONS = tuple(f":{i}" for i in range(1, 4097))


def search_vector(content: str) -> str | None:
    """The text of the tsvector the server's ``workbench_search_vector(content)`` makes,
    or None when only the server can make it exactly (text with a character that is not
    ASCII, a word repeated more than :data:`MAX_WORD_POSITIONS` times, a word too long
    to index, more words than positions made here)."""
    text = content[:PG_SEARCH_CHARS] if len(content) > PG_SEARCH_CHARS else content
    if not text.isascii():
        return None
    words = _ASCII_WORD.findall(text.lower())
    if len(words) > MAX_WORD_POSITIONS and (
        len(words) > len(_POSITIONS) or max(Counter(words).values()) > MAX_WORD_POSITIONS
    ):
        return None
    if len(text) >= MAX_WORD_BYTES and max(map(len, words), default=0) >= MAX_WORD_BYTES:
        return None
    return " ".join(map(str.__add__, words, _POSITIONS))

def _search_values(content: str) -> tuple[str | None, str | None]:
    """A message row's ``search`` and ``symbols`` values as the server would make them:
    both, or neither when only the server can make the search value (its insert trigger
    then makes both)."""
    vector = search_vector(content)
    return (None, None) if vector is None else (vector, symbol_runs(content))


_PG_SESSION_COLUMNS = (
    "id", "agent_id", "title", "created_at", "updated_at", "tags", "source", "source_id",
    "message_count", "token_count", "source_file", "fingerprint", "fingerprint_count",
    "metadata", "pinned", "archived", "overrides",
)
_PG_CONTEXT_COLUMNS = (
    "session_id", "facts", "summary", "tasks", "tool_stats", "token_usage", "system_state",
    "environment", "imported_fingerprint", "updated_at",
)
_NEXT_SESSION_IDS = select(
    func.nextval(func.pg_get_serial_sequence("sessions", "id"))
).select_from(func.generate_series(1, bindparam("count", type_=Integer)))
_LIFT_PAUSE = delete(SETTINGS).where(SETTINGS.c.key == FTS_PAUSE_SETTING)


def _copy_statement(table: str, columns: Sequence[str]) -> str:
    return f"COPY {table} ({', '.join(columns)}) FROM STDIN"


def _copy_rows(conn: Connection, statement: str, rows: Iterable[Sequence[Any]]) -> None:
    """Send ``rows`` with ``statement`` (a ``COPY ... FROM STDIN``) inside the caller's
    transaction, through its driver connection."""
    driver: Any = conn.connection.dbapi_connection
    errors = conn.dialect.loaded_dbapi.Error
    try:
        with driver.cursor() as cursor, cursor.copy(statement) as copy:
            for row in rows:
                copy.write_row(row)
    except errors as exc:
        # Raised as SQLAlchemy raises what the driver refuses, so the database's
        # transaction wraps it in the same StorageError as any other refusal.
        raise DBAPIError.instance(statement, None, exc, errors) from exc


# The pending list of the search index an import may fill before it merges the list
# itself: the words of a batch of the engine's importer (50,000 messages of chat,
# about 40 MB) stay pending and are merged after the commit, on the database's merger
# thread (workbench.store.db_postgresql.SearchIndexMerger); a larger batch merges the
# list itself on the way, so a search never reads through more than this of it. The same
# goes for the other GIN indexes of the tables it writes (the titles' search index).
# Only the owner of the tables may merge their indexes by hand; other users' imports
# merge as they go.
PENDING_WORDS_LIMIT = "64MB"
_DEFER_MERGE = text(
    "SELECT set_config('gin_pending_list_limit', :limit, true)"
    " WHERE (SELECT bool_and(pg_has_role(relowner, 'USAGE')) FROM pg_class"
    "        WHERE oid IN (SELECT to_regclass(t) FROM unnest(CAST(:tables AS text[])) t))"
)


# The calls of the batch's assistant messages, listed here (migration 0013): the rows
# of message_calls the insert trigger's workbench_list_message_calls would write, made
# from the JSON text this module wrote, and sent in one statement that finds each
# message by its session and position. A text this reading might not take exactly as
# the server does (an escape \u..., a member twice, NaN, anything Python's parser
# refuses) is listed by that server function instead.
_NO_CALLS = frozenset({'""', "0", "false", "0.0"})
_ROLE = _ROW_COLUMNS.index("role")
_POSITION = _ROW_COLUMNS.index("position")
_TOOL_CALLS = _ROW_COLUMNS.index("tool_calls")
_TOOL_CALL_ID = _ROW_COLUMNS.index("tool_call_id")
_STATE = _ROW_COLUMNS.index("state")
_CALLS_LISTED = text("SELECT set_config(:setting, :value, true)")
_ORPHANS_LISTED = text(PG_ORPHAN_RESULTS_FILL.replace(
    "ANY(:sids)", "ANY(CAST(:sids AS integer[]))"))
_INSERT_ORPHANS = text(
    "INSERT INTO orphan_results (message_id, session_id, position, state, call_id)"
    " SELECT m.id, m.session_id, m.position, m.state, coalesce(m.tool_call_id, '')"
    " FROM unnest(CAST(:sids AS integer[]), CAST(:positions AS integer[]))"
    "     AS v(sid, pos)"
    " CROSS JOIN LATERAL (SELECT m.id, m.session_id, m.position, m.state, m.tool_call_id"
    " FROM messages m WHERE m.session_id = v.sid AND m.position = v.pos LIMIT 1) AS m"
)
# Each message is looked up by its session and position: one index lookup per row (a
# LATERAL subquery with a LIMIT, which the planner cannot turn into a join: a join let
# it sort the whole table to merge it with the list).
_BY_PLACE = (" CROSS JOIN LATERAL (SELECT m.id, m.session_id, m.position, m.state,"
             " m.tool_calls FROM messages m WHERE m.session_id = v.sid"
             " AND m.position = v.pos LIMIT 1) AS m ORDER BY v.n")
_INSERT_LISTED_CALLS = text(
    "INSERT INTO message_calls (message_id, session_id, position, state, call_id)"
    " SELECT m.id, m.session_id, m.position, m.state, v.call_id"
    " FROM unnest(CAST(:sids AS integer[]), CAST(:positions AS integer[]),"
    "             CAST(:call_ids AS text[])) WITH ORDINALITY AS v(sid, pos, call_id, n)"
    + _BY_PLACE
)
_LIST_CALLS_ON_SERVER = text(
    "SELECT workbench_list_message_calls(m.id, m.session_id, m.position, m.state,"
    " m.tool_calls)"
    " FROM unnest(CAST(:sids AS integer[]), CAST(:positions AS integer[]))"
    " WITH ORDINALITY AS v(sid, pos, n)" + _BY_PLACE
)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON to the server")  # left to it


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(pairs)
    if len(members) != len(pairs):
        # A member twice: which one counts is the server's business (left to it).
        raise ValueError("a member twice")
    return members


def listed_calls(calls: str | None) -> list[str] | None:
    """The call ids ``workbench_list_message_calls`` lists for an assistant message's
    ``tool_calls`` text, in order ('' for a call without a text id), or None when only
    the server can tell exactly (see above)."""
    if calls is None or calls in _NO_CALLS:
        return []
    if "\\u" in calls:
        return None
    try:
        doc = json.loads(calls, parse_constant=_refuse_constant,
                         object_pairs_hook=_unique_members)
    except ValueError:
        return None
    if isinstance(doc, list):
        return [e["id"] if isinstance(e, dict) and isinstance(e.get("id"), str) else ""
                for e in doc]
    if isinstance(doc, dict):
        return [""] * len(doc)
    return [""]


class _CallRows:
    """The calls of a batch's assistant messages, noted while their rows are sent (the
    server stores the rows meanwhile) and written after them; and the tool results no
    earlier call of their session answers among the active ones (0014's orphans), told
    on the way.
    A session with calls only the server can read has its orphans found by the server."""

    def __init__(self) -> None:
        self.sids: list[int] = []
        self.positions: list[int] = []
        self.call_ids: list[str] = []
        self.left: tuple[list[int], list[int]] = ([], [])  # for the server's function
        self.orphans: tuple[list[int], list[int]] = ([], [])
        self.unsure: set[int] = set()  # sessions whose orphans the server finds
        self._session: int | None = None
        self._made: dict[str, set[str]] = {}  # call ids made so far, by state
        self._last = -1

    def note(self, session_id: int, row: tuple[Any, ...]) -> None:
        if session_id != self._session:
            self._session, self._made, self._last = session_id, {}, -1
        position, role = row[_POSITION], row[_ROLE]
        if position <= self._last:
            self.unsure.add(session_id)  # not in order: the server tells
        self._last = position
        if role == "tool":
            made = self._made.get(row[_STATE])
            if row[_STATE] == "active" and (made is None
                                           or (row[_TOOL_CALL_ID] or "") not in made):
                self.orphans[0].append(session_id)
                self.orphans[1].append(position)
            return
        if row[_TOOL_CALLS] is None or role != "assistant":
            return
        listed = listed_calls(row[_TOOL_CALLS])
        if listed is None:
            self.left[0].append(session_id)
            self.left[1].append(position)
            self.unsure.add(session_id)
            return
        self._made.setdefault(row[_STATE], set()).update(listed)
        for call_id in listed:
            self.sids.append(session_id)
            self.positions.append(position)
            self.call_ids.append(call_id)

    def write(self, conn: Connection) -> None:
        if self.sids:
            conn.execute(_INSERT_LISTED_CALLS, {"sids": self.sids, "positions": self.positions,
                                                "call_ids": self.call_ids})
        if self.left[0]:
            conn.execute(_LIST_CALLS_ON_SERVER,
                         {"sids": self.left[0], "positions": self.left[1]}).all()
        unsure = self.unsure
        sids, positions = self.orphans
        if unsure:
            kept = [i for i, sid in enumerate(sids) if sid not in unsure]
            sids, positions = [sids[i] for i in kept], [positions[i] for i in kept]
            conn.execute(_ORPHANS_LISTED, {"sids": sorted(unsure)})
        if sids:
            conn.execute(_INSERT_ORPHANS, {"sids": sids, "positions": positions})


def _message_rows(
    ids: Sequence[int], batch: Sequence[PreparedConversation], calls: _CallRows
) -> Iterable[tuple[Any, ...]]:
    """The COPY rows of the batch's messages (with their session, search value and runs
    of symbols), noting their calls on the way."""
    for session_id, prepared in zip(ids, batch, strict=True):
        for row in prepared.messages:
            calls.note(session_id, row)
            yield row + (session_id, *_search_values(row[_CONTENT]))


def _insert_batch_postgresql(
    conn: Connection, batch: Sequence[PreparedConversation], agent_id: int
) -> list[int]:
    # Nothing pauses here; a pause row left behind is lifted as the SQLite path lifts it.
    conn.execute(_LIFT_PAUSE)
    if conn.execute(_DEFER_MERGE, {"limit": PENDING_WORDS_LIMIT,
                                   "tables": list(IMPORTED_TABLES)}).first() is not None:
        conn.info[MERGE_SEARCH_INDEX] = True
    ids = sorted(int(r[0]) for r in conn.execute(_NEXT_SESSION_IDS, {"count": len(batch)}))
    _copy_rows(
        conn,
        _copy_statement("sessions", _PG_SESSION_COLUMNS),
        ((session_id, agent_id, *prepared.session, False, False, "{}")
         for session_id, prepared in zip(ids, batch, strict=True)),
    )
    # The messages' calls are listed below, not by the insert trigger, and only for the
    # rows of this COPY: the setting is lifted again before anything else is inserted.
    conn.execute(_CALLS_LISTED, {"setting": PG_CALLS_LISTED_SETTING, "value": "on"})
    calls = _CallRows()
    _copy_rows(conn, _copy_statement("messages", (*_ROW_COLUMNS, "search", "symbols")),
               _message_rows(ids, batch, calls))
    # With the orphaned tool results (0014), whose insert triggers stood aside for this
    # import's rows as the calls' did.
    calls.write(conn)
    conn.execute(_CALLS_LISTED, {"setting": PG_CALLS_LISTED_SETTING, "value": "off"})
    _copy_rows(
        conn,
        _copy_statement("session_context", _PG_CONTEXT_COLUMNS),
        ((session_id, *prepared.context) for session_id, prepared in zip(ids, batch, strict=True)),
    )
    return ids
