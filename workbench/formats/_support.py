"""Helpers shared by the importers of other tools' exports (ChatGPT, Claude, Open WebUI,
simonw/llm, ShareGPT).

- Reading the entries of a JSON file, a ZIP member or a folder's file one at a time,
  in chunks (:func:`file_entries`, :func:`document_entries`; the reading itself, with its
  limits and repairs, is :mod:`workbench.formats._reading`), so a 100 MB export never
  exists in memory whole, and finding the ``conversations*.json`` files of an export
  given as a file, a ZIP or a folder (:func:`export_documents`). :func:`iter_json_array`
  does the same over text already in memory.
- Walking message trees (ChatGPT's ``mapping``, Open WebUI's ``history.messages``):
  the session's path from the root to a chosen leaf, and the other leaves whose paths
  become branch conversations (:class:`MessageTree`).
- Small builders shared by the formats: OpenAI-shaped tool calls, times given as epoch
  numbers in seconds, milliseconds or nanoseconds, titles taken from the first user
  message.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Callable, Container, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, TypeVar, cast

from workbench.core.conversation import Conversation, Message, Role, SkippedEntry, parse_time
from workbench.core.identity import parts_key
from workbench.errors import FormatError
from workbench.formats._reading import (
    BrokenJsonError,
    decode_text,
    open_file,
    problem,
    stream_entries,
)
from workbench.formats.base import (
    FileImporter,
    ImportItem,
    parse_document,
    peek_json,
    read_head,
    shorten,
    unforeseen,
)

T = TypeVar("T")

_WS = re.compile(r"[ \t\n\r]*")
_SPLIT_NAME = re.compile(r"^conversations(?:-\d+)?\.json$", re.IGNORECASE)
_TOOL_NAME_BAD = re.compile(r"[^A-Za-z0-9_-]+")
ZIP_MAGIC = b"PK\x03\x04"
_DECODER = json.JSONDecoder()


def sentence(text: str) -> str:
    """``text`` ending with a full stop."""
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


# --------------------------------------------------------------------------- JSON arrays


def first_char(text: str) -> str:
    """The first character of ``text`` that is not JSON whitespace (``""`` when none)."""
    pos = _WS.match(text, 0).end()  # type: ignore[union-attr]
    return text[pos] if pos < len(text) else ""


def load_json_text(text: str, label: str, path: Path) -> Any:
    """Parse a whole JSON document; malformed JSON names ``label``, the line and column.

    The document is checked as an entry is (:func:`~workbench.formats._reading.decode_value`):
    lone surrogates are replaced and noted, and one nested too deep raises ``FormatError``.
    """
    return parse_document(text, label, path, "item 0")


def file_entries(path: Path, label: str | None = None, entry_prefix: str = "") -> Iterator[Any]:
    """The entries of the JSON file ``path``, read in chunks (see
    :func:`~workbench.formats._reading.stream_entries`): an array's elements, or the
    document itself when it is an object. Unreadable entries come as
    :class:`SkippedEntry` in their place."""
    label = label or str(path)
    return stream_entries(open_file(path, label), label, path, entry_prefix)


def document_entries(document: ExportDocument, path: Path) -> Iterator[Any]:
    """The entries of one document of an export, as :func:`file_entries` gives them."""
    return stream_entries(document.open(), document.label, path, document.entry_prefix)


def iter_json_array(text: str, label: str, path: Path) -> Iterator[Any]:
    """The elements of the JSON array ``text``, decoded one at a time.

    Only the element in hand is ever held as Python objects, so memory stays near the
    size of the text. Malformed JSON raises :class:`BrokenJsonError` naming ``label``,
    the line and the column, and telling how many elements were read before it; text
    that is not an array at all raises :class:`~workbench.errors.FormatError`.
    """
    pos = _WS.match(text, 0).end()  # type: ignore[union-attr]
    if pos >= len(text):
        raise FormatError(f"{label} is empty.", path=str(path))
    if text[pos] != "[":
        raise FormatError(f"{label} does not hold a JSON array.", path=str(path))
    pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
    count = 0
    if pos < len(text) and text[pos] == "]":
        _check_end(text, pos + 1, label, path, count)
        return
    while True:
        try:
            value, pos = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise _broken(label, path, problem(exc), exc.lineno, exc.colno, count) from exc
        count += 1
        yield value
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if pos < len(text) and text[pos] == ",":
            pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
            continue
        if pos < len(text) and text[pos] == "]":
            _check_end(text, pos + 1, label, path, count)
            return
        what = "the text ended" if pos >= len(text) else "expected ',' or ']'"
        line, column = line_column(text, pos)
        raise _broken(label, path, what, line, column, count)


def _check_end(text: str, pos: int, label: str, path: Path, count: int) -> None:
    pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
    if pos < len(text):
        line, column = line_column(text, pos)
        raise _broken(label, path, "extra data after the array", line, column, count)


def _broken(
    label: str, path: Path, what: str, line: int, column: int, count: int
) -> BrokenJsonError:
    return BrokenJsonError(
        f"{label} is not valid JSON: {what} at line {line}, column {column}.",
        path=str(path),
        line=line,
        items_read=count,
    )


def line_column(text: str, pos: int) -> tuple[int, int]:
    """1-based line and column of offset ``pos`` in ``text``."""
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def guarded(
    items: Iterator[T], entry_prefix: str = "", *, fatal_at_start: bool = True
) -> Iterator[T | SkippedEntry]:
    """``items``, with JSON that breaks after some elements reported instead of raised.

    When the text stops being valid JSON after elements were read, those elements are
    kept (the engine may have stored them already) and one :class:`SkippedEntry` says
    where the file broke and that the rest of it could not be read. Broken JSON before
    the first element raises when ``fatal_at_start`` (the file cannot be read at all);
    an export of several files passes False for all but its first.
    """
    try:
        yield from items
    except BrokenJsonError as exc:
        if exc.items_read == 0 and fatal_at_start:
            raise
        yield SkippedEntry(
            entry=f"{entry_prefix}line {exc.line}",
            reason=f"{exc} The entries from item {exc.items_read} on could not be read.",
        )


def primed(items: Iterator[T]) -> Iterator[T]:
    """``items`` with its first element already taken, so that errors in it raise now.

    Importers return generators; a file that cannot be read at all should fail when
    ``read()`` is called rather than somewhere inside the engine's import loop.
    """
    try:
        first = next(items)
    except StopIteration:
        return iter(())
    return _prepend(first, items)


def _prepend(first: T, rest: Iterator[T]) -> Iterator[T]:
    yield first
    yield from rest


# --------------------------------------------------------------------------- export files


@dataclass(frozen=True)
class ExportDocument:
    """One JSON file of an export: a plain file, a ZIP member, or a file in a folder."""

    label: str
    """How sentences name it: the file path, or ``"export.zip:conversations.json"``."""

    entry_prefix: str
    """Prefix of entry positions (``"conversations-001.json "``) when an export has
    several documents; empty for a single document."""

    load: Callable[[], str]
    """The whole text (for small documents; importers stream through :attr:`open`)."""

    open: Callable[[], IO[bytes]]
    """The document as a binary file; the caller closes it."""


def conversation_member_names(names: Iterable[str]) -> list[str]:
    """The ``conversations.json`` / ``conversations-NNN.json`` names among ``names``.

    Split files win over a single ``conversations.json`` (an export that has both holds
    the same conversations twice); the shallowest folder wins over nested copies.
    """
    found = [n for n in names if _SPLIT_NAME.match(n.rsplit("/", 1)[-1])]
    if not found:
        return []
    depth = min(n.count("/") for n in found)
    found = [n for n in found if n.count("/") == depth]
    split = [n for n in found if "-" in n.rsplit("/", 1)[-1]]
    return sorted(split) if split else sorted(found)


def is_zip(path: Path, head: bytes) -> bool:
    """Whether ``path`` is a ZIP archive (by its first bytes)."""
    return not path.is_dir() and head.startswith(ZIP_MAGIC)


def zip_names(path: Path) -> list[str]:
    """The member names of a ZIP archive; an unreadable archive raises ``FormatError``."""
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.namelist()
    except (OSError, zipfile.BadZipFile) as exc:
        raise FormatError(f"{path} is not a readable ZIP archive: {exc}.", path=str(path)) from exc


def zip_member_head(path: Path, name: str, size: int = 64 * 1024) -> bytes:
    """The first ``size`` bytes of member ``name`` of the ZIP archive ``path``."""
    try:
        with zipfile.ZipFile(path) as archive, archive.open(name) as member:
            return member.read(size)
    except (OSError, zipfile.BadZipFile, KeyError) as exc:
        raise FormatError(f"Cannot read {name} in {path}: {exc}.", path=str(path)) from exc


def export_head(path: Path, head: bytes) -> bytes | None:
    """The head of the first conversations document of a ZIP or folder export.

    ``None`` when ``path`` is neither a ZIP nor a folder holding such a document, or
    cannot be read: detection never raises.
    """
    try:
        if path.is_dir():
            names = conversation_member_names(p.name for p in _folder_files(path))
            return read_head(path / names[0]) if names else None
        if is_zip(path, head):
            names = conversation_member_names(zip_names(path))
            return zip_member_head(path, names[0]) if names else None
    except (FormatError, OSError):
        return None
    return None


def _folder_files(path: Path) -> list[Path]:
    try:
        return [p for p in path.iterdir() if p.is_file()]
    except OSError as exc:
        raise FormatError(f"Cannot list {path}: {exc.strerror or exc}.", path=str(path)) from exc


class ExportImporter(FileImporter):
    """Base of the importers of a data export: its conversations file, the export's ZIP,
    or the folder it was unpacked into (:meth:`looks_like` judges the conversations
    file's first bytes)."""

    def sniff(self, path: Path, head: bytes) -> bool:
        if path.is_dir() or is_zip(path, head):
            inner = export_head(path, head)
            return inner is not None and self.looks_like(inner)
        return self.looks_like(head)


def skipped_message(entry: str, label: str, what: str, exc: Exception) -> SkippedEntry:
    """The report of one message of a conversation that could not be read, while the rest
    of the conversation is imported: ``entry`` names its position (``"item 2
    messages[4]"``), ``label`` the conversation (``"conversation 'Trip' (c-1)"``) and
    ``what`` the message (``"message 4"``); ``exc`` says what is wrong with it."""
    return SkippedEntry(
        entry=entry,
        reason=sentence(
            f"{label}: {what} was skipped ({exc}); the rest of the conversation was imported"
        ),
    )


def first_copies(
    items: Iterable[Any],
    parse: Callable[[Any, str, str], Iterable[ImportItem]],
    entry_prefix: str,
    stem: str,
    what: str,
    seen: dict[str, dict[int, str]] | None = None,
) -> Iterator[ImportItem]:
    """What ``parse`` makes of each of ``items`` (an unreadable one, a
    :class:`SkippedEntry`, is passed on in its place), skipping a conversation that came
    before (the same source id and the same messages; ``seen`` holds those of other
    documents of the same export, see :func:`first_copy`): ``what`` (``"Chat"``) names
    it in the reason. A different conversation under an id that came before is passed on
    (the store keeps it as a session of its own and reports the reused id)."""
    seen = {} if seen is None else seen
    for index, item in enumerate(items):
        if isinstance(item, SkippedEntry):
            yield item
            continue
        where = f"{entry_prefix}item {index}"
        try:
            results = list(parse(item, where, f"{stem}#{index}"))
        except Exception as exc:  # one entry's unforeseen fault costs that entry only
            yield unforeseen(where, exc)
            continue
        for result in results:
            if isinstance(result, Conversation):
                first = first_copy(result, where, seen)
                if first is not None:
                    yield SkippedEntry(
                        entry=where,
                        reason=f"{what} {result.source_id} appears again; "
                        f"its first copy ({first}) was imported.",
                    )
                    continue
            yield result


def first_copy(
    conversation: Conversation, where: str, seen: dict[str, dict[int, str]]
) -> str | None:
    """Where the same conversation (the same source id and the same messages) came
    before, among ``seen`` (source id -> key of the messages -> where); ``None`` when it
    did not, and it is remembered as found at ``where``.

    The id alone is not enough: an export may reuse an id for another conversation,
    which must never be skipped as a copy of the first.
    """
    if conversation.source_id is None:
        return None
    key = hash(tuple(
        (m.role, m.name, m.content, m.tool_call_id,
         json.dumps(m.tool_calls, sort_keys=True) if m.tool_calls else None,
         parts_key(m.parts))
        for m in conversation.messages))
    found = seen.setdefault(conversation.source_id, {})
    if key in found:
        return found[key]
    found[key] = where
    return None


def export_documents(path: Path, what: str) -> list[ExportDocument]:
    """The JSON documents of an export given as a file, a ZIP archive or a folder.

    A ZIP or folder must hold ``conversations.json`` or split ``conversations-NNN.json``
    files; otherwise ``FormatError`` says so, naming ``what`` (``"a ChatGPT export"``).
    """
    if path.is_dir():
        names = conversation_member_names(p.name for p in _folder_files(path))
        documents = [(str(path / name), _file_loader(path / name), _file_opener(path / name))
                     for name in names]
    elif is_zip(path, read_head(path, 4)):
        names = conversation_member_names(zip_names(path))
        documents = [(f"{path}:{name}", _zip_loader(path, name), _zip_opener(path, name))
                     for name in names]
    else:
        return [
            ExportDocument(
                label=str(path), entry_prefix="", load=_file_loader(path),
                open=_file_opener(path)
            )
        ]
    if not names:
        raise FormatError(
            f"{path} holds no conversations.json or conversations-NNN.json file of {what}.",
            path=str(path),
        )
    return [
        ExportDocument(label=label, entry_prefix=f"{name} " if len(names) > 1 else "",
                       load=load, open=opener)
        for name, (label, load, opener) in zip(names, documents, strict=True)
    ]


def _file_loader(path: Path) -> Callable[[], str]:
    def load() -> str:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise FormatError(
                f"Cannot read {path}: {exc.strerror or exc}.", path=str(path)
            ) from exc
        return decode_text(data, str(path), path)

    return load


def _file_opener(path: Path) -> Callable[[], IO[bytes]]:
    return lambda: open_file(path)


def _zip_opener(path: Path, name: str) -> Callable[[], IO[bytes]]:
    def open_member() -> IO[bytes]:
        archive: zipfile.ZipFile | None = None
        try:
            archive = zipfile.ZipFile(path)
            return cast(IO[bytes], _ZipMember(archive, archive.open(name)))
        except (OSError, zipfile.BadZipFile, KeyError) as exc:
            if archive is not None:
                archive.close()
            raise FormatError(f"Cannot read {name} in {path}: {exc}.", path=str(path)) from exc

    return open_member


class _ZipMember:
    """A ZIP member opened for reading that closes its archive with it."""

    def __init__(self, archive: zipfile.ZipFile, member: IO[bytes]) -> None:
        self._archive = archive
        self._member = member

    def read(self, size: int = -1) -> bytes:
        return self._member.read(size)

    def close(self) -> None:
        try:
            self._member.close()
        finally:
            self._archive.close()

    def __enter__(self) -> _ZipMember:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _zip_loader(path: Path, name: str) -> Callable[[], str]:
    def load() -> str:
        try:
            with zipfile.ZipFile(path) as archive:
                data = archive.read(name)
        except (OSError, zipfile.BadZipFile, KeyError) as exc:
            raise FormatError(f"Cannot read {name} in {path}: {exc}.", path=str(path)) from exc
        return decode_text(data, f"{path}:{name}", path)

    return load


def first_element(head: bytes) -> dict[str, Any] | None:
    """The first object of a (possibly cut-off) JSON array in ``head``, or the object
    itself when ``head`` starts with an object; ``None`` for anything else."""
    value = peek_json(head)
    if isinstance(value, list):
        value = value[0] if value else None
    return value if isinstance(value, dict) else None


# --------------------------------------------------------------------------- trees


class MessageTree:
    """A message tree given as nodes with parent links (and optionally child lists).

    ``parent_of`` maps each node id to its parent id (``None`` at a root);
    ``children_of`` gives child ids where the source lists them. Children named only
    through parent links are added too, so exports that omit child lists (as some
    minimal ChatGPT exports do) still form a tree. Cycles and dangling links are cut.
    """

    def __init__(
        self,
        order: Sequence[str],
        parent_of: dict[str, str | None],
        children_of: dict[str, list[str]] | None = None,
    ) -> None:
        self.order = list(order)
        known = set(self.order)
        self.parent_of = parents = {
            node: parent if parent in known and parent != node else None
            for node, parent in parent_of.items()
        }
        _cut_cycles(self.order, parents)
        children: dict[str, list[str]] = {node: [] for node in self.order}
        # A node is only ever listed under its own parent (the one its link names), so one
        # set of placed nodes tells whether it is already among that parent's children.
        placed: set[str] = set()
        for node, listed in (children_of or {}).items():
            if node not in known:
                continue
            under = children[node]
            for child in listed:
                # A child list that disagrees with the child's own parent link is ignored:
                # the parent link is what a walk from the leaf follows.
                if child not in placed and child in known and parents.get(child) == node:
                    under.append(child)
                    placed.add(child)
        for node in self.order:
            parent = parents.get(node)
            if parent is not None and node not in placed:
                children[parent].append(node)
                placed.add(node)
        self.children = children

    def path_to(self, node: str) -> list[str]:
        """Node ids from the root down to ``node`` (a cycle ends the walk)."""
        path: list[str] = []
        visited: set[str] = set()
        current: str | None = node
        while current is not None and current not in visited:
            visited.add(current)
            path.append(current)
            current = self.parent_of.get(current)
        path.reverse()
        return path

    def leaves(self) -> list[str]:
        """Nodes without children, in the order the source lists nodes."""
        return [node for node in self.order if not self.children.get(node)]


def _cut_cycles(order: Sequence[str], parents: dict[str, str | None]) -> None:
    """Make the first node (in source order) of each cycle of parent links a root.

    Without this a walk up from a leaf runs round the cycle before it stops, and the
    path it gives holds nodes of another branch above the root (the messages of two
    branches mixed in one session).
    """
    walked: dict[str, int] = {}  # node -> the number of the walk that reached it first
    rank: dict[str, int] | None = None  # made once, when a first cycle is found
    for number, start in enumerate(order):
        node: str | None = start
        while node is not None and node not in walked:
            walked[node] = number
            node = parents.get(node)
        if node is None or walked[node] != number:
            continue  # reached a root, or a node an earlier walk settled
        cycle = [node]  # this walk came round to one of its own nodes
        above = parents[node]
        while above is not None and above != node:
            cycle.append(above)
            above = parents[above]
        if rank is None:
            rank = {n: i for i, n in enumerate(order)}
        parents[min(cycle, key=rank.__getitem__)] = None


def latest_leaf(tree: MessageTree, time_of: Callable[[str], float | None]) -> str | None:
    """The leaf with the latest time; among leaves without one, the last in source order.

    A leaf with a time wins over leaves without.
    """
    best: str | None = None
    best_time: float | None = None
    for leaf in tree.leaves():
        stamp = time_of(leaf)
        if best is None:
            best, best_time = leaf, stamp
        elif stamp is None:
            if best_time is None:
                best = leaf
        elif best_time is None or stamp >= best_time:
            best, best_time = leaf, stamp
    return best


@dataclass
class Branch:
    """Another leaf of a message tree, with the messages on its path."""

    leaf: str
    fork: str | None
    """The node where the branch leaves the session's path (``None``: a separate root)."""
    messages: list[Message]


BRANCH_MESSAGES = 200_000
"""How many messages the branch conversations of one conversation may hold in all. Each
branch holds its whole path from the root, so a tree both wide and deep multiplies: a
file of 2,000 nodes (a chain of 1,000 with 1,000 leaves at its end) made a million
messages. Real conversations stay far below (a hundred regenerations at the end of a
500-message chat make 50,000); the branches past the limit are left out and reported."""


@dataclass
class Branches:
    """The other branches of a tree to import, and how many were left out."""

    kept: list[Branch]
    left_out: int = 0
    """Leaves whose branches were not read: the branches before them hold
    :data:`BRANCH_MESSAGES` messages already."""


def alternate_branches(
    tree: MessageTree,
    main_path: Sequence[str],
    convert: Callable[[list[str]], list[Message]],
    main_messages: Sequence[Message],
    limit: int | None = None,
) -> Branches:
    """The other leaves of ``tree`` whose conversations differ from the session's.

    ``convert`` turns a path of node ids into messages the way the session's own path
    was converted. A branch whose messages (role, text, tool calls, and the parts the
    text does not say, such as an image) equal, or are a prefix of, the session's or an
    earlier branch's is dropped: regenerating an answer into the same words, or a dead
    end that only repeats the start, adds nothing to open (a regenerated image, shown
    as the same ``[image]`` text, is another image and is kept). Once
    the branches hold ``limit`` (:data:`BRANCH_MESSAGES`) messages, the other leaves are
    only counted.
    """
    if limit is None:
        limit = BRANCH_MESSAGES
    on_main = set(main_path)
    kept: list[Branch] = []
    signatures: list[tuple[Hashable, ...]] = []
    held = 0
    left_out = 0
    for leaf in tree.leaves():
        if leaf in on_main:
            continue
        if left_out:
            left_out += 1
            continue
        if not signatures:  # only needed once there is another leaf (most trees have none)
            signatures.append(_signature(main_messages))
        path = tree.path_to(leaf)
        if held + len(path) > limit:
            left_out = 1
            continue
        messages = convert(path)
        signature = _signature(messages)
        if not messages or any(_is_prefix(signature, other) for other in signatures):
            continue
        fork = None
        for node in reversed(path):
            if node in on_main:
                fork = node
                break
        signatures.append(signature)
        kept.append(Branch(leaf=leaf, fork=fork, messages=messages))
        held += len(messages)
    return Branches(kept, left_out)


def _signature(messages: Sequence[Message]) -> tuple[Hashable, ...]:
    # The parts the text does not say count: a regenerated image has the same
    # ``[image]`` text as the first one, and is another image.
    return tuple(
        (m.role, m.content, json.dumps(m.tool_calls, sort_keys=True) if m.tool_calls else None,
         parts_key(m.parts))
        for m in messages
    )


def _is_prefix(short: tuple[Hashable, ...], long: tuple[Hashable, ...]) -> bool:
    return len(short) <= len(long) and long[: len(short)] == short


def mark_branch_start(messages: Sequence[Message], main_messages: Sequence[Message]) -> None:
    """Mark the first message where a branch's messages stop matching the session's."""
    for i, message in enumerate(messages):
        if i >= len(main_messages) or _signature([message]) != _signature([main_messages[i]]):
            message.metadata["branch_start"] = True
            return


def with_branches(main: Conversation, branches: Branches, where: str) -> list[ImportItem]:
    """``main`` and a conversation for each of its alternate ``branches`` (titled and
    identified after it, the message where each leaves it marked); the branches left
    out are reported under ``where``."""
    main.tree_id = main.source_id
    results: list[ImportItem] = [main]
    for number, branch in enumerate(branches.kept, start=1):
        mark_branch_start(branch.messages, main.messages)
        times = [m.created_at for m in branch.messages if m.created_at is not None]
        results.append(
            Conversation(
                title=f"{main.title} (branch {number})",
                messages=branch.messages,
                source=main.source,
                source_id=f"{main.source_id}#branch-{branch.leaf}",
                created_at=main.created_at,
                updated_at=max(times) if times else main.updated_at,
                tags=list(main.tags),
                tree_id=main.source_id,
                metadata={
                    "branch_of": main.source_id,
                    "branch_leaf": branch.leaf,
                    "branch_fork": branch.fork,
                },
            )
        )
    if branches.left_out:
        results.append(
            SkippedEntry(
                entry=where,
                reason=f"Conversation {main.source_id}: {branches.left_out:,} more "
                f"branch(es) were left out. Each branch holds its whole path from the "
                f"root, and the {len(branches.kept):,} imported already hold nearly "
                f"{BRANCH_MESSAGES:,} messages: a tree this wide and deep would be "
                "copied too many times.",
            )
        )
    return results


# --------------------------------------------------------------------------- builders


def tool_call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    """A tool call in the OpenAI chat shape; ``arguments`` becomes a JSON string."""
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": tool_name(name), "arguments": arguments},
    }


