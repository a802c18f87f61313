"""Open WebUI chat export: a JSON array of ``{id, title, chat, created_at, ...}``.

Each ``chat`` holds a message tree, ``history.messages`` (``{id: {parentId,
childrenIds, role, content, timestamp, model, ...}}``), and ``history.currentId``, the
message the user last saw. The session is the path from the root to ``currentId``
(without one, the leaf with the latest ``timestamp``). Other leaves become branch
conversations exactly as in the ChatGPT importer: source id ``"<chat id>#branch-<leaf>"``,
title ``"<title> (branch N)"``, and dropped when they only repeat the session. A chat
without ``history`` but with a flat ``messages`` list is read in list order.

An assistant message is rebuilt in the shape the chat APIs use:

- when it has ``output`` items (newer Open WebUI), those are the record: ``reasoning``
  items become ``{"type": "reasoning"}`` parts, ``function_call`` items assistant tool
  calls, ``function_call_output`` items tool messages answering them, and ``message``
  items the text (their ``annotations``, the sources cited, kept on the text part);
  any other item (``web_search_call``, ``image_generation_call``…) is kept whole as a
  part in its place;
- otherwise its ``content`` is read: ``<details type="reasoning">`` blocks become
  reasoning parts (removed from the text) and ``<details type="tool_calls">`` blocks
  become tool calls (``id``, ``name``, ``arguments`` attributes) with a tool message
  holding the ``result`` attribute (or the block's body), HTML entities decoded. Text
  after a tool call starts a new assistant message.

Times are epoch numbers (seconds, or milliseconds in some versions). A message's other
keys with a value (``model``, ``usage``, ``sources``, ``annotation``, ``error``…) go into
its metadata (an assistant turn split at tool results: on its first message), user
``files`` into ``parts`` whole (an image's data URL too); the chat's other keys
(``user_id``, ``params`` with the system prompt…) into the session's metadata.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workbench.core.conversation import Conversation, Message, Role, SkippedEntry
from workbench.formats._reading import safe_json
from workbench.formats._support import (
    Branches,
    MessageTree,
    alternate_branches,
    epoch_seconds,
    epoch_time,
    file_entries,
    first_copies,
    first_element,
    guarded,
    keep_unread,
    latest_leaf,
    number_positions,
    primed,
    sentence,
    text_of,
    title_of,
    tool_call,
    with_branches,
)
from workbench.formats.base import FileImporter, ImportItem, type_name

NAME = "openwebui"

_DETAILS = re.compile(r"<details\b([^>]*)>(.*?)</details>", re.DOTALL | re.IGNORECASE)
_ATTRIBUTE = re.compile(r"([A-Za-z_][\w-]*)\s*=\s*\"([^\"]*)\"")
_SUMMARY = re.compile(r"<summary\b[^>]*>.*?</summary>", re.DOTALL | re.IGNORECASE)
_ROLES = frozenset({Role.USER.value, Role.ASSISTANT.value, Role.SYSTEM.value, Role.TOOL.value})
_CHAT_CUES = frozenset({"history", "messages", "models", "params"})


def looks_like_openwebui(head: bytes) -> bool:
    """Whether the head of a JSON document is an Open WebUI chat export."""
    first = first_element(head)
    if first is None:
        return False
    chat = first.get("chat")
    return isinstance(chat, dict) and (
        bool(_CHAT_CUES & set(chat)) or ("user_id" in first and not chat)
    )


# --------------------------------------------------------------------------- messages


class _Turn:
    """Accumulates one assistant turn and splits it where tool results come in."""

    def __init__(self, created: Any, meta: dict[str, Any]) -> None:
        self.created = created
        self.meta = meta
        self.out: list[Message] = []
        self.texts: list[str] = []
        self.parts: list[dict[str, Any]] = []
        self.calls: list[dict[str, Any]] = []
        self.results: list[Message] = []
        self.rich = False

    def text(self, text: str) -> None:
        if not text.strip():
            return
        self.close_calls()
        self.texts.append(text.strip())
        self.parts.append({"type": "text", "text": text.strip()})

    def reasoning(self, text: str, extra: dict[str, Any] | None = None) -> None:
        self.close_calls()
        self.rich = True
        self.parts.append({"type": "reasoning", "text": text, **(extra or {})})

    def annotate(self, extra: dict[str, Any]) -> None:
        """Keep what the source says of the text just added (its citations) with it."""
        if not extra:
            return
        self.rich = True
        if self.parts and self.parts[-1].get("type") == "text":
            self.parts[-1].update(extra)
        else:
            self.parts.append({"type": "text", "text": "", **extra})

    def item(self, item: dict[str, Any]) -> None:
        """An output item this importer has no reading for (a web search, a generated
        image, a code run…): kept whole as a part of its type, in its place."""
        self.close_calls()
        self.rich = True
        self.parts.append(dict(item))

    def call(self, call_id: str, name: str, arguments: Any, result: str | None) -> None:
        self.calls.append(tool_call(call_id, name, arguments if arguments else "{}"))
        if result is not None:
            self.answer(call_id, name, result)

    def answer(self, call_id: str, name: str | None, result: str) -> None:
        self.results.append(
            Message(
                role=Role.TOOL.value,
                content=result,
                name=name,
                tool_call_id=call_id,
                created_at=self.created,
            )
        )

    def close_calls(self) -> None:
        """Emit the pending assistant message with its calls, then the calls' results."""
        if not self.calls and not self.results:
            return
        self._emit(calls=self.calls)
        self.out.extend(self.results)
        self.calls, self.results = [], []

    def _emit(self, calls: list[dict[str, Any]] | None = None) -> None:
        if not self.texts and not calls and not self.rich:
            return
        self.out.append(
            Message(
                role=Role.ASSISTANT.value,
                content="\n\n".join(self.texts),
                tool_calls=calls or None,
                parts=self.parts if self.rich else None,
                created_at=self.created,
                metadata=self._meta(),
            )
        )
        self.texts, self.parts, self.rich = [], [], False

    def _meta(self) -> dict[str, Any]:
        # What the source says of the turn (usage, sources, rating…) goes on its first
        # message only, so sums stay right and nothing is there twice; the model on each.
        first = not any(m.role == Role.ASSISTANT.value for m in self.out)
        return {k: v for k, v in self.meta.items() if first or k == "model"}

    def finish(self) -> list[Message]:
        self.close_calls()
        self._emit()
        return self.out


