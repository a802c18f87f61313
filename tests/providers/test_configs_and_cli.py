"""Provider configs in the store (never a secret), providers built from them, connection
tests, and the ``providers`` and ``chat`` commands against the protocol server."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from protocol_server import Fault, ProtocolServer, openai_error

from workbench.core.conversation import Message
from workbench.core.provider import ChatRequest, ProviderConfig
from workbench.engine.providers import ProviderSettings, build_provider, test_connection
from workbench.engine.workspace import Workspace
from workbench.errors import AuthenticationError, NotFoundError, StorageError

REPO_ROOT = Path(__file__).resolve().parents[2]
Cli = Callable[..., Any]  # the ``cli`` fixture


def config(server: ProtocolServer, name: str = "local", kind: str = "openai",
           **fields: Any) -> ProviderConfig:
    return ProviderConfig(name=name, kind=kind, base_url=server.url, model=server.model,
                          **fields)


@pytest.fixture
def settings(db_target: Path | str) -> Any:
    """The provider settings of the test's database (a SQLite file or a team-store
    database, see ``backend``)."""
    ws = Workspace.open(db_target)
    try:
        yield ProviderSettings(ws.db)
    finally:
        ws.close()


# -- the store ---------------------------------------------------------------------------------


def test_configs_round_trip_through_the_store(settings: ProviderSettings,
                                              server: ProtocolServer) -> None:
    stored = settings.add(config(server, api_key_env="LOCAL_KEY", context_window=2048,
                                 max_output_tokens=256, temperature=0.3,
                                 timeouts={"read": 30.0}, extra_headers={"X-Org": "lab"}))
    assert stored.id is not None
    again = settings.get("local")
    assert again.to_json() == stored.to_json()
    assert again.timeouts == {"read": 30.0} and again.extra_headers == {"X-Org": "lab"}
    settings.add(config(server, name="claude", kind="anthropic"))
    assert [c.name for c in settings.list()] == ["claude", "local"]
    changed = settings.update("local", model="other", context_window=None)
    assert (changed.model, changed.context_window) == ("other", None)
    settings.remove("claude")
    assert [c.name for c in settings.list()] == ["local"]


def test_store_refuses_duplicates_unknown_kinds_and_missing_names(
    settings: ProviderSettings, server: ProtocolServer
) -> None:
    settings.add(config(server))
    with pytest.raises(StorageError, match="already exists"):
        settings.add(config(server))
    with pytest.raises(StorageError, match="not one of"):
        settings.add(config(server, name="x", kind="gemini"))
    with pytest.raises(StorageError, match="http"):
        settings.add(ProviderConfig("y", "openai", "ftp://host", "m"))
    with pytest.raises(NotFoundError, match="no provider named 'ghost'"):
        settings.remove("ghost")


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"timeouts": {"read": -5.0}}, "read timeout"),
        ({"timeouts": {"connect": 0.0}}, "connect timeout"),
        ({"timeouts": {"total": float("nan")}}, "total timeout"),
        ({"temperature": -0.5}, "temperature"),
        ({"temperature": float("inf")}, "temperature"),
    ],
)
def test_store_refuses_timeouts_and_temperatures_no_server_takes(
    settings: ProviderSettings, server: ProtocolServer, fields: dict[str, Any], said: str
) -> None:
    with pytest.raises(StorageError, match=said):
        settings.add(config(server, **fields))
    assert settings.list() == []
    settings.add(config(server))
    with pytest.raises(StorageError, match=said):
        settings.update("local", **fields)
    assert settings.get("local").timeouts == config(server).timeouts


def test_providers_add_with_a_negative_timeout_is_one_line_and_adds_nothing(
    cli: Cli, server: ProtocolServer
) -> None:
    result = cli("providers", "add", "local", "--kind", "openai", "--base-url", server.url,
                 "--model", "m", "--timeout-read", "-5")
    assert result.code == 1 and len(result.err.strip().splitlines()) == 1
    assert "above zero" in result.err
    assert json.loads(cli("providers", "list", "--json").out) == []


@pytest.mark.parametrize(
    "fields",
    [
        {"api_key_env": "sk-test-SENTINEL-4f9c2a7be1d34c55"},
        {"api_key_keyring": "sk-test-SENTINEL-4f9c2a7be1d34c55"},
        {"extra_headers": {"X-Custom": "sk-test-SENTINEL-4f9c2a7be1d34c55"}},
        {"extra_headers": {"Authorization": "Bearer sk-test-SENTINEL-4f9c2a7be1d34c55"}},
        {"extra_headers": {"api-key": "abc"}},
    ],
)
def test_a_key_typed_into_a_config_is_refused_and_not_echoed(
    settings: ProviderSettings, server: ProtocolServer, db_target: Path | str,
    sentinel_key: str, fields: dict[str, Any],
) -> None:
    with pytest.raises(StorageError) as caught:
        settings.add(config(server, **fields))
    assert sentinel_key not in str(caught.value)
    assert settings.list() == []
    if isinstance(db_target, Path):  # the file's bytes (a server keeps no file here)
        assert sentinel_key.encode() not in db_target.read_bytes()


# -- building and testing -----------------------------------------------------------------------


def test_built_provider_sends_the_key_from_the_environment(
    server: ProtocolServer, sentinel_key: str
) -> None:
    server.api_key = sentinel_key
    provider = build_provider(config(server, api_key_env="LOCAL_KEY"),
                              environ={"LOCAL_KEY": sentinel_key})
    assert provider.complete(ChatRequest([Message("user", "Hi")])).text
    assert server.chat_requests()[-1].headers["authorization"] == f"Bearer {sentinel_key}"
    report = test_connection(config(server, api_key_env="LOCAL_KEY"),
                             environ={"LOCAL_KEY": sentinel_key})
    assert report.ok, report.sentence
    assert server.chat_requests()[-1].headers["authorization"] == f"Bearer {sentinel_key}"
    assert "context window 4,096 tokens (from the server)" in report.sentence
    assert sentinel_key not in report.sentence


def test_missing_key_fails_before_any_request(server: ProtocolServer) -> None:
    with pytest.raises(AuthenticationError, match="LOCAL_KEY"):
        build_provider(config(server, api_key_env="LOCAL_KEY"), environ={})
    report = test_connection(config(server, api_key_env="LOCAL_KEY"), environ={})
    assert not report.ok and "LOCAL_KEY (not set)" in report.sentence
    assert server.chat_requests() == []


def test_connection_test_reports_a_refusal_as_a_sentence(
    server: ProtocolServer, sentinel_key: str
) -> None:
    server.api_key = "the-right-one"
    report = test_connection(config(server, api_key_env="K"), environ={"K": sentinel_key})
    assert not report.ok
    assert isinstance(report.error, AuthenticationError)
    assert report.sentence.startswith("Cannot use 'local'")
    assert sentinel_key not in report.sentence


def test_choose_names_the_provider_to_use(settings: ProviderSettings,
                                          server: ProtocolServer) -> None:
    with pytest.raises(NotFoundError, match="providers add"):
        settings.choose()
    settings.add(config(server))
    assert settings.choose() == "local"
    settings.add(config(server, name="second"))
    assert settings.choose(agent_provider="second") == "second"
    with pytest.raises(NotFoundError, match="--provider"):
        settings.choose()


def test_an_agent_whose_provider_is_gone_never_falls_back_to_another(
    cli: Cli, server: ProtocolServer
) -> None:
    """The agent said 'local'; 'local' removed, the only provider left is another server
    (perhaps a hosted one): the chat is refused, not sent there unasked."""
    _add_provider(cli, server)
    assert cli("providers", "add", "hosted", "--kind", "openai", "--base-url", server.url,
               "--model", "other").code == 0
    assert cli("chat", "Trip", "Hello", "--new", "--provider", "local").code == 0
    assert cli("agents", "edit", "Default", "--provider", "local").code == 0
    removed = cli("providers", "remove", "local")
    assert removed.code == 0
    assert "agent 'Default' used it" in removed.err
    sent = len(server.chat_requests())
    refused = cli("chat", "Trip", "Again")
    assert refused.code == 1
    [line] = refused.err.strip().splitlines()
    assert "provider 'local' is not configured" in line and "--provider" in line
    assert len(server.chat_requests()) == sent
    assert len(_messages(cli, "Trip")) == 2


def test_renaming_a_provider_renames_it_for_the_agents_that_use_it(
    cli: Cli, server: ProtocolServer
) -> None:
    _add_provider(cli, server)
    assert cli("providers", "add", "second", "--kind", "openai", "--base-url", server.url,
               "--model", "other").code == 0
    assert cli("chat", "Trip", "Hello", "--new", "--provider", "local").code == 0
    assert cli("agents", "edit", "Default", "--provider", "local").code == 0
    assert cli("providers", "edit", "local", "--name", "renamed").code == 0
    assert json.loads(cli("agents", "show", "Default", "--json").out)["provider"] == "renamed"
    assert cli("chat", "Trip", "Again").code == 0
    assert server.chat_requests()[-1].body["model"] == server.model


def _agents_refuse_changes(settings: ProviderSettings, backend: str) -> None:
    """A trigger that fails every change of an agent: what a failure between a
    provider's rename and its agents' would do."""
    from sqlalchemy import text

    if backend == "postgresql":
        statements = [
            "CREATE FUNCTION refuse_agent_change() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'agents are not to be changed now'; END $$",
            "CREATE TRIGGER refuse_agent_change BEFORE UPDATE ON agents FOR EACH ROW "
            "EXECUTE FUNCTION refuse_agent_change()",
        ]
    else:
        statements = [
            "CREATE TRIGGER refuse_agent_change BEFORE UPDATE ON agents "
            "BEGIN SELECT RAISE(ABORT, 'agents are not to be changed now'); END",
        ]
    with settings.db.write() as conn:
        for statement in statements:
            conn.execute(text(statement))


def test_a_rename_that_fails_half_way_leaves_the_provider_and_its_agents_as_they_were(
    settings: ProviderSettings, server: ProtocolServer, backend: str,
) -> None:
    """The provider's rename and its agents' are one transaction: when the agents'
    fails, the provider keeps its name too, and no agent names a provider that is not
    there."""
    from workbench.store.repository import Repository

    settings.add(config(server))
    repo = Repository(settings.db)
    agent = repo.create_agent("Planner", provider="local")
    _agents_refuse_changes(settings, backend)
    with pytest.raises(StorageError):
        settings.update("local", name="renamed")
    assert [c.name for c in settings.list()] == ["local"]
    assert repo.get_agent(agent.id).provider == "local"


def test_a_rename_carries_every_agent_of_the_provider_along(
    settings: ProviderSettings, server: ProtocolServer,
) -> None:
    from workbench.store.repository import Repository

    settings.add(config(server))
    settings.add(config(server, name="other"))
    repo = Repository(settings.db)
    planners = [repo.create_agent(f"Planner {n}", provider="local").id for n in (1, 2)]
    bystander = repo.create_agent("Bystander", provider="other").id
    assert settings.update("local", name="renamed").name == "renamed"
    assert [repo.get_agent(a).provider for a in planners] == ["renamed", "renamed"]
    assert repo.get_agent(bystander).provider == "other"


# -- providers command ---------------------------------------------------------------------------


def test_providers_commands(cli: Cli, server: ProtocolServer) -> None:
    added = cli("providers", "add", "local", "--kind", "openai", "--base-url", server.url,
                "--model", server.model, "--api-key-env", "WB_TEST_KEY",
                "--context-window", "2048", "--header", "X-Org=lab", "--timeout-read", "30")
    assert added.code == 0, added.err
    assert "Added provider 'local'" in added.out
    listed = cli("providers", "list", "--json")
    [entry] = json.loads(listed.out)
    assert entry["api_key_env"] == "WB_TEST_KEY" and entry["context_window"] == 2048
    assert entry["timeouts"] == {"read": 30.0} and entry["extra_headers"] == {"X-Org": "lab"}
    table = cli("providers", "list").out
    assert "local" in table and "env:WB_TEST_KEY" in table
    assert cli("providers", "remove", "local").code == 0
    assert "No providers yet" in cli("providers", "list").out
    gone = cli("providers", "remove", "local")
    assert gone.code == 1 and "no provider named 'local'" in gone.err


def test_providers_edit_changes_only_the_fields_given(cli: Cli, server: ProtocolServer
                                                      ) -> None:
    assert cli("providers", "add", "local", "--kind", "openai", "--base-url",
               "http://127.0.0.1:9/v1", "--model", "old-model", "--api-key-env", "OLD_KEY",
               "--timeout-read", "30").code == 0
    edited = cli("providers", "edit", "local", "--base-url", server.url, "--model",
                 server.model, "--name", "lab", "--timeout-connect", "5", "--json")
    assert edited.code == 0, edited.err
    entry = json.loads(edited.out)
    assert (entry["name"], entry["base_url"], entry["model"]) == ("lab", server.url,
                                                                  server.model)
    # What was not named stays as it was; timeouts merge.
    assert entry["api_key_env"] == "OLD_KEY" and entry["kind"] == "openai"
    assert entry["timeouts"] == {"read": 30.0, "connect": 5.0}
    [listed] = json.loads(cli("providers", "list", "--json").out)
    assert listed == entry
    cleared = cli("providers", "edit", "lab", "--api-key-env", "")
    assert cleared.code == 0 and "Updated provider 'lab'" in cleared.out
    assert json.loads(cli("providers", "list", "--json").out)[0]["api_key_env"] is None
    # The edited provider is the one chat uses.
    assert cli("providers", "test", "lab").code == 0
    nothing = cli("providers", "edit", "lab")
    assert nothing.code == 1 and "Nothing to change" in nothing.err
    missing = cli("providers", "edit", "gone", "--model", "m")
    assert missing.code == 1 and "no provider named 'gone'" in missing.err
    assert cli("providers", "add", "other", "--kind", "openai", "--base-url", server.url,
               "--model", "m").code == 0
    taken = cli("providers", "edit", "other", "--name", "lab")
    assert taken.code == 1 and "already exists" in taken.err


def test_providers_test_command(cli: Cli, server: ProtocolServer, sentinel_key: str,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    server.api_key = sentinel_key
    cli("providers", "add", "local", "--kind", "openai", "--base-url", server.url,
        "--model", server.model, "--api-key-env", "WB_TEST_KEY")
    monkeypatch.setenv("WB_TEST_KEY", "wrong-key-value")
    refused = cli("providers", "test", "local")
    assert refused.code == 1 and "refused" in refused.err
    assert "wrong-key-value" not in refused.err
    monkeypatch.setenv("WB_TEST_KEY", sentinel_key)
    ok = cli("providers", "test", "local")
    assert ok.code == 0 and ok.out.startswith("Connected to 'local'")
    assert sentinel_key not in ok.out + ok.err


# -- chat command ------------------------------------------------------------------------------


def _add_provider(cli: Cli, server: ProtocolServer, kind: str = "openai") -> None:
    result = cli("providers", "add", "local", "--kind", kind, "--base-url", server.url,
                 "--model", server.model)
    assert result.code == 0, result.err


def _messages(cli: Cli, session: str) -> list[dict[str, Any]]:
    shown = cli("show", session, "--json")
    assert shown.code == 0, shown.err
    return list(json.loads(shown.out)["messages"])


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [True, False])
def test_chat_streams_the_reply_and_records_it_with_usage(
    cli: Cli, server: ProtocolServer, kind: str, stream: bool
) -> None:
    _add_provider(cli, server, kind)
    args = ["chat", "Trip", "Plan a trip", "--new", "--max-tokens", "4"]
    first = cli(*args, *([] if stream else ["--no-stream"]))
    assert first.code == 0, first.err
    assert first.out.strip() == "".join(server.reply_words[:4]).strip()
    assert "in, 4 out" in first.err
    second = cli("chat", "Trip", "And then?")
    assert second.code == 0, second.err
    messages = _messages(cli, "Trip")
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[0]["content"] == "Plan a trip"
    usage = messages[1]["metadata"]["usage"]
    assert usage["output_tokens"] == 4
    # The second request carried the first turn: history went to the server.
    sent = server.chat_requests()[-1].body["messages"]
    assert any("Plan a trip" in json.dumps(m) for m in sent)
    context = json.loads(cli("show", "Trip", "--json").out)["context"]["token_usage"]
    total_out = sum(m["metadata"]["usage"]["output_tokens"] for m in messages[1::2])
    assert context["total_output"] == total_out


def test_chat_failure_is_one_line_and_adds_nothing(cli: Cli, server: ProtocolServer) -> None:
    _add_provider(cli, server)
    assert cli("chat", "Trip", "Hello", "--new").code == 0
    server.script(Fault("status", 400, openai_error(
        "request (9000 tokens) exceeds the available context size (4096 tokens)",
        "exceed_context_size_error", 400, n_prompt_tokens=9000, n_ctx=4096)))
    failed = cli("chat", "Trip", "Another")
    assert failed.code == 1
    [line] = failed.err.strip().splitlines()
    assert "9000 tokens" in line and "4096" in line
    assert len(_messages(cli, "Trip")) == 2


@pytest.mark.parametrize("fault", ["status", "error_event"])
def test_a_failed_chat_new_leaves_no_empty_session_behind(
    cli: Cli, server: ProtocolServer, fault: str
) -> None:
    _add_provider(cli, server)
    if fault == "status":
        server.script(Fault("status", 401, openai_error("bad key", "invalid_request_error")))
    else:
        server.script(Fault("error_event", after=1))
    failed = cli("chat", "Fresh start", "Hello", "--new")
    assert failed.code == 1
    listed = cli("sessions", "--json")
    assert listed.code == 0, listed.err
    assert [s["title"] for s in json.loads(listed.out)] == []
    # A session that already existed is kept as it was when its turn fails.
    assert cli("chat", "Kept", "Hello", "--new").code == 0
    server.script(Fault("status", 401, openai_error("bad key", "invalid_request_error")))
    assert cli("chat", "Kept", "Again", "--new").code == 1
    assert len(_messages(cli, "Kept")) == 2


def test_chat_retries_a_rate_limit_and_says_so(cli: Cli, server: ProtocolServer) -> None:
    _add_provider(cli, server)
    server.script(Fault("status", 429, openai_error("slow down", "rate_limit_error"),
                        {"Retry-After": "0"}))
    result = cli("chat", "Trip", "Hello", "--new")
    assert result.code == 0, result.err
    # Not a terminal: no status line, the summary counts the retry.
    [summary] = result.err.strip().splitlines()
    assert summary.startswith("[") and summary.endswith("; finish: stop; after 1 retry]")
    assert len(_messages(cli, "Trip")) == 2


def test_a_chat_that_fails_after_its_retries_is_still_one_line(
    cli: Cli, server: ProtocolServer
) -> None:
    _add_provider(cli, server)
    busy = Fault("status", 503, openai_error("overloaded", "server_error"), {"Retry-After": "0"})
    server.script(busy, busy, busy, busy)
    failed = cli("chat", "Trip", "Hello", "--new")
    assert failed.code == 1
    [line] = failed.err.strip().splitlines()
    assert line.startswith("workbench: ") and "503" in line
    assert len(server.chat_requests()) == 4


def test_chat_unknown_session_needs_new(cli: Cli, server: ProtocolServer) -> None:
    _add_provider(cli, server)
    result = cli("chat", "Nowhere", "Hello")
    assert result.code == 1 and "Nowhere" in result.err
    assert server.chat_requests() == []


# The child restores Python's own SIGINT handling, which a parent may have disabled.
CHAT_CHILD = textwrap.dedent("""
    import signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from workbench.cli import main
    raise SystemExit(main(sys.argv[1:]))
