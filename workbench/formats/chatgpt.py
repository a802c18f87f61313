"""ChatGPT data export: ``conversations.json``, the export ZIP, or split files.

Accepted inputs: the ``conversations.json`` array (or one conversation object), the ZIP
that ChatGPT mails out (its ``conversations.json``, or the split ``conversations-000.json``,
``conversations-001.json``… files newer exports hold), a folder holding those files, or
one split file on its own. Files are decoded one conversation at a time, so a large
export never exists in memory as a whole.

Each conversation is a tree of nodes (``mapping``). The session is the path from the root
to ``current_node`` (the answer the user last saw). Without a usable ``current_node`` (as
in minimal exports), the leaf with the latest ``create_time`` is taken, or, when no leaf
has a time, the last leaf in ``mapping`` order.

Other branches (an edited question, a regenerated answer) become conversations of their
own, so each can be opened as a session: one per other leaf, holding the whole path from
the root to that leaf, titled ``"<title> (branch N)"``, with source id
``"<conversation id>#branch-<leaf id>"`` and ``metadata`` ``{"branch_of", "branch_leaf",
"branch_fork"}``; its first message that differs from the session carries
``metadata["branch_start"] = True``. A branch whose messages are the same as the
session's (or an earlier branch's), or only a prefix of them, is dropped: a regenerated
answer in the same words adds nothing to open.

Nodes are read as follows:

- hidden nodes (``metadata.is_visually_hidden_from_conversation``), the custom
  instructions (``user_editable_context``, ``model_editable_context``) and system or
  other messages without text are not messages of the session; what the hidden nodes
  of the session's path told the model is kept in the session's metadata: the custom
  instructions and memory under their content type (``user_profile``,
  ``user_instructions``…), the text of other hidden messages (the whole content, for
  one of another type) as ``hidden_messages``;
- ``text`` and ``code`` give their text; ``multimodal_text`` joins its text parts and
  puts ``[image]`` / ``[audio]`` / ``[file]`` where a non-text part was; the parts are
  kept in ``Message.parts``;
- an assistant message addressed to a tool (``recipient`` other than ``all``, such as
  code sent to ``python``) becomes an assistant message with an OpenAI-shaped tool call;
  the tool's answers (``execution_output``, ``tether_browsing_display``, ``tether_quote``,
  author role ``tool``) become tool messages with the tool's name (``author.name``) and
  the id of the call they answer: the nearest call above them in the tree (never a
  queue of open calls, so a call whose answer is missing cannot shift the others). An
  empty answer to a call is kept as an empty tool message; the images a code run
  displayed (``file-service://`` pointers in ``metadata.aggregate_result``) are kept as
  ``image_asset_pointer`` parts;
- a content's fields its text does not hold (a page's ``url`` and ``title``, a quote's
  ``domain``, a screenshot…) are kept in a part of the content's type, so a content type
  with no reading of its own (``computer_output``, ``sonic_webpage``…) is kept, with a
  ``[type]`` text when it has no text;
- reasoning (``thoughts``, ``reasoning_recap``) becomes ``{"type": "reasoning"}`` parts
  of the next assistant message (an assistant message of its own when none follows);
- ``create_time`` (may be null) is the message time; ``metadata.model_slug`` goes into
  the message metadata as ``model``, a finish other than ``stop`` as ``finish_reason``,
  what a code run's ``aggregate_result`` adds to its output (status, times, the
  exception) as ``execution``, and every other key of ``metadata`` with a value
  (``attachments``, ``citations``, ``gizmo_id``, ``search_queries``…) as it is, but the
  service's bookkeeping (request ids, padding, ``timestamp_``, ``message_type``…); the
  message's ``update_time`` (when not its ``create_time``), a ``channel`` other than
  ``final`` and a ``weight`` other than 1 as ``message_update_time``,
  ``message_channel``, ``message_weight``; the author's ``name`` (but a tool's, which
  names the message) and ``metadata`` as ``author_name`` and ``author_metadata``.

An entry without ``mapping`` (or with an empty one) is reported as skipped and the
others are imported. JSON that breaks before the first conversation raises
:class:`~workbench.errors.FormatError` naming the file, line and column; JSON that
breaks later keeps the conversations before it and reports the rest as skipped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from workbench.core.conversation import Conversation, Message, Role, SkippedEntry
from workbench.formats._reading import safe_json
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
    title_of,
    tool_call,
    with_branches,
)
from workbench.formats.base import ImportItem, type_name

NAME = "chatgpt"

# Plain strings: reading Role.X.value costs an enum lookup on every node of a large export.
_SYSTEM = Role.SYSTEM.value
_USER = Role.USER.value
_ASSISTANT = Role.ASSISTANT.value
_TOOL = Role.TOOL.value
_CHAT_ROLES = frozenset({_SYSTEM, _USER, _ASSISTANT})
_HIDDEN_TYPES = frozenset({"user_editable_context", "model_editable_context"})
_REASONING_TYPES = frozenset({"thoughts", "reasoning_recap"})
_TOOL_OUTPUT_TYPES = frozenset(
    {"execution_output", "tether_browsing_display", "tether_quote", "system_error"}
)
# A message's metadata that is the service's bookkeeping (ids of the request, padding,
# flags the export always sets) or is read into other fields: not kept. Any other key
# with a value (the uploads, the sources an answer cites, the custom GPT that answered,
# a voice-mode flag, keys newer exports add…) is kept as it is.
_BOOKKEEPING_META = frozenset({
    "request_id", "timestamp_", "message_type", "is_complete", "pad", "parent_id",
    "model_switcher_deny", "default_model_slug", "model_slug", "finish_details",
    "is_visually_hidden_from_conversation", "aggregate_result", "serialization_metadata",
})
# What of a code run's ``aggregate_result`` is not in its output message already (the
# code is the call's, the output the message's text, images are read as parts).
_EXECUTION_KEYS = ("status", "start_time", "end_time", "update_time", "in_kernel_exception",
                   "system_exception", "timeout_triggered")
# A message's own keys besides those read: kept in its metadata under ``message_<key>``
# when they say something (a channel other than the final answer, an edit time…).
_MESSAGE_EXTRA_KEYS = ("update_time", "channel", "weight")
_EMPTY: tuple[Any, ...] = (None, "", [], {})
# What of each content type becomes the message's text; the content's other fields with
# a value are kept in a part of that type (a page's url and title, a quote's domain, a
# screenshot…), so a content type this importer has no reading for is never dropped.
_CONTENT_READ: dict[str, frozenset[str]] = {
    "text": frozenset({"parts", "text"}),
    "multimodal_text": frozenset({"parts", "text"}),
    "code": frozenset({"text", "language"}),
    "execution_output": frozenset({"text"}),
    "tether_browsing_display": frozenset({"result", "summary"}),
    "tether_quote": frozenset({"title", "url", "text"}),
    "system_error": frozenset({"text", "name"}),
}
_READ_BY_DEFAULT = frozenset({"parts", "text"})
_PLACEHOLDERS = {
    "image_asset_pointer": "[image]",
    "audio_asset_pointer": "[audio]",
    "real_time_user_audio_video_asset_pointer": "[audio]",
    "video_container_asset_pointer": "[video]",
    "file_asset_pointer": "[file]",
}
# Keys that come before "mapping" in an export entry: a document that stops parsing
# among them (placeholders instead of numbers, a cut-off head) is judged by its text.
_EARLY_KEYS = frozenset({"title", "create_time", "update_time", "id", "conversation_id"})
# Keys of a conversation read into the session's fields (or its metadata under a name).
_READ_KEYS = frozenset({"title", "create_time", "update_time", "mapping", "current_node",
                        "conversation_id", "id", "default_model_slug", "gizmo_id",
                        "is_archived"})
_MAPPING_KEY = re.compile(r'"mapping"\s*:\s*\{')
_AUTHOR_KEY = re.compile(r'"author"\s*:\s*\{')


def looks_like_chatgpt(head: bytes) -> bool:
    """Whether the head of a JSON document is a ChatGPT export (or one conversation)."""
    first = first_element(head)
    if first is None:
        return False
    if "mapping" in first or ("current_node" in first and "title" in first):
        return True
    if first and set(first) <= _EARLY_KEYS:
        text = head.decode("utf-8", errors="replace")
        return bool(_MAPPING_KEY.search(text) and _AUTHOR_KEY.search(text))
    return False


# --------------------------------------------------------------------------- nodes


@dataclass
class _PathState:
    """What converting one path carries from node to node."""

    reasoning: list[dict[str, Any]] = field(default_factory=list)
    last_call: str | None = None
    """The id of the nearest tool call above the node in hand: in ChatGPT's tree a
    tool's answer hangs below the call it answers, so this is the call it answers."""
    hidden: dict[str, Any] | None = None
    """Where to keep what hidden nodes told the model (see :func:`_keep_hidden`), or
    ``None`` when the path's hidden nodes are another path's too (a branch)."""


