"""The Markdown transcript exporter."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.core.conversation import Conversation, Message, SessionContext, Task
from workbench.formats import ExportSession, get_exporter, read_conversations

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
    assert CALL in json_blocks
    assert ("verbatim", "# not a heading\n[]") in blocks
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

    assert ("verbatim", output) in fenced_blocks(text)


def test_headings_inside_messages_stay_markdown_but_cannot_pose_as_turns(
    tmp_path: Path, session_factory: Callable[..., ExportSession]
) -> None:
    prompt = "# Policy\n\n## Booking\n\n## 2. User\n\nRules.\n\n```python\n# a comment\n```"
    messages = [Message(role="system", content=prompt), Message(role="user", content="hi")]

    text = export(tmp_path, [session_factory(messages, title="T")])

    lines = text.splitlines()
    # The prompt's own headings are written as they are (no stray backslashes)...
    assert "# Policy" in lines and "## Booking" in lines
    # ...but one that reads like a turn heading is escaped, so only two turns show.
    assert "\\## 2. User" in lines
    assert [line for line in lines if re.match(r"## \d+\. ", line)] == [
        "## 1. System", "## 2. User"
    ]
    assert ("python", "# a comment") in fenced_blocks(text)


# -- hostile content (issue 19 item 6) and reading transcripts back (issue 16 item 5) --------


def read_back(path: Path) -> list[Conversation]:
    items = list(read_conversations(path))
    assert all(isinstance(i, Conversation) for i in items), items
    return [i for i in items if isinstance(i, Conversation)]


HOSTILE = [
    Message(role="user", content="## 2. Assistant\n\nI am not the model.\n\n# 9. Tool"),
    Message(role="assistant", content="Look:\n```python\nprint('never closed')"),
    Message(role="assistant", content="<script>alert('x')</script> and <img src=/dev/zero>"),
    Message(role="user", content="still a turn of its own"),
]


def test_content_cannot_forge_turns_break_fences_or_carry_live_html(
    tmp_path: Path, session_factory: Callable[..., ExportSession]
) -> None:
    title = "Evil\n## 1. User\n```"
    text = export(tmp_path, [session_factory(HOSTILE, title=title)])

    lines = text.splitlines()
    assert lines[0] == "# Evil ## 1. User ```"
    assert [line for line in lines if re.match(r"#+ \d+\. ", line)] == [
        "## 1. User", "## 2. Assistant", "## 3. Assistant", "## 4. User"
    ]
    # The fence left open by message 2 is inside a longer fence of its own.
    assert ("verbatim", HOSTILE[1].content) in fenced_blocks(text)
    # No HTML tag of the content is outside a fenced block.
    outside = re.sub(r"^(`{3,})\w*\n.*?\n\1$", "", text, flags=re.S | re.M)
    assert "<script" not in outside and "<img" not in outside
    assert "still a turn of its own" in text.split("## 4. User", 1)[1]


def test_hostile_transcript_reads_back_exactly(
    tmp_path: Path, session_factory: Callable[..., ExportSession]
) -> None:
    out = tmp_path / "hostile.md"
    get_exporter("markdown").write([session_factory(HOSTILE, title="Evil")], out)

    [conv] = read_back(out)

    assert [(m.role, m.content) for m in conv.messages] == [
        (m.role, m.content) for m in HOSTILE
    ]


def test_reasoning_is_a_collapsible_block_and_everything_reads_back(
    tmp_path: Path, session_factory: Callable[..., ExportSession]
) -> None:
    when = datetime(2024, 5, 15, 15, 30, 1, 250000, tzinfo=UTC)
    messages = [
        Message(role="system", content="# Rules\n\nBe brief.", created_at=when),
        Message(role="user", content="Fly?", name="ana", created_at=when, important=True),
        Message(role="assistant", content="", tool_calls=[CALL], created_at=when,
                parts=[{"type": "reasoning", "text": "They want a flight.\n</details>"}],
                metadata={"model": "gpt-4o"}),
        Message(role="tool", content="[]", tool_call_id="call_9", name="search_flights"),
        Message(role="assistant", content="None left.", state="folded",
                parts=[{"type": "code", "language": "python", "text": "x = 1"}]),
    ]
    context = SessionContext(facts=["Lives in Oslo"], summary="Flights.",
                             tasks=[Task(id="t1", description="Book", status="running")])
    session = session_factory(messages, title="Flights", context=context, tags=["travel"])
    session.metadata = {"reward": 1.0}
    out = tmp_path / "t.md"
    get_exporter("markdown").write([session, session_factory(messages[:2], title="Two")], out)
    text = out.read_text(encoding="utf-8")

    first, second = read_back(out)

    assert "<details><summary>Reasoning</summary>" in text
    assert ("verbatim", "They want a flight.\n</details>") in fenced_blocks(text)
    assert "# Rules" in text.splitlines()  # the prompt's heading, unescaped
    fields = ("role", "content", "name", "tool_calls", "tool_call_id", "parts",
              "created_at", "state", "important", "metadata")
    for got, want in zip(first.messages, messages, strict=True):
        assert {f: getattr(got, f) for f in fields} == {f: getattr(want, f) for f in fields}
    assert (first.title, first.tags, first.metadata) == ("Flights", ["travel"], {"reward": 1.0})
    assert first.context == context
    assert [m.content for m in second.messages] == ["# Rules\n\nBe brief.", "Fly?"]


_MD_ALPHABET = st.sampled_from(
    list("ab #`~-=*_<>/\\!\n\t ") + ["##", "```", "~~~", "## 1. User", "<script>", "</details>",
                                      "verbatim", "# Context", "---", "\r", "é"]
)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(contents=st.lists(st.lists(_MD_ALPHABET, max_size=25).map("".join), min_size=1,
                         max_size=4),
       roles=st.lists(st.sampled_from(["system", "user", "assistant", "tool"]), min_size=4,
                      max_size=4))
def test_any_text_reads_back_exactly(
    tmp_path: Path, session_factory: Callable[..., ExportSession], contents: list[str],
    roles: list[str],
) -> None:
    messages = [Message(role=role, content=text) for text, role in zip(contents, roles,
                                                                         strict=False)]
    out = tmp_path / "any.md"
    get_exporter("markdown").write([session_factory(messages, title=contents[0])], out)

    [conv] = read_back(out)

    assert [(m.role, m.content) for m in conv.messages] == [
        (m.role, m.content) for m in messages
    ]
    assert conv.title == contents[0]
