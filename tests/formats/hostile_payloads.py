"""Files of every import format built from plain entries, with hostile changes marked.

Each format's entry is built from a title and one user message; a change puts a lone
surrogate, a deeply nested array or a value of the wrong type at the title or at the
user message (or replaces the whole entry). The file is written with the positions of
its entries, so a test can cut it anywhere and know which entries are complete.

Loaded by the tests through ``sys.path`` (the suite imports test modules by path).
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

T0 = 1_714_585_000

DEEP = "@@DEEP@@"
"""A placeholder replaced in the written text by an array nested ``depth`` levels deep
(a Python list that deep could not be written by ``json`` itself)."""


@dataclass
class Entry:
    """One entry: what it is built from, and what was done to it."""

    index: int
    title: str
    text: str
    change: str | None = None
    """None, "surrogate", "deep" or "type"."""
    where: str = "text"
    """"title", "text" or "entry": the field the change hits."""
    depth: int = 1500
    wrong: Any = None
    """The value of the wrong type for a "type" change."""


def _chatgpt(e: Entry, title: Any, text: Any) -> Any:
    def node(node_id: str, parent: str | None, role: str | None, content: Any) -> dict[str, Any]:
        message = None
        if role is not None:
            message = {
                "id": node_id,
                "author": {"role": role, "metadata": {}},
                "create_time": T0 + 1,
                "content": {"content_type": "text", "parts": [content]},
                "status": "finished_successfully",
                "metadata": {},
                "recipient": "all",
            }
        return {"id": node_id, "message": message, "parent": parent,
                "children": [] if role == "assistant" else ["u" if parent is None else "a"]}

    return {
        "title": title, "create_time": T0, "update_time": T0 + 5,
        "conversation_id": f"conv-{e.index}", "id": f"conv-{e.index}", "current_node": "a",
        "mapping": {"root": node("root", None, None, None), "u": node("u", "root", "user", text),
                    "a": node("a", "u", "assistant", f"reply {e.index}")},
    }


def _claude(e: Entry, title: Any, text: Any) -> Any:
    return {"uuid": f"claude-{e.index}", "name": title, "created_at": "2024-05-01T10:00:00Z",
            "chat_messages": [
                {"uuid": f"m{e.index}", "sender": "human", "text": text,
                 "created_at": "2024-05-01T10:00:01Z"},
                {"uuid": f"n{e.index}", "sender": "assistant", "text": f"reply {e.index}",
                 "created_at": "2024-05-01T10:00:02Z"}]}


def _openwebui(e: Entry, title: Any, text: Any) -> Any:
    return {"id": f"owui-{e.index}", "title": title, "created_at": T0, "updated_at": T0 + 5,
            "chat": {"history": {"currentId": "b", "messages": {
                "a": {"id": "a", "parentId": None, "childrenIds": ["b"], "role": "user",
                      "content": text, "timestamp": T0 + 1},
                "b": {"id": "b", "parentId": "a", "childrenIds": [], "role": "assistant",
                      "content": f"reply {e.index}", "timestamp": T0 + 2}}}}}


def _openai(e: Entry, title: Any, text: Any) -> Any:
    return {"title": title, "messages": [{"role": "user", "content": text},
                                         {"role": "assistant", "content": f"reply {e.index}"}]}


def _tau(e: Entry, title: Any, text: Any) -> Any:
    return {"task_id": title, "reward": 1.0, "traj": [
        {"role": "user", "content": text}, {"role": "assistant", "content": f"reply {e.index}"}]}


def _context(e: Entry, title: Any, text: Any) -> Any:
    return {"session_id": f"ctx-{e.index}", "title": title, "facts": [], "recent_history": [
        {"timestamp": "2024-05-01T10:00:00Z", "role": "user", "content": text},
        {"timestamp": "2024-05-01T10:00:01Z", "role": "assistant", "content": f"reply {e.index}"}]}


def _sharegpt(e: Entry, title: Any, text: Any) -> Any:
    return {"id": f"g-{e.index}", "title": title, "conversations": [
        {"from": "human", "value": text}, {"from": "gpt", "value": f"reply {e.index}"}]}


@dataclass(frozen=True)
class Layout:
    """How one import format (or one shape of it) is written."""

    name: str
    format: str
    build: Callable[[Entry, Any, Any], Any]
    lines: bool = False
    """JSON Lines (positions ``line N``) instead of a JSON array (``item N``)."""
    zipped: bool = False
    title_shown: Callable[[str], str] = field(default=lambda title: title)
    """The title the importer gives a valid entry."""

    def position(self, index: int) -> str:
        return f"line {index + 1}" if self.lines else f"item {index}"


LAYOUTS = [
    Layout("context-json", "context-json", _context),
    Layout("openai", "openai", _openai),
    Layout("openai-jsonl", "openai", _openai, lines=True),
    Layout("tau-bench", "openai", _tau, title_shown=lambda title: f"task {title}"),
    Layout("chatgpt", "chatgpt", _chatgpt),
    Layout("chatgpt-zip", "chatgpt", _chatgpt, zipped=True),
    Layout("claude", "claude", _claude),
    Layout("openwebui", "openwebui", _openwebui),
    Layout("sharegpt", "sharegpt", _sharegpt),
    Layout("sharegpt-jsonl", "sharegpt", _sharegpt, lines=True),
]
LAYOUT_BY_NAME = {layout.name: layout for layout in LAYOUTS}


def entry_value(layout: Layout, e: Entry) -> Any:
    """The entry as JSON data, with its change applied (placeholders for deep arrays)."""
    title: Any = e.title
    text: Any = e.text
    hostile: Any = None
    if e.change == "surrogate":
        hostile = "\ud800"
    elif e.change == "deep":
        hostile = DEEP
    elif e.change == "type":
        hostile = e.wrong
    if e.change is not None:
        if e.where == "entry":
            return hostile if e.change != "surrogate" else "\udfff"
        if e.change == "surrogate":
            if e.where == "title":
                title = f"{e.title}\ud800"
            else:
                text = f"{e.text}\ud800"
        elif e.where == "title":
            title = hostile
        else:
            text = hostile
    return layout.build(e, title, text)


@dataclass
class Written:
    """A file written from entries: its bytes and where each entry's text ends."""

    data: bytes
    ends: list[int]
    """The byte offset just past each entry's JSON text."""


def render(layout: Layout, entries: list[Entry]) -> Written:
    """The file's bytes (before any cut) and the end offset of each entry."""
    out = io.BytesIO()
    ends: list[int] = []
    out.write(b"" if layout.lines else b"[\n")
    for position, e in enumerate(entries):
        if position and not layout.lines:
            out.write(b",\n")
        text = json.dumps(entry_value(layout, e), ensure_ascii=True)
        if e.change == "deep":
            text = text.replace(json.dumps(DEEP), "[" * e.depth + "]" * e.depth)
        out.write(text.encode("utf-8"))
        ends.append(out.tell())
        if layout.lines:
            out.write(b"\n")
    out.write(b"" if layout.lines else b"\n]\n")
    return Written(out.getvalue(), ends)


def write(layout: Layout, data: bytes, folder: Path) -> Path:
    """Write ``data`` as the format's file (inside a ZIP for a zipped layout)."""
    if layout.zipped:
        path = folder / "export.zip"
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("conversations.json", data)
        return path
    path = folder / ("data.jsonl" if layout.lines else "data.json")
    path.write_bytes(data)
    return path
