"""The migrated schema agrees with the SQLModel tables, and the full-text index follows."""

from __future__ import annotations

import re
from typing import Any

import pytest
from sqlalchemy import Table
from sqlalchemy.dialects import sqlite
from sqlmodel import SQLModel

import workbench.store.tables  # noqa: F401 - registers the tables on SQLModel.metadata
from workbench.store import Database

# The SQLite file's schema against the models; the team store's is compared with this
# one column by column in test_schema_postgres.py.
pytestmark = pytest.mark.sqlite_only("the SQLite file's own schema (sqlite_master, FTS5, triggers)")

MODEL_TABLES: dict[str, Table] = dict(SQLModel.metadata.tables)

# SQLite type affinity of a column type name (https://sqlite.org/datatype3.html rules).
_AFFINITY_RULES = (
    ("INT", "INTEGER"),
    ("CHAR", "TEXT"),
    ("CLOB", "TEXT"),
    ("TEXT", "TEXT"),
    ("REAL", "REAL"),
    ("FLOA", "REAL"),
    ("DOUB", "REAL"),
)


def _affinity(type_name: str) -> str:
    upper = type_name.upper()
    for needle, affinity in _AFFINITY_RULES:
        if needle in upper:
            return affinity
    # BOOLEAN is NUMERIC in SQLite; it stores the same 0/1 integers as INTEGER.
    return "INTEGER" if upper == "BOOLEAN" else "NUMERIC"


def _table_info(db: Database, table: str) -> list[Any]:
    with db.read() as conn:
        return conn.exec_driver_sql(f"PRAGMA table_info({table})").all()


def _fts_check(db: Database, fts_table: str) -> None:
    """FTS5's own consistency check against the external content table."""
    with db.write() as conn:
        conn.exec_driver_sql(
            f"INSERT INTO {fts_table}({fts_table}, rank) VALUES ('integrity-check', 1)"
        )


