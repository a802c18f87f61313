"""The timeline's model: one row per shown message, text fetched in pages on demand.

A session of 100,000 messages is never held whole. The model keeps

* the session's **shape** (:class:`SessionIndex`): one id, one role code and one state
  code per position, in compact arrays (about 10 bytes a message), read once in a
  worker thread because reading it costs as much as 250 ms for 100,000 messages;
* the **rows** shown: a ``range`` (every message, in order) or a list of positions,
  built with C-speed primitives (``bytes.translate`` then ``itertools.compress``, and a
  regular expression over the state codes to find folded runs), so a role filter
  rebuilds the rows of 100,000 messages in a few milliseconds;
* a small cache of **pages** of whole messages (:data:`PAGE` messages each, least
  recently used dropped first), fetched by position with the store's keyset paging
  (about 3 ms a page wherever it is). The view asks only for the rows it shows, and
  :meth:`TimelineModel.prefetch` reads the neighbouring pages in a worker, so scrolling
  rarely waits even for that.

Folded and evicted messages that follow each other collapse behind one **marker row**
("23 messages folded into the summary"); expanding the marker shows them (greyed) after it.
A marker over messages a compaction folded names it (its id, time and the tokens it
saved, from the engine's compaction history) and, expanded, shows the summary it wrote.

A compaction preview marks the messages it would fold (:meth:`TimelineModel.set_fold_preview`,
read through :data:`WillFoldRole`) so the delegate can tint them until it is applied or
dropped.

Until the shape has arrived (a long session), rows are every position in order and
role chips wait; sessions up to :data:`SYNC_INDEX_LIMIT` messages read their shape at
once, so a short session never changes under the reader.

Row filtering is done here rather than in a ``QSortFilterProxyModel``: a proxy calls
back into Python once per row on every change, which costs far more than the 100 ms a
role toggle may take on 100,000 rows.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import compress
from typing import Any

from PySide6.QtCore import (
    QAbstractListModel,
    QModelIndex,
    Qt,
    Signal,
)

from workbench.core.compaction import CompactionRecord
from workbench.core.conversation import ROLES, Message
from workbench.engine import compaction
from workbench.engine.workspace import Workspace
from workbench.errors import NotFoundError
from workbench.gui.delegates.markdown import plain_tooltip
from workbench.gui.models import ModelIndex
from workbench.gui.workers import Job

PAGE = 100
MAX_PAGES = 40
SYNC_INDEX_LIMIT = 5_000
REREAD_PAGES = 4  # pages read with a session read again on a worker (those last looked at)
PREFETCH_MARGIN = 60
SYNC_READ = 24  # messages read at once on the UI thread for a row whose page is not cached

ROLE_CODES: dict[str, int] = {"system": ord("s"), "user": ord("u"), "assistant": ord("a"),
                              "tool": ord("t")}
CODE_ROLES: dict[int, str] = {code: role for role, code in ROLE_CODES.items()}
STATE_CODES: dict[str, int] = {"active": ord("a"), "folded": ord("f"), "evicted": ord("e")}
CODE_STATES: dict[int, str] = {code: state for state, code in STATE_CODES.items()}
_RUN_RE = re.compile(rb"f+|e+")

# Item data roles of the timeline.
KindRole = Qt.ItemDataRole.UserRole + 1  # "message", "marker" or "pending"
MessageRole = Qt.ItemDataRole.UserRole + 2  # the Message (fetched on demand)
PositionRole = Qt.ItemDataRole.UserRole + 3  # position in the session (a marker: its start)
RunRole = Qt.ItemDataRole.UserRole + 4  # the FoldRun of a marker row
KeyRole = Qt.ItemDataRole.UserRole + 5  # a hashable that changes when the row's look does
StateRole = Qt.ItemDataRole.UserRole + 6  # "active", "folded", "evicted"
WillFoldRole = Qt.ItemDataRole.UserRole + 7  # True for a message the shown preview would fold
CompactionsRole = Qt.ItemDataRole.UserRole + 8  # a marker's CompactionRecords (may be empty)
SummaryRole = Qt.ItemDataRole.UserRole + 9  # a folded marker's summary text (or "")


class SessionIndex:
    """The shape of a session without its text: id, role and state of every position."""

    def __init__(self, ids: array, roles: bytearray, states: bytearray):
        self.ids = ids
        self.roles = roles
        self.states = states

    @classmethod
    def from_rows(cls, rows: Sequence[tuple[int, int, str, str]]) -> SessionIndex:
        """Build from ``Repository.message_index`` rows (dense positions, in order)."""
        ids = array("q", [r[0] for r in rows])
        roles = bytearray(ROLE_CODES[r[2]] for r in rows)
        states = bytearray(STATE_CODES[r[3]] for r in rows)
        return cls(ids, roles, states)

    @classmethod
    def load(cls, workspace: Workspace, session_id: int) -> SessionIndex:
        """Read the shape of a session from the workspace (slow for long sessions)."""
        return cls.from_rows(workspace.message_index(session_id))

    def __len__(self) -> int:
        return len(self.ids)

    def role_counts(self) -> dict[str, int]:
        """Messages of each role, every role present."""
        return {role: self.roles.count(code) for role, code in ROLE_CODES.items()}

    def role_at(self, position: int) -> str:
        return CODE_ROLES[self.roles[position]]

    def state_at(self, position: int) -> str:
        return CODE_STATES[self.states[position]]

    def position_of(self, message_id: int) -> int | None:
        try:
            return self.ids.index(message_id)
        except ValueError:
            return None

    def insert(self, position: int, message: Message) -> None:
        self.ids.insert(position, int(message.id or 0))
        self.roles.insert(position, ROLE_CODES[message.role])
        self.states.insert(position, STATE_CODES[message.state])

    def remove(self, position: int) -> None:
        del self.ids[position]
        del self.roles[position]
        del self.states[position]

    def update(self, position: int, message: Message) -> None:
        self.ids[position] = int(message.id or 0)
        self.roles[position] = ROLE_CODES[message.role]
        self.states[position] = STATE_CODES[message.state]


@dataclass(frozen=True)
class FoldRun:
    """Consecutive folded (or evicted) messages shown as one marker row."""

    start: int  # first position
    end: int  # one past the last position
    state: str
    key: int  # id of the first message: names the run across edits elsewhere
    shown: int  # messages of the shown roles inside the run
    expanded: bool

    @property
    def size(self) -> int:
        return self.end - self.start

    def label(self) -> str:
        what = "folded into the summary" if self.state == "folded" else "evicted from memory"
        noun = "message" if self.shown == 1 else "messages"
        action = "hide" if self.expanded else "show"
        return f"{self.shown:,} {noun} {what}: {action}"


def compaction_label(run: FoldRun, records: Sequence[CompactionRecord]) -> str:
    """A marker's text when compactions folded its messages, on two lines: which ones,
    when and the tokens saved; then how many messages folded."""
    if not records:
        return run.label()
    ids = ", ".join(f"#{r.id}" for r in records)
    noun = "Compaction" if len(records) == 1 else "Compactions"
    when = records[-1].created_at.astimezone().strftime("%Y-%m-%d %H:%M")
    saved = sum(r.tokens_saved for r in records)
    # Never a negative "saved": a compaction that made the request bigger saved nothing.
    saved_text = (f"{saved:,} token{'s' if saved != 1 else ''} saved" if saved > 0
                  else "no tokens saved")
    messages = "message" if run.shown == 1 else "messages"
    action = "hide" if run.expanded else "show the summary"
    return (f"{noun} {ids} · {when} · {saved_text}\n"
            f"{run.shown:,} {messages} folded into the summary: {action}")


@dataclass
class Rows:
    """What the rows are: each value a position (>= 0) or a marker (-1 - run number)."""

    rows: Sequence[int]
    keys: Sequence[int]  # sorted: the position of each row (a marker: its run's start)
    runs: list[FoldRun] = field(default_factory=list)


def build_rows(index: SessionIndex, allowed: set[str], expanded: set[int]) -> Rows:
    """The rows for a session shape, the roles shown and the runs expanded (by key)."""
    n = len(index)
    table = bytearray(256)
    for role in allowed:
        table[ROLE_CODES[role]] = 1
    every_role = all(role in allowed for role in ROLES)
    active = index.states.count(STATE_CODES["active"]) == n
    if active and every_role:
        everything = range(n)
        return Rows(everything, everything)
    selector = bytes(index.roles).translate(bytes(table))
    if active:
        shown = list(compress(range(n), selector))
        return Rows(shown, shown)
    rows: list[int] = []
    keys: list[int] = []
    runs: list[FoldRun] = []
    previous = 0
    for match in _RUN_RE.finditer(bytes(index.states)):
        start, end = match.span()
        segment = list(compress(range(previous, start), selector[previous:start]))
        rows.extend(segment)
        keys.extend(segment)
        count = selector.count(1, start, end)
        if count:
            key = int(index.ids[start])
            run = FoldRun(start, end, CODE_STATES[index.states[start]], key, count,
                          key in expanded)
            rows.append(-1 - len(runs))
            keys.append(start)
            runs.append(run)
            if run.expanded:
                inner = list(compress(range(start, end), selector[start:end]))
                rows.extend(inner)
                keys.extend(inner)
        previous = end
    tail = list(compress(range(previous, n), selector[previous:n]))
    rows.extend(tail)
    keys.extend(tail)
    return Rows(rows, keys, runs)


@dataclass
class _Reread:
    """A session read again on a worker: its shape, the pages asked for and, when it was
    shown, its compaction history."""

    index: SessionIndex
    pages: dict[int, list[Message]]
    history: list[CompactionRecord] | None


def _applied(records: Sequence[CompactionRecord]) -> list[CompactionRecord]:
    """The compactions of ``records`` still in effect (not undone)."""
    return [r for r in records if not r.undone]


def _read_again(workspace: Workspace, session_id: int, numbers: Sequence[int],
                with_history: bool) -> _Reread | None:
    """Read what :meth:`TimelineModel.reload` shows (None when the session is gone)."""
    try:
        index = SessionIndex.load(workspace, session_id)
        pages = {number: workspace.page_messages(session_id,
                                                 after_position=number * PAGE - 1,
                                                 limit=PAGE)
                 for number in numbers if number * PAGE < len(index)}
        history = compaction.history(workspace, session_id) if with_history else None
        if not index.ids:
            workspace.get_session(session_id)  # empty, or gone?
    except NotFoundError:
        return None
    return _Reread(index, pages, history)


class TimelineModel(QAbstractListModel):
    """The messages of one session as rows (see the module docstring)."""

    index_loaded = Signal()  # the session's shape arrived: role counts are known
    role_counts_changed = Signal(object)  # {role: count}, or None while not known
    edit_requested = Signal(object, str, str)  # message, new role, new content
    session_changed = Signal(int)  # session id (0: none)

    def __init__(self, workspace: Workspace, workers: Any = None, parent: Any = None) -> None:
        super().__init__(parent)
        self._workspace = workspace
        self._workers = workers  # a WorkerPool, or None to read everything in this thread
        self._session_id = 0
        self._count = 0
        self._index: SessionIndex | None = None
        self._rows = Rows(range(0), range(0))
        self._allowed: set[str] = set(ROLES)
        self._expanded: set[int] = set()
        # Pages of messages by number; None where a page read in part has no message yet.
        self._pages: OrderedDict[int, list[Message | None]] = OrderedDict()
        # Pages being read, by number; the index is read with the key (self, "index").
        # Every change cancels them (_drop_reads), so no late result lands.
        self._page_jobs: dict[int, Job] = {}
        self._pending: list[Message] = []  # a turn being streamed, not (yet) stored
        self._revisions: dict[int, int] = {}  # message id -> edits seen (part of KeyRole)
        self._summary: str | None = None  # the session's long-term summary, read on demand
        self._fold_preview: frozenset[int] = frozenset()  # ids a shown preview would fold
        self._compactions: list[CompactionRecord] | None = None  # applied ones, on demand
        self._run_records: dict[int, list[CompactionRecord]] | None = None  # by run key
        # Moves with every change this model makes or is told of: a session read again on
        # a worker (:meth:`reload` on the team store) lands only if none came meanwhile.
        self._generation = 0

    # -- session -----------------------------------------------------------------------

    @property
    def workspace(self) -> Workspace:
        return self._workspace

    def set_workspace(self, workspace: Workspace) -> None:
        self._workspace = workspace
        self.set_session(0)

    @property
    def session_id(self) -> int:
        return self._session_id

    @property
    def message_count(self) -> int:
        return self._count

    @property
    def index_ready(self) -> bool:
        return self._index is not None

    @property
    def session_index(self) -> SessionIndex | None:
        return self._index

    def set_session(self, session_id: int, message_count: int | None = None) -> None:
        """Show session ``session_id`` (0: none). Rows appear at once; the shape of a long
        session follows from a worker (``index_loaded``)."""
        self.beginResetModel()
        self._drop_reads()
        self._session_id = session_id
        self._pages.clear()
        self._pending = []
        self._expanded.clear()
        self._revisions.clear()
        self._summary = None
        self._fold_preview = frozenset()
        self._forget_compactions()
        self._index = None
        if session_id and message_count is None:
            message_count = self._workspace.get_session(session_id).message_count
        self._count = message_count or 0
        self._rows = Rows(range(self._count), range(self._count))
        if session_id and (self._count <= SYNC_INDEX_LIMIT or self._workers is None):
            self._index = SessionIndex.load(self._workspace, session_id)
            self._count = len(self._index)
            self._rows = build_rows(self._index, self._allowed, self._expanded)
        self.endResetModel()
        self.session_changed.emit(session_id)
        if self._index is not None:
            self.index_loaded.emit()
            self.role_counts_changed.emit(self._index.role_counts())
        elif session_id:
            self.role_counts_changed.emit(None)  # the last session's counts do not hold
            self._request_index()
        else:
            self.role_counts_changed.emit({})

    def _request_index(self) -> None:
        self._workers.read(SessionIndex.load, self._workspace, self._session_id,
                           name="read session shape", key=(self, "index"),
                           on_done=self._install_index)

    def _drop_reads(self) -> None:
        """What the workers are reading no longer holds: drop it (it never arrives)."""
        self._generation += 1
        if self._workers is None:
            return
        self._workers.cancel((self, "index"))
        for job in self._page_jobs.values():
            job.cancel()
        self._page_jobs.clear()

    def _install_index(self, index: SessionIndex) -> None:
        self._index = index
        self._count = len(index)
        self._rebuild()
        self.index_loaded.emit()
        self.role_counts_changed.emit(index.role_counts())

    def reload(self) -> None:
        """Read the session again (after changes made elsewhere), keeping the view's place.

        On the team store the reading is done by a worker and what is shown stays until
        it arrives, then changes at once: a server's round trips never hold the window
        up. A file is read at once (a local read costs less than a worker's round trip).
        """
        if not self._session_id:
            return
        if self._workers is not None and not self._workspace.is_file:
            self._request_reread()
            return
        try:
            info = self._workspace.get_session(self._session_id)
        except NotFoundError:  # the session is gone: show nothing
            self.set_session(0)
            return
        self._forget_read()
        if info.message_count <= SYNC_INDEX_LIMIT or self._workers is None:
            self._install_index(SessionIndex.load(self._workspace, self._session_id))
        else:
            self.beginResetModel()
            self._index = None
            self._count = info.message_count
            self._rows = Rows(range(self._count), range(self._count))
            self.endResetModel()
            self._request_index()

    def _forget_read(self) -> None:
        """Drop what was read of the session's messages (it changed elsewhere)."""
        self._drop_reads()
        self._pages.clear()
        self._revisions.clear()
        self._summary = None
        self._forget_compactions()

    def _request_reread(self) -> None:
        session_id, generation = self._session_id, self._generation
        # The pages last looked at (those on screen among them): read with the session,
        # so that its first paint after the change reads nothing.
        numbers = list(reversed(self._pages))[:REREAD_PAGES]
        with_history = self._compactions is not None

        def done(read: _Reread | None) -> None:
            if session_id != self._session_id:
                return  # another session is shown now: it was read whole
            if generation != self._generation:
                self._request_reread()  # changed here meanwhile: read what holds now
                return
            self._install_reread(read)

        self._workers.read(_read_again, self._workspace, session_id, numbers, with_history,
                           name="read the session again", key=(self, "reread"),
                           on_done=done)

    def _install_reread(self, read: _Reread | None) -> None:
        if read is None:  # the session is gone: show nothing
            self.set_session(0)
            return
        self._forget_read()
        if read.history is not None:
            self._compactions = _applied(read.history)
        for number, page in reversed(read.pages.items()):
            self._store_page(number, page)
        self._install_index(read.index)

    # -- filters and markers -------------------------------------------------------------

    @property
    def allowed_roles(self) -> set[str]:
        return set(self._allowed)

    def set_allowed_roles(self, roles: Sequence[str] | set[str]) -> None:
        """Show only messages of these roles."""
        allowed = {r for r in roles if r in ROLES}
        if allowed == self._allowed:
            return
        self._allowed = allowed
        if self._index is not None:
            self._rebuild()

    def set_role_shown(self, role: str, shown: bool) -> None:
        roles = set(self._allowed)
        if shown:
            roles.add(role)
        else:
            roles.discard(role)
        self.set_allowed_roles(roles)

    def toggle_run(self, row: int) -> None:
        """Expand or collapse the marker at ``row``."""
        run = self.run_at(row)
        if run is None:
            return
        if run.key in self._expanded:
            self._expanded.discard(run.key)
        else:
            self._expanded.add(run.key)
        self._rebuild()

    def expand_run_holding(self, position: int) -> None:
        """Expand the folded run that hides ``position``, if any."""
        if self._index is None:
            return
        for run in self._rows.runs:
            if run.start <= position < run.end and not run.expanded:
                self._expanded.add(run.key)
                self._rebuild()
                return

    def _rebuild(self) -> None:
        self.beginResetModel()
        self._run_records = None
        if self._index is not None:
            self._rows = build_rows(self._index, self._allowed, self._expanded)
        self.endResetModel()

    # -- compactions -------------------------------------------------------------------

    def _forget_compactions(self) -> None:
        self._compactions = None
        self._run_records = None

    def compactions(self) -> list[CompactionRecord]:
        """The session's applied compactions, oldest first (read once, on demand)."""
        if self._compactions is None:
            if not self._session_id:
                return []
            try:
                records = compaction.history(self._workspace, self._session_id)
            except NotFoundError:
                records = []
            self._compactions = _applied(records)
        return self._compactions

    def compactions_of_run(self, run: FoldRun) -> list[CompactionRecord]:
        """The applied compactions whose folded messages lie in ``run``."""
        if run.state != "folded" or self._index is None:
            return []
        if self._run_records is None:
            by_run: dict[int, list[CompactionRecord]] = {}
            runs = sorted(self._rows.runs, key=lambda r: r.start)
            starts = [r.start for r in runs]
            for record in self.compactions():
                first_ids = [r.get("first_id") for r in record.details.get("ranges") or []]
                seen: set[int] = set()
                for first_id in first_ids:
                    if first_id is None:
                        continue
                    position = self._index.position_of(int(first_id))
                    if position is None:
                        continue
                    k = bisect_right(starts, position) - 1
                    if k >= 0 and position < runs[k].end and runs[k].key not in seen:
                        seen.add(runs[k].key)
                        by_run.setdefault(runs[k].key, []).append(record)
            self._run_records = by_run
        return self._run_records.get(run.key, [])

    def _run_summary(self, run: FoldRun, records: Sequence[CompactionRecord]) -> str:
        if run.state != "folded":
            return ""
        if records:
            return "\n\n".join(r.summary.strip() for r in records if r.summary.strip())
        return self.summary()

    def _run_tooltip(self, run: FoldRun, records: Sequence[CompactionRecord]) -> str | None:
        if run.state != "folded":
            return None
        if not records:
            summary = self.summary()
            return f"Summary:\n{summary[:800]}" if summary else None
        lines = []
        for r in records:
            when = r.created_at.astimezone().strftime("%Y-%m-%d %H:%M")
            noun = "message" if r.folded_count == 1 else "messages"
            lines.append(f"Compaction #{r.id} on {when}: {r.folded_count:,} {noun} folded "
                         f"({r.policy}, {r.summarizer} summary); the request went from "
                         f"{r.tokens_before:,} to {r.tokens_after:,} tokens.")
        summary = self._run_summary(run, records)
        if summary:
            lines.append("")
            lines.append("Summary:")
            lines.append(summary[:800] + ("…" if len(summary) > 800 else ""))
        return "\n".join(lines)

    # -- a compaction preview ---------------------------------------------------------------

    @property
    def fold_preview(self) -> frozenset[int]:
        """Ids of the messages the shown compaction preview would fold."""
        return self._fold_preview

    def set_fold_preview(self, message_ids: Sequence[int] | frozenset[int] | None) -> None:
        """Mark the messages a preview would fold (``None`` or empty: clear the marks)."""
        ids = frozenset(int(i) for i in message_ids or ())
        if ids == self._fold_preview:
            return
        self._fold_preview = ids
        rows = self.rowCount()
        if rows:
            self.dataChanged.emit(self.index(0, 0), self.index(rows - 1, 0), [WillFoldRole])

    def _will_fold(self, position: int) -> bool:
        if not self._fold_preview:
            return False
        if self._index is not None:
            return int(self._index.ids[position]) in self._fold_preview
        message = self.message_at(position)
        return message is not None and int(message.id or 0) in self._fold_preview

    # -- rows --------------------------------------------------------------------------

    def rowCount(self, parent: ModelIndex = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        if parent.isValid():
            return 0
        return len(self._rows.rows) + len(self._pending)

    def shown_messages(self) -> int:
        """Stored messages that have a row now (markers and pending rows not counted)."""
        return len(self._rows.rows) - len(self._rows.runs)

    def is_pending_row(self, row: int) -> bool:
        return 0 <= row - len(self._rows.rows) < len(self._pending)

    def position_at(self, row: int) -> int:
        """The session position a row stands for (a marker: its first message)."""
        if row >= len(self._rows.rows):
            return self._count
        return int(self._rows.keys[row])

    def run_at(self, row: int) -> FoldRun | None:
        if 0 <= row < len(self._rows.rows):
            value = self._rows.rows[row]
            if value < 0:
                return self._rows.runs[-1 - value]
        return None

    def row_for_position(self, position: int) -> int:
        """The row showing ``position``, or the nearest row at or before it (0 if none)."""
        keys = self._rows.keys
        if not len(keys):
            return 0
        row = bisect_left(keys, position)
        if row < len(keys) and keys[row] == position:
            # A marker and its first message share a key: prefer the message when shown.
            if self._rows.rows[row] < 0 and row + 1 < len(keys) and keys[row + 1] == position:
                return row + 1
            return row
        # Hidden (by filter or a collapsed run): the last row before it.
        return max(0, bisect_right(keys, position) - 1)

    def row_for_message(self, message_id: int) -> int | None:
        """The row showing message ``message_id`` exactly, or None when it is not shown."""
        position = self.position_of_message(message_id)
        if position is None:
            return None
        row = self.row_for_position(position)
        if self._rows.rows and self._rows.rows[row] == position:
            return row
        return None

    def position_of_message(self, message_id: int) -> int | None:
        if self._index is not None:
            return self._index.position_of(message_id)
        try:
            message = self._workspace.get_message(message_id)
        except NotFoundError:
            return None
        return message.position if message.session_id == self._session_id else None

    def message_at(self, position: int) -> Message | None:
        """The whole message at ``position`` (read with the few around it when not
        cached: its whole page follows from a worker)."""
        if not self._session_id or not 0 <= position < self._count:
            return None
        number = position // PAGE
        offset = position - number * PAGE
        page = self._pages.get(number)
        if page is None or (offset < len(page) and page[offset] is None):
            page = self._fetch_page(number) if self._workers is None \
                else self._read_around(number, offset, page)
        else:
            self._pages.move_to_end(number)
        return page[offset] if offset < len(page) else None

    def _fetch_page(self, number: int) -> list[Message | None]:
        page: list[Message | None] = list(self._workspace.page_messages(
            self._session_id, after_position=number * PAGE - 1, limit=PAGE
        ))
        self._store_page(number, page)
        return page

    def _read_around(self, number: int, offset: int, page: list[Message | None] | None
                     ) -> list[Message | None]:
        """Read the messages from a little before ``offset`` of page ``number`` on to
        about a screenful after it, into that page (``None`` where it has none yet): a
        jump far away waits for what it shows, not for a whole page (about a third of
        the work of painting there); :meth:`prefetch` reads the rest in a worker."""
        start = max(0, offset - SYNC_READ // 4)
        found = self._workspace.page_messages(
            self._session_id, after_position=number * PAGE + start - 1,
            limit=min(SYNC_READ, PAGE - start),
        )
        if page is None:
            page = [None] * max(0, min(PAGE, self._count - number * PAGE))
        for at, message in enumerate(found, start):
            if at < len(page):
                page[at] = message
        self._store_page(number, page)
        return page

    def _store_page(self, number: int, page: list[Message | None]) -> None:
        self._pages[number] = page
        self._pages.move_to_end(number)
        while len(self._pages) > MAX_PAGES:
            self._pages.popitem(last=False)

    def prefetch(self, first_row: int, last_row: int) -> None:
        """Read, in a worker, the pages around rows ``first_row``..``last_row``."""
        if self._workers is None or not self._session_id or not self._rows.rows:
            return
        n = len(self._rows.rows)
        low = self.position_at(max(0, first_row - PREFETCH_MARGIN))
        high = self.position_at(min(n - 1, last_row + PREFETCH_MARGIN))
        for number in range(low // PAGE, high // PAGE + 1):
            cached = self._pages.get(number)
            if (cached is not None and None not in cached) or number in self._page_jobs:
                continue

            def done(page: list[Message], number: int = number) -> None:
                del self._page_jobs[number]
                kept = self._pages.get(number)
                if kept is None or None in kept:  # not read whole in this thread meanwhile
                    self._store_page(number, list(page))

            def failed(_exc: BaseException, number: int = number) -> None:
                del self._page_jobs[number]

            self._page_jobs[number] = self._workers.read(
                self._workspace.page_messages, self._session_id,
                after_position=number * PAGE - 1, limit=PAGE, name="read messages",
                on_done=done, on_error=failed,
            )

    def summary(self) -> str:
        """The session's long-term summary (what folded messages were folded into)."""
        if self._summary is None:
            try:
                self._summary = self._workspace.get_context(self._session_id).summary
            except NotFoundError:
                self._summary = ""
        return self._summary

    def cached_pages(self) -> int:
        return len(self._pages)

    def data(self, index: ModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        row = index.row()
        if self.is_pending_row(row):
            return self._pending_data(self._pending[row - len(self._rows.rows)], role)
        if not 0 <= row < len(self._rows.rows):
            return None
        value = self._rows.rows[row]
        if value < 0:
            run = self._rows.runs[-1 - value]
            if role == KindRole:
                return "marker"
            if role == RunRole:
                return run
            if role == PositionRole:
                return run.start
            if role == StateRole:
                return run.state
            if role == WillFoldRole:
                return False
            records = self.compactions_of_run(run)
            if role == KeyRole:
                return ("marker", run.key, run.shown, run.expanded,
                        tuple(r.id for r in records))
            if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.AccessibleTextRole):
                return compaction_label(run, records)
            if role == CompactionsRole:
                return list(records)
            if role == SummaryRole:
                return self._run_summary(run, records)
            if role == Qt.ItemDataRole.ToolTipRole:
                return plain_tooltip(self._run_tooltip(run, records))
            return None
        if role == KindRole:
            return "message"
        if role == PositionRole:
            return value
        if role == WillFoldRole:
            return self._will_fold(value)
        if role == StateRole and self._index is not None:
            return self._index.state_at(value)
        message = self.message_at(value)
        if message is None:
            return None
        if role == MessageRole:
            return message
        if role == KeyRole:
            # The text's hash too: a session read again after another window's change
            # starts its revisions afresh, and the rendering cached under the old key
            # must not be painted for the new text (str caches its hash: no cost).
            return ("message", message.id, self._revisions.get(int(message.id or 0), 0),
                    message.role, hash(message.content))
        if role == StateRole:
            return message.state
        if role == Qt.ItemDataRole.DisplayRole:
            return message.content
        if role == Qt.ItemDataRole.AccessibleTextRole:
            return f"{message.role}: {message.content[:500]}"
        if role == Qt.ItemDataRole.ToolTipRole:
            return None
        return None

    @staticmethod
    def _pending_data(pending: Message, role: int) -> Any:
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.AccessibleTextRole):
            return pending.content
        return {  # a turn still arriving: two rows at the most, read as a whole
            KindRole: "pending",
            MessageRole: pending,
            PositionRole: pending.position,
            KeyRole: ("pending", id(pending), len(pending.content), str(pending.metadata)),
            StateRole: "active",
        }.get(role)

    def flags(self, index: ModelIndex) -> Qt.ItemFlag:
        base = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
        if index.isValid() and index.data(KindRole) == "message":
            return base | Qt.ItemFlag.ItemIsEditable
        return base

    def setData(self, index: ModelIndex, value: Any, role: int = Qt.ItemDataRole.EditRole) -> bool:
        """An edit from the view: asks for it through ``edit_requested`` (the change itself
        comes back through :meth:`message_changed` once the store has it)."""
        if role != Qt.ItemDataRole.EditRole or not index.isValid():
            return False
        message = index.data(MessageRole)
        if message is None or index.data(KindRole) != "message":
            return False
        new_role, new_content = value
        if new_role == message.role and new_content == message.content:
            return False
        self.edit_requested.emit(message, new_role, new_content)
        return True

    # -- changes made through the engine (called on the UI thread) -----------------------

    def _touch_revision(self, message: Message) -> None:
        if message.id is not None:
            self._revisions[int(message.id)] = self._revisions.get(int(message.id), 0) + 1

    def message_changed(self, message: Message) -> None:
        """A stored message changed (text, role, importance): update its row."""
        if message.session_id != self._session_id or message.position is None:
            return
        position = int(message.position)
        self._generation += 1
        self._touch_revision(message)
        page = self._pages.get(position // PAGE)
        if page is not None:
            offset = position - (position // PAGE) * PAGE
            if offset < len(page):
                page[offset] = message
        old_role = self._index.role_at(position) if self._index is not None else message.role
        if self._index is not None:
            self._index.update(position, message)
        if old_role != message.role:
            if self._index is not None:
                self._rebuild()
                self.role_counts_changed.emit(self._index.role_counts())
            return
        row = self.row_for_position(position)
        if self._rows.rows and self._rows.rows[row] == position:
            changed = self.index(row, 0)
            self.dataChanged.emit(changed, changed)

    def message_inserted(self, message: Message) -> None:
        """A message was stored at ``message.position``; later ones moved down."""
        if message.session_id != self._session_id or message.position is None:
            return
        self._drop_reads()
        self._pages.clear()
        self._count += 1
        if self._index is not None:
            self._index.insert(int(message.position), message)
            self._rebuild()
            self.role_counts_changed.emit(self._index.role_counts())
        else:
            self._reset_provisional()

    def message_removed(self, message: Message) -> None:
        """The message that was at ``message.position`` is gone; later ones moved up."""
        if message.session_id != self._session_id or message.position is None:
            return
        self._drop_reads()
        self._pages.clear()
        self._count = max(0, self._count - 1)
        if self._index is not None:
            self._index.remove(int(message.position))
            self._rebuild()
            self.role_counts_changed.emit(self._index.role_counts())
        else:
            self._reset_provisional()

    def _reset_provisional(self) -> None:
        self.beginResetModel()
        self._rows = Rows(range(self._count), range(self._count))
        self.endResetModel()
        self._request_index()

    def messages_appended(self, messages: Sequence[Message]) -> None:
        """Messages were stored at the end of the session (a chat turn)."""
        mine = [m for m in messages if m.session_id == self._session_id]
        if not mine:
            return
        if self._pending:
            self.set_pending(None)
        self._generation += 1
        places = [m.position for m in mine]
        if None not in places and places != list(range(self._count, self._count + len(mine))):
            # Another desktop wrote to the session since this window read it (before the
            # turn, or between its prompt and its reply): the turn is not simply after
            # the messages shown here, so the session is read again.
            self.reload()
            return
        if self._index is None:
            first = len(self._rows.rows)
            self.beginInsertRows(QModelIndex(), first, first + len(mine) - 1)
            self._count += len(mine)
            self._rows = Rows(range(self._count), range(self._count))
            self.endInsertRows()
            return
        for message in mine:
            self._index.insert(len(self._index), message)
        self._count = len(self._index)
        self._pages.pop(mine[0].position // PAGE if mine[0].position is not None else 0, None)
        first_new = len(self._rows.rows)
        rebuilt = build_rows(self._index, self._allowed, self._expanded)
        added = len(rebuilt.rows) - first_new
        if added > 0 and list(rebuilt.rows[:first_new]) == list(self._rows.rows):
            self.beginInsertRows(QModelIndex(), first_new, first_new + added - 1)
            self._rows = rebuilt
            self.endInsertRows()
        else:
            self.beginResetModel()
            self._rows = rebuilt
            self.endResetModel()
        self.role_counts_changed.emit(self._index.role_counts())

    # -- a turn being streamed ------------------------------------------------------------

    @property
    def pending(self) -> list[Message]:
        return list(self._pending)

    def set_pending(self, messages: Sequence[Message] | None) -> None:
        """Show (or stop showing) messages that are not stored: a turn still arriving, or
        a reply that manual memory does not keep. They follow the last row."""
        first = len(self._rows.rows)
        if self._pending:
            self.beginRemoveRows(QModelIndex(), first, first + len(self._pending) - 1)
            self._pending = []
            self.endRemoveRows()
        if messages:
            self.beginInsertRows(QModelIndex(), first, first + len(messages) - 1)
            self._pending = list(messages)
            self.endInsertRows()

    def pending_changed(self) -> None:
        """A pending message's text grew: repaint its rows."""
        if self._pending:
            first = len(self._rows.rows)
            self.dataChanged.emit(self.index(first, 0),
                                  self.index(first + len(self._pending) - 1, 0))
