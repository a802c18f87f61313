"""Fast import of many conversations at once.

Row-by-row full-text triggers make a large import several times slower than the
insert itself (the index is updated one document at a time). Here a batch of
conversations is written in one transaction with the message insert trigger dropped;
the index is then filled for the new id range in a single statement and the trigger
put back before the commit, so a reader never sees rows missing from the index and a
failed batch leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import Connection

from workbench.core.conversation import ROLES, STATES, Conversation, utcnow
from workbench.errors import StorageError
from workbench.store.migrations import MESSAGES_FTS_INSERT_TRIGGER
from workbench.store.rows import MESSAGE_INSERT, context_params, message_params
from workbench.store.types import json_text, time_to_text

_SESSION_INSERT = (
    "INSERT INTO sessions (id, agent_id, title, created_at, updated_at, tags, pinned, archived,"
    " overrides, source, source_id, message_count, token_count)"
    " VALUES (?, ?, ?, ?, ?, ?, 0, 0, '{}', ?, ?, ?, ?)"
)
_CONTEXT_INSERT = (
    "INSERT INTO session_context (session_id, facts, summary, tasks, tool_stats, token_usage,"
    " system_state, environment, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
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


def insert_batch(
    conn: Connection, conversations: Sequence[Conversation], agent_id: int
) -> list[int]:
    """Insert whole conversations inside the caller's write transaction.

    Returns the new session ids in order. The caller has checked that none of them is
    already stored under the same source id.
    """
    if not conversations:
        return []
    for conv in conversations:
        validate(conv)
    now = utcnow()
    now_text = time_to_text(now)
    next_session = int(conn.exec_driver_sql("SELECT ifnull(max(id), 0) FROM sessions").scalar_one())
    first_message = int(
        conn.exec_driver_sql("SELECT ifnull(max(id), 0) FROM messages").scalar_one()
    ) + 1
    session_rows: list[tuple[Any, ...]] = []
    message_rows: list[tuple[Any, ...]] = []
    context_rows: list[tuple[Any, ...]] = []
    ids: list[int] = []
    for conv in conversations:
        next_session += 1
        ids.append(next_session)
        times = [m.created_at for m in conv.messages if m.created_at is not None]
        created = conv.created_at or (min(times) if times else now)
        updated = conv.updated_at or (max(times) if times else created)
        tokens = sum(m.token_count or 0 for m in conv.messages if m.state == "active")
        session_rows.append(
            (
                next_session,
                agent_id,
                conv.title,
                time_to_text(created),
                time_to_text(updated),
                json_text(list(dict.fromkeys(conv.tags))),
                conv.source,
                conv.source_id,
                len(conv.messages),
                tokens,
            )
        )
        message_rows.extend(
            message_params(m, next_session, pos, now) for pos, m in enumerate(conv.messages)
        )
        context_rows.append((next_session, *context_params(conv.context).values(), now_text))
    conn.exec_driver_sql(_SESSION_INSERT, session_rows)
    conn.exec_driver_sql("DROP TRIGGER messages_fts_insert")
    if message_rows:
        conn.exec_driver_sql(MESSAGE_INSERT, message_rows)
        last = int(conn.exec_driver_sql("SELECT max(id) FROM messages").scalar_one())
        if last != first_message + len(message_rows) - 1:
            raise StorageError("Message ids were not assigned in sequence; the batch was undone.")
        conn.exec_driver_sql(
            "INSERT INTO messages_fts (rowid, content)"
            " SELECT id, content FROM messages WHERE id >= ?",
            (first_message,),
        )
    conn.exec_driver_sql(MESSAGES_FTS_INSERT_TRIGGER)
    conn.exec_driver_sql(_CONTEXT_INSERT, context_rows)
    return ids
