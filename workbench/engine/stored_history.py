"""A stored session's active messages as a sequence read in pages, newest first.

Request assembly walks a session's history backwards from the newest message and stops
at the first unit that does not fit (``workbench.core.assembly``). :class:`StoredHistory`
gives it that history without loading the session: its length is one count, item
``i`` is read with the page of older messages holding it (a keyset walk backwards on
``position``), the first message is read on its own, and the shapes of the messages a
request leaves out (``shapes``) are read without their text. A session of 100,000
messages thus costs what the request keeps, not what the session holds.

The sequence is a snapshot of one moment: build a new one after the session changes.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from typing import Any, overload

from workbench.core.assembly import Shape, call_ids, prefix_reasons
from workbench.core.conversation import Message, MessageState
from workbench.store.repository import Repository

__all__ = ["StoredHistory"]

ACTIVE = MessageState.ACTIVE.value
#: Messages read per page; grows while a walk goes on, so long walks take few queries.
FIRST_PAGE = 256
MAX_PAGE = 8192


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
                self._loaded[0] = first
                return first
        while self._low > index:
            self._read_older()
        return self._loaded[index]

    def _read_older(self) -> None:
        before = self._loaded[self._low].position if self._low < self._len else self._before
        page = self.repo.page_state_before(
            self.session_id, state=ACTIVE, before_position=before, limit=self._page
        )
        self._page = min(self._page * 2, MAX_PAGE)
        if not page:  # the session shrank under us: what is missing reads as absent
            raise IndexError(self._low - 1)
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
        fitting = self.repo.count_fitting(self.session_id, state=ACTIVE, room=room)
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
