"""Importing whole conversations: one at a time and the fast batch path."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workbench.core.conversation import (
    Conversation,
    Message,
    SessionContext,
    Task,
    TokenUsage,
    ToolStats,
)
from workbench.errors import StorageError
from workbench.store import Database, Repository
from workbench.store import bulk as bulk_module
from workbench.store.migrations import FTS_PAUSE_SETTING
from workbench.store.rows import message_params
from workbench.store.searching import SearchQuery, search
from workbench.store.types import time_to_text

ConvFactory = Callable[..., Conversation]
CountCheck = Callable[[int], None]
TABLES = ("sessions", "messages", "session_context")


def _snapshot(count_rows: Callable[[str], int]) -> dict[str, int]:
    return {t: count_rows(t) for t in TABLES}


def _rich_conversation(source_id: str | None = "rich-1") -> Conversation:
    t = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    calls = [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "lookup", "arguments": '{"q": "x"}'},
        }
    ]
    return Conversation(
        title="Rich",
        source="openai",
        source_id=source_id,
        tags=["imported", "imported", "demo"],
        messages=[
            Message(role="system", content="You are terse.", created_at=t),
            Message(
                role="user",
                content="Find x",
                created_at=t + timedelta(seconds=5),
                metadata={"important": True, "source": "file"},
            ),
            Message(
                role="assistant",
                content="",
                tool_calls=calls,
                token_count=12,
                token_encoding="o200k_base",
                created_at=t + timedelta(seconds=9),
            ),
            Message(role="tool", content="x is 3", tool_call_id="call_1", name="lookup"),
            Message(
                role="assistant",
                content="x is 3.",
                state="folded",
                parts=[{"type": "reasoning", "text": "easy"}],
            ),
        ],
        context=SessionContext(
            facts=["x matters"],
            summary="Looked up x.",
            tasks=[
                Task(
                    id="t",
                    description="find x",
                    status="completed",
                    progress=1.0,
                    created_at=t,
                    updated_at=t + timedelta(minutes=1),
                )
            ],
            tool_stats=ToolStats(total_calls=1, by_tool={"lookup": 1}),
            token_usage=TokenUsage(input_tokens=30, output_tokens=8),
            system_state={"mode": "quick"},
            environment={"host": "h"},
        ),
    )


def _assert_stored_like(repo: Repository, session_id: int, conversation: Conversation) -> None:
    stored = repo.list_messages(session_id)
    assert [m.position for m in stored] == list(range(len(conversation.messages)))
    for got, want in zip(stored, conversation.messages, strict=True):
        assert got.role == want.role
        assert got.content == want.content
        assert got.tool_calls == want.tool_calls
        assert got.tool_call_id == want.tool_call_id
        assert got.name == want.name
        assert got.parts == want.parts
        assert got.state == want.state
        assert got.token_count == want.token_count
        assert got.public_metadata() == want.public_metadata()
        # A time the source did not give stays missing (issue 16 item 7).
        assert got.created_at == want.created_at
    assert repo.get_context(session_id) == conversation.context


# == one conversation ==========================================================================


@pytest.mark.parametrize("path", ["one", "batch"])
def test_import_stores_session_messages_and_context(
    repo: Repository, check_counts: CountCheck, path: str
) -> None:
    conversation = _rich_conversation()
    if path == "one":
        outcome = repo.import_conversation(conversation)
    else:
        (outcome,) = repo.import_many([conversation])
    assert outcome.created
    info = outcome.session
    assert info.title == "Rich"
    assert (info.source, info.source_id) == ("openai", "rich-1")
    assert info.tags == ["imported", "demo"]
    assert info.created_at == conversation.messages[0].created_at
    assert info.message_count == 5
    assert info.token_count == 12
    assert repo.get_session(info.id) == info
    _assert_stored_like(repo, info.id, conversation)
    check_counts(info.id)


@pytest.mark.parametrize("path", ["one", "batch"])
def test_conversation_times_win_over_message_times(repo: Repository, path: str) -> None:
    created = datetime(2020, 5, 5, tzinfo=UTC)
    updated = datetime(2021, 6, 6, tzinfo=UTC)
    conversation = _rich_conversation()
    conversation.created_at, conversation.updated_at = created, updated
    if path == "one":
        info = repo.import_conversation(conversation).session
    else:
        info = repo.import_many([conversation])[0].session
    assert (info.created_at, info.updated_at) == (created, updated)


def test_a_bad_role_stores_nothing(
    repo: Repository, conv: ConvFactory, count_rows: Callable[[str], int]
) -> None:
    repo.import_conversation(conv("existing", source_id="e"))
    before = _snapshot(count_rows)
    bad = conv("bad", [("user", "fine"), ("assistant", "fine"), ("robot", "not a role")])
    with pytest.raises(StorageError, match="robot"):
        repo.import_conversation(bad)
    bad_state = conv("bad state", [("user", "x")])
    bad_state.messages[0].state = "hidden"
    with pytest.raises(StorageError, match="hidden"):
        repo.import_conversation(bad_state)
    assert _snapshot(count_rows) == before


def test_a_failure_half_way_stores_nothing(
    repo: Repository, conv: ConvFactory, count_rows: Callable[[str], int]
) -> None:
    # The context cannot be written (not JSON), after the session and messages were.
    broken = conv("half", [("user", "a"), ("assistant", "b")], source_id="half")
    broken.context.system_state = {"not json": object()}
    before = _snapshot(count_rows)
    with pytest.raises(Exception):  # noqa: B017 - the kind of error is not the point here
        repo.import_conversation(broken)
    assert _snapshot(count_rows) == before
    assert repo.find_by_source("test", "half") is None


def test_the_same_conversation_twice_adds_nothing(
    repo: Repository, conv: ConvFactory, count_rows: Callable[[str], int]
) -> None:
    first = repo.import_conversation(conv("v1", [("user", "one")], source_id="dup"))
    before = _snapshot(count_rows)
    second = repo.import_conversation(conv("v1 again", [("user", "one")], source_id="dup"))
    assert first.created and not second.created
    assert second.status == "unchanged" and not second.reused_id
    assert second.session.id == first.session.id
    assert second.session.title == "v1"
    assert _snapshot(count_rows) == before


def test_a_different_conversation_reusing_the_id_is_a_new_session(
    repo: Repository, conv: ConvFactory
) -> None:
    first = repo.import_conversation(conv("v1", [("user", "one")], source_id="identity_0"))
    other = repo.import_conversation(conv("v2", [("user", "two")], source_id="identity_0"))
    assert other.created and other.status == "created" and other.reused_id
    assert other.session.id != first.session.id
    assert [m.content for m in repo.list_messages(first.session.id)] == ["one"]
    assert [m.content for m in repo.list_messages(other.session.id)] == ["two"]
    # Each is recognised again by its own content.
    again = repo.import_many(
        [
            conv("v2", [("user", "two")], source_id="identity_0"),
            conv("v1", [("user", "one")], source_id="identity_0"),
        ]
    )
    assert [(o.status, o.session.id) for o in again] == [
        ("unchanged", other.session.id),
        ("unchanged", first.session.id),
    ]


def test_import_many_stores_a_reused_id_in_the_batch_and_says_so(
    repo: Repository, conv: ConvFactory
) -> None:
    (first,) = repo.import_many([conv("a", [("user", "one")], source_id="identity_0")])
    outcomes = repo.import_many(
        [conv("b", [("user", "two")], source_id="identity_0"),
         conv("c", [("user", "three")], source_id="identity_1")]
    )
    assert [(o.status, o.reused_id) for o in outcomes] == [("created", True),
                                                          ("created", False)]
    assert outcomes[0].session.id != first.session.id
    assert [m.content for m in repo.list_messages(outcomes[0].session.id)] == ["two"]


def test_import_many_with_an_id_twice_in_the_batch_keeps_both_conversations(
    repo: Repository, conv: ConvFactory
) -> None:
    outcomes = repo.import_many(
        [
            conv("a", [("user", "first dataset")], source_id="identity_0"),
            conv("b", [("user", "second dataset")], source_id="identity_0"),
            conv("a", [("user", "first dataset")], source_id="identity_0"),
        ]
    )
    assert [o.status for o in outcomes] == ["created", "created", "unchanged"]
    assert outcomes[1].reused_id
    assert outcomes[2].session.id == outcomes[0].session.id
    assert repo.count_sessions() == 2


def test_a_conversation_that_grew_gets_the_new_turns_appended(
    repo: Repository, conv: ConvFactory, check_counts: CountCheck
) -> None:
    first = repo.import_conversation(
        conv("chat", [("user", "q1"), ("assistant", "a1")], source_id="log-1")
    )
    grown = conv(
        "chat", [("user", "q1"), ("assistant", "a1"), ("user", "q2"), ("assistant", "a2")],
        source_id="log-1",
    )
    (outcome,) = repo.import_many([grown])
    assert outcome.status == "updated" and not outcome.created
    assert outcome.session.id == first.session.id
    stored = repo.list_messages(first.session.id)
    assert [(m.position, m.content) for m in stored] == [(0, "q1"), (1, "a1"), (2, "q2"), (3, "a2")]
    check_counts(first.session.id)
    # The grown conversation is now what is known: importing it again changes nothing.
    assert repo.import_conversation(grown).status == "unchanged"
    assert len(repo.list_messages(first.session.id)) == 4


def test_a_sessions_own_export_read_back_adds_no_turn_twice(
    repo: Repository, conv: ConvFactory, msg: Callable[..., Message],
    check_counts: CountCheck,
) -> None:
    # The walk: the sample session (imported with 9 turns) got 4 more by chatting, was
    # exported, and the export imported again: the 4 turns were appended a second time.
    first = repo.import_conversation(
        conv("chat", [("user", "q1"), ("assistant", "a1")], source_id="log-1"))
    sid = first.session.id
    repo.append_message(sid, msg("user", "q2"))  # chatted in the workbench
    repo.append_message(sid, msg("assistant", "a2"))
    exported = conv("chat", [("user", "q1"), ("assistant", "a1"), ("user", "q2"),
                             ("assistant", "a2")], source_id="log-1")
    (outcome,) = repo.import_many([exported])
    assert outcome.session.id == sid and outcome.status == "unchanged"
    assert [m.content for m in repo.list_messages(sid)] == ["q1", "a1", "q2", "a2"]
    # The source grew past what the session holds: only the turns after it come in.
    grown = conv("chat", [("user", "q1"), ("assistant", "a1"), ("user", "q2"),
                          ("assistant", "a2"), ("user", "q3")], source_id="log-1")
    assert repo.import_conversation(grown).status == "updated"
    assert [m.content for m in repo.list_messages(sid)] == ["q1", "a1", "q2", "a2", "q3"]
    check_counts(sid)
    # Turns added here that the source does not have are kept, and the source's new
    # ones still come in after them, as before.
    repo.append_message(sid, msg("user", "mine only"))
    other = conv("chat", [("user", "q1"), ("assistant", "a1"), ("user", "q2"),
                          ("assistant", "a2"), ("user", "q3"), ("assistant", "a3")],
                 source_id="log-1")
    assert repo.import_conversation(other).status == "updated"
    assert [m.content for m in repo.list_messages(sid)][-2:] == ["mine only", "a3"]


def test_replace_only_replaces_a_session_from_the_same_file(
    repo: Repository, conv: ConvFactory
) -> None:
    mine = conv("v1", [("user", "mine")], source_id="s-1")
    mine.source_file = "/data/a.json"
    first = repo.import_conversation(mine)
    elsewhere = conv("v2", [("user", "theirs")], source_id="s-1")
    elsewhere.source_file = "/data/b.json"
    other = repo.import_conversation(elsewhere, replace=True)
    assert other.created and other.session.id != first.session.id
    assert [m.content for m in repo.list_messages(first.session.id)] == ["mine"]
    newer = conv("v3", [("user", "mine, edited")], source_id="s-1")
    newer.source_file = "/data/a.json"
    replaced = repo.import_conversation(newer, replace=True)
    assert replaced.status == "updated" and replaced.session.id == first.session.id
    assert [m.content for m in repo.list_messages(first.session.id)] == ["mine, edited"]
    assert [m.content for m in repo.list_messages(other.session.id)] == ["theirs"]


def test_same_source_id_from_another_source_is_a_new_session(
    repo: Repository, conv: ConvFactory
) -> None:
    a = repo.import_conversation(conv("a", source="openai", source_id="1"))
    b = repo.import_conversation(conv("b", source="context-json", source_id="1"))
    assert b.created and a.session.id != b.session.id


def test_conversations_without_source_id_are_never_merged(
    repo: Repository, conv: ConvFactory
) -> None:
    a = repo.import_conversation(conv("same"))
    b = repo.import_conversation(conv("same"))
    assert a.created and b.created
    assert a.session.id != b.session.id


def test_replace_swaps_messages_and_context_in_place(
    repo: Repository, conv: ConvFactory, check_counts: CountCheck, count_rows: Callable[[str], int]
) -> None:
    original = conv(
        "v1",
        [("user", "old 1"), ("assistant", "old 2"), ("user", "old 3")],
        source_id="r",
        context=SessionContext(facts=["old fact"]),
    )
    first = repo.import_conversation(original)
    newer = conv(
        "v2",
        [("user", "new 1")],
        source_id="r",
        tags=["x", "y"],
        context=SessionContext(facts=["new fact"], summary="fresh"),
    )
    replaced = repo.import_conversation(newer, replace=True)
    assert replaced.session.id == first.session.id
    assert replaced.session.title == "v2"
    assert replaced.session.tags == ["x", "y"]
    assert [m.content for m in repo.list_messages(first.session.id)] == ["new 1"]
    assert repo.get_context(first.session.id) == newer.context
    assert count_rows("sessions") == 1
    assert count_rows("session_context") == 1
    check_counts(first.session.id)
    db = repo.db
    assert _message_hits(db, "old") == []
    assert len(_message_hits(db, "new")) == 1


def test_replace_deduplicates_tags_like_a_first_import(repo: Repository, conv: ConvFactory) -> None:
    first = repo.import_conversation(conv("v1", source_id="t", tags=["a", "a"]))
    assert first.session.tags == ["a"]
    again = repo.import_conversation(conv("v2", source_id="t", tags=["b", "b", "c"]), replace=True)
    assert again.session.tags == ["b", "c"]


# == many conversations ========================================================================


def _message_hits(db: Database, text: str, **filters: Any) -> list[Any]:
    return search(db, SearchQuery(text, kinds=("message",), limit=500, **filters))


def _fts_check(db: Database) -> None:
    """SQLite's full-text index agrees with its table; PostgreSQL's search column holds
    what the server makes of each message's content (the import sends most values)."""
    with db.write() as conn:
        if db.dialect.is_postgresql:
            assert conn.exec_driver_sql(
                "SELECT count(*) FROM messages"
                " WHERE search IS DISTINCT FROM workbench_search_vector(content)"
            ).scalar_one() == 0
            return
        conn.exec_driver_sql(
            "INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)"
        )


