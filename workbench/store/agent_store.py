"""Agents and their long-term memory entries."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, delete, func, insert, literal, select, update

from workbench.core.conversation import (
    Agent,
    MemoryEntry,
    utcnow,
)
from workbench.errors import NotFoundError, StorageError
from workbench.store.base import (
    DEFAULT_AGENT_NAME,
    DEFAULT_AGENT_SETTING,
)
from workbench.store.rows import (
    AGENT_ROW,
    MEMORY_ROW,
    agent_from_row,
    memory_from_row,
)
from workbench.store.schema import AGENTS, MEMORY_ENTRIES, SESSIONS
from workbench.store.settings_store import SettingsStore
from workbench.store.types import json_text, time_to_text

_AGENT_BY_ID = select(*AGENT_ROW).where(AGENTS.c.id == bindparam("id"))
_AGENT_BY_NAME = select(*AGENT_ROW).where(AGENTS.c.name == bindparam("name"))
_AGENTS_BY_NAME = select(*AGENT_ROW).order_by(AGENTS.c.name)
_NAME_TAKEN = select(literal(1)).select_from(AGENTS).where(AGENTS.c.name == bindparam("name"))
_INSERT_AGENT = insert(AGENTS).returning(AGENTS.c.id)
_AGENT_NAME = select(AGENTS.c.name).where(AGENTS.c.id == bindparam("id"))
_AGENT_SESSIONS = (
    select(func.count()).select_from(SESSIONS).where(SESSIONS.c.agent_id == bindparam("id"))
)
_DELETE_AGENT_MEMORY = delete(MEMORY_ENTRIES).where(MEMORY_ENTRIES.c.agent_id == bindparam("id"))
_DELETE_AGENT = delete(AGENTS).where(AGENTS.c.id == bindparam("id"))
# The identity of an entry, as the unique index ux_memory_entries_identity has it.
_SAME_ENTRY = select(MEMORY_ENTRIES.c.id).where(
    MEMORY_ENTRIES.c.agent_id == bindparam("agent_id"),
    MEMORY_ENTRIES.c.scope == bindparam("scope"),
    MEMORY_ENTRIES.c.namespace == bindparam("namespace"),
    func.coalesce(MEMORY_ENTRIES.c.session_id, 0) == bindparam("session_key"),
    MEMORY_ENTRIES.c.content_hash == bindparam("content_hash"),
)
_INSERT_ENTRY = insert(MEMORY_ENTRIES).returning(MEMORY_ENTRIES.c.id)
_ENTRY_BY_ID = select(*MEMORY_ROW).where(MEMORY_ENTRIES.c.id == bindparam("id"))
_DELETE_ENTRY = delete(MEMORY_ENTRIES).where(MEMORY_ENTRIES.c.id == bindparam("id"))


class AgentStore(SettingsStore):
    """Agents and their long-term memory entries."""

    # == agents ========================================================================

    def default_agent(self) -> Agent:
        """The default agent (its id is kept in the settings), created on first use."""
        agent_id = self.get_setting(DEFAULT_AGENT_SETTING)
        if agent_id is not None:
            try:
                return self.get_agent(int(agent_id))
            except NotFoundError:
                pass
        row = self._first(_AGENT_BY_NAME, {"name": DEFAULT_AGENT_NAME})
        # Long-term memory on for the default agent: the session's own entries, injected
        # into the instructions, 5 at most (seed 004's "Default to scope: :session").
        agent = agent_from_row(row) if row is not None else self.create_agent(
            DEFAULT_AGENT_NAME,
            memory_policy={"scope": "session", "inject": "instructions", "max_entries": 5},
        )
        self.set_setting(DEFAULT_AGENT_SETTING, agent.id)
        return agent

    def create_agent(
        self,
        name: str,
        *,
        instructions: str = "",
        provider: str | None = None,
        model: str | None = None,
        memory_policy: dict[str, Any] | None = None,
        tools: Sequence[str] = (),
    ) -> Agent:
        """Create an agent; a name already taken raises :class:`StorageError`."""
        now = time_to_text(utcnow())
        with self.db.write() as conn:
            if conn.execute(_NAME_TAKEN, {"name": name}).first():
                raise StorageError(f"An agent named {name!r} already exists.")
            agent_id = conn.execute(_INSERT_AGENT, {
                "name": name, "instructions": instructions, "provider": provider,
                "model": model, "memory_policy": json_text(memory_policy or {}),
                "tools": json_text(list(tools)), "created_at": now, "updated_at": now,
            }).scalar_one()
        return self.get_agent(int(agent_id))

    def get_agent(self, agent_id: int) -> Agent:
        return agent_from_row(self._read_one(
            _AGENT_BY_ID, agent_id, f"There is no agent with id {agent_id}."))

    def list_agents(self) -> list[Agent]:
        with self.db.read() as conn:
            rows = conn.execute(_AGENTS_BY_NAME).all()
        return [agent_from_row(r) for r in rows]

    def delete_agent(self, agent_id: int) -> int:
        """Delete an agent and its long-term memory entries, in one transaction; returns
        how many entries went with it. The default agent, and an agent that still has
        sessions (archived ones too), are refused with a sentence: sessions need their
        agent."""
        with self.db.write() as conn:
            self._require(conn, "agents", agent_id, "agent")
            name = conn.execute(_AGENT_NAME, {"id": agent_id}).scalar_one()
            default = self.get_setting(DEFAULT_AGENT_SETTING)
            if name == DEFAULT_AGENT_NAME or default == agent_id:
                raise StorageError(f"Agent {name!r} is the default agent; it cannot be deleted.")
            sessions = int(conn.execute(_AGENT_SESSIONS, {"id": agent_id}).scalar_one())
            if sessions:
                noun = "session" if sessions == 1 else "sessions"
                raise StorageError(
                    f"Agent {name!r} still has {sessions} {noun}; delete them or give them "
                    "another agent first."
                )
            removed = conn.execute(_DELETE_AGENT_MEMORY, {"id": agent_id}).rowcount
            conn.execute(_DELETE_AGENT, {"id": agent_id})
        return int(removed or 0)

    def update_agent(self, agent_id: int, **fields: Any) -> Agent:
        """Change ``name``, ``instructions``, ``provider``, ``model``, ``memory_policy``
        or ``tools`` of an agent."""
        allowed = {"name", "instructions", "provider", "model", "memory_policy", "tools"}
        unknown = set(fields) - allowed
        if unknown:
            raise StorageError(f"Agents have no field {sorted(unknown)[0]!r}.")
        values = {
            k: json_text(v) if k in {"memory_policy", "tools"} else v for k, v in fields.items()
        }
        with self.db.write() as conn:
            self._require(conn, "agents", agent_id, "agent")
            if values:
                conn.execute(
                    update(AGENTS).where(AGENTS.c.id == agent_id)
                    .values(**values, updated_at=time_to_text(utcnow()))
                )
        return self.get_agent(agent_id)

    # == memory entries ================================================================

    def add_memory_entry(
        self,
        agent_id: int,
        content: str,
        *,
        scope: str = "agent",
        namespace: str = "default",
        session_id: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> tuple[MemoryEntry, bool]:
        """Store a memory entry once; returns it and whether it was new."""
        if scope not in ("agent", "session"):
            raise StorageError(f"Memory scope {scope!r} is not 'agent' or 'session'.")
        if scope == "session" and session_id is None:
            raise StorageError("A memory entry of scope 'session' needs a session.")
        digest = hashlib.sha256(content.strip().encode("utf-8")).hexdigest()
        with self.db.write() as conn:
            self._require(conn, "agents", agent_id, "agent")
            if session_id is not None:
                self._require(conn, "sessions", session_id, "session")
            found = conn.execute(_SAME_ENTRY, {
                "agent_id": agent_id, "scope": scope, "namespace": namespace,
                "session_key": session_id or 0, "content_hash": digest,
            }).first()
            if found is not None:
                entry_id, created = int(found[0]), False
            else:
                entry_id = int(conn.execute(_INSERT_ENTRY, {
                    "agent_id": agent_id, "session_id": session_id, "scope": scope,
                    "namespace": namespace, "content": content, "content_hash": digest,
                    "metadata": json_text(metadata or {}), "created_at": time_to_text(utcnow()),
                }).scalar_one())
                created = True
        return self.get_memory_entry(entry_id), created

    def get_memory_entry(self, entry_id: int) -> MemoryEntry:
        return memory_from_row(self._read_one(
            _ENTRY_BY_ID, entry_id, f"There is no memory entry with id {entry_id}."))

    def list_memory_entries(
        self,
        *,
        agent_id: int | None = None,
        scope: str | None = None,
        namespace: str | None = None,
        session_id: int | None = None,
    ) -> list[MemoryEntry]:
        """Memory entries matching every filter given, newest first."""
        query = select(*MEMORY_ROW).order_by(
            MEMORY_ENTRIES.c.created_at.desc(), MEMORY_ENTRIES.c.id.desc()
        )
        for column, value in (
            (MEMORY_ENTRIES.c.agent_id, agent_id),
            (MEMORY_ENTRIES.c.scope, scope),
            (MEMORY_ENTRIES.c.namespace, namespace),
            (MEMORY_ENTRIES.c.session_id, session_id),
        ):
            if value is not None:
                query = query.where(column == value)
        with self.db.read() as conn:
            rows = conn.execute(query).all()
        return [memory_from_row(r) for r in rows]

    def delete_memory_entry(self, entry_id: int) -> None:
        with self.db.write() as conn:
            if conn.execute(_DELETE_ENTRY, {"id": entry_id}).rowcount == 0:
                raise NotFoundError(f"There is no memory entry with id {entry_id}.")

