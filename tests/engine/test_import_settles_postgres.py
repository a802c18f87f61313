"""After an import into the team store, its tables are vacuumed and analyzed in the
background (``PostgresDatabase.settle``), so that the first requests over the new rows
do not wait for autovacuum: the planner knows them and their pages are all-visible.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, make_url, text

from workbench.core.conversation import Conversation, Message, SessionContext
from workbench.engine.importing import count_missing_tokens, import_conversations
from workbench.store import Repository
from workbench.store.db import Database
from workbench.store.opening import open_database


@pytest.fixture
def pg_db(pg_db_url: str) -> Iterator[Database]:
    # As a server runs by default: the test server's asynchronous commits would leave
    # the rows' commit hint bits unset for a moment, and no page all-visible then.
    url = make_url(pg_db_url)
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'ALTER DATABASE "{url.database}" SET synchronous_commit TO on'))
    admin.dispose()
    db = open_database(pg_db_url)
    yield db
    db.close()


def _conversations(count: int, prefix: str = "c") -> list[Conversation]:
    return [
        Conversation(
            title=f"{prefix}{i}",
            messages=[Message(("user", "assistant")[j % 2], f"{prefix} {i} words {j}")
                      for j in range(40)],
            context=SessionContext(),
            source="test",
            source_id=f"{prefix}{i}",
        )
        for i in range(count)
    ]


def _messages_table(db: Database) -> tuple[int, int, float, int]:
    """The messages table's pages, all-visible pages, the planner's row count and the
    real one."""
    with db.query() as conn:
        pages, visible, tuples = conn.execute(text(
            "SELECT relpages, relallvisible, reltuples FROM pg_class"
            " WHERE oid = 'messages'::regclass")).one()
        rows = conn.execute(text("SELECT count(*) FROM messages")).scalar_one()
    return int(pages), int(visible), float(tuples), int(rows)


def _vacuumed_and_analyzed(db: Database) -> tuple[int, int]:
    """How many times the messages table was vacuumed and analyzed by hand (not by
    autovacuum): the server counts them as it finishes each."""
    with db.query() as conn:
        vacuums, analyzes = conn.execute(text(
            "SELECT vacuum_count, analyze_count FROM pg_stat_user_tables"
            " WHERE relname = 'messages'")).one()
    return int(vacuums), int(analyzes)


def _settled(db: Database) -> int:
    merger = db._merger  # type: ignore[attr-defined]
    assert merger.wait_idle(120)
    assert merger.last_error is None
    return int(merger.settles)


def test_an_import_leaves_the_planner_knowing_its_rows_and_their_pages_visible(
    pg_db: Database,
) -> None:
    repo = Repository(pg_db)
    report = import_conversations(repo, _conversations(60))
    assert len(report.sessions) == 60
    assert _settled(pg_db) == 1
    pages, visible, tuples, rows = _messages_table(pg_db)
    assert rows == 2400
    assert tuples == rows  # analyzed: not the -1 ("never") of a table autovacuum skipped
    assert pages > 0 and visible == pages  # vacuumed: index-only scans skip the heap


def test_an_import_that_stores_nothing_new_settles_nothing(pg_db: Database) -> None:
    repo = Repository(pg_db)
    import_conversations(repo, _conversations(3))
    assert _settled(pg_db) == 1
    report = import_conversations(repo, _conversations(3))  # the same file again
    assert report.counts()["unchanged"] == 3
    assert _settled(pg_db) == 1


def test_the_counting_pass_after_an_import_settles_the_rows_it_rewrote(
    pg_db: Database,
) -> None:
    repo = Repository(pg_db)
    import_conversations(repo, _conversations(20), count_tokens=False)
    assert _settled(pg_db) == 1
    steps = list(count_missing_tokens(repo, chunk=300))
    assert steps[-1] == (800, 800)
    assert _settled(pg_db) == 2
    _pages, _visible, tuples, rows = _messages_table(pg_db)
    assert tuples == rows == 800
    assert _vacuumed_and_analyzed(pg_db) == (2, 2)  # after the import, after the count
    assert list(count_missing_tokens(repo)) == []  # nothing left: no further settle
    assert _settled(pg_db) == 2
