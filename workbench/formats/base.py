"""What every import and export format provides, the format registry, and shared helpers.

An importer turns a file (or a directory) into :class:`~workbench.core.conversation.Conversation`
objects; an exporter writes stored sessions into a file. Formats never touch the store: the
engine reads conversations from an importer and stores each one in its own transaction.

Positions inside a file are named the same way in every format: ``"line 7"`` counts lines
from 1 as editors show them, ``"item 3"`` is the 0-based index of an element of a top-level
JSON array, and field paths inside an entry use 0-based brackets (``"messages[4]"``).

Later formats join by calling :func:`register_importer` / :func:`register_exporter`; the
order of registration is the order in which :func:`~workbench.formats.detect.detect_format`
asks importers whether they recognise a file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import secrets
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from workbench.core.conversation import (
    Conversation,
    ForkOrigin,
    ImportNote,
    Message,
    SessionContext,
    SessionInfo,
    SkippedEntry,
)
from workbench.core.schema import json_type
from workbench.errors import FormatError, WorkbenchError
from workbench.formats._reading import (
    TooDeepError,
    cannot_read,
    decode_text,
    decode_value,
    holds_bad_bytes,
    problem,
    too_deep_reason,
)

ImportItem = Conversation | SkippedEntry | ImportNote
"""What an importer yields: a parsed conversation, an entry it had to skip, or a note
about something it changed in an entry it imported (such as a replaced character)."""

HEAD_SIZE = 64 * 1024
"""How many leading bytes of a file :meth:`Importer.sniff` gets to look at."""


@runtime_checkable
class Importer(Protocol):
    """A file format the workbench can read conversations from."""

    name: str
    description: str

    def sniff(self, path: Path, head: bytes) -> bool:
        """Whether ``path`` looks like this format.

        ``head`` holds the first :data:`HEAD_SIZE` bytes of a file (empty for a
        directory). The check must be cheap and must not raise for foreign input.
        """
        ...

    def read(self, path: Path) -> Iterator[ImportItem]:
        """Yield each conversation of ``path`` as it is parsed.

        An entry that cannot be read yields a :class:`SkippedEntry` saying where it is
        and why; the others are still read. A file that cannot be read at all raises
        :class:`~workbench.errors.FormatError` naming the file (and line and column for
        malformed JSON).
        """
        ...


@dataclass
class ExportSession:
    """One stored session as an exporter receives it."""

    info: SessionInfo
    messages: list[Message] = field(default_factory=list)
    context: SessionContext = field(default_factory=SessionContext)
    metadata: dict[str, Any] = field(default_factory=dict)
    """What the session's source said about it as a whole (see ``Conversation.metadata``)."""
    forked_from: ForkOrigin | None = None
    """The session this one was forked from, named as the export names that session."""


@runtime_checkable
class Exporter(Protocol):
    """A file format the workbench can write sessions to."""

    name: str
    suffix: str

    def render(self, sessions: Sequence[ExportSession]) -> str:
        """``sessions`` as the text :meth:`write` puts in the file."""
        ...

    def write(self, sessions: Sequence[ExportSession], path: Path) -> None:
        """Write ``sessions`` to ``path`` atomically; raises ``FormatError`` on failure."""
        ...


# --------------------------------------------------------------------------- registry

_importers: list[Importer] = []
_exporters: list[Exporter] = []


def pin_marks_note(sessions: Sequence[ExportSession]) -> list[str]:
    """The sentence an exporter that does not keep pin and archive marks adds to what it
    cannot hold (none when no session has one): they are the workbench's own marks, and
    a session imported again starts unpinned and in the list."""
    marked = sum(1 for s in sessions if s.info.pinned or s.info.archived)
    return [f"the pin or archive mark of {marked} session(s)"] if marked else []


def register_importer(importer: Importer) -> None:
    """Add an importer; one with the same name is replaced where it stands."""
    _register(_importers, importer)


def register_exporter(exporter: Exporter) -> None:
    """Add an exporter; one with the same name is replaced where it stands."""
    _register(_exporters, exporter)