def test_every_model_table_exists(db: Database) -> None:
    with db.read() as conn:
        tables = {
            r[0]
            for r in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
    assert set(MODEL_TABLES) <= tables


def test_every_plain_table_has_a_model(db: Database) -> None:
    with db.read() as conn:
        rows = conn.exec_driver_sql(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        ).all()
    plain = {name for name, sql in rows if not sql.upper().startswith("CREATE VIRTUAL TABLE")}
    # FTS5 shadow tables (name_data, name_idx, ...) belong to the virtual tables.
    virtual = {name for name, sql in rows if sql.upper().startswith("CREATE VIRTUAL TABLE")}
    plain = {t for t in plain if not any(t.startswith(v + "_") for v in virtual)}
    assert plain == set(MODEL_TABLES)


@pytest.mark.parametrize("table", sorted(MODEL_TABLES))
def test_columns_match_the_model(db: Database, table: str) -> None:
    info = _table_info(db, table)
    model = MODEL_TABLES[table]
    assert {r[1] for r in info} == {c.name for c in model.columns}


@pytest.mark.parametrize("table", sorted(MODEL_TABLES))
def test_primary_keys_match_the_model(db: Database, table: str) -> None:
    info = _table_info(db, table)
    model = MODEL_TABLES[table]
    assert {r[1] for r in info if r[5]} == {c.name for c in model.primary_key.columns}


@pytest.mark.parametrize("table", sorted(MODEL_TABLES))
def test_column_types_have_the_same_affinity(db: Database, table: str) -> None:
    model = MODEL_TABLES[table]
    dialect = sqlite.dialect()
    for row in _table_info(db, table):
        column = model.columns[row[1]]
        model_type = column.type.compile(dialect=dialect)
        assert _affinity(row[2]) == _affinity(model_type), (table, row[1], row[2], model_type)


@pytest.mark.parametrize("table", sorted(MODEL_TABLES))
def test_model_never_allows_null_where_the_database_refuses_it(db: Database, table: str) -> None:
    # A model column that may be None but is NOT NULL in the file would fail on write.
    model = MODEL_TABLES[table]
    for row in _table_info(db, table):
        name, notnull, is_pk = row[1], bool(row[3]), bool(row[5])
        if notnull and not is_pk:
            assert not model.columns[name].nullable, (table, name)


@pytest.mark.parametrize("table", sorted(MODEL_TABLES))
def test_model_allows_null_where_the_database_does(db: Database, table: str) -> None:
    # The other way round: a model that refuses NULL where the file takes it would make a
    # database created from the tables (PostgreSQL) stricter than the migrated file.
    model = MODEL_TABLES[table]
    for row in _table_info(db, table):
        name, notnull, is_pk = row[1], bool(row[3]), bool(row[5])
        if not notnull and not is_pk:
            assert model.columns[name].nullable, (table, name)


@pytest.mark.parametrize("table", sorted(MODEL_TABLES))
def test_foreign_keys_match_the_model(db: Database, table: str) -> None:
    with db.read() as conn:
        fks = conn.exec_driver_sql(f"PRAGMA foreign_key_list({table})").all()
    in_file = {(r[3], r[2]) for r in fks}  # (from column, referenced table)
    in_model = {
        (c.name, fk.column.table.name) for c in MODEL_TABLES[table].columns for fk in c.foreign_keys
    }
    assert in_file == in_model


def test_full_text_tables_cover_messages_sessions_and_memory(db: Database) -> None:
    with db.read() as conn:
        rows = conn.exec_driver_sql(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql LIKE '%fts5(%'"
        ).all()
    content_tables = set()
    for _name, sql in rows:
        found = re.search(r"content\s*=\s*'(\w+)'", sql)
        assert found, sql
        content_tables.add(found.group(1))
        assert "remove_diacritics" in sql
    assert content_tables == {"messages", "sessions", "memory_entries"}


def test_triggers_exist_for_each_change_of_each_indexed_table(db: Database) -> None:
    with db.read() as conn:
        rows = conn.exec_driver_sql(
            "SELECT tbl_name, sql FROM sqlite_master WHERE type = 'trigger'"
        ).all()
    events = {
        (table, re.search(r"AFTER\s+(\w+)", sql, re.I).group(1).upper()) for table, sql in rows
    }
    for table in ("messages", "sessions", "memory_entries"):
        for event in ("INSERT", "UPDATE", "DELETE"):
            assert (table, event) in events


def _matches(db: Database, fts_table: str, word: str) -> list[int]:
    with db.read() as conn:
        return [
            r[0]
            for r in conn.exec_driver_sql(
                f"SELECT rowid FROM {fts_table} WHERE {fts_table} MATCH ? ORDER BY rowid",
                (word,),
            )
        ]


def test_triggers_keep_every_index_in_step_with_raw_sql(db: Database) -> None:
    t = "2024-01-01T00:00:00.000000Z"
    with db.write() as conn:
        conn.exec_driver_sql(
            "INSERT INTO agents (id, name, created_at, updated_at) VALUES (1, 'a', ?, ?)", (t, t)
        )
        conn.exec_driver_sql(
            "INSERT INTO sessions (id, agent_id, title, created_at, updated_at)"
            " VALUES (1, 1, 'walrus meeting', ?, ?)",
            (t, t),
        )
        conn.exec_driver_sql(
            "INSERT INTO messages (id, session_id, position, role, content, created_at)"
            " VALUES (1, 1, 0, 'user', 'pelican facts', ?)",
            (t,),
        )
        conn.exec_driver_sql(
            "INSERT INTO memory_entries (id, agent_id, content, content_hash, created_at)"
            " VALUES (1, 1, 'otter habits', 'h', ?)",
            (t,),
        )
    assert _matches(db, "sessions_fts", "walrus") == [1]
    assert _matches(db, "messages_fts", "pelican") == [1]
    assert _matches(db, "memory_fts", "otter") == [1]

    with db.write() as conn:
        conn.exec_driver_sql("UPDATE sessions SET title = 'narwhal meeting'")
        conn.exec_driver_sql("UPDATE messages SET content = 'heron facts'")
        conn.exec_driver_sql("UPDATE memory_entries SET content = 'beaver habits'")
    assert _matches(db, "sessions_fts", "walrus") == []
    assert _matches(db, "sessions_fts", "narwhal") == [1]
    assert _matches(db, "messages_fts", "pelican") == []
    assert _matches(db, "messages_fts", "heron") == [1]
    assert _matches(db, "memory_fts", "otter") == []
    assert _matches(db, "memory_fts", "beaver") == [1]
    for fts in ("sessions_fts", "messages_fts", "memory_fts"):
        _fts_check(db, fts)

    with db.write() as conn:
        conn.exec_driver_sql("DELETE FROM memory_entries")
        conn.exec_driver_sql("DELETE FROM sessions")  # messages go by cascade
    assert _matches(db, "sessions_fts", "narwhal") == []
    assert _matches(db, "messages_fts", "heron") == []
    assert _matches(db, "memory_fts", "beaver") == []
    for fts in ("sessions_fts", "messages_fts", "memory_fts"):
        _fts_check(db, fts)


def test_message_role_and_state_are_checked_by_the_file(db: Database) -> None:
    t = "2024-01-01T00:00:00.000000Z"
    with db.write() as conn:
        conn.exec_driver_sql(
            "INSERT INTO agents (id, name, created_at, updated_at) VALUES (1, 'a', ?, ?)", (t, t)
        )
        conn.exec_driver_sql(
            "INSERT INTO sessions (id, agent_id, title, created_at, updated_at)"
            " VALUES (1, 1, 's', ?, ?)",
            (t, t),
        )
    for role, state in (("narrator", "active"), ("user", "archived")):
        with pytest.raises(Exception, match="CHECK"), db.write() as conn:
            conn.exec_driver_sql(
                "INSERT INTO messages (session_id, position, role, content, created_at, state)"
                " VALUES (1, 0, ?, 'x', ?, ?)",
                (role, t, state),
            )
