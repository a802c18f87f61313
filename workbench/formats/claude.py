"""Claude.ai data export: ``conversations.json`` (alone, in the export ZIP, or a folder).

The export is a JSON array of conversations ``{uuid, name, summary, created_at,
updated_at, chat_messages}``; each message is ``{uuid, sender, text, content,
created_at, attachments, files}`` with ``sender`` ``human`` or ``assistant``.

- ``content`` blocks are read in order: ``text`` gives the message text; ``thinking``
  becomes a ``{"type": "reasoning"}`` part keeping the block's other keys (``summaries``,
  ``cut_off``, times, signature); ``tool_use`` becomes an OpenAI-shaped tool
  call on the assistant message; ``tool_result`` becomes a tool message answering it
  (``tool_call_id`` = the ``tool_use`` id), and text after it starts a new assistant
  message, so the session has the shape the chat APIs expect. Other blocks (images,
  documents…) leave a ``[type]`` placeholder and are kept in ``parts``. Without
  ``content`` blocks the ``text`` field is used.
- What a block says besides what is read from it (its ``start_timestamp`` and
  ``stop_timestamp``, ``flags``, a tool's status line ``message``, ``display_content``,
  ``icon_name``…) is kept in the metadata of the message it lands in, as
  ``content_blocks`` (``{"index", "type", …}``, one entry per such block); a message's
  keys not read into it (``updated_at``, ``index``…) go into its metadata.
- ``attachments`` keep their extracted text: it is appended to the message under a
  ``[Attachment: <file name>]`` line, and the attachment is kept in ``parts``. ``files``
  (uploads whose content the export does not hold) add a ``[File: <file name>]`` line.
- A ``null`` (or otherwise unreadable) message is reported as skipped, naming the
  conversation and the message index; the rest of that conversation is imported.
- An empty ``name`` gives a title from the first human message.
- Messages are a tree when they name their parent (``parent_message_uuid``; a root
  names ``00000000-…`` or none): an edited question or a regenerated answer leaves the
  abandoned branch in ``chat_messages`` beside the live one. The session is then the
  path to ``current_leaf_message_uuid`` (without one, the leaf with the latest
  ``created_at``), and the other branches become conversations of their own exactly as
  in the ChatGPT importer (``"<title> (branch N)"``, source id
  ``"<uuid>#branch-<leaf uuid>"``). Without parent links the list order is the session.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workbench.core.conversation import Conversation, Message, Role, SkippedEntry
from workbench.errors import InvalidEntryError
from workbench.formats._support import (
    ExportDocument,
    ExportImporter,
    MessageTree,
    alternate_branches,
    document_entries,
    epoch_seconds,
    epoch_time,
    export_documents,
    first_copies,
    first_element,
    guarded,
    keep_unread,
    latest_leaf,
    number_positions,
    primed,
    sentence,
    skipped_message,
    text_of,
    title_of,
    tool_call,
    with_branches,
)
from workbench.formats.base import ImportItem, type_name

NAME = "claude"

_SENDERS = {"human": Role.USER.value, "user": Role.USER.value, "assistant": Role.ASSISTANT.value}


def looks_like_claude(head: bytes) -> bool:
    """Whether the head of a JSON document is a Claude.ai conversations export."""
    first = first_element(head)
    return first is not None and "chat_messages" in first and "mapping" not in first


class _Builder:
    """Turns one chat message's blocks into workbench messages in API order."""

    def __init__(self, role: str, created: Any, meta: dict[str, Any]) -> None:
        self.role = role
        self.created = epoch_time(created)
        self.meta = meta
        self.out: list[Message] = []
        self._texts: list[str] = []
        self._parts: list[dict[str, Any]] = []
        self._calls: list[dict[str, Any]] = []
        self._plain = True
        self._blocks: list[dict[str, Any]] = []

    def block_extras(self, index: int, block: dict[str, Any], read: frozenset[str]) -> None:
        """Keep what a content block says besides what was read from it (its start and
        stop times, a tool's status line ``message``, ``display_content``, flags…) for
        the message it lands in, under ``content_blocks``."""
        extra = _extras(block, read)
        if extra:
            self._blocks.append({"index": index, "type": block.get("type"), **extra})

    def text(self, text: str, citations: Any = None) -> None:
        self._texts.append(text)
        part: dict[str, Any] = {"type": "text", "text": text}
        if citations:  # the sources the text cites: kept with it
            part["citations"] = citations
            self._plain = False
        self._parts.append(part)

    def part(self, part: dict[str, Any], placeholder: str | None = None) -> None:
        self._plain = False
        self._parts.append(part)
        if placeholder:
            self._texts.append(placeholder)

    def call(self, block: dict[str, Any], index: int) -> None:
        call_id = block.get("id")
        if not isinstance(call_id, str) or not call_id:
            call_id = f"toolu_{len(self.out)}_{index}"
        self._calls.append(tool_call(call_id, str(block.get("name") or "tool"), block.get("input")))

    def result(self, block: dict[str, Any], index: int) -> None:
        self.flush()
        call_id = block.get("tool_use_id")
        content = block.get("content")
        meta: dict[str, Any] = {}
        if block.get("is_error"):
            meta["is_error"] = True
        extra = _extras(block, _RESULT_READ)
        if extra:
            meta["content_blocks"] = [{"index": index, "type": block.get("type"), **extra}]
        name = block.get("name")
        self.out.append(
            Message(
                role=Role.TOOL.value,
                content=text_of(content),
                name=name if isinstance(name, str) and name else None,
                tool_call_id=call_id if isinstance(call_id, str) else None,
                parts=content if isinstance(content, list) and content else None,
                created_at=self.created,
                metadata=meta,
            )
        )

    def flush(self) -> None:
        if not self._texts and not self._calls and self._plain:
            self._parts = []
            if self._blocks and self.out:  # (blocks of empty text: kept on the last)
                self.out[-1].metadata.setdefault("content_blocks", []).extend(self._blocks)
                self._blocks = []
            return
        role = Role.ASSISTANT.value if self._calls else self.role
        meta = dict(self.meta) if not self.out else {}
        if self._blocks:
            meta["content_blocks"] = self._blocks
        self.out.append(
            Message(
                role=role,
                content="\n\n".join(t for t in self._texts if t),
                tool_calls=self._calls or None,
                parts=None if self._plain else self._parts,
                created_at=self.created,
                metadata=meta,
            )
        )
        self._texts, self._parts, self._calls, self._plain = [], [], [], True
        self._blocks = []


