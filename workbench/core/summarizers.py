"""Summarizers for compaction (SPEC §4) and the text helpers they share.

Every summarizer has ``summarize(folded, previous)`` and returns a :class:`SummaryDraft`:
text that is either *appended* to the session's long-term summary or *replaces* it
(:func:`combine_summary` joins them). :class:`ExtractiveSummarizer` needs no model: one
``- role: text`` line per folded message under the ``Previous conversation summary:``
heading, long texts shortened. The model summarizer lives in the engine
(:class:`workbench.engine.compaction.ModelSummarizer`): it talks to a provider.

With a token counter, the extractive summarizer counts its lines as it writes them
(``SummaryDraft.counted_tail``), so a request that ends with them need not encode them
again. :func:`line_cache` is what the store keeps with each message so that a fold of
thousands of messages reads its lines and their counts instead of writing them.
:func:`count_long_text` counts a long summary exactly on several threads.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from operator import add
from typing import Any, Protocol

from workbench.core.conversation import ROLES, Message
from workbench.core.handoff import quick_handoff
from workbench.core.message_table import MessageSelection
from workbench.core.tokens import KNOWN_ENCODINGS, TokenCounter, get_counter

__all__ = [
    "APPEND",
    "CACHED_LINE_CHARS",
    "CountedText",
    "EXTRACTIVE",
    "MIN_LINE_CHARS",
    "MODEL",
    "REPLACE",
    "SUMMARIZERS",
    "SUMMARY_HEADING",
    "ExtractiveSummarizer",
    "Summarizer",
    "SummaryDraft",
    "clear_count_cache",
    "combine_summary",
    "count_long_text",
    "line_cache",
    "message_line",
    "shorten",
    "summary_lines",
]

SUMMARY_HEADING = "Previous conversation summary:"

#: The fewest characters of text an extractive line keeps, however many messages fold.
MIN_LINE_CHARS = 40

EXTRACTIVE = "extractive"
MODEL = "model"
SUMMARIZERS: tuple[str, ...] = (EXTRACTIVE, MODEL)

APPEND = "append"
REPLACE = "replace"


def shorten(text: str, limit: int) -> str:
    """``text`` on one line (runs of whitespace become one space), cut to ``limit``
    characters with an ellipsis."""
    # Only a bounded head of a long text is ever looked at: collapsing the whitespace of
    # a 100 kB tool result to keep 160 characters of it would be wasted work.
    span = limit * 2 + 8
    while True:
        whole = len(text) <= span
        flat = " ".join((text if whole else text[:span]).split())
        if whole and len(flat) <= limit:
            return flat
        if len(flat) > limit or whole:
            return flat[: limit - 1].rstrip() + "…"
        span *= 4  # mostly whitespace so far: look further


def _call_names(message: Message) -> list[str]:
    names = []
    for call in message.tool_calls or ():
        function = call.get("function") if isinstance(call, dict) else None
        spec = function if isinstance(function, dict) else call
        name = spec.get("name") if isinstance(spec, dict) else None
        names.append(str(name) if name else "a tool")
    return names


def message_line(message: Message, limit: int = 160) -> str:
    """One ``- role: text`` line for a message, its text shortened to ``limit``."""
    return _prefix(message.role) + _bodies([message.content or ""], [message], limit)[0]


def summary_lines(folded: Sequence[Message], limit: int = 160) -> list[str]:
    """:func:`message_line` of each message, read from the columns when ``folded`` is a
    :class:`~workbench.core.message_table.MessageSelection`."""
    roles, texts, wholes = _line_columns(folded)
    return list(map(add, map(_prefix, roles), _bodies(texts, wholes, limit)))


def _line_columns(
    folded: Sequence[Message],
) -> tuple[Sequence[str], Sequence[str], Sequence[Message | None]]:
    """Roles, texts and, where the line may need more than those, whole messages."""
    if isinstance(folded, MessageSelection):
        table = folded.table
        return folded.column(table.roles), folded.column(table.texts), folded.whole_messages()
    messages = list(folded)
    return [m.role for m in messages], [m.content or "" for m in messages], messages


_PREFIXES: dict[str, str] = {}


def _prefix(role: str) -> str:
    """``"- role: "``, the start of every summary line."""
    found = _PREFIXES.get(role)
    if found is None:
        found = f"- {role}: "
        if len(_PREFIXES) < 64:  # chat roles; never grown without bound by odd ones
            _PREFIXES[role] = found
    return found


def _bodies(texts: Sequence[str], wholes: Sequence[Message | None], limit: int) -> list[str]:
    """What follows ``- role: `` in each message's summary line.

    ``wholes`` holds the message where its tool calls or tool name belong in the line
    (else ``None``). The text is the message's with its whitespace collapsed and cut to
    ``limit`` characters with an ellipsis (:func:`shorten`), or ``(empty)``: never empty,
    never with whitespace at either end or a line break inside. Folding ten thousand
    messages spends its time here, so :func:`shorten` is inlined for the common case.
    """
    # Only the first ``span`` characters of a long text decide its line (see shorten).
    span = limit * 2 + 8
    edge = limit + 1
    bodies: list[str] = []
    append = bodies.append
    for text, msg in zip(texts, wholes, strict=True):
        if msg is not None:
            if msg.role == "assistant" and msg.tool_calls:
                called = "called " + ", ".join(_call_names(msg))
                text = f"{text} [{called}]" if text.strip() else f"[{called}]"
            elif msg.role == "tool" and msg.name:
                text = f"{msg.name} → {text}"
        # The common case, a text that runs on past the limit: when its first limit + 1
        # characters are printable (no whitespace but the ASCII space), with no double
        # space and no space at either end, collapsing the whitespace keeps them as they
        # are and leaves more than ``limit`` characters, so the line is cut right there.
        window = text[:edge]
        if (
            len(window) == edge
            and window.isprintable()
            and "  " not in window
            and window[0] != " "
            and window[-1] != " "
        ):
            append(window[: limit - 1].rstrip() + "…")
            continue
        if not text:
            append("(empty)")
            continue
        short = len(text) <= span
        head = text if short else text[:span]
        if head.isprintable() and "  " not in head:
            # Every character str.split breaks at, but the ASCII space, is a control or
            # separator character, which isprintable() rejects: with no double space
            # either, collapsing the whitespace is stripping the ends.
            flat = head.strip()
        else:
            flat = " ".join(head.split())
        if len(flat) > limit:
            append(flat[: limit - 1].rstrip() + "…")
        elif not short:
            # Mostly whitespace early on (or only whitespace: no line text at all).
            append(shorten(text, limit) or "(empty)")
        else:
            append(flat or "(empty)")
    return bodies


#: The line length whose lines the store keeps with each message (see :func:`line_cache`).
CACHED_LINE_CHARS = MIN_LINE_CHARS


def line_cache(messages: Sequence[Message]) -> tuple[list[str], list[int | None]]:
    """What the store keeps with each message to summarize long sessions fast: the body of
    its summary line at :data:`CACHED_LINE_CHARS` characters (what follows ``- role: ``,
    the line every fold of many messages writes), and the tokens of that body behind a
    space and before a line break, in the message's ``token_encoding`` when it has a
    count in a known encoding (else ``None``: counted later).

    A body depends on the role, text, name and tool calls of its message, nothing else;
    the store forgets it when any of those change. The summarizer adds the tokens of
    each line's ``- role:`` (see the comment above :func:`_start_tokens` for why the
    counts add up).
    """
    bodies = _bodies([m.content or "" for m in messages], messages, CACHED_LINE_CHARS)
    tokens: list[int | None] = [None] * len(messages)
    by_encoding: dict[str, list[int]] = {}
    for i, msg in enumerate(messages):
        if msg.token_count is not None and msg.token_encoding in KNOWN_ENCODINGS:
            by_encoding.setdefault(msg.token_encoding, []).append(i)
    for encoding, rows in by_encoding.items():
        counter = get_counter(encoding)
        if counter.estimated:
            continue
        for i, count in zip(rows, counter.count_texts([_unit(bodies[i]) for i in rows]),
                            strict=True):
            tokens[i] = count
    return bodies, tokens


def _unit(body: str) -> str:
    """A line's body as it is counted: behind its space, before a line break."""
    return f" {body}\n"