def _str_or_none(value: Any) -> str | None:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _text_parts(content: dict[str, Any]) -> tuple[str, list[dict[str, Any]] | None]:
    """The text of a ``text``/``multimodal_text`` content, and its parts when not plain."""
    raw_parts = content.get("parts")
    if not isinstance(raw_parts, list):
        text = content.get("text")
        return (text if isinstance(text, str) else ""), None
    if len(raw_parts) == 1 and type(raw_parts[0]) is str:
        return raw_parts[0], None  # the usual case: one plain text part
    texts: list[str] = []
    parts: list[dict[str, Any]] = []
    plain = True
    for part in raw_parts:
        if isinstance(part, str):
            texts.append(part)
            parts.append({"type": "text", "text": part})
            continue
        if not isinstance(part, dict):
            continue
        plain = False
        kind = str(part.get("content_type") or part.get("type") or "unknown")
        kept = {"type": kind, **{k: v for k, v in part.items() if k != "type"}}
        parts.append(kept)
        inner = part.get("text")
        if isinstance(inner, str) and inner:
            texts.append(inner)
        else:
            texts.append(_PLACEHOLDERS.get(kind, f"[{kind.removesuffix('_asset_pointer')}]"))
    text = "\n".join(t for t in texts if t)
    return text, (None if plain else parts)


