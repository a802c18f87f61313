"""A stored session's active messages as a sequence read in pages, newest first.

Request assembly walks a session's history backwards from the newest message and stops
at the first unit that does not fit (``workbench.core.assembly``). :class:`StoredHistory`
gives it that history without loading the session: its length is one count, item
``i`` is read with the page of older messages holding it (a keyset walk backwards on
``position``), the first message is read on its own, and the shapes of the messages a
request leaves out (``shapes``) are read without their text. A session of 100,000
messages thus costs what the request keeps, not what the session holds.

The sequence is a snapshot of one moment: build a new one after the session changes.
:meth:`StoredHistory.latest` does: it starts from what the last history of the session
read when the database file has not changed since (SQLite's ``data_version`` and this
process's own commits), so the Request panel's refreshes while a prompt is typed read
the session's pages once, not at every key. A team store's histories are read anew.
"""

from __future__ import annotations

import threading
import weakref
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import Any, overload

from workbench.core.assembly import Shape, call_ids, prefix_reasons
from workbench.core.conversation import Message, MessageState
from workbench.store.db import UNCHANGED, ChangeMark
from workbench.store.history_pages import count_fitting, page_after, page_before
from workbench.store.repository import Repository

__all__ = ["UNCHANGED", "StoredHistory", "change_mark"]

ACTIVE = MessageState.ACTIVE.value
#: Messages read per page; grows while a walk goes on, so long walks take few queries.
FIRST_PAGE = 256
MAX_PAGE = 8192
#: Sessions whose last history is kept for the next one (see StoredHistory.latest).
KEPT_SESSIONS = 2
#: At most this many messages newer than a change are read onto a kept history.
EXTEND_LIMIT = 4096


