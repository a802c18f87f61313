"""Putting a message in at the top of a session and taking it out again, at 1k, 10k and
100k messages: every later message moves by one position.

Run as ``.venv/bin/python bench/bench_edits.py [--runs 5] [--postgresql]``. The sessions
are agent conversations (``bench_request_build.build_history``: about 11% tool-call
messages and 15% tool results), imported into ``bench/.data/edits.db`` on the first run
and kept.

Timed per size (median of ``--runs`` after one warm-up; wall clock and the thread's
CPU): ``Repository.insert_message`` at position 1 and ``Repository.delete_message`` of
it, each one write transaction with everything the store keeps in step (the later
messages' positions, their tool calls' places in ``message_calls`` and the orphaned
results in ``orphan_results``, the session's counts).

Peers in the same run, on the same file, in plain ``sqlite3``, each with its commit (and
moved back afterwards, untimed):

* **the same shift with the triggers**: ``UPDATE messages SET position = position + 1``
  over the same rows, every trigger of the schema firing per row, as a store that did
  not pause them (what 0014 and 0015 cost before this bench's change);
* **the bare shift**: the same UPDATE with the side tables' triggers dropped inside the
  transaction (and put back before its commit), the floor of any store that keeps
  positions dense in the row.

With ``--postgresql`` the same insert and delete on a throwaway PostgreSQL cluster
(sizes up to 20k: each moved row is a new tuple in every index there); its CPU figure
is the client's only, the server does the work.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import _common

_common.prepare_environment()

import bench_request_build as build  # noqa: E402

from workbench.core.conversation import Conversation, Message  # noqa: E402
from workbench.store import Database, Repository  # noqa: E402
from workbench.store.opening import open_database  # noqa: E402

SIZES = (1_000, 10_000, 100_000)
PG_SIZES = (1_000, 20_000)
_SIDE_TRIGGERS = ("message_calls_place", "orphan_results_change")


def _sessions(repo: Repository, sizes: tuple[int, ...]) -> dict[int, int]:
    """Session id by size: the bench's sessions, imported when missing."""
    found = {s.title: s.id for s in repo.list_sessions(limit=100)}
    wanted = []
    for size in sizes:
        if f"edits {size}" not in found:
            history = build.build_history(size, 7)
            for msg in history:
                msg.id = msg.position = None
            wanted.append(Conversation(title=f"edits {size}", messages=history))
    if wanted:
        repo.import_many(wanted)
        found = {s.title: s.id for s in repo.list_sessions(limit=100)}
    return {size: found[f"edits {size}"] for size in sizes}


def _time_edits(repo: Repository, sid: int, runs: int) -> tuple[_common.Timing, _common.Timing]:
    inserts = _common.Timing([], [])
    deletes = _common.Timing([], [])
    for run in range(runs + 1):
        cpu = time.thread_time()
        started = time.perf_counter()
        added = repo.insert_message(sid, 1, Message(role="user", content="one more thing"))
        if run:
            inserts.samples.append(time.perf_counter() - started)
            inserts.cpu_samples.append(time.thread_time() - cpu)
        cpu = time.thread_time()
        started = time.perf_counter()
        repo.delete_message(added.id)  # type: ignore[arg-type]  # stored: it has an id
        if run:
            deletes.samples.append(time.perf_counter() - started)
            deletes.cpu_samples.append(time.thread_time() - cpu)
    return inserts, deletes


def _peer_shift(path: Path, sid: int, runs: int, *, bare: bool) -> _common.Timing:
    """The shift alone in plain sqlite3 and its commit (moved back after, untimed)."""
    raw = _common.raw_connect(path)
    raw.isolation_level = None
    timing = _common.Timing([], [])
    shift = ("UPDATE messages SET position = position + ? WHERE session_id = ?"
             " AND position >= ?")
    kept = [row[0] for row in raw.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name IN (?, ?)",
        _SIDE_TRIGGERS)]
    try:
        for run in range(runs + 1):
            raw.execute("BEGIN IMMEDIATE")
            if bare:
                for name in _SIDE_TRIGGERS:
                    raw.execute(f"DROP TRIGGER {name}")
            cpu = time.thread_time()
            started = time.perf_counter()
            raw.execute(shift, (1, sid, 1))
            spent, spent_cpu = time.perf_counter() - started, time.thread_time() - cpu
            if bare:  # put back before the commit, untimed
                for sql in kept:
                    raw.execute(sql)
            cpu = time.thread_time()
            started = time.perf_counter()
            raw.execute("COMMIT")
            if run:
                timing.samples.append(spent + time.perf_counter() - started)
                timing.cpu_samples.append(spent_cpu + time.thread_time() - cpu)
            raw.execute("BEGIN IMMEDIATE")
            if bare:
                for name in _SIDE_TRIGGERS:
                    raw.execute(f"DROP TRIGGER {name}")
            raw.execute(shift, (-1, sid, 2))
            for sql in kept if bare else ():
                raw.execute(sql)
            raw.execute("COMMIT")
    finally:
        raw.close()
    return timing


def _line(name: str, timing: _common.Timing) -> str:
    return f"{name} {_common.ms(timing.median)} (CPU {_common.ms(timing.cpu)})"


def run_sqlite(runs: int) -> None:
    path = _common.prepare_data_dir() / "edits.db"
    db = Database.open(path)
    try:
        sessions = _sessions(Repository(db), SIZES)
    finally:
        db.close()
    _common.header(f"SQLite ({path.name}): median of {runs} runs")
    print(f"  {_common.load_note()}")
    first: tuple[float, float] | None = None
    for size, sid in sessions.items():
        db = Database.open(path)
        try:
            inserts, deletes = _time_edits(Repository(db), sid, runs)
        finally:
            db.close()
        triggered = _peer_shift(path, sid, runs, bare=False)
        bare = _peer_shift(path, sid, runs, bare=True)
        growth = ""
        if first is None:
            first = (inserts.median, deletes.median)
        else:
            growth = (f"; {inserts.median / first[0]:.0f}x / {deletes.median / first[1]:.0f}x"
                      " the 1k figures")
        print(f"  {size:>7,} messages: {_line('insert at 1', inserts)}, "
              f"{_line('delete', deletes)}{growth}")
        print(f"           peers, the shift alone in plain sqlite3: "
              f"{_line('with every trigger', triggered)}, "
              f"{_line('bare (no side-table triggers)', bare)}")
    print(f"  {_common.load_note()}")


def run_postgresql(runs: int) -> None:
    try:
        server = _common.start_postgres()
    except _common.pg_server_module().ServerUnavailable as exc:
        print(f"\nPostgreSQL: not measured ({exc})")
        return
    try:
        db = open_database(server.url())
        try:
            repo = Repository(db)
            sessions = _sessions(repo, PG_SIZES)
            _common.header(f"PostgreSQL (a throwaway cluster): median of {runs} runs")
            for size, sid in sessions.items():
                inserts, deletes = _time_edits(repo, sid, runs)
                print(f"  {size:>7,} messages: {_line('insert at 1', inserts)}, "
                      f"{_line('delete', deletes)}")
        finally:
            db.close()
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--postgresql", action="store_true")
    args = parser.parse_args(argv)
    run_sqlite(args.runs)
    if args.postgresql:
        run_postgresql(args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
