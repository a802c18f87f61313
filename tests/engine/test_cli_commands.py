"""The commands for every engine operation (issue 15.8): message, session, context,
memory and agents, and the small fixes (filter with no match, closed pipe, reversed
range, help on every option, search hits naming the session)."""

from __future__ import annotations

import argparse
import io
import json
import shlex
import subprocess
import sys
from typing import Any

import pytest

from workbench.cli import build_parser
from workbench.core.conversation import Message
from workbench.engine.workspace import Workspace

CliRunner = Any


def _session(ws: Workspace, title: str = "Trip") -> int:
    info = ws.repo.create_session(title)
    ws.repo.append_messages(info.id, [
        Message("user", "Which train goes to Porto?"),
        Message("assistant", "The Alfa Pendular at 08:09."),
        Message("user", "And back?"),
        Message("assistant", "At 18:00."),
    ])
    return info.id


def _contents(ws: Workspace, sid: int) -> list[str]:
    return [m.content for m in ws.repo.list_messages(sid)]


def test_message_edit_insert_delete_important(cli: CliRunner, workspace: Workspace) -> None:
    sid = _session(workspace)
    first = workspace.repo.list_messages(sid)[0]
    edited = cli("message", "edit", "Trip", f"#{first.id}", "--text", "Which train to Lisbon?",
                 "--json")
    assert edited.code == 0, edited.err
    assert edited.json()["content"] == "Which train to Lisbon?"
    assert edited.json()["token_count"] > 0
    assert cli("message", "insert", "Trip", "1", "user", "Also, any bus?").code == 0
    assert _contents(workspace, sid)[2] == "Also, any bus?"
    assert cli("message", "insert", "Trip", "0", "system", "Be brief.", "--before").code == 0
    assert _contents(workspace, sid)[0] == "Be brief."
    deleted = cli("message", "delete", "Trip", "3")
    assert deleted.code == 0 and "Deleted message" in deleted.out
    assert "Also, any bus?" not in _contents(workspace, sid)
    assert cli("message", "important", sid, "1").code == 0
    assert workspace.repo.list_messages(sid)[1].important
    assert cli("message", "important", sid, "1", "--off").code == 0
    assert not workspace.repo.list_messages(sid)[1].important
    # Bad input: one line each, nothing changed.
    before = _contents(workspace, sid)
    for args in (("message", "delete", "Trip", "99"), ("message", "delete", "Trip", "#x"),
                 ("message", "edit", "Trip", "1"), ("message", "delete", "Nope", "1")):
        cli(*args).assert_one_line_error()
    assert _contents(workspace, sid) == before


def test_session_commands(cli: CliRunner, workspace: Workspace) -> None:
    sid = _session(workspace)
    assert cli("session", "rename", "Trip", "Porto trip").code == 0
    assert workspace.repo.get_session(sid).title == "Porto trip"
    assert cli("session", "pin", sid).code == 0 and workspace.repo.get_session(sid).pinned
    assert cli("session", "unpin", sid).code == 0
    assert not workspace.repo.get_session(sid).pinned
    assert cli("session", "tag", sid, "travel", "rail").code == 0
    assert cli("session", "untag", sid, "rail").code == 0
    assert workspace.repo.get_session(sid).tags == ["travel"]
    cli("session", "untag", sid, "nope").assert_one_line_error()
    forked = cli("session", "fork", sid, "2", "--title", "Just the way there", "--json")
    assert forked.code == 0, forked.err
    new = forked.json()
    assert new["title"] == "Just the way there" and new["messages"] == 3
    assert cli("session", "archive", sid).code == 0
    assert workspace.repo.get_session(sid).archived
    assert "Porto trip" not in cli("sessions").out
    cli("session", "delete", new["id"]).assert_one_line_error()  # asks for --yes
    assert cli("session", "delete", new["id"], "--yes").code == 0
    assert cli("show", new["id"]).code != 0


