"""``workbench compact``, ``undo-compaction`` and ``compactions`` (issue 6, SPEC §8)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workbench.core.compaction import SUMMARY_HEADING
from workbench.core.conversation import Message, SessionContext
from workbench.core.tokens import fill_counts, get_counter
from workbench.engine.workspace import Workspace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "providers"))
from protocol_server import Fault, ProtocolServer, openai_error  # noqa: E402

CliRunner = Callable[..., Any]


def make_session(ws: Workspace, count: int, *, summary: str = "") -> int:
    info = ws.repo.create_session("Trip planning")
    messages = [Message("system", "You are a travel agent.")]
    messages += [
        Message(
            "user" if i % 2 == 0 else "assistant",
            f"Message {i}: " + " ".join(f"about{i}n{j}" for j in range(50)),
        )
        for i in range(count)
    ]
    fill_counts(messages, get_counter())
    ws.repo.append_messages(info.id, messages)
    if summary:
        ws.repo.set_context(info.id, SessionContext(summary=summary))
    return info.id


def state(ws: Workspace, session_id: int) -> tuple[Any, ...]:
    messages = ws.repo.list_messages(session_id)
    return (
        [(m.id, m.state, m.compaction_id) for m in messages],
        ws.repo.get_context(session_id),
    )



def test_compact_prints_the_json_the_issue_names(cli: CliRunner, workspace: Workspace) -> None:
    sid = make_session(workspace, 51)
    result = cli("compact", sid, "--json")
    assert result.code == 0, result.err
    data = result.json()
    assert {"changed", "folded", "kept", "summary", "tokens_before", "tokens_after"} <= set(data)
    assert data["changed"] is True
    # The 30 newest stay and the 30th-newest is a reply: its question stays too.
    assert (data["folded"], data["kept"]) == (20, 31)
    assert data["summary"].startswith(SUMMARY_HEADING)
    assert len([ln for ln in data["summary"].splitlines() if ln.startswith("- ")]) == 20
    assert data["tokens_after"] < data["tokens_before"]
    assert workspace.repo.message_count(sid, states=["active"]) == 32
    first = workspace.repo.list_messages(sid, states=["active"])[1]
    assert first.role == "user" and first.position == 21
    assert workspace.repo.get_context(sid).summary == data["summary"]


def test_a_dry_run_shows_the_plan_and_changes_nothing(
    cli: CliRunner, workspace: Workspace
) -> None:
    sid = make_session(workspace, 51)
    before = state(workspace, sid)
    result = cli("compact", sid, "--dry-run", "--json")
    assert result.code == 0, result.err
    data = result.json()
    assert data["changed"] is False and data["would_change"] is True
    assert data["folded"] == 20 and data["dry_run"] is True
    assert state(workspace, sid) == before
    applied = cli("compact", sid, "--json").json()
    for key in ("folded", "kept", "summary", "tokens_before", "tokens_after", "folded_ids"):
        assert applied[key] == data[key], key


def test_keep_and_human_output(cli: CliRunner, workspace: Workspace) -> None:
    sid = make_session(workspace, 20)
    result = cli("compact", sid, "--keep", "5")
    assert result.code == 0, result.err
    # The 5th-newest is a reply: its question (position 15) stays with it.
    assert "Folded 14 message(s) (positions 1-14)" in result.out
    assert "6 active message(s) stay" in result.out
    assert f"workbench undo-compaction {sid}" in result.out
    assert workspace.repo.message_count(sid, states=["active"]) == 7


def test_a_range_folds_the_chosen_positions(cli: CliRunner, workspace: Workspace) -> None:
    sid = make_session(workspace, 20)
    data = cli("compact", sid, "--range", "4", "9", "--json").json()
    assert data["folded"] == 6
    folded = workspace.repo.list_messages(sid, states=["folded"])
    assert [m.position for m in folded] == [4, 5, 6, 7, 8, 9]


def test_nothing_to_compact_exits_zero_and_changes_nothing(
    cli: CliRunner, workspace: Workspace
) -> None:
    sid = make_session(workspace, 10)
    before = state(workspace, sid)
    human = cli("compact", sid)
    assert human.code == 0 and human.out.startswith("Nothing to compact")
    data = cli("compact", sid, "--json").json()
    assert data["changed"] is False and data["folded"] == 0
    assert data["tokens_after"] == data["tokens_before"]
    empty = workspace.repo.create_session("empty").id
    assert cli("compact", empty, "--keep", "0", "--json").json()["changed"] is False
    assert state(workspace, sid) == before


def test_undo_compaction_restores_and_a_second_undo_fails_in_one_line(
    cli: CliRunner, workspace: Workspace
) -> None:
    sid = make_session(workspace, 51, summary="Earlier: the user wants Porto.")
    before = state(workspace, sid)
    assert cli("compact", sid).code == 0
    assert state(workspace, sid) != before
    undone = cli("undo-compaction", sid)
    assert undone.code == 0, undone.err
    assert "Undid compaction" in undone.out
    assert state(workspace, sid) == before
    again = cli("undo-compaction", sid)
    assert "already undone" in again.assert_one_line_error()
    listed = cli("compactions", sid, "--json").json()
    assert len(listed) == 1 and listed[0]["undone_at"] is not None
    assert listed[0]["folded"] == 20 and listed[0]["summarizer"] == "extractive"


def test_undo_without_a_compaction_and_unknown_sessions_fail_in_one_line(
    cli: CliRunner, workspace: Workspace
) -> None:
    sid = make_session(workspace, 3)
    assert "no compaction to undo" in cli("undo-compaction", sid).assert_one_line_error()
    assert "no session" in cli("compact", "nope").assert_one_line_error().lower()


def test_a_negative_keep_is_a_usage_error(cli: CliRunner, workspace: Workspace) -> None:
    sid = make_session(workspace, 3)
    result = cli("compact", sid, "--keep", "-1")
    assert result.code == 2
    assert "0 or more" in result.err


def test_the_model_summarizer_through_a_configured_provider(
    cli: CliRunner, workspace: Workspace, server: ProtocolServer
) -> None:
    added = cli("providers", "add", "local", "--kind", "openai", "--base-url", server.url,
                "--model", "test-model")
    assert added.code == 0, added.err
    sid = make_session(workspace, 51, summary="The user likes trains.")
    result = cli("compact", sid, "--summarizer", "model", "--provider", "local",
                 "--prompt", "Be short.", "--json")
    assert result.code == 0, result.err
    data = result.json()
    assert data["changed"] is True and data["summarizer"] == "model"
    assert data["summary"] == "Hello from the protocol server."
    assert workspace.repo.get_context(sid).summary == "Hello from the protocol server."
    requests = [r.body for r in server.chat_requests()]
    assert all(b["messages"][0] == {"role": "system", "content": "Be short."} for b in requests)
    first = requests[0]["messages"][1]["content"]
    assert "Summary so far:\nThe user likes trains." in first
    assert "Message 0: about0n0" in first
    # The server's window (4,096 tokens) takes the 21 messages in more than one call,
    # each given the summary the one before wrote.
    assert len(requests) > 1
    for body in requests[1:]:
        assert "Summary so far:\nHello from the protocol server." in body["messages"][1]["content"]


def test_a_failing_model_summarizer_leaves_the_session_and_says_why(
    cli: CliRunner, workspace: Workspace, server: ProtocolServer
) -> None:
    cli("providers", "add", "local", "--kind", "openai", "--base-url", server.url,
        "--model", "test-model")
    server.script(Fault("status", 401, openai_error("Invalid key", "authentication_error")))
    sid = make_session(workspace, 51)
    before = state(workspace, sid)
    # Naming a provider is enough to ask for the model summarizer.
    result = cli("compact", sid, "--provider", "local")
    line = result.assert_one_line_error()
    assert "model summarizer failed" in line and "left unchanged" in line
    assert state(workspace, sid) == before
    assert cli("compactions", sid, "--json").json() == []


def test_compact_runs_as_a_real_command(
    run_workbench: Callable[..., Any], workspace: Workspace
) -> None:
    sid = make_session(workspace, 51)
    result = run_workbench("compact", str(sid), "--json")
    assert result.code == 0, result.err
    assert result.json()["folded"] == 20
    undone = run_workbench("undo-compaction", str(sid), "--json")
    assert undone.code == 0 and undone.json()["undone"] is True


def _short_session(ws: Workspace, count: int) -> int:
    info = ws.repo.create_session("Short talk")
    messages = [Message("user" if i % 2 == 0 else "assistant", "ok") for i in range(count)]
    fill_counts(messages, get_counter())
    ws.repo.append_messages(info.id, messages)
    return info.id


def test_a_fold_that_adds_tokens_warns_first(cli: CliRunner, workspace: Workspace) -> None:
    """Issue 15.3: "All but the newest 30" of 32 short messages would add tokens."""
    sid = _short_session(workspace, 32)
    dry = cli("compact", sid, "--keep", "30", "--dry-run", "--json").json()
    assert dry["would_change"] and dry["tokens_after"] >= dry["tokens_before"]
    assert "would not lower the request's tokens" in dry["warning"]
    before = state(workspace, sid)
    refused = cli("compact", sid, "--keep", "30")
    assert refused.code == 1
    assert "would not lower" in refused.err and "--force" in refused.err
    assert len(refused.err.strip().splitlines()) == 1
    assert state(workspace, sid) == before
    forced = cli("compact", sid, "--keep", "30", "--force")
    assert forced.code == 0, forced.err
    assert "Warning:" in forced.out
    assert workspace.repo.message_count(sid, states=["active"]) == 30


def test_a_reversed_range_is_an_error(cli: CliRunner, workspace: Workspace) -> None:
    sid = make_session(workspace, 8)
    before = state(workspace, sid)
    result = cli("compact", sid, "--range", "5", "2")
    assert result.code == 1
    assert "--range 5 2" in result.err and len(result.err.strip().splitlines()) == 1
    assert state(workspace, sid) == before


def test_compact_tidies_facts_and_tasks_when_nothing_folds(
    cli: CliRunner, workspace: Workspace
) -> None:
    """Seed 002: fact de-duplication and task pruning run on every compact()."""
    from datetime import timedelta

    from workbench.core.conversation import Task, utcnow

    sid = make_session(workspace, 4)
    old = utcnow() - timedelta(hours=30)
    workspace.repo.set_context(sid, SessionContext(
        facts=["b", "a", "A."],
        tasks=[Task(id="t", description="done", status="Completed", updated_at=old)]))
    result = cli("compact", sid)
    assert result.code == 0, result.err
    assert "Nothing folds" in result.out and "Completed tasks pruned: 1." in result.out
    context = workspace.repo.get_context(sid)
    assert context.facts == ["a", "b"] and context.tasks == []
    assert workspace.repo.message_count(sid, states=["active"]) == 5
