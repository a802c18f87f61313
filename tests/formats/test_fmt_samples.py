"""Every sample imports through the workspace, or is reported the way its source says.

Two sets: the suite's own exports (``tests/own_samples.py``, written to a temporary folder,
always run) and the real samples of ``../shared/samples`` when that folder is present (read
in place, never copied into the repository; ``SOURCES.md`` says what each should give). A
real sample added later without an entry in ``EXPECTED`` must still import at least one
session without raising.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.own_samples import TAU_TASKS, WRITERS, write_own_sample
from workbench.core.conversation import Message
from workbench.engine.workspace import ImportReport, Workspace
from workbench.errors import FormatError
from workbench.formats import detect_format

SAMPLES = Path(__file__).parents[2] / ".." / "shared" / "samples"


def sample_files() -> list[str]:
    """``own:NAME`` for the suite's own exports, ``shared:NAME`` for each real sample."""
    own = [f"own:{name}" for name in sorted(WRITERS)]
    if not SAMPLES.is_dir():
        return own
    return own + sorted(
        f"shared:{p.relative_to(SAMPLES).as_posix()}"
        for p in SAMPLES.rglob("*")
        if p.is_file() and p.name != "SOURCES.md"
    )


SessionCheck = Callable[[Workspace, ImportReport], None]


@dataclass
class Expected:
    """What importing one sample must give."""

    format: str
    sessions: int | None = None
    skipped: list[str] = field(default_factory=list)  # entry names, in order
    error: str | None = None  # a regular expression the FormatError must match
    check: SessionCheck | None = None


def messages_of(ws: Workspace, title: str) -> list[Message]:
    return ws.session_view(next(s.id for s in ws.list_sessions() if s.title == title))[1]


def check_chatgpt_tree(ws: Workspace, report: ImportReport) -> None:
    session = messages_of(ws, "Assist user with summary")
    assert [m.content for m in session if m.role == "user"] == [
        "hi there",
        "hi again",
        "tell me a joke",
    ]
    branch = messages_of(ws, "Assist user with summary (branch 1)")
    assert branch[-1].content.startswith("Sure! Here's a short story")
    assert branch[-1].metadata.get("status") == "in_progress"


def check_modern_export(ws: Workspace, report: ImportReport) -> None:
    assert "no 'mapping'" in report.skipped[0].reason
    deploy = messages_of(ws, "Deploying the staging cluster")
    # The hidden custom-instructions node is not a message.
    assert [m.role for m in deploy] == ["user", "assistant", "user", "assistant"]
    assert deploy[-1].metadata["model"] == "o4-mini"


def check_minimal(ws: Workspace, report: ImportReport) -> None:
    assert {s.message_count for s, _ in report.sessions} == {2}


def check_claude_html(ws: Workspace, report: ImportReport) -> None:
    titles = {s.title: s.message_count for s, _ in report.sessions}
    assert titles["Напиши функцию на Python"] == 2  # empty name: the first question
    assert titles["Пустой чат"] == 0


def check_claude_null(ws: Workspace, report: ImportReport) -> None:
    assert "null" in report.skipped[0].reason
    reply = messages_of(ws, "Lean legs and bioimpedance scale accuracy")[-1]
    assert reply.parts is not None and reply.parts[0]["type"] == "reasoning"


def check_openwebui(ws: Workspace, report: ImportReport) -> None:
    tool_chat = messages_of(ws, "Chat with tool call")
    assert [m.role for m in tool_chat] == ["user", "assistant", "tool", "assistant"]
    assert tool_chat[2].content == "Paris: 18C, rain"
    reasoning = messages_of(ws, "Chat with reasoning")[-1]
    assert reasoning.content == "255"
    assert reasoning.parts is not None and reasoning.parts[0]["type"] == "reasoning"


def check_llm(ws: Workspace, report: ImportReport) -> None:
    tools = [s for s, _ in report.sessions if s.title.startswith('{"prompt": "call a tool"')]
    messages = ws.session_view(tools[0].id)[1]
    assert [m.role for m in messages][:3] == ["user", "assistant", "tool"]
    assert messages[2].tool_call_id == (messages[1].tool_calls or [{}])[0].get("id")
    pirate = messages_of(ws, "tell me about ships")
    assert pirate[0].role == "system" and pirate[0].content == "You are a terse pirate"
    fragment = messages_of(ws, "fragment text: the quick brown …")
    assert fragment[0].content == "fragment text: the quick brown fox\n\nsummarize the fragment"


def check_missing_turns(ws: Workspace, report: ImportReport) -> None:
    ((session, _),) = report.sessions
    messages = ws.session_view(session.id)[1]
    assert len(messages) == 12
    assert messages[1].role == "assistant" and messages[1].content == ""