def test_context_show_and_change(cli: CliRunner, workspace: Workspace) -> None:
    sid = _session(workspace)
    changed = cli("context", "Trip", "--add-fact", "Likes trains.", "--add-fact", "Vegan.",
                  "--summary", "Planning Porto.", "--add-task", "Book the train", "--json")
    assert changed.code == 0, changed.err
    data = changed.json()
    assert data["facts"] == ["Likes trains.", "Vegan."]
    assert data["summary"] == "Planning Porto."
    task_id = data["tasks"][0]["id"]
    assert data["tasks"][0]["status"] == "pending"
    assert cli("context", "Trip", "--task-status", task_id, "completed",
               "--remove-fact", "Vegan.").code == 0
    context = workspace.repo.get_context(sid)
    assert context.facts == ["Likes trains."] and context.tasks[0].status == "completed"
    shown = cli("context", "Trip")
    assert "Likes trains." in shown.out and "Planning Porto." in shown.out
    cli("context", "Trip", "--task-status", "nope", "completed").assert_one_line_error()
    cli("context", "Trip", "--task-status", task_id, "done").assert_one_line_error()
    cli("context", "Trip", "--remove-fact", "Absent").assert_one_line_error()


def test_memory_write_then_preflight_shows_it(cli: CliRunner, workspace: Workspace) -> None:
    """Issue 15.8: the default agent has long-term memory on, so ``memory write …
    --session S`` then ``preflight S hello`` shows the entry (seed 004's example)."""
    _session(workspace)
    written = cli("memory", "write", "User prefers the name Alex.", "--session", "Trip",
                  "--json")
    assert written.code == 0, written.err
    entry = written.json()
    assert entry["scope"] == "session" and entry["created"] is True
    shown = cli("preflight", "Trip", "hello", "--json").json()
    system = shown["payload"]["messages"][0]
    assert system["role"] == "system" and "User prefers the name Alex." in system["content"]
    listed = cli("memory", "list", "--session", "Trip", "--json").json()
    assert [e["content"] for e in listed] == ["User prefers the name Alex."]
    recalled = cli("memory", "recall", "name", "--session", "Trip", "--json").json()
    assert [e["id"] for e in recalled] == [entry["id"]]
    agent_wide = cli("memory", "write", "Speaks Portuguese.", "--agent", "default",
                     "--namespace", "travel", "--json").json()
    assert (agent_wide["scope"], agent_wide["namespace"]) == ("agent", "travel")
    assert cli("memory", "forget", entry["id"]).code == 0
    # The session's list holds its own entries and its agent's.
    left = cli("memory", "list", "--session", "Trip", "--json").json()
    assert [e["content"] for e in left] == ["Speaks Portuguese."]
    cli("memory", "forget", entry["id"]).assert_one_line_error()
    cli("memory", "write", "  ").assert_one_line_error()


def test_agents_list_show_edit(cli: CliRunner, workspace: Workspace) -> None:
    _session(workspace)
    listed = cli("agents", "list", "--json").json()
    name = listed[0]["name"]
    edited = cli("agents", "edit", name, "--instructions", "Be brief.", "--model", "m-1",
                 "--tools", "current_time,recall_memory", "--scope", "agent",
                 "--max-entries", "3", "--json")
    assert edited.code == 0, edited.err
    agent = edited.json()
    assert agent["instructions"] == "Be brief." and agent["model"] == "m-1"
    assert agent["tools"] == ["current_time", "recall_memory"]
    assert agent["memory_policy"]["scope"] == "agent"
    assert agent["memory_policy"]["max_entries"] == 3
    assert "Be brief." in cli("agents", "show", name).out
    cli("agents", "edit", name, "--tools", "teleport").assert_one_line_error()
    cli("agents", "edit", name, "--memory-policy", '{"bogus": 1}').assert_one_line_error()
    cli("agents", "show", "nobody").assert_one_line_error()
    assert cli("agents", "show", name, "--json").json()["tools"] == [
        "current_time", "recall_memory"]


