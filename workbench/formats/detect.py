"""Finding the importer for a file, and reading conversations from it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from workbench.core.conversation import Conversation, SkippedEntry
from workbench.errors import FormatError, UnknownFormatError
from workbench.formats._reading import NoteSink, add_note, flag_unclean_text, repair_conversation
from workbench.formats.base import (
    Importer,
    ImportItem,
    get_importer,
    importers,
    read_head,
)


def _require_exists(path: Path) -> None:
    if not path.exists():
        raise FormatError(f"{path} does not exist.", path=str(path))


def _is_empty_file(path: Path) -> bool:
    try:
        return path.is_file() and path.stat().st_size == 0
    except OSError:
        return False


def detect_format(path: Path) -> Importer:
    """The first registered importer that recognises ``path`` (a file or a directory).

    Raises :class:`~workbench.errors.FormatError` when ``path`` does not exist and
    :class:`~workbench.errors.UnknownFormatError` when no importer recognises it.
    """
    path = Path(path)
    _require_exists(path)
    if _is_empty_file(path):
        raise UnknownFormatError(f"The file {path} is empty: there is nothing to import.",
                                 path=str(path))
    head = read_head(path)
    candidates = importers()
    for importer in candidates:
        try:
            if importer.sniff(path, head):
                return importer
        except (OSError, ValueError, RecursionError):
            # A sniffer that trips over foreign input simply does not recognise it.
            continue
    # The names only: one readable line (``workbench import --help`` describes each).
    known = ", ".join(imp.name for imp in candidates)
    kind = "directory" if path.is_dir() else "file"
    raise UnknownFormatError(
        f"Cannot tell the format of the {kind} {path}; known formats: {known or 'none'}.",
        path=str(path),
    )


def read_conversations(path: Path, format: str | None = None) -> Iterator[ImportItem]:
    """The conversations (and skipped entries, and notes) of ``path``.

    ``format`` names an importer; without it the format is detected. An unknown name or
    a missing path raises :class:`~workbench.errors.FormatError` at once; a file that
    turns out to be unreadable raises it from the importer. A folder that no importer
    reads as a whole (a folder of OpenAI files, of mixed exports) is read file by file,
    each in its own format, a file that cannot be read reported as a skipped entry.
    """
    path = Path(path)
    importer = get_importer(format) if format is not None else None
    _require_exists(path)
    if importer is None:
        try:
            importer = detect_format(path)
        except UnknownFormatError:
            if not path.is_dir() or not _folder_files(path):
                raise
    sink = NoteSink()
    with sink.active():
        items = importer.read(path) if importer is not None else _read_folder_files(path)
    if importer is not None and format is None and path.is_dir():
        items = _and_files_left(items, path, importer)
    return _with_notes(iter(items), sink)


def _and_files_left(items: Iterable[ImportItem], path: Path,
                    importer: Importer) -> Iterator[ImportItem]:
    """``items``, then a skipped entry for each file of the folder that another importer
    reads (a JSONL beside a ChatGPT export's conversations.json): the folder was read as
    one export, and such a file is not dropped without a word. Files of no known format
    (an export's user.json) are not named."""
    yield from items
    for file in _folder_files(path):
        if _is_empty_file(file):
            continue
        try:
            other = detect_format(file)
        except (FormatError, OSError):
            continue
        if other.name != importer.name:
            yield SkippedEntry(
                entry=file.name,
                reason=f"not read: the folder was read as {importer.name} "
                       f"({importer.description}), and this file is {other.name}; "
                       "import it on its own.")


def _with_notes(items: Iterator[ImportItem], sink: NoteSink) -> Iterator[ImportItem]:
    """``items`` with the notes made while reading each one handed out before it.

    When a source let invalid text through (see
    :func:`~workbench.formats._reading.flag_unclean_text`), each conversation after it
    is repaired whole and noted under its id.
    """
    while True:
        # (push/pop by hand: a context manager per item costs more than small items do)
        sink.push()
        try:
            item = next(items)
            if sink.unclean_text and isinstance(item, Conversation):
                repair_conversation(item, f"conversation {item.source_id or item.title}")
        except StopIteration:
            break
        finally:
            sink.pop()
        for note in sink.drain():
            if not note.entry and isinstance(item, Conversation):
                # Made while reading this conversation, somewhere without a position.
                note.entry = f"conversation {item.source_id or item.title}"
            yield note
        yield item
    yield from sink.drain()


# (.md: the workbench's own Markdown transcripts, which import back)
_FOLDER_SUFFIXES = (".json", ".jsonl", ".zip", ".db", ".md")
_DONE = object()


def _named_notes(file: Path, importer: Importer) -> Iterator[ImportItem]:
    """The items ``importer`` reads from ``file``, the notes made while reading (opening
    the file included) passed on to the active sink with the file's name in front of
    their entry ("item 0" alone does not say which file of a folder)."""
    name = file.name
    sink = NoteSink()
    items: Iterator[ImportItem] | None = None
    while True:
        sink.push()
        try:
            if items is None:
                items = iter(importer.read(file))
            item = next(items, _DONE)
        finally:
            sink.pop()
        if sink.unclean_text:
            flag_unclean_text()
            sink.unclean_text = False
        for note in sink.drain():
            entry = note.entry
            if not entry and isinstance(item, Conversation):
                entry = f"conversation {item.source_id or item.title}"
            add_note(f"{name}: {entry}" if entry else name, note.note)
        if item is _DONE:
            return
        yield item  # type: ignore[misc]


def _folder_files(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir()
                  if p.is_file() and p.suffix.lower() in _FOLDER_SUFFIXES
                  and not p.name.startswith("."))


def _read_folder_files(path: Path) -> Iterator[ImportItem]:
    """A folder no importer reads as a whole: each conversation file in it (``*.json``,
    ``*.jsonl``, ``*.zip``, ``*.db``, ``*.md``, in name order) read in its own format. A
    file whose format is unknown or that cannot be read is one skipped entry, named by
    the file; the entries a file's importer skips, and the notes on what it changed,
    carry the file's name too. A folder inside it is not read, and named."""
    for file in _folder_files(path):
        if _is_empty_file(file):
            yield SkippedEntry(entry=file.name, reason="the file is empty.")
            continue
        try:
            importer = detect_format(file)
            for item in _named_notes(file, importer):
                if isinstance(item, SkippedEntry):
                    item = SkippedEntry(entry=f"{file.name}: {item.entry}", reason=item.reason)
                yield item
        except UnknownFormatError:
            yield SkippedEntry(entry=file.name, reason="not a conversation file of a "
                               "known format")
        except (FormatError, OSError) as exc:
            yield SkippedEntry(entry=file.name, reason=str(exc))
    for inner in sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")):
        yield SkippedEntry(entry=f"{inner.name}/",
                           reason="a folder inside the folder is not read; import it on its own.")
