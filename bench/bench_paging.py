"""Paging speed in a long session: 200 messages anywhere in 100,000.

Run as ``.venv/bin/python bench/bench_paging.py [--runs 15] [--corpus PATH]``; the corpus
is built first when missing (see ``make_corpus.py``).

``Repository.page_messages(session_id, after_position=p, limit=200)`` is timed at the
start, the middle and the end of the corpus's first long session and at seeded random
positions (median and 95th percentile, ms; goal: median at most 5 ms). Peers in the same
run: the same SELECT in plain ``sqlite3`` (what the repository's conversion into
``Message`` objects costs) and, for reference, ``LIMIT 200 OFFSET p`` paging, whose cost
grows with the position.
"""

from __future__ import annotations

import argparse
import random
import sys

import _common
import make_corpus

from workbench.store import Database, Repository
from workbench.store.rows import MESSAGE_SELECT

GOAL_MS = 5.0
PAGE = 200

_KEYSET = (
    f"SELECT {MESSAGE_SELECT} FROM messages WHERE session_id = ? AND position > ?"
    " ORDER BY position LIMIT ?"
)
_OFFSET = (
    f"SELECT {MESSAGE_SELECT} FROM messages WHERE session_id = ?"
    " ORDER BY position LIMIT ? OFFSET ?"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    make_corpus.add_corpus_arguments(parser)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--random-positions", type=int, default=30)
    args = parser.parse_args(argv)

    info = make_corpus.corpus_from_args(args)
    make_corpus.print_summary(info)
    session_id = info.big_session_ids[0]
    db = Database.open(info.path)
    repo = Repository(db)
    raw = _common.raw_connect(info.path, readonly=True)
    try:
        size = repo.get_session(session_id).message_count
        rng = random.Random(args.seed)
        randoms = [rng.randrange(-1, size - PAGE) for _ in range(args.random_positions)]
        classes = {
            "start": [-1],
            "middle": [size // 2],
            "end": [size - PAGE - 1],
            f"random ({len(randoms)} positions)": randoms,
        }
        _common.header(
            f"page_messages: {PAGE} messages of session {session_id} ({size:,} messages); "
            f"median / p95 over {args.runs} runs per position after one warm-up"
        )
        _common.print_plan(
            "the page query",
            _common.explain(raw, _KEYSET, (session_id, size // 2, PAGE)),
        )
        print(f"  {_common.load_note()}; cpu = CPU time of the calling thread")
        print(
            f"  {'where':<24} {'ours median':>12} {'p95':>10} {'cpu':>9} {'raw median':>11}"
            f" {'ours/raw':>9} {'rows':>5}"
        )
        worst = 0.0
        for name, positions in classes.items():
            t_ours = _common.Timing([], [])
            t_raw = _common.Timing([], [])
            rows = 0
            for pos in positions:
                rows = len(repo.page_messages(session_id, after_position=pos, limit=PAGE))
                one = _common.time_calls(
                    lambda p=pos: repo.page_messages(session_id, after_position=p, limit=PAGE),
                    runs=args.runs,
                )
                t_ours.samples += one.samples
                t_ours.cpu_samples += one.cpu_samples
                t_raw.samples += _common.time_calls(
                    lambda p=pos: raw.execute(_KEYSET, (session_id, p, PAGE)).fetchall(),
                    runs=args.runs,
                ).samples
            worst = max(worst, t_ours.median)
            print(
                f"  {name:<24} {_common.ms(t_ours.median):>12} {_common.ms(t_ours.p95):>10}"
                f" {_common.ms(t_ours.cpu):>9} {_common.ms(t_raw.median):>11}"
                f" {t_ours.median / t_raw.median:>9.2f} {rows:>5}"
            )

        back = _common.time_calls(
            lambda: repo.page_before(session_id, before_position=size, limit=PAGE),
            runs=args.runs,
        )
        print(f"  page_before at the end: median {_common.ms(back.median)}")

        _common.header("reference: LIMIT/OFFSET paging in plain sqlite3 (cost grows with p)")
        for name, pos in (("start", 0), ("middle", size // 2), ("end", size - PAGE)):
            timing = _common.time_calls(
                lambda p=pos: raw.execute(_OFFSET, (session_id, PAGE, p)).fetchall(),
                runs=args.runs,
            )
            print(f"  OFFSET {pos:>7,} ({name}): median {_common.ms(timing.median)}")
        print()
        print(
            f"goal (median <= {GOAL_MS:g} ms for a page anywhere): "
            f"{_common.verdict(worst * 1000, GOAL_MS, at_most=True)} "
            f"(slowest class median {_common.ms(worst)})"
        )
    finally:
        raw.close()
        db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
