"""Reading JSON that may be hostile: one bad entry costs only itself.

Every importer reads its files through here, so the same guarantees hold for every format:

- **Files are read in chunks** (:class:`JsonStream`): a JSON array is decoded one element
  at a time with the C decoder, and only the element in hand (plus one chunk) is held as
  text, so a large export never exists in memory as a whole. A file that breaks off (a
  truncated download, an export killed mid-write) keeps the complete elements before the
  break; the break is reported with its line and column.
- **Nesting is bounded**: an entry nested more than :data:`MAX_NESTING` arrays or objects
  deep is skipped and reported (the decoder's own limit would otherwise abort the whole
  file, and the converters, the store and the exporters all walk values recursively).
- **Text is valid Unicode**: a lone UTF-16 surrogate (``"\\ud800"`` in JSON, which Python
  decodes but UTF-8 cannot encode) or an invalid UTF-8 byte is replaced with U+FFFD in
  that entry, and an :class:`~workbench.core.conversation.ImportNote` says where.

Notes travel beside the entries rather than among them: while
:func:`~workbench.formats.detect.read_conversations` pulls an item from an importer, a
:class:`NoteSink` is active on that thread, and :func:`add_note` adds to it; the notes
are handed out just before the item they concern.
"""

from __future__ import annotations

import codecs
import gc
import json
import re
import threading
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import compress
from pathlib import Path
from typing import IO, Any

from workbench.core.conversation import Conversation, ImportNote, SkippedEntry
from workbench.errors import FormatError, InvalidEntryError

MAX_NESTING = 100
"""How many arrays or objects deep one entry may nest (the entry's own object counts)."""

CHUNK_BYTES = 1 << 20
"""How many bytes :class:`JsonStream` reads at a time (more when one element is larger)."""

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
# A surrogate escape in JSON text: where a lone surrogate can come from in a decoded
# value (paired escapes decode to one character, so this over-approximates).
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")
# What :func:`_skip_value` jumps between: a string's opening quote, a run of openers, a
# run of closers.
_STRUCTURE = re.compile(r'"|[\[{]+|[\]}]+')
_STRING_REST = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
# How close to the end of the text a decoding error may be and still mean "cut off here".
_CUT_MARGIN = 16


# --------------------------------------------------------------------------- notes


class NoteSink:
    """Collects the notes made while an importer produces its next item."""

    def __init__(self) -> None:
        self.notes: list[ImportNote] = []
        self.unclean_text = False
        """Set by a source that let invalid text through (an SQLite column that is not
        UTF-8): the conversations read after it are checked and repaired whole."""

    @contextmanager
    def active(self) -> Iterator[NoteSink]:
        """Make this the sink that :func:`add_note` adds to on this thread."""
        self.push()
        try:
            yield self
        finally:
            self.pop()

    def push(self) -> None:
        """Make this the active sink until :meth:`pop` (as :meth:`active` does)."""
        _sinks.stack.append(self)

    def pop(self) -> None:
        """Undo :meth:`push`."""
        _sinks.stack.pop()

    def drain(self) -> list[ImportNote]:
        """The notes collected so far, removed from the sink."""
        notes, self.notes = self.notes, []
        return notes


class _Sinks(threading.local):
    def __init__(self) -> None:
        self.stack: list[NoteSink] = []


_sinks = _Sinks()


def add_note(entry: str, note: str) -> None:
    """Record a note about ``entry`` in the active sink (nothing when none is active)."""
    if _sinks.stack:
        _sinks.stack[-1].notes.append(ImportNote(entry=entry, note=note))


def flag_unclean_text() -> None:
    """Tell the active sink that text with invalid characters got through."""
    if _sinks.stack:
        _sinks.stack[-1].unclean_text = True


# --------------------------------------------------------------------------- repairs


def _describe(char: str, from_bytes: bool) -> str:
    code = ord(char)
    if from_bytes and 0xDC80 <= code <= 0xDCFF:
        return f"the invalid UTF-8 byte 0x{code - 0xDC00:02X}"
    return f"the lone UTF-16 surrogate \\u{code:04x}"


