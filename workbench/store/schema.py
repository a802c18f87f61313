"""The tables as the repository's statements use them, drawn from the SQLModel tables.

The SQLModel classes of :mod:`workbench.store.tables` are the one description of the
schema. The statements of the store (SQLAlchemy Core, the same for SQLite and
PostgreSQL) are built on the lightweight tables below, derived from those classes: the
same names and columns, each column with the storage type under its SQLModel type (times
and JSON as the text they are kept as, booleans as booleans). Rows therefore come back
as stored, and the converters of :mod:`workbench.store.rows` turn them into domain
objects in one pass, without a per-value type hook on reads of thousands of rows.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnClause, TableClause, column, table
from sqlalchemy.types import TypeDecorator
from sqlmodel import SQLModel

from workbench.store.tables import (
    AgentRow,
    CompactionRow,
    MemoryEntryRow,
    MessageCallRow,
    MessageRow,
    OrphanResultRow,
    ProviderConfigRow,
    SessionContextRow,
    SessionRow,
    SettingRow,
)


def storage_table(model: type[SQLModel]) -> TableClause:
    """``model``'s table with each column typed as it is stored."""
    full: Any = model.__table__  # type: ignore[attr-defined]
    columns: list[ColumnClause[Any]] = []
    for col in full.columns:
        kind = col.type
        if isinstance(kind, TypeDecorator):
            kind = kind.impl_instance
        columns.append(column(col.name, kind))
    return table(full.name, *columns)


AGENTS = storage_table(AgentRow)
SESSIONS = storage_table(SessionRow)
MESSAGES = storage_table(MessageRow)
SESSION_CONTEXT = storage_table(SessionContextRow)
MEMORY_ENTRIES = storage_table(MemoryEntryRow)
COMPACTIONS = storage_table(CompactionRow)
PROVIDER_CONFIGS = storage_table(ProviderConfigRow)
SETTINGS = storage_table(SettingRow)
MESSAGE_CALLS = storage_table(MessageCallRow)
ORPHAN_RESULTS = storage_table(OrphanResultRow)
