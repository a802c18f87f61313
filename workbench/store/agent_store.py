"""Agents and their long-term memory entries."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

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
    AGENT_SELECT,
    MEMORY_SELECT,
    agent_from_row,
    memory_from_row,
)
from workbench.store.settings_store import SettingsStore
from workbench.store.types import json_text, time_to_text


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
        row = self._first(f"SELECT {AGENT_SELECT} FROM agents WHERE name = ?",
                          (DEFAULT_AGENT_NAME,))
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
            if conn.exec_driver_sql("SELECT 1 FROM agents WHERE name = ?", (name,)).first():
                raise StorageError(f"An agent named {name!r} already exists.")
            cur = conn.exec_driver_sql(
                "INSERT INTO agents (name, instructions, provider, model, memory_policy, tools,"
                " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (name, instructions, provider, model, json_text(memory_policy or {}),
                 json_text(list(tools)), now, now),
            )
            agent_id = cur.lastrowid
        return self.get_agent(int(agent_id))

    def get_agent(self, agent_id: int) -> Agent:
        return agent_from_row(self._read_one(
            f"SELECT {AGENT_SELECT} FROM agents WHERE id = ?", agent_id,
            f"There is no agent with id {agent_id}."))

    def list_agents(self) -> list[Agent]:
        with self.db.read() as conn:
            rows = conn.exec_driver_sql(
                f"SELECT {AGENT_SELECT} FROM agents ORDER BY name"
            ).all()
        return [agent_from_row(r) for r in rows]

    def delete_agent(self, agent_id: int) -> int:
        """Delete an agent and its long-term memory entries, in one transaction; returns
        how many entries went with it. The default agent, and an agent that still has
        sessions (archived ones too), are refused with a sentence: sessions need their
        agent."""
        with self.db.write() as conn:
            self._require(conn, "agents", agent_id, "agent")
            name = conn.exec_driver_sql(
                "SELECT name FROM agents WHERE id = ?", (agent_id,)
            ).scalar_one()
            default = self.get_setting(DEFAULT_AGENT_SETTING)
            if name == DEFAULT_AGENT_NAME or default == agent_id:
                raise StorageError(f"Agent {name!r} is the default agent; it cannot be deleted.")
            sessions = int(conn.exec_driver_sql(
                "SELECT count(*) FROM sessions WHERE agent_id = ?", (agent_id,)
            ).scalar_one())
            if sessions:
                noun = "session" if sessions == 1 else "sessions"
                raise StorageError(
                    f"Agent {name!r} still has {sessions} {noun}; delete them or give them "
                    "another agent first."
                )
            removed = conn.exec_driver_sql(
                "DELETE FROM memory_entries WHERE agent_id = ?", (agent_id,)
            ).rowcount
            conn.exec_driver_sql("DELETE FROM agents WHERE id = ?", (agent_id,))
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
                sets = ", ".join(f"{k} = ?" for k in values)
                conn.exec_driver_sql(
                    f"UPDATE agents SET {sets}, updated_at = ? WHERE id = ?",
                    (*values.values(), time_to_text(utcnow()), agent_id),
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
            found = conn.exec_driver_sql(
                "SELECT id FROM memory_entries WHERE agent_id = ? AND scope = ? AND namespace = ?"
                " AND ifnull(session_id, 0) = ? AND content_hash = ?",
                (agent_id, scope, namespace, session_id or 0, digest),
            ).first()
            if found is not None:
                entry_id, created = int(found[0]), False
            else:
                cur = conn.exec_driver_sql(
                    "INSERT INTO memory_entries (agent_id, session_id, scope, namespace, content,"
                    " content_hash, metadata, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (agent_id, session_id, scope, namespace, content, digest,
                     json_text(metadata or {}), time_to_text(utcnow())),
                )
                entry_id, created = int(cur.lastrowid), True
        return self.get_memory_entry(entry_id), created

    def get_memory_entry(self, entry_id: int) -> MemoryEntry:
        return memory_from_row(self._read_one(
            f"SELECT {MEMORY_SELECT} FROM memory_entries WHERE id = ?", entry_id,
            f"There is no memory entry with id {entry_id}."))

    def list_memory_entries(
        self,
        *,
        agent_id: int | None = None,
        scope: str | None = None,
        namespace: str | None = None,
        session_id: int | None = None,
    ) -> list[MemoryEntry]:
        """Memory entries matching every filter given, newest first."""
        clauses, params = [], []
        for column, value in (
            ("agent_id", agent_id),
            ("scope", scope),
            ("namespace", namespace),
            ("session_id", session_id),
        ):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        with self.db.read() as conn:
            rows = conn.exec_driver_sql(
                f"SELECT {MEMORY_SELECT} FROM memory_entries {where} "
                "ORDER BY created_at DESC, id DESC",
                tuple(params),
            ).all()
        return [memory_from_row(r) for r in rows]

    def delete_memory_entry(self, entry_id: int) -> None:
        with self.db.write() as conn:
            cur = conn.exec_driver_sql("DELETE FROM memory_entries WHERE id = ?", (entry_id,))
            if cur.rowcount == 0:
                raise NotFoundError(f"There is no memory entry with id {entry_id}.")

