"""Settings (small JSON values by key) and the counts over the whole database."""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, case, func, select

from workbench.core.conversation import (
    ROLES,
    STATES,
)
from workbench.store.base import (
    StoreBase,
)
from workbench.store.schema import AGENTS, MEMORY_ENTRIES, MESSAGES, SESSIONS, SETTINGS
from workbench.store.types import json_text, json_value

_GET_SETTING = select(SETTINGS.c.value).where(SETTINGS.c.key == bindparam("key"))
_SESSION_TOTALS = select(
    func.count(),
    func.coalesce(func.sum(case((SESSIONS.c.archived, 1), else_=0)), 0),
    func.coalesce(func.sum(SESSIONS.c.message_count), 0),
    func.coalesce(func.sum(SESSIONS.c.token_count), 0),
)
_BY_ROLE = select(MESSAGES.c.role, func.count()).group_by(MESSAGES.c.role)
_BY_STATE = select(MESSAGES.c.state, func.count()).group_by(MESSAGES.c.state)
_MEMORY_COUNT = select(func.count()).select_from(MEMORY_ENTRIES)
_AGENT_COUNT = select(func.count()).select_from(AGENTS)
_UNCOUNTED = select(func.count()).select_from(MESSAGES).where(MESSAGES.c.token_count.is_(None))


class SettingsStore(StoreBase):
    """Settings (small JSON values by key) and the counts over the whole database."""

    # == settings ======================================================================

    def get_setting(self, key: str, default: Any = None) -> Any:
        row = self._first(_GET_SETTING, {"key": key})
        return default if row is None else json_value(row[0])

    def set_setting(self, key: str, value: Any) -> None:
        insert = self.dialect.insert(SETTINGS).values(key=key, value=json_text(value))
        with self.db.write() as conn:
            conn.execute(insert.on_conflict_do_update(
                index_elements=[SETTINGS.c.key], set_={"value": insert.excluded.value}
            ))

    # == statistics ====================================================================

    def stats(self) -> dict[str, Any]:
        """Counts over the whole database: sessions, messages by role and state, tokens."""
        with self.db.read() as conn:
            sessions = conn.execute(_SESSION_TOTALS).one()
            by_role: dict[str, int] = {r[0]: r[1] for r in conn.execute(_BY_ROLE)}
            by_state: dict[str, int] = {r[0]: r[1] for r in conn.execute(_BY_STATE)}
            memory = conn.execute(_MEMORY_COUNT).scalar_one()
            agents = conn.execute(_AGENT_COUNT).scalar_one()
            uncounted = conn.execute(_UNCOUNTED).scalar_one()
        return {
            "database": self.db.location,
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
