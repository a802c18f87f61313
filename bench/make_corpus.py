"""Build the deterministic benchmark corpus: a workbench database of chat sessions.

Run as ``.venv/bin/python bench/make_corpus.py [--out PATH] [--messages 1000000]
[--sessions 10000] [--seed 1] [--rebuild]``. The other benchmarks call
:func:`ensure_corpus`, which reuses the file when its recorded parameters match.

What it holds (same seed, same text, on any machine):

* ``--sessions`` sessions holding ``--messages`` messages: a few very long ones
  (``--big-sessions`` of ``--big-size`` messages, 3 x 100,000 by default, spread
  through the id range) and the rest log-normally sized (median about 40 messages).
* Sessions as agents write them: a system prompt first in most, user and assistant
  turns, assistant turns that call tools (JSON arguments) followed by the tool
  results, some code blocks and command output, and a few sessions whose early
  messages are folded, as after a compaction.
* Log-normal message lengths: short user turns, longer assistant replies, tool results
  from one line to a few pages.
* Text from a generated vocabulary of pseudo-words drawn with a Zipf distribution, so
  there are words in most rows, in a fifth, in a hundredth and in a handful of rows,
  plus recurring stock phrases. After the build the words closest to 20 %, 1 % and
  0.01 % of rows are looked up in the full-text index and recorded, with the query
  strings the search benchmark uses, in the ``settings`` row ``bench.corpus``.

It is written through the store's own fast path (``Repository.import_many`` in batches
of about 50,000 messages), with token counts filled by ``workbench.core.tokens``
before import, so the file has a real full-text index and cached counts.
"""

from __future__ import annotations

import argparse
import itertools
import json
import operator
import os
import random
import sqlite3
import sys
import time
from array import array
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import _common

_common.prepare_environment()

from workbench.core.conversation import Conversation, Message  # noqa: E402
from workbench.core.tokens import get_counter  # noqa: E402
from workbench.store import Database, Repository  # noqa: E402
from workbench.store.migrations import MIGRATIONS  # noqa: E402

#: Bump when the generated content changes, so stale corpora are rebuilt.
GENERATOR_VERSION = 1
SETTINGS_KEY = "bench.corpus"
DEFAULT_PATH = _common.DATA_DIR / "corpus.db"

VOCABULARY_SIZE = 80_000
ZIPF_EXPONENT = 1.0
# Words are drawn through a lookup table of 2**22 slots: exact enough that the rarest
# word still has a few slots, and a draw costs one table index.
TABLE_BITS = 22
PHRASE_COUNT = 400
BATCH_MESSAGES = 50_000
BASE_TIME = datetime(2024, 1, 1, tzinfo=UTC)

#: Fraction of rows each frequency class aims at.
WORD_CLASSES = {"very_common": 0.20, "medium": 0.01, "rare": 0.0001}

TOOLS = ("read_file", "run_command", "search_code", "write_file", "list_directory",
         "web_search")
TAGS = ("work", "research", "debug", "draft", "code", "notes", "review", "ops")
LANGUAGES = ("python", "python", "python", "typescript", "rust", "sql", "bash")
EXTENSIONS = (".py", ".py", ".py", ".ts", ".rs", ".sql", ".md", ".toml")


