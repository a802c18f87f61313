"""Keeping the summary lines of the 1M-message corpus, which has none (it is written as a
database from before migration 0003 keeps them): the background upkeep a window starts,
and what a migration that filled them at open would cost instead.

Run as ``.venv/bin/python bench/bench_line_upkeep.py [--skip-migration-figure]``. The corpus
(see ``make_corpus.py``) is copied to ``bench/.data/line-upkeep.db`` first and never
changed itself.

Figures:

* **open**: ``Workspace.open`` of the copy and the upkeep's start (one setting read on
  its thread), as the window's start runs them.
* **upkeep**: the pass as the window runs it (:class:`workbench.engine.line_upkeep.LineUpkeep`,
  256 messages per write transaction, resting as long as each batch took): wall clock to
  the end, its thread's CPU, lines and sessions; when the session a window shows (one of
  the corpus's long sessions, asked for with ``prefer``) had its lines.
* **a person's writes meanwhile**: a small write (a setting) every 50 ms on the main
  thread while the upkeep runs, as the window's writer thread does them: the median and
  longest wait. Goal: no write waits for long (one short batch). And how late the main
  thread woke for each (what a window's timer would see of the upkeep's interpreter
  time).
* **a migration instead** (unless ``--skip-migration-figure``): the lines cleared again,
  the same pass without rest in 10,000-message transactions (what a migration's
  statements would do while the window waits), plus the backup copy every migration of
  an existing file makes first.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

import _common

_common.prepare_environment()

import make_corpus  # noqa: E402

from workbench.engine.line_upkeep import LineUpkeep, keep_missing_lines  # noqa: E402
from workbench.engine.workspace import Workspace  # noqa: E402
from workbench.store.summary_lines import LINES_KEPT_SETTING  # noqa: E402

WRITE_EVERY = 0.05


def copy_corpus(source: Path, target: Path) -> None:
    _common.remove_database(target)
    shutil.copyfile(source, target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    make_corpus.add_corpus_arguments(parser)
    parser.add_argument("--skip-migration-figure", action="store_true")
    args = parser.parse_args(argv)
    info = make_corpus.corpus_from_args(args)
    make_corpus.print_summary(info)
    path = _common.prepare_data_dir() / "line-upkeep.db"
    copy_corpus(info.path, path)
    print(f"  {_common.load_note()}")

    _common.header("the window's background upkeep over the corpus copy")
    started = time.perf_counter()
    ws = Workspace.open(path)
    opened = time.perf_counter() - started
    shown = int(info.meta["big_session_ids"][-1])
    shown_done = threading.Event()
    shown_at: list[float] = []

    def session_done(session_id: int, _lines: int) -> None:
        if session_id == shown and not shown_done.is_set():
            shown_at.append(time.perf_counter() - begun)
            shown_done.set()

    try:
        with ws.db.query() as conn:
            missing = conn.exec_driver_sql(
                "SELECT count(*) FROM messages WHERE summary_line IS NULL").scalar_one()
        begun = time.perf_counter()
        upkeep = ws.keep_summary_lines(on_session=session_done)
        upkeep.prefer(shown)
        start_cost = time.perf_counter() - begun
        waits: list[float] = []
        late: list[float] = []  # how much later than asked the main thread woke
        while True:
            asleep = time.perf_counter()
            if upkeep.finished.wait(WRITE_EVERY):
                break
            asked = time.perf_counter()
            late.append(max(0.0, asked - asleep - WRITE_EVERY))
            ws.repo.set_setting("bench_line_upkeep_probe", len(waits))
            waits.append(time.perf_counter() - asked)
        report = upkeep.report
        print(f"  open {_common.ms(opened)}, upkeep started in {_common.ms(start_cost)} "
              f"(a thread; it reads one setting first); {missing:,} messages without a line")
        print(f"  upkeep: {report.lines:,} lines in {report.sessions:,} sessions in "
              f"{report.seconds:.1f} s wall, {report.cpu_seconds:.1f} s CPU of its thread "
              f"({report.cpu_seconds / max(report.seconds, 1e-9):.0%} of a core), longest "
              f"batch {_common.ms(report.longest_batch)}; complete "
              f"{report.complete}{', error ' + report.error if report.error else ''}")
        if shown_at:
            print(f"  the shown session {shown} ({info.meta['big_size']:,} messages, asked for "
                  f"first) had its lines after {shown_at[0]:.2f} s")
        if waits:
            slow = sum(w > 0.05 for w in waits)
            print(f"  a write every {WRITE_EVERY * 1000:.0f} ms meanwhile ({len(waits)} writes):"
                  f" median wait {_common.ms(statistics.median(waits))}, 99th percentile "
                  f"{_common.ms(_common.percentile(waits, 99))}, longest "
                  f"{_common.ms(max(waits))}; {slow} waited more than 50 ms")
            print(f"  the main thread woke late (another thread holding the interpreter, or"
                  f" no core free) by {_common.ms(statistics.median(late))} (median), "
                  f"{_common.ms(_common.percentile(late, 99))} (99th percentile), "
                  f"{_common.ms(max(late))} at most")
        print(f"  {_common.load_note()}")
        began = time.perf_counter()
        again = LineUpkeep(ws.db)
        again.start()
        again.finished.wait()
        print(f"  the next open: upkeep skipped {again.report.skipped} in "
              f"{_common.ms(time.perf_counter() - began)}")
    finally:
        ws.close()

    if args.skip_migration_figure:
        return 0
    _common.header("a migration that filled the lines instead (what an open would wait for)")
    raw = _common.raw_connect(path)
    try:
        raw.execute("UPDATE messages SET summary_line = NULL, summary_line_tokens = NULL")
        raw.execute("DELETE FROM settings WHERE key = ?", (LINES_KEPT_SETTING,))
        raw.commit()
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        raw.close()
    ws = Workspace.open(path)
    try:
        report = keep_missing_lines(ws.db, batch=10_000)
        backup = path.with_name("line-upkeep-backup.db")
        _common.remove_database(backup)
        began = time.perf_counter()
        ws.db.backup(backup)
        copied = time.perf_counter() - began
        _common.remove_database(backup)
        print(f"  filling {report.lines:,} lines without rest: {report.seconds:.1f} s wall, "
              f"{report.cpu_seconds:.1f} s CPU; the backup copy a migration makes first: "
              f"{copied:.1f} s; an open would wait {report.seconds + copied:.1f} s")
        print(f"  {_common.load_note()}")
    finally:
        ws.close()
    _common.remove_database(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
