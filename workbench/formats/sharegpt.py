"""ShareGPT-style datasets: ``{"conversations": [{"from", "value"}, ...]}`` entries.

Read as a JSON array of entries, one entry object, or JSON Lines (one entry a line).
Turns may also be written ``{"role", "content"}``. Speakers map to roles:

- ``human``, ``user``, ``prompter`` → user; ``gpt``, ``assistant``, ``chatgpt``, ``bing``,
  ``bard``, ``model``, ``bot``, ``ai``, ``claude`` (and other model names listed below)
  → assistant; ``system`` → system;
- ``function_call`` / ``tool_call`` → an assistant message with OpenAI-shaped tool calls
  (the value is ``{"name", "arguments"}`` JSON or a list of them; text that is not such
  JSON stays the assistant's text); ``observation``, ``tool``, ``function``,
  ``function_response``, ``tool_response`` and ``ipython`` → a tool message answering the
  oldest unanswered call.

The original speaker is kept in a message's metadata as ``from`` unless it is one of
``human``, ``user``, ``gpt``, ``assistant`` or ``system``. A turn whose
speaker is unknown is reported as skipped (naming the entry and the turn) and the rest
of the conversation is imported. An empty reply, such as a missing turn in a dataset,
is kept as an empty message with ``metadata["empty"] = True``, so the turn order
stays as the dataset has it. A top-level ``system`` string (LLaMA-Factory's layout)
becomes the first message, and ``tools`` goes into the conversation's metadata.

The source id is the entry's ``id`` when it has one, otherwise a hash of its turns, so
that importing the same dataset again finds the conversations already stored.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workbench.core.conversation import Conversation, Message, Role, SkippedEntry
from workbench.errors import InvalidEntryError
from workbench.formats._reading import holds_bad_bytes, safe_json
from workbench.formats._support import (
    file_entries,
    first_char,
    first_user_title,
    guarded,
    number_positions,
    primed,
    sentence,
    skipped_message,
    tool_call,
)
from workbench.formats.base import (
    FileImporter,
    ImportItem,
    decode_json_line,
    peek_json,
    read_head,
    read_text_keeping_bad_bytes,
    shorten,
    type_name,
    unforeseen,
)

NAME = "sharegpt"

_USER = frozenset({"human", "user", "prompter", "question"})
_ASSISTANT = frozenset(
    {
        "gpt",
        "assistant",
        "chatgpt",
        "bing",
        "bard",
        "model",
        "bot",
        "ai",
        "claude",
        "gpt4",
        "gpt-4",
        "answer",
        "response",
    }
)
_SYSTEM = frozenset({"system"})
_CALL = frozenset({"function_call", "tool_call", "tool_calls"})
_RESULT = frozenset(
    {"observation", "tool", "function", "function_response", "tool_response", "ipython"}
)
_TURN_LISTS = ("conversations", "conversation")
_PLAIN = frozenset({"human", "user", "gpt", "assistant", "system"})
_TURN_KEYS = frozenset({"from", "value", "role", "content"})


def _turn_list(entry: dict[str, Any]) -> list[Any] | None:
    for key in _TURN_LISTS:
        value = entry.get(key)
        if isinstance(value, list):
            return value
    return None


def looks_like_sharegpt(value: Any) -> bool:
    """Whether a (possibly cut-off) JSON value is a ShareGPT entry or a list of them."""
    if isinstance(value, list):
        value = value[0] if value else None
    if not isinstance(value, dict):
        return False
    turns = _turn_list(value)
    if turns is None:
        return False
    if not turns:
        # Cut off at the opening bracket, or an empty conversation: the key decides.
        return True
    first = turns[0]
    return isinstance(first, dict) and (
        "from" in first or ("role" in first and "value" not in first)
    )


class _Reader:
    """Builds one conversation's messages, pairing tool results with calls."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.open_calls: list[tuple[str, str]] = []
        self.calls_made = 0

    def turn(self, raw: Any) -> None:
        if not isinstance(raw, dict):
            raise InvalidEntryError(f"the turn is {type_name(raw)}, not an object")
        speaker = raw.get("from", raw.get("role"))
        value = raw.get("value", raw.get("content"))
        if not isinstance(speaker, str):
            raise InvalidEntryError(f"'from' is {type_name(speaker)}, not a name")
        if value is None:
            value = ""
        if not isinstance(value, str):
            value = json.dumps(value, ensure_ascii=False)
        key = speaker.strip().lower()
        # The speaker is kept only when the role alone would lose it (``bing``, ``observation``…).
        meta: dict[str, Any] = {} if key in _PLAIN else {"from": speaker}
        if not value.strip():
            meta["empty"] = True
        for other, kept in raw.items():
            # A turn's own keys (axolotl's ``weight``: 0 leaves the turn out of training).
            if other not in _TURN_KEYS:
                meta.setdefault(other, kept)
        if key in _USER:
            self.messages.append(Message(role=Role.USER.value, content=value, metadata=meta))
        elif key in _ASSISTANT:
            self.messages.append(Message(role=Role.ASSISTANT.value, content=value, metadata=meta))
        elif key in _SYSTEM:
            self.messages.append(Message(role=Role.SYSTEM.value, content=value, metadata=meta))
        elif key in _CALL:
            self._calls(value, meta)
        elif key in _RESULT:
            call_id, name = self.open_calls.pop(0) if self.open_calls else (None, None)
            self.messages.append(
                Message(
                    role=Role.TOOL.value,
                    content=value,
                    name=name,
                    tool_call_id=call_id,
                    metadata=meta,
                )
            )
        else:
            raise InvalidEntryError(f"speaker {speaker!r} is not one this importer knows")

    def _calls(self, value: str, meta: dict[str, Any]) -> None:
        decoded = safe_json(value)  # None when not JSON (or nested too deep)
        items = decoded if isinstance(decoded, list) else [decoded]
        calls = []
        if all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items) and items:
            for item in items:
                self.calls_made += 1
                call_id = f"call_{self.calls_made}"
                name = item["name"]
                calls.append(
                    tool_call(call_id, name, item.get("arguments", item.get("parameters", {})))
                )
                self.open_calls.append((call_id, calls[-1]["function"]["name"]))
            self.messages.append(
                Message(role=Role.ASSISTANT.value, content="", tool_calls=calls, metadata=meta)
            )
        else:
            self.messages.append(Message(role=Role.ASSISTANT.value, content=value, metadata=meta))