def _batch(conv: ConvFactory, n: int, prefix: str = "b", words: str = "") -> list[Conversation]:
    return [
        conv(
            f"{prefix}{i}",
            [("user", f"question {i} {words}"), ("assistant", f"answer {i}")],
            source_id=f"{prefix}-{i}",
        )
        for i in range(n)
    ]


def test_import_many_stores_every_conversation_in_order(
    repo: Repository, conv: ConvFactory, check_counts: CountCheck
) -> None:
    repo.create_session("before")  # ids already in use
    batch = [*_batch(conv, 30), conv("no source id", [("user", "loose")])]
    outcomes = repo.import_many(batch)
    assert [o.session.title for o in outcomes] == [c.title for c in batch]
    assert all(o.created for o in outcomes)
    assert len({o.session.id for o in outcomes}) == len(batch)
    for outcome, conversation in zip(outcomes, batch, strict=True):
        _assert_stored_like(repo, outcome.session.id, conversation)
        check_counts(outcome.session.id)
    assert repo.count_sessions() == len(batch) + 1
    assert repo.import_many([]) == []


def test_import_many_leaves_known_conversations_unchanged(
    repo: Repository, conv: ConvFactory, count_rows: Callable[[str], int]
) -> None:
    first = repo.import_many(_batch(conv, 3))
    before = count_rows("messages")
    again = repo.import_many([*_batch(conv, 3), *_batch(conv, 2, prefix="new")])
    assert [o.created for o in again] == [False, False, False, True, True]
    assert [o.session.id for o in again[:3]] == [o.session.id for o in first]
    assert count_rows("messages") == before + 4


