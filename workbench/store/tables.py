"""SQLModel tables for the data model of SPEC §1.

The schema itself is created by the migrations in :mod:`workbench.store.migrations`
(explicit DDL, frozen once released); these classes describe the same tables for
queries. ``tests/store/test_schema.py`` checks the two agree column by column.

Times are aware UTC datetimes stored as sortable text; JSON columns are text.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlmodel import Field, SQLModel

from workbench.store.types import JSONText, UTCDateTime


class AgentRow(SQLModel, table=True):
    """A named profile: instructions, provider and model, memory policy, tools."""

    __tablename__ = "agents"

    id: int | None = Field(default=None, primary_key=True)
    name: str
    instructions: str = ""
    provider: str | None = None
    model: str | None = None
    memory_policy: Any = Field(default=None, sa_type=JSONText, nullable=True)
    tools: Any = Field(default=None, sa_type=JSONText, nullable=True)
    created_at: datetime = Field(sa_type=UTCDateTime)
    updated_at: datetime = Field(sa_type=UTCDateTime)


class SessionRow(SQLModel, table=True):
    """A session: title, agent, times, tags, pin, archive, fork origin, overrides.

    ``message_count`` and ``token_count`` are kept by the repository after every change
    so the session list never has to aggregate a million messages.
    """

    __tablename__ = "sessions"

    id: int | None = Field(default=None, primary_key=True)
    agent_id: int = Field(foreign_key="agents.id")
    title: str
    created_at: datetime = Field(sa_type=UTCDateTime)
    updated_at: datetime = Field(sa_type=UTCDateTime)
    tags: Any = Field(default=None, sa_type=JSONText, nullable=True)
    pinned: bool = False
    archived: bool = False
    forked_from_session_id: int | None = Field(default=None, foreign_key="sessions.id")
    forked_from_message_id: int | None = None
    overrides: Any = Field(default=None, sa_type=JSONText, nullable=True)
    source: str | None = None
    source_id: str | None = None
    message_count: int = 0
    token_count: int = 0
    # What an import recognises a conversation by (0004_import_identity): the file it
    # came from, and the fingerprint of its first ``fingerprint_count`` messages.
    source_file: str | None = None
    fingerprint: str | None = None
    fingerprint_count: int | None = None
    # What the source said about the conversation as a whole (0005_session_metadata).
    metadata_: Any = Field(
        default=None, sa_type=JSONText, nullable=True, sa_column_kwargs={"name": "metadata"}
    )


class MessageRow(SQLModel, table=True):
    """One message; ``position`` is dense (0..n-1) within its session."""

    __tablename__ = "messages"

    id: int | None = Field(default=None, primary_key=True)
    session_id: int = Field(foreign_key="sessions.id")
    position: int
    role: str
    content: str = ""
    parts: Any = Field(default=None, sa_type=JSONText, nullable=True)
    name: str | None = None
    tool_calls: Any = Field(default=None, sa_type=JSONText, nullable=True)
    tool_call_id: str | None = None
    created_at: datetime = Field(sa_type=UTCDateTime)
    token_count: int | None = None
    token_encoding: str | None = None
    state: str = "active"
    important: bool = False
    metadata_: Any = Field(
        default=None, sa_type=JSONText, nullable=True, sa_column_kwargs={"name": "metadata"}
    )
    compaction_id: int | None = None
    # The body of the message's extractive summary line at the length long folds write,
    # and its token count in token_encoding (kept by the store; see 0003_summary_lines).
    summary_line: str | None = None
    summary_line_tokens: int | None = None


class SessionContextRow(SQLModel, table=True):
    """What the agent remembers about a session beyond its messages."""

    __tablename__ = "session_context"

    session_id: int = Field(primary_key=True, foreign_key="sessions.id")
    facts: Any = Field(default=None, sa_type=JSONText, nullable=True)
    summary: str = ""
    tasks: Any = Field(default=None, sa_type=JSONText, nullable=True)
    tool_stats: Any = Field(default=None, sa_type=JSONText, nullable=True)
    token_usage: Any = Field(default=None, sa_type=JSONText, nullable=True)
    system_state: Any = Field(default=None, sa_type=JSONText, nullable=True)
    environment: Any = Field(default=None, sa_type=JSONText, nullable=True)
    updated_at: datetime = Field(sa_type=UTCDateTime)
    # The fingerprint of the context the latest import wrote (0016_imported_context):
    # when the stored context no longer has it, it was changed here since, and a file
    # read again does not write over it. NULL: no import wrote it since 0016.
    imported_fingerprint: str | None = None


class MemoryEntryRow(SQLModel, table=True):
    """A long-term memory entry; identical entries are stored once (content hash)."""

    __tablename__ = "memory_entries"

    id: int | None = Field(default=None, primary_key=True)
    agent_id: int = Field(foreign_key="agents.id")
    session_id: int | None = Field(default=None, foreign_key="sessions.id")
    scope: str = "agent"
    namespace: str = "default"
    content: str
    content_hash: str
    metadata_: Any = Field(
        default=None, sa_type=JSONText, nullable=True, sa_column_kwargs={"name": "metadata"}
    )
    created_at: datetime = Field(sa_type=UTCDateTime)


class CompactionRow(SQLModel, table=True):
    """One applied compaction, with what is needed to undo it exactly."""

    __tablename__ = "compactions"

    id: int | None = Field(default=None, primary_key=True)
    session_id: int = Field(foreign_key="sessions.id")
    created_at: datetime = Field(sa_type=UTCDateTime)
    policy: str
    summarizer: str
    tokens_before: int = 0
    tokens_after: int = 0
    folded_count: int = 0
    summary: str = ""
    before_context: Any = Field(default=None, sa_type=JSONText, nullable=True)
    details: Any = Field(default=None, sa_type=JSONText, nullable=True)
    undone_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class ProviderConfigRow(SQLModel, table=True):
    """A provider's settings. Never a secret: only where to find the key."""

    __tablename__ = "provider_configs"

    id: int | None = Field(default=None, primary_key=True)
    name: str
    kind: str
    base_url: str
    model: str
    api_key_env: str | None = None
    api_key_keyring: str | None = None
    context_window: int | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    timeouts: Any = Field(default=None, sa_type=JSONText, nullable=True)
    extra_headers: Any = Field(default=None, sa_type=JSONText, nullable=True)
    created_at: datetime = Field(sa_type=UTCDateTime)
    updated_at: datetime = Field(sa_type=UTCDateTime)


