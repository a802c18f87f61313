"""The messages' search column on PostgreSQL, kept by triggers (0010_search_upkeep_postgresql).

A message inserted without a search value gets the server's ``workbench_search_vector`` of
its content; a change of the content computes it again; a change of anything else (a fold,
a move) leaves it as it is. A bulk import sends the values of texts it can split exactly
as the server does (:func:`workbench.store.bulk.search_vector`) and leaves the others to
the server: either way every row holds what the server would compute.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import text

import workbench.store.migrate_postgresql as migrate_module
from workbench.core.conversation import Conversation, Message, SessionContext
from workbench.errors import StorageError
from workbench.store import Repository
from workbench.store.bulk import MAX_WORD_BYTES, MAX_WORD_POSITIONS, search_vector
from workbench.store.db import Database
from workbench.store.migrate_postgresql import migrate_postgresql
from workbench.store.migrations import MIGRATIONS, PG_SEARCH_CHARS
from workbench.store.opening import open_database
from workbench.store.search import parse_query
from workbench.store.search_postgresql import _Params, _substring_conditions, symbol_runs
from workbench.store.searching import SearchQuery, search


@pytest.fixture
def pg_db(pg_db_url: str) -> Iterator[Database]:
    db = open_database(pg_db_url)
    yield db
    db.close()


def _server_vector(db: Database, content: str) -> str:
    with db.query() as conn:
        return str(conn.execute(text("SELECT workbench_search_vector(:t)::text"),
                                {"t": content}).scalar_one())


def _same_as_server(db: Database, made: str, content: str) -> bool:
    with db.query() as conn:
        return bool(conn.execute(
            text("SELECT CAST(:made AS tsvector) = workbench_search_vector(:t)"
                 " AND CAST(:made AS tsvector)::text = workbench_search_vector(:t)::text"),
            {"made": made, "t": content}).scalar_one())


def _drifted(db: Database) -> int:
    """Messages whose search or symbols column is not what the server makes of their
    content."""
    with db.query() as conn:
        return int(conn.execute(text(
            "SELECT count(*) FROM messages"
            " WHERE search IS DISTINCT FROM workbench_search_vector(content)"
            " OR symbols IS DISTINCT FROM workbench_symbol_runs(content)")).scalar_one())


# Texts the import splits itself (each must give the server's vector) ...
MADE_HERE = [
    "",
    "   ",
    "Hello, World!",
    "felelis.py raised an error in line 12",
    "def __init__(self): the constructor",
    "mapping a -> b and c -> d",
    "MiXeD CaSe 123abc 1e5 0x1F 3.14 v1.2.3 foo-bar foo_bar -7 +8",
    "see https://example.org/docs/path?x=1&y=2#frag or mail me@example.org",
    "<b>bold</b> &amp; an entity, <a href='x'>link</a>",
    "tab\there, new\nline, cr\r, bell\x07, delete\x7f, escape\x1b[0m",
    "quote's \"double\" back\\slash: colon:1 star* bang! pipe|amp&",
    "x" * (MAX_WORD_BYTES - 1) + " short",
    "the " * MAX_WORD_POSITIONS + "end",
    " ".join(f"w{i % 300}" for i in range(4000)),  # many words, none too often
    "ab" * 30 + " " + "cd" * 40,
    "numbers: 1e9x 12e34abc 1e9e9 x1e9x 1ex 1e 0e0a 1E9X 7e7",
]
# ... and texts left to the server.
LEFT_TO_SERVER = [
    "A café crème and a naïve approach to Straße names",
    "Привет мир",
    "plain words then one ünïcode",
    "x" * MAX_WORD_BYTES + " short",
    "x" * (MAX_WORD_BYTES + 1) + " short",
    "the " * (MAX_WORD_POSITIONS + 1),
    " ".join(f"w{i}" for i in range(5000)),  # more words than positions made here
    "a " * 20_000,  # past the last position a tsvector counts
    "ünï <=> ==>> x --- y",  # runs of symbols in text the server splits
]


def _fuzz(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + string.punctuation + " \t\n\r\x01\x7f"
    words = ["alpha", "Beta", "x", "42", "3.5", "a-b", "c_d", "e.f", "http://g.h/i",
             "j@k.lm", "<tag>", "&amp;", "1e9", "v2.0.1", "--", "'", '"', "\\"]
    texts = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(0, 60)):
            if rng.random() < 0.5:
                parts.append(rng.choice(words))
            else:
                parts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))))
        texts.append(rng.choice([" ", "", "-", "."]).join(parts))
    return texts


def test_the_import_splits_text_exactly_as_the_server(pg_db: Database) -> None:
    for content in MADE_HERE + _fuzz(300, seed=17):
        made = search_vector(content)
        assert made is not None, content[:80]
        assert _same_as_server(pg_db, made, content), content[:80]
    for content in LEFT_TO_SERVER:
        assert search_vector(content) is None, content[:80]


SYMBOL_TEXTS = [
    "a <=> b", "<=><=>", "x->y ==> z", "!!!", "!!", "a !! b !! c", "end;;;", ";;;start",
    "ü<=>ö", "привет ~~~ мир", "tab\t---\tnew\n+++\n", "'' \"\"\" \\\\\\",
    "".join(string.punctuation), "".join(reversed(string.punctuation)) * 3,
    "a" * 3000 + "::=" + "b" * 3000, "%_%_ 50%% off", "$$$ {{{x}}} [[[y]]] (((z)))",
]


def test_the_import_finds_the_runs_of_symbols_as_the_server(pg_db: Database) -> None:
    rng = random.Random(5)
    unicode_fuzz = ["".join(rng.choice(string.punctuation + " aé\u00a0ß→\n") for _ in
                            range(rng.randint(0, 40))) for _ in range(200)]
    texts = SYMBOL_TEXTS + MADE_HERE + LEFT_TO_SERVER + _fuzz(300, seed=29) + unicode_fuzz
    with pg_db.query() as conn:
        made = conn.execute(text("SELECT workbench_symbol_runs(t)"
                                 " FROM unnest(CAST(:texts AS text[]))"
                                 " WITH ORDINALITY AS u(t, n) ORDER BY n"),
                            {"texts": texts}).scalars().all()
    assert [symbol_runs(t) for t in texts] == made
    assert sum(m is not None for m in made) > len(texts) // 4  # runs were there to find
    assert symbol_runs("a <=> b ==>") == "rst sst"  # one word per run, in text order
    assert symbol_runs("a -> b") is None


def test_a_needle_of_symbols_is_served_by_the_index_of_the_runs(pg_db: Database) -> None:
    repo = Repository(pg_db)
    repo.import_many([_conversation("ops", ["x <=> y", "a <= b", "ü <=> ö", "c ==> d"])])
    session = repo.create_session("typed").id
    (typed,) = repo.append_messages(session, [Message("user", "typed <=> too")])
    hits = search(pg_db, SearchQuery("<=>", kinds=("message",)))
    with pg_db.query() as conn:
        contents = conn.execute(text("SELECT content FROM messages WHERE id = ANY(:ids)"),
                                {"ids": [h.message_id for h in hits]}).scalars().all()
    assert sorted(contents) == ["typed <=> too", "x <=> y", "ü <=> ö"]
    assert typed.id is not None
    repo.update_message(typed.id, content="typed, no more")
    assert len(search(pg_db, SearchQuery("<=>", kinds=("message",)))) == 2
    # The search's own condition is one the partial index answers.
    params = _Params()
    where = " AND ".join(_substring_conditions(parse_query("<=>"), params, "m.content",
                                               only_symbolic=False, symbols="m.symbols"))
    with pg_db.query() as conn:
        conn.execute(text("SET enable_seqscan = off"))
        plan = "\n".join(conn.execute(text(f"EXPLAIN SELECT m.id FROM messages m WHERE {where}"),
                                      params.values).scalars())
        conn.execute(text("RESET enable_seqscan"))
    assert "ix_messages_symbol_runs_trgm" in plan, plan
    assert _drifted(pg_db) == 0


def test_only_the_first_characters_count(pg_db: Database) -> None:
    # Words of 61 characters: the cut at PG_SEARCH_CHARS falls inside one.
    content = " ".join(f"{i:04d}" + "q" * 57 for i in range(PG_SEARCH_CHARS // 62 + 20))
    assert len(content) > PG_SEARCH_CHARS
    made = search_vector(content)
    assert made is not None
    assert _same_as_server(pg_db, made, content)


def _conversation(title: str, contents: list[str]) -> Conversation:
    return Conversation(
        title=title,
        messages=[Message(role=("user", "assistant")[i % 2], content=c)
                  for i, c in enumerate(contents)],
        context=SessionContext(),
        source="test",
        source_id=title,
    )


def test_every_imported_message_holds_the_servers_vector(pg_db: Database) -> None:
    repo = Repository(pg_db)
    texts = MADE_HERE + LEFT_TO_SERVER + _fuzz(100, seed=3)
    repo.import_many([_conversation("a", texts[:20]), _conversation("b", texts[20:])])
    with pg_db.query() as conn:
        assert conn.execute(text("SELECT count(*) FROM messages")).scalar_one() == len(texts)
    assert _drifted(pg_db) == 0
    hits = search(pg_db, SearchQuery("crème", kinds=("message",)))  # computed by the server
    assert len(hits) == 1
    hits = search(pg_db, SearchQuery("felelis", kinds=("message",)))  # sent by the import
    assert len(hits) == 1


def _marked(db: Database, message_id: int) -> bool:
    with db.query() as conn:
        return bool(conn.execute(
            text("SELECT search = 'marker'::tsvector FROM messages WHERE id = :id"),
            {"id": message_id}).scalar_one())


def test_a_new_content_refreshes_the_search_column_and_other_changes_leave_it(
    pg_db: Database,
) -> None:
    repo = Repository(pg_db)
    session = repo.create_session("birds").id
    first, second = repo.append_messages(
        session, [Message("user", "an old kestrel"), Message("assistant", "a wren sings")]
    )
    assert first.id is not None and second.id is not None
    assert _drifted(pg_db) == 0  # inserted one by one: computed by the trigger
    with pg_db.write() as conn:
        # A value no content gives: only a recomputation would replace it.
        conn.execute(text("UPDATE messages SET search = 'marker' WHERE session_id = :s"),
                     {"s": session})
    repo.set_state([first.id, second.id], "folded")
    repo.set_important(second.id, True)
    assert _marked(pg_db, first.id) and _marked(pg_db, second.id)
    repo.update_message(first.id, content="a new falcon")
    assert not _marked(pg_db, first.id) and _marked(pg_db, second.id)
    with pg_db.query() as conn:
        vector = conn.execute(text("SELECT search::text FROM messages WHERE id = :id"),
                              {"id": first.id}).scalar_one()
    assert vector == _server_vector(pg_db, "a new falcon")
    assert [h.message_id for h in search(pg_db, SearchQuery("falcon"))] == [first.id]
    assert search(pg_db, SearchQuery("kestrel")) == []
    repo.set_state([first.id], "active")
    assert [h.message_id for h in search(pg_db, SearchQuery("falcon", states=["active"]))] == [
        first.id]


def test_the_same_content_written_again_is_not_split_again(pg_db: Database) -> None:
    repo = Repository(pg_db)
    session = repo.create_session("s").id
    (message,) = repo.append_messages(session, [Message("user", "same words")])
    assert message.id is not None
    with pg_db.write() as conn:
        conn.execute(text("UPDATE messages SET search = 'marker' WHERE id = :id"),
                     {"id": message.id})
    repo.update_message(message.id, content="same words")
    assert _marked(pg_db, message.id)


def _written_before(pg_url: str, monkeypatch: pytest.MonkeyPatch, migration: str,
                    texts: list[str]) -> Any:
    """An engine on a database migrated up to (not including) ``migration``, holding one
    session of user messages with ``texts`` in order; later migrations are left to the
    test."""
    engine = sa.create_engine(pg_url)
    monkeypatch.setattr(migrate_module, "MIGRATIONS",
                        tuple(m for m in MIGRATIONS if m.name < migration))
    migrate_postgresql(engine)
    monkeypatch.setattr(migrate_module, "MIGRATIONS", MIGRATIONS)
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO agents (name, created_at, updated_at) VALUES ('a', 't', 't')"))
        conn.execute(text(
            "INSERT INTO sessions (agent_id, title, created_at, updated_at)"
            " SELECT id, 's', 't', 't' FROM agents"))
        conn.execute(text(
            "INSERT INTO messages (session_id, position, role, content, created_at)"
            " SELECT s.id, t.n - 1, 'user', t.c, 't' FROM sessions s,"
            " unnest(CAST(:texts AS text[])) WITH ORDINALITY AS t(c, n)"), {"texts": texts})
    return engine


def test_a_migrated_database_keeps_its_search_values(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _written_before(pg_url, monkeypatch, "0010", ["a felelis.py café"])
    assert "0010_search_upkeep_postgresql" in migrate_postgresql(engine)
    with engine.connect() as conn:
        row: Any = conn.execute(text(
            "SELECT search::text, search = workbench_search_vector(content),"
            " (SELECT is_generated FROM information_schema.columns"
            "  WHERE table_name = 'messages' AND column_name = 'search')"
            " FROM messages")).one()
        trigram = conn.execute(text(
            "SELECT to_regclass('ix_messages_content_trgm')")).scalar_one()
    engine.dispose()
    assert row[0] == "'a':1 'cafe':4 'felelis':2 'py':3"
    assert row[1] is True and row[2] == "NEVER"
    assert trigram is None


def test_a_database_of_0011_gets_the_runs_of_its_messages(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _written_before(pg_url, monkeypatch, "0012",
                             ["a <=> b ::: c", "no run -> here", "ü ==> ö"])
    assert "0012_symbol_runs_postgresql" in migrate_postgresql(engine)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT content, symbols FROM messages ORDER BY position")
                            ).all()
        old_index = conn.execute(text(
            "SELECT to_regclass('ix_messages_symbols_trgm')")).scalar_one()
        new_index = conn.execute(text(
            "SELECT to_regclass('ix_messages_symbol_runs_trgm')")).scalar_one()
    engine.dispose()
    assert [(c, symbol_runs(c)) for c, _s in rows] == [tuple(r) for r in rows]
    assert [r[1] for r in rows] == ["rst ppp", None, "sst"]
    assert old_index is None and new_index is not None


# -- the import's words merged into the index after its commit ----------------------------


def _pending_pages(db: Database) -> int:
    """Merges what is left pending now in the messages' and titles' search indexes; how
    many pages that was."""
    with db.query() as conn:
        return int(conn.execute(text(
            "SELECT gin_clean_pending_list('ix_messages_search'::regclass)"
            " + gin_clean_pending_list('ix_sessions_search'::regclass)")).scalar_one())


def _words_batch(prefix: str, count: int) -> list[Conversation]:
    return [_conversation(f"{prefix}{i}", [f"tern {prefix} number {i} {j}" for j in range(20)])
            for i in range(count)]


def test_an_import_leaves_its_words_pending_and_they_are_merged_after_the_commit(
    pg_db: Database,
) -> None:
    repo = Repository(pg_db)
    merger = pg_db._merger  # type: ignore[attr-defined]
    repo.import_many(_words_batch("a", 30))
    found = {h.message_id for h in search(pg_db, SearchQuery("tern", limit=1000))}
    assert len(found) == 600  # found whether still pending or merged already
    assert merger.wait_idle(60)
    assert merger.merges >= 1 and merger.last_error is None
    assert _pending_pages(pg_db) == 0  # nothing was left to merge
    assert {h.message_id for h in search(pg_db, SearchQuery("tern", limit=1000))} == found
    assert _drifted(pg_db) == 0


def test_a_write_that_is_not_an_import_merges_nothing_after_it(pg_db: Database) -> None:
    repo = Repository(pg_db)
    session = repo.create_session("s").id
    repo.append_messages(session, [Message("user", "one tern")])
    assert pg_db._merger.merges == 0  # type: ignore[attr-defined]


def test_an_import_that_fails_asks_for_no_merge(pg_db: Database) -> None:
    repo = Repository(pg_db)
    bad = _conversation("bad", ["fine", "a NUL \x00 the server refuses"])
    with pytest.raises(StorageError):  # refused inside the transaction, after the others
        repo.import_many([*_words_batch("b", 3), bad])
    merger = pg_db._merger  # type: ignore[attr-defined]
    assert merger.wait_idle(60) and merger.merges == 0
    repo.create_session("after")  # the same pooled connection: no merge asked either
    assert merger.wait_idle(60) and merger.merges == 0


def test_a_user_who_does_not_own_the_index_imports_merging_as_it_goes(
    pg_db_url: str, pg_server: Any
) -> None:
    owner = sa.create_engine(pg_db_url)
    with owner.begin() as conn:
        conn.execute(text("DROP ROLE IF EXISTS importer_without_index"))
        conn.execute(text("CREATE ROLE importer_without_index LOGIN"))
        conn.execute(text("GRANT ALL ON ALL TABLES IN SCHEMA public TO importer_without_index"))
        conn.execute(text(
            "GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO importer_without_index"))
    url = sa.engine.make_url(pg_db_url).set(username="importer_without_index")
    db = open_database(url.render_as_string(hide_password=False))
    try:
        Repository(db).import_many(_words_batch("c", 5), agent_id=_agent(owner))
        merger = db._merger  # type: ignore[attr-defined]
        assert merger.wait_idle(60) and merger.merges == 0
        assert len(search(db, SearchQuery("tern", limit=1000))) == 100
    finally:
        db.close()
        with owner.begin() as conn:
            conn.execute(text("REASSIGN OWNED BY importer_without_index TO CURRENT_USER"))
            conn.execute(text("DROP OWNED BY importer_without_index"))
            conn.execute(text("DROP ROLE importer_without_index"))
        owner.dispose()


def _agent(engine: Any) -> int:
    with engine.begin() as conn:
        return int(conn.execute(text(
            "INSERT INTO agents (name, created_at, updated_at) VALUES ('imports', 't', 't')"
            " RETURNING id")).scalar_one())
