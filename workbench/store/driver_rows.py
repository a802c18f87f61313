"""Core statements run on the driver's own cursor, for reads of thousands of rows.

Building SQLAlchemy rows costs more than such a query; the driver's plain tuples do not.
Each statement is compiled once per dialect (statements live as long as their module: a
constant, or built once per dialect), and its text reused.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select
from sqlalchemy.engine import Connection

# (statement id, dialect) -> (text, parameter names in order for a positional driver,
# fixed values).
_COMPILED: dict[tuple[int, str], tuple[str, tuple[str, ...] | None, dict[str, Any]]] = {}


def driver_cursor(conn: Connection, statement: Select[Any], params: dict[str, Any]) -> Any:
    """The driver's own cursor with ``statement`` executed (its rows are plain tuples);
    the caller closes it."""
    dialect = conn.dialect
    key = (id(statement), dialect.name)
    found = _COMPILED.get(key)
    if found is None:
        compiled = statement.compile(dialect=dialect)
        order = tuple(compiled.positiontup or ()) if compiled.positional else None
        found = _COMPILED[key] = (compiled.string, order, dict(compiled.params))
    sql, order, fixed = found
    values = {**fixed, **params}
    args: Any = tuple(values[name] for name in order) if order is not None else values
    cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    cursor.execute(sql, args)
    return cursor


def driver_rows(conn: Connection, statement: Select[Any], params: dict[str, Any]) -> list[Any]:
    """Every row of ``statement`` as the driver's tuples."""
    cursor = driver_cursor(conn, statement, params)
    try:
        rows: list[Any] = cursor.fetchall()
        return rows
    finally:
        cursor.close()