def _unescape_result(value: str) -> str:
    text = html.unescape(value)
    # Open WebUI stores a tool's result JSON-encoded; a plain JSON string reads better bare.
    decoded = safe_json(text)  # None for text that is not JSON (or nests too deep)
    return decoded if isinstance(decoded, str) else text


def _details_body(body: str) -> str:
    text = html.unescape(_SUMMARY.sub("", body)).strip()
    # Reasoning is rendered as a quote: drop the "> " markers Open WebUI puts on each line.
    lines = [line[2:] if line.startswith("> ") else line.lstrip(">") for line in text.splitlines()]
    return "\n".join(lines).strip()


def _from_content(turn: _Turn, content: str, msg_id: str) -> None:
    pos = 0
    calls = 0
    for match in _DETAILS.finditer(content):
        attrs = {k.lower(): v for k, v in _ATTRIBUTE.findall(match.group(1))}
        kind = attrs.get("type", "").lower()
        if kind not in ("reasoning", "tool_calls"):
            continue
        turn.text(content[pos : match.start()])
        pos = match.end()
        if kind == "reasoning":
            extra = {"duration": attrs["duration"]} if "duration" in attrs else None
            turn.reasoning(_details_body(match.group(2)), extra)
            continue
        calls += 1
        call_id = html.unescape(attrs.get("id") or "") or f"call_{msg_id}_{calls}"
        name = html.unescape(attrs.get("name") or "") or "tool"
        arguments = html.unescape(attrs.get("arguments") or "")
        if "result" in attrs:
            result = _unescape_result(attrs["result"])
        else:
            result = _unescape_result(_details_body(match.group(2)))
        turn.call(call_id, name, arguments, result)
    turn.text(content[pos:])


def _from_output(turn: _Turn, output: list[Any]) -> None:
    names: dict[str, str] = {}
    for item in output:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "reasoning":
            text = text_of(item.get("content")) or text_of(item.get("summary"))
            # When the model thought, and for how long.
            extra = {k: item[k] for k in ("duration", "started_at", "ended_at")
                     if item.get(k) is not None} or None
            turn.reasoning(text, extra)
        elif kind == "function_call":
            call_id = str(item.get("call_id") or item.get("id") or f"call_{len(names)}")
            name = str(item.get("name") or "tool")
            names[call_id] = name
            turn.call(call_id, name, item.get("arguments"), None)
        elif kind == "function_call_output":
            call_id = str(item.get("call_id") or item.get("id") or "")
            turn.answer(call_id, names.get(call_id), text_of(item.get("output")))
        elif kind == "message":
            content = item.get("content")
            turn.text(text_of(content))
            turn.annotate(_text_extras(content))
        else:
            turn.item(item)


