"""Session token totals from the cached counts, and the session-list read.

Run as ``.venv/bin/python bench/bench_token_totals.py [--runs 15] [--corpus PATH]``; the
corpus is built first when missing (see ``make_corpus.py``).

Times ``Repository.token_total(session_id)`` (a sum over the cached per-message counts)
on each long session and over every session of the corpus one call at a time, and
prints messages summed per second (goal: at least 1,000,000). Peers in the same run: the
same statement in plain ``sqlite3``, and, for reference, one ``GROUP BY`` over all
sessions and the ``sessions.token_count`` column the repository keeps current. Then the
session list: ``list_sessions(limit=100)`` against the same SELECT in plain ``sqlite3``.
"""

from __future__ import annotations

import argparse
import sys
import time

import _common
import make_corpus

from workbench.store import Database, Repository

GOAL_RATE = 1_000_000

_TOTAL = (
    "SELECT coalesce(sum(token_count), 0) FROM messages WHERE session_id = ?"
    " AND state IN (?)"
)
_GROUPED = (
    "SELECT session_id, sum(token_count) FROM messages WHERE state = 'active'"
    " GROUP BY session_id"
)
# The peer: the session list as plain sqlite3 reads it (the columns session_from_row takes).
_LIST = (
    "SELECT s.id, s.title, s.agent_id, s.created_at, s.updated_at, s.tags, s.pinned,"
    " s.archived, s.forked_from_session_id, s.forked_from_message_id, s.overrides, s.source,"
    " s.source_id, s.message_count, s.token_count, a.name"
    " FROM sessions AS s JOIN agents AS a ON a.id = s.agent_id WHERE s.archived = 0"
    " ORDER BY s.pinned DESC, s.updated_at DESC, s.id DESC LIMIT ? OFFSET ?"
)


def _rate(messages: int, seconds: float) -> str:
    return f"{messages / seconds:,.0f} msg/s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    make_corpus.add_corpus_arguments(parser)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--passes", type=int, default=3,
                        help="passes over all sessions (the median pass is reported)")
    args = parser.parse_args(argv)

    info = make_corpus.corpus_from_args(args)
    make_corpus.print_summary(info)
    db = Database.open(info.path)
    repo = Repository(db)
    raw = _common.raw_connect(info.path, readonly=True)
    try:
        sessions = raw.execute(
            "SELECT id, message_count, token_count FROM sessions ORDER BY id"
        ).fetchall()
        active = dict(
            raw.execute(
                "SELECT session_id, count(*) FROM messages WHERE state = 'active'"
                " GROUP BY session_id"
            ).fetchall()
        )
        _common.header(
            f"token_total on the long sessions: median of {args.runs} runs after one warm-up"
        )
        print(f"  {_common.load_note()}")
        _common.print_plan("token_total", _common.explain(raw, _TOTAL, (1, "active")))
        rates: list[float] = []
        for sid in info.big_session_ids:
            count = active.get(sid, 0)
            ours = _common.time_calls(lambda s=sid: repo.token_total(s), runs=args.runs)
            peer = _common.time_calls(
                lambda s=sid: raw.execute(_TOTAL, (s, "active")).fetchone(), runs=args.runs
            )
            rates.append(count / ours.median)
            print(
                f"  session {sid} ({count:,} active messages): ours {_common.ms(ours.median)}"
                f" = {_rate(count, ours.median)}; raw {_common.ms(peer.median)}"
                f" = {_rate(count, peer.median)}; ours/raw time {ours.median / peer.median:.2f}"
            )

        _common.header(
            f"token_total over all {len(sessions):,} sessions, one call each "
            f"(median of {args.passes} passes)"
        )
        total_messages = sum(active.values())
        ids = [row[0] for row in sessions]

        def ours_pass() -> int:
            return sum(repo.token_total(sid) for sid in ids)

        def raw_pass() -> int:
            execute = raw.execute
            return sum(execute(_TOTAL, (sid, "active")).fetchone()[0] for sid in ids)

        ours_tokens = ours_pass()
        t_ours = _common.time_calls(ours_pass, runs=args.passes, warmup=0)
        t_raw = _common.time_calls(raw_pass, runs=args.passes, warmup=0)
        rate_all = total_messages / t_ours.median
        per_call = t_ours.median / len(ids)
        print(
            f"  ours: {t_ours.median:.2f} s for {total_messages:,} active messages = "
            f"{_rate(total_messages, t_ours.median)} ({per_call * 1e6:.0f} µs per call)"
        )
        print(
            f"  raw sqlite3, same statement: {t_raw.median:.2f} s = "
            f"{_rate(total_messages, t_raw.median)} "
            f"({t_raw.median / len(ids) * 1e6:.0f} µs per call); "
            f"ours/raw time {t_ours.median / t_raw.median:.2f}"
        )
        batch = _common.time_calls(lambda: repo.token_totals(ids), runs=args.passes, warmup=1)
        rate_batch = total_messages / batch.median
        print(
            f"  ours, Repository.token_totals(all ids) in one call: {batch.median:.2f} s = "
            f"{_rate(total_messages, batch.median)}"
        )
        started = time.perf_counter()
        grouped = raw.execute(_GROUPED).fetchall()
        grouped_s = time.perf_counter() - started
        print(
            f"  reference, one GROUP BY over every session (raw): {grouped_s:.2f} s = "
            f"{_rate(total_messages, grouped_s)}"
        )
        cached = _common.time_calls(
            lambda: raw.execute("SELECT id, token_count FROM sessions").fetchall(),
            runs=args.runs,
        )
        print(
            f"  reference, the cached sessions.token_count of every session (raw): "
            f"{_common.ms(cached.median)}"
        )
        grouped_map = {sid: total for sid, total in grouped}
        stale = sum(1 for sid, _n, tokens in sessions if grouped_map.get(sid, 0) != tokens)
        print(
            f"  check: {ours_tokens:,} tokens in all; sessions whose cached token_count "
            f"differs from the sum of their active messages: {stale}"
        )

        _common.header(f"list_sessions(limit=100): median of {args.runs} runs")
        _common.print_plan("the session list", _common.explain(raw, _LIST, (100, 0)))
        listing = _common.time_calls(lambda: repo.list_sessions(limit=100), runs=args.runs)
        peer = _common.time_calls(
            lambda: raw.execute(_LIST, (100, 0)).fetchall(), runs=args.runs
        )
        print(
            f"  ours {_common.ms(listing.median)} (p95 {_common.ms(listing.p95)}); raw "
            f"{_common.ms(peer.median)}; ours/raw {listing.median / peer.median:.2f}"
        )
        deep = _common.time_calls(
            lambda: repo.list_sessions(limit=100, offset=len(ids) - 100), runs=args.runs
        )
        print(f"  last 100 (offset {len(ids) - 100:,}): ours {_common.ms(deep.median)}")

        print()
        slowest = min([*rates, rate_batch])
        print(
            f"goal (>= {GOAL_RATE:,} messages/s): long sessions "
            f"{_common.verdict(min(rates), GOAL_RATE, at_most=False)} "
            f"(slowest {min(rates):,.0f}/s); all sessions in one call "
            f"{_common.verdict(rate_batch, GOAL_RATE, at_most=False)} ({rate_batch:,.0f}/s); "
            f"overall {_common.verdict(slowest, GOAL_RATE, at_most=False)}; "
            f"for reference, all sessions one call each {rate_all:,.0f}/s "
            "(per-call overhead dominates sessions of ~100 messages)"
        )
    finally:
        raw.close()
        db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
