"""The migrations and the SQLModel tables agree on PostgreSQL as on SQLite.

First steps of the team store (SPEC §10), on a real PostgreSQL server started by the test
session (tests/pg_server.py): the one ordered list of migrations gives PostgreSQL the same
tables, columns, keys, nullability, foreign keys and indexes as the migrated SQLite file
(and tests/store/test_schema.py checks that file against the SQLModel tables); a row of
every table written through the SQLModel tables reads back the same on both backends;
two desktops migrating at once apply each change once; a newer database is refused.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlmodel import SQLModel

import workbench.store.migrate_postgresql as migrate_module
import workbench.store.tables as tables
from workbench.errors import DatabaseVersionError, StorageError
from workbench.store import Database
from workbench.store.migrate_postgresql import migrate_postgresql
from workbench.store.migrations import MIGRATIONS, PG_SEARCH_COLUMNS, Migration

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
    """A PostgreSQL database brought to the current schema by the migrations."""
    engine = sa.create_engine(pg_url)
    assert migrate_postgresql(engine) == [m.name for m in MIGRATIONS]
    yield engine
    engine.dispose()


@pytest.fixture
def migrated(tmp_path: Path) -> Any:
    db = Database.open(tmp_path / "migrated.db")
    yield db
    db.close()


# The SQLite inspector says it skips the expression index; it is compared by name below.
@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection")
def test_every_table_and_column_of_the_migrated_file_exists_on_postgresql(
    pg_engine: Any, migrated: Database
) -> None:
    pg = sa.inspect(pg_engine)
    sqlite_side = sa.inspect(migrated.engine)
    assert set(MODEL_TABLES) <= set(pg.get_table_names())
    for table in MODEL_TABLES:
        # The search columns and their indexes are PostgreSQL's FTS5 tables: not data.
        on_pg = {c["name"]: c for c in pg.get_columns(table)
                 if c["name"] not in PG_SEARCH_COLUMNS.get(table, ())}
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
        # Indexes by name; UNIQUE column constraints by their columns (SQLite's own
        # indexes for them have no name of ours, PostgreSQL's are listed as constraints).
        with migrated.read() as conn:  # expression indexes too (the inspector skips them)
            file_indexes = set(conn.exec_driver_sql(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?"
                " AND sql IS NOT NULL", (table,)).scalars())
        assert {i["name"] for i in pg.get_indexes(table)
                if not i.get("duplicates_constraint")
                and not i["name"].endswith(("_search", "_trgm"))} == file_indexes, table
        assert {tuple(u["column_names"]) for u in pg.get_unique_constraints(table)} == {
            tuple(u["column_names"]) for u in sqlite_side.get_unique_constraints(table)
        }, table


def test_migrating_again_applies_nothing(pg_engine: Any) -> None:
    assert migrate_postgresql(pg_engine) == []
    with pg_engine.connect() as conn:
        names = conn.execute(sa.text("SELECT name FROM schema_migrations")).scalars().all()
    assert sorted(names) == sorted(m.name for m in MIGRATIONS)


def test_two_desktops_migrating_at_once_apply_each_change_once(pg_url: str) -> None:
    import threading

    engines = [sa.create_engine(pg_url) for _ in range(2)]
    start = threading.Barrier(2)
    results: list[list[str]] = [[], []]
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            start.wait()
            results[i] = migrate_postgresql(engines[i])
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(results[0] + results[1]) == sorted(m.name for m in MIGRATIONS)
    with engines[0].connect() as conn:
        names = conn.execute(sa.text("SELECT name FROM schema_migrations")).scalars().all()
    assert sorted(names) == sorted(m.name for m in MIGRATIONS)
    for engine in engines:
        engine.dispose()


def test_a_database_of_a_newer_version_is_refused_and_left_alone(pg_engine: Any) -> None:
    with pg_engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO schema_migrations VALUES ('9999_future', 'x')"))
        before = sa.inspect(conn).get_table_names()
    with pytest.raises(DatabaseVersionError, match="9999_future"):
        migrate_postgresql(pg_engine)
    assert sa.inspect(pg_engine).get_table_names() == before


def test_a_failing_change_is_rolled_back_whole(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = Migration("9000_broken", (), (
        "CREATE TABLE half_done (id INTEGER)",
        "ALTER TABLE no_such_table ADD COLUMN x TEXT",
    ))
    monkeypatch.setattr(migrate_module, "MIGRATIONS", (*MIGRATIONS, broken))
    engine = sa.create_engine(pg_url)
    with pytest.raises(StorageError, match="9000_broken"):
        migrate_postgresql(engine)
    tables_now = sa.inspect(engine).get_table_names()
    assert "half_done" not in tables_now and "messages" in tables_now
    with engine.connect() as conn:
        names = conn.execute(sa.text("SELECT name FROM schema_migrations")).scalars().all()
    assert "9000_broken" not in names and len(names) == len(MIGRATIONS)
    engine.dispose()


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
    migrated = Database.open(tmp_path / "plain.db")
    expected = [row for _, row in _rows()]
    with migrated.engine.begin() as conn:  # the ledger row the file already has goes
        conn.execute(sa.delete(tables.schema_migrations))
    with pg_engine.begin() as conn:
        conn.execute(sa.delete(tables.schema_migrations))
    assert _write_and_read(migrated.engine) == expected
    assert _write_and_read(pg_engine) == expected
    migrated.close()
