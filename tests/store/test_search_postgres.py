"""Search on PostgreSQL finds what search on SQLite finds (SPEC §5 on the team store).

One corpus is written to a SQLite file through the repository, then copied row by row into
a migrated PostgreSQL database (tests/pg_server.py). Every query class of the query
language (words, phrases, prefixes, OR, NOT, symbols, accents, non-Latin scripts, the
role, state, session, agent, date and archive filters, titles and memory) must give the
same hits on both backends; scores differ (BM25 against ts_rank), so hits are compared as
sets, with a limit above the number of matches. (One known difference: PostgreSQL's
``unaccent`` also folds ``ß`` to ``ss``, so "strasse" finds "Straße" there and not on
SQLite.)
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

import workbench.store.search_postgresql as pg_search
import workbench.store.tables as tables
from tests.pg_server import PostgresServer
from workbench.core.conversation import Message
from workbench.store import Database
from workbench.store.migrate_postgresql import migrate_postgresql
from workbench.store.repository import Repository
from workbench.store.search_postgresql import search_postgresql
from workbench.store.searching import SearchQuery, search

T0 = datetime(2025, 1, 1, 9, 0, tzinfo=UTC)

SPECIAL = [
    "The refund goes to the original payment method in 5 to 7 business days.",
    "Refunds are processed; REFUND policy applies to economy only.",
    "A café crème and a naïve approach to Straße names.",
    "felelis.py raised an error in line 12",
    "see https://example.org/docs/path?x=1 for the docs",
    "mapping a -> b and c -> d",
    "def __init__(self): the constructor",
    "Привет мир, это тест",
    "Ωmega is the last letter",
    "original payment was a gift card",
    "payment original order reversed",
    "refunding takes time",
]
VOCABULARY = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
              "india", "juliet", "kilo", "lima", "refund", "payment", "cabin", "economy"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A SQLite file with the corpus, and what the tests need to know of it."""
    db = Database.open(tmp_path_factory.mktemp("search") / "corpus.db")
    repo = Repository(db)
    rng = random.Random(7)
    other_agent = repo.create_agent("second").id
    sessions = []
    for i in range(6):
        agent = other_agent if i == 5 else None
        title = ["Refund questions", "Café planning", "Build errors", "Misc",
                 "Payment original", "Second agent refund"][i]
        sessions.append(repo.create_session(title, agent_id=agent,
                                            created_at=T0 + timedelta(days=i)).id)
    messages_by_session: dict[int, list[Message]] = {s: [] for s in sessions}
    for n, content in enumerate(SPECIAL):
        messages_by_session[sessions[n % len(sessions)]].append(
            Message(role=["user", "assistant"][n % 2], content=content,
                    created_at=T0 + timedelta(hours=n)))
    for n in range(240):
        words = " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(3, 12)))
        messages_by_session[sessions[n % len(sessions)]].append(
            Message(role=["user", "assistant", "tool", "system"][n % 4], content=words,
                    created_at=T0 + timedelta(days=1 + n % 9, minutes=n)))
    for session_id, messages in messages_by_session.items():
        repo.append_messages(session_id, messages)
    repo.set_archived(sessions[3], True)
    stored = repo.list_messages(sessions[0])
    repo.set_state([m.id for m in stored[:5] if m.id is not None], "folded")
    default_agent = repo.default_agent().id
    repo.add_memory_entry(default_agent, "The user prefers refunds by gift card.")
    repo.add_memory_entry(default_agent, "Prefers a café near the office.")
    repo.add_memory_entry(other_agent, "Refund policy of the second agent.")
    yield {"db": db, "sessions": sessions, "agents": (default_agent, other_agent)}
    db.close()


@pytest.fixture(scope="module")
def pg(pg_server: PostgresServer, corpus: Any) -> Any:
    """A migrated PostgreSQL database holding a copy of the corpus (read-only for the
    tests: a test that writes rolls back)."""
    admin = sa.create_engine(pg_server.url(), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text("CREATE DATABASE search_parity"))
    engine = sa.create_engine(pg_server.url("search_parity"))
    migrate_postgresql(engine)
    source = corpus["db"].engine
    copied = (tables.agents, tables.sessions, tables.messages, tables.memory_entries)
    with source.connect() as src, engine.begin() as dst:
        for table in copied:
            rows = [dict(r) for r in src.execute(sa.select(table)).mappings()]
            if rows:
                dst.execute(sa.insert(table), rows)
            # Rows came with their ids: the identity goes on after the highest.
            dst.execute(sa.text(
                f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'),"
                f" (SELECT max(id) FROM {table.name}))"))
    yield engine
    engine.dispose()
    with admin.connect() as conn:
        conn.execute(sa.text("DROP DATABASE search_parity WITH (FORCE)"))
    admin.dispose()