def _register(registry: list[Any], item: Any) -> None:
    for i, existing in enumerate(registry):
        if existing.name == item.name:
            registry[i] = item
            return
    registry.append(item)


def importers() -> list[Importer]:
    """The registered importers, in the order detection tries them."""
    return list(_importers)


def exporters() -> list[Exporter]:
    """The registered exporters, in registration order."""
    return list(_exporters)


def known_names(items: Sequence[Importer] | Sequence[Exporter]) -> str:
    """``"a, b, c"``: the names of ``items`` for error sentences."""
    return ", ".join(item.name for item in items) or "(none registered)"


def get_importer(name: str) -> Importer:
    """The importer called ``name``; an unknown name raises ``FormatError`` listing the known."""
    for importer in _importers:
        if importer.name == name:
            return importer
    raise FormatError(f"Unknown import format {name!r}; known formats: {known_names(_importers)}.")


def get_exporter(name: str) -> Exporter:
    """The exporter called ``name``; an unknown name raises ``FormatError`` listing the known."""
    for exporter in _exporters:
        if exporter.name == name:
            return exporter
    raise FormatError(f"Unknown export format {name!r}; known formats: {known_names(_exporters)}.")


class FileImporter:
    """Base of the importers that read one file (never a directory): a subclass says in
    :meth:`looks_like` whether the file's first bytes are its format."""

    name: str
    description: str

    # What the file holds, for the sentence refusing a directory ("JSON or JSONL").
    reads = "data"

    def sniff(self, path: Path, head: bytes) -> bool:
        return not path.is_dir() and self.looks_like(head)

    def read(self, path: Path) -> Iterator[ImportItem]:
        path = Path(path)
        if path.is_dir():
            raise FormatError(
                f"{path} is a directory; the {self.name} format reads one {self.reads} file.",
                path=str(path),
            )
        return self.read_file(path)

    def read_file(self, path: Path) -> Iterator[ImportItem]:
        """The conversations of the file ``path`` (see :meth:`Importer.read`)."""
        raise NotImplementedError

    def looks_like(self, head: bytes) -> bool:
        """Whether ``head``, the first bytes of a file, look like this format (cheap;
        never raises for foreign input)."""
        raise NotImplementedError


# --------------------------------------------------------------------------- file helpers


def read_head(path: Path, size: int = HEAD_SIZE) -> bytes:
    """The first ``size`` bytes of ``path`` (empty for a directory)."""
    if path.is_dir():
        return b""
    try:
        with path.open("rb") as handle:
            return handle.read(size)
    except OSError as exc:
        raise cannot_read(path, exc) from exc


def read_text(path: Path) -> str:
    """The whole of ``path`` as UTF-8 text (a leading byte-order mark is dropped)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise cannot_read(path, exc) from exc
    return decode_text(data, str(path), path)


def read_text_keeping_bad_bytes(path: Path) -> tuple[str, bool]:
    """The whole of ``path`` as text (a byte-order mark dropped) with each byte that is
    not UTF-8 kept as a lone surrogate, and whether there was any: the entry holding one
    repairs and notes it (see :func:`decode_json_line`) instead of the whole file being
    refused."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise cannot_read(path, exc) from exc
    text = data.decode("utf-8", "surrogateescape").removeprefix("\ufeff")
    return text, holds_bad_bytes(text)


def load_json(path: Path) -> Any:
    """Parse ``path`` as one JSON document; malformed JSON names the file, line and column.

    Lone surrogates are replaced and noted (see :mod:`workbench.formats._reading`); a
    document nested too deep raises ``FormatError``.
    """
    return parse_document(read_text(path), str(path), path, f"file {path.name}")


def parse_document(text: str, label: str, path: Path, where: str) -> Any:
    """Parse a whole JSON document (checked as an entry ``where`` is, see
    :func:`~workbench.formats._reading.decode_value`); malformed JSON names ``label``,
    the line and column."""
    try:
        return decode_value(text, where)
    except json.JSONDecodeError as exc:
        raise FormatError(
            f"{label} is not valid JSON: {problem(exc)} at line {exc.lineno}, "
            f"column {exc.colno}.",
            path=str(path),
            entry=f"line {exc.lineno}",
        ) from exc
    except TooDeepError as exc:
        raise FormatError(f"{label}: {too_deep_reason('The document')}", path=str(path)) from exc


