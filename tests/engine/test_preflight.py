"""Preflight (issue 3 "Preflight", SPEC §3): the exact payload, tokens per part, what was
left out and why; through ``Model.preflight`` and ``workbench preflight SESSION PROMPT``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from workbench.core.assembly import REASON_BUDGET, REASON_ORPHAN_RESULT
from workbench.core.conversation import Message
from workbench.core.provider import ProviderConfig
from workbench.core.tokens import fill_counts, get_counter
from workbench.engine.memory import Memory
from workbench.engine.model import Model
from workbench.engine.preflight import DEFAULT_CONTEXT_WINDOW, OfflineProvider
from workbench.engine.providers import ProviderSettings
from workbench.engine.turn import preflight_session
from workbench.engine.workspace import Workspace
from workbench.errors import UnreachableError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scripted_provider import ScriptedProvider  # noqa: E402

TOKEN_KEYS = {"system", "memory", "summary", "history", "prompt", "total"}
CliRunner = Callable[..., Any]


def test_preflight_breaks_tokens_down_by_part() -> None:
    memory = Memory()
    memory.append("user", "an earlier question")
    memory.append("assistant", "an earlier answer")
    memory.update_context(lambda c: setattr(c, "summary", "They met before."))
    memory.long_term().remember("The user is called Ana.")
    provider = ScriptedProvider(window=10_000)
    preview = Model(provider, instructions="Be kind.", memory=memory).preflight("Ana here")
    data = preview.to_json()
    tokens = data["tokens"]
    assert set(tokens) == TOKEN_KEYS
    assert all(tokens[k] > 0 for k in TOKEN_KEYS)
    assert tokens["total"] == get_counter().count_request(preview.messages)
    assert data["payload"] == provider.build_payload(preview.request)
    assert data["left_out"] == []
    assert data["recalled"][0]["content"] == "The user is called Ana."
    assert provider.calls == 0  # nothing was sent


def test_preflight_lists_what_was_left_out_and_why() -> None:
    memory = Memory()
    for i in range(30):
        memory.append("user", f"old message number {i} " * 5)
    memory.append("assistant", "", tool_calls=[
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    ])
    memory.append("tool", "result", tool_call_id="c1")
    ids = [m.id for m in memory.messages()]
    provider = ScriptedProvider(window=400)
    preview = Model(provider, memory=memory, max_tokens=100).preflight("new")
    left = {item.message_id: item.reason for item in preview.left_out}
    assert left and set(left.values()) == {REASON_BUDGET}
    kept = [m.id for m in preview.assembled.history]
    assert kept == ids[len(left):]  # the oldest left, the newest stayed
    assert preview.tokens.total <= 400 - 100
    assert preview.budget.to_json()["available"] == 300


def test_an_orphaned_tool_result_in_a_stored_session_is_reported(workspace: Workspace) -> None:
    info = workspace.repo.create_session("imported oddity")
    workspace.repo.append_messages(
        info.id,
        [
            Message(role="user", content="q"),
            Message(role="tool", content="stray result", tool_call_id="lost"),
            Message(role="assistant", content="a"),
        ],
    )
    preview = preflight_session(workspace, info.id, "next")
    stray = workspace.repo.list_messages(info.id)[1]
    assert [(i.message_id, i.reason) for i in preview.left_out] == [
        (stray.id, REASON_ORPHAN_RESULT)
    ]
    assert [m["content"] for m in preview.payload["messages"]] == ["q", "a", "next"]


def test_the_offline_stand_in_only_builds_requests() -> None:
    provider = OfflineProvider(None)
    assert provider.model == "gpt-4o-mini"
    assert provider.context_window() == DEFAULT_CONTEXT_WINDOW
    with pytest.raises(UnreachableError, match="preflight"):
        Model(provider).execute("hi")


# -- the command line -----------------------------------------------------------------------


def _session(workspace: Workspace, agent_id: int | None = None) -> int:
    info = workspace.repo.create_session("CLI preflight", agent_id=agent_id)
    messages = [Message(role="user", content=f"question {i} " * 20) for i in range(12)]
    fill_counts(messages, get_counter())
    workspace.repo.append_messages(info.id, messages)
    return info.id


def test_cli_prints_the_payload_tokens_and_left_out(
    cli: CliRunner, db_target: Path | str
) -> None:
    with Workspace.open(db_target) as ws:
        agent = ws.repo.create_agent("helper", instructions="Answer briefly.", model="gpt-4.1")
        session = _session(ws, agent.id)
        ids = [m.id for m in ws.repo.list_messages(session)]
    result = cli("preflight", session, "What now?", "--json")
    assert result.code == 0, result.err
    data = result.json()
    assert {"payload", "tokens", "left_out"} <= set(data)
    assert set(data["tokens"]) == TOKEN_KEYS
    assert data["payload"]["model"] == "gpt-4.1"
    assert data["payload"]["messages"][0] == {"role": "system", "content": "Answer briefly."}
    assert data["payload"]["messages"][-1] == {"role": "user", "content": "What now?"}
    assert data["left_out"] == []
    assert data["provider"]["assumed"] is True
    assert "128000" in data["provider"]["note"]

    tight = cli("preflight", session, "What now?", "--json", "--context-window", "600")
    assert tight.code == 0, tight.err
    left = tight.json()["left_out"]
    # One run: the oldest messages, consecutive, all for the budget.
    assert len(left) == 1
    (run,) = left
    assert run["reason"] == REASON_BUDGET
    assert run["first_id"] == ids[0] and run["last_id"] == ids[run["count"] - 1]
    assert run["first_position"] == 0 and run["last_position"] == run["count"] - 1
    assert 0 < run["count"] < len(ids)

    human = cli("preflight", session, "What now?")
    assert human.code == 0 and "Tokens: system" in human.out and "assumed" in human.out


def test_cli_uses_the_agents_configured_provider_without_its_key(
    cli: CliRunner, db_target: Path | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PREFLIGHT_TEST_KEY", "sk-very-secret-value")
    with Workspace.open(db_target) as ws:
        ProviderSettings(ws.db).add(
            ProviderConfig(
                name="local",
                kind="openai",
                base_url="http://127.0.0.1:9/v1",
                model="qwen",
                api_key_env="PREFLIGHT_TEST_KEY",
            )
        )
        agent = ws.repo.create_agent("configured", provider="local")
        session = _session(ws, agent.id)
    result = cli("preflight", session, "hello", "--json", "--context-window", "8000")
    assert result.code == 0, result.err
    data = result.json()
    assert data["provider"]["assumed"] is False
    assert data["provider"]["kind"] == "openai" and data["provider"]["name"] == "local"
    assert data["payload"]["model"] == "qwen"
    assert "sk-very-secret-value" not in result.out


def test_cli_names_a_missing_session_in_one_line(cli: CliRunner) -> None:
    result = cli("preflight", "no such session", "hi", "--json")
    assert result.code != 0
    assert "no such session" in result.err and len(result.err.strip().splitlines()) == 1


def test_with_several_providers_and_none_chosen_preflight_refuses_as_chat_does(
    cli: CliRunner, db_target: Path | str
) -> None:
    # The walk: chat refused ("choose one") while preflight showed a stand-in's request
    # that no command would ever send.
    with Workspace.open(db_target) as ws:
        settings = ProviderSettings(ws.db)
        for name in ("alpha", "beta"):
            settings.add(ProviderConfig(name=name, kind="openai",
                                        base_url="http://127.0.0.1:9/v1", model=name))
        ws.repo.create_session("Trip")
    chat = cli("chat", "Trip", "Hello")
    preflight = cli("preflight", "Trip", "Hello")
    as_json = cli("preflight", "Trip", "Hello", "--json")
    assert chat.code != 0 and "choose one with --provider NAME" in chat.err
    for result in (preflight, as_json):
        assert (result.code, result.err) == (chat.code, chat.err)
        assert result.out == ""
    # Naming one, both go ahead with it.
    chosen = cli("preflight", "Trip", "Hello", "--provider", "beta", "--json")
    assert chosen.code == 0, chosen.err
    assert chosen.json()["provider"]["name"] == "beta"
    assert chosen.json()["provider"]["assumed"] is False


def test_an_agent_whose_provider_is_gone_is_refused_by_preflight_as_by_chat(
    cli: CliRunner, db_target: Path | str
) -> None:
    # Chat never sends the agent's turns to another server unasked; preflight showed a
    # stand-in's request instead of saying so.
    with Workspace.open(db_target) as ws:
        ProviderSettings(ws.db).add(ProviderConfig(
            name="hosted", kind="openai", base_url="http://127.0.0.1:9/v1", model="m"))
        agent = ws.repo.create_agent("local-only", provider="gone-local")
        ws.repo.create_session("Trip", agent_id=agent.id)
    chat = cli("chat", "Trip", "Hello")
    preflight = cli("preflight", "Trip", "Hello", "--json")
    assert chat.code != 0 and "'gone-local' is not configured" in chat.err
    assert (preflight.code, preflight.err, preflight.out) == (chat.code, chat.err, "")