def _reasoning_text(kind: str, content: dict[str, Any]) -> str:
    if kind == "reasoning_recap":
        recap = content.get("content")
        return recap if isinstance(recap, str) else ""
    pieces: list[str] = []
    thoughts = content.get("thoughts")
    if isinstance(thoughts, list):
        for thought in thoughts:
            if not isinstance(thought, dict):
                continue
            for key in ("summary", "content"):
                value = thought.get(key)
                if isinstance(value, str) and value.strip():
                    pieces.append(value)
    return "\n\n".join(pieces)


def _tool_output_text(kind: str, content: dict[str, Any]) -> str:
    if kind == "tether_browsing_display":
        for key in ("result", "summary"):
            value = content.get(key)
            if isinstance(value, str) and value:
                return value
        return ""
    if kind == "tether_quote":
        pieces = [content.get(key) for key in ("title", "url", "text")]
        return "\n".join(p for p in pieces if isinstance(p, str) and p)
    text, _ = _text_parts(content)
    if not text:
        for key in ("text", "result", "name"):
            value = content.get(key)
            if isinstance(value, str) and value:
                return value
    return text


def _unread_content(kind: str | None, content: dict[str, Any]) -> dict[str, Any] | None:
    """The fields of ``content`` its text does not hold, as a part of its type (``None``
    when there are none)."""
    read = _CONTENT_READ.get(kind or "text", _READ_BY_DEFAULT)
    extra = {k: v for k, v in content.items()
             if k != "content_type" and k not in read and v not in (None, "", [], {})}
    if not extra:
        return None
    return {"type": kind or "unknown", **{k: v for k, v in extra.items() if k != "type"}}


def _with_unread(
    kind: str | None, content: dict[str, Any], text: str,
    parts: list[dict[str, Any]] | None,
) -> tuple[str, list[dict[str, Any]] | None]:
    """``text`` and ``parts`` with the fields of ``content`` they do not hold added as
    a part; a content with nothing but such fields gets a ``[type]`` placeholder text."""
    unread = _unread_content(kind, content)
    if unread is None:
        return text, parts
    base = parts if parts is not None else ([{"type": "text", "text": text}] if text else [])
    return (text or f"[{unread['type']}]"), [*base, unread]