""")


def _chat_child(db_path: Path, *args: str) -> subprocess.Popen[str]:
    """``workbench chat ARGS`` in a child process that Ctrl+C (SIGINT) can interrupt."""
    return subprocess.Popen(
        [sys.executable, "-c", CHAT_CHILD, "chat", *args, "--db", str(db_path)],
        cwd=REPO_ROOT, env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("as_json", [False, True])
def test_a_chat_whose_reader_is_gone_still_stores_the_turn_quietly(
    cli: Cli, server: ProtocolServer, db_path: Path, as_json: bool
) -> None:
    """``workbench chat … | head -1`` once head has gone: the model was asked and
    answered, so the turn is stored; the closed pipe itself is silent."""
    _add_provider(cli, server)
    read_end, write_end = os.pipe()
    os.close(read_end)  # no reader at all: the first write meets a closed pipe
    try:
        done = subprocess.run(
            [sys.executable, "-m", "workbench", "chat", "Trip", "Plan a trip", "--new",
             "--db", str(db_path), *(["--json"] if as_json else [])],
            cwd=REPO_ROOT, env=dict(os.environ), stdout=write_end, stderr=subprocess.PIPE,
            text=True, timeout=120, check=False,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    messages = _messages(cli, "Trip")
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[1]["content"] == "".join(server.reply_words).strip()


def test_ctrl_c_stops_the_chat_and_leaves_the_session_unchanged(
    cli: Cli, server: ProtocolServer, db_path: Path
) -> None:
    _add_provider(cli, server)
    assert cli("chat", "Trip", "Hello", "--new").code == 0
    server.script(Fault("stall", after=2))
    child = _chat_child(db_path, "Trip", "Tell me more")
    try:
        assert server.stalling.wait(60), "the chat never reached the server"
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130, err
    assert "stopped; nothing was added" in err
    # At most what had streamed before the stall was shown.
    assert "".join(server.reply_words[:2]).startswith(out.rstrip("\n"))
    assert server.hung_up.wait(30)  # the connection was closed, not left hanging
    assert len(_messages(cli, "Trip")) == 2


def test_ctrl_c_with_keep_partial_stores_the_prompt_and_the_partial_reply(
    cli: Cli, server: ProtocolServer, db_path: Path
) -> None:
    """``chat --keep-partial`` then Ctrl+C mid-stream: the process waits for the worker
    to store the prompt and the reply so far, marked as stopped (it used to exit first)."""
    _add_provider(cli, server)
    assert cli("chat", "Trip", "Hello", "--new").code == 0
    server.script(Fault("stall", after=2))
    child = _chat_child(db_path, "Trip", "Tell me more", "--keep-partial")
    streamed = "".join(server.reply_words[:2])
    try:
        assert server.stalling.wait(60), "the chat never reached the server"
        # Interrupt once the words before the stall are on the screen, as a person would.
        shown = ""
        assert child.stdout is not None
        while streamed not in shown:
            ready, _, _ = select.select([child.stdout], [], [], 60)
            assert ready, f"the reply never showed; shown so far: {shown!r}"
            piece = os.read(child.stdout.fileno(), 1024).decode()
            assert piece, f"the chat ended early: {shown!r}"
            shown += piece
        child.send_signal(signal.SIGINT)
        _out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130, err
    assert "partial reply was kept" in err
    messages = _messages(cli, "Trip")
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[2]["content"] == "Tell me more"
    partial = messages[3]
    assert partial["content"] == streamed
    assert partial["metadata"].get("stopped") is True


def test_no_key_reaches_the_database(cli: Cli, server: ProtocolServer, db_path: Path,
                                     sentinel_key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    server.api_key = sentinel_key
    monkeypatch.setenv("WB_TEST_KEY", sentinel_key)
    assert cli("providers", "add", "local", "--kind", "openai", "--base-url", server.url,
               "--model", server.model, "--api-key-env", "WB_TEST_KEY").code == 0
    assert cli("providers", "test", "local").code == 0
    assert cli("chat", "Trip", "Hello", "--new").code == 0
    server.api_key = "rotated"
    assert cli("chat", "Trip", "Again").code == 1
    exported = db_path.parent / "export.json"
    assert cli("export", "Trip", "--format", "context-json", "-o", exported).code == 0
    with Workspace.open(db_path) as ws:  # the session's agent uses the provider
        agent = ws.repo.default_agent()
        ws.repo.update_agent(agent.id, provider="local")
    preflight = cli("preflight", "Trip", "Next", "--json")
    assert preflight.code == 0, preflight.err
    assert server.url in preflight.out  # it described this provider's request
    assert sentinel_key not in preflight.out + preflight.err
    for path in db_path.parent.iterdir():
        if path.is_file():
            assert sentinel_key.encode() not in path.read_bytes(), path.name


def test_chat_follows_the_agents_manual_memory_mode(
    cli: Cli, server: ProtocolServer
) -> None:
    # The walk: `workbench agents edit Default --mode manual` ("append turns to memory
    # (auto) or not") changed nothing: chat stored every turn all the same.
    _add_provider(cli, server)
    assert cli("chat", "Trip", "Hello", "--new").code == 0
    assert len(_messages(cli, "Trip")) == 2
    assert cli("agents", "edit", "Default", "--mode", "manual").code == 0
    answered = cli("chat", "Trip", "Are you there?")
    assert answered.code == 0, answered.err
    assert "Hello from the protocol server." in answered.out
    assert "memory mode is manual: nothing was added" in answered.err
    as_json = cli("chat", "Trip", "Again?", "--json")
    assert as_json.code == 0 and json.loads(as_json.out)["appended"] == []
    assert len(_messages(cli, "Trip")) == 2
    assert len(server.chat_requests()) == 3
    assert cli("agents", "edit", "Default", "--mode", "auto").code == 0
    assert cli("chat", "Trip", "Stored?").code == 0
    assert len(_messages(cli, "Trip")) == 4
