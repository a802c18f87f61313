"""Summarizers for compaction (SPEC §4) and the text helpers they share.

Every summarizer has ``summarize(folded, previous)`` and returns a :class:`SummaryDraft`:
text that is either *appended* to the session's long-term summary or *replaces* it
(:func:`combine_summary` joins them). :class:`ExtractiveSummarizer` needs no model: one
``- role: text`` line per folded message under the ``Previous conversation summary:``
heading, long texts shortened. The model summarizer lives in the engine
(:class:`workbench.engine.compaction.ModelSummarizer`): it talks to a provider.

:func:`count_long_text` counts a long summary exactly on several threads.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from workbench.core.conversation import Message
from workbench.core.tokens import TokenCounter

__all__ = [
    "APPEND",
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
    "message_line",
    "shorten",
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
    text = message.content or ""
    if message.role == "assistant" and message.tool_calls:
        called = "called " + ", ".join(_call_names(message))
        text = f"{text} [{called}]" if text.strip() else f"[{called}]"
    elif message.role == "tool" and message.name:
        text = f"{message.name} → {text}"
    body = shorten(text, limit) if text.strip() else "(empty)"
    return f"- {message.role}: {body}"


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
    """Forget the remembered block counts and lines (benchmarks time a first preview
    with it)."""
    _block_counts.clear()
    _known_lines.clear()


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
    :data:`MIN_LINE_CHARS`)."""

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
        counter = self.counter
        block = self.COUNT_BLOCK_LINES
        limit = self.line_limit(len(folded))
        if counter is None or counter.estimated or len(folded) < 2 * block:
            return SummaryDraft("\n".join([SUMMARY_HEADING, *self._lines(folded, limit)]))
        lines: list[str] = []
        tokens = 0
        with ThreadPoolExecutor(1, thread_name_prefix="summary-count") as pool:
            pending = []
            for start in range(0, len(folded), block):
                chunk = self._lines(folded[start : start + block], limit)
                lines.extend(chunk)
                # Every line starts with "- ", so each piece but the last ends right
                # before a line break followed by "-": the pieces' counts add up exactly.
                piece = "\n".join(chunk) + ("\n" if start + block < len(folded) else "")
                known = _block_counts.get(piece)
                if known is not None:
                    tokens += known
                else:
                    pending.append((piece, pool.submit(counter.count_text, piece)))
            # All written: what the worker has not started yet is counted here meanwhile.
            for piece, future in reversed(pending):
                if future.cancel():
                    count = counter.count_text(piece)
                    tokens += count
                    _block_counts.put(piece, count)
            for piece, future in pending:
                if not future.cancelled():
                    count = future.result()
                    tokens += count
                    _block_counts.put(piece, count)
        tail = "\n".join(lines)
        text = SUMMARY_HEADING + "\n" + tail
        return SummaryDraft(text, APPEND, CountedText(tail, tokens))

    @staticmethod
    def _lines(folded: Sequence[Message], limit: int) -> list[str]:
        span = limit * 2 + 8
        lines: list[str] = []
        append = lines.append
        known = _known_lines.get
        remember = _known_lines.__setitem__
        # message_line inlined for plain text, which is nearly every message: folding
        # ten thousand messages spends its time here.
        for msg in folded:
            text = msg.content
            if (msg.tool_calls and msg.role == "assistant") or (msg.name and msg.role == "tool"):
                append(message_line(msg, limit))
                continue
            if not text:
                append(f"- {msg.role}: (empty)")
                continue
            size = len(text)
            short = size <= span
            seen = known(msg.id) if msg.id is not None else None
            if (
                seen is not None
                and seen[0] == limit
                and seen[1] == msg.role
                and (seen[2] == size if short else seen[2] < 0)
                and text.startswith(seen[3])
            ):
                append(seen[4])
                continue
            head = text if short else text[:span]
            if head.isprintable() and "  " not in head:
                # Every character str.split breaks at, but the ASCII space, is a control
                # or separator character, which isprintable() rejects: with no double
                # space either, collapsing the whitespace is stripping the ends.
                flat = head.strip()
            else:
                flat = " ".join(head.split())
            if len(flat) > limit:
                flat = flat[: limit - 1].rstrip() + "…"
            elif not short:
                # Mostly whitespace early on (or only whitespace: no line text at all).
                append(f"- {msg.role}: {shorten(text, limit) or '(empty)'}")
                continue
            elif not flat:
                flat = "(empty)"
            line = f"- {msg.role}: {flat}"
            append(line)
            if msg.id is not None:
                # The line depends on the first ``span`` characters and on whether the
                # text is longer: that much is kept to compare, not the whole text.
                remember(msg.id, (limit, msg.role, size if short else -1, head, line))
        if len(_known_lines) > _KNOWN_LINES_MAX:
            _known_lines.clear()  # rare: a bound on memory, not a cache policy
        return lines


# The line each stored message last gave, by message id, with what it was made from (the
# limit, the role, the text's length when short and the part of the text the line is
# made of, all compared on use, so an edited message is never served an old line). A
# second preview of a session, after another keep count or an edit, then writes only the
# lines of what changed. At most a few hundred characters per entry; plain dict
# operations are atomic under the interpreter lock, so threads may share it.
_known_lines: dict[int, tuple[int, str, int, str, str]] = {}
_KNOWN_LINES_MAX = 120_000


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