_EMPTY: tuple[Any, ...] = (None, "", [], {})
# What is read of each kind of block (the rest with a value is kept, see block_extras).
_TEXT_READ = frozenset({"type", "text", "citations"})
_CALL_READ = frozenset({"type", "id", "name", "input"})
_RESULT_READ = frozenset({"type", "tool_use_id", "content", "is_error", "name"})
# Keys of a chat message read into the message; any other with a value is kept in its
# metadata (``updated_at``, ``index``…).
_MESSAGE_READ = frozenset({"uuid", "sender", "text", "content", "created_at", "attachments",
                           "files", "stop_reason", "truncated", "parent_message_uuid"})


def _extras(block: dict[str, Any], read: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k not in read and v not in _EMPTY}


def parse_message(raw: Any) -> list[Message]:
    """One ``chat_messages`` entry as workbench messages; raises :class:`InvalidEntryError`."""
    if raw is None:
        raise InvalidEntryError("the message is null")
    if not isinstance(raw, dict):
        raise InvalidEntryError(f"the message is {type_name(raw)}, not an object")
    sender = raw.get("sender")
    role = _SENDERS.get(sender) if isinstance(sender, str) else None
    if role is None:
        raise InvalidEntryError(f"sender {sender!r} is neither 'human' nor 'assistant'")
    meta: dict[str, Any] = {}
    uuid = raw.get("uuid")
    if isinstance(uuid, str) and uuid:
        meta["source_message_id"] = uuid
    stop = raw.get("stop_reason")
    if isinstance(stop, str) and stop:
        meta["stop_reason"] = stop  # max_tokens: the answer was cut off
    if raw.get("truncated") is True:
        meta["truncated"] = True
    keep_unread(meta, raw, _MESSAGE_READ)
    builder = _Builder(role, raw.get("created_at"), meta)
    blocks = raw.get("content")
    if isinstance(blocks, list) and blocks:
        for index, block in enumerate(blocks):
            _block(builder, block, index)
    else:
        text = raw.get("text")
        if isinstance(text, str) and text:
            builder.text(text)
    _attachments(builder, raw)
    builder.flush()
    if not builder.out:
        # An empty turn still happened; keeping it keeps the turn order of the export.
        builder.out.append(
            Message(role=role, content="", created_at=builder.created, metadata=meta)
        )
    return builder.out


