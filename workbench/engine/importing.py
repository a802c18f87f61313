"""Importing parsed conversations into the store: transactions, progress, token counts.

Conversations are stored in batches through the repository's fast path (one
transaction per batch of whole conversations, full-text index filled in the same
transaction). If a batch fails, its conversations are stored one by one so that only
the bad one is reported and skipped: every conversation is stored whole or not at all.

Reading runs on a thread of its own: while the caller's thread writes one batch (SQLite
releases the interpreter lock while it inserts and indexes), the reader parses the file
and prepares the next conversations' rows (:func:`workbench.store.bulk.prepare`).

Token counts. With ``count_tokens=True`` (the default, and what ``workbench import``
does) every message is counted while the file is read, on a thread of its own (tiktoken
lets go of the interpreter lock while it encodes, so counting overlaps the parse and the
writes), and stored with its row, the session totals with them, in the same
transaction. Callers that want the rows sooner pass ``count_tokens=False``: messages are
then stored without a count (counts the file carries are kept) and
:func:`count_missing_tokens` fills them afterwards, in short transactions of its own,
adding each message's count to its session's cached total. The GUI does that (background
jobs after File → Import, then the session list is read again), and the CLI runs the
pass after its import for messages an older version stored without a count. Where the
numbers come from until the pass reaches a message:

* :meth:`Repository.token_total` / ``token_totals``: cached counts plus the missing
  ones counted on demand (not stored), so they are right at any time;
* the memory engine, preflight, compaction and request assembly count every message
  they load that has no count (``fill_counts`` / ``assemble``), so they are right too;
* ``SessionInfo.token_count`` (the cached per-session total shown in the session list,
  the status bar, ``workbench sessions`` and the gauge of very long sessions) leaves
  uncounted messages out until the pass has counted them.
"""

from __future__ import annotations

import os
import queue
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from workbench.core.conversation import (
    Conversation,
    ForkOrigin,
    ImportNote,
    Message,
    SessionInfo,
    SkippedEntry,
    utcnow,
)
from workbench.core.gcpause import collector_paused
from workbench.core.handoff import quick_handoff
from workbench.core.tokens import TokenCounter, fill_counts, get_counter
from workbench.engine.import_report import ImportReport, ProgressCallback
from workbench.errors import DatabaseUnavailableError, WorkbenchError
from workbench.store import bulk
from workbench.store.repository import ImportOutcome, Repository

# A batch (one transaction) grows up to these sizes while the reader is ahead of the
# writer; when the writer has caught up, it writes what it has instead of waiting, once
# it holds MIN_BATCH_MESSAGES. Big batches save the fixed costs of a transaction
# (commit, checkpoint, and above all the full-text index: each commit adds a segment
# that later ones merge). Writing the 100 MB ChatGPT export in batches of about 1,600
# messages (what the writer had whenever it caught up) cost it 2.3 s of CPU, in
# batches of 10,000 or more 1.8 s; the last batch, written after the reading ends,
# stays short.
BATCH_CONVERSATIONS = 2000
BATCH_MESSAGES = 50_000
MIN_BATCH_MESSAGES = 10_000
# The reader hands conversations over in chunks of this many (fewer queue operations),
# and runs at most QUEUE_CHUNKS chunks ahead of the writer.
CHUNK_CONVERSATIONS = 50
QUEUE_CHUNKS = 24
# Chunks counted ahead of the one being prepared, and the threads counting them: all
# cores but one (the parse holds the interpreter lock; counting and writing mostly not).
COUNT_AHEAD_CHUNKS = 2
COUNT_WORKERS = max(1, (os.cpu_count() or 2) - 1)
# Characters of message text whose counts the reader remembers (see _Reader._fill_counts).
COUNT_MEMO_CHARS = 4_000_000
# Messages counted per transaction by count_missing_tokens: small enough that a user's
# change waits at most a fraction of a second for the pass.
COUNT_CHUNK = 1000
# The interpreter's switch interval while an import runs (see core.handoff).
IMPORT_SWITCH_INTERVAL = 0.001


