"""Converting between table rows and the domain objects of ``workbench.core``."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, Integer, insert, type_coerce

from workbench.core.conversation import (
    Agent,
    MemoryEntry,
    Message,
    SessionContext,
    SessionInfo,
    Task,
    TokenUsage,
    ToolStats,
)
from workbench.store.schema import AGENTS, MEMORY_ENTRIES, MESSAGES, SESSIONS
from workbench.store.types import json_text, json_value, text_to_time, time_to_text

T = TypeVar("T")

# Column order used by every message insert (bulk import, append, fork).
MESSAGE_COLUMNS: tuple[str, ...] = (
    "session_id",
    "position",
    "role",
    "content",
    "parts",
    "name",
    "tool_calls",
    "tool_call_id",
    "created_at",
    "token_count",
    "token_encoding",
    "state",
    "important",
    "metadata",
    "compaction_id",
)
# The text forms serve raw ``sqlite3`` connections (benchmarks, tests of the file); the
# store's own statements use the Core forms below.
MESSAGE_SELECT = "id, " + ", ".join(MESSAGE_COLUMNS)
MESSAGE_INSERT = (
    f"INSERT INTO messages ({', '.join(MESSAGE_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in MESSAGE_COLUMNS)})"
)
# Appends also write each message's kept summary line and its token count (migration
# 0003_summary_lines; see workbench.core.summarizers.line_cache).
SUMMARY_LINE_COLUMNS: tuple[str, ...] = ("summary_line", "summary_line_tokens")
MESSAGE_INSERT_WITH_LINES = (
    f"INSERT INTO messages ({', '.join(MESSAGE_COLUMNS + SUMMARY_LINE_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in MESSAGE_COLUMNS + SUMMARY_LINE_COLUMNS)})"
)
# The columns :func:`message_from_row` reads, in its order (``select(*MESSAGE_FIELDS)``).
# ``important`` comes back as stored (an integer on SQLite, a boolean on PostgreSQL):
# message_from_row makes it a bool, and SQLAlchemy's Boolean hook per row would cost a
# page of messages a tenth of its time.
MESSAGE_FIELDS: tuple[ColumnElement[Any], ...] = (
    MESSAGES.c.id,
    *(type_coerce(MESSAGES.c[name], Integer).label(name) if name == "important"
      else MESSAGES.c[name] for name in MESSAGE_COLUMNS),
)
# One insert of message rows given as :func:`message_values` dicts (many at once).
MESSAGE_INSERT_ROWS = insert(MESSAGES)

# The columns :func:`session_from_row` reads, in order, and the join they are selected
# from (``select(*SESSION_ROW).select_from(SESSION_JOIN)``).
SESSION_ROW = (
    *(SESSIONS.c[name] for name in (
        "id", "title", "agent_id", "created_at", "updated_at", "tags", "pinned", "archived",
        "forked_from_session_id", "forked_from_message_id", "overrides", "source",
        "source_id", "message_count", "token_count")),
    AGENTS.c.name,
)
SESSION_JOIN = SESSIONS.join(AGENTS, AGENTS.c.id == SESSIONS.c.agent_id)


TIME_MISSING = "time_missing"
"""Metadata key of a stored message whose source gave no time: the column holds the
import time (it cannot be empty), and reading the message gives ``created_at=None``
again, so a missing time stays missing (never shown or exported as a real one)."""


def message_params(
    msg: Message, session_id: int, position: int, now: datetime, *,
    keep_missing_time: bool = False,
) -> tuple[Any, ...]:
    """The values of one message in :data:`MESSAGE_COLUMNS` order, as stored.

    A message without a time gets ``now``; with ``keep_missing_time`` (imports) it is
    also marked :data:`TIME_MISSING`, so that it reads back without one.
    """
    meta = dict(msg.metadata) if msg.metadata else {}
    if keep_missing_time and msg.created_at is None:
        meta[TIME_MISSING] = True
    important = bool(msg.important or meta.pop("important", False))
    return (
        session_id,
        position,
        msg.role,
        msg.content or "",
        json_text(msg.parts),
        msg.name,
        json_text(msg.tool_calls),
        msg.tool_call_id,
        time_to_text(msg.created_at or now),
        msg.token_count,
        msg.token_encoding if msg.token_count is not None else None,
        msg.state,
        important,
        json_text(meta) if meta else None,
        msg.compaction_id,
    )


def message_values(
    msg: Message, session_id: int, position: int, now: datetime, *,
    keep_missing_time: bool = False, line: str | None = None, line_tokens: int | None = None,
) -> dict[str, Any]:
    """:func:`message_params` by column name, with the message's summary line and its
    token count: one row of :data:`MESSAGE_INSERT_ROWS`."""
    values = dict(zip(MESSAGE_COLUMNS, message_params(
        msg, session_id, position, now, keep_missing_time=keep_missing_time), strict=True))
    values["summary_line"] = line
    values["summary_line_tokens"] = line_tokens
    return values


def message_from_row(row: Any) -> Message:
    """A :class:`Message` from a row selected with :data:`MESSAGE_SELECT`."""
    meta = json_value(row[14]) or {}
    if TIME_MISSING in meta:
        meta = {k: v for k, v in meta.items() if k != TIME_MISSING}
        created = None
    else:
        created = text_to_time(row[9])
    return Message(
        id=row[0],
        session_id=row[1],
        position=row[2],
        role=row[3],
        content=row[4],
        parts=json_value(row[5]),
        name=row[6],
        tool_calls=json_value(row[7]),
        tool_call_id=row[8],
        created_at=created,
        token_count=row[10],
        token_encoding=row[11],
        state=row[12],
        important=bool(row[13]),
        metadata=meta,
        compaction_id=row[15],
    )


def session_from_row(row: Any) -> SessionInfo:
    """A :class:`SessionInfo` from a row selected with :data:`SESSION_ROW`."""
    return SessionInfo(
        id=row[0],
        title=row[1],
        agent_id=row[2],
        created_at=text_to_time(row[3]),
        updated_at=text_to_time(row[4]),
        tags=list(json_value(row[5]) or []),
        pinned=bool(row[6]),
        archived=bool(row[7]),
        forked_from_session_id=row[8],
        forked_from_message_id=row[9],
        overrides=json_value(row[10]) or {},
        source=row[11],
        source_id=row[12],
        message_count=row[13],
        token_count=row[14],
        agent_name=row[15],
    )


def context_params(
    ctx: SessionContext, encode: Callable[[Any], str | None] = json_text
) -> dict[str, Any]:
    """Column values for ``session_context`` (without session id and time).

    ``encode`` makes the JSON text of a value: :func:`json_text`, or a function that
    gives the same text faster (the bulk import's).
    """
    return {
        "facts": encode(list(ctx.facts)),
        "summary": ctx.summary or "",
        "tasks": encode([t.to_json() for t in ctx.tasks]),
        "tool_stats": encode(ctx.tool_stats.to_json()),
        "token_usage": encode(_usage_column(ctx.token_usage)),
        "system_state": encode(ctx.system_state or {}),
        "environment": encode(ctx.environment or {}),
    }


def context_fingerprint(values: Iterable[Any]) -> str:
    """A hash of a context's column values (:func:`context_params`'s, in its order, or a
    stored row's): what an import recorded it wrote, to tell later whether the stored
    context was changed since."""
    digest = hashlib.sha256()
    for value in values:
        text = "" if value is None else str(value)
        digest.update(b"\x1f" + text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _usage_column(usage: TokenUsage) -> dict[str, Any]:
    """The ``token_usage`` column: the two totals, plus (for a usage read from a file)
    the keys it had and the values the workbench has no field for."""
    column: dict[str, Any] = {
        "total_input": usage.input_tokens,
        "total_output": usage.output_tokens,
    }
    if usage.extra:
        column["extra"] = usage.extra
    if usage.keys is not None:
        column["keys"] = list(usage.keys)
    return column


def _usage_from_column(value: Any) -> TokenUsage:
    data = value if isinstance(value, dict) else {}
    keys = data.get("keys")
    extra = data.get("extra")
    return TokenUsage(
        input_tokens=int(data.get("total_input", 0) or 0),
        output_tokens=int(data.get("total_output", 0) or 0),
        extra=dict(extra) if isinstance(extra, dict) else {},
        keys=tuple(keys) if isinstance(keys, list) else None,
    )


def context_from_row(row: Mapping[str, Any] | Any | None) -> SessionContext:
    """A :class:`SessionContext` from a ``session_context`` row (empty when missing)."""
    if row is None:
        return SessionContext()
    return SessionContext(
        facts=[str(f) for f in json_value(row["facts"]) or []],
        summary=row["summary"] or "",
        tasks=[Task.from_json(t) for t in json_value(row["tasks"]) or []],
        tool_stats=ToolStats.from_json(json_value(row["tool_stats"])),
        token_usage=_usage_from_column(json_value(row["token_usage"])),
        system_state=json_value(row["system_state"]) or {},
        environment=json_value(row["environment"]) or {},
    )


def record_from_row(
    make: Callable[..., T], columns: Sequence[str], row: Any, **convert: Callable[[Any], Any]
) -> T:
    """``make(**fields)`` from a row of ``columns`` (selected in that order); ``convert``
    turns a column's stored value into the field's."""
    fields = dict(zip(columns, row, strict=True))
    for name, change in convert.items():
        fields[name] = change(fields[name])
    return make(**fields)


AGENT_COLUMNS = ("id", "name", "instructions", "provider", "model", "memory_policy", "tools")
# The columns :func:`agent_from_row` reads, in order (``select(*AGENT_ROW)``).
AGENT_ROW = tuple(AGENTS.c[name] for name in AGENT_COLUMNS)
MEMORY_COLUMNS = ("id", "agent_id", "session_id", "scope", "namespace", "content", "metadata",
                  "created_at")
# The columns :func:`memory_from_row` reads, in order (``select(*MEMORY_ROW)``).
MEMORY_ROW = tuple(MEMORY_ENTRIES.c[name] for name in MEMORY_COLUMNS)


def json_object(value: Any) -> Any:
    """A stored JSON column read back, ``{}`` when empty."""
    return json_value(value) or {}


def agent_from_row(row: Any) -> Agent:
    """An :class:`Agent` from a row selected with :data:`AGENT_ROW`."""
    return record_from_row(Agent, AGENT_COLUMNS, row, memory_policy=json_object,
                           tools=lambda value: list(json_value(value) or []))


def memory_from_row(row: Any) -> MemoryEntry:
    """A :class:`MemoryEntry` from a row selected with :data:`MEMORY_ROW`."""
    return record_from_row(MemoryEntry, MEMORY_COLUMNS, row, metadata=json_object,
                           created_at=text_to_time)
