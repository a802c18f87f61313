"""The Markdown transcript exporter."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from workbench.core.conversation import Message, SessionContext, Task
from workbench.formats import ExportSession, get_exporter

CALL = {
    "id": "call_9",
    "type": "function",
    "function": {"name": "search_flights", "arguments": '{"from": "OSL", "to": "BGO"}'},
}


def export(tmp_path: Path, sessions: list[ExportSession]) -> str:
    exporter = get_exporter("markdown")
    assert exporter.suffix == ".md"
    out = tmp_path / "out.md"
    exporter.write(sessions, out)
    return out.read_text(encoding="utf-8")


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block of ``text``."""
    pattern = re.compile(r"^(`{3,})(\w*)\n(.*?)\n\1$", re.S | re.M)
    return [(m.group(2), m.group(3)) for m in pattern.finditer(text)]


def test_transcript_shows_title_roles_times_and_tools(
    tmp_path: Path, session_factory: Callable[..., ExportSession]
) -> None:
    when = datetime(2024, 5, 15, 15, 30, tzinfo=UTC)
    messages = [
        Message(role="user", content="Find a flight **today**.", created_at=when, name="ana"),
        Message(role="assistant", content="", tool_calls=[CALL]),
        Message(
            role="tool",
            content="# not a heading\n[]",
            tool_call_id="call_9",
            name="search_flights",
        ),
        Message(role="assistant", content="None left today."),
    ]

    text = export(tmp_path, [session_factory(messages, title="Flights to Bergen")])

    assert text.startswith("# Flights to Bergen\n")
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert len(headings) == 4
    assert "User" in headings[0] and "ana" in headings[0] and "2024-05-15 15:30" in headings[0]
    assert "Assistant" in headings[1]
    assert "Tool" in headings[2] and "search_flights" in headings[2]
    assert "Find a flight **today**." in text
    blocks = fenced_blocks(text)
    json_blocks = [json.loads(body) for lang, body in blocks if lang == "json"]
    assert {"from": "OSL", "to": "BGO"} in json_blocks
    assert ("", "# not a heading\n[]") in blocks
    assert "call_9" in text


def test_folded_and_evicted_messages_are_marked(
    tmp_path: Path, session_factory: Callable[..., ExportSession]
) -> None:
    messages = [
        Message(role="user", content="old question", state="folded"),
        Message(role="assistant", content="old answer", state="evicted"),
        Message(role="user", content="new question"),
    ]

    text = export(tmp_path, [session_factory(messages)])

    sections = text.split("\n## ")[1:]
    assert "folded" in sections[0].lower()
    assert "evicted" in sections[1].lower()
    assert "folded" not in sections[2].lower() and "evicted" not in sections[2].lower()


def test_context_closes_the_session_when_present(
    tmp_path: Path, session_factory: Callable[..., ExportSession]
) -> None:
    context = SessionContext(
        facts=["Lives in Oslo"],
        summary="They talked about flights.",
        tasks=[Task(id="t1", description="Book the flight", status="running", progress=0.25)],
    )
    with_context = export(
        tmp_path, [session_factory([Message(role="user", content="hi")], context=context)]
    )
    without = export(tmp_path, [session_factory([Message(role="user", content="hi")])])

    tail = with_context[with_context.index("## Context") :]
    assert "They talked about flights." in tail
    assert "- Lives in Oslo" in tail
    assert "Book the flight" in tail and "running" in tail
    assert "## Context" not in without


def test_several_sessions_are_separated_by_a_rule(
    tmp_path: Path, session_factory: Callable[..., ExportSession]
) -> None:
    sessions = [
        session_factory([Message(role="user", content="one")], title="First"),
        session_factory([Message(role="user", content="two")], title="Second"),
    ]

    text = export(tmp_path, sessions)

    first, second = text.split("\n\n---\n\n")
    assert first.startswith("# First") and "one" in first
    assert second.startswith("# Second") and "two" in second


def test_backticks_in_tool_output_do_not_break_the_fence(
    tmp_path: Path, session_factory: Callable[..., ExportSession]
) -> None:
    output = "before\n```\ninside\n```\nafter"
    messages = [Message(role="tool", content=output, tool_call_id="c1")]

    text = export(tmp_path, [session_factory(messages)])

    assert ("", output) in fenced_blocks(text)


def test_headings_inside_messages_do_not_pose_as_message_headings(
    tmp_path: Path, session_factory: Callable[..., ExportSession]
) -> None:
    prompt = "# Policy\n\n## Booking\n\nRules.\n\n```python\n# a comment\n```"
    messages = [Message(role="system", content=prompt), Message(role="user", content="hi")]

    text = export(tmp_path, [session_factory(messages, title="T")])

    lines = text.splitlines()
    assert [line for line in lines if line.startswith("# ")] == ["# T", "# a comment"]
    assert len([line for line in lines if line.startswith("## ")]) == 2
    assert "\\# Policy" in lines and "\\## Booking" in lines
    assert ("python", "# a comment") in fenced_blocks(text)
