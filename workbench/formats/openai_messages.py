"""OpenAI chat messages: a JSON array of messages, conversations of them, or JSONL.

Shapes read:

- a JSON array of messages (``{"role", "content", ...}``): one conversation;
- a JSON array of objects each holding a ``messages`` (or tau-bench's ``traj``) list:
  one conversation each; the object's other keys (``task_id``, ``reward``, ``info``,
  ``trial``, ``tools``, …) go into the conversation's metadata;
- a JSON object with a ``messages`` list: one conversation;
- JSON Lines with one such object per line.

``content`` may be a string, ``null`` or a list of content parts; the text parts are
joined into the message text and the list is kept in ``parts``. The export's extension
fields (:data:`EXTENSION_FIELDS`: ``reasoning_content``, ``parts``, ``created_at``,
``model``) are read back into the message. ``developer`` messages
become ``system`` and ``function`` messages become ``tool`` (the original role is kept in
metadata as ``original_role``); keys the workbench has no field for go into metadata.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from pathlib import Path
from typing import Any

from workbench.core.conversation import (
    ROLES,
    Conversation,
    Message,
    Role,
    SessionContext,
    SkippedEntry,
    format_time,
    parse_time,
)
from workbench.errors import FormatError, InvalidEntryError
from workbench.formats._reading import BrokenJsonError, holds_bad_bytes
from workbench.formats._support import (
    file_entries,
    first_char,
    guarded,
    number_positions,
    primed,
    skipped_message,
)
from workbench.formats.base import (
    FORKED_FROM,
    IMPORTED_FROM,
    ExportSession,
    FileImporter,
    ImportItem,
    decode_json_line,
    dump_json,
    fingerprint,
    forked_from_json,
    imported_from,
    peek_json,
    pin_marks_note,
    read_forked_from,
    read_head,
    read_imported_from,
    shorten,
    type_name,
    unforeseen,
    write_atomic,
)

NAME = "openai"
EXPORT_NAME = "openai-jsonl"

_ROLE_ALIASES = {"developer": Role.SYSTEM.value, "function": Role.TOOL.value}
_ACCEPTED_ROLES = (*ROLES, *_ROLE_ALIASES)
_MESSAGE_KEYS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id"})
_LIST_KEYS = ("messages", "traj")
_TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})
# Part types the chat completions and responses APIs accept inside ``content``.
_API_PART_TYPES = frozenset(
    {
        *_TEXT_PART_TYPES,
        "image_url",
        "input_image",
        "input_audio",
        "input_file",
        "file",
        "refusal",
    }
)


# --------------------------------------------------------------------------- parsing


def _content(value: Any, where: str) -> tuple[str, list[dict[str, Any]] | None]:
    if value is None:
        return "", None
    if isinstance(value, str):
        return value, None
    if not isinstance(value, list):
        raise InvalidEntryError(
            f"{where}content must be a string, null or a list of parts, not {type_name(value)}"
        )
    parts: list[dict[str, Any]] = []
    texts: list[str] = []
    for i, part in enumerate(value):
        if isinstance(part, str):
            part = {"type": "text", "text": part}
        if not isinstance(part, dict):
            raise InvalidEntryError(f"{where}content[{i}] must be an object, not {type_name(part)}")
        kind = part.get("type")
        if (isinstance(kind, str) and kind in _TEXT_PART_TYPES) or (
            kind is None and "text" in part
        ):
            text = part.get("text")
            if not isinstance(text, str):
                raise InvalidEntryError(
                    f"{where}content[{i}].text must be a string, not {type_name(text)}"
                )
            texts.append(text)
        parts.append(part)
    return "\n".join(texts), parts


def _optional_str(raw: dict[str, Any], key: str, where: str) -> str | None:
    value = raw.get(key)
    if value is None or isinstance(value, str):
        return value
    raise InvalidEntryError(f"{where}{key} must be a string, not {type_name(value)}")


def parse_message(raw: Any, where: str = "") -> Message:
    """One OpenAI message as a workbench message; raises :class:`InvalidEntryError`.

    ``where`` prefixes error sentences (``"messages[4]: "``).
    """
    if not isinstance(raw, dict):
        raise InvalidEntryError(f"{where}a message must be an object, not {type_name(raw)}")
    role = raw.get("role")
    if role is None:
        raise InvalidEntryError(f"{where}role is missing")
    if role not in _ACCEPTED_ROLES:
        raise InvalidEntryError(f"{where}role {role!r} is not one of {', '.join(_ACCEPTED_ROLES)}")
    metadata: dict[str, Any] = {}
    if role in _ROLE_ALIASES:
        metadata["original_role"] = role
        role = _ROLE_ALIASES[role]
    content, parts = _content(raw.get("content"), where)
    tool_calls = raw.get("tool_calls")
    if tool_calls is not None:
        if not isinstance(tool_calls, list):
            raise InvalidEntryError(
                f"{where}tool_calls must be a list, not {type_name(tool_calls)}"
            )
        for i, call in enumerate(tool_calls):
            if not isinstance(call, dict):
                raise InvalidEntryError(
                    f"{where}tool_calls[{i}] must be an object, not {type_name(call)}"
                )
    created_at = None
    reasoning = raw.get("reasoning_content")
    extension_parts = raw.get("parts")
    for key, value in raw.items():
        # ``refusal: null`` and the like say nothing; keep only keys with a value.
        if key in _MESSAGE_KEYS or value is None:
            continue
        if key == "created_at" and isinstance(value, str):
            try:
                created_at = parse_time(value)
                continue
            except ValueError:
                pass
        if key == "reasoning_content" and isinstance(value, str):
            continue
        if key == "parts" and parts is None and _part_list(value):
            continue
        metadata.setdefault(key, value)
    if parts is None and isinstance(extension_parts, list) and _part_list(extension_parts):
        parts = list(extension_parts)
    if isinstance(reasoning, str) and not any(
        isinstance(p, dict) and p.get("type") == "reasoning" for p in parts or []
    ):
        parts = [{"type": "reasoning", "text": reasoning}, *(parts or [])]
    return Message(
        role=str(role),
        content=content,
        name=_optional_str(raw, "name", where),
        tool_calls=tool_calls,
        tool_call_id=_optional_str(raw, "tool_call_id", where),
        parts=parts,
        created_at=created_at,
        metadata=metadata,
    )


def _part_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(p, dict) for p in value)


def _list_key(item: dict[str, Any]) -> str | None:
    for key in _LIST_KEYS:
        if isinstance(item.get(key), list):
            return key
    return None


def _title(item: dict[str, Any], messages: Sequence[Message], fallback: str) -> str:
    title = item.get("title")
    if isinstance(title, str) and title.strip():
        return title
    task_id = item.get("task_id")
    if task_id is not None:
        trial = item.get("trial")
        return f"task {task_id}" if trial is None else f"task {task_id}, trial {trial}"
    for message in messages:
        if message.role == Role.USER.value and message.content.strip():
            return shorten(message.content)
    return fallback


def _source_id(messages: Sequence[Message]) -> str:
    # OpenAI-format files carry no conversation ids (tau-bench's task ids repeat across
    # runs and domains), so a conversation is recognised by its content.
    return fingerprint(messages)


def parse_conversation(
    item: Any, file_name: str, index: int, where: str = ""
) -> list[ImportItem]:
    """An object holding a ``messages`` (or ``traj``) list as a conversation, preceded
    by its skipped messages if any.

    A message that is not valid costs only itself: it is reported as skipped at
    ``where`` (``"line 3"``, ``"item 2"``) with its place in the list, and the
    conversation keeps the others. Raises :class:`InvalidEntryError` when the object
    itself is not a conversation; ``index`` is the 0-based place of the item in its file.
    """
    if not isinstance(item, dict):
        raise InvalidEntryError(
            f"a conversation must be an object with a 'messages' list, not {type_name(item)}"
        )
    key = _list_key(item)
    if key is None:
        raise InvalidEntryError("the object has no 'messages' (or 'traj') list")
    messages: list[Message] = []
    bad: list[tuple[int, InvalidEntryError]] = []
    for i, raw in enumerate(item[key]):
        try:
            messages.append(parse_message(raw))
        except InvalidEntryError as exc:
            bad.append((i, exc))
    number_positions(messages)
    fallback = f"{file_name}#{index}"
    metadata = {k: v for k, v in item.items() if k != key and k != "title"}
    times = {}
    for time_key in ("created_at", "updated_at"):
        # The export's session times (ISO text); anything else stays metadata.
        value = metadata.get(time_key)
        if isinstance(value, str):
            try:
                times[time_key] = parse_time(value)
                del metadata[time_key]
            except ValueError:
                pass
    forked_from = read_forked_from(metadata)
    source, source_id = read_imported_from(metadata) or (NAME, _source_id(messages))
    title = _title(item, messages, fallback)
    results: list[ImportItem] = [
        skipped_message(f"{where} {key}[{i}]".strip(), f"conversation {title!r}",
                        f"message {i}", exc)
        for i, exc in bad
    ]
    results.append(Conversation(
        title=title,
        messages=messages,
        source=source,
        source_id=source_id,
        created_at=times.get("created_at"),
        updated_at=times.get("updated_at"),
        metadata=metadata,
        forked_from=forked_from,
    ))
    return results


# --------------------------------------------------------------------------- detection


def _holds_messages(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    for key in _LIST_KEYS:
        items = value.get(key)
        if isinstance(items, list):
            # An empty (or cut-off) list cannot be checked further; a first element can.
            return not items or (isinstance(items[0], dict) and "role" in items[0])
    return False


def looks_like_openai(value: Any) -> bool:
    """Whether a (possibly cut-off) JSON value has one of the OpenAI shapes."""
    if isinstance(value, list):
        if not value or not isinstance(value[0], dict):
            return False
        first = value[0]
        return _holds_messages(first) or (
            "role" in first and isinstance(first.get("role"), str | None)
        )
    return _holds_messages(value)


def _whole_value(line: str) -> bool:
    """Whether ``line`` is one whole JSON value (a bad first entry still starts JSONL; the
    first line of a pretty-printed document is no whole value)."""
    try:
        json.loads(line)
    except RecursionError:
        return True  # whole, only nested too deep: reported when the line is read
    except ValueError:
        return False
    return True


def _probe_jsonl(path: Path) -> bool:
    """Whether ``path`` is JSON Lines: a first line that is one whole JSON value, and more
    lines after it (which one JSON document could not have)."""
    probed = 0
    try:
        with path.open("rb") as handle:
            for raw in handle:
                line = raw.decode("utf-8", errors="replace").strip().lstrip("\ufeff")
                if not line:
                    continue
                if probed == 0 and not _whole_value(line):
                    return False
                probed += 1
                if probed > 1:
                    return True
    except OSError as exc:
        raise FormatError(f"Cannot read {path}: {exc.strerror or exc}.", path=str(path)) from exc
    return False


# --------------------------------------------------------------------------- the format


class OpenAIMessagesImporter(FileImporter):
    """Reads OpenAI chat messages (JSON or JSONL), tau-bench trajectories included."""

    name = NAME
    reads = "JSON or JSONL"
    description = 'OpenAI chat messages: a JSON array, {"messages": [...]} items, or JSONL'

    def looks_like(self, head: bytes) -> bool:
        """An array of messages, or objects with a ``messages``/``traj`` list of them."""
        return looks_like_openai(peek_json(head))

    def read_file(self, path: Path) -> Iterator[ImportItem]:
        """Conversations of ``path``; bad lines or items are yielded as skipped."""
        if _probe_jsonl(path):
            return self._read_jsonl(path)
        if first_char(read_head(path).decode("utf-8", errors="replace").lstrip("\ufeff")) == "[":
            return primed(guarded(self._read_array(path, file_entries(path))))
        (data,) = file_entries(path)  # one object: the document, or why it was skipped
        if isinstance(data, SkippedEntry):
            return iter([data])
        if isinstance(data, dict) and _list_key(data) is not None:
            return self._read_conversations(path, [data])
        raise FormatError(
            f"{path} holds {type_name(data)} that is neither a list of messages nor an "
            "object with a 'messages' list.",
            path=str(path),
        )

    def _read_array(self, path: Path, items: Iterator[Any]) -> Iterator[ImportItem]:
        """A JSON array read element by element: conversations when its first object
        with a ``messages`` (or ``traj``) list or a ``role`` has the list, otherwise one
        conversation of messages. (Elements before that one are held until it comes.)"""
        first: list[Any] = []
        conversations = False
        for item in items:
            first.append(item)
            if isinstance(item, dict) and (_list_key(item) is not None or "role" in item):
                conversations = _list_key(item) is not None
                break
        rest = chain(first, items)
        if conversations:
            return self._read_conversations(path, rest)
        return self._read_messages(path, rest)

    def _read_conversations(self, path: Path, data: Iterable[Any]) -> Iterator[ImportItem]:
        for i, item in enumerate(data):
            if isinstance(item, SkippedEntry):  # unreadable: reported in its place
                yield item
                continue
            where = f"item {i}"
            try:
                results = parse_conversation(item, path.name, i, where)
            except InvalidEntryError as exc:
                yield SkippedEntry(entry=where, reason=_sentence(exc))
                continue
            except Exception as exc:  # one entry's unforeseen fault costs that entry only
                yield unforeseen(where, exc)
                continue
            yield from results

    def _read_messages(self, path: Path, data: Iterable[Any]) -> Iterator[ImportItem]:
        messages: list[Message] = []
        broken: BrokenJsonError | None = None
        try:
            for i, raw in enumerate(data):
                if isinstance(raw, SkippedEntry):  # unreadable: reported in its place
                    yield raw
                    continue
                try:
                    messages.append(parse_message(raw))
                except InvalidEntryError as exc:
                    yield skipped_message(f"item {i}", f"file {path.name}", f"message {i}", exc)
                except Exception as exc:  # one entry's unforeseen fault costs it only
                    yield unforeseen(f"item {i}", exc)
        except BrokenJsonError as exc:
            # The messages before the break are the conversation; the break is reported.
            if not messages:
                raise
            broken = exc
        if messages:
            yield self._messages_conversation(path, messages)
        if broken is not None:
            raise broken

    def _messages_conversation(self, path: Path, messages: list[Message]) -> Conversation:
        for position, message in enumerate(messages):
            message.position = position
        return Conversation(
            title=_title({}, messages, path.stem),
            messages=messages,
            source=NAME,
            source_id=_source_id(messages),
        )

    def _read_jsonl(self, path: Path) -> Iterator[ImportItem]:
        try:
            with path.open("rb") as handle:
                for number, raw in enumerate(handle, start=1):
                    yield from self._jsonl_line(path, number, raw)
        except OSError as exc:
            raise FormatError(
                f"Cannot read {path}: {exc.strerror or exc}.", path=str(path)
            ) from exc

    def _jsonl_line(self, path: Path, number: int, raw: bytes) -> list[ImportItem]:
        where = f"line {number}"
        # Bytes that are not UTF-8 are replaced (and noted) in the entry, as in a JSON
        # array, rather than the whole line refused.
        line = raw.decode("utf-8", "surrogateescape").lstrip("\ufeff").strip()
        if not line:
            return []
        try:
            value = decode_json_line(line, where, from_bytes=holds_bad_bytes(line))
            return parse_conversation(value, path.name, number - 1, where)
        except (ValueError, InvalidEntryError) as exc:
            return [SkippedEntry(entry=where, reason=_sentence(exc))]
        except Exception as exc:  # one line's unforeseen fault costs that line only
            return [unforeseen(where, exc)]


def _sentence(exc: Exception) -> str:
    text = str(exc)
    return text if text.endswith(".") else text + "."


# --------------------------------------------------------------------------- exporting


def _api_parts(message: Message) -> list[dict[str, Any]] | None:
    """The content parts to write instead of the text, when they still match it."""
    parts = message.parts
    if not parts or not all(
        isinstance(p, dict) and p.get("type") in _API_PART_TYPES for p in parts
    ):
        return None
    text = "\n".join(p.get("text", "") for p in parts if p.get("type") in _TEXT_PART_TYPES)
    # Edited text wins over the stale parts it came from.
    return parts if text == message.content else None


def message_json(message: Message) -> dict[str, Any]:
    """A message in OpenAI chat form, with only the keys that are set, and the
    extension fields (see :data:`EXTENSION_FIELDS`) for what the chat form cannot hold."""
    role = message.role
    original = message.metadata.get("original_role")
    if original in _ROLE_ALIASES and _ROLE_ALIASES[original] == role:
        role = original
    out: dict[str, Any] = {"role": role}
    parts = _api_parts(message)
    if parts is not None:
        out["content"] = parts
    elif not message.content and message.tool_calls:
        out["content"] = None
    else:
        out["content"] = message.content
    if message.name is not None:
        out["name"] = message.name
    if message.tool_calls is not None:
        out["tool_calls"] = message.tool_calls
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    reasoning = [
        p.get("text") for p in message.parts or []
        if isinstance(p, dict) and p.get("type") == "reasoning" and isinstance(p.get("text"), str)
    ]
    if reasoning:
        out["reasoning_content"] = "\n\n".join(t for t in reasoning if t)
    if parts is None and message.parts and not _reasoning_only(message.parts):
        out["parts"] = message.parts
    if message.created_at is not None:
        out["created_at"] = format_time(message.created_at)
    model = message.metadata.get("model")
    if isinstance(model, str) and model:
        out["model"] = model
    return out


EXTENSION_FIELDS = {
    "reasoning_content": "the message's reasoning text (the field DeepSeek, vLLM and "
    "llama.cpp use for it)",
    "parts": "the message's structured parts (code, images, files, reasoning) when they "
    "are not the chat API's content parts",
    "created_at": "the message's time, ISO 8601 in UTC",
    "model": "the model that wrote the message",
}
"""Keys the openai-jsonl export adds to a chat message beside the API's own; the
importer reads each back. A chat API that does not know them ignores them or needs
them removed first."""


def _reasoning_only(parts: Sequence[Any]) -> bool:
    return all(isinstance(p, dict) and p.get("type") == "reasoning" and set(p) <= {
        "type", "text"} for p in parts)


def cannot_hold(sessions: Sequence[ExportSession]) -> list[str]:
    """What an openai-jsonl export leaves out of ``sessions`` (one sentence each)."""
    notes: list[str] = []
    messages = [m for s in sessions for m in s.messages]
    out_of_view = sum(1 for m in messages if m.state != "active")
    if out_of_view:
        notes.append(
            f"the state of {out_of_view} folded or evicted message(s) (written as ordinary "
            "messages)"
        )
    important = sum(1 for m in messages if m.important)
    if important:
        notes.append(f"the important mark of {important} message(s)")
    with_meta = sum(1 for m in messages if set(m.metadata) - {"model", "original_role"})
    if with_meta:
        notes.append(f"the metadata of {with_meta} message(s) (model names are kept)")
    with_context = sum(1 for s in sessions if s.context != SessionContext())
    if with_context:
        notes.append(
            f"the context (facts, summary, tasks, tool stats, usage) of {with_context} "
            "session(s)"
        )
    tagged = sum(1 for s in sessions if s.info.tags)
    if tagged:
        notes.append(f"the tags of {tagged} session(s)")
    return notes + pin_marks_note(sessions)


class OpenAIJsonlExporter:
    """Writes one ``{"messages": [...]}`` line per session."""

    name = EXPORT_NAME
    suffix = ".jsonl"

    def cannot_hold(self, sessions: Sequence[ExportSession]) -> list[str]:
        """What this format leaves out of ``sessions``."""
        return cannot_hold(sessions)

    def render(self, sessions: Sequence[ExportSession]) -> str:
        """``sessions`` as the text :meth:`write` puts in the file: one JSON object a
        line."""
        return "".join(dump_json(session_line(s), indent=None) + "\n" for s in sessions)

    def write(self, sessions: Sequence[ExportSession], path: Path) -> None:
        """Write ``sessions`` to ``path`` atomically, one JSON object per line."""
        write_atomic(Path(path), self.render(sessions))


def session_line(session: ExportSession) -> dict[str, Any]:
    """One session as a JSONL object: ``messages``, ``title``, its times, ``imported_from``
    (``{"source", "source_id"}``) for a session imported from another format or made in
    the workbench, ``forked_from`` (``{"source", "source_id", "position"}``) for a fork, and the
    keys of the session's metadata beside them (as tau-bench writes ``task_id``,
    ``reward``, ``info``), which the importer reads back into the metadata."""
    line: dict[str, Any] = {"messages": [message_json(m) for m in session.messages]}
    line["title"] = session.info.title
    if session.metadata.get("time_missing") is not True:
        line["created_at"] = format_time(session.info.created_at)
        line["updated_at"] = format_time(session.info.updated_at)
    origin = imported_from(session.info.source, session.info.source_id, NAME)
    if origin is not None:
        line[IMPORTED_FROM] = origin
    fork = forked_from_json(session.forked_from)
    if fork is not None:
        line[FORKED_FROM] = fork
    for key, value in session.metadata.items():
        if key not in line and key not in _LIST_KEYS:
            line[key] = value
    return line