def import_conversations(
    repo: Repository,
    items: Iterable[Conversation | SkippedEntry | ImportNote],
    *,
    replace: bool = False,
    progress: ProgressCallback | None = None,
    counter: TokenCounter | None = None,
    count_tokens: bool = True,
    source_file: str | None = None,
) -> ImportReport:
    """Store every conversation of ``items``.

    ``source_file`` names the file (or folder) the conversations come from, for those
    that do not name one themselves: with ``replace`` only a session read from the same
    file and source id is replaced (see :meth:`Repository.import_conversation`).

    Entries the format skipped, and conversations the store refuses, land in
    ``skipped`` with their reason. ``progress`` is called after each conversation read
    with the number read so far; returning False stops the import there (the
    conversations read until then are stored whole, nothing after them). With
    ``count_tokens`` false, messages without a token count are stored without one (see
    the module docstring); else they are counted first (with ``counter``, by default
    the default encoding's).
    """
    report = ImportReport()
    if not count_tokens:
        counter = None
    agent_id = repo.default_agent().id
    batch: list[bulk.PreparedConversation] = []
    batch_messages = 0

    forks = _Forks()

    def flush() -> None:
        nonlocal batch, batch_messages
        if batch:
            _store_batch(repo, batch, agent_id, replace, report, forks)
        batch, batch_messages = [], 0

    read = 0
    # After each SQLite step the writing thread needs the interpreter lock back, and
    # while the reader runs Python it would wait up to 5 ms for it: see core.handoff.
    # The parse makes millions of objects (decoded JSON, messages, rows) that reference
    # counting frees and that form no cycles: the collector's passes over them cost a
    # fifth of the reader's time and find nothing, so it is paused (core.gcpause).
    with (
        collector_paused(),
        quick_handoff(IMPORT_SWITCH_INTERVAL),
        _Reader(items, counter, source_file, count=count_tokens) as reader,
    ):
        for item in reader:
            if item is _WAITING:
                # The reader is behind: write what is ready instead of waiting for more
                # (unless it is very little: each transaction has a fixed cost).
                if batch_messages >= MIN_BATCH_MESSAGES:
                    flush()
                continue
            if isinstance(item, _Stopped):
                # Reading failed part-way: what was read is still stored, and the
                # report says where reading stopped and why.
                report.skipped.append(item.entry)
                break
            if isinstance(item, SkippedEntry):
                report.skipped.append(item)
                continue
            if isinstance(item, ImportNote):
                report.notes.append(item)
                continue
            read += 1
            if isinstance(item, _Refused):
                report.skipped.append(item.entry)
            else:
                batch.append(item)
                batch_messages += len(item.messages)
                if len(batch) >= BATCH_CONVERSATIONS or batch_messages >= BATCH_MESSAGES:
                    flush()
            if progress is not None and progress(read, None) is False:
                # Whole conversations only: what was read so far is stored, nothing after.
                report.cancelled = True
                break
        flush()
    report.notes.extend(forks.link(repo))
    if report.updated or any(created for _, created in report.sessions):
        repo.db.settle()  # the team store's statistics know the new rows (see Database)
    return report


def count_missing_tokens(
    repo: Repository, *, counter: TokenCounter | None = None, chunk: int = COUNT_CHUNK
) -> Iterator[tuple[int, int]]:
    """Fill the token count of every message stored without one; yields ``(counted so
    far, total to count)`` after each transaction of up to ``chunk`` messages.

    Each transaction is whole (counts and session totals together), so stopping the
    iteration anywhere leaves a consistent database; a later pass picks up the rest.
    Messages appended meanwhile without a count are counted too.
    """
    counter = counter or get_counter()
    total, first = repo.missing_token_counts()
    if not total:
        return
    after = first - 1
    done = 0
    while True:
        counted, after = repo.fill_token_counts(
            counter.count_messages, counter.encoding_name, after_id=after, limit=chunk
        )
        if not counted:
            if done:
                repo.db.settle()  # as after an import: every counted row was rewritten
            return
        done += counted
        yield done, max(total, done)


# -- the reader thread ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Refused:
    """A conversation the store would refuse (found while preparing its rows)."""

    entry: SkippedEntry


@dataclass(frozen=True)
class _Failure:
    error: BaseException


