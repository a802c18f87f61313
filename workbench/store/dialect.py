"""What the store says differently to SQLite and to PostgreSQL, in one small object.

Everything both databases understand alike (``coalesce``, ``RETURNING``,
``IS DISTINCT FROM``, ``ON CONFLICT``, window functions) is written once with SQLAlchemy
Core from the SQLModel tables; a :class:`Dialect` answers the few questions where the two
part ways: how a write transaction starts, how a JSON array column is spread into rows,
how a case-insensitive substring match is written, and which ``INSERT`` construct offers
``ON CONFLICT``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, TableClause, Text, cast, func
from sqlalchemy.dialects import postgresql as pg_sql
from sqlalchemy.dialects import sqlite as sqlite_sql
from sqlalchemy.sql.expression import TableValuedAlias

SQLITE = "sqlite"
POSTGRESQL = "postgresql"


@dataclass(frozen=True)
class Dialect:
    """The differences between the two backends the store runs on."""

    name: str

    @property
    def is_postgresql(self) -> bool:
        return self.name == POSTGRESQL

    def insert(self, table: TableClause) -> Any:
        """An ``INSERT`` into ``table`` that offers ``on_conflict_do_nothing/update``."""
        return (pg_sql.insert if self.is_postgresql else sqlite_sql.insert)(table)

    def json_array_items(self, column: Any) -> TableValuedAlias:
        """The elements of a JSON array held as text in ``column``, one row each, the
        element's text in the column ``value`` (for ``EXISTS`` over tags)."""
        if self.is_postgresql:
            return func.json_array_elements_text(cast(column, pg_sql.JSON)).table_valued(
                "value"
            )
        return func.json_each(column).table_valued("value")

    def json_array(self, *values: Any) -> ColumnElement[str]:
        """The JSON array of ``values`` as text (a text value becomes a JSON string):
        ``json_array`` on SQLite, ``json_build_array`` on PostgreSQL."""
        if self.is_postgresql:
            return cast(func.json_build_array(*values), Text)
        return func.json_array(*values, type_=Text)

    def contains_text(self, column: ColumnElement[str], needle: str) -> ColumnElement[bool]:
        """``column`` holds ``needle`` anywhere, ignoring case (``LIKE`` on SQLite, which
        folds ASCII letters; ``ILIKE`` on PostgreSQL, which folds every letter)."""
        pattern = "%" + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        if self.is_postgresql:
            return column.ilike(pattern, escape="\\")
        return column.like(pattern, escape="\\")


SQLITE_DIALECT = Dialect(SQLITE)
POSTGRESQL_DIALECT = Dialect(POSTGRESQL)

