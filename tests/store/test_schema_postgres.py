"""The SQLModel tables, the one description of the schema, hold on PostgreSQL as on SQLite.

First steps of the team store (SPEC §10): the tables create on a real PostgreSQL server
started by the test session (tests/pg_server.py), with the same columns, keys, nullability
and foreign keys as the migrated SQLite file, and a row of every table written through the
tables reads back the same on both backends (times, JSON, booleans, text with any
character the store accepts).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlmodel import SQLModel

import workbench.store.tables as tables
from workbench.store import Database

MODEL_TABLES = dict(SQLModel.metadata.tables)

# How SQLite's affinities of the migrated file read on PostgreSQL.
_PG_FAMILY = {"INTEGER": "int", "TEXT": "text", "REAL": "float"}


def _pg_family(type_name: str) -> str:
    name = type_name.upper()
    if "INT" in name or name == "BOOLEAN":
        return "int"
    if "CHAR" in name or "TEXT" in name:
        return "text"
    if "DOUBLE" in name or "REAL" in name or "FLOAT" in name or "NUMERIC" in name:
        return "float"
    return name


def _sqlite_family(type_name: str) -> str:
    name = type_name.upper()
    if "INT" in name or name == "BOOLEAN":
        return "int"
    if "CHAR" in name or "TEXT" in name or "CLOB" in name:
        return "text"
    return "float"


@pytest.fixture
def pg_engine(pg_url: str) -> Any:
    engine = sa.create_engine(pg_url)
    SQLModel.metadata.create_all(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def migrated(tmp_path: Path) -> Any:
    db = Database.open(tmp_path / "migrated.db")
    yield db
    db.close()


def test_every_table_and_column_of_the_migrated_file_exists_on_postgresql(
    pg_engine: Any, migrated: Database
) -> None:
    pg = sa.inspect(pg_engine)
    sqlite_side = sa.inspect(migrated.engine)
    assert set(MODEL_TABLES) <= set(pg.get_table_names())
    for table in MODEL_TABLES:
        on_pg = {c["name"]: c for c in pg.get_columns(table)}
        in_file = {c["name"]: c for c in sqlite_side.get_columns(table)}
        assert set(on_pg) == set(in_file), table
        for name, column in in_file.items():
            assert _pg_family(str(on_pg[name]["type"])) == _sqlite_family(
                str(column["type"])
            ), (table, name, on_pg[name]["type"], column["type"])
            if not column.get("primary_key"):
                assert on_pg[name]["nullable"] == column["nullable"], (table, name)
        pk_pg = set(pg.get_pk_constraint(table)["constrained_columns"])
        pk_file = set(sqlite_side.get_pk_constraint(table)["constrained_columns"])
        assert pk_pg == pk_file, table
        fk_pg = {(tuple(f["constrained_columns"]), f["referred_table"])
                 for f in pg.get_foreign_keys(table)}
        fk_file = {(tuple(f["constrained_columns"]), f["referred_table"])
                   for f in sqlite_side.get_foreign_keys(table)}
        assert fk_pg == fk_file, table


T = datetime(2025, 3, 1, 12, 30, 45, 123456, tzinfo=UTC)
AWKWARD = "naïve café 🦜 \u200b <b>not markup</b> 'quoted' \"double\" back\\slash"


def _rows() -> list[tuple[sa.Table, dict[str, Any]]]:
    return [
        (tables.agents, {"id": 1, "name": "default", "instructions": AWKWARD,
                         "memory_policy": {"keep_last": 20}, "tools": ["read_file"],
                         "created_at": T, "updated_at": T}),
        (tables.sessions, {"id": 1, "agent_id": 1, "title": AWKWARD, "created_at": T,
                           "updated_at": T, "tags": ["a", "é"], "pinned": True,
                           "archived": False, "metadata": {"model": "o4-mini"}}),
        (tables.messages, {"id": 1, "session_id": 1, "position": 0, "role": "assistant",
                           "content": AWKWARD, "parts": [{"type": "text", "text": "x"}],
                           "tool_calls": [{"id": "c1", "type": "function"}],
                           "created_at": T, "token_count": 12, "important": True,
                           "metadata": {"status": "finished"}}),
        (tables.session_context, {"session_id": 1, "facts": [{"text": "f"}], "summary": "s",
                                  "updated_at": T}),
        (tables.memory_entries, {"id": 1, "agent_id": 1, "content": AWKWARD,
                                 "content_hash": "h", "created_at": T}),
        (tables.compactions, {"id": 1, "session_id": 1, "created_at": T, "policy": "p",
                              "summarizer": "extractive", "details": {"folded": [1, 2]},
                              "undone_at": None}),
        (tables.provider_configs, {"id": 1, "name": "local", "kind": "openai",
                                   "base_url": "http://127.0.0.1:8080/v1", "model": "m",
                                   "temperature": 0.25, "created_at": T, "updated_at": T}),
        (tables.settings, {"key": "first_run", "value": {"done": True}}),
        (tables.schema_migrations, {"name": "0001_initial", "applied_at": T}),
    ]


def _write_and_read(engine: Any) -> list[dict[str, Any]]:
    with engine.begin() as conn:
        for table, row in _rows():
            conn.execute(sa.insert(table).values(**row))
    out = []
    with engine.connect() as conn:
        for table, row in _rows():
            read = conn.execute(sa.select(table)).mappings().one()
            out.append({key: read[key] for key in row})
    return out


def test_a_row_of_every_table_reads_back_the_same_on_both_backends(
    pg_engine: Any, tmp_path: Path
) -> None:
    sqlite_engine = sa.create_engine(f"sqlite:///{tmp_path / 'plain.db'}")
    SQLModel.metadata.create_all(sqlite_engine)
    expected = [row for _, row in _rows()]
    assert _write_and_read(sqlite_engine) == expected
    assert _write_and_read(pg_engine) == expected
    sqlite_engine.dispose()