class _Repairs:
    """What :func:`repair_text` replaced, by place."""

    def __init__(self, from_bytes: bool) -> None:
        self.from_bytes = from_bytes
        self.places: list[tuple[str, str]] = []
        self.count = 0

    def text(self, value: str, where: str) -> str:
        found = _SURROGATE.findall(value)
        if not found:
            return value
        self.count += len(found)
        self.places.append((where or "the entry", _describe(found[0], self.from_bytes)))
        return _SURROGATE.sub("\ufffd", value)

    def value(self, value: Any, where: str) -> Any:
        if isinstance(value, str):
            return self.text(value, where)
        if isinstance(value, list):
            for i, item in enumerate(value):
                value[i] = self.value(item, f"{where}[{i}]")
            return value
        if isinstance(value, dict):
            if any(isinstance(k, str) and _SURROGATE.search(k) for k in value):
                items = [(self.text(k, f"{where} key") if isinstance(k, str) else k, v)
                         for k, v in value.items()]
                value.clear()
                value.update(items)
            for key, item in value.items():
                value[key] = self.value(item, f"{where}.{key}" if where else str(key))
            return value
        return value

    def sentence(self) -> str:
        shown = "; ".join(f"{what} in {place}" for place, what in self.places[:3])
        more = len(self.places) - 3
        if more > 0:
            shown += f"; and in {more} more place{'s' if more > 1 else ''}"
        chars = "character" if self.count == 1 else "characters"
        return f"Replaced {self.count} {chars} that UTF-8 cannot hold with U+FFFD: {shown}."


def repair_value(value: Any, entry: str, *, from_bytes: bool = False) -> Any:
    """``value`` with every lone surrogate replaced by U+FFFD (in place where possible),
    noted under ``entry`` when anything was replaced."""
    repairs = _Repairs(from_bytes)
    value = repairs.value(value, "")
    if repairs.count:
        add_note(entry, repairs.sentence())
    return value


def repair_conversation(conversation: Conversation, entry: str) -> bool:
    """Replace lone surrogates in every text of ``conversation``; True when any was.

    For sources that hand over text without checking it (see :func:`flag_unclean_text`).
    """
    repairs = _Repairs(from_bytes=True)
    conversation.title = repairs.text(conversation.title, "title")
    conversation.tags = repairs.value(conversation.tags, "tags")
    conversation.metadata = repairs.value(conversation.metadata, "metadata")
    if conversation.source_id is not None:
        conversation.source_id = repairs.text(conversation.source_id, "source id")
    for i, m in enumerate(conversation.messages):
        where = f"messages[{i}]"
        m.content = repairs.text(m.content, f"{where}.content")
        if m.name is not None:
            m.name = repairs.text(m.name, f"{where}.name")
        if m.tool_call_id is not None:
            m.tool_call_id = repairs.text(m.tool_call_id, f"{where}.tool_call_id")
        m.tool_calls = repairs.value(m.tool_calls, f"{where}.tool_calls")
        m.parts = repairs.value(m.parts, f"{where}.parts")
        m.metadata = repairs.value(m.metadata, f"{where}.metadata")
    context = conversation.context
    context.summary = repairs.text(context.summary, "summary")
    context.facts = repairs.value(context.facts, "facts")
    context.system_state = repairs.value(context.system_state, "system_state")
    context.environment = repairs.value(context.environment, "environment")
    if repairs.count:
        add_note(entry, repairs.sentence())
    return bool(repairs.count)


# --------------------------------------------------------------------------- nesting


_IS_CONTAINER = frozenset({dict, list}).__contains__


