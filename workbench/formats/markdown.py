"""A readable Markdown transcript of sessions, that the workbench can also read back.

The layout, which the importer below reads:

- each session starts with ``# Title`` (the title on one line, ``<`` and ``&`` written
  as entities so a title is never live HTML), then an italic line of details and, when
  the session has any, its source metadata as JSON in a ``<details>`` block;
- each message gets a heading ``## N. Role · name — time — *state* — *important*``;
- a message's text is written as the Markdown it is, except that a line which would read
  as the transcript's own structure (a level 1 or 2 heading, a setext underline) gets a
  backslash in front (one more for a line that already starts with backslashes, so the
  importer takes exactly one away). Text that cannot be written that way without
  changing it or what follows (raw HTML such as ``<script>``, a code fence left open,
  leading or trailing blank space) is written verbatim in a fenced block marked
  ``verbatim``, fenced with a run of backticks longer than any inside it;
- tool results are verbatim blocks; each tool call is an open ``<details>`` block of
  its JSON (arguments as they are); reasoning sits in a collapsible ``<details>`` block;
  other parts (images, code, files) and message metadata in ``<details>`` blocks of JSON;
- the session context closes the session, readable, and as JSON in a ``<details>``
  block; several sessions are separated by a ``---`` rule.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from workbench.core.conversation import (
    ROLES,
    Conversation,
    Message,
    MessageState,
    Role,
    SessionContext,
    SkippedEntry,
    Task,
    TokenUsage,
    ToolStats,
    as_utc,
)
from workbench.formats._reading import first_bad_byte, repair_value
from workbench.formats.base import (
    FORKED_FROM,
    ExportSession,
    FileImporter,
    ImportItem,
    fingerprint,
    forked_from_json,
    pin_marks_note,
    read_forked_from,
    read_text_keeping_bad_bytes,
    write_atomic,
)

NAME = "markdown"
VERBATIM = "verbatim"

_BACKTICK_RUN = re.compile(r"`+")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
# A line that would read as the transcript's own structure: a heading like a message's
# ("## 3. User") or the context's. Group 2 holds backslashes written before it. Other
# headings are the message's own Markdown and stay as they are.
_LOOKALIKE = r"#{1,6}[ \t]+(?:\d+\.[ \t]+(?:System|User|Assistant|Tool)\b|Context[ \t]*$)"
_STRUCTURE = re.compile(rf"^( {{0,3}})(\\*)({_LOOKALIKE})", re.IGNORECASE)
_ESCAPED = re.compile(rf"^( {{0,3}})\\(\\*{_LOOKALIKE})", re.IGNORECASE)
_HTML = re.compile(r"<[A-Za-z!/?]")
_TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})
_ROLE_WORDS = {r.capitalize(): r for r in ROLES}
_HEADING = re.compile(
    r"^## (\d+)\. (System|User|Assistant|Tool)(?: · (.*?))?"
    r"(?: — (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?) UTC)?"
    r"(?: — \*(folded|evicted)\*)?(?: — \*(important)\*)?$"
)
_RESULT_OF = re.compile(r"^Result of tool call `([^`]*)`:$")
_DETAILS = re.compile(r"^<details(?: open)?><summary>(.*)</summary>$")


# --------------------------------------------------------------------------- writing


def _fence(text: str, language: str = "") -> str:
    """``text`` in a code fence longer than any run of backticks inside it."""
    longest = max((len(m.group()) for m in _BACKTICK_RUN.finditer(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def _fence_opens(line: str) -> str | None:
    """The fence run a line opens a code block with, if it does."""
    match = _FENCE.match(line)
    if match is None or (match.group(1)[0] == "`" and "`" in match.group(2)):
        return None
    return match.group(1)


def _fence_closes(line: str, fence: str) -> bool:
    """Whether a line closes the code block ``fence`` opened."""
    match = _FENCE.match(line)
    return (
        match is not None
        and match.group(1)[0] == fence[0]
        and len(match.group(1)) >= len(fence)
        and not match.group(2).strip()
    )


def _open_fence_at_end(lines: Sequence[str]) -> bool:
    """Whether a code fence opened among ``lines`` is still open after the last one."""
    fence: str | None = None
    for line in lines:
        if fence is None:
            fence = _fence_opens(line)
        elif _fence_closes(line, fence):
            fence = None
    return fence is not None


def _needs_verbatim(text: str) -> bool:
    """Whether ``text`` cannot be written as Markdown without changing it or the rest."""
    if text != text.strip() or "\r" in text or _HTML.search(text):
        return True
    lines = text.split("\n")
    if _open_fence_at_end(lines):
        return True
    stripped = text.lstrip("`~ ")
    return text.lstrip(" ").startswith(("```", "~~~")) and stripped.startswith(VERBATIM)


def _map_outside_fences(text: str, change: Any) -> str:
    """``text`` with ``change`` applied to each line outside its own code fences."""
    out: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        if fence is not None:
            if _fence_closes(line, fence):
                fence = None
            out.append(line)
            continue
        fence = _fence_opens(line)
        out.append(line if fence is not None else change(line))
    return "\n".join(out)


def _escape_line(line: str) -> str:
    match = _STRUCTURE.match(line)
    return line if match is None else match.group(1) + "\\" + line[len(match.group(1)):]


def _unescape_line(line: str) -> str:
    match = _ESCAPED.match(line)
    return line if match is None else match.group(1) + line[len(match.group(1)) + 1 :]


def _escape_structure(text: str) -> str:
    """``text`` with every line that would read as structure given one more backslash
    (lines inside the text's own code fences are left alone)."""
    return _map_outside_fences(text, _escape_line)


def _unescape_structure(text: str) -> str:
    """What :func:`_escape_structure` was given."""
    return _map_outside_fences(text, _unescape_line)


def _body(text: str) -> str:
    if _needs_verbatim(text):
        return _fence(text, VERBATIM)
    return _escape_structure(text)


def _one_line(text: str) -> str:
    """A title or name on one line, never live HTML."""
    flat = " ".join(text.split())
    return flat.replace("&", "&amp;").replace("<", "&lt;")


def _time(value: datetime | None) -> str | None:
    if value is None:
        return None
    value = as_utc(value)
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond:06d}"
    return text + " UTC"