def _text_extras(content: Any) -> dict[str, Any]:
    """What the text parts of an output message hold besides their text (the
    ``annotations`` with the sources a reply cites, ``logprobs``…), gathered by key."""
    extras: dict[str, Any] = {}
    for piece in content if isinstance(content, list) else []:
        if not isinstance(piece, dict):
            continue
        for key, value in piece.items():
            if key in ("type", "text") or not _has_value(value):
                continue
            if isinstance(value, list):
                extras.setdefault(key, []).extend(value)
            else:
                extras.setdefault(key, value)
    return extras


def _file_parts(files: Any) -> list[dict[str, Any]]:
    # Whole, with the image a data URL holds and the upload's record (``file``, with the
    # text extracted from a document): the export holds no other copy of them.
    parts: list[dict[str, Any]] = []
    if not isinstance(files, list):
        return parts
    for entry in files:
        if not isinstance(entry, dict):
            continue
        kept = dict(entry)
        kept["type"] = str(entry.get("type") or "file")
        parts.append(kept)
    return parts


# Keys of a message that become the message itself; any other with a value is kept in
# its metadata (model, usage, sources, statusHistory, annotation, error, info…).
_MESSAGE_KEYS = frozenset(
    {"id", "parentId", "childrenIds", "role", "content", "timestamp", "output", "files"})
# Keys of a chat item (and of its ``chat``) read into the session; any other with a
# value is kept in its metadata (user_id, share_id, params with the system prompt…).
# ``chat.messages`` is the same messages as ``history`` again, flat.
_ITEM_KEYS = frozenset({"id", "title", "chat", "created_at", "updated_at", "meta"})
_CHAT_KEYS = frozenset({"id", "title", "history", "messages", "tags", "timestamp", "models"})


def _has_value(value: Any) -> bool:
    return value is not None and value != "" and value != [] and value != {}


def _message_meta(raw: dict[str, Any], created: Any) -> dict[str, Any]:
    meta = {k: v for k, v in raw.items() if k not in _MESSAGE_KEYS and _has_value(v)}
    if meta.get("done") is True:
        del meta["done"]  # every finished message says so; only an unfinished one is news
    if created is None and _has_value(raw.get("timestamp")):
        meta["timestamp"] = raw["timestamp"]  # a time that could not be read, as it was
    return meta


def parse_message(raw: Any, msg_id: str) -> list[Message]:
    """One ``history.messages`` entry as workbench messages (several for tool use)."""
    if not isinstance(raw, dict):
        return []
    role = raw.get("role")
    content = raw.get("content")
    text = content if isinstance(content, str) else text_of(content)
    created = epoch_time(raw.get("timestamp"))
    meta = _message_meta(raw, created)
    if role == Role.ASSISTANT.value:
        if _has_value(raw.get("files")):
            meta["files"] = raw["files"]  # what the reply made (a generated image)
        turn = _Turn(created, meta)
        output = raw.get("output")
        if isinstance(output, list) and any(isinstance(o, dict) for o in output):
            _from_output(turn, output)
        else:
            _from_content(turn, text, msg_id)
        messages = turn.finish()
        if not messages:
            messages = [
                Message(role=Role.ASSISTANT.value, content="", created_at=created, metadata=meta)
            ]
        return messages
    if not isinstance(role, str) or role not in _ROLES:
        meta["original_role"] = role
        role = Role.USER.value
    parts = _file_parts(raw.get("files"))
    placeholders = [f"[{p['type']}]" for p in parts]
    if parts:
        parts.insert(0, {"type": "text", "text": text})
    return [
        Message(
            role=str(role),
            content="\n".join([text, *placeholders]) if placeholders else text,
            parts=parts or None,
            created_at=created,
            metadata=meta,
        )
    ]


# --------------------------------------------------------------------------- chats


def _path_messages(nodes: dict[str, Any], path: list[str]) -> list[Message]:
    messages: list[Message] = []
    for node_id in path:
        messages.extend(parse_message(nodes.get(node_id), node_id))
    return number_positions(messages)


