"""The planner hints only SQLite takes (store/dialect.py): one Core statement says
``INDEXED BY`` and ``+column`` on SQLite and nothing of them on PostgreSQL."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from workbench.store.dialect import indexed_alias, unindexed
from workbench.store.schema import MESSAGES


def _statement() -> sa.Select[tuple[int]]:
    t = indexed_alias(MESSAGES, "t", "ix_messages_session_position")
    return sa.select(t.c.id).where(
        t.c.session_id == sa.bindparam("sid"), unindexed(t.c.position) > sa.bindparam("after")
    )


def test_sqlite_is_told_the_index_and_the_column_to_leave_alone() -> None:
    sql = " ".join(str(_statement().compile(dialect=sqlite.dialect())).split())
    assert "FROM messages AS t INDEXED BY ix_messages_session_position WHERE" in sql
    assert "+t.position > ?" in sql


def test_postgresql_gets_the_plain_statement() -> None:
    sql = " ".join(str(_statement().compile(dialect=postgresql.dialect())).split())
    assert "INDEXED" not in sql and "+" not in sql
    assert "FROM messages AS t WHERE" in sql and "t.position >" in sql


def test_statements_with_other_indexes_are_cached_apart() -> None:
    a = indexed_alias(MESSAGES, "t", "ix_one")
    b = indexed_alias(MESSAGES, "t", "ix_two")
    key_a = sa.select(a.c.id)._generate_cache_key()
    key_b = sa.select(b.c.id)._generate_cache_key()
    assert key_a is not None and key_b is not None and key_a != key_b
    assert "ix_two" in str(sa.select(b.c.id).compile(dialect=sqlite.dialect()))


def test_the_hints_run_on_a_sqlite_database() -> None:
    engine = sa.create_engine("sqlite://")
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id INTEGER,"
                             " position INTEGER)")
        conn.exec_driver_sql("CREATE INDEX ix_messages_session_position"
                             " ON messages (session_id, position)")
        conn.exec_driver_sql("INSERT INTO messages (session_id, position) VALUES (1, 0), (1, 1)")
        rows = conn.execute(_statement(), {"sid": 1, "after": 0}).scalars().all()
    engine.dispose()
    assert rows == [2]