def check_own_fork(ws: Workspace, report: ImportReport) -> None:
    session = messages_of(ws, "Jokes with a fork")
    branch = messages_of(ws, "Jokes with a fork (branch 1)")
    assert [m.content for m in session[:3]] == [m.content for m in branch[:3]]
    assert (session[-1].content, branch[-1].content) == (
        "Why did the tree log out?", "A short story instead."
    )
    assert all(m.created_at is not None for m in session + branch)


def check_own_claude_null(ws: Workspace, report: ImportReport) -> None:
    assert "null" in report.skipped[0].reason
    assert [m.role for m in messages_of(ws, "Scales and legs")] == ["user", "assistant"]


def check_own_tau(ws: Workspace, report: ImportReport) -> None:
    for session, _ in report.sessions:
        messages = ws.session_view(session.id)[1]
        call = next(m for m in messages if m.tool_calls)
        result = next(m for m in messages if m.role == "tool")
        assert result.tool_call_id == call.tool_calls[0]["id"]  # type: ignore[index]
        assert call.content == ""  # the export's null content


def check_own_missing_turn(ws: Workspace, report: ImportReport) -> None:
    ((session, _),) = report.sessions
    roles = [m.role for m in ws.session_view(session.id)[1]]
    assert roles == ["system", "user", "user", "assistant"]  # nothing invented between


EXPECTED_OWN: dict[str, Expected] = {
    "chatgpt/fork.json": Expected(
        "chatgpt", sessions=2, skipped=["item 1"], check=check_own_fork
    ),
    "claude/null_message.json": Expected(
        "claude", sessions=1, skipped=["item 0 chat_messages[0]"], check=check_own_claude_null
    ),
    "openai/tau_like_airline.json": Expected("openai", sessions=TAU_TASKS, check=check_own_tau),
    "sharegpt/missing_turn.json": Expected("sharegpt", sessions=1, check=check_own_missing_turn),
}


EXPECTED: dict[str, Expected] = {
    "chatgpt/everything-chatgpt_conversations_INVALID.json": Expected(
        "chatgpt", error=r"everything-chatgpt_conversations_INVALID\.json.*line 1, column \d+"
    ),
    "chatgpt/librechat_chatgpt-modern-export.json": Expected(
        "chatgpt", sessions=2, skipped=["item 1"], check=check_modern_export
    ),
    "chatgpt/librechat_chatgpt-tree.json": Expected(
        "chatgpt", sessions=2, check=check_chatgpt_tree
    ),
    "chatgpt/looselips_minimal_conversations.json": Expected(
        "chatgpt", sessions=5, check=check_minimal
    ),
    "claude/claude-export-html_conversations.json": Expected(
        "claude", sessions=3, check=check_claude_html
    ),
    "claude/openarchive_claude_export_nullmsg.json": Expected(
        "claude", sessions=1, skipped=["item 0 chat_messages[0]"], check=check_claude_null
    ),
    "llm/llm-0.27-logs.db": Expected("llm", sessions=8, check=check_llm),
    "llm/llm-0.36-logs.db": Expected("llm", sessions=9, check=check_llm),
    "openai/tau-bench_gpt-4o-airline_first20.json": Expected("openai", sessions=20),
    "openwebui/librechat_openwebui-export.json": Expected(
        "openwebui", sessions=3, check=check_openwebui
    ),
    "sharegpt/axolotl_conversation.json": Expected("sharegpt", sessions=1),
    "sharegpt/axolotl_conversation.missingturns.json": Expected(
        "sharegpt", sessions=1, check=check_missing_turns
    ),
}


@pytest.mark.parametrize("name", sample_files())
def test_sample_imports_or_is_reported_as_sources_says(tmp_path: Path, name: str) -> None:
    where, _, name = name.partition(":")
    if where == "own":
        path = write_own_sample(tmp_path / "own", name)
        expected: Expected | None = EXPECTED_OWN[name]
    else:
        path = SAMPLES / name
        expected = EXPECTED.get(name)
    with Workspace.open(tmp_path / "samples.db") as ws:
        if expected is None:
            report = ws.import_path(path)
            assert report.sessions, f"{name} imported nothing: {report.skipped}"
            return
        assert detect_format(path).name == expected.format
        if expected.error is not None:
            with pytest.raises(FormatError, match=expected.error):
                ws.import_path(path)
            assert ws.count_sessions() == 0
            return
        report = ws.import_path(path)
        assert [s.entry for s in report.skipped] == expected.skipped
        if expected.sessions is not None:
            assert len(report.sessions) == expected.sessions
        assert all(created for _, created in report.sessions)
        if expected.check is not None:
            expected.check(ws, report)
        again = ws.import_path(path)
        assert not any(created for _, created in again.sessions)
        assert ws.count_sessions() == len(report.sessions)
