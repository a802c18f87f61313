"""Resident memory of the window on the 1M-message corpus as long sessions are opened.

Run as ``QT_QPA_PLATFORM=offscreen .venv/bin/python bench/bench_memory.py [--opens 10]``;
the corpus is built first when missing (see ``make_corpus.py``). The window is the real
``MainWindow`` at 1280×800 on the offscreen platform with the Request panel shown, as a
person would use it.

It opens ``--opens`` 100,000-message sessions in turn (the corpus has three, so the
openings go round them: A, B, C, A, ...), waits after each until the background work
(the session's shape, the request preview) is done, and prints the resident memory
(VmRSS, and the anonymous part of it) after each. Goal (issue 14): at most 400 MB with
the database open and a long session shown, and flat as sessions are opened.

In the same run, unless ``--no-peer``, the same openings run in a second process with
the page cache the store had before (64 MiB per connection, ``--cache-kib 65536``), as
the reference the figures are compared with.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import _common
import make_corpus
from bench_gui import pump, rss_mb, wait_for_line_upkeep

GOAL_MB = 400.0


def anon_mb() -> float:
    """The anonymous part of the resident memory, in MB (Linux): the heap, not the
    mapped files of the libraries."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def measure(args: argparse.Namespace) -> dict[str, object]:
    info = make_corpus.corpus_from_args(args)
    if args.cache_kib:
        import workbench.store.db as store_db

        store_db.PAGE_CACHE_KIB = args.cache_kib

    from PySide6.QtWidgets import QApplication

    from workbench.engine.workspace import Workspace
    from workbench.gui.app import prefer_responsiveness
    from workbench.gui.main_window import MainWindow

    prefer_responsiveness()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    started = rss_mb()[0]
    workspace = Workspace.open(info.path)
    window = MainWindow(workspace)
    window.resize(1280, 800)
    window.show()
    window.request_dock.show()
    window.request_dock.raise_()
    pump(app, 0.3)
    window.ctx.workers.wait_idle(60)
    wait_for_line_upkeep(app, workspace)
    opened = rss_mb()[0]
    after: list[tuple[int, float, float]] = []
    big = info.big_session_ids
    for turn in range(args.opens):
        session_id = big[turn % len(big)]
        window.open_session(session_id)
        for _ in range(2):  # the shape, then the request preview it asks for
            pump(app, 0.3)
            window.ctx.workers.wait_idle(120)
        after.append((session_id, rss_mb()[0], anon_mb()))
    peak = rss_mb()[1]
    window.close()
    workspace.close()
    return {"started": started, "opened": opened, "after": after, "peak": peak,
            "cache_kib": args.cache_kib or _common._store_cache_kib()}


def report(label: str, data: dict[str, object]) -> None:
    after = data["after"]
    assert isinstance(after, list)
    print(f"  {label}: page cache {data['cache_kib']:,} KiB per connection; "
          f"interpreter {data['started']:.0f} MB, window on the corpus {data['opened']:.0f} MB")
    for turn, (session_id, rss, anon) in enumerate(after, 1):
        print(f"    open {turn:2}: session {session_id:>5}  resident {rss:6.0f} MB"
              f"  (anonymous {anon:5.0f} MB)")
    first, last = after[0][1], after[-1][1]
    most = max(r for _, r, _ in after)
    print(f"    after the first opening {first:.0f} MB, after the last {last:.0f} MB "
          f"(+{last - first:.0f} MB over {len(after) - 1} more openings), most {most:.0f} MB, "
          f"peak {data['peak']:.0f} MB; goal ≤ {GOAL_MB:.0f} MB: "
          f"{_common.verdict(most, GOAL_MB, at_most=True)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    make_corpus.add_corpus_arguments(parser)
    parser.add_argument("--opens", type=int, default=10, help="long sessions to open in turn")
    parser.add_argument("--cache-kib", type=int, default=0,
                        help="page cache per connection instead of the store's own size")
    parser.add_argument("--no-peer", action="store_true",
                        help="skip the reference run with 64 MiB per connection")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    _common.prepare_environment()
    if args.json:  # the reference run, in a process of its own
        print(json.dumps(measure(args)))
        return 0
    info = make_corpus.corpus_from_args(args)
    make_corpus.print_summary(info)
    _common.header(f"Resident memory as {args.opens} long sessions are opened in turn")
    print(f"  {_common.load_note()}")
    started = time.perf_counter()
    ours = measure(args)
    report("ours", ours)
    print(f"  ({time.perf_counter() - started:.0f} s)")
    if not args.no_peer:
        peer_args = [*(argv if argv is not None else sys.argv[1:]), "--json",
                     "--cache-kib", "65536"]
        done = subprocess.run([sys.executable, __file__, *peer_args], capture_output=True,
                              text=True, timeout=3600)
        if done.returncode != 0:
            print(f"  the reference run failed: {done.stderr.strip()[-300:]}")
        else:
            report("before (64 MiB per connection)",
                   json.loads(done.stdout.strip().splitlines()[-1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
