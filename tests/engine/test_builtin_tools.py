"""The built-in tools an agent can enable (SPEC §3 "Tools"): each runs for real against a
temporary store, and a chat turn runs ``current_time`` when the model asks for it."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from workbench.core.conversation import Agent, Conversation, Message
from workbench.core.policy import MemoryPolicy
from workbench.core.tokens import fill_counts
from workbench.engine.builtin_tools import (
    BUILTIN_TOOLS,
    builtin_tool_names,
    make_builtin_tool,
    tools_for_agent,
)
from workbench.engine.chat import stream_turn
from workbench.engine.model import Response, ToolFinished, ToolStarted
from workbench.engine.turn import preflight_session
from workbench.engine.workspace import Workspace
from workbench.errors import RequestError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scripted_provider import Reply, ScriptedProvider, call  # noqa: E402

ALL = builtin_tool_names()


def store_session(ws: Workspace, title: str, texts: list[tuple[str, str]]) -> int:
    messages = [Message(role=role, content=text) for role, text in texts]
    fill_counts(messages)
    return ws.import_conversation(Conversation(title=title, messages=messages)).id


def agent_with(ws: Workspace, tools: list[str], **policy: object) -> Agent:
    agent = ws.repo.default_agent()
    return ws.repo.update_agent(agent.id, tools=tools, memory_policy=dict(policy))


# -- which tools an agent gets ------------------------------------------------------------


def test_an_agent_gets_exactly_the_tools_it_enables_in_a_stable_order(
    workspace: Workspace,
) -> None:
    agent = agent_with(workspace, ["current_time", "not_a_builtin", "search_conversations"])
    tools = tools_for_agent(agent, workspace.repo)
    assert [t.name for t in tools] == ["search_conversations", "current_time"]
    assert tools_for_agent(agent_with(workspace, []), workspace.repo) == []
    every = tools_for_agent(agent, workspace.repo, names=ALL)
    assert [t.name for t in every] == list(BUILTIN_TOOLS)
    for built in every:
        # Each is a valid tool for a provider: a one-line description and an object schema.
        spec = built.spec()
        assert spec.description and "\n" not in spec.description
        assert spec.parameters["type"] == "object"
    with pytest.raises(RequestError, match="no built-in tool named 'weather'"):
        make_builtin_tool("weather", workspace.repo, agent)


# -- search_conversations -----------------------------------------------------------------


def test_search_conversations_finds_messages_and_titles_across_sessions(
    workspace: Workspace,
) -> None:
    trip = store_session(workspace, "Lisbon trip", [
        ("user", "Which tram goes up to the castle?"),
        ("assistant", "Tram 28 climbs past the cathedral to the castle."),
    ])
    store_session(workspace, "Castle restoration notes", [("user", "Budget for the roof.")])
    store_session(workspace, "Groceries", [("user", "Eggs, milk and bread.")])
    agent = agent_with(workspace, ["search_conversations"])
    search = make_builtin_tool("search_conversations", workspace.repo, agent)

    hits = search(query="castle")
    titles = {hit["session_title"] for hit in hits}
    assert titles == {"Lisbon trip", "Castle restoration notes"}
    messages = [hit for hit in hits if hit["kind"] == "message"]
    assert {hit["session_id"] for hit in messages} == {trip}
    assert all("castle" in hit["text"].lower() for hit in messages)
    assert {hit["role"] for hit in messages} == {"user", "assistant"}
    # What the model reads is JSON text.
    assert json.loads(json.dumps(hits)) == hits

    assert len(search(query="castle", limit=1)) == 1
    assert search(query="submarine") == []
    with pytest.raises(RequestError):
        search(query="   ")


# -- recall_memory and remember_fact ------------------------------------------------------


def test_remember_then_recall_under_the_agents_policy(workspace: Workspace) -> None:
    agent = agent_with(workspace, ["recall_memory", "remember_fact"], namespace="travel")
    session_id = store_session(workspace, "Planning", [("user", "Hello")])
    remember = make_builtin_tool("remember_fact", workspace.repo, agent, session_id=session_id)
    recall = make_builtin_tool("recall_memory", workspace.repo, agent, session_id=session_id)

    assert remember(fact="The traveller is vegetarian.").startswith("Remembered")
    assert remember(fact="Prefers window seats on trains.").startswith("Remembered")
    # The same fact twice is stored once.
    assert remember(fact="The traveller is vegetarian.").startswith("Already remembered")
    stored = workspace.repo.list_memory_entries(agent_id=agent.id)
    assert sorted(e.content for e in stored) == ["Prefers window seats on trains.",
                                                 "The traveller is vegetarian."]
    assert {e.namespace for e in stored} == {"travel"}
    assert {e.scope for e in stored} == {"agent"}
    assert all(e.metadata.get("source") == "tool" for e in stored)

    assert recall(query="what does the traveller eat? vegetarian") == [
        "The traveller is vegetarian."]
    assert recall(query="trains seats") == ["Prefers window seats on trains."]
    # Another namespace's entries are not this agent's to recall.
    workspace.repo.add_memory_entry(agent.id, "Vegetarian cookbook list", namespace="books")
    assert recall(query="vegetarian") == ["The traveller is vegetarian."]
    with pytest.raises(RequestError):
        remember(fact="  ")


def test_session_scope_keeps_each_sessions_facts_to_itself(workspace: Workspace) -> None:
    agent = agent_with(workspace, ["recall_memory", "remember_fact"], scope="session")
    first = store_session(workspace, "One", [("user", "a")])
    second = store_session(workspace, "Two", [("user", "b")])
    make_builtin_tool("remember_fact", workspace.repo, agent, session_id=first)(
        fact="The parcel number is 4411.")
    assert make_builtin_tool("recall_memory", workspace.repo, agent, session_id=first)(
        query="parcel number") == ["The parcel number is 4411."]
    assert make_builtin_tool("recall_memory", workspace.repo, agent, session_id=second)(
        query="parcel number") == []
    # Without a session there is nowhere to keep a session's fact: an error the model reads.
    with pytest.raises(RequestError, match="session"):
        make_builtin_tool("remember_fact", workspace.repo, agent)(fact="Orphan fact.")


def test_an_explicit_policy_overrides_the_agents(workspace: Workspace) -> None:
    agent = agent_with(workspace, ["remember_fact"])
    tool = make_builtin_tool("remember_fact", workspace.repo, agent,
                             policy=MemoryPolicy(namespace="work"))
    tool(fact="Stand-up is at nine.")
    [entry] = workspace.repo.list_memory_entries(agent_id=agent.id)
    assert entry.namespace == "work"


# -- current_time ---------------------------------------------------------------------------


def test_current_time_is_utc_iso_8601(workspace: Workspace) -> None:
    agent = agent_with(workspace, ["current_time"])
    fixed = datetime(2025, 6, 3, 14, 5, 9, 123456, tzinfo=UTC)
    assert make_builtin_tool("current_time", workspace.repo, agent, clock=lambda: fixed)() \
        == "2025-06-03T14:05:09+00:00"
    before = datetime.now(UTC).replace(microsecond=0)
    text = make_builtin_tool("current_time", workspace.repo, agent)()
    after = datetime.now(UTC)
    read = datetime.fromisoformat(text)
    assert read.utcoffset() is not None and read.utcoffset().total_seconds() == 0
    assert before <= read <= after


# -- in a chat turn -----------------------------------------------------------------------


def test_a_chat_turn_runs_current_time_and_stores_the_result(workspace: Workspace) -> None:
    agent_with(workspace, ["current_time"])
    session_id = store_session(workspace, "What time", [("user", "Hi"), ("assistant", "Hello")])
    provider = ScriptedProvider([
        Reply(tool_calls=[call("current_time", {}, "call_time")]),
        lambda request: f"It is {request.messages[-1].content} now.",
    ])
    before = datetime.now(UTC).replace(microsecond=0)
    events = []
    turn = stream_turn(workspace, session_id, "What time is it?", client=provider)
    while True:
        try:
            events.append(next(turn))
        except StopIteration as done:
            response: Response = done.value
            break
    after = datetime.now(UTC)

    # The model was offered the tool, called it, and read its result in the second call.
    assert [t.name for t in provider.requests[0].tools] == ["current_time"]
    assert provider.payloads[0]["tools"][0]["function"]["name"] == "current_time"
    started = [e for e in events if isinstance(e, ToolStarted)]
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert [e.name for e in started] == ["current_time"]
    assert finished[0].error is None
    stamp = datetime.fromisoformat(finished[0].content)
    assert before <= stamp <= after

    stored = workspace.repo.list_messages(session_id)
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant", "tool",
                                        "assistant"]
    tool_call, result, final = stored[3], stored[4], stored[5]
    assert tool_call.tool_calls and tool_call.tool_calls[0]["function"]["name"] == "current_time"
    assert result.tool_call_id == tool_call.tool_calls[0]["id"] and result.name == "current_time"
    assert result.content == finished[0].content
    assert final.content == f"It is {result.content} now." == response.text
    stats = workspace.repo.get_context(session_id).tool_stats
    assert stats.by_tool == {"current_time": 1} and stats.failures == 0


def test_an_agent_without_tools_sends_none_and_preflight_shows_the_enabled_ones(
    workspace: Workspace,
) -> None:
    session_id = store_session(workspace, "Plain", [("user", "Hi")])
    agent_with(workspace, [])
    provider = ScriptedProvider(["Hello."])
    list(stream_turn(workspace, session_id, "Hello?", client=provider))
    assert provider.requests[0].tools == [] and "tools" not in provider.payloads[0]

    agent_with(workspace, ["current_time", "recall_memory"])
    preview = preflight_session(workspace, session_id, "And now?", provider=ScriptedProvider())
    names = [t["function"]["name"] for t in preview.payload["tools"]]
    assert names == ["recall_memory", "current_time"]
