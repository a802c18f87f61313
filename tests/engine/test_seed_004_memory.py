"""Seed 004 (long-term memory policy) through the public API (issue 15.5).

Each test quotes the rule of the seed it checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from workbench.core.policy import MemoryPolicy, resolve_namespace
from workbench.engine.memory import Memory
from workbench.engine.model import Model
from workbench.engine.preflight import OfflineProvider
from workbench.engine.recall import LocalEntries, LongTermMemory
from workbench.engine.turn import preflight_session
from workbench.engine.workspace import Workspace
from workbench.errors import RequestError


def _system_text(payload: dict) -> str:
    return "\n".join(m["content"] or "" for m in payload["messages"] if m["role"] == "system")


def test_the_seeds_own_example_write_then_preflight_hello(db_target: Path | str) -> None:
    """Seed 004: ``memory scope: :session, capture: :conversation, max_entries: 5``;
    ``write(spec, "User prefers the name Alex.", session_id: "conv-1")``; then
    ``preflight(agent, "hello", session_id: "conv-1")``: "The recall happened before
    the prompt was assembled. The entry was injected into the agent's instructions
    section (the default for inject: :instructions)"."""
    with Workspace.open(db_target) as ws:
        info = ws.repo.create_session("conv-1")
        ws.repo.update_agent(info.agent_id, instructions=(
            "Greet the user and use any remembered facts."), memory_policy={
            "scope": "session", "capture": "conversation", "max_entries": 5})
        memory = Memory.open(ws, info.id)
        entry, created = memory.long_term().remember("User prefers the name Alex.")
        assert created and entry.session_id == info.id
        preview = preflight_session(ws, "conv-1", "hello")
        assert [e.content for e in preview.recalled] == ["User prefers the name Alex."]
        system = _system_text(preview.payload)
        assert system.startswith("Greet the user and use any remembered facts.")
        assert "User prefers the name Alex." in system
        # Another session of the agent does not see it: session scope is exact.
        other = ws.repo.create_session("conv-2")
        assert preflight_session(ws, other.id, "hello").recalled == []


def test_the_default_agent_has_session_memory_injected_into_instructions(
    db_target: Path | str,
) -> None:
    """Issue 15.8: the default agent recalls the session's entries, 5 at most."""
    with Workspace.open(db_target) as ws:
        info = ws.repo.create_session("Chat")
        policy = Memory.open(ws, info.id).policy()
        assert (policy.scope, policy.inject, policy.max_entries) == (
            "session", "instructions", 5)


def test_recall_falls_back_to_the_most_recent_entries_when_nothing_matches() -> None:
    """Seed 004 step 4: recall for ``query: "hello"`` returns ``["User prefers the name
    Alex."]`` though no word matches; at most ``max_entries``, newest first."""
    store = LocalEntries()
    memory = LongTermMemory(store, MemoryPolicy(max_entries=2))
    for text in ("First note.", "Second note.", "Third note."):
        memory.remember(text)
    assert [e.content for e in memory.recall("hello")] == ["Third note.", "Second note."]
    # A match still wins over recency.
    assert [e.content for e in memory.recall("first")] == ["First note."]


def test_agent_scope_returns_entries_whatever_session_wrote_them() -> None:
    """Seed 004: "scope: :agent returns any entry tagged with the agent id, ignoring
    session"; "scope: :session returns only entries whose session_id matches"."""
    store = LocalEntries()
    LongTermMemory(store, MemoryPolicy(scope="session"), session_id=1).remember("Likes tea.")
    LongTermMemory(store, MemoryPolicy(scope="session"), session_id=2).remember("Likes jazz.")
    agent_wide = LongTermMemory(store, MemoryPolicy(scope="agent"), session_id=3)
    assert sorted(e.content for e in agent_wide.recall("likes")) == ["Likes jazz.", "Likes tea."]
    only_one = LongTermMemory(store, MemoryPolicy(scope="session"), session_id=2)
    assert [e.content for e in only_one.recall("likes")] == ["Likes jazz."]


@dataclass
class Turn:
    tenant_id: str


def test_the_namespace_is_resolved_per_turn_from_the_context() -> None:
    """Seed 004: "Namespace memory per tenant. Use namespace: {:context, :tenant_id} and
    supply context: %{tenant_id: "..."} per turn; the runtime resolves the namespace
    before talking to the store"."""
    memory = Memory()
    memory.long_term(MemoryPolicy(namespace="acme")).remember("Acme ships on Mondays.")
    memory.long_term(MemoryPolicy(namespace="globex")).remember("Globex ships Fridays.")
    model = Model(OfflineProvider(), policy={"namespace": "{tenant_id}"}).with_memory(memory)
    acme = model.with_context({"tenant_id": "acme"}).preflight("When do we ship?")
    assert [e.content for e in acme.recalled] == ["Acme ships on Mondays."]
    globex = model.with_context(Turn("globex")).preflight("When do we ship?")
    assert [e.content for e in globex.recalled] == ["Globex ships Fridays."]
    # A callable in the Python API.
    picked = Model(OfflineProvider(), policy=MemoryPolicy(
        namespace=lambda ctx: ctx["tenant"].lower())).with_memory(memory)
    assert [e.content for e in picked.with_context({"tenant": "ACME"}).preflight(
        "ship?").recalled] == ["Acme ships on Mondays."]
    with pytest.raises(RequestError, match="tenant_id"):
        resolve_namespace("{tenant_id}", {"other": 1})


def test_enabled_and_metadata_settings() -> None:
    """Seed 004: the policy holds "`enabled`, `scope`, `namespace`, `capture`, `inject`,
    `max_entries`, and free-form `metadata`"."""
    store = LocalEntries()
    policy = MemoryPolicy.from_dict({"metadata": {"kind": "preference"},
                                     "capture": "conversation"})
    memory = LongTermMemory(store, policy)
    entry, _ = memory.remember("Prefers window seats.")
    assert entry.metadata == {"kind": "preference"}
    captured = memory.capture("hi", "hello")
    assert captured is not None and captured.metadata["kind"] == "preference"
    off = LongTermMemory(store, MemoryPolicy.from_dict({"enabled": False,
                                                        "capture": "conversation"}))
    assert off.recall("window seats") == []
    assert off.capture("hi", "again") is None
    with pytest.raises(RequestError):
        MemoryPolicy.from_dict({"enabled": "yes"})
