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
    "compare a <=> b, then c ==> d",
    "spaceship<=>operator and 100%% sure",
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
    # Symbols only, three or more in a row: the index of the symbols narrows them down.
    "<=>", "==>", "<=> OR ==>", "<=> -operator", "spaceship<=>", "%%", "<==", "<=>;",
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


def test_snippets_keep_text_that_looks_like_html(pg: Any) -> None:
    """A message or title is text: its "<b>" and "<script>" are in the snippet as on
    SQLite (ts_headline would leave them out, taking them for HTML)."""
    content = "plain <b>tags</b> & <script>alert(1)</script> <!-- c --> a<b zebra-in"
    with pg.connect() as conn:
        session_id = conn.execute(sa.select(tables.sessions.c.id).limit(1)).scalar_one()
        conn.execute(sa.insert(tables.messages).values(
            session_id=session_id, position=10_000, role="user", content=content,
            created_at=T0))
        conn.execute(sa.update(tables.sessions).where(tables.sessions.c.id == session_id)
                     .values(title="Walk <i>zebra</i> notes"))
        hits = search_postgresql(conn, SearchQuery("zebra", kinds=["message", "session"]))
        conn.rollback()
    shown = {h.kind: h.snippet for h in hits}
    # The words around the word found, cut as ts_headline cuts, and nothing left out.
    assert shown["message"].endswith("</script> <!-- c --> a<b «zebra»-in")
    assert shown["message"] in content.replace("zebra", "«zebra»")
    assert shown["session"] == "Walk <i>«zebra»</i> notes"


def test_input_is_never_sql(pg: Any, corpus: Any) -> None:
    hostile = ["'); DROP TABLE messages; --", "a:* & !b | <->", "\\", "%", "_", ":p0",
               '"unclosed', "NOT", "OR", "*", "-"]
    with pg.connect() as conn:
        for text in hostile:
            on_pg = search_postgresql(conn, SearchQuery(text, limit=1000))
            on_sqlite = search(corpus["db"], SearchQuery(text, limit=1000))
            assert _keys(on_pg) == _keys(on_sqlite), text
        assert conn.execute(sa.text("SELECT count(*) FROM messages")).scalar_one() > 0



# -- the plans of a large table, taken on a small one ----------------------------------------
#
# On the bench's million messages a search probes the newest rows, then walks on, reads id
# ranges through the GIN index or asks it for every match, by how often the query matches.
# Each plan must find the same window: the newest RANK_WINDOW matches (by time when a date
# range is given), ranked by ts_rank. Small settings make each plan run on this corpus.

PLANS = {
    "walk": {"PROBE_ROWS": 20, "WALK_DENSITY": 0.0, "WALK_ROWS": 30},
    "ranges": {"PROBE_ROWS": 20, "WALK_DENSITY": 2.0, "RANGE_MATCHES": -1},
    "every match": {"PROBE_ROWS": 20, "WALK_DENSITY": 2.0, "RANGE_MATCHES": 10**9},
}


def _expected(conn: Any, query: SearchQuery, window: int) -> list[int]:
    """The window and ranking written the plain way: every match, newest first, cut."""
    params = pg_search._Params()
    tsq = pg_search._tsquery(pg_search.parse_query(query.text), params)
    where = [f"m.search @@ ({tsq})", *pg_search._message_filters(query, params)]
    dated = query.date_from is not None or query.date_to is not None
    newest = "m.created_at DESC, m.id DESC" if dated else "m.id DESC"
    return list(conn.execute(sa.text(
        f"SELECT w.id FROM (SELECT m.id, m.search FROM messages m WHERE {' AND '.join(where)}"
        f" ORDER BY {newest} LIMIT {window}) AS w"
        f" ORDER BY ts_rank(w.search, ({tsq})) DESC, w.id DESC LIMIT {query.limit}"),
        params.values).scalars())


@pytest.mark.parametrize("plan", sorted(PLANS))
@pytest.mark.parametrize("text", ["alpha", "alpha OR bravo", '"alpha bravo"', "alpha -golf",
                                  "pay*", "refund"])
@pytest.mark.parametrize("which", [None, 0, 1, 2, 3, 4, 6])
def test_every_plan_ranks_the_newest_matches(
    corpus: Any, pg: Any, monkeypatch: pytest.MonkeyPatch, plan: str, text: str,
    which: int | None,
) -> None:
    monkeypatch.setattr(pg_search, "RANK_WINDOW", 25)
    for name, value in PLANS[plan].items():
        monkeypatch.setattr(pg_search, name, value)
    filters = {} if which is None else _filters(corpus)[which]
    query = SearchQuery(text, limit=10, kinds=["message"], **filters)
    with pg.connect() as conn:
        hits = search_postgresql(conn, query)
        expected = _expected(conn, query, 25)
    assert [h.message_id for h in hits] == expected, (plan, text, filters)


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_every_plan_finds_what_sqlite_finds_when_the_window_holds_every_match(
    corpus: Any, pg: Any, monkeypatch: pytest.MonkeyPatch, plan: str
) -> None:
    for name, value in PLANS[plan].items():
        monkeypatch.setattr(pg_search, name, value)
    for which in [None, *range(7)]:
        filters = {} if which is None else _filters(corpus)[which]
        for text in ["alpha", "echo -golf", '"alpha bravo"', "payment OR cabin"]:
            query = SearchQuery(text, limit=1000, kinds=["message"], **filters)
            with pg.connect() as conn:
                on_pg = search_postgresql(conn, query)
            assert _keys(on_pg) == _keys(search(corpus["db"], query)), (plan, text, filters)


def test_every_ascii_symbol_run_is_found_through_the_runs_of_symbols(pg: Any) -> None:
    symbols = pg_search.PG_SYMBOLS
    runs = [symbols[i:i + 3] for i in range(len(symbols) - 2)] + [symbols[::-1][:5]]
    with pg.connect() as conn:
        for run in runs:
            spelt = pg_search._symbol_run(f"a{run}b")
            assert spelt is not None and len(spelt) == len(run)
            texts = {"t": f"text é {run}ü more", "other": f"text {run[:2]} {run[2:]}"}
            found = conn.execute(sa.text(
                "SELECT workbench_symbol_runs(:t) LIKE :p,"
                " coalesce(workbench_symbol_runs(:other) LIKE :p, false),"
                " workbench_symbol_runs(:t), workbench_symbol_runs(:other)"),
                {**texts, "p": f"%{spelt}%"}).one()
            assert tuple(found[:2]) == (True, False), run
            # The bulk import makes the same column in Python.
            assert tuple(found[2:]) == (pg_search.symbol_runs(texts["t"]),
                                        pg_search.symbol_runs(texts["other"])), run
    assert pg_search._symbol_run("a -> b") is None