def test_an_agent_is_never_given_a_provider_that_does_not_exist(
    cli: CliRunner, workspace: Workspace
) -> None:
    _session(workspace)
    name = cli("agents", "list", "--json").json()[0]["name"]
    refused = cli("agents", "edit", name, "--provider", "nope", "--model", "m-2")
    refused.assert_one_line_error()
    assert "no provider named 'nope'" in refused.err and "providers add" in refused.err
    assert cli("providers", "add", "local", "--kind", "openai", "--base-url",
               "http://127.0.0.1:9/v1", "--model", "m-1").code == 0
    again = cli("agents", "edit", name, "--provider", "nope")
    again.assert_one_line_error()
    assert "the providers are: local." in again.err
    agent = cli("agents", "show", name, "--json").json()
    assert agent["provider"] is None and agent["model"] is None
    chosen = cli("agents", "edit", name, "--provider", "local", "--json")
    assert chosen.code == 0 and chosen.json()["provider"] == "local"


def test_sessions_filter_with_no_match_says_so(cli: CliRunner, workspace: Workspace) -> None:
    _session(workspace)
    result = cli("sessions", "--filter", "zzz")
    assert result.code == 0
    assert "No sessions match 'zzz'" in result.out
    assert "No sessions yet" not in result.out


def test_search_hits_name_the_session_title(cli: CliRunner, workspace: Workspace) -> None:
    sid = _session(workspace)
    result = cli("search", "Pendular")
    assert result.code == 0
    assert "'Trip'" in result.out and f"session {sid}" in result.out
    assert cli("search", "Pendular", "--json").json()[0]["session_title"] == "Trip"


def test_search_keeps_to_the_agent_named(cli: CliRunner, workspace: Workspace) -> None:
    mine = _session(workspace, "Mine")
    helper = workspace.repo.create_agent("Helper")
    theirs = workspace.repo.create_session("Theirs", agent_id=helper.id)
    workspace.repo.append_messages(theirs.id, [Message("user", "Is the Pendular late?")])
    everywhere = {h["session_id"] for h in cli("search", "Pendular", "--json").json()}
    assert everywhere == {mine, theirs.id}
    by_name = cli("search", "Pendular", "--agent", "Helper", "--json")
    assert by_name.code == 0, by_name.err
    assert {h["session_id"] for h in by_name.json()} == {theirs.id}
    assert "Theirs" in cli("search", "Pendular", "--agent", str(helper.id)).out
    cli("search", "Pendular", "--agent", "nobody").assert_one_line_error()