def test_import_many_replace_replaces_known_ones(repo: Repository, conv: ConvFactory) -> None:
    (first,) = repo.import_many([conv("v1", [("user", "old")], source_id="k")])
    (again,) = repo.import_many([conv("v2", [("user", "new")], source_id="k")], replace=True)
    assert again.session.id == first.session.id
    assert [m.content for m in repo.list_messages(first.session.id)] == ["new"]


@pytest.mark.parametrize("bad_at", [0, 5, 9])
def test_a_bad_conversation_leaves_nothing_of_the_batch(
    repo: Repository, conv: ConvFactory, count_rows: Callable[[str], int], bad_at: int
) -> None:
    repo.import_many(_batch(conv, 2, prefix="kept"))
    tables = TABLES if repo.db.dialect.is_postgresql else (*TABLES, "messages_fts_docsize")
    before = {t: count_rows(t) for t in tables}
    batch = _batch(conv, 10, words="zeppelin")
    batch[bad_at].messages.append(Message(role="oracle", content="bad"))
    with pytest.raises(StorageError, match="oracle"):
        repo.import_many(batch)
    after = {t: count_rows(t) for t in tables}
    assert after == before
    assert _message_hits(repo.db, "zeppelin") == []
    # Retrying one by one isolates the bad one, as the engine does.
    stored = 0
    for conversation in batch:
        try:
            repo.import_conversation(conversation)
            stored += 1
        except StorageError:
            pass
    assert stored == 9