def decode_json_line(text: str, where: str = "", *, from_bytes: bool = False) -> Any:
    """Parse one JSON Lines line; raises ``ValueError`` with a sentence on bad JSON or on
    a value nested too deep. Lone surrogates are replaced and noted under ``where``
    (``from_bytes``: the line was decoded with ``surrogateescape`` and holds bytes that
    are not UTF-8, named as such)."""
    try:
        return decode_value(text, where, from_bytes=from_bytes)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {problem(exc)} at column {exc.colno}") from exc
    except TooDeepError as exc:
        raise ValueError(too_deep_reason("The line")) from exc


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and ``os.replace``.

    Readers never see a half-written file, and a failed write leaves an existing file
    untouched. A symbolic link is written through (the file it points to changes, the
    link stays); what is not a regular file (``/dev/stdout``, a named pipe, a device) is
    written in place, never replaced by a file. A new file gets the permissions the
    user's umask gives new files, an existing one keeps its own.
    """
    target = Path(os.path.realpath(path))
    try:
        mode: int | None = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise FormatError(f"Cannot write {path}: {exc.strerror or exc}.", path=str(path)) from exc
    if mode is not None and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        try:
            with open(target, "w", encoding="utf-8", newline="\n") as handle:
                handle.write(text)
        except OSError as exc:
            raise FormatError(f"Cannot write {path}: {exc.strerror or exc}.",
                              path=str(path)) from exc
        return
    remove_stale_temporaries(target)
    tmp_name: str | None = None
    try:
        fd, tmp_name = _temporary_beside(target, 0o666 if mode is None else mode & 0o777)
        if mode is not None:
            os.chmod(tmp_name, stat.S_IMODE(mode))  # the umask must not narrow it
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
        tmp_name = None
    except OSError as exc:
        raise FormatError(f"Cannot write {path}: {exc.strerror or exc}.", path=str(path)) from exc
    finally:
        if tmp_name is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)


def _temporary_beside(path: Path, mode: int) -> tuple[int, str]:
    """A new file ``.NAME.PID.RANDOM.tmp`` beside ``path``, created with ``mode`` (less
    the umask), open for writing: its descriptor and name."""
    for _ in range(100):
        name = str(path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), name
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def remove_stale_temporaries(path: Path) -> list[Path]:
    """Delete the temporary files an earlier write of ``path`` left behind (a process
    killed mid-write); returns them. A temporary is stale when the process named in it
    is gone: one still being written by a live process is left alone."""
    directory = path.parent if str(path.parent) else Path(".")
    removed: list[Path] = []
    try:
        candidates = list(directory.glob(f".{glob_escape(path.name)}.*.tmp"))
    except OSError:
        return removed
    for candidate in candidates:
        middle = candidate.name[len(path.name) + 2 : -len(".tmp")]
        pid_text = middle.split(".", 1)[0]
        if pid_text.isdigit() and _process_alive(int(pid_text)):
            continue
        with contextlib.suppress(OSError):
            candidate.unlink()
            removed.append(candidate)
    return removed


def glob_escape(name: str) -> str:
    """``name`` with the characters ``glob`` treats specially taken literally."""
    return re.sub(r"([*?\[])", r"[\1]", name)


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    except OSError:
        return False
    return True


def dump_json(value: Any, *, indent: int | None = 2) -> str:
    """JSON text as the exporters write it: UTF-8 kept readable, no NaN."""
    try:
        return json.dumps(value, ensure_ascii=False, indent=indent, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise FormatError(f"Cannot write the session as JSON: {exc}.") from exc


def fingerprint(messages: Sequence[Message]) -> str:
    """A stable id for a conversation that has no id of its own: a hash of its
    messages' roles, names, contents and tool calls. The same conversation gives the
    same id in any file, so importing it again is recognised; any other gives another.
    """
    digest = hashlib.sha256()
    for m in messages:
        digest.update(
            json.dumps(
                [m.role, m.name, m.content, m.tool_calls, m.tool_call_id],
                ensure_ascii=False,
                separators=(",", ":"),
                sort_keys=True,
            ).encode("utf-8")
        )
        digest.update(b"\n")
    return "sha256:" + digest.hexdigest()[:32]


_KIND_WORDS = {"boolean": "a boolean", "string": "a string", "integer": "a number",
               "number": "a number", "array": "a list", "object": "an object"}


def type_name(value: Any) -> str:
    """``"a string"``, ``"null"``, ``"an object"``…: a JSON value's kind for sentences."""
    kind = json_type(value)
    return _KIND_WORDS.get(kind, kind)