def _heading(number: int, message: Message) -> str:
    role = message.role.capitalize()
    if message.name:
        role += f" · {_one_line(message.name).replace(' — ', ' - ')}"
    bits = [f"## {number}. {role}"]
    when = _time(message.created_at)
    if when:
        bits.append(when)
    if message.state != MessageState.ACTIVE.value:
        bits.append(f"*{message.state}*")
    if message.important:
        bits.append("*important*")
    return " — ".join(bits)


def _details(summary: str, value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, indent=2)
    return f"<details><summary>{summary}</summary>\n\n{_fence(text, 'json')}\n\n</details>"


def _tool_call(call: dict[str, Any]) -> str:
    function = call.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    label = f"Tool call <code>{_one_line(str(name))}</code>" if name else "Tool call"
    text = json.dumps(call, ensure_ascii=False, indent=2)
    return f"<details open><summary>{label}</summary>\n\n{_fence(text, 'json')}\n\n</details>"


def _state_note(message: Message) -> str | None:
    if message.state == MessageState.FOLDED.value:
        return "> *Folded into a summary: no longer in the model's view.*"
    if message.state == MessageState.EVICTED.value:
        return "> *Evicted by the message window: no longer in the model's view.*"
    return None


def _reasoning_text(part: dict[str, Any]) -> str:
    text = part.get("text")
    return text if isinstance(text, str) else ""


def _message_block(number: int, message: Message) -> str:
    blocks = [_heading(number, message)]
    note = _state_note(message)
    if note:
        blocks.append(note)
    parts = message.parts or []
    reasoning = [p for p in parts if isinstance(p, dict) and p.get("type") == "reasoning"]
    for part in reasoning:
        plain = {k for k in part if k not in ("type", "text")}
        if plain:
            blocks.append(_details("Reasoning (JSON)", part))
        else:
            blocks.append(
                "<details><summary>Reasoning</summary>\n\n"
                f"{_fence(_reasoning_text(part), VERBATIM)}\n\n</details>"
            )
    if message.role == Role.TOOL.value:
        if message.tool_call_id:
            blocks.append(f"Result of tool call `{message.tool_call_id.replace('`', '')}`:")
        blocks.append(_fence(message.content, VERBATIM))
    elif message.content:
        blocks.append(_body(message.content))
    for call in message.tool_calls or []:
        blocks.append(_tool_call(call))
    if message.tool_calls == []:
        blocks.append(_details("No tool calls", []))
    others = [p for p in parts if not (isinstance(p, dict) and p.get("type") == "reasoning")]
    if others:
        kinds = sorted({str(p.get("type", "part")) for p in others if isinstance(p, dict)})
        label = "Parts" if _text_only(others, message.content) else (
            "Attached: " + _one_line(", ".join(kinds))
        )
        blocks.append(_details(label, others))
    meta = dict(message.metadata)
    if message.tool_call_id and message.role != Role.TOOL.value:
        meta["tool_call_id"] = message.tool_call_id
    if meta:
        blocks.append(_details("Message metadata", meta))
    return "\n\n".join(blocks)