def _message_metadata(raw: dict[str, Any], raw_meta: Any, kind: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if isinstance(raw_meta, dict):
        model = raw_meta.get("model_slug")
        if isinstance(model, str) and model:
            meta["model"] = model
        finish = raw_meta.get("finish_details")
        if isinstance(finish, dict):
            reason = finish.get("type")
            if isinstance(reason, str) and reason not in ("stop", ""):
                meta["finish_reason"] = reason
        aggregate = raw_meta.get("aggregate_result")
        if isinstance(aggregate, dict):
            run = {k: aggregate[k] for k in _EXECUTION_KEYS if aggregate.get(k) not in _EMPTY}
            if run:
                meta["execution"] = run
        # Whole: an attachment's id names its file in the export's ZIP.
        for key, value in raw_meta.items():
            if key not in _BOOKKEEPING_META and value not in _EMPTY and value is not False:
                meta.setdefault(key, value)
    for key in _MESSAGE_EXTRA_KEYS:
        value = raw.get(key)
        if value in _EMPTY or (key == "weight" and value == 1) or (
            key == "channel" and value == "final"
        ) or (key == "update_time" and value == raw.get("create_time")):
            continue
        meta[f"message_{key}"] = value
    author = raw.get("author")
    if isinstance(author, dict):
        if isinstance(author.get("metadata"), dict) and author["metadata"]:
            meta["author_metadata"] = author["metadata"]
        name = author.get("name")
        if isinstance(name, str) and name and author.get("role") != _TOOL:
            meta["author_name"] = name  # (a tool's name is the message's name)
    status = raw.get("status")
    if isinstance(status, str) and status not in ("finished_successfully", ""):
        meta["status"] = status
    if kind not in (None, "text", "multimodal_text"):
        meta["content_type"] = kind
    return meta


def _node_messages(node_id: str, raw: Any, state: _PathState) -> list[Message]:
    """The messages one mapping node contributes to a path (usually one, often none)."""
    if not isinstance(raw, dict):
        return []
    author = raw.get("author")
    author = author if isinstance(author, dict) else {}
    content = raw.get("content")
    content = content if isinstance(content, dict) else {}
    kind = content.get("content_type")
    if not isinstance(kind, str):
        kind = "text" if "parts" in content or "text" in content else None
    raw_meta = raw.get("metadata")
    if isinstance(raw_meta, dict) and raw_meta.get("is_visually_hidden_from_conversation"):
        if state.hidden is not None:
            _keep_hidden(state.hidden, node_id, author.get("role"), kind, content)
        return []
    if kind in _HIDDEN_TYPES:
        if state.hidden is not None:
            _keep_hidden(state.hidden, node_id, author.get("role"), kind, content)
        return []
    if kind in _REASONING_TYPES:
        reasoning = _reasoning_text(kind, content)
        if reasoning:
            state.reasoning.append({"type": "reasoning", "text": reasoning, "source": kind})
        return []

    role = author.get("role")
    created = epoch_time(raw.get("create_time"))
    meta = _message_metadata(raw, raw_meta, kind)
    if role == _TOOL or kind in _TOOL_OUTPUT_TYPES:
        return _tool_message(author, kind, content, created, meta, state, raw_meta)

    text: str
    parts: list[dict[str, Any]] | None
    if kind == "code":
        code = content.get("text")
        text = code if isinstance(code, str) else ""
        parts = [{"type": "code", "language": content.get("language"), "text": text}]
        unread = _unread_content(kind, content)
        if unread is not None:
            parts[0].update((k, v) for k, v in unread.items() if k not in parts[0])
    else:
        text, parts = _text_parts(content)
        text, parts = _with_unread(kind, content, text, parts)

    recipient = raw.get("recipient")
    if role == _ASSISTANT and isinstance(recipient, str) and recipient not in ("", "all"):
        # The assistant addressed a tool: an OpenAI-shaped call that the tool's reply answers.
        call_id = f"call_{node_id}"
        state.last_call = call_id
        message = Message(
            role=_ASSISTANT,
            content="",
            tool_calls=[tool_call(call_id, recipient, _call_arguments(kind, text))],
            parts=parts,
            created_at=created,
            metadata={**meta, "recipient": recipient},
        )
        _take_reasoning(message, state)
        return [message]

    if not isinstance(role, str) or role not in _CHAT_ROLES:
        meta["original_role"] = role
        role = _ASSISTANT
    keeps_reasoning = role == _ASSISTANT and bool(state.reasoning)
    # (``not text or text.isspace()`` is ``not text.strip()`` without copying the text)
    if (not text or text.isspace()) and not parts and not keeps_reasoning:
        return []
    state.last_call = None  # a tool node after this message answers no earlier call
    message = Message(role=str(role), content=text, parts=parts, created_at=created, metadata=meta)
    if keeps_reasoning:
        _take_reasoning(message, state)
    return [message]


def _keep_hidden(
    hidden: dict[str, Any], node_id: str, role: Any, kind: Any, content: dict[str, Any]
) -> None:
    """Keep what a hidden node told the model without showing it in the conversation:
    the custom instructions (``user_editable_context``: ``user_profile``,
    ``user_instructions``) and the model's memory (``model_editable_context``) under
    their content type, the text of any other hidden message under
    ``hidden_messages``. Empty nodes (the usual hidden system message) add nothing."""
    if kind in _HIDDEN_TYPES:
        kept = {k: v for k, v in content.items()
                if k != "content_type" and v not in (None, "", [], {})}
        if kept:
            hidden.setdefault(str(kind), {}).update(kept)
        return
    text = _text_parts(content)[0] if kind in (None, "text", "multimodal_text") else ""
    if text.strip():
        hidden.setdefault("hidden_messages", []).append(
            {"node": node_id, "role": role, "text": text})
    elif kind not in (None, "text", "multimodal_text"):
        # Content of another type (a tool's output the model was shown…): kept whole.
        kept = {k: v for k, v in content.items() if v not in _EMPTY}
        if set(kept) - {"content_type"}:
            hidden.setdefault("hidden_messages", []).append(
                {"node": node_id, "role": role, "content": kept})


def _output_images(raw_meta: Any) -> list[dict[str, Any]]:
    """The images a code-interpreter run displayed (``file-service://`` pointers in
    ``aggregate_result.messages``), as image parts: the text only says
    ``<<ImageDisplayed>>``."""
    if not isinstance(raw_meta, dict):
        return []
    aggregate = raw_meta.get("aggregate_result")
    shown = aggregate.get("messages") if isinstance(aggregate, dict) else None
    images: list[dict[str, Any]] = []
    for item in shown if isinstance(shown, list) else []:
        if not isinstance(item, dict):
            continue
        pointer = item.get("image_url") or item.get("asset_pointer")
        if item.get("message_type") == "image" or (
            isinstance(pointer, str) and pointer.startswith("file-service://")
        ):
            image = {"type": "image_asset_pointer", "asset_pointer": pointer,
                     "source": "execution_output"}
            for key in ("width", "height", "sender", "time"):
                if key in item:
                    image[key] = item[key]
            images.append(image)
    return images


def _tool_message(
    author: dict[str, Any],
    kind: str | None,
    content: dict[str, Any],
    created: datetime | None,
    meta: dict[str, Any],
    state: _PathState,
    raw_meta: Any = None,
) -> list[Message]:
    text = _tool_output_text(kind or "text", content)
    parts = _text_parts(content)[1] if kind == "multimodal_text" else None
    text, parts = _with_unread(kind, content, text, parts)
    images = _output_images(raw_meta)
    if images:
        parts = [*(parts or [{"type": "text", "text": text}]), *images]
    # An empty answer to a call is still its answer (kept, empty); an empty tool node
    # that answers nothing adds nothing.
    if not text and not parts and state.last_call is None:
        return []
    name = author.get("name")
    return [
        Message(
            role=_TOOL,
            content=text,
            name=name if isinstance(name, str) and name else None,
            tool_call_id=state.last_call,
            parts=parts,
            created_at=created,
            metadata=meta,
        )
    ]


def _call_arguments(kind: str | None, text: str) -> str:
    stripped = text.strip()
    if stripped.startswith("{"):
        if isinstance(safe_json(stripped), dict):  # None when not JSON or too deep
            return stripped
    key = "code" if kind == "code" else "input"
    return json.dumps({key: text}, ensure_ascii=False)


def _take_reasoning(message: Message, state: _PathState) -> None:
    if not state.reasoning:
        return
    rest = message.parts
    if rest is None and message.content:
        rest = [{"type": "text", "text": message.content}]
    message.parts = [*state.reasoning, *(rest or [])]
    state.reasoning = []


def _path_messages(
    mapping: dict[str, Any], path: list[str], hidden: dict[str, Any] | None = None
) -> list[Message]:
    state = _PathState(hidden=hidden)
    messages: list[Message] = []
    for node_id in path:
        node = mapping.get(node_id)
        raw = node.get("message") if isinstance(node, dict) else None
        messages.extend(_node_messages(node_id, raw, state))
    if state.reasoning:
        leftover = Message(role=_ASSISTANT, content="")
        _take_reasoning(leftover, state)
        messages.append(leftover)
    return number_positions(messages)


def _tree(mapping: dict[str, Any]) -> MessageTree:
    order: list[str] = []
    parent_of: dict[str, str | None] = {}
    children_of: dict[str, list[str]] = {}
    for key, node in mapping.items():
        if not isinstance(node, dict):
            continue
        order.append(key)
        parent = node.get("parent")
        parent_of[key] = parent if isinstance(parent, str) else None
        children = node.get("children")
        if isinstance(children, list):
            children_of[key] = [c for c in children if isinstance(c, str)]
    return MessageTree(order, parent_of, children_of)


def _node_time(mapping: dict[str, Any], node_id: str) -> float | None:
    node = mapping.get(node_id)
    raw = node.get("message") if isinstance(node, dict) else None
    return epoch_seconds(raw.get("create_time")) if isinstance(raw, dict) else None


# --------------------------------------------------------------------------- conversations


def parse_conversation(item: Any, where: str, fallback_id: str) -> list[ImportItem]:
    """One export entry as its session followed by its branch conversations.

    ``where`` names the entry's position for skip reports (``"item 3"``); ``fallback_id``
    is the source id used when the entry has no id of its own.
    """
    if not isinstance(item, dict):
        return [
            SkippedEntry(
                entry=where, reason=f"A conversation must be an object, not {type_name(item)}."
            )
        ]
    conv_id = _str_or_none(item.get("conversation_id")) or _str_or_none(item.get("id"))
    raw_title = item.get("title")
    label = f"conversation {raw_title!r}" if isinstance(raw_title, str) else "the conversation"
    if conv_id:
        label += f" ({conv_id})"
    mapping = item.get("mapping")
    if not isinstance(mapping, dict) or not mapping:
        problem = "has no 'mapping'" if mapping is None else "has an empty or invalid 'mapping'"
        if item.get("current_node") is None:
            problem += " and no 'current_node'"
        return [
            SkippedEntry(entry=where, reason=sentence(f"{label} {problem}: no messages to import"))
        ]

    tree = _tree(mapping)
    current = item.get("current_node")
    guessed = not (isinstance(current, str) and current in tree.parent_of)
    if guessed:
        current = latest_leaf(tree, lambda node: _node_time(mapping, node))
    if current is None:  # no node of the mapping is an object
        return [
            SkippedEntry(
                entry=where,
                reason=sentence(f"{label} has no node objects in its 'mapping': no messages "
                                "to import"),
            )
        ]
    main_path = tree.path_to(current)
    hidden: dict[str, Any] = {}
    messages = _path_messages(mapping, main_path, hidden)

    source_id = conv_id or fallback_id
    title = title_of(raw_title, messages, f"ChatGPT conversation {source_id}")
    metadata: dict[str, Any] = {"conversation_id": conv_id}
    for key, out in (("default_model_slug", "model"), ("gizmo_id", "gizmo_id")):
        value = item.get(key)
        if value:
            metadata[out] = value
    if item.get("is_archived"):
        metadata["archived"] = True
    # memory_scope, conversation_template_id, is_starred…
    keep_unread(metadata, item, _READ_KEYS, drop_false=True)
    if guessed:
        metadata["current_node_guessed"] = True
    metadata.update(hidden)
    main = Conversation(
        title=title,
        messages=messages,
        source=NAME,
        source_id=source_id,
        created_at=epoch_time(item.get("create_time")),
        updated_at=epoch_time(item.get("update_time")),
        metadata=metadata,
    )
    branches = alternate_branches(
        tree, main_path, lambda path: _path_messages(mapping, path), messages
    )
    return with_branches(main, branches, where)


# --------------------------------------------------------------------------- the format


class ChatGPTImporter(ExportImporter):
    """Reads a ChatGPT data export: ``conversations.json``, the ZIP, or split files."""

    name = NAME
    description = "ChatGPT data export: conversations.json, the export ZIP, or split files"

    def looks_like(self, head: bytes) -> bool:
        """A ChatGPT conversations array, or a ZIP or folder whose conversations file is."""
        return looks_like_chatgpt(head)

    def read(self, path: Path) -> Iterator[ImportItem]:
        """Sessions and branch conversations of ``path``, one entry at a time."""
        path = Path(path)
        documents = export_documents(path, "a ChatGPT export")
        return primed(self._read_documents(path, documents))

    def _read_documents(self, path: Path, documents: list[ExportDocument]) -> Iterator[ImportItem]:
        seen: dict[str, dict[int, str]] = {}
        started = False
        for document in documents:
            for item in guarded(
                self._read_document(path, document, seen),
                document.entry_prefix,
                fatal_at_start=not started,
            ):
                started = True
                yield item

    def _read_document(
        self, path: Path, document: ExportDocument, seen: dict[str, dict[int, str]]
    ) -> Iterator[ImportItem]:
        items = document_entries(document, path)
        stem = Path(document.label.rsplit(":", 1)[-1]).name
        yield from first_copies(items, parse_conversation, document.entry_prefix, stem,
                                "Conversation", seen)