def _hash_id(turns: list[Any]) -> str:
    digest = hashlib.sha256(
        json.dumps(turns, sort_keys=True, ensure_ascii=False).encode("utf-8")
    ).hexdigest()
    return f"sha256:{digest[:24]}"


def parse_entry(entry: Any, where: str) -> list[ImportItem]:
    """One dataset entry as a conversation, preceded by its skipped turns if any."""
    if not isinstance(entry, dict):
        return [
            SkippedEntry(entry=where, reason=f"An entry must be an object, not {type_name(entry)}.")
        ]
    turns = _turn_list(entry)
    if turns is None:
        return [SkippedEntry(entry=where, reason="The entry has no 'conversations' list.")]
    raw_id = entry.get("id")
    has_id = isinstance(raw_id, str | int) and not isinstance(raw_id, bool) and raw_id != ""
    source_id = str(raw_id) if has_id else _hash_id(turns)
    label = f"conversation {source_id}"
    reader = _Reader()
    results: list[ImportItem] = []
    system = entry.get("system")
    if isinstance(system, str) and system.strip():
        reader.messages.append(Message(role=Role.SYSTEM.value, content=system))
    key = next(k for k in _TURN_LISTS if isinstance(entry.get(k), list))
    for index, raw in enumerate(turns):
        try:
            reader.turn(raw)
        except InvalidEntryError as exc:
            results.append(skipped_message(f"{where} {key}[{index}]", label, f"turn {index}", exc))
    messages = number_positions(reader.messages)
    title_value = entry.get("title")
    title = (
        shorten(title_value)
        if isinstance(title_value, str) and title_value.strip()
        else first_user_title(messages, f"ShareGPT conversation {source_id}")
    )
    metadata = {k: v for k, v in entry.items() if k not in (*_TURN_LISTS, "system", "title")}
    tools = metadata.get("tools")
    if isinstance(tools, str):
        decoded = safe_json(tools)
        if decoded is not None:
            metadata["tools"] = decoded
    results.append(
        Conversation(
            title=title, messages=messages, source=NAME, source_id=source_id, metadata=metadata
        )
    )
    return results