def count_long_text(
    counter: TokenCounter, text: str, *, piece: int = 1 << 15, workers: int | None = None
) -> int:
    """``counter.count_text(text)``, exactly, on several threads when the text is long.

    The text is cut only just before a line that starts with ``-`` (every extractive
    summary line). tiktoken's encodings always end a pre-token at a line break that is
    followed by ``-``, and merges never cross pre-tokens, so the pieces' counts add up
    to the whole text's count. The estimate counter (characters / 4) is not additive and
    counts the whole text at once.
    """
    workers = workers or os.cpu_count() or 1
    # On one or two cores the threads mostly wait for each other (measured slower than
    # one thread on a busy two-core machine), so they start from four cores.
    if counter.estimated or workers < 4 or len(text) < 2 * piece:
        return counter.count_text(text)
    size = max(piece, len(text) // (workers * 2))
    pieces: list[str] = []
    start = 0
    while start < len(text):
        cut = text.find("\n-", start + size)
        if cut < 0:
            pieces.append(text[start:])
            break
        pieces.append(text[start : cut + 1])
        start = cut + 1
    if len(pieces) == 1:
        return counter.count_text(text)
    with ThreadPoolExecutor(min(workers, len(pieces)), thread_name_prefix="count") as pool:
        return sum(pool.map(counter.count_text, pieces))


class _CountCache:
    """The token counts of the last few summary blocks, by text (thread-safe).

    Previewing the same session again (another keep count, after an edit) writes mostly
    the same blocks: the folded messages always start at the oldest, so only the blocks
    after a change differ. Keyed by the whole text, a hit is always the right count.
    """

    def __init__(self, size: int = 64):
        self._size = size
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str) -> int | None:
        with self._lock:
            tokens = self._counts.get(text)
            if tokens is not None:
                self._counts.move_to_end(text)
            return tokens

    def put(self, text: str, tokens: int) -> None:
        with self._lock:
            self._counts[text] = tokens
            self._counts.move_to_end(text)
            while len(self._counts) > self._size:
                self._counts.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()