def nesting_depth(value: Any, limit: int = MAX_NESTING) -> int:
    """How many arrays and objects deep a decoded JSON value nests (0 for a scalar),
    counted up to one past ``limit``.

    One level at a time, and each level in C: ``gc.get_referents`` gives every key, value
    and item the containers of a level hold, and the containers among them are the next
    level. (A Python loop over every value costs more than decoding does.)
    """
    level = [value] if _IS_CONTAINER(type(value)) else []
    depth = 0
    while level and depth <= limit:
        depth += 1
        held = gc.get_referents(*level)
        level = list(compress(held, map(_IS_CONTAINER, map(type, held))))
    return depth


def too_deep(text: str, start: int, end: int, value: Any) -> bool:
    """Whether ``value`` (decoded from ``text[start:end]``) nests more than
    :data:`MAX_NESTING` deep; a short text answers without a walk."""
    if end - start <= 2 * MAX_NESTING:
        return False  # too short to hold that many brackets
    return nesting_depth(value) > MAX_NESTING


def too_deep_reason(what: str) -> str:
    """The sentence for an entry skipped for its nesting."""
    return (
        f"{what} nests arrays or objects more than {MAX_NESTING} levels deep; "
        "it was skipped."
    )


class TooDeepError(InvalidEntryError):
    """A JSON value nests deeper than :data:`MAX_NESTING` (or than the decoder can)."""


def problem(exc: json.JSONDecodeError) -> str:
    """The decoder's message without a dangling "at" ("Unterminated string starting at")."""
    return exc.msg.removesuffix(" at").removesuffix(":")


def holds_bad_bytes(text: str) -> bool:
    """Whether ``text``, decoded from bytes with ``surrogateescape``, kept bytes that are
    not UTF-8 (as lone surrogates, which valid UTF-8 cannot give)."""
    return not text.isascii() and _SURROGATE.search(text) is not None


def first_bad_byte(text: str) -> int:
    """Where the first byte kept as a lone surrogate is in ``text`` (-1: none)."""
    found = _SURROGATE.search(text)
    return -1 if found is None else found.start()


