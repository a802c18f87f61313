"""What preflight shows is what chat sends (issue 15.1): one function sets up every turn.

For each combination of provider kind, streaming, ``--max-tokens``, a named or an
implied provider, and an agent with or without a model override and tools, the body
the protocol server receives from ``workbench chat`` equals, byte for byte, the payload
``workbench preflight`` printed with the same options (encoded as the HTTP client
encodes JSON); the same holds for the engine's GUI path (``preflight_turn`` and
``stream_turn``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from protocol_server import ProtocolServer

from workbench.engine.chat import preflight_turn, stream_turn
from workbench.engine.workspace import Workspace

Cli = Callable[..., Any]


def _encoded(payload: dict[str, Any]) -> bytes:
    """``payload`` as the HTTP client puts it on the wire."""
    return httpx.Request("POST", "http://127.0.0.1/", json=payload).content


def _setup_agent(db_path: Path, *, override: bool) -> None:
    with Workspace.open(db_path) as ws:
        info = ws.repo.find_session("Trip")
        agent = ws.repo.get_agent(info.agent_id)
        fields: dict[str, Any] = {"instructions": "Answer in one line."}
        if override:
            fields.update(model="agent-model", tools=["current_time", "recall_memory"])
        ws.repo.update_agent(agent.id, **fields)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("max_tokens", [None, 6])
@pytest.mark.parametrize("named", [True, False])
@pytest.mark.parametrize("override", [True, False])
def test_chat_sends_byte_for_byte_what_preflight_shows(
    cli: Cli, server: ProtocolServer, db_path: Path, kind: str, stream: bool,
    max_tokens: int | None, named: bool, override: bool,
) -> None:
    server.anthropic_window_check = True
    added = cli("providers", "add", "local", "--kind", kind, "--base-url", server.url,
                "--model", server.model)
    assert added.code == 0, added.err
    assert cli("chat", "Trip", "Plan a trip to Porto", "--new").code == 0
    _setup_agent(db_path, override=override)
    options = [*(["--provider", "local"] if named else []),
               *([] if stream else ["--no-stream"]),
               *(["--max-tokens", max_tokens] if max_tokens else [])]
    shown = cli("preflight", "Trip", "And the way back?", "--json", *options)
    assert shown.code == 0, shown.err
    preview = json.loads(shown.out)
    assert preview["provider"]["assumed"] is False
    sent = cli("chat", "Trip", "And the way back?", *options)
    assert sent.code == 0, sent.err
    body = server.chat_requests()[-1]
    assert body.raw == _encoded(preview["payload"])
    # The decisions themselves, visible in what went out.
    assert body.body["model"] == ("agent-model" if override else server.model)
    assert bool(body.body.get("tools")) is override
    assert body.body.get("stream", False) is stream
    if max_tokens:
        assert body.body["max_tokens"] == max_tokens


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_the_gui_engine_path_sends_what_the_request_panel_shows(
    server: ProtocolServer, tmp_path: Path, kind: str
) -> None:
    from workbench.core.provider import ProviderConfig
    from workbench.engine.providers import ProviderSettings

    server.anthropic_window_check = True
    with Workspace.open(tmp_path / "gui.db") as ws:
        ProviderSettings(ws.db).add(ProviderConfig(
            name="local", kind=kind, base_url=server.url, model=server.model))
        info = ws.repo.create_session("Trip")
        ws.repo.update_agent(info.agent_id, model="agent-model", tools=["current_time"])
        shown = preflight_turn(ws, info.id, "Hello there", provider="local")
        list(stream_turn(ws, info.id, "Hello there", provider="local"))
        assert server.chat_requests()[-1].raw == _encoded(shown.payload)
        assert shown.payload["model"] == "agent-model"


def test_preflight_without_any_provider_assumes_one_and_chat_refuses(
    cli: Cli, db_path: Path
) -> None:
    assert cli("chat", "Trip", "Hello", "--new").code == 1
    # The failed chat --new took back the session it made (issue 19.8).
    assert json.loads(cli("sessions", "--json").out) == []
    with Workspace.open(db_path) as ws:
        ws.repo.create_session("Trip")
    with_session = cli("preflight", "Trip", "Hello", "--json")
    # No provider is configured: preflight assumes one, where chat refuses.
    assert with_session.code == 0, with_session.err
    assert json.loads(with_session.out)["provider"]["assumed"] is True


def test_chat_names_the_auto_compaction_in_its_reply(
    cli: Cli, server: ProtocolServer, db_path: Path
) -> None:
    """Issue 15.3: the CLI prints the compaction that ran before the send; --json has it."""
    assert cli("providers", "add", "local", "--kind", "openai", "--base-url", server.url,
               "--model", server.model).code == 0
    assert cli("chat", "Long", "first question " * 30, "--new").code == 0
    with Workspace.open(db_path) as ws:
        info = ws.repo.find_session("Long")
        for i in range(6):
            assert cli("chat", "Long", f"question {i} " + "words " * 40).code == 0
        ws.repo.set_overrides(info.id, {"compaction": {
            "auto": True, "max_messages": 10, "keep_messages": 4}})
    printed = cli("chat", "Long", "And now?")
    assert printed.code == 0, printed.err
    assert "Auto-compaction 1: Folded" in printed.err
    assert "undo-compaction" in printed.err
    replies = [json.loads(cli("chat", "Long", f"more {i} " + "words " * 40, "--json").out)
               for i in range(4)]
    named = [r["compaction"] for r in replies if r["compaction"] is not None]
    assert len(named) == 1  # the session grew past the trigger once more
    assert named[0]["id"] == 2
    assert named[0]["message"].startswith("Auto-compaction 2: Folded")
    assert replies[0]["compaction"] is None


@pytest.mark.parametrize("window, policy_reserve, expected", [
    (4096, None, 1024),  # a quarter of a small window, not Anthropic's usual 4,096
    (4096, 700, 700),  # the agent's own reserve
    (None, None, 4096),  # no window known: the provider's default is both
])
def test_anthropic_asks_for_the_reply_tokens_the_budget_reserved(
    cli: Cli, db_path: Path, window: int | None, policy_reserve: int | None,
    expected: int,
) -> None:
    # The walk: on a 4,096-token window preflight reserved 1,024 tokens for the reply
    # while the request asked for max_tokens 4,096, so the server refused any input.
    srv = ProtocolServer(n_ctx=window)
    srv.anthropic_window_check = True
    srv.start()
    try:
        added = cli("providers", "add", "claude", "--kind", "anthropic", "--base-url",
                    srv.url, "--model", srv.model)
        assert added.code == 0, added.err
        with Workspace.open(db_path) as ws:
            info = ws.repo.create_session("Trip")
            if policy_reserve is not None:
                agent = ws.repo.get_agent(info.agent_id)
                ws.repo.update_agent(agent.id, memory_policy={
                    **agent.memory_policy, "reserve_output": policy_reserve})
        shown = cli("preflight", "Trip", "Plan a trip to Porto", "--json")
        assert shown.code == 0, shown.err
        preview = json.loads(shown.out)
        sent = cli("chat", "Trip", "Plan a trip to Porto", "--no-stream")
        assert sent.code == 0, sent.err
        received = srv.chat_requests()[-1].body
    finally:
        srv.stop()
    assert preview["budget"]["context_window"] == window
    assert preview["budget"]["reserved_output"] == expected
    assert preview["payload"]["max_tokens"] == expected
    assert received["max_tokens"] == expected


def test_anthropic_keeps_the_providers_own_max_output_and_a_given_max_tokens(
    cli: Cli, server: ProtocolServer, db_path: Path,
) -> None:
    server.anthropic_window_check = True
    added = cli("providers", "add", "claude", "--kind", "anthropic", "--base-url",
                server.url, "--model", server.model, "--max-output-tokens", "300")
    assert added.code == 0, added.err
    with Workspace.open(db_path) as ws:
        ws.repo.create_session("Trip")
    for options, expected in (([], 300), (["--max-tokens", "200"], 200)):
        shown = cli("preflight", "Trip", "Hello", "--json", *options)
        assert shown.code == 0, shown.err
        preview = json.loads(shown.out)
        assert cli("chat", "Trip", "Hello", "--no-stream", *options).code == 0
        assert preview["budget"]["reserved_output"] == expected
        assert server.chat_requests()[-1].body["max_tokens"] == expected
