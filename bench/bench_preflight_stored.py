"""Preflight of a stored session at 1,000 / 10,000 / 100,000 messages, with LangChain's
``trim_messages`` on the same messages as the peer, in the same run.

Run as ``.venv/bin/python bench/bench_preflight_stored.py [--runs 7] [--code PATH]
[--corpus PATH | --no-corpus]``.

Each session is an agent session from ``bench_request_build.build_history`` (system
prompt, user and assistant turns, tool calls with their results; token counts cached as
a chat or an import leaves them), stored in a temporary database through
``Repository.import_many``. What is timed for ours is the whole command-line path:
``preflight_session(ws, session, prompt).to_json()`` (the turn set up, the session's
memory opened, the request assembled against the offline stand-in's 128,000-token
window, the left-out history reported), each timed run after a change to the database, as
a command finds it (a history read while nothing changed is reused; that figure is
printed beside it). The peer is ``trim_messages`` (strategy
``last``, cached counts) on the same messages already in memory: it reads no database,
so it is a floor rather than the same work.

With the stand-in's window the 1,000-message session fits whole while the longer ones
fill the window, so the 100,000-message request carries more messages than the
1,000-message one. A second pass (``--same-window``, default 32,000 tokens; 0 skips it)
gives every session a window that even the 1,000-message session fills, so that every
size sends a request of about the same size: the growth then tells what the session's
length alone costs.

A third pass times the sessions issue 14 measured: those of the 1,000,000-message
benchmark corpus (``make_corpus.py``, built first when missing; ``--no-corpus`` skips the
pass), the one closest to 1,000 messages and the three of 100,000, against the stand-in's
window. Their messages are longer (about 98 tokens against about 52), so the 100,000-
message request carries about 1,200–1,300 messages (the issue's profile: "assembly stops
after about 1,040 messages"), near the 1,024 of the short session sent whole.

``--code PATH`` imports the workbench from another checkout (for instance the main
branch, to print the figures before a change); langchain-core is installed outside the
repository as ``bench_request_build.py`` does. Goal (issue 14): ≤ 50 ms at 100,000
messages, and ≤ 1.5× the 1,000-message figure: the growth with the session's length,
read where the requests compared are of about the same size (the corpus's sessions and the
second pass). The first pass's growth is printed too, with the cost per message sent at
each size: its requests differ about 2.5× in size. The exit status is 0 when the goals are
met.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SIZES = (1_000, 10_000, 100_000)
GOAL_MS = 50.0
GOAL_GROWTH = 1.5
PROMPT = "Which of my orders from last week have not shipped yet?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--code", type=Path, default=None,
                        help="a checkout whose workbench package is imported instead")
    parser.add_argument("--no-install", action="store_true", help="never run pip")
    parser.add_argument("--same-window", type=int, default=32_000,
                        help="the window of the second pass (0: no second pass)")
    parser.add_argument("--corpus", type=Path, default=None,
                        help="the benchmark corpus of the third pass (default: "
                             "bench/.data/corpus.db, built first when missing)")
    parser.add_argument("--no-corpus", action="store_true",
                        help="no third pass over the corpus's sessions")
    args = parser.parse_args(argv)
    if args.code is not None:
        sys.path.insert(0, str(args.code.resolve()))

    import _common
    from _common import Timing, header, load_note, ms, time_calls, verdict
    if args.code is not None:  # _common put this checkout first; the other one wins
        sys.path.insert(0, str(args.code.resolve()))
    import bench_request_build as build

    from workbench.core.conversation import Conversation, Message
    from workbench.core.tokens import REPLY_PRIMING_TOKENS, get_counter
    from workbench.engine.preflight import DEFAULT_CONTEXT_WINDOW
    try:
        from workbench.engine.turn import preflight_session
    except ImportError:  # a checkout (--code) from before it moved out of engine.preflight
        from workbench.engine.preflight import preflight_session  # type: ignore[no-redef]
    from workbench.engine.workspace import Workspace

    _common.prepare_environment()
    import workbench

    print(f"Preflight of a stored session ({load_note()})")
    print(f"Workbench code: {Path(workbench.__file__).resolve().parent.parent}")
    lc, lc_version = build.ensure_langchain(build.LANGCHAIN_DIR, not args.no_install)
    counter = get_counter()
    if counter.encoding is None:
        raise SystemExit("the o200k_base vocabulary could not be loaded; install bpe-openai")

    folder = Path(tempfile.mkdtemp(prefix="workbench-bench-preflight-"))
    figures: dict[int, float] = {}
    same: dict[int, float] = {}
    corpus: dict[int, float] = {}  # by session id, the short session first
    sizes: dict[int, int] = {}
    sent: dict[int, int] = {}
    sessions: dict[int, int] = {}

    def measure(window: int | None, figures: dict[int, float]) -> None:
        with Workspace.open(folder / "bench.db") as ws:
            for size in SIZES:
                if size in sessions:
                    session = sessions[size]
                    history = build.build_history(size, args.seed)
                    built = 0.0
                else:
                    session, history, built = store(ws, size)
                    sessions[size] = session
                one(ws, size, session, history, built, window, figures,
                    sent if window is None else None)

    def measure_corpus(path: Path | None) -> None:
        import make_corpus

        info = make_corpus.ensure_corpus(path)
        with Workspace.open(info.path) as ws:
            with ws.db.read() as conn:
                near = conn.exec_driver_sql(
                    "SELECT session_id FROM messages WHERE state = 'active'"
                    " GROUP BY session_id ORDER BY abs(count(*) - 1000), session_id LIMIT 1"
                ).scalar_one()
            for session in [int(near), *info.meta["big_session_ids"]]:
                history = [m for m in ws.repo.list_messages(session) if m.state == "active"]
                one(ws, len(history), session, history, 0.0, None, corpus, None,
                    label=f"corpus session {session}: ", key=session)
                sizes[session] = len(history)

    def store(ws: Workspace, size: int) -> tuple[int, list[Message], float]:
        started = time.perf_counter()
        history = build.build_history(size, args.seed)
        for m, n in zip(history, counter.count_messages(history), strict=True):
            m.token_count, m.token_encoding = n, counter.encoding_name
        stored: list[Message] = []
        for m in history:
            copy = m.copy()
            copy.id = copy.position = None
            stored.append(copy)
        outcome = ws.repo.import_many([Conversation(title=f"{size:,}", messages=stored)])
        return int(outcome[0].session.id), history, time.perf_counter() - started

    def one(ws: Workspace, size: int, session: int, history: list[Message], built: float,
            window: int | None, figures: dict[int, float], sent: dict[int, int] | None,
            label: str = "", key: int | None = None) -> None:
        for m, n in zip(history, counter.count_messages(history), strict=True):
            m.token_count, m.token_encoding = n, counter.encoding_name

        def ours(session: int = session) -> Any:
            return preflight_session(ws, session, PROMPT,
                                     context_window=window).to_json()

        data = ours()
        left = data["left_out"]
        left_count = (sum(item.get("count", 1) for item in left) if left else 0)
        kept = len(data["payload"]["messages"])
        lc_messages = build.to_langchain(
            lc, [*history, Message(role="user", content=PROMPT)])
        exact = build.tiktoken_counter(lc, counter.encoding)
        cached = build.cached_counter(lc, {id(m): exact(m) for m in lc_messages})
        budget = data["budget"]["available"] or DEFAULT_CONTEXT_WINDOW

        def peer(lc_messages: list[Any] = lc_messages, cached: Any = cached,
                 budget: int = budget) -> Any:
            return lc.trim_messages(lc_messages, max_tokens=budget - REPLY_PRIMING_TOKENS,
                                    token_counter=cached, strategy="last",
                                    include_system=True, allow_partial=False)

        if sent is not None:
            sent[size] = kept
        made = f" (built in {built:.1f} s, untimed)" if built else ""
        header(f"{label}{size:,} messages{made}, window "
               f"{window or DEFAULT_CONTEXT_WINDOW:,} tokens: the request "
               f"carries {kept:,} messages, {left_count:,} left out in "
               f"{len(left):,} entries")
        def changed(session: int = session) -> None:
            # As a command finds the database: nothing read before is reused.
            with ws.db.write() as conn:
                conn.exec_driver_sql("UPDATE sessions SET title = title WHERE id = ?",
                                     (session,))

        mine = Timing([], [])
        ours()
        for _ in range(args.runs):
            changed()
            cpu_started, started = time.thread_time(), time.perf_counter()
            ours()
            mine.samples.append(time.perf_counter() - started)
            mine.cpu_samples.append(time.thread_time() - cpu_started)
        again = time_calls(ours, runs=args.runs)
        theirs = time_calls(peer, runs=args.runs)
        figures[size if key is None else key] = mine.median * 1000
        print(f"  ours: preflight_session().to_json()   median {ms(mine.median):>10}"
              f"  p95 {ms(mine.p95):>10}  cpu {ms(mine.cpu)}"
              f"  (again, nothing changed: {ms(again.median)})")
        ratio = mine.median / theirs.median
        print(f"  trim_messages (langchain-core {lc_version}, cached counts, in memory)"
              f" median {ms(theirs.median):>10}  ours/peer {ratio:.2f}")

    try:
        measure(None, figures)
        if args.same_window:
            print(f"\nThe same sessions with a window of {args.same_window:,} tokens, which "
                  "each of them fills: a request of about the same size at every length")
            measure(args.same_window, same)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if not args.no_corpus:
        print("\nThe sessions of the 1,000,000-message benchmark corpus that issue 14 "
              "measured (the stand-in's window)")
        measure_corpus(args.corpus)

    largest, smallest = figures[SIZES[-1]], figures[SIZES[0]]
    growth = largest / smallest
    per_message = " / ".join(f"{figures[n] * 1000 / sent[n]:.2f}" for n in SIZES)
    print(f"\nGrowth from {SIZES[0]:,} to {SIZES[-1]:,} messages, the stand-in's window: "
          f"{growth:.2f}x, with requests of {sent[SIZES[0]]:,} and {sent[SIZES[-1]]:,} "
          f"messages ({sent[SIZES[-1]] / sent[SIZES[0]]:.2f}x); per message sent "
          f"{per_message} µs")
    time_ok = verdict(largest, GOAL_MS, at_most=True)
    growths: list[tuple[str, float]] = []
    if same:
        same_growth = same[SIZES[-1]] / same[SIZES[0]]
        growths.append((f"the same request at every length (window {args.same_window:,})",
                        same_growth))
        print(f"Growth with the same request at every length (window "
              f"{args.same_window:,}): {same_growth:.2f}x "
              f"({' / '.join(f'{same[n]:.1f}' for n in SIZES)} ms)")
    if corpus:
        short, *longs = corpus.values()
        corpus_growth = max(longs) / short
        growths.append(("the corpus's sessions", corpus_growth))
        print(f"Growth with the corpus's sessions, from {min(sizes.values()):,} to "
              f"{max(sizes.values()):,}"
              f" messages: {corpus_growth:.2f}x (the slowest of the long sessions: "
              f"{' / '.join(f'{v:.1f}' for v in corpus.values())} ms)")
        time_ok = verdict(max(largest, *longs), GOAL_MS, at_most=True)
    verdicts = [(name, verdict(value, GOAL_GROWTH, at_most=True)) for name, value in growths]
    print(f"Goal ≤ {GOAL_MS:.0f} ms at {SIZES[-1]:,}: {time_ok}. Goal ≤ {GOAL_GROWTH}x the "
          f"{SIZES[0]:,} figure: "
          + (", ".join(f"{ok} with {name}" for name, ok in verdicts) or "not measured")
          + f"; with the stand-in's window and the short messages, {growth:.2f}x for "
          "requests that differ in size as above.")
    growth_ok = bool(verdicts) and all(ok == "met" for _, ok in verdicts)
    return 0 if time_ok == "met" and growth_ok else 2


if __name__ == "__main__":
    raise SystemExit(main())
