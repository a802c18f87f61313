"""``Memory`` (issue 3 "Memory", SPEC §2): the same behaviour in memory and in the store.

Most tests run twice, once per backing (the ``make`` fixture opens a fresh memory of the
kind under test); the store-only tests check that evicted messages keep their rows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from workbench.core.conversation import Message
from workbench.core.tokens import get_counter
from workbench.engine.memory import Memory
from workbench.engine.workspace import Workspace
from workbench.errors import RequestError

MakeMemory = Callable[..., Memory]


@pytest.fixture(params=["in-memory", "store"])
def make(request: pytest.FixtureRequest, workspace: Workspace) -> MakeMemory:
    """Open a new, empty memory of the backing under test."""

    def build(max_messages: int | None = None, **options: Any) -> Memory:
        if request.param == "in-memory":
            return Memory(max_messages, **options)
        info = workspace.repo.create_session("memory test")
        return Memory.open(workspace, info.id, max_messages=max_messages, **options)

    return build


def call(cid: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def exchange(memory: Memory, i: int) -> None:
    memory.append("user", f"question {i}")
    memory.append("assistant", f"answer {i}")


# -- the basics ----------------------------------------------------------------------------


def test_append_and_read_back(make: MakeMemory) -> None:
    memory = make()
    first = memory.append("system", "Be brief.")
    memory.append("user", "Where is Porto?", name="ana")
    memory.append("assistant", "In Portugal.", metadata={"tag": "geo"}, important=True)
    assert len(memory) == 3
    assert first.id is not None and first.position == 0
    assert [m.role for m in memory.messages()] == ["system", "user", "assistant"]
    assert [m.content for m in memory.last(2)] == ["Where is Porto?", "In Portugal."]
    assert memory.last(0) == []
    assert [m.content for m in memory.by_role("user")] == ["Where is Porto?"]
    assert [m.content for m in memory.search("porto")] == ["Where is Porto?"]
    assert [m.content for m in memory.search("PORTUGAL")] == ["In Portugal."]
    assert [m.content for m in memory.important()] == ["In Portugal."]
    assert [m.content for m in memory.where(tag="geo")] == ["In Portugal."]
    assert memory.messages()[1].name == "ana"
    counter = get_counter()
    assert all(m.token_count == counter.count_message(m) for m in memory.messages())


def test_returned_messages_are_copies(make: MakeMemory) -> None:
    memory = make()
    memory.append("user", "original", metadata={"k": [1]})
    copy = memory.messages()[0]
    copy.content = "changed"
    copy.metadata["k"].append(2)
    memory.last(1)[0].role = "assistant"
    for m in memory:
        m.content = "also changed"
    stored = memory.messages()[0]
    assert (stored.content, stored.role, stored.metadata) == ("original", "user", {"k": [1]})


def test_clear_evicts_without_destroying(make: MakeMemory) -> None:
    memory = make()
    exchange(memory, 1)
    assert memory.clear() == 2
    assert len(memory) == 0
    assert [m.content for m in memory.evicted()] == ["question 1", "answer 1"]
    assert all(m.state == "evicted" for m in memory.evicted())
    memory.append("user", "again")
    assert [m.content for m in memory.messages()] == ["again"]


def test_appended_reports_what_the_run_added(make: MakeMemory) -> None:
    memory = make()
    memory.append("user", "before")
    memory.begin_run()
    assert memory.appended() == []
    exchange(memory, 1)
    assert [m.content for m in memory.appended()] == ["question 1", "answer 1"]


# -- the window ----------------------------------------------------------------------------


def test_a_window_of_twenty_after_a_hundred_exchanges(make: MakeMemory) -> None:
    """SPEC §2: "100 exchanges into a window of 20 leave len() == 20"; seed 000:
    "Memory::new(N) -- sliding window of N messages. When exceeded, oldest messages are
    dropped". System messages are counted apart: the window holds N others besides."""
    plain = make(20)
    for i in range(100):
        exchange(plain, i)
    assert len(plain) == 20
    assert plain.messages()[0].content == "question 90"
    memory = make(20)
    memory.append("system", "rules")
    for i in range(100):
        exchange(memory, i)
    kept = memory.messages()
    assert len([m for m in kept if m.role != "system"]) == 20
    assert len(memory) == 21
    assert kept[0].content == "rules"  # system messages are not evicted
    assert kept[-1].content == "answer 99"
    assert [m.content for m in kept[1:3]] == ["question 90", "answer 90"]
    assert len(memory.evicted()) == 180
    assert memory.window_note == ""


