"""A session's active messages in columns, so that planning over thousands stays cheap.

Compaction planning (:mod:`workbench.core.compaction`) looks at every active message of a
session, but for most of them it needs only the id, position, role, text and cached token
cost. Building a full :class:`~workbench.core.conversation.Message` for each of ten
thousand messages costs more than the planning itself, so a :class:`MessageTable` keeps
those five fields in columns and a whole message only where planning needs more.

A row is **plain** when it is a user or assistant message without tool calls that is not
marked important or pinned: nothing about it changes what folds, how its summary line
reads or how it counts beyond its columns. Every other row (system messages, tool calls
and results, important or pinned messages) is kept **whole**. A plain row becomes a
message only when one is asked for (:meth:`MessageTable.message`), from its columns and
its *details*: the fields that are mostly empty (name, tool call id, metadata, compaction
id) as JSON text ``[name, tool_call_id, metadata, compaction_id]``, ``metadata`` itself
JSON text or null. A row without details has none of them.

A table may also carry the summary line the store keeps with each message (``lines``:
the body at :data:`~workbench.core.summarizers.CACHED_LINE_CHARS` characters, ``None``
where not kept) and its token count in the table's encoding (``line_costs``); the
extractive summarizer then writes and counts a summary of thousands of lines from them.

A :class:`MessageSelection` is some rows of a table in order; it is a sequence of
messages (built on access), so code written for lists of messages takes it as it is,
while the planner, the extractive summarizer and request counting read its columns.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, overload

from workbench.core.conversation import Message, MessageState

__all__ = ["MessageSelection", "MessageTable", "is_plain"]

_ACTIVE = MessageState.ACTIVE.value
_PLAIN_ROLES = ("user", "assistant")


def is_plain(message: Message) -> bool:
    """Whether a message may be a plain row: a user or assistant message without tool
    calls, not important and not pinned (see the module documentation)."""
    if message.role not in _PLAIN_ROLES or message.tool_calls or message.important:
        return False
    meta = message.metadata
    return not meta or ("important" not in meta and "pinned" not in meta)


class MessageTable:
    """The active messages of a session, in order, as columns (see the module
    documentation).

    ``ids``, ``positions``, ``roles``, ``texts`` and ``costs`` have one entry per row
    (``texts`` may be read when first asked for: see :attr:`texts`).
    ``costs`` are cached token costs in ``encoding`` (``None`` where unknown); they are
    trusted only for plain rows, a whole row's message carries its own count. ``whole``
    maps row indices to their messages; ``details`` maps plain rows to their details text.
    ``lines`` and ``line_costs``, when given, are the kept summary lines and their counts.
    ``written`` holds the summary line bodies a summarizer wrote for the rows, by line
    length, and ``last_summary`` the last summary a summarizer wrote and counted for some
    of them (one that folds a few more rows continues it). A table is not changed once
    built (but for those two), so a store may hand the same table to several previews of
    a session that has not changed.
    """

    __slots__ = (
        "costs",
        "details",
        "encoding",
        "ids",
        "line_costs",
        "lines",
        "positions",
        "roles",
        "session_id",
        "_load_texts",
        "_texts",
        "_texts_lock",
        "whole",
        "written",
        "last_summary",
    )

    def __init__(
        self,
        *,
        ids: Sequence[int | None],
        positions: Sequence[int | None],
        roles: Sequence[str],
        texts: Sequence[str | None],
        costs: Sequence[int | None],
        encoding: str | None,
        whole: Mapping[int, Message],
        details: Mapping[int, str] | None = None,
        session_id: int | None = None,
        lines: Sequence[str | None] | None = None,
        line_costs: Sequence[int | None] | None = None,
        load_texts: Callable[[Sequence[int]], Sequence[str]] | None = None,
    ):
        size = len(ids)
        if not len(positions) == len(roles) == len(texts) == len(costs) == size or any(
            extra is not None and len(extra) != size for extra in (lines, line_costs)
        ):
            raise ValueError("The columns of a message table must all have one entry per row.")
        self.ids = ids
        self.positions = positions
        self.roles = roles
        # With load_texts, None marks a text not read yet: all of them are read at once
        # the first time the column is asked for (see the texts property).
        self._texts = texts
        self._load_texts = load_texts if load_texts is not None and None in texts else None
        self._texts_lock = threading.Lock() if self._load_texts is not None else None
        self.costs = costs
        self.encoding = encoding
        # In row order, which the planner relies on when it walks the whole rows.
        self.whole: dict[int, Message] = {i: whole[i] for i in sorted(whole)}
        self.details: Mapping[int, str] = details or {}
        self.session_id = session_id
        self.lines = lines
        self.line_costs = line_costs
        # Summary line bodies written for the rows, by line length (None where not yet):
        # see workbench.core.summarizers.ExtractiveSummarizer. They depend only on the
        # rows' columns, so they stay right as long as the table does.
        self.written: dict[int, list[str | None]] = {}
        # The last summary counted for some of the rows (see
        # workbench.core.summarizers.ExtractiveSummarizer): it too depends only on them.
        self.last_summary: Any = None

    @classmethod
    def from_messages(
        cls,
        messages: Sequence[Message],
        *,
        encoding: str | None = None,
        lean: bool = False,
    ) -> MessageTable:
        """A table of the active ones among ``messages``.

        By default every row is whole: the table hands back the very same message
        objects. With ``lean``, plain messages become plain rows as a store would load
        them (their costs taken in ``encoding``), which tests use to check that both
        kinds of row plan, summarize and count alike.
        """
        active = [m for m in messages if m.state == _ACTIVE]
        whole: dict[int, Message] = {}
        details: dict[int, str] = {}
        costs: list[int | None] = []
        for i, msg in enumerate(active):
            known = encoding is not None and msg.token_encoding == encoding
            costs.append(msg.token_count if known else None)
            if not lean or not is_plain(msg):
                whole[i] = msg
            elif msg.name or msg.tool_call_id or msg.metadata or msg.compaction_id is not None:
                meta = json.dumps(msg.metadata) if msg.metadata else None
                details[i] = json.dumps([msg.name, msg.tool_call_id, meta, msg.compaction_id])
        return cls(
            ids=[m.id for m in active],
            positions=[m.position for m in active],
            roles=[m.role for m in active],
            texts=[m.content or "" for m in active],
            costs=costs,
            encoding=encoding,
            whole=whole,
            details=details,
            session_id=active[0].session_id if active else None,
        )

    @property
    def texts(self) -> Sequence[str]:
        """Each row's text. A store may leave out the texts planning does not need (a row
        whose summary line and costs are kept) and pass ``load_texts``, which is given
        the rows whose text is missing and returns their texts, the first time the
        column is asked for."""
        if self._load_texts is not None:
            self._read_texts()
        return self._texts  # type: ignore[return-value]  # no None once read

    @property
    def unread_texts(self) -> int:
        """How many rows' texts the store left out (read when :attr:`texts` is first
        asked for); 0 once they are read."""
        if self._load_texts is None:
            return 0
        return sum(1 for text in self._texts if text is None)

    def _read_texts(self) -> None:
        assert self._texts_lock is not None
        with self._texts_lock:
            load = self._load_texts
            if load is None:
                return  # another thread read them meanwhile
            texts = list(self._texts)
            missing = [i for i, text in enumerate(texts) if text is None]
            for i, text in zip(missing, load(missing), strict=True):
                texts[i] = text
            self._texts = texts
            self._load_texts = None

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return f"MessageTable({len(self)} rows, {len(self.whole)} whole)"

    def message(self, index: int) -> Message:
        """Row ``index`` as a message: the whole one, or a new one built from a plain
        row's columns and details (active, with its cached cost)."""
        if index < 0:
            index += len(self.ids)
        found = self.whole.get(index)
        if found is not None:
            return found
        name = tool_call_id = metadata = compaction_id = None
        extra = self.details.get(index)
        if extra is not None:
            name, tool_call_id, metadata, compaction_id = json.loads(extra)
        cost = self.costs[index]
        return Message(
            self.roles[index],
            self.texts[index],
            self.ids[index],
            self.session_id,
            self.positions[index],
            name,
            None,
            tool_call_id,
            None,
            None,
            cost,
            self.encoding if cost is not None else None,
            _ACTIVE,
            False,
            json.loads(metadata) if metadata else {},
            compaction_id,
        )

    def select(self, indices: Sequence[int]) -> MessageSelection:
        """The rows at ``indices`` (ascending) as a sequence of messages."""
        return MessageSelection(self, indices)

    def everything(self) -> MessageSelection:
        """Every row."""
        return MessageSelection(self, range(len(self.ids)))