class SettingRow(SQLModel, table=True):
    """Small application settings (first-run flags and the like)."""

    __tablename__ = "settings"

    key: str = Field(primary_key=True)
    value: Any = Field(default=None, sa_type=JSONText, nullable=True)


class MigrationRow(SQLModel, table=True):
    """The name of every migration applied to this file, and when."""

    __tablename__ = "schema_migrations"

    name: str = Field(primary_key=True)
    applied_at: datetime = Field(sa_type=UTCDateTime)


agents = AgentRow.__table__  # type: ignore[attr-defined]
sessions = SessionRow.__table__  # type: ignore[attr-defined]
messages = MessageRow.__table__  # type: ignore[attr-defined]
session_context = SessionContextRow.__table__  # type: ignore[attr-defined]
memory_entries = MemoryEntryRow.__table__  # type: ignore[attr-defined]
compactions = CompactionRow.__table__  # type: ignore[attr-defined]
provider_configs = ProviderConfigRow.__table__  # type: ignore[attr-defined]
settings = SettingRow.__table__  # type: ignore[attr-defined]
schema_migrations = MigrationRow.__table__  # type: ignore[attr-defined]


class MessageCallRow(SQLModel, table=True):
    """One tool call an assistant message makes (0007_message_calls): kept by triggers
    from the message's ``tool_calls``, with the message's session, position and state,
    so the tool results whose call is missing are found by index lookups."""

    __tablename__ = "message_calls"

    id: int | None = Field(default=None, primary_key=True)
    message_id: int = Field(foreign_key="messages.id", ondelete="CASCADE")
    session_id: int
    position: int
    state: str
    # The call's id ('' when it has none); NULL when the message's calls are not JSON.
    call_id: str | None = None


class OrphanResultRow(SQLModel, table=True):
    """A tool result whose call no earlier assistant message of its session, in its
    state, makes (0014_orphan_results): kept by triggers with the result's session,
    position, state and call id, so preflight reads the orphans of a stretch of left-out
    history instead of looking up the call of each of its tool results."""

    __tablename__ = "orphan_results"

    message_id: int = Field(primary_key=True, foreign_key="messages.id", ondelete="CASCADE")
    session_id: int
    position: int
    state: str
    # The result's tool_call_id, '' when it has none.
    call_id: str