def _block(builder: _Builder, block: Any, index: int) -> None:
    if isinstance(block, str):
        builder.text(block)
        return
    if not isinstance(block, dict):
        return
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        if isinstance(text, str):
            builder.text(text, block.get("citations"))
            builder.block_extras(index, block, _TEXT_READ)
        else:
            builder.part(dict(block))  # text of another kind: kept as it is
    elif kind in ("thinking", "redacted_thinking"):
        thought = block.get("thinking")
        part: dict[str, Any] = {
            "type": "reasoning",
            "text": thought if isinstance(thought, str) else "",
        }
        if kind == "redacted_thinking":
            part["redacted"] = True
        # Everything else the block says (``summaries``, ``cut_off``, its start and stop
        # times, a signature or redacted data) stays with it.
        for key, value in block.items():
            if key not in ("type", "thinking"):
                part.setdefault(key, value)
        builder.part(part)
    elif kind in ("tool_use", "server_tool_use"):
        builder.call(block, index)
        builder.block_extras(index, block, _CALL_READ)
    elif kind in ("tool_result", "web_search_tool_result"):
        builder.result(block, index)
    else:
        name = str(kind or "block")
        builder.part(dict(block), f"[{name}]")


def _attachments(builder: _Builder, raw: dict[str, Any]) -> None:
    for attachment in _objects(raw, "attachments"):
        name = str(attachment.get("file_name") or "attachment")
        extracted = attachment.get("extracted_content")
        text = extracted if isinstance(extracted, str) else ""
        part = {"type": "attachment", "file_name": name, "text": text}
        for key, value in attachment.items():  # file_type, file_size, id…
            if key != "extracted_content":
                part.setdefault(key, value)
        builder.part(part, f"[Attachment: {name}]\n{text}" if text else f"[Attachment: {name}]")
    for entry in _objects(raw, "files"):
        name = str(entry.get("file_name") or "file")
        builder.part({"type": "file", **entry}, f"[File: {name}]")