def test_the_window_never_splits_a_tool_group(make: MakeMemory) -> None:
    memory = make(3)
    memory.append("user", "q")
    memory.append("assistant", "", tool_calls=[call("c1"), call("c2")])
    memory.append("tool", "r1", tool_call_id="c1")
    memory.append("tool", "r2", tool_call_id="c2")
    # Four messages in a window of three: the oldest (the user message) leaves.
    assert [m.content for m in memory.messages()] == ["", "r1", "r2"]
    memory.append("assistant", "done")
    # Now the group is oldest: it leaves whole, even below the window's size, and the
    # memory says why it holds fewer than three.
    assert [m.content for m in memory.messages()] == ["done"]
    assert memory.window_note.startswith("The window holds 1 of 3 messages")


def test_prune_keeps_important_messages_like_compaction(make: MakeMemory) -> None:
    """Seed 001: "Prune removes old messages to stay under token limit", "Tag important
    messages" with ``metadata["important"]``; important messages are kept, as
    compaction never folds them."""
    memory = make()
    memory.append("system", "rules")
    memory.append("user", "keep me " * 20, important=True)
    memory.append("assistant", "and me " * 20, metadata={"important": True})
    for i in range(5):
        exchange(memory, i)
    evicted = memory.prune(0)
    assert {m.content for m in evicted} == {f"question {i}" for i in range(5)} | {
        f"answer {i}" for i in range(5)}
    assert [m.role for m in memory.messages()] == ["system", "user", "assistant"]


def test_messages_given_before_the_first_run_are_not_appended(make: MakeMemory) -> None:
    """Seed 003: "appended() returns only messages added after initialization (new this
    run)"."""
    memory = make()
    exchange(memory, 0)
    assert memory.appended() == []
    memory.begin_run()
    exchange(memory, 1)
    assert [m.content for m in memory.appended()] == ["question 1", "answer 1"]


def test_a_window_comes_from_the_agents_policy(workspace: Workspace) -> None:
    agent = workspace.repo.create_agent("windowed", memory_policy={"max_messages": 4})
    info = workspace.repo.create_session("s", agent_id=agent.id)
    memory = Memory.open(workspace, info.id)
    assert memory.max_messages == 4
    for i in range(5):
        exchange(memory, i)
    assert len(memory) == 4
    assert memory.policy().max_messages == 4


# -- prune ---------------------------------------------------------------------------------


def test_prune_keeps_the_system_message(make: MakeMemory) -> None:
    memory = make()
    memory.append("system", "You are a travel agent.")
    for i in range(10):
        exchange(memory, i)
    system_tokens = memory.messages()[0].token_count or 0
    last_two = sum(m.token_count or 0 for m in memory.last(2))
    evicted = memory.prune(system_tokens + last_two)
    assert [m.content for m in memory.messages()] == [
        "You are a travel agent.",
        "question 9",
        "answer 9",
    ]
    assert len(evicted) == 18
    assert memory.total_tokens() <= system_tokens + last_two
    memory.prune(0)
    assert [m.role for m in memory.messages()] == ["system"]


def test_prune_moves_a_tool_group_as_one(make: MakeMemory) -> None:
    memory = make()
    memory.append("user", "q")
    memory.append("assistant", "calling", tool_calls=[call("c1")])
    memory.append("tool", "a long tool result " * 20, tool_call_id="c1")
    memory.append("assistant", "done")
    budget = sum(m.token_count or 0 for m in memory.last(2))
    memory.prune(budget)
    # The tool result alone would fit; it leaves with its call.
    assert [m.content for m in memory.messages()] == ["done"]


# -- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("role", "fields", "fragment"),
    [
        ("robot", {}, "Role 'robot'"),
        ("tool", {"tool_call_id": "nope"}, "no assistant message in memory made that call"),
        ("tool", {}, "needs the 'tool_call_id'"),
        ("assistant", {"tool_calls": [{"name": "f"}]}, "A tool call must look like"),
        ("user", {"tool_calls": [call("x")]}, "Only assistant messages"),
        ("user", {"tool_call_id": "x"}, "Only tool messages"),
        ("user", {"colour": "red"}, "no field 'colour'"),
    ],
)
def test_bad_input_is_refused_and_memory_stays(
    make: MakeMemory, role: str, fields: dict[str, Any], fragment: str
) -> None:
    memory = make()
    exchange(memory, 1)
    before = memory.messages()
    with pytest.raises(RequestError) as err:
        memory.append(role, "content", **fields)
    assert fragment in str(err.value)
    assert [(m.id, m.content) for m in memory.messages()] == [(m.id, m.content) for m in before]


def test_a_batch_is_all_or_nothing(make: MakeMemory) -> None:
    memory = make()
    batch = [
        Message(role="assistant", content="", tool_calls=[call("c9")]),
        Message(role="tool", content="r", tool_call_id="c9"),  # answers the call above
        Message(role="tool", content="r", tool_call_id="unknown"),
    ]
    with pytest.raises(RequestError):
        memory.extend(batch)
    assert len(memory) == 0
    assert len(memory.extend(batch[:2])) == 2


