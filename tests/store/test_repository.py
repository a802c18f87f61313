"""The repository: sessions, messages, context, memory entries, settings and statistics."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, insert, update

from workbench.core.conversation import (
    ROLES,
    STATES,
    Message,
    SessionContext,
    Task,
    TokenUsage,
    ToolStats,
)
from workbench.errors import NotFoundError, StorageError, WorkbenchError
from workbench.store import Repository
from workbench.store.schema import COMPACTIONS, MESSAGES, SESSIONS

MISSING = 987_654

CountCheck = Callable[[int], None]


def _fill(repo: Repository, session_id: int, *contents: str, role: str = "user") -> list[Message]:
    return repo.append_messages(session_id, [Message(role=role, content=c) for c in contents])


def _contents(repo: Repository, session_id: int) -> list[str]:
    return [m.content for m in repo.list_messages(session_id)]


# == sessions ===============================================================================


def test_create_session_belongs_to_the_default_agent(repo: Repository) -> None:
    session = repo.create_session("First", tags=["a", "b", "a"])
    assert session.title == "First"
    assert session.agent_id == repo.default_agent().id
    assert session.agent_name == repo.default_agent().name
    assert session.tags == ["a", "b"]
    assert session.message_count == 0
    assert session.token_count == 0
    assert session.created_at.tzinfo is not None
    assert not session.pinned and not session.archived
    assert repo.get_session(session.id) == session


def test_default_agent_is_created_once(repo: Repository) -> None:
    first = repo.default_agent()
    assert repo.default_agent().id == first.id
    assert [a.id for a in repo.list_agents()] == [first.id]


def test_an_agent_created_first_does_not_become_the_default(repo: Repository) -> None:
    coder = repo.create_agent("coder")
    session = repo.create_session("s")
    default = repo.default_agent()
    assert default.id != coder.id
    assert session.agent_id == default.id
    assert {a.name for a in repo.list_agents()} == {"coder", default.name}


def test_session_of_another_agent(repo: Repository) -> None:
    agent = repo.create_agent("coder", instructions="Write code.", tools=["shell"])
    session = repo.create_session("s", agent_id=agent.id)
    assert session.agent_id == agent.id
    assert session.agent_name == "coder"
    assert [s.id for s in repo.list_sessions(agent_id=agent.id)] == [session.id]


def test_find_session_by_id_source_id_and_title(repo: Repository) -> None:
    by_source = repo.create_session("Imported", source="openai", source_id="conv-17")
    older = repo.create_session("Same title")
    newer = repo.create_session("Same title")
    repo.append_message(newer.id, Message(role="user", content="touch"))
    assert repo.find_session(by_source.id).id == by_source.id
    assert repo.find_session(str(by_source.id)).id == by_source.id
    assert repo.find_session("conv-17").id == by_source.id
    assert repo.find_session("Same title").id == newer.id
    assert repo.find_session("  Same title ").id == newer.id
    assert older.id != newer.id
    assert repo.find_by_source("openai", "conv-17").id == by_source.id
    assert repo.find_by_source("openai", "nope") is None


def test_find_session_that_does_not_exist(repo: Repository) -> None:
    with pytest.raises(NotFoundError, match="no-such-thing"):
        repo.find_session("no-such-thing")


def test_list_sessions_pinned_first_then_most_recently_updated(repo: Repository) -> None:
    a = repo.create_session("a")
    b = repo.create_session("b")
    c = repo.create_session("c")
    repo.set_pinned(b.id, True)
    # b is now the least recently updated, but pinned.
    _fill(repo, a.id, "x")
    _fill(repo, c.id, "y")
    assert [s.id for s in repo.list_sessions()] == [b.id, c.id, a.id]
    _fill(repo, a.id, "z")
    assert [s.id for s in repo.list_sessions()] == [b.id, a.id, c.id]
    repo.set_pinned(b.id, False)
    repo.rename_session(c.id, "c renamed")
    assert repo.list_sessions()[0].id == c.id


def test_list_sessions_limit_and_offset(repo: Repository) -> None:
    ids = [repo.create_session(f"s{i}").id for i in range(7)]
    everything = [s.id for s in repo.list_sessions()]
    assert sorted(everything) == sorted(ids)
    pages = [s.id for off in range(0, 7, 3) for s in repo.list_sessions(limit=3, offset=off)]
    assert pages == everything


def test_list_sessions_filter_text_matches_title_and_tags(repo: Repository) -> None:
    budget = repo.create_session("Quarterly Budget")
    tagged = repo.create_session("Planning", tags=["finance"])
    repo.create_session("Holiday")
    assert {s.id for s in repo.list_sessions(filter_text="budget")} == {budget.id}
    assert {s.id for s in repo.list_sessions(filter_text="FINAN")} == {tagged.id}
    assert repo.list_sessions(filter_text="zebra") == []
    assert repo.count_sessions(filter_text="budget") == 1
    assert repo.count_sessions() == 3


def test_a_hash_filter_matches_the_start_of_a_tag_only(repo: Repository) -> None:
    tagged = repo.create_session("Planning", tags=["finance", "q3"])
    repo.create_session("Finance notes")  # the word in the title, not a tag
    repo.create_session("Refinance", tags=["refinance"])  # inside a tag, not its start
    assert {s.id for s in repo.list_sessions(filter_text="#finance")} == {tagged.id}
    assert {s.id for s in repo.list_sessions(filter_text="#FIN")} == {tagged.id}
    assert {s.id for s in repo.list_sessions(filter_text="#q3")} == {tagged.id}
    assert repo.count_sessions(filter_text="#fin") == 1
    assert repo.list_sessions(filter_text="#budget") == []


def test_tag_filters_read_each_tag_whatever_its_characters(repo: Repository) -> None:
    quoted = repo.create_session("One", tags=['say "hi"', "back\\slash", "tab\there"])
    accented = repo.create_session("Two", tags=["café", "Ünïcode"])
    plain = repo.create_session("Three", tags=["alpha", "beta"])
    assert {s.id for s in repo.list_sessions(filter_text='"hi"')} == {quoted.id}
    assert {s.id for s in repo.list_sessions(filter_text='#say "h')} == {quoted.id}
    assert {s.id for s in repo.list_sessions(filter_text="k\\sl")} == {quoted.id}
    assert {s.id for s in repo.list_sessions(filter_text="#tab\t")} == {quoted.id}
    assert {s.id for s in repo.list_sessions(filter_text="afé")} == {accented.id}
    assert {s.id for s in repo.list_sessions(filter_text="#Ünï")} == {accented.id}
    # Within one tag only: not across the JSON between two tags.
    assert repo.list_sessions(filter_text='alpha","beta') == []
    assert repo.list_sessions(filter_text="ha,b") == []
    assert repo.list_sessions(filter_text="#lpha") == []
    assert {s.id for s in repo.list_sessions(filter_text="#")} == {quoted.id, accented.id,
                                                                   plain.id}
    repo.create_session("Untagged")
    assert repo.count_sessions(filter_text="#") == 3


def test_filters_ignore_the_case_of_every_letter_on_both_backends(repo: Repository) -> None:
    emile = repo.create_session("ÉMILE à Paris")
    greek = repo.create_session("Σημειώσεις", tags=["ΚΑΦΈ", "Straße"])
    repo.create_session("Emily in Rome")  # no accent: not the same letters
    assert {s.id for s in repo.list_sessions(filter_text="émile")} == {emile.id}
    assert {s.id for s in repo.list_sessions(filter_text="Émile À")} == {emile.id}
    assert {s.id for s in repo.list_sessions(filter_text="σημει")} == {greek.id}
    assert {s.id for s in repo.list_sessions(filter_text="καφέ")} == {greek.id}
    assert {s.id for s in repo.list_sessions(filter_text="#καφ")} == {greek.id}
    assert {s.id for s in repo.list_sessions(filter_text="#STRASSE")} == set()
    assert {s.id for s in repo.list_sessions(filter_text="#STRAẞE")} == {greek.id}
    assert repo.count_sessions(filter_text="À PARIS") == 1
    # ASCII letters fold as before, on any server.
    assert {s.id for s in repo.list_sessions(filter_text="PARIS")} == {emile.id}
    assert {s.id for s in repo.list_sessions(filter_text="mile")} == {emile.id}


def test_find_session_ties_go_to_the_highest_id(repo: Repository) -> None:
    when = datetime(2024, 5, 1, tzinfo=UTC)
    first = repo.create_session("Twin", created_at=when, source_id="same")
    second = repo.create_session("Twin", created_at=when, source_id="same")
    assert first.updated_at == second.updated_at
    assert repo.find_session("Twin").id == second.id
    assert repo.find_session("same").id == second.id
    assert repo.find_session(str(first.id)).id == first.id
    with pytest.raises(NotFoundError):
        repo.find_session("9" * 40)
    with pytest.raises(NotFoundError):
        repo.find_session("²")


def test_filter_text_with_like_wildcards_is_literal(repo: Repository) -> None:
    repo.create_session("100% done")
    repo.create_session("1000 done")
    repo.create_session("snake_case")
    repo.create_session("snakeXcase")
    assert [s.title for s in repo.list_sessions(filter_text="100%")] == ["100% done"]
    assert [s.title for s in repo.list_sessions(filter_text="e_c")] == ["snake_case"]


def test_archived_sessions_are_hidden_unless_asked(repo: Repository) -> None:
    kept = repo.create_session("kept")
    gone = repo.create_session("gone")
    archived = repo.set_archived(gone.id, True)
    assert archived.archived
    assert [s.id for s in repo.list_sessions()] == [kept.id]
    assert {s.id for s in repo.list_sessions(include_archived=True)} == {kept.id, gone.id}
    assert repo.count_sessions() == 1
    assert repo.count_sessions(include_archived=True) == 2
    # Archiving is a soft delete: the session and its messages are still there.
    assert repo.get_session(gone.id).archived
    repo.set_archived(gone.id, False)
    assert {s.id for s in repo.list_sessions()} == {kept.id, gone.id}


def test_rename_and_pin(repo: Repository) -> None:
    session = repo.create_session("old")
    renamed = repo.rename_session(session.id, "new")
    assert renamed.title == "new"
    assert repo.find_session("new").id == session.id
    assert repo.set_pinned(session.id, True).pinned
    assert repo.get_session(session.id).pinned
    assert not repo.set_pinned(session.id, False).pinned


def test_tags_are_deduplicated_added_and_removed(repo: Repository) -> None:
    session = repo.create_session("t")
    assert repo.set_tags(session.id, ["x", " y ", "x", "", "  "]).tags == ["x", "y"]
    assert repo.add_tag(session.id, "z").tags == ["x", "y", "z"]
    assert repo.add_tag(session.id, "x").tags == ["x", "y", "z"]
    assert repo.remove_tag(session.id, "y").tags == ["x", "z"]
    assert repo.remove_tag(session.id, "absent").tags == ["x", "z"]
    assert repo.get_session(session.id).tags == ["x", "z"]


def test_overrides_round_trip(repo: Repository) -> None:
    session = repo.create_session("o", overrides={"window": 4})
    assert session.overrides == {"window": 4}
    assert repo.set_overrides(session.id, {"model": "m", "n": [1, 2]}).overrides == {
        "model": "m",
        "n": [1, 2],
    }


def test_delete_session_removes_everything_that_belongs_to_it(
    repo: Repository, count_rows: Callable[[str], int]
) -> None:
    agent = repo.default_agent()
    doomed = repo.create_session("doomed")
    other = repo.create_session("other")
    _fill(repo, doomed.id, "one", "two")
    _fill(repo, other.id, "three")
    repo.set_context(doomed.id, SessionContext(facts=["f"], summary="s"))
    repo.set_context(other.id, SessionContext(facts=["g"]))
    repo.add_memory_entry(agent.id, "session note", scope="session", session_id=doomed.id)
    repo.add_memory_entry(agent.id, "other note", scope="session", session_id=other.id)
    repo.add_memory_entry(agent.id, "agent note")
    with repo.db.write() as conn:
        conn.execute(insert(COMPACTIONS).values(
            session_id=doomed.id, created_at="2024-01-01T00:00:00.000000Z", policy="manual",
            summarizer="test"))

    repo.delete_session(doomed.id)

    with pytest.raises(NotFoundError):
        repo.get_session(doomed.id)
    assert count_rows("messages") == 1
    assert count_rows("session_context") == 1
    assert count_rows("compactions") == 0
    assert sorted(e.content for e in repo.list_memory_entries()) == ["agent note", "other note"]
    assert _contents(repo, other.id) == ["three"]
    assert repo.get_context(other.id).facts == ["g"]


def test_delete_missing_session(repo: Repository) -> None:
    with pytest.raises(NotFoundError, match=str(MISSING)):
        repo.delete_session(MISSING)


# -- fork -------------------------------------------------------------------------------------


def test_fork_copies_messages_up_to_the_chosen_one_and_the_context(
    repo: Repository, check_counts: CountCheck
) -> None:
    original = repo.create_session("Plan", tags=["work"])
    stored = repo.append_messages(
        original.id,
        [
            Message(role="system", content="be brief", token_count=3, token_encoding="e"),
            Message(
                role="user",
                content="q1",
                token_count=2,
                token_encoding="e",
                metadata={"source": "cli"},
            ),
            Message(
                role="assistant",
                content="a1",
                token_count=5,
                token_encoding="e",
                tool_calls=[
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            ),
            Message(role="user", content="q2", token_count=7, token_encoding="e"),
        ],
    )
    repo.set_state([stored[1].id], "folded")
    context = SessionContext(facts=["likes tea"], summary="so far", environment={"os": "x"})
    repo.set_context(original.id, context)
    before = repo.list_messages(original.id)
    before_info = repo.get_session(original.id)

    fork = repo.fork_session(original.id, stored[2].id)

    assert fork.id != original.id
    assert fork.forked_from_session_id == original.id
    assert fork.forked_from_message_id == stored[2].id
    assert "Plan" in fork.title
    assert fork.tags == ["work"]
    copied = repo.list_messages(fork.id)
    assert [
        (m.role, m.content, m.state, m.token_count, m.metadata, m.tool_calls) for m in copied
    ] == [(m.role, m.content, m.state, m.token_count, m.metadata, m.tool_calls) for m in before[:3]]
    assert {m.id for m in copied}.isdisjoint({m.id for m in before})
    assert repo.get_context(fork.id) == context
    check_counts(fork.id)

    # The original is untouched, and the two now live apart.
    assert repo.list_messages(original.id) == before
    repo.update_message(copied[0].id, content="changed in the fork")
    repo.set_context(fork.id, SessionContext(facts=["fork only"]))
    assert repo.list_messages(original.id) == before
    assert repo.get_context(original.id) == context
    after_info = repo.get_session(original.id)
    assert (after_info.message_count, after_info.token_count) == (
        before_info.message_count,
        before_info.token_count,
    )


def test_fork_with_a_title_and_at_the_first_message(repo: Repository) -> None:
    original = repo.create_session("orig")
    first, _second = _fill(repo, original.id, "m0", "m1")
    fork = repo.fork_session(original.id, first.id, title="branch")
    assert fork.title == "branch"
    assert _contents(repo, fork.id) == ["m0"]


def test_fork_at_a_message_of_another_session(repo: Repository) -> None:
    a = repo.create_session("a")
    b = repo.create_session("b")
    (foreign,) = _fill(repo, b.id, "not in a")
    sessions_before = repo.count_sessions()
    with pytest.raises(NotFoundError):
        repo.fork_session(a.id, foreign.id)
    with pytest.raises(NotFoundError):
        repo.fork_session(MISSING, foreign.id)
    assert repo.count_sessions() == sessions_before


def test_fork_survives_deleting_its_original(repo: Repository) -> None:
    original = repo.create_session("orig")
    (m,) = _fill(repo, original.id, "keep me")
    fork = repo.fork_session(original.id, m.id)
    repo.delete_session(original.id)
    survivor = repo.get_session(fork.id)
    assert survivor.forked_from_session_id is None
    assert _contents(repo, fork.id) == ["keep me"]


# == messages ================================================================================


def test_append_gives_dense_positions_ids_and_times(repo: Repository) -> None:
    session = repo.create_session("s")
    when = datetime(2023, 6, 1, 12, 0, tzinfo=UTC)
    first = repo.append_messages(
        session.id,
        [
            Message(role="user", content="a", created_at=when),
            Message(role="assistant", content="b"),
        ],
    )
    second = repo.append_messages(session.id, [Message(role="user", content="c")])
    stored = [*first, *second]
    assert [m.position for m in stored] == [0, 1, 2]
    assert all(isinstance(m.id, int) for m in stored)
    assert len({m.id for m in stored}) == 3
    assert all(m.session_id == session.id for m in stored)
    assert stored[0].created_at == when
    assert stored[1].created_at is not None and stored[1].created_at.tzinfo is not None
    assert repo.list_messages(session.id) == stored
    assert repo.get_message(stored[2].id) == stored[2]


def test_append_keeps_every_field(repo: Repository) -> None:
    session = repo.create_session("s")
    original = Message(
        role="tool",
        content="42",
        name="calculator",
        tool_call_id="call_1",
        parts=[{"type": "text", "text": "42"}],
        token_count=9,
        token_encoding="o200k_base",
        metadata={"model": "m", "usage": {"in": 1}},
        state="evicted",
    )
    stored = repo.append_message(session.id, original)
    for field in (
        "role",
        "content",
        "name",
        "tool_call_id",
        "parts",
        "token_count",
        "token_encoding",
        "metadata",
        "state",
    ):
        assert getattr(stored, field) == getattr(original, field), field


def test_append_with_a_bad_role_stores_nothing(repo: Repository) -> None:
    session = repo.create_session("s")
    _fill(repo, session.id, "existing")
    with pytest.raises(StorageError, match="narrator"):
        repo.append_messages(
            session.id, [Message(role="user", content="ok"), Message(role="narrator", content="x")]
        )
    with pytest.raises(StorageError, match="sleeping"):
        repo.append_message(session.id, Message(role="user", content="x", state="sleeping"))
    assert _contents(repo, session.id) == ["existing"]
    assert repo.get_session(session.id).message_count == 1


def test_append_to_a_missing_session(repo: Repository) -> None:
    with pytest.raises(NotFoundError, match=str(MISSING)):
        repo.append_message(MISSING, Message(role="user", content="x"))


@pytest.mark.parametrize(
    ("position", "expected"),
    [
        (0, ["new", "m0", "m1", "m2"]),
        (1, ["m0", "new", "m1", "m2"]),
        (2, ["m0", "m1", "new", "m2"]),
        (3, ["m0", "m1", "m2", "new"]),
    ],
)
def test_insert_shifts_later_messages(
    repo: Repository, check_counts: CountCheck, position: int, expected: list[str]
) -> None:
    session = repo.create_session("s")
    _fill(repo, session.id, "m0", "m1", "m2")
    inserted = repo.insert_message(session.id, position, Message(role="assistant", content="new"))
    assert inserted.position == position
    assert inserted.content == "new"
    assert _contents(repo, session.id) == expected
    check_counts(session.id)


def test_insert_into_an_empty_session(repo: Repository) -> None:
    session = repo.create_session("s")
    repo.insert_message(session.id, 0, Message(role="user", content="only"))
    assert _contents(repo, session.id) == ["only"]


@pytest.mark.parametrize("position", [-1, 4, 100])
def test_insert_outside_the_session_is_refused(repo: Repository, position: int) -> None:
    session = repo.create_session("s")
    _fill(repo, session.id, "m0", "m1", "m2")
    with pytest.raises(StorageError, match=str(position)):
        repo.insert_message(session.id, position, Message(role="user", content="x"))
    assert _contents(repo, session.id) == ["m0", "m1", "m2"]
    assert repo.get_session(session.id).message_count == 3


def test_edit_content_and_role_clears_the_token_count(
    repo: Repository, check_counts: CountCheck
) -> None:
    session = repo.create_session("s")
    (m,) = repo.append_messages(
        session.id, [Message(role="user", content="old", token_count=10, token_encoding="e")]
    )
    assert repo.get_session(session.id).token_count == 10
    edited = repo.update_message(m.id, content="new text")
    assert edited.content == "new text"
    assert edited.token_count is None and edited.token_encoding is None
    check_counts(session.id)

    repo.set_token_counts([(m.id, 4, "e")])
    recast = repo.update_message(m.id, role="assistant")
    assert recast.role == "assistant"
    assert recast.token_count is None
    check_counts(session.id)


def test_edit_with_a_new_count_keeps_it(repo: Repository, check_counts: CountCheck) -> None:
    session = repo.create_session("s")
    (m,) = _fill(repo, session.id, "old")
    edited = repo.update_message(m.id, content="new", token_count=6, token_encoding="e")
    assert (edited.token_count, edited.token_encoding) == (6, "e")
    assert repo.get_session(session.id).token_count == 6
    check_counts(session.id)


def test_edit_with_a_bad_role_changes_nothing(repo: Repository) -> None:
    session = repo.create_session("s")
    (m,) = _fill(repo, session.id, "text")
    with pytest.raises(StorageError, match="wizard"):
        repo.update_message(m.id, content="other", role="wizard")
    assert repo.get_message(m.id).content == "text"


def test_metadata_edit_keeps_the_count_and_carries_important(repo: Repository) -> None:
    session = repo.create_session("s")
    (m,) = repo.append_messages(
        session.id, [Message(role="user", content="x", token_count=3, token_encoding="e")]
    )
    edited = repo.update_message(m.id, metadata={"important": True, "tags": ["key"]})
    assert edited.important
    assert edited.metadata == {"tags": ["key"]}
    assert edited.public_metadata() == {"tags": ["key"], "important": True}
    assert edited.token_count == 3
    cleared = repo.update_message(m.id, metadata={"important": False})
    assert not cleared.important
    assert cleared.metadata == {}


def test_important_from_metadata_on_append_and_set_important(repo: Repository) -> None:
    session = repo.create_session("s")
    (m,) = repo.append_messages(
        session.id, [Message(role="user", content="x", metadata={"important": True, "k": 1})]
    )
    assert m.important
    assert m.metadata == {"k": 1}
    assert not repo.set_important(m.id, False).important
    assert repo.set_important(m.id).important
    assert repo.get_message(m.id).important


def test_edit_tool_fields(repo: Repository) -> None:
    session = repo.create_session("s")
    (m,) = _fill(repo, session.id, "", role="assistant")
    calls = [{"id": "c9", "type": "function", "function": {"name": "g", "arguments": "{}"}}]
    edited = repo.update_message(m.id, tool_calls=calls, name="bot")
    assert edited.tool_calls == calls
    assert edited.name == "bot"
    assert repo.update_message(m.id, tool_calls=None).tool_calls is None


def test_delete_message_closes_the_gap(repo: Repository, check_counts: CountCheck) -> None:
    session = repo.create_session("s")
    stored = _fill(repo, session.id, "m0", "m1", "m2", "m3")
    deleted = repo.delete_message(stored[1].id)
    assert deleted.content == "m1"
    assert _contents(repo, session.id) == ["m0", "m2", "m3"]
    check_counts(session.id)
    with pytest.raises(NotFoundError):
        repo.get_message(stored[1].id)
    with pytest.raises(NotFoundError):
        repo.delete_message(stored[1].id)
    repo.delete_message(stored[0].id)
    repo.delete_message(stored[3].id)
    assert [(m.content, m.position) for m in repo.list_messages(session.id)] == [("m2", 0)]


def test_set_state_for_several_messages(repo: Repository, check_counts: CountCheck) -> None:
    session = repo.create_session("s")
    stored = repo.append_messages(
        session.id,
        [
            Message(role="user", content=f"m{i}", token_count=10, token_encoding="e")
            for i in range(5)
        ],
    )
    ids = [m.id for m in stored]
    changed = repo.set_state([ids[0], ids[1], ids[1]], "folded", compaction_id=77)
    assert changed == 2
    assert repo.set_state([ids[2]], "evicted") == 1
    states = [(m.state, m.compaction_id) for m in repo.list_messages(session.id)]
    assert states == [
        ("folded", 77),
        ("folded", 77),
        ("evicted", None),
        ("active", None),
        ("active", None),
    ]
    assert repo.get_session(session.id).token_count == 20
    check_counts(session.id)
    assert repo.set_state([], "active") == 0


def test_set_state_with_a_missing_id_changes_nothing(repo: Repository) -> None:
    session = repo.create_session("s")
    stored = _fill(repo, session.id, "a", "b")
    with pytest.raises(NotFoundError):
        repo.set_state([stored[0].id, MISSING], "folded")
    assert [m.state for m in repo.list_messages(session.id)] == ["active", "active"]
    with pytest.raises(StorageError, match="hidden"):
        repo.set_state([stored[0].id], "hidden")


# -- paging and counts -----------------------------------------------------------------------


@pytest.fixture
def long_session(repo: Repository) -> tuple[int, list[Message]]:
    """A session of 1,000 messages with every role and state."""
    session = repo.create_session("long")
    roles = ["user", "assistant", "tool", "assistant", "user"]
    stored = repo.append_messages(
        session.id,
        [
            Message(
                role="system" if i == 0 else roles[i % 5],
                content=f"msg {i}",
                token_count=i % 7,
                token_encoding="e",
            )
            for i in range(1000)
        ],
    )
    repo.set_state([m.id for m in stored if m.position % 10 == 3], "folded")
    repo.set_state([m.id for m in stored if m.position % 10 == 7], "evicted")
    return session.id, repo.list_messages(session.id)


def _walk(repo: Repository, session_id: int, size: int, **filters: Any) -> list[Message]:
    out: list[Message] = []
    after = -1
    while True:
        page = repo.page_messages(session_id, after_position=after, limit=size, **filters)
        assert len(page) <= size
        out.extend(page)
        if len(page) < size:
            return out
        after = page[-1].position


def test_keyset_paging_returns_every_message_once_in_order(
    repo: Repository, long_session: tuple[int, list[Message]]
) -> None:
    session_id, everything = long_session
    walked = _walk(repo, session_id, 37)
    assert [m.id for m in walked] == [m.id for m in everything]
    assert [m.position for m in walked] == list(range(1000))


def test_paging_filters_by_state_and_role(
    repo: Repository, long_session: tuple[int, list[Message]]
) -> None:
    session_id, everything = long_session
    folded = _walk(repo, session_id, 37, states=["folded"])
    assert [m.id for m in folded] == [m.id for m in everything if m.state == "folded"]
    assistant = _walk(repo, session_id, 37, roles=["assistant"])
    assert [m.id for m in assistant] == [m.id for m in everything if m.role == "assistant"]
    both = _walk(repo, session_id, 11, roles=["user", "tool"], states=["active", "evicted"])
    assert [m.id for m in both] == [
        m.id for m in everything if m.role in ("user", "tool") and m.state != "folded"
    ]


def test_page_before(repo: Repository, long_session: tuple[int, list[Message]]) -> None:
    session_id, everything = long_session
    page = repo.page_before(session_id, before_position=500, limit=10)
    assert [m.position for m in page] == list(range(490, 500))
    start = repo.page_before(session_id, before_position=4, limit=10)
    assert [m.id for m in start] == [m.id for m in everything[:4]]
    assert repo.page_before(session_id, before_position=0) == []


def test_role_counts_and_token_totals(
    repo: Repository, long_session: tuple[int, list[Message]]
) -> None:
    session_id, everything = long_session
    counts = repo.role_counts(session_id)
    assert set(counts) == set(ROLES)
    for role in ROLES:
        assert counts[role] == sum(1 for m in everything if m.role == role)
    active_counts = repo.role_counts(session_id, states=["active"])
    assert sum(active_counts.values()) == sum(1 for m in everything if m.state == "active")
    for states in (["active"], ["folded"], ["evicted"], ["active", "folded", "evicted"]):
        assert repo.token_total(session_id, states=states) == sum(
            m.token_count or 0 for m in everything if m.state in states
        )
    assert repo.token_total(session_id) == repo.get_session(session_id).token_count
    for state in STATES:
        assert repo.message_count(session_id, states=[state]) == sum(
            1 for m in everything if m.state == state
        )
    assert repo.message_count(session_id) == 1000
    index = repo.message_index(session_id)
    assert index == [(m.id, m.position, m.role, m.state) for m in everything]


def test_set_state_on_a_thousand_messages_at_once(
    repo: Repository, long_session: tuple[int, list[Message]], check_counts: CountCheck
) -> None:
    session_id, everything = long_session
    ids = [m.id for m in everything]
    assert repo.set_state(ids, "evicted") == 1000
    assert repo.get_session(session_id).token_count == 0
    assert repo.message_count(session_id, states=["evicted"]) == 1000
    assert repo.set_state(ids, "active") == 1000
    assert repo.get_session(session_id).token_count == sum(m.token_count or 0 for m in everything)
    check_counts(session_id)


def test_role_counts_list_absent_roles_as_zero(repo: Repository) -> None:
    session = repo.create_session("s")
    _fill(repo, session.id, "hi")
    assert repo.role_counts(session.id) == {r: (1 if r == "user" else 0) for r in ROLES}


def test_counts_stay_current_after_every_kind_of_change(
    repo: Repository, check_counts: CountCheck, conv: Callable[..., Any]
) -> None:
    session = repo.create_session("s")
    sid = session.id
    stored = repo.append_messages(
        sid,
        [
            Message(role="user", content=f"m{i}", token_count=i + 1, token_encoding="e")
            for i in range(6)
        ],
    )
    check_counts(sid)
    repo.append_message(sid, Message(role="assistant", content="uncounted"))
    check_counts(sid)
    repo.insert_message(
        sid, 2, Message(role="user", content="ins", token_count=50, token_encoding="e")
    )
    check_counts(sid)
    repo.update_message(stored[0].id, content="edited")
    check_counts(sid)
    repo.update_message(stored[1].id, token_count=100, token_encoding="e")
    check_counts(sid)
    repo.set_state([stored[2].id, stored[3].id], "folded")
    check_counts(sid)
    repo.set_state([stored[2].id], "active")
    check_counts(sid)
    repo.delete_message(stored[4].id)
    check_counts(sid)
    pending = repo.uncounted_messages("e", session_id=sid)
    repo.set_token_counts([(m.id, 11, "e") for m in pending])
    check_counts(sid)
    fork = repo.fork_session(sid, stored[5].id)
    check_counts(fork.id)
    check_counts(sid)
    conversation = conv("imported", [("user", "a"), ("assistant", "b")], source_id="x1")
    conversation.messages[0].token_count = 5
    outcome = repo.import_conversation(conversation)
    check_counts(outcome.session.id)
    conversation.messages.append(Message(role="user", content="c", token_count=8))
    replaced = repo.import_conversation(conversation, replace=True)
    check_counts(replaced.session.id)
    assert replaced.session.token_count == 13
    (bulk,) = repo.import_many([conv("bulk", [("user", "p"), ("user", "q")], source_id="x2")])
    check_counts(bulk.session.id)


def test_uncounted_messages_and_set_token_counts(repo: Repository) -> None:
    session = repo.create_session("s")
    other = repo.create_session("other")
    repo.append_messages(
        session.id,
        [
            Message(role="user", content="none"),
            Message(role="user", content="old encoding", token_count=4, token_encoding="old"),
            Message(role="user", content="current", token_count=4, token_encoding="new"),
        ],
    )
    _fill(repo, other.id, "elsewhere")
    pending = repo.uncounted_messages("new", session_id=session.id)
    assert sorted(m.content for m in pending) == ["none", "old encoding"]
    assert len(repo.uncounted_messages("new")) == 3
    assert len(repo.uncounted_messages("new", limit=1)) == 1

    assert repo.set_token_counts([(m.id, 10, "new") for m in pending]) == 2
    assert repo.uncounted_messages("new", session_id=session.id) == []
    assert repo.get_session(session.id).token_count == 24
    assert repo.set_token_counts([]) == 0
    assert {m.token_encoding for m in repo.list_messages(session.id)} == {"new"}


# == context =================================================================================


def test_context_round_trip(repo: Repository) -> None:
    session = repo.create_session("s")
    t1 = datetime(2024, 2, 3, 4, 5, 6, 789000, tzinfo=UTC)
    context = SessionContext(
        facts=["user is left-handed", "prefers metric"],
        summary="We planned a trip.",
        tasks=[
            Task(
                id="t1",
                description="book train",
                status="running",
                progress=0.5,
                created_at=t1,
                updated_at=t1 + timedelta(hours=1),
            ),
            Task(id="t2", description="pack", status="pending"),
        ],
        tool_stats=ToolStats(total_calls=7, by_tool={"search": 5, "calc": 2}, failures=1),
        token_usage=TokenUsage(input_tokens=1200, output_tokens=340),
        system_state={"theme": "dark", "nested": {"a": [1, 2]}},
        environment={"cwd": "/home/u", "os": "linux"},
    )
    repo.set_context(session.id, context)
    assert repo.get_context(session.id) == context

    replacement = SessionContext(facts=["only this"])
    repo.set_context(session.id, replacement)
    assert repo.get_context(session.id) == replacement


def test_context_of_a_new_session_is_empty(repo: Repository) -> None:
    session = repo.create_session("s")
    assert repo.get_context(session.id) == SessionContext()


# == memory entries ============================================================================


def test_identical_memory_entries_are_stored_once(repo: Repository) -> None:
    agent = repo.default_agent()
    first, created = repo.add_memory_entry(agent.id, "The user likes tea.", metadata={"k": 1})
    again, created_again = repo.add_memory_entry(agent.id, "The user likes tea.")
    assert created and not created_again
    assert again.id == first.id
    assert first.metadata == {"k": 1}
    assert first.created_at is not None
    other_ns, created_ns = repo.add_memory_entry(agent.id, "The user likes tea.", namespace="n2")
    assert created_ns and other_ns.id != first.id
    assert len(repo.list_memory_entries()) == 2


def test_session_memory_needs_a_session(repo: Repository) -> None:
    agent = repo.default_agent()
    with pytest.raises(StorageError, match="session"):
        repo.add_memory_entry(agent.id, "x", scope="session")
    with pytest.raises(StorageError, match="galaxy"):
        repo.add_memory_entry(agent.id, "x", scope="galaxy")
    assert repo.list_memory_entries() == []


def test_memory_entries_are_filtered_and_deleted(repo: Repository) -> None:
    agent = repo.default_agent()
    other_agent = repo.create_agent("other")
    s1 = repo.create_session("s1")
    s2 = repo.create_session("s2")
    a, _ = repo.add_memory_entry(agent.id, "agent wide")
    b, _ = repo.add_memory_entry(agent.id, "in s1", scope="session", session_id=s1.id)
    c, _ = repo.add_memory_entry(agent.id, "in s2", scope="session", session_id=s2.id)
    d, _ = repo.add_memory_entry(agent.id, "notes", namespace="notes")
    e, _ = repo.add_memory_entry(other_agent.id, "theirs")
    same_text, created = repo.add_memory_entry(agent.id, "in s1", scope="session", session_id=s2.id)
    assert created and same_text.id != b.id

    def ids(**filters: Any) -> set[int]:
        return {m.id for m in repo.list_memory_entries(**filters)}

    assert ids() == {a.id, b.id, c.id, d.id, e.id, same_text.id}
    assert ids(agent_id=other_agent.id) == {e.id}
    assert ids(scope="session") == {b.id, c.id, same_text.id}
    assert ids(session_id=s1.id) == {b.id}
    assert ids(namespace="notes") == {d.id}
    assert ids(agent_id=agent.id, scope="agent", namespace="default") == {a.id}
    assert repo.get_memory_entry(b.id).session_id == s1.id

    repo.delete_memory_entry(c.id)
    assert c.id not in ids()
    with pytest.raises(NotFoundError, match=str(c.id)):
        repo.delete_memory_entry(c.id)


# == settings, agents and statistics ===========================================================


def test_settings_round_trip(repo: Repository) -> None:
    assert repo.get_setting("first_run") is None
    assert repo.get_setting("first_run", True) is True
    repo.set_setting("first_run", False)
    assert repo.get_setting("first_run", True) is False
    repo.set_setting("layout", {"split": [1, 2], "name": "wide"})
    assert repo.get_setting("layout") == {"split": [1, 2], "name": "wide"}
    repo.set_setting("layout", "narrow")
    assert repo.get_setting("layout") == "narrow"


def test_agents_create_update_and_refuse_a_taken_name(repo: Repository) -> None:
    agent = repo.create_agent("writer", model="m1", memory_policy={"window": 3})
    assert repo.get_agent(agent.id) == agent
    updated = repo.update_agent(agent.id, instructions="Be kind.", tools=["search"])
    assert (updated.instructions, updated.tools, updated.model) == ("Be kind.", ["search"], "m1")
    with pytest.raises(StorageError, match="writer"):
        repo.create_agent("writer")
    with pytest.raises(StorageError, match="colour"):
        repo.update_agent(agent.id, colour="blue")


def test_stats_count_the_whole_database(repo: Repository) -> None:
    a = repo.create_session("a")
    b = repo.create_session("b")
    repo.append_messages(
        a.id,
        [
            Message(role="user", content="x", token_count=5, token_encoding="e"),
            Message(role="assistant", content="y", token_count=7, token_encoding="e"),
            Message(role="tool", content="z"),
        ],
    )
    (folded,) = repo.append_messages(
        b.id, [Message(role="user", content="w", token_count=3, token_encoding="e")]
    )
    repo.set_state([folded.id], "folded")
    repo.set_archived(b.id, True)
    repo.add_memory_entry(repo.default_agent().id, "m")

    stats = repo.stats()
    assert stats["sessions"] == 2
    assert stats["archived_sessions"] == 1
    assert stats["messages"] == 4
    assert stats["messages_by_role"] == {"system": 0, "user": 2, "assistant": 1, "tool": 1}
    assert stats["messages_by_state"] == {"active": 3, "folded": 1, "evicted": 0}
    assert stats["active_tokens"] == 12
    assert stats["uncounted_messages"] == 1
    assert stats["memory_entries"] == 1
    assert stats["agents"] == 1
    assert stats["database"] == repo.db.location


# == errors ===================================================================================


def _missing_calls(repo: Repository) -> dict[str, Callable[[], object]]:
    m = Message(role="user", content="x")
    return {
        "get_session": lambda: repo.get_session(MISSING),
        "rename_session": lambda: repo.rename_session(MISSING, "t"),
        "set_pinned": lambda: repo.set_pinned(MISSING, True),
        "set_archived": lambda: repo.set_archived(MISSING, True),
        "set_tags": lambda: repo.set_tags(MISSING, ["t"]),
        "add_tag": lambda: repo.add_tag(MISSING, "t"),
        "delete_session": lambda: repo.delete_session(MISSING),
        "append_message": lambda: repo.append_message(MISSING, m),
        "insert_message": lambda: repo.insert_message(MISSING, 0, m),
        "get_message": lambda: repo.get_message(MISSING),
        "update_message": lambda: repo.update_message(MISSING, content="y"),
        "set_important": lambda: repo.set_important(MISSING),
        "set_state": lambda: repo.set_state([MISSING], "folded"),
        "delete_message": lambda: repo.delete_message(MISSING),
        "get_context": lambda: repo.get_context(MISSING),
        "set_context": lambda: repo.set_context(MISSING, SessionContext()),
        "get_memory_entry": lambda: repo.get_memory_entry(MISSING),
        "delete_memory_entry": lambda: repo.delete_memory_entry(MISSING),
        "get_agent": lambda: repo.get_agent(MISSING),
        "update_agent": lambda: repo.update_agent(MISSING, name="n"),
        "create_session_for_missing_agent": lambda: repo.create_session("t", agent_id=MISSING),
        "memory_for_missing_agent": lambda: repo.add_memory_entry(MISSING, "x"),
        "memory_for_missing_session": lambda: repo.add_memory_entry(
            repo.default_agent().id, "x", scope="session", session_id=MISSING
        ),
    }


_MISSING_CALLS = [
    "get_session",
    "rename_session",
    "set_pinned",
    "set_archived",
    "set_tags",
    "add_tag",
    "delete_session",
    "append_message",
    "insert_message",
    "get_message",
    "update_message",
    "set_important",
    "set_state",
    "delete_message",
    "get_context",
    "set_context",
    "get_memory_entry",
    "delete_memory_entry",
    "get_agent",
    "update_agent",
    "create_session_for_missing_agent",
    "memory_for_missing_agent",
    "memory_for_missing_session",
]


@pytest.mark.parametrize("call", _MISSING_CALLS)
def test_missing_ids_raise_not_found_naming_the_id(repo: Repository, call: str) -> None:
    with pytest.raises(WorkbenchError) as info:
        _missing_calls(repo)[call]()
    assert isinstance(info.value, NotFoundError), type(info.value)
    text = str(info.value)
    assert str(MISSING) in text
    assert text.endswith(".")


# == property: positions behave like a Python list ============================================

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 3)),
        st.tuples(st.just("insert"), st.integers(0, 10_000)),
        st.tuples(st.just("delete"), st.integers(0, 10_000)),
        st.tuples(st.just("insert_outside"), st.integers(1, 3)),
    ),
    max_size=25,
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[
        *settings.default.suppress_health_check,
        HealthCheck.function_scoped_fixture,
    ],
)
@given(ops=_OPS)
def test_positions_follow_a_list_model(repo: Repository, ops: list[tuple[str, int]]) -> None:
    session = repo.create_session("prop")
    model: list[str] = []
    label = 0
    for op, arg in ops:
        if op == "append":
            new = [f"n{label + i}" for i in range(arg)]
            label += arg
            stored = repo.append_messages(
                session.id, [Message(role="user", content=c) for c in new]
            )
            assert [m.position for m in stored] == list(range(len(model), len(model) + arg))
            model.extend(new)
        elif op == "insert":
            position = arg % (len(model) + 1)
            text = f"n{label}"
            label += 1
            repo.insert_message(session.id, position, Message(role="assistant", content=text))
            model.insert(position, text)
        elif op == "delete":
            if not model:
                continue
            index = arg % len(model)
            target = repo.page_messages(session.id, after_position=index - 1, limit=1)[0]
            assert repo.delete_message(target.id).content == model.pop(index)
        else:
            with pytest.raises(StorageError):
                repo.insert_message(
                    session.id, len(model) + arg, Message(role="user", content="never")
                )
    messages = repo.list_messages(session.id)
    assert [m.content for m in messages] == model
    assert [m.position for m in messages] == list(range(len(model)))
    assert repo.get_session(session.id).message_count == len(model)


def test_the_states_of_a_span_are_told_whether_the_session_is_dense_or_not(
    repo: Repository, long_session: tuple[int, list[Message]]
) -> None:
    session_id, messages = long_session
    not_active = [m.position for m in messages if m.state != "active"]
    span = {"state": "active", "after_position": 99, "last_position": 400}
    expected = [p for p in not_active if 99 < p <= 400]
    assert repo.positions_not_in_state(session_id, **span) == expected
    # The session's kept count no longer matches its positions (as a database written
    # by hand might hold): the span is counted instead, and is still dense.
    with repo.db.write() as conn:
        conn.execute(update(SESSIONS).where(SESSIONS.c.id == session_id)
                     .values(message_count=SESSIONS.c.message_count + 5))
    assert repo.positions_not_in_state(session_id, **span) == expected
    # A gap in the span: told, not guessed.
    with repo.db.write() as conn:
        conn.execute(delete(MESSAGES).where(MESSAGES.c.session_id == session_id,
                                            MESSAGES.c.position == 200))
    assert repo.positions_not_in_state(session_id, **span) is None
    assert repo.positions_not_in_state(
        session_id, state="active", after_position=200, last_position=400
    ) == [p for p in not_active if 200 < p <= 400]
