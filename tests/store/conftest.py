"""Fixtures for the storage tests: a fresh database per test and small builders.

Test modules run with ``--import-mode=importlib`` and cannot import this file, so the
helpers they share are handed out as fixtures.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from workbench.core.conversation import Conversation, Message, SessionContext
from workbench.store import Database, Repository
from workbench.store.opening import open_database

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


def make_message(role: str, content: str, **fields: Any) -> Message:
    """A message as a format would hand it over."""
    return Message(role=role, content=content, **fields)


def make_conversation(
    title: str = "A conversation",
    contents: Sequence[tuple[str, str]] = (("user", "hello"), ("assistant", "hi there")),
    *,
    source: str | None = "test",
    source_id: str | None = None,
    context: SessionContext | None = None,
    start: datetime = T0,
    **fields: Any,
) -> Conversation:
    """A conversation of ``(role, content)`` pairs, one minute apart from ``start``."""
    messages = [
        Message(role=role, content=text, created_at=start + timedelta(minutes=i))
        for i, (role, text) in enumerate(contents)
    ]
    return Conversation(
        title=title,
        messages=messages,
        context=context or SessionContext(),
        source=source,
        source_id=source_id,
        **fields,
    )


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes, to prove the store did not touch it."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def raw_count(db_path: Path, table: str) -> int:
    """Rows of ``table`` read with a plain sqlite3 connection (not the store's own)."""
    conn = sqlite3.connect(str(db_path))
    try:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """Where the test's database lives (the folder does not exist yet)."""
    return tmp_path / "data" / "workbench.db"


@pytest.fixture
def db(db_target: Path | str) -> Iterator[Database]:
    """A freshly created and migrated database (a SQLite file or a team-store database,
    see ``backend``), closed after the test."""
    database = open_database(db_target)
    yield database
    database.close()


@pytest.fixture
def repo(db: Database) -> Repository:
    """The repository over :func:`db`."""
    return Repository(db)


@pytest.fixture
def msg() -> Callable[..., Message]:
    """:func:`make_message` as a fixture."""
    return make_message


@pytest.fixture
def conv() -> Callable[..., Conversation]:
    """:func:`make_conversation` as a fixture."""
    return make_conversation


@pytest.fixture
def digest() -> Callable[[Path], str]:
    """:func:`file_digest` as a fixture."""
    return file_digest


@pytest.fixture
def count_rows(db_path: Path, db: Database) -> Callable[[str], int]:
    """Count rows of a table of the test database from outside the store (a plain
    sqlite3 connection to the file; a connection of its own to the server)."""
    if db.is_file:
        return lambda table: raw_count(db_path, table)

    def count(table: str) -> int:
        import sqlalchemy as sa

        engine = sa.create_engine(db.engine.url)
        try:
            with engine.connect() as conn:
                return int(conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one())
        finally:
            engine.dispose()

    return count


@pytest.fixture
def check_counts(repo: Repository) -> Callable[[int], None]:
    """Assert a session's cached message and token counts equal a recomputation."""

    def check(session_id: int) -> None:
        info = repo.get_session(session_id)
        messages = repo.list_messages(session_id)
        assert info.message_count == len(messages)
        assert info.token_count == sum(m.token_count or 0 for m in messages if m.state == "active")
        assert [m.position for m in messages] == list(range(len(messages)))

    return check
