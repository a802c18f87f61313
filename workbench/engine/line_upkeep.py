"""Keeping the summary lines of a database written before they were kept, in the
background, before anyone previews a compaction.

A database written before migration ``0003_summary_lines`` holds messages without the
summary line each message keeps since (see :mod:`workbench.store.summary_lines`). A
compaction preview of a long session then writes and counts every line itself, which
costs more CPU than a preview may take on a busy machine. :class:`LineUpkeep` keeps the
missing lines on a thread of its own when a workspace opens such a database: session by
session, the most recently changed first (a session asked for with
:meth:`LineUpkeep.prefer`, the one a window shows, goes before the rest), a few hundred
messages per write transaction, so a person's own write never waits for more than one
short batch. After each batch it rests about as long as the batch took, so it takes at
most about half a core. Stopping (:meth:`LineUpkeep.stop`, called by
:meth:`Workspace.close`) takes effect between two batches; the work done is kept and
the next open goes on from there.

No view shows the lines, so the writes are not announced as this process's own
(``Database.write(shown=False)``): a window that sees the file change while only they
were written takes it for another writer's change and compares what it shows (a window
that took them for its own would overlook another process's change made meanwhile), and
on the team store the other desktops are not told of them.

Once a whole pass found nothing left to keep, the database records it
(:data:`~workbench.store.summary_lines.LINES_KEPT_SETTING`) and later opens skip the pass:
every message written since 0003 keeps its line, so the check costs one setting's read.
A message whose line is missing anyway (an import that left counting for later, until
its counting pass) is still summarized right by a preview, only slower.

:func:`keep_missing_lines` is the pass itself, which the command line and the benchmarks
run in the calling thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from workbench.core.gcpause import collector_paused
from workbench.core.tokens import KNOWN_ENCODINGS, get_counter
from workbench.errors import WorkbenchError
from workbench.store.db import Database
from workbench.store.repository import Repository
from workbench.store.summary_lines import (
    LINES_KEPT_SETTING,
    keep_lines_of,
    record_lines_kept,
    sessions_by_change,
    unkept_lines,
)

__all__ = ["LineUpkeep", "LineUpkeepReport", "keep_missing_lines", "lines_kept"]

log = logging.getLogger(__name__)

#: Messages per write transaction (a few milliseconds of writing).
BATCH = 256


@dataclass
class LineUpkeepReport:
    """What a pass did: the sessions it went through to the end, the lines it wrote,
    how long it ran (wall clock and the CPU of its thread; its longest batch), whether
    it went through every session (``complete``; then the database records it) and,
    when it ended early on an error, the error's sentence."""

    sessions: int = 0
    lines: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    complete: bool = False
    skipped: bool = False  # the database said every line was kept already
    error: str = ""
    longest_batch: float = 0.0  # seconds: the longest write transaction of the pass


def lines_kept(repo: Repository) -> bool:
    """Whether a pass already found every message's summary line kept."""
    return bool(repo.get_setting(LINES_KEPT_SETTING, False))


def keep_missing_lines(
    db: Database,
    *,
    sessions: Iterable[int] | None = None,
    stop: threading.Event | None = None,
    preferred: Callable[[], int | None] | None = None,
    on_session: Callable[[int, int], object] | None = None,
    batch: int = BATCH,
    rest: float = 0.0,
) -> LineUpkeepReport:
    """Keep the summary lines every message of ``sessions`` (default: every session,
    the most recently changed first) lacks, ``batch`` messages per write transaction;
    returns what it did.

    ``stop``, once set, ends the pass between two batches. ``preferred`` is asked
    between batches for a session to go on with first (``None``: none). ``on_session``
    hears ``(session id, lines written in it)`` when a session is done. After each batch
    the pass waits ``rest`` times as long as the batch took (on ``stop``, so a stop
    ends the wait). A pass over every session that ends without a stop or an error
    records that the database keeps every line (see :func:`lines_kept`).
    """
    stop = stop or threading.Event()
    report = LineUpkeepReport()
    started, cpu_started = time.perf_counter(), time.thread_time()
    every = sessions is None
    try:
        queue: deque[int] = deque(sessions_by_change(db) if sessions is None else sessions)
        done: set[int] = set()
        after: dict[int, int] = {}  # where a session left for a preferred one goes on
        written: dict[int, int] = {}
        ready: set[str | None] = set()  # token encodings whose counter is loaded
        while not stop.is_set():
            wanted = preferred() if preferred is not None else None
            if wanted is not None and wanted not in done:
                session = wanted
            else:
                while queue and queue[0] in done:
                    queue.popleft()
                if not queue:
                    break
                session = queue[0]
            found = unkept_lines(db, session, after=after.get(session, -1), limit=batch)
            if not found:
                done.add(session)
                report.sessions += 1
                if on_session is not None:
                    on_session(session, written.pop(session, 0))
                continue
            for encoding in {enc for _, _, enc in found} - ready:
                ready.add(encoding)
                if encoding in KNOWN_ENCODINGS:
                    # Its vocabulary loaded now (a third of a second), not in the write.
                    get_counter(encoding).count_text("ready")
            batch_started = time.perf_counter()
            # The batch's messages live for the batch: the collector need not walk them
            # (its full passes hold every thread, the window's too; see core.gcpause).
            with collector_paused():
                count = keep_lines_of(db, [mid for mid, _, _ in found])
            report.lines += count
            report.longest_batch = max(report.longest_batch,
                                       time.perf_counter() - batch_started)
            written[session] = written.get(session, 0) + count
            after[session] = found[-1][1]
            if rest > 0:
                stop.wait((time.perf_counter() - batch_started) * rest)
        else:
            return report
        if every:
            report.complete = True
            record_lines_kept(db)
    except WorkbenchError as exc:  # busy or gone for longer than a write waits: later
        report.error = str(exc)
        log.info("Keeping the summary lines stopped: %s", exc)
    finally:
        report.seconds = time.perf_counter() - started
        report.cpu_seconds = time.thread_time() - cpu_started
    return report