class StoredHistory(Sequence[Message]):
    """The active messages of stored session ``session_id``, read in pages on demand."""

    def __init__(self, repo: Repository, session_id: int, *, length: int | None = None,
                 before_position: int | None = None):
        """``before_position`` makes it the active messages before that position only
        (then ``length`` must be their number), e.g. the history before a prompt."""
        self.repo = repo
        self.session_id = session_id
        self._len = (
            length if length is not None else repo.message_count(session_id, states=(ACTIVE,))
        )
        self._before = before_position
        self._loaded: dict[int, Message] = {}
        self._low = self._len  # indices >= _low are loaded (the newest messages)
        self._page = FIRST_PAGE
        # Held while pages are added, so that latest() may copy them from another thread.
        self._lock = threading.Lock()

    @classmethod
    def latest(cls, repo: Repository, session_id: int) -> StoredHistory:
        """The session's history now, starting from the messages the previous history of
        the session read when the database has not changed since (none otherwise).

        The messages are shared with that history: treat them as read-only, as
        request assembly does.
        """
        db = repo.db
        mark = change_mark(db)
        if mark is None:
            return cls(repo, session_id)
        kept_by_session = _KEPT.get(db)
        if kept_by_session is None:
            kept_by_session = OrderedDict()
            _KEPT[db] = kept_by_session
        kept = kept_by_session.pop(session_id, None)
        history: StoredHistory | None = None
        if kept is not None:
            earlier = kept[1]
            lowest = db.message_changes(kept[0], mark, session_id)
            if lowest == UNCHANGED:
                history = cls(repo, session_id, length=earlier._len)
                with earlier._lock:
                    history._loaded = dict(earlier._loaded)
                    history._low = earlier._low
                    history._page = earlier._page
            elif lowest is not None:
                history = earlier._changed_from(lowest)
        if history is None:
            history = cls(repo, session_id)
        kept_by_session[session_id] = (mark, history)
        while len(kept_by_session) > KEPT_SESSIONS:
            kept_by_session.popitem(last=False)
        return history

    def _changed_from(self, lowest: int) -> StoredHistory | None:
        """The session's history now, when its messages changed at positions from
        ``lowest`` on only (a turn appended, the last message edited): the messages read
        before that position are kept, those from it on read again. None when that
        reads as much as starting anew would (nothing before it was read, or many
        messages are newer)."""
        with self._lock:
            loaded = dict(self._loaded)
            low, length, page = self._low, self._len, self._page
        if self._before is not None or low >= length:
            return None
        kept = low
        while kept < length and (loaded[kept].position or 0) < lowest:
            kept += 1
        if kept == low:
            return None
        boundary = loaded[kept - 1].position
        if boundary is None:
            return None
        newer = page_after(self.repo.db, self.session_id, state=ACTIVE,
                           after_position=boundary, limit=EXTEND_LIMIT + 1)
        if len(newer) > EXTEND_LIMIT:
            return None
        history = StoredHistory(self.repo, self.session_id, length=kept + len(newer))
        history._loaded = {i: m for i, m in loaded.items()
                           if i < kept and (i >= low or (m.position or 0) < lowest)}
        for offset, message in enumerate(newer):
            history._loaded[kept + offset] = message
        history._low = low
        history._page = page
        return history

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._len))]
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError(index)
        found = self._loaded.get(index)
        if found is not None:
            return found
        if index == 0 and self._low > 1:
            first = self.repo.first_in_state(self.session_id, ACTIVE)
            if first is not None:
                with self._lock:
                    self._loaded[0] = first
                return first
        while self._low > index:
            self._read_older()
        return self._loaded[index]

    def _read_older(self) -> None:
        before = self._loaded[self._low].position if self._low < self._len else self._before
        page = page_before(
            self.repo.db, self.session_id, state=ACTIVE, before_position=before, limit=self._page
        )
        self._page = min(self._page * 2, MAX_PAGE)
        if not page:  # the session shrank under us: what is missing reads as absent
            raise IndexError(self._low - 1)
        with self._lock:
            for msg in page:
                self._low -= 1
                self._loaded.setdefault(self._low, msg)
                if self._low == 0:
                    break

    def expect_room(self, room: int) -> None:
        """Told by request assembly before its walk: about ``room`` tokens of the newest
        messages will be read. The next page then holds what fits by the cached counts
        (and a little more), so the walk reads the messages it keeps in one query
        instead of pages doubling past them."""
        if self._low < self._len:
            return
        fitting = count_fitting(self.repo.db, self.session_id, state=ACTIVE, room=room)
        wanted = self._len if fitting is None else fitting + fitting // 20 + 16
        self._page = min(max(wanted, 16), MAX_PAGE)

    def __iter__(self) -> Iterator[Message]:
        for i in range(self._len):
            yield self[i]

    def shapes(self, start: int, end: int) -> Sequence[Shape]:
        """``(id, position, role, tool_call_id, call ids)`` of items ``start..end``."""
        if end < start:
            return []
        last = self[end].position
        if last is None:
            return [_shape(self[i]) for i in range(start, end + 1)]
        return self.repo.message_shapes(
            self.session_id, state=ACTIVE, last_position=last, count=end - start + 1
        )

    def prefix_reasons(
        self, start: int, end: int, *, exclude_system: bool, asked: Sequence[str] = ()
    ) -> tuple[dict[int, str], set[str], Callable[[int], tuple[int | None, int | None]]]:
        """What :func:`~workbench.core.assembly.prefix_reasons` asks, found in the
        database (the exceptions only) and placed by position arithmetic."""
        if end < start:
            return {}, set(), self._locate_loaded
        if start > 1 and (start - 1) not in self._loaded:
            return prefix_reasons(list(self[start:end + 1]), 0, end - start,
                                  exclude_system=exclude_system, asked=asked)
        before = self[start - 1] if start > 0 else self[0]
        high = self[end].position
        if before.position is None or high is None:
            return self._read_prefix(start, end, exclude_system, asked)
        low = before.position - (0 if start > 0 else 1)
        gaps = self.repo.positions_not_in_state(
            self.session_id, state=ACTIVE, after_position=low, last_position=high
        )
        if gaps is None or high - low - len(gaps) != end - start + 1:
            return self._read_prefix(start, end, exclude_system, asked)
        found = self.repo.prefix_exceptions(
            self.session_id, state=ACTIVE, after_position=low, last_position=high,
            exclude_system=exclude_system, asked=asked,
        )
        if found is None:
            return self._read_prefix(start, end, exclude_system, asked)
        rows, issued = found

        def index_of(position: int) -> int:
            later_gaps = len(gaps) - bisect_right(gaps, position)
            return end - (high - position - later_gaps)

        places: dict[int, tuple[int | None, int | None]] = {}
        reasons: dict[int, str] = {}
        for mid, position, reason in rows:
            index = index_of(position)
            places[index] = (mid, position)
            reasons[index] = reason

        def locate(index: int) -> tuple[int | None, int | None]:
            if index in self._loaded:
                return self._locate_loaded(index)
            if index in places:
                return places[index]
            return self.repo.active_at(
                self.session_id, state=ACTIVE, last_position=high, back=end - index,
                gaps=bool(gaps),
            )

        return reasons, issued, locate

    def _read_prefix(
        self, start: int, end: int, exclude_system: bool, asked: Sequence[str]
    ) -> tuple[dict[int, str], set[str], Callable[[int], tuple[int | None, int | None]]]:
        """The same, reading the messages (positions that are not dense, odd calls)."""
        reasons, issued, _ = prefix_reasons(
            _Window(self, start, end), start, end, exclude_system=exclude_system, asked=asked
        )
        return reasons, issued, self._locate_loaded

    def _locate_loaded(self, index: int) -> tuple[int | None, int | None]:
        msg = self[index]
        return msg.id, msg.position

    def loaded(self) -> int:
        """How many messages have been read so far (for tests and benches)."""
        return len(self._loaded)

    def __repr__(self) -> str:
        return f"<StoredHistory session {self.session_id}: {self._len} messages>"


# The newest history of the last KEPT_SESSIONS sessions used, per open database (a
# database that is closed and dropped takes its entries with it): (the database's mark
# when it was made, the history). Only the last few: memory stays flat as sessions are
# opened.
_KEPT: weakref.WeakKeyDictionary[Any, OrderedDict[int, tuple[Any, StoredHistory]]] = (
    weakref.WeakKeyDictionary()
)


def change_mark(db: Any) -> ChangeMark | None:
    """Where ``db`` stands, read before anything else is, for
    :meth:`~workbench.store.db.Database.message_changes` to tell later which messages
    changed since (a commit after it is seen). ``None`` on a team store, whose count of
    other desktops' changes arrives after them: nothing read earlier is reused there."""
    if db.dialect.is_postgresql:
        return None
    mark: ChangeMark | None = db.change_mark()
    return mark


def _shape(msg: Message) -> Shape:
    ids = call_ids(msg) if msg.role == "assistant" and msg.tool_calls else []
    return (msg.id, msg.position, msg.role, msg.tool_call_id, ids)



class _Window(Sequence[Message]):
    """Items ``start..end`` of a history under their own indices (others unread)."""

    def __init__(self, history: StoredHistory, start: int, end: int):
        self.history, self.start, self.end = history, start, end

    def __len__(self) -> int:
        return self.end + 1

    def __getitem__(self, index: Any) -> Any:
        return self.history[index]