def _keys(hits: list[Any]) -> set[tuple[Any, ...]]:
    return {(h.kind, h.session_id, h.message_id, h.memory_id) for h in hits}


QUERIES = [
    "refund", "REFUND", "refund*", "refunds", '"original payment"', '"payment original"',
    "refund OR crème", "refund NOT policy", "refund -policy", "cafe", "café", "naive",
    "straße", "felelis.py", "felelis", "py", "->", "__init__", "привет",
    "example.org", "ωmega", "omega", "alpha bravo", "alpha OR zulu", "zulu", "echo -golf",
    "pay*", '"gift card"', "cabin economy refund",
]


@pytest.mark.parametrize("text", QUERIES)
def test_every_query_finds_the_same_hits_on_both_backends(
    corpus: Any, pg: Any, text: str
) -> None:
    query = SearchQuery(text, limit=1000)
    on_sqlite = search(corpus["db"], query)
    with pg.connect() as conn:
        on_pg = search_postgresql(conn, query)
    assert _keys(on_pg) == _keys(on_sqlite), text
    assert [h.score for h in on_pg] == sorted((h.score for h in on_pg), reverse=True)


def _filters(corpus: Any) -> list[dict[str, Any]]:
    sessions = corpus["sessions"]
    return [
        {"roles": ["user"]},
        {"roles": ["assistant", "tool"]},
        {"states": ["folded"]},
        {"states": ["active"]},
        {"session_id": sessions[1]},
        {"agent_id": corpus["agents"][1]},
        {"date_from": T0 + timedelta(days=3), "date_to": T0 + timedelta(days=6)},
        {"include_archived": False},
        {"kinds": ["session"]},
        {"kinds": ["memory"]},
        {"kinds": ["memory"], "agent_id": corpus["agents"][0]},
    ]


@pytest.mark.parametrize("text", ["refund", "alpha", "payment OR cabin", "->", "cafe"])
@pytest.mark.parametrize("which", range(11))
def test_filters_keep_the_same_hits_on_both_backends(
    corpus: Any, pg: Any, text: str, which: int
) -> None:
    query = SearchQuery(text, limit=1000, **_filters(corpus)[which])
    on_sqlite = search(corpus["db"], query)
    with pg.connect() as conn:
        on_pg = search_postgresql(conn, query)
    assert _keys(on_pg) == _keys(on_sqlite), (text, _filters(corpus)[which])


def test_snippets_mark_the_words_found(pg: Any) -> None:
    with pg.connect() as conn:
        hits = search_postgresql(conn, SearchQuery("original payment", kinds=["message"]))
    assert hits
    assert all("«" in h.snippet and "»" in h.snippet for h in hits)
    assert any("«original»" in h.snippet.lower() for h in hits)


def test_a_common_word_ranks_only_the_newest_matches(
    pg: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pg.connect() as conn:
        every = {h.message_id for h in search_postgresql(
            conn, SearchQuery("alpha", limit=1000, kinds=["message"]))}
        monkeypatch.setattr(pg_search, "RANK_WINDOW", 10)
        few = search_postgresql(conn, SearchQuery("alpha", limit=5, kinds=["message"]))
    assert len(every) > 10
    newest = set(sorted(every)[-10:])
    assert len(few) == 5 and {h.message_id for h in few} <= newest


def test_a_huge_message_is_stored_and_its_words_found(pg: Any) -> None:
    words = ["zebra"] + [f"w{i}" for i in range(200_000)]  # far beyond a tsvector's 1 MB
    with pg.connect() as conn:
        session_id = conn.execute(sa.select(tables.sessions.c.id).limit(1)).scalar_one()
        conn.execute(sa.insert(tables.messages).values(
            session_id=session_id, position=10_000, role="user", content=" ".join(words),
            created_at=T0))
        hits = search_postgresql(conn, SearchQuery("zebra", kinds=["message"]))
        conn.rollback()
    assert len(hits) == 1 and "«zebra»" in hits[0].snippet


def test_input_is_never_sql(pg: Any, corpus: Any) -> None:
    hostile = ["'); DROP TABLE messages; --", "a:* & !b | <->", "\\", "%", "_", ":p0",
               '"unclosed', "NOT", "OR", "*", "-"]
    with pg.connect() as conn:
        for text in hostile:
            on_pg = search_postgresql(conn, SearchQuery(text, limit=1000))
            on_sqlite = search(corpus["db"], SearchQuery(text, limit=1000))
            assert _keys(on_pg) == _keys(on_sqlite), text
        assert conn.execute(sa.text("SELECT count(*) FROM messages")).scalar_one() > 0