class LineUpkeep:
    """The background pass of :func:`keep_missing_lines` over one open database.

    :meth:`start` runs it on a daemon thread, which ends at once when the database says
    every line is kept; :meth:`stop` ends it between two batches and returns once the
    thread is out of the database. :attr:`finished` is set when the pass has ended (or
    was not needed); :attr:`report` then says what it did. Its writes are not announced
    (``Database.write(shown=False)``): no view shows summary lines.
    """

    def __init__(self, db: Database, *, batch: int = BATCH, rest: float = 1.0,
                 on_session: Callable[[int, int], object] | None = None) -> None:
        self.db = db
        self.batch = batch
        self.rest = rest
        self.on_session = on_session
        self.report = LineUpkeepReport()
        self.finished = threading.Event()
        self._stop = threading.Event()
        self._preferred: deque[int] = deque()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """Whether the pass was started and has not ended."""
        return self._thread is not None and not self.finished.is_set()

    def start(self) -> bool:
        """Start the pass on its thread (once); whether it was started now. The thread
        first reads whether every line is known to be kept (then it ends at once, with
        :attr:`LineUpkeepReport.skipped`): nothing here waits on the database, which
        may be a server."""
        if self._thread is not None or self.finished.is_set():
            return False
        if self._stop.is_set():
            self.finished.set()
            return False
        self._thread = threading.Thread(target=self._run, name="workbench-summary-lines",
                                        daemon=True)
        self._thread.start()
        return True

    def prefer(self, session_id: int) -> None:
        """Keep ``session_id``'s lines next (the session a window just opened)."""
        with self._lock:
            if session_id in self._preferred:
                self._preferred.remove(session_id)
            self._preferred.appendleft(session_id)

    def _next_preferred(self) -> int | None:
        with self._lock:
            return self._preferred[0] if self._preferred else None

    def _session_done(self, session_id: int, lines: int) -> None:
        with self._lock:
            if session_id in self._preferred:
                self._preferred.remove(session_id)
        if self.on_session is not None:
            self.on_session(session_id, lines)

    def _run(self) -> None:
        try:
            if lines_kept(Repository(self.db)):
                self.report = LineUpkeepReport(complete=True, skipped=True)
                return
            self.report = keep_missing_lines(
                self.db, stop=self._stop, preferred=self._next_preferred,
                on_session=self._session_done, batch=self.batch, rest=self.rest,
            )
        except WorkbenchError as exc:  # the setting unreadable: the database is away
            self.report = LineUpkeepReport(error=str(exc))
            log.info("Keeping the summary lines did not start: %s", exc)
        except Exception:  # a bug must not pass silently, nor keep stop() waiting
            log.exception("Keeping the summary lines failed")
        finally:
            self.finished.set()

    def request_stop(self) -> None:
        """Ask the pass to end after the batch in hand, without waiting for it."""
        self._stop.set()

    def stop(self) -> None:
        """End the pass between two batches and wait until its thread is out of the
        database (at once when it never started or has ended)."""
        self._stop.set()
        if self._thread is not None:
            self.finished.wait()