def tool_name(name: Any) -> str:
    """``name`` as the chat APIs accept a function name (letters, digits, ``_``, ``-``)."""
    text = _TOOL_NAME_BAD.sub("_", str(name or "")).strip("_") or "tool"
    return text[:64]


_FIRST_SECOND = 365 * 86400.0
"""1971-01-01: an epoch time before it is a placeholder (0), not a time."""
_SMALLER_UNITS = 3
"""Units below the second an epoch number may be counted in: ms, µs, ns."""


_EMPTY: tuple[Any, ...] = (None, "", [], {})


def keep_unread(metadata: dict[str, Any], source: dict[str, Any], read: Container[str], *,
                drop_false: bool = False) -> None:
    """Keep in ``metadata`` what ``source`` holds that the importer did not read (keys not
    in ``read``) and that is not empty (``None``, ``""``, ``[]``, ``{}``, and a value
    equal to ``False`` with ``drop_false``), unless ``metadata`` has that key already:
    what the workbench has no field for is kept as it was (SPEC §11)."""
    empty = (*_EMPTY, False) if drop_false else _EMPTY
    for key, value in source.items():
        if key not in read and value not in empty:
            metadata.setdefault(key, value)


def epoch_time(value: Any) -> datetime | None:
    """A time given as ISO text or as an epoch number in s, ms, µs or ns; ``None`` when
    absent or unreadable (a bad time never stops an import).

    A number that is negative, not finite (``1e400`` decodes to infinity) or too large
    to be nanoseconds before the year 5138 is unreadable: dividing it down until it
    looks like seconds would make up a time the source never held. A time in 1970 (epoch
    0, or 7 seconds after it) is a placeholder, not a time, as the store takes a
    session's.
    """
    if type(value) is float and _FIRST_SECOND <= value < 1e11:
        # The usual case (ChatGPT's seconds with a fraction), without the checks below.
        try:
            return datetime.fromtimestamp(value, UTC)
        except (ValueError, OverflowError, OSError):
            return None
    if isinstance(value, float | int) and not isinstance(value, bool):
        seconds = _seconds(value)
        if seconds is None or seconds < _FIRST_SECOND:
            return None
        return datetime.fromtimestamp(seconds, UTC)
    try:
        return parse_time(value)
    except (ValueError, OverflowError, OSError):
        return None