def test_human_lists_fit_80_columns(
    cli: CliRunner, workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    long_title = "How could I implement a minesweeper solver that never guesses wrongly"
    sid = _session(workspace, long_title)
    workspace.repo.append_messages(sid, [
        Message("user", "Pendular " + "and then the train goes on along the coast " * 6),
        *[Message("user" if i % 2 else "assistant", f"turn {i}") for i in range(20)],
    ])
    assert cli("session", "tag", sid, "a-rather-long-tag", "another-long-tag").code == 0
    assert cli("session", "pin", sid).code == 0
    assert cli("compact", sid, "--range", "1", "12").code == 0
    assert cli("agents", "edit", "Default", "--tools",
               "search_conversations,recall_memory,remember_fact,current_time",
               "--scope", "session", "--inject", "context", "--max-entries", "3",
               "--memory", "on").code == 0
    for args in (["sessions"], ["search", "Pendular"], ["compactions", sid],
                 ["agents", "list"], ["agents", "show", "Default"]):
        result = cli(*args)
        assert result.code == 0, result.err
        long = [line for line in result.out.splitlines() if len(line) > 80]
        assert long == [], args
    listed = cli("sessions").out
    assert "* How could I" in listed and "[a-rath" in listed and f"{sid}" in listed
    hits = cli("search", "Pendular").out.splitlines()
    assert f"(session {sid})" in hits[0] and "«Pendular»" in hits[1]


def test_json_and_db_may_come_before_the_command_or_its_action(
    cli: CliRunner, workspace: Workspace, db_target: Any
) -> None:
    sid = _session(workspace)
    assert [s["id"] for s in cli("--json", "sessions").json()] == [sid]
    assert cli("session", "--json", "pin", sid).json()["pinned"] is True
    assert cli("--json", "session", "unpin", sid).json()["pinned"] is False
    assert cli("providers", "--json", "list").json() == []
    placed = cli("--db", str(db_target), "message", "--json", "important", sid, "0", db=None)
    assert placed.code == 0, placed.err
    assert placed.json()["metadata"]["important"] is True
    human = cli("session", "pin", sid)
    assert human.code == 0 and human.out.startswith(f"Session {sid} pinned")


class _Terminal(io.StringIO):
    """Captured output that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_control_characters_from_conversations_never_reach_a_terminal(
    workspace: Workspace, db_target: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workbench.cli import main

    info = workspace.repo.create_session("evil \x1b]0;pwned\x07 title")
    workspace.repo.append_messages(info.id, [
        Message("user", "red \x1b[31mPendular\x1b[0m and \r overwrite\n\tindented"),
    ])
    shown: dict[str, str] = {}
    for args in (["sessions"], ["show", str(info.id)], ["search", "overwrite"]):
        screen = _Terminal()
        monkeypatch.setattr(sys, "stdout", screen)
        assert main([*args, "--db", str(db_target)]) == 0
        text = shown[args[0]] = screen.getvalue()
        assert "\x1b" not in text and "\x07" not in text and "\r" not in text, args
        assert "\\x1b" in text, args
    assert "\n\tindented" in shown["show"]  # newlines and tabs are text
    # Not a terminal (a pipe, a file), or JSON: the text as it is stored.
    piped = io.StringIO()
    monkeypatch.setattr(sys, "stdout", piped)
    assert main(["show", str(info.id), "--db", str(db_target)]) == 0
    assert "red \x1b[31mPendular" in piped.getvalue()


def test_control_characters_in_what_stderr_reports_never_reach_a_terminal(
    workspace: Workspace, db_target: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # A folder's file names, an entry's role, a server's error: text from elsewhere that
    # the import report and error lines quote on stderr.
    from workbench.cli import main

    folder = tmp_path / "exports"
    folder.mkdir()
    (folder / "bad \x1b]0;pwned\x07\x1b[2J.json").write_text("{not json", encoding="utf-8")
    (folder / "good.json").write_text(json.dumps([{"messages": [
        {"role": "user", "content": "hi"},
        {"role": "us\x1b[31mer", "content": "x"}]}]), encoding="utf-8")
    for extra in ([], ["--json"]):
        screen = _Terminal()
        monkeypatch.setattr(sys, "stderr", screen)
        monkeypatch.setattr(sys, "stdout", io.StringIO())
        assert main(["import", str(folder), "--db", str(db_target), *extra]) == 0
        text = screen.getvalue()
        assert "\x1b" not in text and "\x07" not in text, extra
        if not extra:
            assert "bad \\x1b]0;pwned\\x07\\x1b[2J.json" in text
            assert "us\\x1b[31mer" in text
    # An error line too (after the command's own output has ended).
    screen = _Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    assert main(["show", "no \x1b]8;;http://x\x1b\\ such", "--db", str(db_target)]) == 1
    assert "\x1b" not in screen.getvalue() and "\\x1b]8;;http://x" in screen.getvalue()


def test_an_import_that_fails_midway_on_a_terminal_gives_its_reason_a_line_of_its_own(
    cli: CliRunner, workspace: Workspace, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from workbench.errors import StorageError

    def failing(self: Workspace, path: Any, **options: Any) -> Any:
        options["progress"](3, None)  # the progress line is on screen
        raise StorageError("The database refused the change: disk I/O error.")

    monkeypatch.setattr(Workspace, "import_path", failing)
    screen = _Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    source = tmp_path / "chats.jsonl"
    source.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n', encoding="utf-8")
    assert cli("import", source).code == 1
    last = screen.getvalue().split("\r")[-1].splitlines()
    assert last == ["Imported 3 conversation(s)…",
                    "workbench: The database refused the change: disk I/O error."]


def test_deleting_by_a_title_two_sessions_share_asks_for_the_id(
    cli: CliRunner, workspace: Workspace
) -> None:
    older = _session(workspace, "Trip")
    newer = _session(workspace, "Trip")
    refused = cli("session", "delete", "Trip", "--yes")
    line = refused.assert_one_line_error()
    assert f"'Trip' names 2 sessions ({newer}, {older})" in line
    assert {s["id"] for s in cli("sessions", "--json").json()} == {older, newer}
    # By id it goes; and a name only one session has is enough.
    assert cli("session", "delete", str(newer), "--yes").code == 0
    assert cli("session", "delete", "Trip", "--yes").code == 0
    assert cli("sessions", "--json").json() == []
    # Changes that can be taken back keep to the newest of equals, as before.
    _session(workspace, "Walk")
    newest = _session(workspace, "Walk")
    assert cli("session", "pin", "Walk", "--json").json()["id"] == newest


def test_a_closed_pipe_is_silent(workspace: Workspace, db_target: Any) -> None:
    for i in range(300):
        workspace.repo.create_session(f"Session number {i}")
    workspace.close()
    command = (f"{shlex.quote(sys.executable)} -m workbench sessions"
               f" --db {shlex.quote(str(db_target))} | head -n 1")
    done = subprocess.run(["bash", "-c", "set -o pipefail; " + command], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.stdout.startswith("    ID")
    assert done.stderr == ""


def _options(parser: argparse.ArgumentParser, path: str) -> list[tuple[str, Any]]:
    found = []
    for action in parser._actions:  # noqa: SLF001 - walking argparse's own tree
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for name, sub in action.choices.items():
                found += _options(sub, f"{path} {name}")
        elif action.option_strings:
            found.append((f"{path} {action.option_strings[-1]}", action.help))
    return found


def test_every_option_has_help_text() -> None:
    missing = [name for name, text in _options(build_parser(), "workbench")
               if not text or text == argparse.SUPPRESS]
    assert missing == []


@pytest.mark.parametrize("command", ["message", "session", "context", "memory", "agents"])
def test_each_new_command_has_help(cli: CliRunner, command: str) -> None:
    result = cli(command, "--help", db=None)
    assert result.code == 0 and "usage:" in result.out


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["search"], "required: query"),
        (["search", "Porto", "--limit", "x"], "--limit"),
        (["search", "Porto", "--limit", "0"], "above zero"),
        (["sessions", "--limit", "-1"], "above zero"),
        (["message", "move", "Trip"], "invalid choice: 'move'"),
        (["message", "edit", "Trip"], "required: message"),
        (["compact", "Trip", "--keep", "-1"], "0 or more"),
        (["bogus"], "invalid choice"),
        (["memory", "forget", "abc"], "invalid int value"),
        (["preflight", "Trip", "hi", "--context-window", "-5"], "above zero"),
        (["preflight", "Trip", "hi", "--context-window", "0"], "above zero"),
        (["compact", "Trip", "--range", "-1", "2"], "positions start at 0"),
    ],
)
def test_a_usage_error_is_one_line_naming_the_help(
    cli: CliRunner, workspace: Workspace, args: list[str], reason: str
) -> None:
    _session(workspace)
    result = cli(*args)
    assert result.code == 2 and result.out == ""
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    assert reason in lines[0] and lines[0].startswith("workbench") and "--help" in lines[0]


def test_a_query_that_starts_with_a_dash_is_explained_and_found_after_the_dashes(
    cli: CliRunner, workspace: Workspace, db_target: Any
) -> None:
    sid = _session(workspace)
    workspace.repo.append_messages(sid, [Message("user", "call self->next now")])
    refused = cli("search", "->")
    assert refused.code == 2 and len(refused.err.splitlines()) == 1
    assert "-- ->" in refused.err
    found = cli("search", "--db", str(db_target), "--json", "--", "->", db=None)
    assert found.code == 0, found.err
    assert [h["snippet"] for h in found.json()] == ["call self«->»next now"]