def _text_only(parts: Sequence[Any], content: str) -> bool:
    return all(isinstance(p, dict) and p.get("type") in _TEXT_PART_TYPES for p in parts) and (
        "\n".join(str(p.get("text", "")) for p in parts) == content
    )


def _context_block(context: SessionContext) -> str | None:
    if context == SessionContext():
        return None
    sections: list[str] = []
    if context.summary.strip():
        sections.append(f"### Summary\n\n{_body(context.summary)}")
    if context.facts:
        sections.append(
            "### Facts\n\n" + "\n".join(f"- {_one_line(fact)}" for fact in context.facts)
        )
    if context.tasks:
        lines = []
        for task in context.tasks:
            line = f"- [{_one_line(task.status)}] {_one_line(task.description or task.id)}"
            if task.progress is not None:
                line += f" ({task.progress:.0%})" if task.progress <= 1 else f" ({task.progress})"
            lines.append(line)
        sections.append("### Tasks\n\n" + "\n".join(lines))
    sections.append(_details("Context (JSON)", context.to_json()))
    return "## Context\n\n" + "\n\n".join(sections)


def session_markdown(session: ExportSession) -> str:
    """One session as a Markdown transcript."""
    info = session.info
    blocks = [f"# {_one_line(info.title) or 'Untitled session'}"]
    details = [f"Created {_time(info.created_at)}", f"updated {_time(info.updated_at)}"]
    if info.tags:
        details.append("tags: " + ", ".join(_one_line(t) for t in info.tags))
    details.append(f"{len(session.messages)} messages")
    blocks.append("*" + " · ".join(details) + "*")
    identity: dict[str, Any] = {"title": info.title, "tags": list(info.tags),
                "created_at": _iso(info.created_at), "updated_at": _iso(info.updated_at)}
    if info.source:
        identity.update(source=info.source, source_id=info.source_id)
    if session.forked_from is not None:
        identity[FORKED_FROM] = forked_from_json(session.forked_from)
    blocks.append(_details("Session", identity))
    if session.metadata:
        blocks.append(_details("Source metadata", session.metadata))
    for number, message in enumerate(session.messages, start=1):
        blocks.append(_message_block(number, message))
    context = _context_block(session.context)
    if context:
        blocks.append(context)
    return "\n\n".join(blocks)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else as_utc(value).isoformat().replace("+00:00", "Z")


def cannot_hold(sessions: Sequence[ExportSession]) -> list[str]:
    """What a Markdown transcript leaves out of ``sessions`` (one sentence each): the
    pin and archive marks (token counts are left out too, but they are counted again)."""
    return pin_marks_note(sessions)


class MarkdownExporter:
    """Writes a Markdown transcript; several sessions are separated by ``---``."""

    name = NAME
    reads = "Markdown"
    suffix = ".md"

    def render(self, sessions: Sequence[ExportSession]) -> str:
        """``sessions`` as the text :meth:`write` puts in the file."""
        return "\n\n---\n\n".join(session_markdown(s) for s in sessions) + "\n"

    def write(self, sessions: Sequence[ExportSession], path: Path) -> None:
        """Write ``sessions`` to ``path`` atomically."""
        write_atomic(Path(path), self.render(sessions))

    def cannot_hold(self, sessions: Sequence[ExportSession]) -> list[str]:
        """What this format leaves out of ``sessions``."""
        return cannot_hold(sessions)


# --------------------------------------------------------------------------- reading


def _session_starts(lines: list[str], at: int) -> bool:
    """Whether ``# Title`` at ``at`` starts a session: its details line and ``Session``
    block follow (message text cannot hold the block: HTML is written verbatim)."""
    if not lines[at].startswith("# "):
        return False
    following = [line for line in lines[at + 1 : at + 6] if line.strip()]
    return (
        len(following) >= 2
        and following[0].startswith("*Created ")
        and following[1] == "<details><summary>Session</summary>"
    )