@dataclass(frozen=True)
class _Stopped:
    """Reading stopped on an error after some items (yielded by :class:`_Reader`)."""

    entry: SkippedEntry


def _stopped(exc: Exception, read: int) -> _Stopped:
    after = f"after {read:,} conversation(s)" if read else "before any conversation"
    if isinstance(exc, WorkbenchError):
        entry = getattr(exc, "entry", None) or "the rest of the file"
        reason = f"{exc} Reading stopped there ({after}); nothing after it was imported."
    else:
        entry = "the rest of the file"
        reason = (
            f"Reading stopped {after} on an unexpected error ({type(exc).__name__}: {exc}); "
            "nothing after it was imported."
        )
    return _Stopped(SkippedEntry(entry=entry, reason=reason))


_END = object()
_WAITING = object()  # yielded by _Reader when nothing is ready yet


def _refusal(conv: Conversation, exc: Exception) -> _Refused:
    label = conv.source_id or conv.title
    return _Refused(SkippedEntry(entry=str(label), reason=str(exc)))


class _Reader:
    """Iterates ``items`` on a thread of its own, preparing each conversation's rows.

    Yields, in the order of ``items``: :class:`SkippedEntry` (passed through),
    :class:`bulk.PreparedConversation`, or :class:`_Refused`; and ``_WAITING`` whenever
    it is about to wait for the reading thread. An error raised while
    reading is raised again in the iterating thread. Leaving the ``with`` block stops
    the thread (it may have read a few chunks ahead; those are dropped).
    """

    def __init__(
        self,
        items: Iterable[Conversation | SkippedEntry | ImportNote],
        counter: TokenCounter | None,
        source_file: str | None = None,
        *,
        count: bool | None = None,
    ) -> None:
        self._items = items
        # Counting when asked to or given a counter; the default counter is loaded by
        # the counting thread (its vocabulary takes a fifth of a second) while the first
        # conversations are read.
        self._counting = counter is not None if count is None else count
        self._given = counter
        self._counter: TokenCounter | None = None
        self._counter_lock = threading.Lock()
        self._memo: dict[tuple[str, str | None], int] = {}
        self._memo_chars = 0
        self._source_file = source_file
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=QUEUE_CHUNKS)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="workbench-import-reader")

    def __enter__(self) -> _Reader:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        while self._thread.is_alive():
            # Unblock a reader waiting on a full queue, then wait for it to notice.
            self._drain()
            self._thread.join(0.05)
        self._drain()

    def _drain(self) -> None:
        try:
            while True:
                self._queue.get_nowait()
        except queue.Empty:
            pass

    def __iter__(self) -> Iterator[Any]:
        read = 0
        while True:
            try:
                chunk = self._queue.get_nowait()
            except queue.Empty:
                yield _WAITING
                chunk = self._queue.get()
            if chunk is _END:
                return
            if isinstance(chunk, _Failure):
                error = chunk.error
                if not isinstance(error, Exception) or isinstance(error, MemoryError):
                    raise error
                yield _stopped(error, read)
                return
            read += sum(1 for item in chunk if not isinstance(item, SkippedEntry | ImportNote))
            yield from chunk

    # -- on the reader thread ------------------------------------------------------------

    def _put(self, value: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(value, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        counting = (
            ThreadPoolExecutor(COUNT_WORKERS, thread_name_prefix="workbench-import-count")
            if self._counting
            else None
        )
        # Chunks whose messages are being counted, oldest first: each is prepared (and
        # handed to the writer) once its counts are in, while the next ones are parsed.
        pending: deque[tuple[list[Any], Future[Any] | None]] = deque()
        failure: BaseException | None = None
        try:
            chunk: list[Any] = []
            items = iter(self._items)
            while not self._stop.is_set():
                try:
                    item = next(items)
                except StopIteration:
                    break
                except BaseException as exc:  # noqa: BLE001 - handed over after what was read
                    failure = exc
                    break
                chunk.append(item)
                if len(chunk) >= CHUNK_CONVERSATIONS:
                    pending.append((chunk, self._count(counting, chunk)))
                    chunk = []
                    while len(pending) > COUNT_AHEAD_CHUNKS:
                        if not self._hand_over(*pending.popleft()):
                            return
            if self._stop.is_set():
                return
            if chunk:
                pending.append((chunk, self._count(counting, chunk)))
            while pending:
                if not self._hand_over(*pending.popleft()):
                    return
            self._put(_END if failure is None else _Failure(failure))
        except BaseException as exc:  # noqa: BLE001 - handed to the iterating thread
            self._put(_Failure(exc))
        finally:
            if counting is not None:
                counting.shutdown(wait=True, cancel_futures=True)

    def _count(self, pool: ThreadPoolExecutor | None, chunk: list[Any]) -> Future[Any] | None:
        """Start counting the tokens of ``chunk``'s messages on the counting thread.

        tiktoken lets go of the interpreter lock while it encodes, so the counts are
        made while this thread parses the next conversations and the writer stores
        the previous ones: the counting costs about what the parse does, and overlaps.
        """
        if pool is None or not self._counting:
            return None
        messages = [m for c in chunk if isinstance(c, Conversation) for m in c.messages]
        return pool.submit(self._fill_counts, messages) if messages else None

    def _fill_counts(self, messages: list[Message]) -> None:
        """:func:`fill_counts` with a memo of the counts of recent plain messages.

        Branches of a conversation tree (ChatGPT, Open WebUI) repeat their main
        conversation's messages up to the branch point, and the formats yield them
        right after it: those are counted once. The memo is emptied whenever it holds
        more than ``COUNT_MEMO_CHARS`` characters of text, so memory stays flat.
        """
        counter = self._resolve_counter()
        name = counter.encoding_name
        memo = self._memo
        todo: list[Message] = []
        for m in messages:
            if m.token_count is not None and m.token_encoding == name:
                continue
            if not (m.name or m.tool_call_id or m.tool_calls):
                known = memo.get((m.role, m.content))
                if known is not None:
                    m.token_count, m.token_encoding = known, name
                    continue
            todo.append(m)
        if not todo:
            return
        fill_counts(todo, counter)
        for m in todo:
            if not (m.name or m.tool_call_id or m.tool_calls) and m.token_count is not None:
                self._memo_chars += len(m.content or "")
                memo[(m.role, m.content)] = m.token_count
        if self._memo_chars > COUNT_MEMO_CHARS:
            memo.clear()
            self._memo_chars = 0

    def _resolve_counter(self) -> TokenCounter:
        with self._counter_lock:
            if self._counter is None:
                counter = self._given or get_counter()
                # One thread encodes a chunk's texts: counting them on several would
                # compete with the parse and the writer for the same cores.
                if type(counter) is TokenCounter:
                    counter = TokenCounter(counter.encoding, threads=1)
                self._counter = counter
            return self._counter

    def _hand_over(self, chunk: list[Any], counted: Future[Any] | None) -> bool:
        if counted is not None:
            counted.result()  # an error counting is raised here, as a reading error
        return self._put(self._prepare(chunk))

    def _prepare(self, chunk: list[Any]) -> list[Any]:
        now = utcnow()
        prepared: list[Any] = []
        for item in chunk:
            if isinstance(item, Conversation):
                if item.source_file is None:
                    item.source_file = self._source_file
                try:
                    prepared.append(bulk.prepare(item, now))
                except (WorkbenchError, ValueError, TypeError, RecursionError) as exc:
                    # ValueError and the rest: a value the JSON columns cannot hold.
                    prepared.append(_refusal(item, exc))
            else:
                prepared.append(item)
        return prepared


# -- storing -------------------------------------------------------------------------------


class _Forks:
    """Forks to link to the session they were forked from, once both are stored.

    Two kinds: branch conversations of a tree (ChatGPT, Open WebUI), linked to their
    main session at the branch point (SPEC §7): a branch names its main conversation's
    source id in ``metadata["branch_of"]``, and its first message that differs from the
    main one carries ``branch_start`` (the message before it is where the branch leaves
    the main session); and sessions whose export names the session they were forked
    from (``Conversation.forked_from``), found in the same import or else in the
    database. A fork whose origin is in neither is imported without the link, and the
    report says so.
    """

    def __init__(self) -> None:
        self.stored: dict[tuple[str | None, str], int] = {}
        self.wanted: list[tuple[int, tuple[str | None, str], int]] = []
        self.exported: list[tuple[SessionInfo, ForkOrigin]] = []

    def note(self, conv: Conversation, outcome: ImportOutcome) -> None:
        if conv.source_id is not None:
            self.stored[(conv.source, conv.source_id)] = outcome.session.id
        if not outcome.created:
            return
        if conv.forked_from is not None:
            self.exported.append((outcome.session, conv.forked_from))
            return
        branch_of = conv.metadata.get("branch_of") if conv.metadata else None
        if not isinstance(branch_of, str):
            return
        for index, message in enumerate(conv.messages):
            if message.metadata.get("branch_start"):
                if index > 0:
                    self.wanted.append((outcome.session.id, (conv.source, branch_of), index - 1))
                return

    def link(self, repo: Repository) -> list[ImportNote]:
        """Link the forks whose origin is known (at the message they were forked at,
        else at the session alone); a note for each fork left unlinked or linked
        without its message."""
        links: list[tuple[int, int, int | None]] = [
            (session_id, self.stored[main], position)
            for session_id, main, position in self.wanted if main in self.stored
        ]
        notes: list[ImportNote] = []
        tried: list[tuple[SessionInfo, ForkOrigin]] = []
        for info, origin in self.exported:
            parent = self.stored.get((origin.source, origin.source_id))
            if parent is None:
                parent = repo.find_exported(origin.source, origin.source_id)
            if parent is None:
                notes.append(_unlinked(info, origin))
                continue
            links.append((info.id, parent, origin.position))
            tried.append((info, origin))
        linked = repo.set_fork_origins(links)
        notes += [_linked_without_message(info, origin) for info, origin in tried
                  if info.id not in linked]
        return notes


def _fork_entry(info: SessionInfo) -> str:
    return f"session {info.id} ({info.title!r})"


def _unlinked(info: SessionInfo, origin: ForkOrigin) -> ImportNote:
    """The note on a fork imported without its link to the session it was forked from."""
    return ImportNote(
        entry=_fork_entry(info),
        note=f"the session it was forked from, {origin.source_id} ({origin.source}), is "
             "neither in the file nor in the database: it was imported without the link "
             "to it.",
    )


def _linked_without_message(info: SessionInfo, origin: ForkOrigin) -> ImportNote:
    """The note on a fork linked to the session it was forked from, but not to the
    message it was forked at."""
    parent = f"{origin.source_id} ({origin.source})"
    if origin.position is None:
        why = ("the message it was forked at had been deleted from that session before "
               "the export")
    else:
        why = (f"that session no longer holds the message it was forked at (position "
               f"{origin.position})")
    return ImportNote(
        entry=_fork_entry(info),
        note=f"it is linked to the session it was forked from, {parent}, but not to a "
             f"message of it: {why}.",
    )


def _store_batch(
    repo: Repository,
    batch: list[bulk.PreparedConversation],
    agent_id: int,
    replace: bool,
    report: ImportReport,
    forks: _Forks,
) -> None:
    try:
        outcomes = repo.import_many(batch, agent_id=agent_id, replace=replace)
    except DatabaseUnavailableError:
        raise  # no conversation could be stored: the import stops, it skips nothing
    except (WorkbenchError, SQLAlchemyError, ValueError):
        # ValueError: text SQLite cannot take (UnicodeEncodeError is one); the
        # conversations are stored one by one below so that only the bad one is lost.
        outcomes = None
    if outcomes is not None:
        for prepared, outcome in zip(batch, outcomes, strict=True):
            report.add(outcome)
            forks.note(prepared.conversation, outcome)
        return
    for prepared in batch:
        conv = prepared.conversation
        try:
            outcome = repo.import_conversation(conv, agent_id=agent_id, replace=replace)
        except DatabaseUnavailableError:
            raise
        except (WorkbenchError, SQLAlchemyError, ValueError) as exc:
            label = conv.source_id or conv.title
            reason = str(getattr(exc, "orig", None) or exc)
            report.skipped.append(SkippedEntry(entry=str(label), reason=reason))
            continue
        report.add(outcome)
        forks.note(conv, outcome)