# -- the store -----------------------------------------------------------------------------


def test_evicted_messages_keep_their_rows_in_the_store(workspace: Workspace) -> None:
    info = workspace.repo.create_session("window")
    memory = Memory.open(workspace, info.id, max_messages=20)
    for i in range(100):
        exchange(memory, i)
    repo = workspace.repo
    assert repo.message_count(info.id, states=("active",)) == 20
    assert repo.message_count(info.id, states=("evicted",)) == 180
    assert repo.message_count(info.id) == 200


def test_memories_opened_on_one_session_share_its_messages(workspace: Workspace) -> None:
    info = workspace.repo.create_session("shared")
    Memory.open(workspace, info.id).append("user", "one")
    Memory.open(workspace, info.id).append("assistant", "two")
    other = Memory.open(workspace, info.id)
    assert [m.content for m in other.messages()] == ["one", "two"]
    assert other.session_id == info.id
    assert other.repository is workspace.repo
    assert Memory().session_id is None
    assert Memory().repository is None


def test_a_store_memory_sees_changes_made_elsewhere(workspace: Workspace) -> None:
    info = workspace.repo.create_session("two writers")
    memory = Memory.open(workspace, info.id)
    exchange(memory, 1)
    workspace.repo.append_message(info.id, Message(role="user", content="from the GUI"))
    assert memory.last(1)[0].content == "from the GUI"
    first = memory.messages()[0]
    assert first.id is not None
    workspace.repo.set_state([first.id], "folded")
    assert [m.content for m in memory.messages()] == ["answer 1", "from the GUI"]


def test_the_session_context_is_read_and_changed_in_one_step(make: MakeMemory) -> None:
    memory = make()

    def add_fact(context: Any) -> None:
        context.facts.append("likes trains")

    memory.update_context(add_fact)
    memory.update_context(add_fact)
    assert memory.context().facts == ["likes trains", "likes trains"]


# -- threads -------------------------------------------------------------------------------


def test_threads_can_append_at_the_same_time(make: MakeMemory) -> None:
    memory = make()
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(25):
                memory.append("user", f"thread {n} message {i}")
                memory.messages()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    messages = memory.messages()
    assert len(messages) == 200
    assert sorted(m.position for m in messages) == list(range(200))
    assert len({m.id for m in messages}) == 200
    for n in range(8):  # each thread's messages stay in its own order
        own = [m.content for m in messages if m.content.startswith(f"thread {n} ")]
        assert own == [f"thread {n} message {i}" for i in range(25)]


def test_a_summarizing_memory_over_an_in_memory_memory() -> None:
    """Seed 003: "This strategy automatically summarizes older messages to keep the
    context window manageable": over ``maxMessages`` the older messages become a
    summary and the recent ones stay; no database needed."""
    from workbench.engine.model import Model
    from workbench.engine.preflight import OfflineProvider
    from workbench.engine.summarizing import SummarizingMemory

    memory = SummarizingMemory(Memory(), max_messages=6, keep_messages=4)
    memory.append("system", "rules")
    for i in range(4):
        exchange(memory, i)  # type: ignore[arg-type]
    # The seventh message went over six: the four newest stayed, and the question of the
    # oldest of them (a reply) with it; the oldest two folded.
    kept = memory.messages()
    assert [m.content for m in kept] == ["rules", "question 1", "answer 1", "question 2",
                                         "answer 2", "question 3", "answer 3"]
    assert "question 0" in memory.summary and "answer 0" in memory.summary
    assert "question 1" not in memory.summary
    assert all(m.state == "folded" for m in memory.evicted())
    # The summary goes out with the next request, before the kept history.
    sent = Model(OfflineProvider()).with_memory(memory.memory).preflight("next").payload
    texts = [m["content"] for m in sent["messages"]]
    assert any("question 0" in (t or "") for t in texts)
    assert texts[-1] == "next"


def test_evict_by_id_leaves_the_rest_and_keeps_what_left(make: MakeMemory) -> None:
    memory = make()
    one = memory.append("user", "one")
    memory.append("assistant", "two")
    three = memory.append("user", "three")
    assert one.id is not None and three.id is not None
    left = memory.evict([three.id, one.id])
    assert [(m.content, m.state) for m in left] == [("one", "evicted"), ("three", "evicted")]
    assert [m.content for m in memory.messages()] == ["two"]
    assert [m.content for m in memory.evicted()] == ["one", "three"]
    (two,) = memory.messages()
    assert two.id is not None
    assert [m.state for m in memory.evict([two.id], state="folded")] == ["folded"]
    assert memory.messages() == [] and memory.evict([12345]) == []