def test_a_database_failure_while_indexing_is_paused_rolls_everything_back(
    repo: Repository,
    conv: ConvFactory,
    count_rows: Callable[[str], int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = _snapshot(count_rows)

    def broken_index(conn: Any, first_message: int) -> None:
        conn.exec_driver_sql("INSERT INTO no_such_table VALUES (1)")

    copy_rows = bulk_module._copy_rows

    def broken_copy(conn: Any, statement: str, rows: Any) -> None:
        copy_rows(conn, statement, rows)
        if statement.startswith("COPY messages"):  # after the messages went in
            conn.exec_driver_sql("INSERT INTO no_such_table VALUES (1)")

    if repo.db.dialect.is_postgresql:
        monkeypatch.setattr(bulk_module, "_copy_rows", broken_copy)
    else:
        monkeypatch.setattr(bulk_module, "_index_messages", broken_index)
    with pytest.raises(StorageError, match="no_such_table"):
        repo.import_many(_batch(conv, 4, words="dirigible"))
    monkeypatch.undo()
    assert _snapshot(count_rows) == before
    # The pause went with the rollback: new messages and titles are indexed again.
    assert repo.get_setting(FTS_PAUSE_SETTING) is None
    session = repo.create_session("dirigible notes")
    repo.append_message(session.id, Message(role="user", content="dirigible later"))
    hits = _message_hits(repo.db, "dirigible")
    assert [h.session_id for h in hits] == [session.id]
    titles = search(repo.db, SearchQuery("dirigible", kinds=("session",)))
    assert [h.session_id for h in titles] == [session.id]
    _fts_check(repo.db)


def test_a_pause_left_behind_is_lifted_by_the_next_import(
    repo: Repository, conv: ConvFactory
) -> None:
    # Only a bug could commit the pause; the next bulk import must not keep it.
    repo.set_setting(FTS_PAUSE_SETTING, True)
    repo.import_many(_batch(conv, 2, words="ptarmigan"))
    assert repo.get_setting(FTS_PAUSE_SETTING) is None
    session = repo.create_session("after the pause")
    repo.append_message(session.id, Message(role="user", content="ptarmigan again"))
    assert session.id in {h.session_id for h in _message_hits(repo.db, "ptarmigan")}


def test_bulk_imported_messages_are_searchable_and_the_triggers_work_after(
    repo: Repository, conv: ConvFactory
) -> None:
    outcomes = repo.import_many(_batch(conv, 20, words="albatross"))
    hits = _message_hits(repo.db, "albatross")
    assert {h.session_id for h in hits} == {o.session.id for o in outcomes}
    assert all(h.role == "user" for h in hits)
    assert {h.message_id for h in hits} == {
        repo.list_messages(o.session.id)[0].id for o in outcomes
    }
    _fts_check(repo.db)

    later = repo.append_message(
        outcomes[0].session.id, Message(role="assistant", content="a cormorant appears")
    )
    assert [h.message_id for h in _message_hits(repo.db, "cormorant")] == [later.id]
    repo.update_message(later.id, content="a pelican appears")
    assert _message_hits(repo.db, "cormorant") == []
    _fts_check(repo.db)


def test_bulk_import_after_deleting_the_newest_messages(
    repo: Repository, conv: ConvFactory
) -> None:
    # The freed ids are handed out again; the index must not mix old and new rows.
    first = repo.import_many(_batch(conv, 3, prefix="a", words="gannet"))
    repo.delete_session(first[-1].session.id)
    second = repo.import_many(_batch(conv, 2, prefix="c", words="puffin"))
    gannet = {h.session_id for h in _message_hits(repo.db, "gannet")}
    puffin = {h.session_id for h in _message_hits(repo.db, "puffin")}
    assert gannet == {o.session.id for o in first[:2]}
    assert puffin == {o.session.id for o in second}
    _fts_check(repo.db)


def test_bulk_imported_session_titles_are_searchable(repo: Repository, conv: ConvFactory) -> None:
    (outcome,) = repo.import_many([conv("Kittiwake planning", source_id="kw")])
    hits = search(repo.db, SearchQuery("kittiwake", kinds=("session",)))
    assert [h.session_id for h in hits] == [outcome.session.id]


@pytest.mark.parametrize("path", ["one", "batch"])
def test_messages_carrying_ids_of_another_session_are_copied_not_moved(
    repo: Repository, conv: ConvFactory, path: str
) -> None:
    source = repo.import_conversation(conv("source", source_id="src")).session
    before = repo.list_messages(source.id)
    copy = Conversation(
        title="copy", messages=[m.copy() for m in before], source="test", source_id="copy"
    )
    if path == "one":
        info = repo.import_conversation(copy).session
    else:
        info = repo.import_many([copy])[0].session
    copied = repo.list_messages(info.id)
    assert [m.content for m in copied] == [m.content for m in before]
    assert {m.id for m in copied}.isdisjoint({m.id for m in before})
    assert all(m.session_id == info.id for m in copied)
    assert repo.list_messages(source.id) == before


# == prepared rows =============================================================================


# A day in from datetime's ends: 0001-01-01 00:00 at +05:30 has no UTC time to store
# (the formats read every time into UTC, where such a time is unreadable: it never
# reaches the store).
_times = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.sampled_from(
        [None, UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))]
    )
)
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(
    messages=st.lists(
        st.builds(
            Message,
            role=st.sampled_from(["system", "user", "assistant", "tool"]),
            content=st.text(),
            name=st.none() | st.text(min_size=1),
            tool_calls=st.none() | st.lists(st.dictionaries(st.text(), _json_values), max_size=2),
            tool_call_id=st.none() | st.text(min_size=1),
            parts=st.none() | st.lists(st.dictionaries(st.text(), _json_values), max_size=2),
            created_at=st.none() | _times,
            token_count=st.none() | st.integers(min_value=0, max_value=10**6),
            token_encoding=st.none() | st.sampled_from(["o200k_base", "other"]),
            state=st.sampled_from(["active", "folded", "evicted"]),
            important=st.booleans(),
            metadata=st.dictionaries(
                st.sampled_from(["important", "model", "x"]), _json_values, max_size=3
            ),
        ),
        max_size=6,
    ),
    now=_times,
)
def test_prepared_rows_are_the_rows_message_params_gives(
    messages: list[Message], now: datetime
) -> None:
    # The import's fast path must store exactly what the one-by-one path stores. (The
    # session's times come from its messages unless given: they must be comparable.)
    start, end = datetime(2020, 1, 1, tzinfo=UTC), datetime(2021, 1, 1, tzinfo=UTC)
    conversation = Conversation(title="t", messages=messages, created_at=start, updated_at=end)
    prepared = bulk_module.prepare(conversation, now)
    for position, (row, message) in enumerate(zip(prepared.messages, messages, strict=True)):
        expected = message_params(message, 7, position, now, keep_missing_time=True)
        assert (*row, 7) == (*expected[1:], expected[0])
    tokens = sum(m.token_count or 0 for m in messages if m.state == "active")
    assert prepared.session[1:3] == (time_to_text(start), time_to_text(end))
    assert prepared.session[6:8] == (len(messages), tokens)