IMPORTED_FROM = "imported_from"
"""The key under which the context-file and openai-jsonl exports write where a session
was imported from (``{"source", "source_id"}``), so that importing the export again,
into the same database or another, recognises the conversation as the source did."""


def imported_from(source: str | None, source_id: str | None, own: str) -> dict[str, str] | None:
    """The value an export writes under :data:`IMPORTED_FROM` for a session imported
    from ``source`` (``None`` for a session made here or read from the ``own`` format,
    whose own id says it)."""
    if not source or not source_id or source == own:
        return None
    return {"source": source, "source_id": source_id}


def read_imported_from(metadata: dict[str, Any]) -> tuple[str, str] | None:
    """The source and source id an export wrote under :data:`IMPORTED_FROM` (removed
    from ``metadata``), or ``None`` when there is none as it writes it."""
    value = metadata.get(IMPORTED_FROM)
    if not (isinstance(value, dict) and isinstance(value.get("source"), str)
            and isinstance(value.get("source_id"), str)
            and value["source"] and value["source_id"]):
        return None
    del metadata[IMPORTED_FROM]
    return value["source"], value["source_id"]


FORKED_FROM = "forked_from"
"""The key under which the context-file, openai-jsonl and Markdown exports write the
session a session was forked from: ``{"source", "source_id", "position"}`` (the parent as
the export names it, and the position of the message the fork was made at; ``null`` when
that message was deleted from the parent: the link to the parent still holds, and an
import links the fork to it at no message, saying so in its report)."""


def forked_from_json(origin: ForkOrigin | None) -> dict[str, Any] | None:
    """The value an export writes under :data:`FORKED_FROM` (``None``: not a fork)."""
    if origin is None:
        return None
    return {"source": origin.source, "source_id": origin.source_id,
            "position": origin.position}


def read_forked_from(metadata: dict[str, Any]) -> ForkOrigin | None:
    """The fork origin an export wrote under :data:`FORKED_FROM` (removed from
    ``metadata``), or ``None`` when there is none as it writes it (a value of another
    shape stays in the metadata, as any unknown key does)."""
    value = metadata.get(FORKED_FROM)
    if not isinstance(value, dict) or set(value) != {"source", "source_id", "position"}:
        return None
    source, source_id, position = value["source"], value["source_id"], value["position"]
    if not (isinstance(source, str) and source and isinstance(source_id, str) and source_id):
        return None
    if position is not None and (
        isinstance(position, bool) or not isinstance(position, int) or position < 0
    ):
        return None
    del metadata[FORKED_FROM]
    return ForkOrigin(source, source_id, position)


def unforeseen(where: str, exc: Exception) -> SkippedEntry:
    """The report of an entry whose reading failed in a way no check of its importer
    foresaw (a value of a type nobody expected there): that entry is skipped and named,
    and the entries after it are still read."""
    return SkippedEntry(
        entry=where,
        reason=f"The entry could not be read ({type(exc).__name__}: {exc}); it was skipped.",
    )


