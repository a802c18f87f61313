"""Helpers shared by the speed benchmarks: paths, timing, printing and raw connections.

The benchmarks print figures; they never assert on time. Every figure that has a peer
(the same work done by plain ``sqlite3``, or by a naive query) is printed with the
ratio, measured in the same run on the same data, because absolute times depend on the
machine while ratios mostly do not.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
DATA_DIR = BENCH_DIR / ".data"

if str(REPO_DIR) not in sys.path:
    # So a checkout without the editable install still finds the workbench package.
    sys.path.insert(0, str(REPO_DIR))


def _store_cache_kib() -> int:
    """The store's page cache per connection (imported when first needed, so that a
    benchmark's ``--code PATH`` decides which workbench is imported)."""
    from workbench.store.db import PAGE_CACHE_KIB

    return PAGE_CACHE_KIB


def store_pragmas() -> tuple[str, ...]:
    """The connection settings of ``workbench.store.db._on_connect``, repeated here so
    that the plain-sqlite3 peers run with the same cache (the store's size for this
    machine) and durability and only the code path differs. Kept in step by hand: a
    peer that is faster only because of its pragmas would make our ratios look worse,
    never better."""
    return (
        "PRAGMA busy_timeout = 10000",
        "PRAGMA foreign_keys = ON",
        "PRAGMA synchronous = NORMAL",
        f"PRAGMA cache_size = -{_store_cache_kib()}",
        "PRAGMA temp_store = MEMORY",
    )


def prepare_data_dir() -> Path:
    """Create ``bench/.data`` (ignored by git through its own ``.gitignore``)."""
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    ignore = DATA_DIR / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n", encoding="utf-8")
    return DATA_DIR


def prepare_environment() -> None:
    """Point ``WORKBENCH_HOME`` at ``bench/.data/home`` unless the caller set it.

    The token counter unpacks its vocabulary into the workbench's cache folder; keeping
    that inside the benchmark's data folder leaves the user's own folders alone.
    """
    prepare_data_dir()
    os.environ.setdefault("WORKBENCH_HOME", str(DATA_DIR / "home"))


def raw_connect(path: Path | str, *, readonly: bool = False) -> sqlite3.Connection:
    """A plain ``sqlite3`` connection in autocommit mode with the store's pragmas."""
    if readonly:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    else:
        conn = sqlite3.connect(str(path), isolation_level=None)
    for pragma in store_pragmas():
        conn.execute(pragma)
    return conn


def explain(conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> list[str]:
    """The lines of ``EXPLAIN QUERY PLAN`` for a statement, indented by depth."""
    rows = conn.execute("EXPLAIN QUERY PLAN " + sql, tuple(params)).fetchall()
    depth: dict[int, int] = {0: -1}
    lines = []
    for node, parent, _unused, detail in rows:
        depth[node] = depth.get(parent, -1) + 1
        lines.append("  " * depth[node] + str(detail))
    return lines


def print_plan(title: str, lines: Sequence[str]) -> None:
    print(f"  plan of {title}:")
    for line in lines:
        print(f"    {line}")


@dataclass
class Timing:
    """Wall-clock samples of one operation, in seconds, with the CPU time the calling
    thread spent in each (``cpu``): on a busy machine the wall clock includes waiting for
    a core, the thread's CPU time much less so."""

    samples: list[float]
    cpu_samples: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def cpu(self) -> float:
        """Median CPU time of the calling thread (0 when not measured)."""
        return statistics.median(self.cpu_samples) if self.cpu_samples else 0.0

    @property
    def p95(self) -> float:
        return percentile(self.samples, 95)

    @property
    def best(self) -> float:
        return min(self.samples)

    @property
    def total(self) -> float:
        return sum(self.samples)


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile: with 15 samples the 95th is the largest but none."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no samples")
    rank = max(1, min(len(ordered), -(-len(ordered) * pct // 100)))
    return ordered[int(rank) - 1]


def time_calls(fn: Callable[[], Any], *, runs: int, warmup: int = 1) -> Timing:
    """Call ``fn`` ``warmup`` times untimed, then ``runs`` times timed."""
    for _ in range(warmup):
        fn()
    samples = []
    cpu = []
    for _ in range(runs):
        cpu_started = time.thread_time()
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
        cpu.append(time.thread_time() - cpu_started)
    return Timing(samples, cpu)


def load_note() -> str:
    """The machine's load, to read the figures by (other work shares the cores)."""
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return "load average unknown"
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores"


def ms(seconds: float) -> str:
    """Seconds as milliseconds with sensible precision."""
    value = seconds * 1000
    if value < 10:
        return f"{value:.2f} ms"
    if value < 100:
        return f"{value:.1f} ms"
    return f"{value:,.0f} ms"


def verdict(value: float, goal: float, *, at_most: bool) -> str:
    """``met`` or ``MISSED`` against a goal, as text (benchmarks never fail on time)."""
    ok = value <= goal if at_most else value >= goal
    return "met" if ok else "MISSED"


def header(title: str) -> None:
    print()
    print(title)
    print("-" * len(title))


def file_size(path: Path) -> int:
    """Bytes of a database file with its WAL and shared-memory files."""
    total = 0
    for suffix in ("", "-wal", "-shm"):
        candidate = Path(str(path) + suffix)
        if candidate.exists():
            total += candidate.stat().st_size
    return total


def remove_database(path: Path) -> None:
    """Delete a database file and its WAL and shared-memory companions."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        candidate = Path(str(path) + suffix)
        if candidate.exists():
            candidate.unlink()


# -- a throwaway PostgreSQL server ---------------------------------------------------------

# The server settings of the benchmarks: durable like a team server (fsync and full-page
# writes on), commits acknowledged before they reach the disk (``synchronous_commit=off``,
# as SQLite's ``synchronous=NORMAL`` in WAL mode does between checkpoints), memory for a
# machine that also runs the desktop, and checkpoints spaced for bulk loads.
BENCH_PG_SETTINGS: dict[str, str] = {
    "synchronous_commit": "off",
    "shared_buffers": "512MB",
    "effective_cache_size": "4GB",
    "maintenance_work_mem": "512MB",
    "work_mem": "16MB",
    "max_wal_size": "4GB",
    "max_connections": "100",
}


def pg_server_module() -> Any:
    """``tests/pg_server.py`` (standard library only), imported by its path so that the
    benchmarks need neither pytest nor the tests folder as a package."""
    import importlib.util

    name = "workbench_bench_pg_server"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO_DIR / "tests" / "pg_server.py")
    if spec is None or spec.loader is None:
        raise RuntimeError("tests/pg_server.py is missing")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def start_postgres(settings: dict[str, str] | None = None) -> Any:
    """A started throwaway PostgreSQL cluster (``tests/pg_server.PostgresServer``) with
    :data:`BENCH_PG_SETTINGS`; call its ``stop()`` to remove it. Raises the module's
    ``ServerUnavailable`` when PostgreSQL is not installed or does not start."""
    module = pg_server_module()
    return module.PostgresServer(dict(BENCH_PG_SETTINGS if settings is None else settings)).start()