def _split(text: str) -> list[tuple[str, list[str]]]:
    """(heading, lines) of each session title, message heading and context section
    outside fences, in order."""
    sections: list[tuple[str, list[str]]] = []
    fence: str | None = None
    current: list[str] | None = None
    lines = text.split("\n")
    for at, line in enumerate(lines):
        if fence is None and (
            _HEADING.match(line) or line == "## Context" or _session_starts(lines, at)
        ):
            if current is not None and line.startswith("# "):
                # The rule between two sessions belongs to neither.
                while current and not current[-1].strip():
                    current.pop()
                if current and current[-1] == "---":
                    current.pop()
            current = []
            sections.append((line, current))
            continue
        if fence is None:
            fence = _fence_opens(line)
        elif _fence_closes(line, fence):
            fence = None
        if current is not None:
            current.append(line)
    return sections


class _Lines:
    """A cursor over the lines of one section."""

    def __init__(self, lines: list[str]) -> None:
        while lines and not lines[-1].strip():
            lines = lines[:-1]
        self.lines = lines
        self.at = 0

    def skip_blank(self) -> None:
        while self.at < len(self.lines) and not self.lines[self.at].strip():
            self.at += 1

    def peek(self) -> str | None:
        self.skip_blank()
        return self.lines[self.at] if self.at < len(self.lines) else None

    def take(self) -> str:
        line = self.lines[self.at]
        self.at += 1
        return line

    def fence(self) -> tuple[str, str]:
        """The info string and text of the fenced block starting here."""
        opener = self.take()
        run = _fence_opens(opener)
        if run is None:
            raise ValueError(f"expected a fenced block, found {opener[:40]!r}")
        info = opener.strip()[len(run):].strip()
        body: list[str] = []
        while self.at < len(self.lines) and not _fence_closes(self.lines[self.at], run):
            body.append(self.take())
        if self.at >= len(self.lines):
            raise ValueError("a fenced block is not closed")
        self.take()
        return info, "\n".join(body)

    def details(self) -> tuple[str, str, str]:
        """(summary, fence info, fence text) of the ``<details>`` block starting here."""
        match = _DETAILS.match(self.take())
        assert match is not None
        self.skip_blank()
        info, text = self.fence()
        self.skip_blank()
        if self.at < len(self.lines) and self.lines[self.at] == "</details>":
            self.take()
        else:
            raise ValueError(f"the {match.group(1)!r} block is not closed")
        return match.group(1), info, text

    def until_details(self) -> str:
        """The lines up to the next ``<details>`` line (or the end)."""
        start = self.at
        while self.at < len(self.lines) and not _DETAILS.match(self.lines[self.at]):
            self.at += 1
        return "\n".join(self.lines[start : self.at]).strip("\n")


def _parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in text else "%Y-%m-%d %H:%M:%S"
    return datetime.strptime(text, fmt).replace(tzinfo=UTC)


def _json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"the {what} block is not valid JSON") from exc


def _parse_message(heading: re.Match[str], lines: list[str]) -> Message:
    role = _ROLE_WORDS[heading.group(2)]
    message = Message(
        role=role,
        name=html.unescape(heading.group(3)) if heading.group(3) else None,
        created_at=_parse_time(heading.group(4)),
        state=heading.group(5) or MessageState.ACTIVE.value,
        important=heading.group(6) == "important",
    )
    cursor = _Lines(lines)
    if message.state != MessageState.ACTIVE.value:
        line = cursor.peek()
        if line is not None and line.startswith("> *"):
            cursor.take()
    parts: list[dict[str, Any]] = []
    while (line := cursor.peek()) is not None and line.startswith("<details><summary>Reasoning"):
        summary, _info, text = cursor.details()
        parts.append({"type": "reasoning", "text": text} if summary == "Reasoning"
                     else _json(text, summary))
    line = cursor.peek()
    if role == Role.TOOL.value and line is not None and _RESULT_OF.match(line):
        message.tool_call_id = _RESULT_OF.match(cursor.take()).group(1)  # type: ignore[union-attr]
        line = cursor.peek()
    if line is not None and (run := _fence_opens(line)) is not None \
            and line.strip()[len(run):].strip() == VERBATIM:
        message.content = cursor.fence()[1]
    elif line is not None:
        message.content = _unescape_structure(cursor.until_details())
    while cursor.peek() is not None:
        if not _DETAILS.match(cursor.peek() or ""):
            raise ValueError(f"unexpected text after message {heading.group(1)}")
        summary, _info, text = cursor.details()
        value = _json(text, summary)
        if summary.startswith("Tool call") and isinstance(value, dict):
            message.tool_calls = [*(message.tool_calls or []), value]
        elif summary == "No tool calls":
            message.tool_calls = []
        elif (summary == "Parts" or summary.startswith("Attached")) and isinstance(value, list):
            parts.extend(value)
        elif summary == "Message metadata" and isinstance(value, dict):
            if role != Role.TOOL.value and "tool_call_id" in value:
                message.tool_call_id = value.pop("tool_call_id")
            message.metadata = value
    if parts:
        message.parts = parts
    return message