_block_counts = _CountCache()


def clear_count_cache() -> None:
    """Forget the remembered block counts (benchmarks time a first preview with it)."""
    _block_counts.clear()


@dataclass(frozen=True)
class CountedText:
    """A text and its token count (``TokenCounter.count_text``)."""

    text: str
    tokens: int


@dataclass(frozen=True)
class SummaryDraft:
    """A summarizer's text and whether it is appended to the long-term summary or
    replaces it.

    ``counted_tail``, when a summarizer counted it on the way, is the end of ``text``
    from the start of a line that begins with ``-`` (right after a line break), with its
    token count: a request that ends with that text can count only what comes before it
    and add the known figure, exactly (see :func:`count_long_text` for why the counts
    add up at such a line break).
    """

    text: str
    mode: str = APPEND
    counted_tail: CountedText | None = None


class Summarizer(Protocol):
    """Turns the folded messages (and the previous summary) into summary text."""

    name: str

    def summarize(self, folded: Sequence[Message], previous: str) -> SummaryDraft:
        """The summary of ``folded``; ``previous`` is the session's long-term summary."""
        ...


class ExtractiveSummarizer:
    """Deterministic, no model: one ``- role: text`` line per folded message under the
    ``Previous conversation summary:`` heading, each text cut to ``line_chars``, or to
    an equal share of ``summary_chars`` when that is smaller (but at least
    :data:`MIN_LINE_CHARS`).

    When the folded messages come as a :class:`MessageSelection` of a table that carries
    the lines the store keeps (:func:`line_cache`) and the lines are that long, the kept
    lines and their counts are used: only the others are written and counted."""

    name = EXTRACTIVE

    #: Lines per block counted in the background (see ``counter`` below).
    COUNT_BLOCK_LINES = 1500

    def __init__(
        self,
        line_chars: int = 160,
        summary_chars: int | None = None,
        *,
        counter: TokenCounter | None = None,
    ):
        """With a ``counter``, a long summary's lines are token-counted on a second
        thread while the later lines are still being written (tiktoken lets go of the
        interpreter lock), and the draft carries the count as its ``counted_tail``."""
        self.line_chars = line_chars
        self.summary_chars = summary_chars
        self.counter = counter

    def line_limit(self, count: int) -> int:
        """The characters each of ``count`` lines may keep."""
        if self.summary_chars is None or count <= 0:
            return self.line_chars
        share = self.summary_chars // count
        return max(min(MIN_LINE_CHARS, self.line_chars), min(self.line_chars, share))

    def summarize(self, folded: Sequence[Message], previous: str) -> SummaryDraft:
        limit = self.line_limit(len(folded))
        continued = self._continued(folded, limit)
        if continued is not None:
            return continued
        draft, _ = self._summarize(folded, limit, self._kept_or_written(folded, limit))
        return draft

    def _kept_or_written(
        self, folded: Sequence[Message], limit: int
    ) -> tuple[list[str | None] | None, list[int | None] | None]:
        """The bodies known for ``folded``'s rows (kept by the store, or written by this
        summarizer before: ``None`` where neither) and the kept counts (see _kept)."""
        kept_bodies, kept_costs = self._kept(folded, limit)
        written = self._remembered(folded, limit)
        if written is not None:
            # Rows without a kept line whose body this summarizer already wrote.
            column = folded.column(written)  # type: ignore[attr-defined]  # a selection
            if kept_bodies is None:
                kept_bodies = column
            else:
                kept_bodies = [k if k is not None else w
                               for k, w in zip(kept_bodies, column, strict=True)]
        return kept_bodies, kept_costs

    def _continued(self, folded: Sequence[Message], limit: int) -> SummaryDraft | None:
        """The summary of ``folded`` from the last one counted for its table at the same
        line length when one folds the first rows of the other (planning again over the
        token trigger with the cut moved, or the same preview again): only the lines
        added or left out are written and counted, and the counts add up as in one pass
        (see the comment above :func:`_start_tokens`). ``None`` when there is no such
        summary."""
        counter = self.counter
        if not isinstance(folded, MessageSelection) or counter is None or counter.estimated:
            return None
        table = folded.table
        last: _LastSummary | None = table.last_summary
        if last is None or last.limit != limit or last.encoding != counter.encoding_name:
            return None
        done = len(last.indices)
        indices = folded.indices
        size = len(indices)
        if not done or not size:
            return None
        if size <= done:
            if list(indices) != last.indices[:size]:
                return None
            if size == done:
                return SummaryDraft(SUMMARY_HEADING + "\n" + last.tail, APPEND,
                                    CountedText(last.tail, last.final))
            # Fewer rows (the cut moved back): the first lines of the last summary, less
            # the tokens of the lines left out, counted as they were.
            left_out = MessageSelection(table, last.indices[size:])
            drafted, raw_out = self._summarize(left_out, limit,
                                               self._kept_or_written(left_out, limit))
            if drafted.counted_tail is None:
                return None
            cut = len(last.tail)
            for _ in range(len(left_out)):
                cut = last.tail.rfind("\n", 0, cut)
            tail = last.tail[:cut]
            raw = last.raw - raw_out
            role = table.roles[indices[-1]]
            body = tail[tail.rfind("\n") + 1 + len(_prefix(role)):]
            final = raw + counter.count_text(f" {body}") - counter.count_text(_unit(body))
        else:
            if list(indices[:done]) != last.indices:
                return None
            rest = MessageSelection(table, indices[done:])
            drafted, raw_rest = self._summarize(rest, limit, self._kept_or_written(rest, limit))
            if drafted.counted_tail is None:
                return None  # a line not counted here: the whole summary is counted again
            more = drafted.counted_tail
            tail = last.tail + "\n" + more.text
            raw = last.raw + raw_rest
            final = raw + (more.tokens - raw_rest)  # the new last line's adjustment
        table.last_summary = _LastSummary(limit, counter.encoding_name, list(indices),
                                          tail, raw, final)
        return SummaryDraft(SUMMARY_HEADING + "\n" + tail, APPEND, CountedText(tail, final))

    def _remembered(self, folded: Sequence[Message], limit: int) -> list[str | None] | None:
        """The bodies written for ``folded``'s table at ``limit`` before, by row.

        They are kept on the table (:attr:`MessageTable.written`): planning may
        summarize the same table again with a few more rows folded (still over the token
        trigger), and a table the store keeps for an unchanged session is previewed
        again, and those lines need not be written twice."""
        if not isinstance(folded, MessageSelection):
            return None
        return folded.table.written.get(limit)

    def _remember(self, folded: MessageSelection, limit: int, bodies: list[str]) -> None:
        """Keep ``bodies`` (one per row of ``folded``) by row of its table."""
        table = folded.table
        by_row = table.written.get(limit)
        if by_row is None:
            by_row = table.written[limit] = [None] * len(table)
        for i, body in zip(folded.indices, bodies, strict=True):
            by_row[i] = body

    def _summarize(
        self,
        folded: Sequence[Message],
        limit: int,
        known: tuple[list[str | None] | None, list[int | None] | None],
    ) -> tuple[SummaryDraft, int]:
        """The draft of ``folded`` given its known bodies and counts (_kept_or_written),
        and, when it is counted here, its lines' tokens before the last line's break is
        taken off (else 0). The bodies written are remembered on a table; a counted
        summary of a table's rows is kept as its last one (see _continued)."""
        kept_bodies, kept_costs = known
        wrote = kept_bodies is None or None in kept_bodies
        if kept_bodies is not None and None not in kept_bodies:
            # Every line is kept: the texts are not looked at.
            assert isinstance(folded, MessageSelection)
            roles: Sequence[str] = folded.column(folded.table.roles)
            texts: Sequence[str] = ()
            wholes: Sequence[Message | None] = ()
        elif kept_bodies is not None and isinstance(folded, MessageSelection):
            # Some lines are kept: only the others' texts are looked at, where they are.
            table = folded.table
            roles = folded.column(table.roles)
            texts = _Picked(table.texts, folded.indices)
            wholes = _Picked(table.whole, folded.indices)
        else:
            roles, texts, wholes = _line_columns(folded)
        counter = self.counter
        starts = _start_tokens(counter) if counter is not None and not counter.estimated else {}
        if not starts or not set(roles) <= starts.keys():
            # Not counted here (no counter, the estimate, a role that is not a chat role):
            # request counting counts the summary whole.
            bodies = _fill(kept_bodies, texts, wholes, limit, 0, len(roles))
            if wrote and isinstance(folded, MessageSelection):
                self._remember(folded, limit, bodies)
            lines = map(add, map(_prefix, roles), bodies)
            return SummaryDraft("\n".join([SUMMARY_HEADING, *lines])), 0
        assert counter is not None
        tail, raw, bodies = self._written_and_counted(
            roles, texts, wholes, limit, kept_bodies, kept_costs, counter
        )
        tokens = raw
        if bodies:
            last = bodies[-1]
            tokens += counter.count_text(f" {last}") - counter.count_text(_unit(last))
        if isinstance(folded, MessageSelection):
            if wrote:
                self._remember(folded, limit, bodies)
            folded.table.last_summary = _LastSummary(
                limit, counter.encoding_name, list(folded.indices), tail, raw, tokens
            )
        draft = SummaryDraft(SUMMARY_HEADING + "\n" + tail, APPEND, CountedText(tail, tokens))
        return draft, raw

    def _kept(
        self, folded: Sequence[Message], limit: int
    ) -> tuple[list[str | None] | None, list[int | None] | None]:
        """The summary lines (bodies) the store keeps for the folded messages, and their
        counts where they are in the counter's encoding; ``None`` where there are none
        or they are not at this line length."""
        if limit != CACHED_LINE_CHARS or not isinstance(folded, MessageSelection):
            return None, None
        table = folded.table
        if table.lines is None:
            return None, None
        counter = self.counter
        costs = (
            folded.column(table.line_costs)
            if table.line_costs is not None
            and counter is not None
            and table.encoding == counter.encoding_name
            else None
        )
        return folded.column(table.lines), costs

    def _written_and_counted(
        self,
        roles: Sequence[str],
        texts: Sequence[str],
        wholes: Sequence[Message | None],
        limit: int,
        kept_bodies: list[str | None] | None,
        kept_costs: list[int | None] | None,
        counter: TokenCounter,
    ) -> tuple[str, int, list[str]]:
        """The lines, block by block, and their tokens: each line's ``- role:`` plus each
        body behind a space and before a line break (see the comment above
        :func:`_start_tokens`; the last line's break is the caller's). Kept counts are added; the
        other bodies are counted on a second thread while the later blocks are written
        (tiktoken lets go of the interpreter lock), and what it has not started when all
        is written is counted here meanwhile."""
        starts = _start_tokens(counter)
        tokens = sum(map(starts.__getitem__, roles))
        prefix = {role: _prefix(role) for role in starts}.__getitem__  # chat roles only
        size = len(roles)
        block = self.COUNT_BLOCK_LINES
        pieces: list[str] = []
        bodies: list[str] = []
        pending: list[tuple[str, Future[int]]] = []
        with quick_handoff(), ThreadPoolExecutor(1, thread_name_prefix="summary-count") as pool:
            for start in range(0, size, block):
                stop = min(start + block, size)
                chunk = _fill(kept_bodies, texts, wholes, limit, start, stop)
                bodies.extend(chunk)
                pieces.append("\n".join(map(add, map(prefix, roles[start:stop]), chunk)))
                costs = kept_costs[start:stop] if kept_costs is not None else None
                if costs is None or costs.count(None) == len(costs):
                    uncounted = chunk
                elif None not in costs:
                    uncounted = []
                    tokens += sum(costs)  # type: ignore[arg-type]  # no None
                else:
                    uncounted = [b for b, cost in zip(chunk, costs, strict=True) if cost is None]
                    tokens += sum(cost for cost in costs if cost is not None)
                if not uncounted:
                    continue
                units = " " + "\n ".join(uncounted) + "\n"  # each _unit, one after another
                known = _block_counts.get(units)
                if known is not None:
                    tokens += known
                elif size <= block:
                    tokens += _count_units(units, counter)
                else:
                    pending.append((units, pool.submit(_count_units, units, counter)))
            for units, future in reversed(pending):
                if future.cancel():
                    tokens += _count_units(units, counter)
            tokens += sum(future.result() for _, future in pending if not future.cancelled())
        return "\n".join(pieces), tokens, bodies