def decode_value(text: str, entry: str, *, from_bytes: bool = False) -> Any:
    """One whole JSON value (a document or a JSON Lines line), checked and repaired.

    Raises :class:`json.JSONDecodeError` for malformed JSON and :class:`TooDeepError`
    for a value nested too deep; lone surrogates are replaced and noted under ``entry``.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        raise TooDeepError(too_deep_reason("The value")) from None
    if too_deep(text, 0, len(text), value):
        raise TooDeepError(too_deep_reason("The value"))
    if _ESCAPED_SURROGATE.search(text) or (from_bytes and _SURROGATE.search(text)):
        value = repair_value(value, entry, from_bytes=from_bytes)
    return value


def safe_json(text: str, entry: str = "") -> Any:
    """``text`` decoded as JSON, or ``None`` when it is not JSON or nests too deep."""
    try:
        return decode_value(text, entry)
    except (ValueError, TooDeepError):
        return None


# --------------------------------------------------------------------------- streams


class BrokenJsonError(FormatError):
    """The JSON text stopped being valid after ``items_read`` complete elements."""

    def __init__(self, message: str, *, path: str, line: int, items_read: int) -> None:
        super().__init__(message, path=path, entry=f"line {line}")
        self.line = line
        self.items_read = items_read


_TOO_DEEP = object()


class JsonStream:
    """A JSON document read from a binary file in chunks.

    ``label`` names the document in sentences (a path, or ``"export.zip:conversations.json"``)
    and ``path`` is the file the user gave. The text is UTF-8 (a byte-order mark is
    dropped); invalid bytes are kept as lone surrogates and repaired in the entry that
    holds them.
    """

    def __init__(self, handle: IO[bytes], label: str, path: Path) -> None:
        self._handle = handle
        self.label = label
        self.path = path
        self._decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
        self._buf = ""
        self._pos = 0
        self._eof = False
        self._started = False
        self.items_read = 0
        self._from_bytes = False
        self._lines_before = 0  # newlines in the text dropped from the buffer
        self._column_before = 0  # characters after the last of them

    # -- reading

    def _read(self, size: int) -> None:
        try:
            data = self._handle.read(size)
        except (OSError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
            # A damaged disk or archive: what was read so far still counts.
            line, column = self.line_column(len(self._buf))
            raise BrokenJsonError(
                f"{self.label} could not be read past line {line}, column {column}: {exc}.",
                path=str(self.path),
                line=line,
                items_read=self.items_read,
            ) from exc
        if not data:
            self._eof = True
            tail = self._decoder.decode(b"", final=True)
        else:
            tail = self._decoder.decode(data)
        if not self._started:
            self._started = True
            tail = tail.removeprefix("\ufeff")
        if tail and not tail.isascii() and _SURROGATE.search(tail):
            self._from_bytes = True
        if tail:
            self._buf += tail

    def _more(self) -> None:
        """Read at least as much again as is buffered after the current position."""
        self._read(max(CHUNK_BYTES, len(self._buf) - self._pos))

    def _compact(self) -> None:
        pos = self._pos
        if pos < CHUNK_BYTES:
            return
        newlines = self._buf.count("\n", 0, pos)
        if newlines:
            self._lines_before += newlines
            self._column_before = pos - (self._buf.rfind("\n", 0, pos) + 1)
        else:
            self._column_before += pos
        self._buf = self._buf[pos:]
        self._pos = 0

    def _skip_ws(self) -> str:
        """Move past whitespace; the next character, or ``""`` at the end of the text."""
        while True:
            self._pos = _WS.match(self._buf, self._pos).end()  # type: ignore[union-attr]
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            if self._eof:
                return ""
            self._more()

    def line_column(self, pos: int) -> tuple[int, int]:
        """1-based line and column of buffer offset ``pos`` in the whole document."""
        buf = self._buf
        line = self._lines_before + buf.count("\n", 0, pos) + 1
        last = buf.rfind("\n", 0, pos)
        column = pos - last if last >= 0 else self._column_before + pos + 1
        return line, column

    def first_char(self) -> str:
        """The document's first character that is not whitespace (``""`` when empty)."""
        if not self._started:
            self._read(CHUNK_BYTES)
        return self._skip_ws()

    # -- whole documents

    def document(self, entry: str) -> Any:
        """The whole document as one value; an entry nested too deep yields
        :class:`SkippedEntry` instead. Malformed JSON raises ``FormatError``."""
        while not self._eof:
            self._more()
        text = self._buf
        try:
            return decode_value(text, entry, from_bytes=self._from_bytes)
        except json.JSONDecodeError as exc:
            raise FormatError(
                f"{self.label} is not valid JSON: {problem(exc)} at line {exc.lineno}, "
                f"column {exc.colno}.",
                path=str(self.path),
                entry=f"line {exc.lineno}",
            ) from exc
        except TooDeepError:
            return SkippedEntry(entry=entry, reason=too_deep_reason("The document"))

    # -- arrays

    def elements(self, entry_prefix: str = "") -> Iterator[Any]:
        """The elements of a JSON array, decoded one at a time.

        An element nested too deep is yielded as a :class:`SkippedEntry` in its place
        (so counting what is yielded still gives each element's index). Text that stops
        being valid raises :class:`BrokenJsonError` naming the line and column and how
        many elements were read before it.
        """
        char = self.first_char()
        if char == "":
            raise FormatError(f"{self.label} is empty.", path=str(self.path))
        if char != "[":
            raise FormatError(f"{self.label} does not hold a JSON array.", path=str(self.path))
        self._pos += 1
        count = 0
        char = self._skip_ws()
        if char == "]":
            self._pos += 1
            self._check_end(count)
            return
        while True:
            self._compact()
            start = self._pos
            value, end = self._element(start, count)
            where = f"{entry_prefix}item {count}"
            if value is _TOO_DEEP or too_deep(self._buf, start, end, value):
                value = SkippedEntry(entry=where, reason=too_deep_reason(f"Item {count}"))
            elif _ESCAPED_SURROGATE.search(self._buf, start, end) or (
                self._from_bytes and _SURROGATE.search(self._buf, start, end)
            ):
                value = repair_value(value, where, from_bytes=self._from_bytes)
            self._pos = end
            count += 1
            self.items_read = count
            yield value
            char = self._skip_ws()
            if char == ",":
                self._pos += 1
                self._skip_ws()
                continue
            if char == "]":
                self._pos += 1
                self._check_end(count)
                return
            what = "the text ended" if char == "" else "expected ',' or ']'"
            raise self._broken(what, self._pos, count)

    def _element(self, start: int, count: int) -> tuple[Any, int]:
        while True:
            buf = self._buf
            try:
                value, end = _DECODER.raw_decode(buf, start)
            except json.JSONDecodeError as exc:
                cut = exc.msg.startswith("Unterminated string") or exc.pos >= len(buf) - _CUT_MARGIN
                if cut and not self._eof:
                    self._more()
                    continue
                raise self._broken(problem(exc), exc.pos, count) from exc
            except RecursionError:
                return _TOO_DEEP, self._skip_value(start, count)
            if end >= len(buf) and not self._eof:
                self._more()  # a number at the end of the buffer may go on
                continue
            return value, end

    def _skip_value(self, start: int, count: int) -> int:
        """The end of the array or object starting at ``start``, found without decoding
        it (it nests too deep for the decoder)."""
        depth = 0
        pos = start
        while True:
            match = _STRUCTURE.search(self._buf, pos)
            if match is None:
                if self._eof:
                    raise self._broken("the text ended", len(self._buf), count)
                self._more()
                continue
            run = match.group()
            if run == '"':
                rest = _STRING_REST.match(self._buf, match.end())
                if rest is None:
                    if self._eof:
                        raise self._broken("the text ended", len(self._buf), count)
                    self._more()
                    continue
                pos = rest.end()
            elif run[0] in "[{":
                depth += len(run)
                pos = match.end()
            elif len(run) >= depth:
                return match.start() + depth
            else:
                depth -= len(run)
                pos = match.end()

    def _check_end(self, count: int) -> None:
        if self._skip_ws() != "":
            raise self._broken("extra data after the array", self._pos, count)

    def _broken(self, what: str, pos: int, count: int) -> BrokenJsonError:
        line, column = self.line_column(pos)
        return BrokenJsonError(
            f"{self.label} is not valid JSON: {what} at line {line}, column {column}.",
            path=str(self.path),
            line=line,
            items_read=count,
        )