def _parse_session(heading: str, sections: list[tuple[str, list[str]]], index: int
                   ) -> Conversation:
    title = html.unescape(heading[2:].strip())
    conv = Conversation(title=title, source=NAME)
    cursor = _Lines(list(sections[0][1]))
    while (line := cursor.peek()) is not None:
        if not _DETAILS.match(line):
            cursor.take()
            continue
        summary, _info, text = cursor.details()
        value = _json(text, summary)
        if summary == "Session" and isinstance(value, dict):
            conv.title = str(value.get("title", title))
            conv.tags = [str(t) for t in value.get("tags") or []]
            conv.created_at = _iso_time(value.get("created_at"))
            conv.updated_at = _iso_time(value.get("updated_at"))
            if isinstance(value.get("source"), str) and isinstance(value.get("source_id"), str):
                # The session's own identity: importing the transcript where it came
                # from finds the session it was written from.
                conv.source, conv.source_id = value["source"], value["source_id"]
            conv.forked_from = read_forked_from({FORKED_FROM: value.get(FORKED_FROM)})
        elif summary == "Source metadata" and isinstance(value, dict):
            conv.metadata = value
    for section_heading, lines in sections[1:]:
        match = _HEADING.match(section_heading)
        if match:
            message = _parse_message(match, list(lines))
            message.position = len(conv.messages)
            conv.messages.append(message)
        elif section_heading.startswith("## Context"):
            context_lines = _Lines(list(lines))
            while (line := context_lines.peek()) is not None:
                if line.startswith("<details><summary>Context (JSON)"):
                    conv.context = _context_from_json(_json(context_lines.details()[2], "context"))
                else:
                    context_lines.take()
    if conv.source == NAME:
        conv.source_id = fingerprint(conv.messages) + f"#{index}"
    return conv


def _iso_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    return as_utc(datetime.fromisoformat(value.replace("Z", "+00:00")))


def _context_from_json(data: Any) -> SessionContext:
    if not isinstance(data, dict):
        return SessionContext()
    return SessionContext(
        facts=[str(f) for f in data.get("facts") or []],
        summary=str(data.get("summary") or ""),
        tasks=[Task.from_json(t) for t in data.get("tasks") or []],
        tool_stats=ToolStats.from_json(data.get("tool_stats")),
        token_usage=TokenUsage.from_json(data.get("token_usage")),
        system_state=dict(data.get("system_state") or {}),
        environment=dict(data.get("environment") or {}),
    )


def _looks_like_transcript(text: str) -> bool:
    return text.startswith("# ") and any(
        _HEADING.match(line) or line == "<details><summary>Session</summary>"
        for line in text.split("\n", 200)[:200]
    )


class MarkdownImporter(FileImporter):
    """Reads back the transcripts :class:`MarkdownExporter` writes."""

    name = NAME
    description = "Markdown transcript written by the workbench's Markdown export"

    def looks_like(self, head: bytes) -> bool:
        """A text file starting with ``# Title`` and holding the transcript's headings."""
        text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
        return _looks_like_transcript(text)

    def read_file(self, path: Path) -> Iterator[ImportItem]:
        """Each ``# Title`` section of the transcript as a conversation."""
        text, bad_bytes = read_text_keeping_bad_bytes(path)
        if bad_bytes:
            # Replaced with U+FFFD and noted (by the line of the first), not the file refused.
            line = text.count("\n", 0, first_bad_byte(text)) + 1
            text = repair_value(text, f"line {line}", from_bytes=True)
        if "\r\n" in text and text.count("\r\n") == text.count("\n"):
            # Saved by an editor with Windows line ends: every line has one. (A lone CR in
            # a message is the message's own and is kept.)
            text = text.replace("\r\n", "\n")
        sections = _split(text)
        starts = [i for i, (h, _) in enumerate(sections) if h.startswith("# ")]
        items: list[ImportItem] = []
        for number, start in enumerate(starts):
            end = starts[number + 1] if number + 1 < len(starts) else len(sections)
            try:
                items.append(_parse_session(sections[start][0], sections[start:end], number))
            except (ValueError, TypeError, KeyError) as exc:
                items.append(SkippedEntry(entry=f"session {number + 1}", reason=f"{exc}."))
        return iter(items)