@dataclass(frozen=True)
class CorpusParams:
    """What a corpus is built from; two corpora with equal parameters are equal."""

    messages: int = 1_000_000
    sessions: int = 10_000
    seed: int = 1
    big_sessions: int = 3
    big_size: int = 100_000

    def effective_big_size(self) -> int:
        """The long sessions' size, cut down so they hold at most 30 % of a small corpus."""
        if self.big_sessions <= 0:
            return 0
        return min(self.big_size, int(self.messages * 0.3) // self.big_sessions)

    def key(self) -> dict[str, Any]:
        return {**asdict(self), "generator": GENERATOR_VERSION}


@dataclass
class CorpusInfo:
    """A built corpus: where it is and what was recorded about it."""

    path: Path
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def big_session_ids(self) -> list[int]:
        return list(self.meta["big_session_ids"])

    @property
    def words(self) -> dict[str, dict[str, Any]]:
        return dict(self.meta["words"])


# -- vocabulary -----------------------------------------------------------------------------


def make_vocabulary(seed: int) -> list[str]:
    """Distinct pronounceable pseudo-words, shortest first (short words are the common
    ones in real text), in a seeded order within each length."""
    rng = random.Random(f"{seed}-vocabulary")
    onsets = ("b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t",
              "v", "w", "z", "br", "st", "tr", "pl", "gr", "sh", "ch", "th")
    vowels = ("a", "e", "i", "o", "u", "a", "e", "o", "ai", "ou")
    endings = ("", "", "", "", "s", "n", "r", "l", "ed", "er", "ing", "ly", "t")
    words: set[str] = set()
    while len(words) < VOCABULARY_SIZE:
        syllables = rng.choice((1, 1, 2, 2, 2, 3, 3, 3, 4))
        word = "".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(syllables))
        words.add(word + rng.choice(endings))
    keyed = sorted(words)
    rng.shuffle(keyed)
    return sorted(keyed, key=len)  # stable: seeded order within a length


def zipf_table(size: int, bits: int, exponent: float) -> list[int]:
    """Ranks laid out over ``2**bits`` slots in proportion to ``1 / (rank + 1) ** s``."""
    slots = 1 << bits
    weights = [1.0 / (rank + 1) ** exponent for rank in range(size)]
    total = sum(weights)
    exact = [w * slots / total for w in weights]
    counts = [int(x) for x in exact]
    # Largest remainders take the slots left over; ties go to the lower rank.
    left = slots - sum(counts)
    order = sorted(range(size), key=lambda r: (-(exact[r] - counts[r]), r))
    for rank in order[:left]:
        counts[rank] += 1
    table: list[int] = []
    for rank, count in enumerate(counts):
        table.extend([rank] * count)
    return table


class WordStream:
    """An endless seeded stream of Zipf-distributed words, drawn a million at a time."""

    def __init__(self, seed: int, vocabulary: list[str]):
        self._rng = random.Random(f"{seed}-words")
        ranks = zipf_table(len(vocabulary), TABLE_BITS, ZIPF_EXPONENT)
        self._table = [vocabulary[r] for r in ranks]
        self._buffer: list[str] = []
        self._pos = 0

    def take(self, count: int) -> list[str]:
        if self._pos + count > len(self._buffer):
            self._refill(max(count, 1_000_000))
        out = self._buffer[self._pos : self._pos + count]
        self._pos += count
        return out

    def _refill(self, count: int) -> None:
        raw = array("I")
        raw.frombytes(self._rng.randbytes(4 * count))
        if sys.byteorder == "big":
            raw.byteswap()  # the same words on every machine
        shift = 32 - TABLE_BITS
        fresh = operator.itemgetter(*[x >> shift for x in raw])(self._table)
        self._buffer = self._buffer[self._pos :] + list(fresh)
        self._pos = 0


# -- text ---------------------------------------------------------------------------------


_CODE_LINES = {
    "python": (
        "def {a}_{b}(self, {c}: int) -> list[str]:",
        "    return [{a}.{b}({c}) for {c} in {a}_{b}s]",
        "    if {a} is None or {b} > {n}:",
        "        raise ValueError(f\"{a} {b}: {{{c}!r}}\")",
        "    {a}_{b} = {{\"{c}\": {n}, \"{a}\": [{n}, {b}]}}",
        "class {A}{B}({C}):",
        "    # {a} {b} {c} before the {c}",
        "async def {a}(self) -> {A}:",
        "from {a}.{b} import {C}",
    ),
    "typescript": (
        "const {a}{B} = async ({c}: number): Promise<{A}> => {{",
        "  return {c}.map(({a}) => {a}.{b}).filter(Boolean);",
        "export function {a}({b}: string): {C} {{",
        "  if ({a} === undefined) throw new Error(`{b} ${{{c}}}`);",
        "}}",
    ),
    "rust": (
        "fn {a}_{b}(&self, {c}: usize) -> Result<{A}, {B}Error> {{",
        "    let {a} = self.{b}.get({c}).ok_or({B}Error::{C})?;",
        "    Ok({A}::new({a}, {n}))",
        "impl {A} for {B} {{",
        "}}",
    ),
    "sql": (
        "SELECT {a}, count(*) FROM {b} WHERE {c} > {n} GROUP BY {a};",
        "CREATE INDEX ix_{a}_{b} ON {a} ({b}, {c});",
        "UPDATE {a} SET {b} = {n} WHERE {c} IS NULL;",
    ),
    "bash": (
        "{a} --{b} {n} ./{c}/",
        "export {A}_{B}={n}",
        "for f in {a}/*; do {b} \"$f\"; done",
    ),
}