@dataclass(frozen=True)
class _LastSummary:
    """A summary counted for some rows of a table (``indices``) at ``limit`` characters a
    line: its lines, their tokens each with its line break (``raw``) and the summary's
    tokens (``final``, the last line's break taken off)."""

    limit: int
    encoding: str
    indices: list[int]
    tail: str
    raw: int
    final: int


class _Picked(Sequence[Any]):
    """``[values[i] for i in indices]``, each entry read when asked for; ``values`` is a
    sequence, or a dict whose missing keys read as ``None`` (a table's whole rows)."""

    def __init__(self, values: Sequence[Any] | dict[int, Any], indices: Sequence[int]):
        self._values = values
        self._indices = indices

    def __len__(self) -> int:
        return len(self._indices)

    def __getitem__(self, index: Any) -> Any:
        values = self._values
        if isinstance(index, slice):
            if isinstance(values, dict):
                return list(map(values.get, self._indices[index]))
            # A comprehension: indexing a list or tuple in it beats map(__getitem__).
            return [values[i] for i in self._indices[index]]
        if isinstance(values, dict):
            return values.get(self._indices[index])
        return values[self._indices[index]]


def _fill(
    kept: list[str | None] | None,
    texts: Sequence[str],
    wholes: Sequence[Message | None],
    limit: int,
    start: int,
    stop: int,
) -> list[str]:
    """The bodies of rows ``start``..``stop``: the kept ones, the others written."""
    bodies = kept[start:stop] if kept is not None else None
    if bodies is None or bodies.count(None) == len(bodies):
        return _bodies(texts[start:stop], wholes[start:stop], limit)
    if None in bodies:
        missing = [k for k, body in enumerate(bodies) if body is None]
        fresh = _bodies([texts[start + k] for k in missing],
                        [wholes[start + k] for k in missing], limit)
        for k, body in zip(missing, fresh, strict=True):
            bodies[k] = body
    return bodies  # type: ignore[return-value]  # no None left