def cannot_read(path: Path, exc: OSError, label: str | None = None) -> FormatError:
    """The error for a file that could not be read (``label`` names it, else its path)."""
    return FormatError(f"Cannot read {label or path}: {exc.strerror or exc}.", path=str(path))


def open_file(path: Path, label: str | None = None) -> IO[bytes]:
    """``path`` opened for reading; a failure raises ``FormatError`` naming it."""
    try:
        return path.open("rb")
    except OSError as exc:
        raise cannot_read(path, exc, label) from exc


def decode_text(data: bytes, label: str, path: Path) -> str:
    """UTF-8 text of ``data`` (a leading byte-order mark dropped); ``label`` names it."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FormatError(
            f"{label} is not UTF-8 text (bad byte at offset {exc.start}).", path=str(path)
        ) from exc


def stream_entries(
    handle: IO[bytes], label: str, path: Path, entry_prefix: str = ""
) -> Iterator[Any]:
    """The entries of a JSON document: the elements of an array, or the document itself
    when it is an object. Closes ``handle`` when done.

    Entries that cannot be read are yielded as :class:`SkippedEntry` in their place;
    see :meth:`JsonStream.elements` for broken text.
    """
    with handle:
        stream = JsonStream(handle, label, path)
        char = stream.first_char()
        if char == "[":
            yield from stream.elements(entry_prefix)
        elif char == "":
            raise FormatError(f"{label} is empty.", path=str(path))
        else:
            yield stream.document(f"{entry_prefix}item 0")