class TextWriter:
    """Messages' text: prose, code, tool arguments and tool output."""

    def __init__(self, seed: int, vocabulary: list[str]):
        self.rng = random.Random(f"{seed}-text")
        self.stream = WordStream(seed, vocabulary)
        # Recurring expressions, themselves Zipf-distributed, from the middle ranks.
        phrase_rng = random.Random(f"{seed}-phrases")
        middle = vocabulary[100:5000]
        self.phrases = [
            " ".join(phrase_rng.sample(middle, phrase_rng.choice((2, 2, 3)))) + " "
            for _ in range(PHRASE_COUNT)
        ]
        self._phrase_weights = list(
            itertools.accumulate(1.0 / (rank + 1) for rank in range(PHRASE_COUNT))
        )

    def words(self, count: int) -> list[str]:
        return self.stream.take(count)

    def sentence(self, count: int) -> str:
        rng = self.rng
        words = self.stream.take(count)
        if rng.random() < 0.1:
            words.insert(rng.randrange(len(words) + 1), str(rng.randrange(100_000)))
        text = " ".join(words)
        if rng.random() < 0.12:
            phrase = rng.choices(self.phrases, cum_weights=self._phrase_weights)[0]
            text = phrase + text
        return text[:1].upper() + text[1:] + rng.choice((".", ".", ".", ".", "?", "!", ":"))

    def prose(self, count: int) -> str:
        """About ``count`` words in sentences, sometimes in paragraphs or a list."""
        rng = self.rng
        sentences: list[str] = []
        left = max(1, count)
        while left > 0:
            n = min(left, rng.randint(4, 20))
            sentences.append(self.sentence(n))
            left -= n
        if len(sentences) > 4 and rng.random() < 0.3:
            cut = rng.randrange(2, len(sentences) - 1)
            return " ".join(sentences[:cut]) + "\n\n" + " ".join(sentences[cut:])
        if len(sentences) > 3 and rng.random() < 0.15:
            return sentences[0] + "\n\n- " + "\n- ".join(sentences[1:])
        return " ".join(sentences)

    def code(self, lines: int, language: str | None = None) -> str:
        rng = self.rng
        language = language or rng.choice(LANGUAGES)
        templates = _CODE_LINES[language]
        out = []
        for _ in range(max(1, lines)):
            a, b, c = self.stream.take(3)
            out.append(
                rng.choice(templates).format(
                    a=a, b=b, c=c, A=a.capitalize(), B=b.capitalize(), C=c.capitalize(),
                    n=rng.randrange(4096),
                )
            )
        return "```" + language + "\n" + "\n".join(out) + "\n```"

    def path(self) -> str:
        parts = self.stream.take(self.rng.randint(1, 3))
        return "src/" + "/".join(parts) + self.rng.choice(EXTENSIONS)

    def tool_arguments(self, tool: str) -> dict[str, Any]:
        rng = self.rng
        if tool == "read_file":
            return {"path": self.path()}
        if tool == "write_file":
            return {"path": self.path(), "content": self.code(rng.randint(2, 12))}
        if tool == "run_command":
            a, b = self.stream.take(2)
            return {"command": f"{a} --{b} {self.path()}", "timeout": rng.choice((30, 60, 120))}
        if tool == "list_directory":
            return {"path": self.path().rsplit("/", 1)[0], "recursive": rng.random() < 0.3}
        return {"query": " ".join(self.stream.take(rng.randint(2, 6))),
                "max_results": rng.choice((5, 10, 20))}

    def tool_result(self, tool: str, size: int) -> str:
        rng = self.rng
        if tool in ("read_file", "write_file"):
            if tool == "write_file":
                return f"Wrote {rng.randint(1, 400)} lines to {self.path()}."
            return self.code(max(1, size // 6))
        if tool == "run_command":
            lines = []
            for _ in range(max(1, size // 8)):
                a, b = self.stream.take(2)
                lines.append(
                    rng.choice((
                        f"PASSED tests/test_{a}.py::test_{b}",
                        f"FAILED tests/test_{a}.py::test_{b} - AssertionError: {b}",
                        f"{a}: {rng.randint(1, 999)} {b} in {rng.random():.2f}s",
                        f"warning: unused variable `{a}_{b}`",
                    ))
                )
            return "\n".join(lines)
        if tool == "list_directory":
            return "\n".join(
                w + rng.choice(EXTENSIONS) for w in self.stream.take(max(1, size // 2))
            )
        if tool == "search_code":
            lines = []
            for _ in range(max(1, size // 10)):
                lines.append(f"{self.path()}:{rng.randint(1, 900)}: " + self.sentence(7))
            return "\n".join(lines)
        results = []
        for _ in range(max(1, size // 25)):
            title = " ".join(self.stream.take(4))
            results.append({
                "title": title.capitalize(),
                "url": "https://" + "-".join(self.stream.take(2)) + ".example/"
                       + "/".join(self.stream.take(2)),
                "snippet": self.sentence(18),
            })
        return json.dumps(results, ensure_ascii=False)


# -- sessions -----------------------------------------------------------------------------


def session_sizes(params: CorpusParams) -> tuple[list[int], set[int]]:
    """Messages per session in order, and the indices of the long sessions."""
    rng = random.Random(f"{params.seed}-sizes")
    big_count = min(params.big_sessions, params.sessions)
    big_size = params.effective_big_size()
    small_count = params.sessions - big_count
    rest = params.messages - big_count * big_size
    if small_count <= 0 or rest < 2 * small_count:
        raise SystemExit(
            f"{params.messages:,} messages cannot fill {params.sessions:,} sessions "
            f"(at least 2 each besides the {big_count} long ones)"
        )
    raw = [rng.lognormvariate(0.0, 1.0) for _ in range(small_count)]
    scale = (rest - 2 * small_count) / sum(raw)
    exact = [2 + r * scale for r in raw]
    sizes = [int(x) for x in exact]
    left = rest - sum(sizes)
    for index in sorted(range(small_count), key=lambda i: (sizes[i] - exact[i], i))[:left]:
        sizes[index] += 1
    big_at = {(i + 1) * params.sessions // (big_count + 1) for i in range(big_count)}
    out: list[int] = []
    small = iter(sizes)
    for index in range(params.sessions):
        out.append(big_size if index in big_at else next(small))
    return out, big_at


class SessionWriter:
    """Whole conversations with the shape of agent sessions."""

    def __init__(self, params: CorpusParams, vocabulary: list[str]):
        self.params = params
        self.rng = random.Random(f"{params.seed}-sessions")
        self.text = TextWriter(params.seed, vocabulary)

    def _length(self, median: float, sigma: float, cap: int) -> int:
        return max(1, min(cap, int(self.rng.lognormvariate(0.0, sigma) * median)))

    def conversation(self, index: int, size: int, big: bool) -> Conversation:
        rng = self.rng
        text = self.text
        when = BASE_TIME + timedelta(minutes=index * 50 + rng.randrange(50))
        messages: list[Message] = []

        def add(msg: Message, gap: float) -> None:
            nonlocal when
            when += timedelta(seconds=gap)
            msg.created_at = when
            messages.append(msg)

        if rng.random() < 0.85:
            add(Message(role="system", content=text.prose(self._length(45, 0.6, 400))), 0)
        while len(messages) < size:
            user_words = self._length(14, 1.0, 800)
            content = text.prose(user_words)
            if rng.random() < 0.08:
                content += "\n\n" + text.code(rng.randint(2, 15))
            add(Message(role="user", content=content), rng.uniform(20, 900))
            rounds = 0
            while len(messages) < size:
                if rounds < 4 and rng.random() < 0.35:
                    rounds += 1
                    calls = []
                    for _ in range(rng.choices((1, 2, 3), (70, 20, 10))[0]):
                        tool = rng.choice(TOOLS)
                        calls.append({
                            "id": f"call_{rng.getrandbits(64):016x}",
                            "type": "function",
                            "function": {
                                "name": tool,
                                "arguments": json.dumps(text.tool_arguments(tool)),
                            },
                        })
                    lead = text.prose(rng.randint(3, 16)) if rng.random() < 0.6 else ""
                    add(Message(role="assistant", content=lead, tool_calls=calls),
                        rng.uniform(1, 20))
                    for call in calls:
                        name = call["function"]["name"]
                        add(
                            Message(
                                role="tool",
                                content=text.tool_result(name, self._length(30, 1.2, 3000)),
                                name=name,
                                tool_call_id=call["id"],
                            ),
                            rng.uniform(0.05, 8),
                        )
                else:
                    reply = text.prose(self._length(40, 0.9, 2500))
                    if rng.random() < 0.22:
                        reply += "\n\n" + text.code(self._length(10, 0.7, 120))
                        if rng.random() < 0.5:
                            reply += "\n\n" + text.prose(self._length(15, 0.8, 300))
                    add(Message(role="assistant", content=reply), rng.uniform(2, 60))
                    break
        del messages[size:]
        if not big and size >= 60 and rng.random() < 0.05:
            start = 1 if messages[0].role == "system" else 0
            for msg in messages[start : size // 3]:
                msg.state = "folded"
        tags = rng.sample(TAGS, rng.choice((0, 0, 1, 1, 2)))
        title = " ".join(text.words(rng.randint(3, 7)))
        return Conversation(
            title=title[:1].upper() + title[1:],
            messages=messages,
            source="bench",
            source_id=f"bench-{self.params.seed}-{index}",
            tags=tags,
        )


# -- the corpus file ----------------------------------------------------------------------


def read_meta(path: Path) -> dict[str, Any] | None:
    """The recorded description of a finished corpus, or None when there is none."""
    if not path.is_file():
        return None
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = conn.execute(
                "SELECT value FROM settings WHERE key = ?", (SETTINGS_KEY,)
            ).fetchone()
            applied = [r[0] for r in conn.execute("SELECT name FROM schema_migrations")]
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    if row is None:
        return None
    meta = json.loads(row[0])
    # A schema change would make Database.open migrate (and back up) a gigabyte file:
    # a corpus of another schema is rebuilt instead. A change for PostgreSQL only changes
    # nothing in the file (opening it records the change, without a backup).
    missing = [m for m in MIGRATIONS if m.name not in applied]
    meta["_schema_current"] = (set(applied) <= {m.name for m in MIGRATIONS}
                               and not any(m.statements for m in missing))
    return meta


def _doc_count(conn: sqlite3.Connection, word: str) -> int:
    row = conn.execute("SELECT doc FROM messages_fts_vocab WHERE term = ?", (word,)).fetchone()
    return int(row[0]) if row else 0


def _word_near(
    conn: sqlite3.Connection, vocabulary: list[str], target: float, taken: set[str]
) -> tuple[str, int]:
    """The vocabulary word whose row count is closest to ``target`` (counts fall with rank,
    give or take noise, so a binary search lands in the right neighbourhood)."""
    lo, hi = 0, len(vocabulary) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if _doc_count(conn, vocabulary[mid]) > target:
            lo = mid + 1
        else:
            hi = mid
    best: tuple[float, str, int] | None = None
    for rank in range(max(0, lo - 15), min(len(vocabulary), lo + 16)):
        word = vocabulary[rank]
        if word in taken:
            continue
        docs = _doc_count(conn, word)
        if docs == 0:
            continue
        key = abs(docs - target) / target
        if best is None or key < best[0]:
            best = (key, word, docs)
    if best is None:
        raise SystemExit(f"no word found near {target:.0f} rows")
    return best[1], best[2]


def describe_words(
    path: Path, vocabulary: list[str], messages: int, phrases: list[str]
) -> dict[str, Any]:
    """Find the frequency-class words and the phrase and prefix queries in the index."""
    conn = sqlite3.connect(str(path))
    try:
        words: dict[str, dict[str, Any]] = {}
        taken: set[str] = set()
        for name, fraction in WORD_CLASSES.items():
            word, docs = _word_near(conn, vocabulary, messages * fraction, taken)
            taken.add(word)
            words[name] = {"word": word, "rows": docs, "fraction": docs / messages}
        top = max(vocabulary[:50], key=lambda w: _doc_count(conn, w))
        words["top"] = {
            "word": top,
            "rows": _doc_count(conn, top),
            "fraction": _doc_count(conn, top) / messages,
        }
    finally:
        conn.close()
    medium = words["medium"]["word"]
    return {
        "words": words,
        "phrase": phrases[0].strip(),
        "prefix": medium[:3] + "*",
    }


def build_corpus(path: Path, params: CorpusParams, *, quiet: bool = False) -> CorpusInfo:
    """Write a fresh corpus to ``path`` (replacing any file there)."""
    say = _sayer(quiet)
    started = time.perf_counter()
    vocabulary = make_vocabulary(params.seed)
    sizes, big_at = session_sizes(params)
    writer = SessionWriter(params, vocabulary)
    counter = get_counter()
    if counter.estimated:
        say("warning: no token vocabulary could be loaded; counts are estimates")

    scratch = path.with_name(path.name + ".building")
    _common.remove_database(scratch)
    db = Database.open(scratch)
    repo = Repository(db)
    agent_id = repo.default_agent().id
    phases = {"generate": 0.0, "count": 0.0, "import": 0.0}
    big_ids: list[int] = []
    tokens = 0
    done = 0
    batch: list[Conversation] = []
    batch_messages = 0
    batch_big: list[int] = []

    def flush() -> None:
        nonlocal batch, batch_messages, batch_big, tokens
        if not batch:
            return
        t0 = time.perf_counter()
        msgs = [m for conv in batch for m in conv.messages]
        counts = counter.count_messages(msgs)
        for msg, count in zip(msgs, counts, strict=True):
            msg.token_count = count
            msg.token_encoding = counter.encoding_name
        tokens += sum(counts)
        t1 = time.perf_counter()
        outcomes = repo.import_many(batch, agent_id=agent_id)
        phases["count"] += t1 - t0
        phases["import"] += time.perf_counter() - t1
        big_ids.extend(outcomes[i].session.id for i in batch_big)
        batch, batch_messages, batch_big = [], 0, []

    try:
        for index, size in enumerate(sizes):
            t0 = time.perf_counter()
            conv = writer.conversation(index, size, index in big_at)
            phases["generate"] += time.perf_counter() - t0
            if index in big_at:
                batch_big.append(len(batch))
            batch.append(conv)
            batch_messages += size
            done += size
            if batch_messages >= BATCH_MESSAGES:
                flush()
                elapsed = time.perf_counter() - started
                say(f"  {done:>9,} / {params.messages:,} messages  ({elapsed:5.1f} s)",
                    flush=True)
        flush()
        t0 = time.perf_counter()
        build_seconds = time.perf_counter() - started
        described = describe_words(scratch, vocabulary, params.messages, writer.text.phrases)
        meta: dict[str, Any] = {
            "params": params.key(),
            **asdict(params),
            "big_size": params.effective_big_size(),
            "big_session_ids": big_ids,
            "encoding": counter.encoding_name,
            "tokens": tokens,
            **described,
            "build_seconds": round(build_seconds, 1),
            "phase_seconds": {k: round(v, 1) for k, v in phases.items()},
            "describe_seconds": round(time.perf_counter() - t0, 1),
        }
        repo.set_setting(SETTINGS_KEY, meta)
    finally:
        db.close()
    # Fold the WAL into the file so that it can be moved into place on its own.
    conn = sqlite3.connect(str(scratch))
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    _common.remove_database(path)
    os.replace(scratch, path)
    for suffix in ("-wal", "-shm"):
        leftover = Path(str(scratch) + suffix)
        if leftover.exists():
            leftover.unlink()
    return CorpusInfo(path, meta)


def ensure_corpus(
    path: Path | str | None = None,
    params: CorpusParams | None = None,
    *,
    rebuild: bool = False,
    quiet: bool = False,
) -> CorpusInfo:
    """The corpus at ``path`` (default ``bench/.data/corpus.db``), built first when it is
    missing, unfinished, of other parameters or of an older schema or generator."""
    _common.prepare_data_dir()
    path = Path(path) if path is not None else DEFAULT_PATH
    params = params or CorpusParams()
    meta = read_meta(path)
    if meta is None and path.exists():
        raise SystemExit(
            f"{path} exists but is not a benchmark corpus; it was left alone "
            "(pass another --corpus/--out path)"
        )
    if rebuild:
        meta = None
    if (
        meta is not None
        and meta.pop("_schema_current", False)
        and meta.get("params") == params.key()
    ):
        return CorpusInfo(path, meta)
    say = _sayer(quiet)
    say(
        f"building the corpus {path} ({params.messages:,} messages, "
        f"{params.sessions:,} sessions, seed {params.seed}); this takes a few minutes once"
    )
    info = build_corpus(path, params, quiet=quiet)
    say(f"corpus built in {info.meta['build_seconds']:.1f} s")
    return info


def _sayer(quiet: bool) -> Any:
    def say(*parts: Any, **kwargs: Any) -> None:
        if not quiet:
            print(*parts, **kwargs)

    return say


def add_corpus_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every benchmark takes to pick its corpus."""
    parser.add_argument("--corpus", type=Path, default=None,
                        help=f"corpus database (default {DEFAULT_PATH})")
    parser.add_argument("--messages", type=int, default=CorpusParams.messages)
    parser.add_argument("--sessions", type=int, default=CorpusParams.sessions)
    parser.add_argument("--seed", type=int, default=CorpusParams.seed)


def corpus_from_args(args: argparse.Namespace) -> CorpusInfo:
    return ensure_corpus(
        args.corpus, CorpusParams(messages=args.messages, sessions=args.sessions, seed=args.seed)
    )


def print_summary(info: CorpusInfo) -> None:
    meta = info.meta
    size = _common.file_size(info.path)
    print(
        f"corpus {info.path}: {meta['messages']:,} messages in {meta['sessions']:,} sessions "
        f"(seed {meta['seed']}), {size / 1e6:,.0f} MB on disk, built in "
        f"{meta['build_seconds']:.1f} s"
    )
    phases = meta.get("phase_seconds", {})
    if phases:
        print(
            "  build phases: "
            + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in phases.items())
        )
    print(
        f"  long sessions (ids) {meta['big_session_ids']} of {meta['big_size']:,} messages; "
        f"{meta['tokens']:,} tokens ({meta['encoding']})"
    )
    for name, word in meta["words"].items():
        print(
            f"  {name:<12} word {word['word']!r:<12} in {word['rows']:>9,} rows "
            f"({word['fraction'] * 100:.3g} %)"
        )
    print(f"  phrase {meta['phrase']!r}, prefix {meta['prefix']!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None,
                        help=f"where to write the corpus (default {DEFAULT_PATH})")
    parser.add_argument("--messages", type=int, default=CorpusParams.messages)
    parser.add_argument("--sessions", type=int, default=CorpusParams.sessions)
    parser.add_argument("--seed", type=int, default=CorpusParams.seed)
    parser.add_argument("--big-sessions", type=int, default=CorpusParams.big_sessions)
    parser.add_argument("--big-size", type=int, default=CorpusParams.big_size)
    parser.add_argument("--rebuild", action="store_true",
                        help="build even when a matching corpus exists")
    args = parser.parse_args(argv)
    params = CorpusParams(
        messages=args.messages,
        sessions=args.sessions,
        seed=args.seed,
        big_sessions=args.big_sessions,
        big_size=args.big_size,
    )
    started = time.perf_counter()
    info = ensure_corpus(args.out, params, rebuild=args.rebuild)
    print(f"ready in {time.perf_counter() - started:.1f} s")
    print_summary(info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
