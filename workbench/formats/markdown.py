"""A readable Markdown transcript of sessions (export only).

Each session starts with ``# Title``; each message gets a heading with its number, role
(and name), time and, when it left the model's view, whether it was folded or evicted.
Tool calls are shown as fenced JSON and tool results as fenced text, so that neither is
rendered as Markdown. The session context (summary, facts, tasks) closes the session when
it holds anything. Several sessions are separated by a ``---`` rule.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from workbench.core.conversation import (
    Message,
    MessageState,
    Role,
    SessionContext,
    as_utc,
)
from workbench.formats.base import ExportSession, write_atomic

NAME = "markdown"

_BACKTICK_RUN = re.compile(r"`+")
_ATX_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)")
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})


def _fence(text: str, language: str = "") -> str:
    """``text`` in a code fence longer than any run of backticks inside it."""
    longest = max((len(m.group()) for m in _BACKTICK_RUN.finditer(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def _demote_headings(text: str) -> str:
    """``text`` with its own Markdown headings escaped, outside code fences.

    Message text is often Markdown itself; a ``## Rules`` inside a system prompt must not
    pose as one of the transcript's message headings.
    """
    lines = text.split("\n")
    fence: str | None = None
    for i, line in enumerate(lines):
        opened = _FENCE_OPEN.match(line)
        if fence is None:
            if opened:
                fence = opened.group(1)
            elif _ATX_HEADING.match(line):
                stripped = line.lstrip(" ")
                lines[i] = line[: len(line) - len(stripped)] + "\\" + stripped
        elif opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
            fence = None
    return "\n".join(lines)


def _time(value: datetime | None) -> str | None:
    if value is None:
        return None
    return as_utc(value).strftime("%Y-%m-%d %H:%M:%S UTC")


def _heading(number: int, message: Message) -> str:
    role = message.role.capitalize()
    if message.name:
        role += f" · {message.name}"
    bits = [f"## {number}. {role}"]
    when = _time(message.created_at)
    if when:
        bits.append(when)
    if message.state != MessageState.ACTIVE.value:
        bits.append(f"*{message.state}*")
    if message.important:
        bits.append("*important*")
    return " — ".join(bits)


def _pretty_arguments(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def _tool_call(call: dict[str, Any]) -> str:
    function = call.get("function")
    if isinstance(function, dict) and "name" in function:
        label = f"**Tool call** `{function.get('name')}`"
        if call.get("id"):
            label += f" (id `{call['id']}`)"
        body = _pretty_arguments(function.get("arguments"))
    else:
        label = "**Tool call**"
        body = call
    text = json.dumps(body, ensure_ascii=False, indent=2)
    return f"{label}\n\n{_fence(text, 'json')}"


def _state_note(message: Message) -> str | None:
    if message.state == MessageState.FOLDED.value:
        return "> *Folded into a summary: no longer in the model's view.*"
    if message.state == MessageState.EVICTED.value:
        return "> *Evicted by the message window: no longer in the model's view.*"
    return None


def _message_block(number: int, message: Message) -> str:
    blocks = [_heading(number, message)]
    note = _state_note(message)
    if note:
        blocks.append(note)
    if message.role == Role.TOOL.value:
        if message.tool_call_id:
            blocks.append(f"Result of tool call `{message.tool_call_id}`:")
        blocks.append(_fence(message.content))
    elif message.content:
        blocks.append(_demote_headings(message.content))
    for call in message.tool_calls or []:
        blocks.append(_tool_call(call))
    other_parts = [
        str(p.get("type", "part"))
        for p in message.parts or []
        if p.get("type") not in _TEXT_PART_TYPES
    ]
    if other_parts:
        blocks.append(f"*Attached: {', '.join(other_parts)}*")
    return "\n\n".join(blocks)


def _context_block(context: SessionContext) -> str | None:
    sections: list[str] = []
    if context.summary.strip():
        sections.append(f"### Summary\n\n{_demote_headings(context.summary)}")
    if context.facts:
        sections.append("### Facts\n\n" + "\n".join(f"- {fact}" for fact in context.facts))
    if context.tasks:
        lines = []
        for task in context.tasks:
            line = f"- [{task.status}] {task.description or task.id}"
            if task.progress is not None:
                line += f" ({task.progress:.0%})" if task.progress <= 1 else f" ({task.progress})"
            lines.append(line)
        sections.append("### Tasks\n\n" + "\n".join(lines))
    if not sections:
        return None
    return "## Context\n\n" + "\n\n".join(sections)


def session_markdown(session: ExportSession) -> str:
    """One session as a Markdown transcript."""
    info = session.info
    blocks = [f"# {info.title or 'Untitled session'}"]
    details = [f"Created {_time(info.created_at)}", f"updated {_time(info.updated_at)}"]
    if info.tags:
        details.append("tags: " + ", ".join(info.tags))
    details.append(f"{len(session.messages)} messages")
    blocks.append("*" + " · ".join(details) + "*")
    if session.metadata:
        text = json.dumps(session.metadata, ensure_ascii=False, indent=2)
        blocks.append(
            f"<details><summary>Source metadata</summary>\n\n{_fence(text, 'json')}\n\n</details>"
        )
    for number, message in enumerate(session.messages, start=1):
        blocks.append(_message_block(number, message))
    context = _context_block(session.context)
    if context:
        blocks.append(context)
    return "\n\n".join(blocks)


class MarkdownExporter:
    """Writes a Markdown transcript; several sessions are separated by ``---``."""

    name = NAME
    suffix = ".md"

    def write(self, sessions: Sequence[ExportSession], path: Path) -> None:
        """Write ``sessions`` to ``path`` atomically."""
        text = "\n\n---\n\n".join(session_markdown(s) for s in sessions)
        write_atomic(Path(path), text + "\n")