@given(value=_times)
def test_prepared_times_are_the_stored_text(value: datetime) -> None:
    assert bulk_module._time_text(value) == time_to_text(value)


def test_a_batch_the_database_refuses_is_a_storage_error_and_leaves_nothing(
    repo: Repository, conv: ConvFactory, count_rows: Callable[[str], int]
) -> None:
    # PostgreSQL's text cannot hold NUL (SQLite's can): its refusal of the COPY reads as
    # any other refusal does, and the batch is undone.
    before = _snapshot(count_rows)
    batch = [conv("nul", [("user", "before\x00after")], source_id="nul")]
    try:
        (outcome,) = repo.import_many(batch)
    except StorageError as exc:
        assert repo.db.dialect.is_postgresql
        assert "refused" in str(exc)
        assert _snapshot(count_rows) == before
    else:
        assert repo.list_messages(outcome.session.id)[0].content == "before\x00after"


@pytest.mark.parametrize("context", [SessionContext(), _rich_conversation().context])
def test_prepared_context_values_are_those_of_the_one_by_one_path(
    context: SessionContext,
) -> None:
    from workbench.store.rows import context_fingerprint, context_params

    context.system_state = {"naïve": ["ü", 1.5, None, True], "deep": {"x": [[]]}}
    conversation = Conversation(title="c", messages=[Message(role="user", content="hi")],
                                context=context)
    prepared = bulk_module.prepare(conversation)
    values = tuple(context_params(context).values())
    # the columns, then the fingerprint of what the import wrote (0016), then the time
    assert prepared.context[:-2] == values
    assert prepared.context[-2] == context_fingerprint(values)