def parse_chat(item: Any, where: str, fallback_id: str) -> list[ImportItem]:
    """One exported chat as its session followed by its branch conversations."""
    if not isinstance(item, dict):
        return [
            SkippedEntry(entry=where, reason=f"A chat must be an object, not {type_name(item)}.")
        ]
    chat = item.get("chat") if isinstance(item.get("chat"), dict) else item
    assert isinstance(chat, dict)
    chat_id = item.get("id")
    source_id = str(chat_id) if isinstance(chat_id, str | int) and chat_id != "" else fallback_id
    raw_title = item.get("title") or chat.get("title")
    label = f"chat {raw_title!r} ({source_id})" if raw_title else f"chat {source_id}"
    history = chat.get("history")
    nodes = history.get("messages") if isinstance(history, dict) else None
    branches = Branches([])
    guessed = False
    if isinstance(nodes, dict) and nodes:
        assert isinstance(history, dict)
        order = [k for k, v in nodes.items() if isinstance(v, dict)]
        tree = MessageTree(
            order,
            {k: _str(nodes[k].get("parentId")) for k in order},
            {k: _str_list(nodes[k].get("childrenIds")) for k in order},
        )
        current = history.get("currentId")
        if not (isinstance(current, str) and current in tree.parent_of):
            guessed = True
            current = latest_leaf(tree, lambda n: epoch_seconds(nodes[n].get("timestamp")))
        if current is None:  # no entry of history.messages is an object
            return [
                SkippedEntry(
                    entry=where,
                    reason=sentence(f"{label} has no message objects in 'history.messages'"),
                )
            ]
        main_path = tree.path_to(current)
        messages = _path_messages(nodes, main_path)
        branches = alternate_branches(
            tree, main_path, lambda path: _path_messages(nodes, path), messages
        )
    elif isinstance(chat.get("messages"), list) and (chat["messages"] or not nodes):
        messages = []
        for index, raw in enumerate(chat["messages"]):
            raw_id = raw.get("id") if isinstance(raw, dict) else None
            messages.extend(parse_message(raw, str(raw_id or index)))
        number_positions(messages)
    elif nodes is not None and not isinstance(nodes, dict):
        # history.messages of the wrong kind, and no flat list to read instead: an empty
        # session would hide that the chat's messages could not be read.
        return [
            SkippedEntry(
                entry=where,
                reason=sentence(f"{label}: history.messages is {type_name(nodes)}, not an "
                                "object of messages"),
            )
        ]
    else:
        return [
            SkippedEntry(
                entry=where,
                reason=sentence(f"{label} has no 'history.messages' and no 'messages' list"),
            )
        ]

    title = title_of(raw_title, messages, f"Open WebUI chat {source_id}")
    metadata: dict[str, Any] = {"chat_id": chat_id}
    if chat.get("models"):
        metadata["models"] = chat["models"]
    read = _ITEM_KEYS if chat is not item else _ITEM_KEYS | _CHAT_KEYS
    for key, value in item.items():
        if key not in read and value is not False and _has_value(value):
            metadata[key] = value
    meta = item.get("meta")
    if isinstance(meta, dict) and any(k != "tags" and _has_value(v) for k, v in meta.items()):
        metadata["meta"] = {k: v for k, v in meta.items() if k != "tags"}
    if chat is not item:
        keep_unread(metadata, chat, _CHAT_KEYS)
    if guessed:
        metadata["current_id_guessed"] = True
    main = Conversation(
        title=title,
        messages=messages,
        source=NAME,
        source_id=source_id,
        created_at=epoch_time(item.get("created_at") or chat.get("timestamp")),
        updated_at=epoch_time(item.get("updated_at")),
        tags=_tags(item, chat),
        metadata=metadata,
    )
    return with_branches(main, branches, where)


def _str_list(value: Any) -> list[str]:
    return [c for c in value if isinstance(c, str)] if isinstance(value, list) else []


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _tags(item: dict[str, Any], chat: dict[str, Any]) -> list[str]:
    found: list[str] = []
    meta = item.get("meta")
    for source in (meta.get("tags") if isinstance(meta, dict) else None, chat.get("tags")):
        if isinstance(source, list):
            for tag in source:
                name = tag.get("name") if isinstance(tag, dict) else tag
                if isinstance(name, str) and name and name not in found:
                    found.append(name)
    return found


class OpenWebUIImporter(FileImporter):
    """Reads an Open WebUI chat export (one or many chats)."""

    name = NAME
    reads = "JSON"
    description = "Open WebUI chat export: [{id, title, chat: {history: {messages, currentId}}}]"

    def looks_like(self, head: bytes) -> bool:
        """A JSON array (or object) of chats with a ``chat`` object holding ``history``."""
        return looks_like_openwebui(head)

    def read_file(self, path: Path) -> Iterator[ImportItem]:
        """Sessions and branch conversations of ``path``, one chat at a time."""
        return primed(guarded(self._read_items(path, file_entries(path))))

    def _read_items(self, path: Path, items: Iterator[Any]) -> Iterator[ImportItem]:
        yield from first_copies(items, parse_chat, "", path.name, "Chat")