def _objects(raw: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """The objects in the list ``raw[key]`` (other values, or no list, are passed over)."""
    value = raw.get(key)
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


# Keys that make an object a Claude conversation, and every key read into a field.
_CONVERSATION_KEYS = frozenset({"uuid", "name", "chat_messages", "created_at"})
_READ_KEYS = _CONVERSATION_KEYS | {"updated_at", "summary", "model", "project_uuid",
                                   "project"}


def parse_conversation(item: Any, where: str, fallback_id: str) -> list[ImportItem]:
    """One export entry as a conversation, preceded by its skipped messages if any."""
    if not isinstance(item, dict):
        return [
            SkippedEntry(
                entry=where, reason=f"A conversation must be an object, not {type_name(item)}."
            )
        ]
    if item and not _CONVERSATION_KEYS.intersection(item):
        return [
            SkippedEntry(
                entry=where,
                reason="Not a Claude conversation: it has none of uuid, name, "
                "chat_messages, created_at.",
            )
        ]
    uuid = item.get("uuid")
    source_id = uuid if isinstance(uuid, str) and uuid else fallback_id
    name = item.get("name")
    label = f"conversation {name!r} ({source_id})" if name else f"conversation {source_id}"
    raw_messages = item.get("chat_messages")
    if raw_messages is None:
        raw_messages = []
    if not isinstance(raw_messages, list):
        return [
            SkippedEntry(
                entry=where,
                reason=sentence(f"{label}: chat_messages is {type_name(raw_messages)}, not a list"),
            )
        ]
    results: list[ImportItem] = []
    messages: list[Message] = []
    readable: list[Any] = []
    for index, raw in enumerate(raw_messages):
        try:
            messages.extend(parse_message(raw))
        except InvalidEntryError as exc:
            results.append(
                skipped_message(f"{where} chat_messages[{index}]", label, f"message {index}", exc)
            )
            continue
        readable.append(raw)
    number_positions(messages)
    tree = _message_tree(readable)
    current: str | None = None
    if tree is not None:
        by_id = {raw["uuid"]: raw for raw in readable}
        leaf = item.get("current_leaf_message_uuid")
        current = leaf if isinstance(leaf, str) and leaf in tree.parent_of else None
        if current is None:
            current = latest_leaf(tree, lambda n: epoch_seconds(by_id[n].get("created_at")))
        if current is not None:
            main_path = tree.path_to(current)
            messages = _path_messages(by_id, main_path)
    title = title_of(name, messages, f"Claude conversation {source_id}")
    metadata: dict[str, Any] = {"uuid": uuid}
    for key in ("summary", "model", "project_uuid"):
        value = item.get(key)
        if value:
            metadata[key] = value
    project = item.get("project")
    if isinstance(project, dict) and project.get("name"):
        metadata["project"] = project.get("name")
    keep_unread(metadata, item, _READ_KEYS)
    main = Conversation(
        title=title,
        messages=messages,
        source=NAME,
        source_id=source_id,
        created_at=epoch_time(item.get("created_at")),
        updated_at=epoch_time(item.get("updated_at")),
        metadata=metadata,
    )
    if tree is None or current is None:
        return [*results, main]
    if not (isinstance(item.get("current_leaf_message_uuid"), str)
            and item["current_leaf_message_uuid"] in tree.parent_of):
        metadata["current_leaf_guessed"] = True
    branches = alternate_branches(
        tree, main_path, lambda path: _path_messages(by_id, path), messages)
    return [*results, *with_branches(main, branches, where)]


def _message_tree(messages: list[Any]) -> MessageTree | None:
    """The tree the messages' parent links make, or ``None`` when they make a list (no
    links, a message without an id, or no message with two children)."""
    order: list[str] = []
    parent_of: dict[str, str | None] = {}
    for raw in messages:
        uuid = raw.get("uuid")
        parent = raw.get("parent_message_uuid")
        if not isinstance(uuid, str) or not uuid or uuid in parent_of:
            return None
        if parent is not None and not isinstance(parent, str):
            return None
        order.append(uuid)
        parent_of[uuid] = parent
    if not any(p in parent_of for p in parent_of.values()):
        return None  # no message names another as its parent: not a tree
    tree = MessageTree(order, parent_of)
    if all(len(children) <= 1 for children in tree.children.values()) and sum(
        1 for p in tree.parent_of.values() if p is None
    ) == 1:
        return None  # one line from one root: the list order says the same
    return tree


def _path_messages(by_id: dict[str, Any], path: list[str]) -> list[Message]:
    messages: list[Message] = []
    for node in path:
        messages.extend(parse_message(by_id[node]))  # read once already: it raises no more
    return number_positions(messages)


class ClaudeImporter(ExportImporter):
    """Reads a Claude.ai data export (``conversations.json``, the ZIP, or its folder)."""

    name = NAME
    description = "Claude.ai data export: conversations.json with chat_messages, or the ZIP"

    def looks_like(self, head: bytes) -> bool:
        """A conversations array with ``chat_messages``, or a ZIP or folder holding one."""
        return looks_like_claude(head)

    def read(self, path: Path) -> Iterator[ImportItem]:
        """Conversations of ``path``, with null or unreadable messages reported."""
        path = Path(path)
        return primed(self._read_documents(path, export_documents(path, "a Claude export")))

    def _read_documents(self, path: Path, documents: list[ExportDocument]) -> Iterator[ImportItem]:
        started = False
        for document in documents:
            for item in guarded(
                self._read_document(path, document),
                document.entry_prefix,
                fatal_at_start=not started,
            ):
                started = True
                yield item

    def _read_document(self, path: Path, document: ExportDocument) -> Iterator[ImportItem]:
        items = document_entries(document, path)
        stem = Path(document.label.rsplit(":", 1)[-1]).name
        yield from first_copies(items, parse_conversation, document.entry_prefix, stem,
                                "Conversation")
