"""Full-text search (SPEC §5): ranking, snippets, query syntax, filters, fallbacks."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from workbench.core.conversation import Message, SearchHit
from workbench.errors import StorageError
from workbench.store import Database, Repository
from workbench.store import search as search_module
from workbench.store.search import HIGHLIGHT
from workbench.store.searching import SearchQuery, search

T0 = datetime(2024, 4, 1, 8, 0, tzinfo=UTC)


def _find(db: Database, text: str, **options: Any) -> list[SearchHit]:
    options.setdefault("kinds", ("message",))
    return search(db, SearchQuery(text, **options))


def _ids(hits: Sequence[SearchHit]) -> set[int | None]:
    return {h.message_id for h in hits}


def _add(
    repo: Repository, session_id: int, *contents: str, role: str = "user", **fields: Any
) -> list[int]:
    stored = repo.append_messages(
        session_id, [Message(role=role, content=c, **fields) for c in contents]
    )
    return [m.id for m in stored]


@pytest.fixture
def session(repo: Repository) -> int:
    """An empty session to put messages in."""
    return repo.create_session("Scratch").id


# -- ranking and snippets ---------------------------------------------------------------------


def test_more_occurrences_in_a_shorter_text_rank_higher(repo: Repository, session: int) -> None:
    once, twice = _add(
        repo,
        session,
        "A walrus appeared among many other words in this long rambling sentence about "
        "the beach, the sea, the sky and the sand under a wide grey morning.",
        "The walrus met another walrus.",
    )
    hits = _find(repo.db, "walrus")
    assert [h.message_id for h in hits] == [twice, once]
    assert hits[0].score > hits[1].score


def test_hits_say_where_they_are(repo: Repository, session: int) -> None:
    _add(repo, session, "nothing here", "still nothing")
    (mid,) = _add(repo, session, "the marmot answer", role="assistant")
    (hit,) = _find(repo.db, "marmot")
    assert (hit.kind, hit.session_id, hit.message_id, hit.role, hit.position) == (
        "message",
        session,
        mid,
        "assistant",
        2,
    )


def test_snippet_highlights_the_hit(repo: Repository, session: int) -> None:
    long_text = " ".join(["filler"] * 40 + ["Narwhal"] + ["padding"] * 40)
    _add(repo, session, long_text)
    (hit,) = _find(repo.db, "narwhal")
    opening, closing = HIGHLIGHT
    assert f"{opening}Narwhal{closing}" in hit.snippet
    assert len(hit.snippet) < len(long_text)
    (custom,) = _find(repo.db, "narwhal", highlight=("<b>", "</b>"))
    assert "<b>Narwhal</b>" in custom.snippet


def test_limit_caps_the_hits(repo: Repository, session: int) -> None:
    _add(repo, session, *[f"lemur number {i}" for i in range(30)])
    assert len(_find(repo.db, "lemur", limit=7)) == 7
    assert len(_find(repo.db, "lemur")) == 30
    with pytest.raises(StorageError):
        _find(repo.db, "lemur", limit=0)


# -- query syntax -------------------------------------------------------------------------------


def test_all_words_must_match(repo: Repository, session: int) -> None:
    both, _only_one = _add(repo, session, "red kite over hills", "red squirrel")
    assert _ids(_find(repo.db, "kite red")) == {both}


def test_phrase_matches_only_the_exact_phrase(repo: Repository, session: int) -> None:
    exact, _apart, _reversed = _add(
        repo, session, "the quick fox jumps", "quick brown fox", "fox quick"
    )
    assert _ids(_find(repo.db, '"quick fox"')) == {exact}
    assert len(_find(repo.db, "quick fox")) == 3


def test_prefix_query(repo: Repository, session: int) -> None:
    compaction, company, _compute = _add(
        repo, session, "compaction saves tokens", "the company", "compute it"
    )
    assert _ids(_find(repo.db, "compa*")) == {compaction, company}
    hit = _find(repo.db, "compac*")[0]
    assert HIGHLIGHT[0] + "compaction" + HIGHLIGHT[1] in hit.snippet


def test_or(repo: Repository, session: int) -> None:
    heron, egret, _both, _neither = _add(
        repo, session, "a heron", "an egret", "heron and egret", "a swan"
    )
    assert _ids(_find(repo.db, "heron OR egret")) == {heron, egret, _both}
    assert _ids(_find(repo.db, "heron egret")) == {_both}


@pytest.mark.parametrize("query", ["bird NOT heron", "bird -heron"])
def test_not(repo: Repository, session: int, query: str) -> None:
    plain, _with_heron, _other = _add(repo, session, "a bird", "a bird and a heron", "a heron")
    assert _ids(_find(repo.db, query)) == {plain}


@pytest.mark.parametrize(
    "text",
    [
        '"unbalanced',
        "AND",
        "OR",
        "NOT",
        "*",
        "(",
        ")",
        "NEAR(",
        "NEAR(a b",
        "a AND",
        "-",
        "--",
        "^",
        "col:value",
        "a OR",
        "OR a",
        '""',
        "",
        "   ",
        "**",
        "{a b}",
        "a + b",
        "'",
        "\\",
        "NOT NOT",
        '"a" "b',
        "a*b*",
        "%",
        "_",
    ],
)
def test_input_that_is_not_valid_fts_syntax_never_raises(
    repo: Repository, session: int, text: str
) -> None:
    _add(repo, session, "a b NEAR( col:value % _ * ( ) and some text")
    hits = search(repo.db, SearchQuery(text))
    assert isinstance(hits, list)


def test_operators_alone_find_nothing(repo: Repository, session: int) -> None:
    _add(repo, session, "and or not")
    assert _find(repo.db, "AND") == []
    assert _find(repo.db, "NOT") == []
    assert _find(repo.db, "") == []


# -- text the tokenizer cannot see ---------------------------------------------------------------


def test_arrow_is_found_by_substring(repo: Repository, session: int) -> None:
    arrow, _fat, _spaced = _add(repo, session, "map a -> b", "map a => b", "a - > b")
    hits = _find(repo.db, "->")
    assert _ids(hits) == {arrow}
    assert f"{HIGHLIGHT[0]}->{HIGHLIGHT[1]}" in hits[0].snippet


def test_dunder_name_is_found_exactly(repo: Repository, session: int) -> None:
    dunder, _plain, _single = _add(
        repo, session, "def __init__(self):", "init the thing", "call _init_ here"
    )
    assert _ids(_find(repo.db, "__init__")) == {dunder}


def test_call_expression_is_found_exactly(repo: Repository, session: int) -> None:
    call, _words, _no_parens, _args = _add(
        repo, session, "then foo.bar() runs", "foo bar", "foo.bar is a field", "foo.bar(1)"
    )
    assert _ids(_find(repo.db, "foo.bar()")) == {call}


def test_like_wildcards_in_a_query_are_literal(repo: Repository, session: int) -> None:
    percent, _words, underscore, _plain = _add(
        repo, session, "it is 100% done", "100 percent", "snake_case name", "snake case"
    )
    assert _ids(_find(repo.db, "%")) == {percent}
    assert _ids(_find(repo.db, "_")) == {underscore}
    assert _ids(_find(repo.db, "snake_case")) == {underscore}


def test_symbol_search_respects_filters(repo: Repository, session: int) -> None:
    user_id, assistant_id = (
        _add(repo, session, "x -> y"),
        _add(repo, session, "y -> z", role="assistant"),
    )
    assert _ids(_find(repo.db, "->", roles=["assistant"])) == set(assistant_id)
    assert _ids(_find(repo.db, "->", roles=["user"])) == set(user_id)


def test_symbol_term_or_a_word(repo: Repository, session: int) -> None:
    call, word, _neither = _add(repo, session, "call foo.bar now", "just baz", "nothing")
    assert _ids(_find(repo.db, "foo.bar OR baz")) == {call, word}


def test_two_symbol_terms_joined_by_or(repo: Repository, session: int) -> None:
    thin, fat, _neither = _add(repo, session, "a -> b", "c => d", "e = f")
    assert _ids(_find(repo.db, "-> OR =>")) == {thin, fat}


def test_excluding_a_symbol_term_keeps_texts_without_it(repo: Repository, session: int) -> None:
    spaced, plain, _dotted = _add(repo, session, "alpha bar baz", "alpha", "alpha bar.baz")
    assert _ids(_find(repo.db, "alpha -bar.baz")) == {spaced, plain}


def test_a_nul_in_the_query_matches_only_texts_holding_it(
    repo: Repository, session: int
) -> None:
    # SQLite's LIKE ends the pattern at a NUL: a lone NUL was LIKE '%', and every
    # message matched it.
    plain, words, _arrow = _add(repo, session, "plain words", "a b and more", "x -> y")
    try:
        nul, pair = _add(repo, session, "before\x00after", "A\x00B here")
    except StorageError:
        # PostgreSQL's text cannot hold NUL: the store refuses it there, as an import's.
        assert repo.db.dialect.is_postgresql
        held: set[int | None] = set()
        pair_only: set[int | None] = set()
    else:
        held, pair_only = {nul, pair}, {pair}
    assert _ids(_find(repo.db, "\x00")) == held
    assert _ids(_find(repo.db, "a\x00b")) == pair_only  # case folded as elsewhere
    assert _ids(_find(repo.db, "\x00 ->")) == set()
    assert _ids(_find(repo.db, "plain NOT \x00")) == {plain}
    assert _ids(_find(repo.db, "a NOT a\x00b")) == {words}
    if held:
        assert f"{HIGHLIGHT[0]}\x00{HIGHLIGHT[1]}" in _find(repo.db, "\x00")[0].snippet


# -- diacritics and case -------------------------------------------------------------------------


def test_diacritics_and_case_are_folded(repo: Repository, session: int) -> None:
    accented, plain = _add(repo, session, "un café au lait", "a cafe latte")
    assert _ids(_find(repo.db, "cafe")) == {accented, plain}
    assert _ids(_find(repo.db, "café")) == {accented, plain}
    assert _ids(_find(repo.db, "CAFE")) == {accented, plain}
    assert _ids(_find(repo.db, "naïve")) == set()


# -- filters ---------------------------------------------------------------------------------------


@pytest.fixture
def corpus(repo: Repository) -> dict[str, Any]:
    """Two agents, three sessions, messages of every role, state and several days."""
    repo.default_agent()
    other_agent = repo.create_agent("other")
    s1 = repo.create_session("first").id
    s2 = repo.create_session("second").id
    s3 = repo.create_session("third", agent_id=other_agent.id).id
    ids: dict[str, int] = {}

    def put(key: str, session_id: int, role: str, day: int, state: str = "active") -> None:
        (ids[key],) = _add(
            repo,
            session_id,
            f"osprey {key}",
            role=role,
            created_at=T0 + timedelta(days=day),
            state=state,
        )

    put("s1_user_d0", s1, "user", 0)
    put("s1_assistant_d1", s1, "assistant", 1)
    put("s1_tool_d2", s1, "tool", 2, state="folded")
    put("s2_system_d3", s2, "system", 3)
    put("s2_user_d4", s2, "user", 4, state="evicted")
    put("s3_user_d5", s3, "user", 5)
    return {"ids": ids, "s1": s1, "s2": s2, "s3": s3, "other_agent": other_agent.id}


def _keys(corpus: dict[str, Any], hits: Sequence[SearchHit]) -> set[str]:
    by_id = {v: k for k, v in corpus["ids"].items()}
    return {by_id[h.message_id] for h in hits}


def test_no_filter_finds_every_state(repo: Repository, corpus: dict[str, Any]) -> None:
    assert _keys(corpus, _find(repo.db, "osprey")) == set(corpus["ids"])


def test_active_only_excludes_folded_and_evicted(repo: Repository, corpus: dict[str, Any]) -> None:
    hits = _find(repo.db, "osprey", states=["active"])
    assert _keys(corpus, hits) == {"s1_user_d0", "s1_assistant_d1", "s2_system_d3", "s3_user_d5"}
    assert _keys(corpus, _find(repo.db, "osprey", states=["folded", "evicted"])) == {
        "s1_tool_d2",
        "s2_user_d4",
    }


def test_role_filter(repo: Repository, corpus: dict[str, Any]) -> None:
    hits = _find(repo.db, "osprey", roles=["user"])
    assert _keys(corpus, hits) == {"s1_user_d0", "s2_user_d4", "s3_user_d5"}
    assert all(h.role == "user" for h in hits)
    assert _keys(corpus, _find(repo.db, "osprey", roles=["tool", "system"])) == {
        "s1_tool_d2",
        "s2_system_d3",
    }


def test_session_filter(repo: Repository, corpus: dict[str, Any]) -> None:
    hits = _find(repo.db, "osprey", session_id=corpus["s2"])
    assert _keys(corpus, hits) == {"s2_system_d3", "s2_user_d4"}


def test_agent_filter(repo: Repository, corpus: dict[str, Any]) -> None:
    assert _keys(corpus, _find(repo.db, "osprey", agent_id=corpus["other_agent"])) == {"s3_user_d5"}


def test_date_filter_from_inclusive_to_exclusive(repo: Repository, corpus: dict[str, Any]) -> None:
    hits = _find(
        repo.db, "osprey", date_from=T0 + timedelta(days=1), date_to=T0 + timedelta(days=4)
    )
    assert _keys(corpus, hits) == {"s1_assistant_d1", "s1_tool_d2", "s2_system_d3"}
    assert _keys(corpus, _find(repo.db, "osprey", date_from=T0 + timedelta(days=5))) == {
        "s3_user_d5"
    }


def test_filters_combine(repo: Repository, corpus: dict[str, Any]) -> None:
    hits = _find(repo.db, "osprey", roles=["user"], states=["active"], session_id=corpus["s1"])
    assert _keys(corpus, hits) == {"s1_user_d0"}


def test_archived_sessions_can_be_left_out(repo: Repository, corpus: dict[str, Any]) -> None:
    repo.set_archived(corpus["s2"], True)
    assert _keys(corpus, _find(repo.db, "osprey", include_archived=False)) == {
        "s1_user_d0",
        "s1_assistant_d1",
        "s1_tool_d2",
        "s3_user_d5",
    }
    assert len(_find(repo.db, "osprey")) == 6


@pytest.mark.parametrize(
    "bad", [{"roles": ["robot"]}, {"states": ["sleeping"]}, {"kinds": ("emails",)}]
)
def test_unknown_filter_values_are_refused(repo: Repository, bad: dict[str, Any]) -> None:
    with pytest.raises(StorageError, match=str(next(iter(bad.values()))[0])):
        search(repo.db, SearchQuery("x", **bad))


# -- session titles and memory entries ------------------------------------------------------------


def test_session_titles_and_memory_entries_are_found(repo: Repository, session: int) -> None:
    titled = repo.create_session("Budget for the puffin survey")
    entry, _ = repo.add_memory_entry(repo.default_agent().id, "The user counts puffins yearly")
    (mid,) = _add(repo, session, "we saw a puffin")
    hits = search(repo.db, SearchQuery("puffin*"))
    by_kind = {h.kind: h for h in hits}
    assert set(by_kind) == {"message", "session", "memory"}
    assert by_kind["message"].message_id == mid
    assert by_kind["session"].session_id == titled.id
    assert by_kind["session"].title == titled.title
    assert by_kind["session"].message_id is None
    assert HIGHLIGHT[0] in by_kind["session"].snippet
    assert by_kind["memory"].memory_id == entry.id
    assert HIGHLIGHT[0] in by_kind["memory"].snippet
    assert [h.kind for h in search(repo.db, SearchQuery("puffin*", kinds=("memory",)))] == [
        "memory"
    ]


def test_renamed_session_is_found_by_its_new_title(repo: Repository) -> None:
    s = repo.create_session("Old gull notes")
    repo.rename_session(s.id, "New tern notes")
    assert _find(repo.db, "gull", kinds=("session",)) == []
    assert [h.session_id for h in _find(repo.db, "tern", kinds=("session",))] == [s.id]


def test_session_memory_is_filtered_by_session(repo: Repository) -> None:
    agent = repo.default_agent().id
    a = repo.create_session("a").id
    b = repo.create_session("b").id
    in_a, _ = repo.add_memory_entry(agent, "grebe fact", scope="session", session_id=a)
    repo.add_memory_entry(agent, "grebe other", scope="session", session_id=b)
    hits = _find(repo.db, "grebe", kinds=("memory",), session_id=a)
    assert [h.memory_id for h in hits] == [in_a.id]


# -- the index follows every change ------------------------------------------------------------


def test_edits_and_deletes_keep_the_index_in_step(repo: Repository, session: int) -> None:
    edited, deleted, _kept = _add(repo, session, "old kestrel", "lone buzzard", "kept buzzard")
    repo.update_message(edited, content="new falcon")
    assert _find(repo.db, "kestrel") == []
    assert _ids(_find(repo.db, "falcon")) == {edited}
    repo.delete_message(deleted)
    assert _ids(_find(repo.db, "buzzard")) == {_kept}
    repo.delete_session(session)
    assert _find(repo.db, "falcon") == []
    assert _find(repo.db, "buzzard") == []
    with repo.db.write() as conn:
        if repo.db.dialect.is_postgresql:
            # Its search column is kept by triggers: every row holds what its content gives.
            assert conn.exec_driver_sql(
                "SELECT count(*) FROM messages"
                " WHERE search IS DISTINCT FROM workbench_search_vector(content)"
            ).scalar_one() == 0
            return
        conn.exec_driver_sql(
            "INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)"
        )


def test_state_changes_are_seen_by_the_state_filter(repo: Repository, session: int) -> None:
    (mid,) = _add(repo, session, "a wren sings")
    repo.set_state([mid], "folded")
    assert _find(repo.db, "wren", states=["active"]) == []
    assert _ids(_find(repo.db, "wren")) == {mid}


# -- a very common word ---------------------------------------------------------------------------


@pytest.fixture
def common_word(repo: Repository, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """200 user messages holding 'plover', plus a few older assistant ones, window of 10."""
    monkeypatch.setattr(search_module, "RANK_WINDOW", 10)
    s = repo.create_session("shore").id
    early = _add(repo, s, *[f"plover sighting {i} early" for i in range(4)], role="assistant")
    users = _add(repo, s, *[f"plover count {i}" for i in range(200)])
    return {"session": s, "assistant": early, "user": users}


def test_common_word_results_come_back_at_the_limit(
    repo: Repository, common_word: dict[str, Any]
) -> None:
    for limit in (5, 10, 50):
        hits = _find(repo.db, "plover", limit=limit)
        assert len(hits) == limit
        assert len(_ids(hits)) == limit
    assert len(_find(repo.db, "plover", limit=500)) == 204


def test_common_word_with_a_rare_filter_widens_the_window(
    repo: Repository, common_word: dict[str, Any]
) -> None:
    hits = _find(repo.db, "plover", roles=["assistant"])
    assert _ids(hits) == set(common_word["assistant"])
    limited = _find(repo.db, "plover", roles=["assistant"], limit=3)
    assert len(limited) == 3
    assert _ids(limited) <= set(common_word["assistant"])


def test_common_word_with_other_terms_and_filters(
    repo: Repository, common_word: dict[str, Any]
) -> None:
    early = _find(repo.db, "plover early", limit=2)
    assert len(early) == 2
    assert _ids(early) <= set(common_word["assistant"])
    assert len(_find(repo.db, "plover OR sighting", limit=30)) == 30
    not_early = _find(repo.db, "plover NOT early", limit=300)
    assert _ids(not_early) == set(common_word["user"])
    assert _ids(_find(repo.db, "plov*", roles=["assistant"])) == set(common_word["assistant"])


def test_two_symbol_only_terms_together_find_what_each_finds(
    repo: Repository, session: int
) -> None:
    """Issue 15.7: ``__init__ ->`` finds the message that ``__init__`` and ``->`` each
    find alone (``->`` is a term, not the exclusion of ``>``)."""
    both, dunder, arrow = _add(
        repo, session, "def __init__(self) -> None:", "plain __init__ here", "a -> b")
    assert _ids(_find(repo.db, "__init__")) == {both, dunder}
    assert _ids(_find(repo.db, "->")) == {both, arrow}
    assert _ids(_find(repo.db, "__init__ ->")) == {both}
    assert _ids(_find(repo.db, "-> __init__")) == {both}
    # A minus before a word still excludes it.
    assert _ids(_find(repo.db, "__init__ -plain")) == {both}