class MessageSelection(Sequence[Message]):
    """Some rows of a :class:`MessageTable`, in order, as a read-only sequence of
    messages. Each access to a plain row builds its message anew; the columns are read
    through ``table`` and ``indices``."""

    __slots__ = ("indices", "table")

    def __init__(self, table: MessageTable, indices: Sequence[int]):
        self.table = table
        self.indices = indices

    def __len__(self) -> int:
        return len(self.indices)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> MessageSelection: ...

    def __getitem__(self, index: int | slice) -> Message | MessageSelection:
        if isinstance(index, slice):
            return MessageSelection(self.table, self.indices[index])
        return self.table.message(self.indices[index])

    def __iter__(self) -> Iterator[Message]:
        message = self.table.message
        for i in self.indices:
            yield message(i)

    def __repr__(self) -> str:
        return f"MessageSelection({len(self)} of {len(self.table)} rows)"

    def column(self, values: Sequence[Any]) -> list[Any]:
        """The entries of one of the table's columns at this selection's rows."""
        indices = self.indices
        if isinstance(indices, range) and indices.step == 1:
            return list(values[indices.start : indices.stop])
        # A comprehension: indexing a list or tuple in it beats map(__getitem__).
        return [values[i] for i in indices]

    def whole_messages(self) -> list[Message | None]:
        """Per row of the selection, its whole message, or ``None`` for a plain row."""
        return list(map(self.table.whole.get, self.indices))
