"""Converting between table rows and the domain objects of ``workbench.core``."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

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
from workbench.store.types import json_text, json_value, text_to_time, time_to_text

# Column order used by every raw message insert (bulk import, append, fork).
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

SESSION_SELECT = (
    "s.id, s.title, s.agent_id, s.created_at, s.updated_at, s.tags, s.pinned, s.archived, "
    "s.forked_from_session_id, s.forked_from_message_id, s.overrides, s.source, s.source_id, "
    "s.message_count, s.token_count, a.name"
)
SESSION_FROM = "sessions AS s JOIN agents AS a ON a.id = s.agent_id"


def message_params(
    msg: Message, session_id: int, position: int, now: datetime
) -> tuple[Any, ...]:
    """The values of one message in :data:`MESSAGE_COLUMNS` order, ready for SQLite."""
    meta = dict(msg.metadata) if msg.metadata else {}
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
        1 if important else 0,
        json_text(meta) if meta else None,
        msg.compaction_id,
    )


def message_from_row(row: Any) -> Message:
    """A :class:`Message` from a row selected with :data:`MESSAGE_SELECT`."""
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
        created_at=text_to_time(row[9]),
        token_count=row[10],
        token_encoding=row[11],
        state=row[12],
        important=bool(row[13]),
        metadata=json_value(row[14]) or {},
        compaction_id=row[15],
    )


def session_from_row(row: Any) -> SessionInfo:
    """A :class:`SessionInfo` from a row selected with :data:`SESSION_SELECT`."""
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


def context_params(ctx: SessionContext) -> dict[str, Any]:
    """Column values for ``session_context`` (without session id and time)."""
    return {
        "facts": json_text(list(ctx.facts)),
        "summary": ctx.summary or "",
        "tasks": json_text([t.to_json() for t in ctx.tasks]),
        "tool_stats": json_text(ctx.tool_stats.to_json()),
        "token_usage": json_text(
            {"total_input": ctx.token_usage.input_tokens,
             "total_output": ctx.token_usage.output_tokens}
        ),
        "system_state": json_text(ctx.system_state or {}),
        "environment": json_text(ctx.environment or {}),
    }


def context_from_row(row: Mapping[str, Any] | Any | None) -> SessionContext:
    """A :class:`SessionContext` from a ``session_context`` row (empty when missing)."""
    if row is None:
        return SessionContext()
    return SessionContext(
        facts=[str(f) for f in json_value(row["facts"]) or []],
        summary=row["summary"] or "",
        tasks=[Task.from_json(t) for t in json_value(row["tasks"]) or []],
        tool_stats=ToolStats.from_json(json_value(row["tool_stats"])),
        token_usage=TokenUsage.from_json(json_value(row["token_usage"])),
        system_state=json_value(row["system_state"]) or {},
        environment=json_value(row["environment"]) or {},
    )


def agent_from_row(row: Any) -> Agent:
    """An :class:`Agent` from ``id, name, instructions, provider, model, policy, tools``."""
    return Agent(
        id=row[0],
        name=row[1],
        instructions=row[2],
        provider=row[3],
        model=row[4],
        memory_policy=json_value(row[5]) or {},
        tools=list(json_value(row[6]) or []),
    )


def memory_from_row(row: Any) -> MemoryEntry:
    """A :class:`MemoryEntry` from
    ``id, agent_id, session_id, scope, namespace, content, metadata, created_at``."""
    return MemoryEntry(
        id=row[0],
        agent_id=row[1],
        session_id=row[2],
        scope=row[3],
        namespace=row[4],
        content=row[5],
        metadata=json_value(row[6]) or {},
        created_at=text_to_time(row[7]),
    )
