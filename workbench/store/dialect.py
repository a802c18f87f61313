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

from sqlalchemy import ColumnElement, FromClause, TableClause, Text, cast, func
from sqlalchemy.dialects import postgresql as pg_sql
from sqlalchemy.dialects import sqlite as sqlite_sql
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import TableValuedAlias
from sqlalchemy.sql.selectable import Alias
from sqlalchemy.sql.visitors import InternalTraversal

SQLITE = "sqlite"
POSTGRESQL = "postgresql"


@dataclass(frozen=True)
class Dialect:
    """The differences between the two backends the store runs on."""

    name: str
    # PostgreSQL only: the server has ICU's root collation, which folds every letter's
    # case whatever the database's locale (see :meth:`contains_text`).
    icu: bool = False

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

    def json_rows(self, *columns: Any) -> ColumnElement[str]:
        """An aggregate: the selected rows as the text of one JSON array of arrays (each
        row's ``columns`` in order; ``[]`` for no rows). Reading many small rows as one
        value spares a trip through the interpreter lock per row (``json_group_array``
        on SQLite, ``json_agg`` on PostgreSQL, whose booleans stay booleans)."""
        if self.is_postgresql:
            return func.coalesce(
                cast(func.json_agg(func.json_build_array(*columns)), Text), "[]"
            )
        return func.json_group_array(func.json_array(*columns))

    def contains_text(self, column: ColumnElement[str], needle: str) -> ColumnElement[bool]:
        """``column`` holds ``needle`` anywhere, ignoring the case of every letter, as
        Python's ``str.lower`` folds it, on both backends: ``Émile`` finds ``ÉMILE``.

        An ASCII ``needle`` is a ``LIKE`` (SQLite) or ``ILIKE`` (PostgreSQL), which fold
        ASCII letters in any server locale and use no function per row. Any other is
        compared folded: on SQLite through the ``wb_fold`` function each connection has
        (:func:`fold_case`), on PostgreSQL through ``lower`` under the ICU root
        collation, whatever the database's own locale (a server without ICU folds as
        its locale does: every letter in a UTF-8 locale, ASCII ones in ``C``)."""
        if needle.isascii() or (self.is_postgresql and not self.icu):
            return self._like(column, "%" + _escaped(needle) + "%")
        find = func.strpos if self.is_postgresql else func.instr
        return find(self._folded(column), fold_case(needle)) > 0

    def starts_with_text(self, column: ColumnElement[str], prefix: str) -> ColumnElement[bool]:
        """``column`` starts with ``prefix``, ignoring case as :meth:`contains_text` does."""
        if prefix.isascii() or (self.is_postgresql and not self.icu):
            return self._like(column, _escaped(prefix) + "%")
        folded = fold_case(prefix)
        return func.substr(self._folded(column), 1, len(folded)) == folded

    def _folded(self, column: ColumnElement[str]) -> ColumnElement[str]:
        if self.is_postgresql:
            return func.lower(column.collate(ICU_ROOT))
        return func.wb_fold(column, type_=Text)

    def _like(self, column: ColumnElement[str], pattern: str) -> ColumnElement[bool]:
        if self.is_postgresql:
            return column.ilike(pattern, escape="\\")
        return column.like(pattern, escape="\\")


def fold_case(text: str) -> str:
    """``text`` with every letter's case folded as the session filter compares it."""
    return text.lower()


def sqlite_fold(text: str | None) -> str | None:
    """The SQLite function ``wb_fold``: :func:`fold_case`, NULL staying NULL."""
    return None if text is None else fold_case(text)


def _escaped(text: str) -> str:
    """``text`` as a ``LIKE`` pattern that matches it literally (escape character ``\\``)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


SQLITE_DIALECT = Dialect(SQLITE)
POSTGRESQL_DIALECT = Dialect(POSTGRESQL)
POSTGRESQL_ICU_DIALECT = Dialect(POSTGRESQL, icu=True)
ICU_ROOT = "und-x-icu"  # PostgreSQL's name for ICU's root collation



# -- planner hints that only SQLite takes ------------------------------------------------
# SQLite's planner is told which index to read (or not to read) in the statement itself;
# PostgreSQL's chooses from statistics and has no such syntax. These two constructs let
# one Core statement (built once, at import) say so on SQLite and nothing on PostgreSQL:
# each renders per dialect when the statement is compiled.


class IndexedAlias(Alias):
    """An alias of a table that SQLite reads through one named index (``INDEXED BY``)."""

    inherit_cache = True
    _traverse_internals = [*Alias._traverse_internals, ("index", InternalTraversal.dp_string)]
    index = ""


def indexed_alias(table: FromClause, name: str, index: str) -> IndexedAlias:
    """``table AS name``, read through ``index`` on SQLite (where a query's speed
    depends on that choice); a plain alias elsewhere."""
    alias = IndexedAlias._construct(table, name=name)
    alias.index = index
    return alias


@compiles(IndexedAlias, "sqlite")
def _indexed_on_sqlite(element: IndexedAlias, compiler: Any, **kw: Any) -> str:
    sql = str(compiler.visit_alias(element, **kw))
    if kw.get("asfrom") and not kw.get("ashint"):
        sql += f" INDEXED BY {element.index}"
    return sql


class Unindexed(ColumnElement[Any]):
    """A column SQLite must not look up through an index (``+column``): the planner
    then keeps the index it took for the other terms."""

    inherit_cache = True
    _traverse_internals = [("column", InternalTraversal.dp_clauseelement)]

    def __init__(self, column: ColumnElement[Any]):
        self.column = column
        self.type = column.type


def unindexed(column: ColumnElement[Any]) -> ColumnElement[Any]:
    """``+column`` on SQLite, ``column`` elsewhere."""
    return Unindexed(column)


@compiles(Unindexed)
def _unindexed(element: Unindexed, compiler: Any, **kw: Any) -> str:
    return str(compiler.process(element.column, **kw))


@compiles(Unindexed, "sqlite")
def _unindexed_on_sqlite(element: Unindexed, compiler: Any, **kw: Any) -> str:
    return "+" + str(compiler.process(element.column, **kw))