def shorten(text: str, limit: int = 60) -> str:
    """``text`` on one line, cut at a word boundary to at most ``limit`` characters."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,.;:") + "…"


# --------------------------------------------------------------------------- sniffing

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
# NaN and the infinities too: Python writes them into JSON, and the readers accept them.
_LITERALS = {"true": True, "false": False, "null": None, "NaN": math.nan,
             "Infinity": math.inf, "-Infinity": -math.inf}
_MAX_DEPTH = 64


class _Cut(WorkbenchError):
    """The text ended (or stopped being JSON) inside a value."""

    def __init__(self, partial: Any) -> None:
        super().__init__()
        self.partial = partial


def peek_json(head: bytes) -> Any:
    """The first JSON value of ``head``, as far as ``head`` holds it.

    Detection only sees the start of a file, so a large document is cut off somewhere.
    Containers cut off are returned with the members read so far (a member whose value was
    cut off is kept with the partial value); anything after the first value is ignored.
    Returns ``None`` when ``head`` does not start like JSON at all.
    """
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    pos = _WS.match(text, 0).end()  # type: ignore[union-attr]
    if pos >= len(text) or text[pos] not in "[{":
        return None
    try:
        value, _ = _value(text, pos, 0)
    except _Cut as cut:
        return cut.partial
    return value


def _value(text: str, pos: int, depth: int) -> tuple[Any, int]:
    if pos >= len(text) or depth > _MAX_DEPTH:
        raise _Cut(None)
    char = text[pos]
    if char == "{":
        return _object(text, pos + 1, depth + 1)
    if char == "[":
        return _array(text, pos + 1, depth + 1)
    if char == '"':
        return _string(text, pos + 1)
    for word, literal in _LITERALS.items():
        if text.startswith(word, pos):
            return literal, pos + len(word)
    match = _NUMBER.match(text, pos)
    if match and match.end() < len(text):
        number = match.group()
        return (float(number) if any(c in number for c in ".eE") else int(number)), match.end()
    raise _Cut(None)


def _string(text: str, pos: int) -> tuple[str, int]:
    try:
        return json.decoder.scanstring(text, pos)  # type: ignore[attr-defined,no-any-return]
    except ValueError as exc:
        raise _Cut(None) from exc


def _skip_ws(text: str, pos: int) -> int:
    return _WS.match(text, pos).end()  # type: ignore[union-attr]


def _object(text: str, pos: int, depth: int) -> tuple[dict[str, Any], int]:
    result: dict[str, Any] = {}
    pos = _skip_ws(text, pos)
    if pos < len(text) and text[pos] == "}":
        return result, pos + 1
    while True:
        if pos >= len(text) or text[pos] != '"':
            raise _Cut(result)
        key, pos = _string_or_cut(text, pos + 1, result)
        pos = _skip_ws(text, pos)
        if pos >= len(text) or text[pos] != ":":
            raise _Cut(result)
        pos = _skip_ws(text, pos + 1)
        try:
            value, pos = _value(text, pos, depth)
        except _Cut as cut:
            result[key] = cut.partial
            raise _Cut(result) from None
        result[key] = value
        pos, closed = _after_item(text, pos, "}", result)
        if closed:
            return result, pos


def _after_item(text: str, pos: int, close: str, partial: Any) -> tuple[int, bool]:
    """Past what follows an item of an object or array: the position after the comma, or
    after ``close`` (then True); ``_Cut(partial)`` when the text ends or holds another
    character."""
    pos = _skip_ws(text, pos)
    if pos < len(text) and text[pos] == close:
        return pos + 1, True
    if pos >= len(text) or text[pos] != ",":
        raise _Cut(partial)
    return _skip_ws(text, pos + 1), False


def _string_or_cut(text: str, pos: int, partial: Any) -> tuple[str, int]:
    try:
        return _string(text, pos)
    except _Cut:
        raise _Cut(partial) from None


def _array(text: str, pos: int, depth: int) -> tuple[list[Any], int]:
    result: list[Any] = []
    pos = _skip_ws(text, pos)
    if pos < len(text) and text[pos] == "]":
        return result, pos + 1
    while True:
        try:
            value, pos = _value(text, pos, depth)
        except _Cut as cut:
            if cut.partial is not None:
                result.append(cut.partial)
            raise _Cut(result) from None
        result.append(value)
        pos, closed = _after_item(text, pos, "]", result)
        if closed:
            return result, pos