def _seconds(number: float) -> float | None:
    """An epoch number in s, ms, µs or ns as seconds; ``None`` when it is none of them."""
    try:
        value = float(number)
    except OverflowError:  # an integer beyond any float
        return None
    if not 0.0 <= value < 1e11 * 1000.0**_SMALLER_UNITS:  # NaN fails this too
        return None
    # Tools disagree on the unit; a count of seconds stays below 1e11 until year 5138.
    while value >= 1e11:
        value /= 1000.0
    return value


def epoch_seconds(value: Any) -> float | None:
    """An epoch number normalised to seconds, for ordering (1970's placeholders still
    order, 3 before 9); ``None`` when not a time."""
    if isinstance(value, float | int) and not isinstance(value, bool):
        return _seconds(value)
    when = epoch_time(value)
    return when.timestamp() if when is not None else None


def title_of(raw: Any, messages: Iterable[Message], fallback: str) -> str:
    """``raw`` stripped when it is a string with text, else :func:`first_user_title`."""
    if isinstance(raw, str) and raw.strip():
        return raw.strip()
    return first_user_title(messages, fallback)


def first_user_title(messages: Iterable[Message], fallback: str) -> str:
    """A title from the first user message with text, else ``fallback``."""
    for message in messages:
        if message.role == Role.USER.value and message.content.strip():
            return shorten(message.content)
    return fallback


def number_positions(messages: list[Message]) -> list[Message]:
    """Set ``position`` to 0..n-1 in list order, and return the list."""
    for position, message in enumerate(messages):
        message.position = position
    return messages


def text_of(value: Any) -> str:
    """Text from a string, or from a list of strings and ``{"text": ...}`` parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(t for t in (text_of(item) for item in value) if t)
    if isinstance(value, dict):
        for key in ("text", "content", "output"):
            inner = value.get(key)
            if isinstance(inner, str | list):
                return text_of(inner)
    return ""
