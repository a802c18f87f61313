"""Long-term memory (issue 3 "Long-term memory", SPEC §3 memory policy): recall ranking,
scopes, namespaces, deduplication, capture and injection. Ranking rules run against both
entry stores (SQLite FTS5 and the in-memory list)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from workbench.core.policy import MemoryPolicy
from workbench.engine.memory import Memory
from workbench.engine.model import Model
from workbench.engine.recall import EntryStore, LocalEntries, LongTermMemory, StoreEntries
from workbench.engine.workspace import Workspace
from workbench.store.recall import prompt_terms

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scripted_provider import ScriptedProvider  # noqa: E402


@pytest.fixture(params=["store", "local"])
def entries(request: pytest.FixtureRequest, workspace: Workspace) -> EntryStore:
    if request.param == "local":
        return LocalEntries()
    agent = workspace.repo.default_agent()
    return StoreEntries(workspace.repo, agent.id)


def add(store: EntryStore, content: str, **where: object) -> None:
    options: dict[str, object] = {"scope": "agent", "namespace": "default", "session_id": None}
    options.update(where)
    store.add(content, **options)  # type: ignore[arg-type]


def recall(store: EntryStore, text: str, limit: int = 5, **where: object) -> list[str]:
    options: dict[str, object] = {"scope": "agent", "namespace": "default", "session_id": None}
    options.update(where)
    found = store.recall(text, limit=limit, **options)  # type: ignore[arg-type]
    return [e.content for e in found]


def test_recall_ranks_by_relevance_to_the_prompt(entries: EntryStore) -> None:
    add(entries, "Ana prefers trains over planes when she travels.")
    add(entries, "The office wifi password changes every month.")
    add(entries, "Ana's favourite train is the Alfa Pendular to Porto.")
    add(entries, "Lunch is at noon.")
    found = recall(entries, "Which train should Ana take to Porto?")
    assert found[0] == "Ana's favourite train is the Alfa Pendular to Porto."
    assert "Ana prefers trains over planes when she travels." in found
    assert "Lunch is at noon." not in found
    assert "The office wifi password changes every month." not in found


def test_equally_relevant_entries_come_newest_first(entries: EntryStore) -> None:
    add(entries, "colour blue noted")
    add(entries, "colour green noted")
    add(entries, "colour red noted")
    assert recall(entries, "colour") == [
        "colour red noted",
        "colour green noted",
        "colour blue noted",
    ]
    assert recall(entries, "colour", limit=2) == ["colour red noted", "colour green noted"]


def test_rare_words_count_more_than_common_ones(entries: EntryStore) -> None:
    for n in ("one", "two", "three", "four"):
        add(entries, f"common word {n}")
    add(entries, "rare word five")
    found = recall(entries, "common rare")
    assert found[0] == "rare word five"
    assert sorted(found[1:]) == sorted(f"common word {n}" for n in ("one", "two", "three",
                                                                     "four"))


def test_identical_entries_are_stored_once(entries: EntryStore) -> None:
    entries.add("Ana likes trains.", scope="agent", namespace="default", session_id=None)
    entry, created = entries.add(
        "Ana likes trains.", scope="agent", namespace="default", session_id=None
    )
    assert not created
    assert [e.content for e in entries.entries()] == ["Ana likes trains."]
    assert entry.content == "Ana likes trains."


def test_session_scope_matches_the_session_exactly(
    entries: EntryStore, workspace: Workspace
) -> None:
    first = workspace.repo.create_session("one").id
    second = workspace.repo.create_session("two").id
    add(entries, "parking spot 42", scope="session", session_id=first)
    add(entries, "parking spot 7", scope="session", session_id=second)
    add(entries, "parking is free on sundays")  # agent scope: not a session's
    assert recall(entries, "parking spot", scope="session", session_id=first) == [
        "parking spot 42"
    ]
    assert recall(entries, "parking spot", scope="session", session_id=second) == [
        "parking spot 7"
    ]
    # Seed 004: "scope: :agent returns any entry tagged with the agent id, ignoring
    # session", so the entries the two sessions wrote come back too.
    assert sorted(recall(entries, "parking")) == [
        "parking is free on sundays", "parking spot 42", "parking spot 7"]


def test_namespaces_keep_entries_apart(entries: EntryStore) -> None:
    add(entries, "deadline friday", namespace="work")
    add(entries, "deadline for the trip booking", namespace="home")
    assert recall(entries, "deadline", namespace="work") == ["deadline friday"]
    assert recall(entries, "deadline", namespace="home") == ["deadline for the trip booking"]


def test_a_prompt_with_nothing_to_match_recalls_nothing(entries: EntryStore) -> None:
    add(entries, "something stored")
    assert recall(entries, "???") == []
    assert recall(entries, "unrelated words") == []


def test_prompt_terms_drop_common_words_unless_nothing_else_is_left() -> None:
    assert prompt_terms("What is the capital of France?") == ["capital", "france"]
    assert prompt_terms("who are you") == ["who", "are", "you"]


def test_long_term_memory_applies_the_policy(workspace: Workspace) -> None:
    agent = workspace.repo.default_agent()
    store = StoreEntries(workspace.repo, agent.id)
    for i in range(8):
        store.add(f"fact {i} about rivers", scope="agent", namespace="default", session_id=None)
    assert len(LongTermMemory(store, MemoryPolicy()).recall("rivers")) == 5
    assert len(LongTermMemory(store, MemoryPolicy(max_entries=2)).recall("rivers")) == 2
    assert LongTermMemory(store, MemoryPolicy(max_entries=0)).recall("rivers") == []


# -- through the model ------------------------------------------------------------------------


def _session(workspace: Workspace, policy: dict[str, object]) -> Memory:
    agent = workspace.repo.create_agent("remembering", memory_policy=policy)
    info = workspace.repo.create_session("s", agent_id=agent.id)
    return Memory.open(workspace, info.id)


def test_conversation_capture_writes_each_successful_turn(workspace: Workspace) -> None:
    memory = _session(workspace, {"capture": "conversation"})
    provider = ScriptedProvider(["Porto is in Portugal.", "It is on the Douro."])
    model = Model(provider, memory=memory)
    model.execute("Where is Porto?")
    model.execute("Which river?")
    contents = [e.content for e in memory.long_term().store.entries()]
    assert contents == [
        "User: Which river?\nAssistant: It is on the Douro.",
        "User: Where is Porto?\nAssistant: Porto is in Portugal.",
    ]


@pytest.mark.parametrize("capture", ["manual", "off"])
def test_other_captures_write_nothing(workspace: Workspace, capture: str) -> None:
    memory = _session(workspace, {"capture": capture})
    Model(ScriptedProvider(["fine"]), memory=memory).execute("hello")
    assert memory.long_term().store.entries() == []


def test_a_failed_turn_is_not_captured(workspace: Workspace) -> None:
    memory = _session(workspace, {"capture": "conversation"})
    model = Model(ScriptedProvider([RuntimeError("boom")]), memory=memory)
    with pytest.raises(RuntimeError):
        model.execute("hello")
    assert memory.long_term().store.entries() == []


def test_recalled_entries_are_injected_into_the_instructions(workspace: Workspace) -> None:
    memory = _session(workspace, {"inject": "instructions"})
    memory.long_term().remember("Ana is vegetarian.")
    memory.long_term().remember("The car is blue.")
    provider = ScriptedProvider(["noted"])
    Model(provider, instructions="You plan dinners.", memory=memory).execute(
        "Plan a dinner Ana would like, she is vegetarian"
    )
    messages = provider.payloads[0]["messages"]
    assert messages[0]["role"] == "system"
    assert messages[0]["content"].startswith("You plan dinners.")
    assert "- Ana is vegetarian." in messages[0]["content"]
    assert "car" not in messages[0]["content"]
    assert len(messages) == 2


def test_recalled_entries_can_be_a_separate_context_message(workspace: Workspace) -> None:
    memory = _session(workspace, {"inject": "context", "scope": "session"})
    memory.long_term().remember("The budget is 300 euros.")
    provider = ScriptedProvider(["ok"])
    Model(provider, instructions="You plan trips.", memory=memory).execute("What budget?")
    messages = provider.payloads[0]["messages"]
    assert messages[0] == {"role": "system", "content": "You plan trips."}
    assert messages[1]["role"] == "system"
    assert "- The budget is 300 euros." in messages[1]["content"]
    assert messages[2] == {"role": "user", "content": "What budget?"}
