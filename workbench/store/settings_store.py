"""Settings (small JSON values by key) and the counts over the whole database."""

from __future__ import annotations

from typing import Any

from workbench.core.conversation import (
    ROLES,
    STATES,
)
from workbench.store.base import (
    StoreBase,
)
from workbench.store.types import json_text, json_value


class SettingsStore(StoreBase):
    """Settings (small JSON values by key) and the counts over the whole database."""

    # == settings ======================================================================

    def get_setting(self, key: str, default: Any = None) -> Any:
        row = self._first("SELECT value FROM settings WHERE key = ?", (key,))
        return default if row is None else json_value(row[0])

    def set_setting(self, key: str, value: Any) -> None:
        with self.db.write() as conn:
            conn.exec_driver_sql(
                "INSERT INTO settings (key, value) VALUES (?, ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, json_text(value)),
            )

    # == statistics ====================================================================

    def stats(self) -> dict[str, Any]:
        """Counts over the whole database: sessions, messages by role and state, tokens."""
        with self.db.read() as conn:
            sessions = conn.exec_driver_sql(
                "SELECT count(*), coalesce(sum(archived), 0), coalesce(sum(message_count), 0),"
                " coalesce(sum(token_count), 0) FROM sessions"
            ).one()
            by_role: dict[str, int] = {
                r[0]: r[1]
                for r in conn.exec_driver_sql("SELECT role, count(*) FROM messages GROUP BY role")
            }
            by_state: dict[str, int] = {
                r[0]: r[1]
                for r in conn.exec_driver_sql("SELECT state, count(*) FROM messages GROUP BY state")
            }
            memory = conn.exec_driver_sql("SELECT count(*) FROM memory_entries").scalar_one()
            agents = conn.exec_driver_sql("SELECT count(*) FROM agents").scalar_one()
            uncounted = conn.exec_driver_sql(
                "SELECT count(*) FROM messages WHERE token_count IS NULL"
            ).scalar_one()
        return {
            "database": str(self.db.path),
            "sessions": int(sessions[0]),
            "archived_sessions": int(sessions[1]),
            "messages": int(sessions[2]),
            "active_tokens": int(sessions[3]),
            "messages_by_role": {r: int(by_role.get(r, 0)) for r in ROLES},
            "messages_by_state": {s: int(by_state.get(s, 0)) for s in STATES},
            "uncounted_messages": int(uncounted),
            "memory_entries": int(memory),
            "agents": int(agents),
        }