def _count_units(units: str, counter: TokenCounter) -> int:
    """Tokens of bodies behind a space and before a line break (remembered by text)."""
    tokens = counter.count_text(units)
    _block_counts.put(units, tokens)
    return tokens


# Why the lines can be counted without encoding their starts, and body by body: a line
# is ``- role: body``. The tokenizers' pre-tokens end at the ``:`` (punctuation followed
# by a space) and at every line break followed by ``-`` or by a space, and merges never
# cross pre-tokens. So a block of lines costs the tokens of each ``- role:`` (the same
# for every line of a role: counted once per role) plus those of the bodies, each behind
# its space and before a line break, which add up body by body; the last line has no
# break after it. That skips about a third of the encoding work and lets the store keep
# each body's count (line_cache).
_START_TOKENS: dict[str, dict[str, int]] = {}


def _start_tokens(counter: TokenCounter) -> dict[str, int]:
    """Tokens of ``- role:`` for each chat role, in the counter's encoding."""
    found = _START_TOKENS.get(counter.encoding_name)
    if found is None:
        found = {role: counter.count_text(f"- {role}:") for role in ROLES}
        _START_TOKENS[counter.encoding_name] = found
    return found


def _last_block(text: str) -> str:
    cut = text.rfind("\n\n")
    return text[cut + 2 :] if cut >= 0 else text


def combine_summary(previous: str, text: str, mode: str) -> str:
    """The long-term summary after a compaction whose summary is ``text``.

    ``replace`` takes ``text`` as it is. ``append`` adds it after ``previous`` with a
    blank line between; when both ``previous`` ends with and ``text`` starts with an
    extractive block, the new lines continue the old block under its one heading.
    """
    new = text.strip()
    if mode == REPLACE:
        return new
    old = previous.rstrip()
    if not new:
        return old
    if not old:
        return new
    if new.startswith(SUMMARY_HEADING) and _last_block(old).lstrip().startswith(SUMMARY_HEADING):
        rest = new[len(SUMMARY_HEADING) :].strip("\n")
        return old + "\n" + rest if rest else old
    return old + "\n\n" + new