def _parsed(entry: Any, where: str) -> list[ImportItem]:
    try:
        return parse_entry(entry, where)
    except Exception as exc:  # one entry's unforeseen fault costs that entry only
        return [unforeseen(where, exc)]


def _unique(items: Iterator[ImportItem]) -> Iterator[ImportItem]:
    """Give repeated source ids a ``~2``, ``~3``… suffix: datasets do hold duplicates."""
    counts: dict[str, int] = {}
    for item in items:
        if isinstance(item, Conversation) and item.source_id is not None:
            seen = counts.get(item.source_id, 0) + 1
            counts[item.source_id] = seen
            if seen > 1:
                item.source_id = f"{item.source_id}~{seen}"
        yield item


class ShareGPTImporter(FileImporter):
    """Reads ShareGPT-style datasets (JSON array, one object, or JSON Lines)."""

    name = NAME
    reads = "JSON or JSONL"
    description = 'ShareGPT-style dataset: {"conversations": [{"from", "value"}]} JSON or JSONL'

    def looks_like(self, head: bytes) -> bool:
        """An entry (or array of entries) with a ``conversations`` list of ``from`` turns."""
        return looks_like_sharegpt(peek_json(head))

    def read_file(self, path: Path) -> Iterator[ImportItem]:
        """Conversations of ``path``; unknown speakers and bad lines are reported."""
        head = read_head(path).decode("utf-8", errors="replace").lstrip("\ufeff")
        # (JSON Lines whose first line is an array is JSON Lines, not one array)
        if first_char(head) == "[" and not self._is_jsonl(head):
            return primed(_unique(guarded(self._items(file_entries(path)))))
        text, bad_bytes = read_text_keeping_bad_bytes(path)
        label = str(path)
        if self._is_jsonl(text):
            return primed(_unique(self._lines(text, bad_bytes)))
        return primed(_unique(self._items(file_entries(path, label))))

    @staticmethod
    def _is_jsonl(text: str) -> bool:
        # Only the first lines are looked at: splitting a large dataset here would copy it.
        lines = [line for line in text.split("\n", 3)[:3] if line.strip()]
        if len(lines) < 2:
            return False
        try:
            json.loads(lines[0])
        except RecursionError:
            return True  # a whole value on its line, only nested too deep: reported later
        except ValueError:
            return False
        return True

    def _items(self, items: Iterator[Any]) -> Iterator[ImportItem]:
        for index, entry in enumerate(items):
            if isinstance(entry, SkippedEntry):  # unreadable: reported in its place
                yield entry
                continue
            yield from _parsed(entry, f"item {index}")

    def _lines(self, text: str, bad_bytes: bool) -> Iterator[ImportItem]:
        # Lines end at "\n" only: splitlines() also splits at U+2028, U+0085 and the
        # like, which JSON text holds unescaped inside its strings.
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            where = f"line {number}"
            try:
                entry = decode_json_line(
                    line, where, from_bytes=bad_bytes and holds_bad_bytes(line)
                )
            except ValueError as exc:
                yield SkippedEntry(entry=where, reason=sentence(str(exc)))
                continue
            yield from _parsed(entry, where)
