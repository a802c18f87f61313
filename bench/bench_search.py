"""Full-text search speed on the benchmark corpus (1,000,000 messages by default).

Run as ``.venv/bin/python bench/bench_search.py [--runs 15] [--corpus PATH]``; the corpus
is built first when missing (see ``make_corpus.py``).

Each query class is run through ``workbench.store.search.search`` exactly as the
application calls it (top 50, with snippets, messages + session titles + memory), once
to warm up and then ``--runs`` times; the median and the 95th percentile are printed
with the number of rows that match. Classes: a rare, a medium and a very common word
(about 0.01 %, 1 % and 20 % of rows; goal: median at most 50 ms each), the most common
word, a phrase, a prefix, the very common word restricted to user messages, and text
the index cannot see (``->``, found by a substring scan).

For reference the naive query, ``ORDER BY bm25`` over every matching row followed by
the same snippets, is timed on the very common and the most common word in plain
``sqlite3``, and the ratio ours / naive printed.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sqlite3
import sys
from dataclasses import dataclass, field
from typing import Any

import _common
import make_corpus

from workbench.store import Database
from workbench.store.searching import SearchQuery, search

GOAL_MS = 50.0
LIMIT = 50


@dataclass
class Case:
    """One query class."""

    name: str
    query: SearchQuery
    count_sql: str
    count_params: tuple[Any, ...]
    goal: bool = False
    notes: list[str] = field(default_factory=list)


def _quoted(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def build_cases(meta: dict[str, Any]) -> list[Case]:
    words = meta["words"]
    rare = words["rare"]["word"]
    medium = words["medium"]["word"]
    common = words["very_common"]["word"]
    top = words["top"]["word"]
    phrase = meta["phrase"]
    prefix = meta["prefix"]
    fts_count = "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?"
    cases = [
        Case(f"rare word {rare!r}", SearchQuery(text=rare, limit=LIMIT), fts_count,
             (_quoted(rare),), goal=True),
        Case(f"medium word {medium!r}", SearchQuery(text=medium, limit=LIMIT), fts_count,
             (_quoted(medium),), goal=True),
        Case(f"very common word {common!r}", SearchQuery(text=common, limit=LIMIT),
             fts_count, (_quoted(common),), goal=True),
        Case(f"most common word {top!r}", SearchQuery(text=top, limit=LIMIT), fts_count,
             (_quoted(top),)),
        Case(f"phrase \"{phrase}\"", SearchQuery(text=f'"{phrase}"', limit=LIMIT), fts_count,
             (_quoted(phrase),)),
        Case(f"prefix {prefix}", SearchQuery(text=prefix, limit=LIMIT), fts_count,
             (_quoted(prefix.rstrip("*")) + " *",)),
        Case(
            f"very common {common!r}, role user",
            SearchQuery(text=common, roles=["user"], limit=LIMIT),
            "SELECT count(*) FROM messages_fts AS f JOIN messages AS m ON m.id = f.rowid"
            " WHERE messages_fts MATCH ? AND m.role = 'user'",
            (_quoted(common),),
        ),
        Case(
            "substring '->' (no indexable word)",
            SearchQuery(text="->", limit=LIMIT),
            "SELECT count(*) FROM messages WHERE content LIKE '%->%'",
            (),
        ),
        Case(
            "substring '<=>' (matches nothing: whole-table scan)",
            SearchQuery(text="<=>", limit=LIMIT),
            "SELECT count(*) FROM messages WHERE content LIKE '%<=>%'",
            (),
        ),
    ]
    return cases


_NAIVE_RANK = (
    "SELECT m.id, m.session_id, m.role, m.position, bm25(messages_fts) AS score"
    " FROM messages_fts AS f JOIN messages AS m ON m.id = f.rowid"
    " WHERE messages_fts MATCH ? ORDER BY score LIMIT ?"
)
_SNIPPETS = (
    "SELECT rowid, snippet(messages_fts, 0, '«', '»', '…', 16) FROM messages_fts"
    " WHERE messages_fts MATCH ? AND rowid IN ({marks})"
)


def naive_search(conn: sqlite3.Connection, word: str) -> int:
    """Rank every matching row by BM25, then take snippets of the best 50."""
    expr = _quoted(word)
    conn.execute("BEGIN")
    try:
        rows = conn.execute(_NAIVE_RANK, (expr, LIMIT)).fetchall()
        ids = [r[0] for r in rows]
        if ids:
            conn.execute(
                _SNIPPETS.format(marks=", ".join("?" for _ in ids)), (expr, *ids)
            ).fetchall()
    finally:
        conn.execute("ROLLBACK")
    return len(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    make_corpus.add_corpus_arguments(parser)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--profile", metavar="TEXT",
                        help="profile search(TEXT) with cProfile instead of timing")
    parser.add_argument("--explain", action="store_true",
                        help="print the query plans of the naive reference")
    args = parser.parse_args(argv)

    info = make_corpus.corpus_from_args(args)
    make_corpus.print_summary(info)
    db = Database.open(info.path)
    raw = _common.raw_connect(info.path, readonly=True)
    try:
        if args.profile:
            query = SearchQuery(text=args.profile, limit=LIMIT)
            search(db, query)
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(args.runs):
                search(db, query)
            profiler.disable()
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
            return 0

        _common.header(
            f"search: top {LIMIT} with snippets, median / p95 of {args.runs} runs "
            "after one warm-up"
        )
        print(f"  {_common.load_note()}; cpu = CPU time of the searching thread")
        print(
            f"  {'query':<52} {'median':>10} {'p95':>10} {'cpu':>10} {'hits':>5}"
            f" {'matching rows':>14}"
        )
        medians: dict[str, float] = {}
        missed: list[str] = []
        for case in build_cases(info.meta):
            hits = len(search(db, case.query))
            timing = _common.time_calls(lambda q=case.query: search(db, q), runs=args.runs)
            matches = raw.execute(case.count_sql, case.count_params).fetchone()[0]
            medians[case.name] = timing.median
            mark = ""
            if case.goal:
                mark = "  goal <= 50 ms: " + _common.verdict(
                    timing.median * 1000, GOAL_MS, at_most=True
                )
                if timing.median * 1000 > GOAL_MS:
                    missed.append(case.name)
            print(
                f"  {case.name:<52} {_common.ms(timing.median):>10} {_common.ms(timing.p95):>10}"
                f" {_common.ms(timing.cpu):>10} {hits:>5} {matches:>14,}{mark}"
            )

        _common.header("reference: naive ORDER BY bm25 over every match (plain sqlite3)")
        words = info.meta["words"]
        for label, key in (("very common", "very_common"), ("most common", "top")):
            word = words[key]["word"]
            timing = _common.time_calls(lambda w=word: naive_search(raw, w), runs=args.runs)
            ours = next(v for k, v in medians.items() if k.startswith(f"{label} word"))
            print(
                f"  {label} word {word!r}: naive median {_common.ms(timing.median)}, "
                f"p95 {_common.ms(timing.p95)}, cpu {_common.ms(timing.cpu)}; "
                f"ours {_common.ms(ours)}; ours / naive = {ours / timing.median:.2f}"
            )
            if args.explain:
                _common.print_plan("the naive ranking", _common.explain(
                    raw, _NAIVE_RANK, (_quoted(word), LIMIT)
                ))
        print()
        if missed:
            print(f"goal missed for: {', '.join(missed)}")
        else:
            print("goal (median <= 50 ms for rare, medium and very common words): met")
    finally:
        raw.close()
        db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
