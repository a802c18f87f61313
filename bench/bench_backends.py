"""SQLite and PostgreSQL side by side on the same corpus (issue 17, the team store).

Run as ``.venv/bin/python bench/bench_backends.py [--runs 7] [--import-limit 500000]
[--only import,search,paging,preflight,watch] [--pg-url URL] [--corpus PATH]``. The SQLite
side is the benchmark corpus file (built first when missing, see ``make_corpus.py``); the
PostgreSQL side is a throwaway cluster started for the run the way the tests start theirs
(``tests/pg_server.py``, with the server settings of ``_common.BENCH_PG_SETTINGS``: fsync
on, ``synchronous_commit=off`` as SQLite's ``synchronous=NORMAL``), into which the same
corpus is loaded. ``--pg-url`` uses a database on a server of your own instead (it is
loaded when it does not hold this corpus yet; scratch databases are created beside it).

Every figure is measured on its own: one that fails on a backend is printed as failed, with
the reason, and the others go on. Figures, each printed side by side with PostgreSQL / SQLite:

* import: ``Repository.import_many`` of the corpus's first sessions up to
  ``--import-limit`` messages (batches of about 50,000, the rows read back with their token
  counts as ``bench_import.py`` does), into a fresh database on each backend, batch by batch
  in turns. Goal: PostgreSQL at most 2x SQLite's time. PostgreSQL merges the words each
  batch left in its search index's pending list after the commit, on a thread of its own
  (overlapping the next batch of a real import): the bench waits for that merge after each
  PostgreSQL batch, outside the timing, and prints its time and the ratio with it. With a
  throwaway cluster, this import
  is the start of loading the PostgreSQL corpus, which continues through ``import_many``;
  when ``import_many`` fails on PostgreSQL the corpus is copied in by the bench's own
  loader (``COPY`` of every row with its id; not the workbench's code path).
* search: ``search()`` top 50 with snippets (messages, session titles, memory) for every
  query class: rare, medium, very common and most common word, phrase, prefix, OR, NOT,
  role, state and date filters, the substring fallback (``->``) and a substring that
  matches nothing. Median of ``--runs`` after one warm-up. Goals: median at most 100 ms for
  every class on PostgreSQL; at most 50 ms on SQLite for the rare, medium and very common
  word (``bench_search.py``'s goal).
* paging: ``page_messages(session, after_position=p, limit=200)`` at the start, middle, end
  and at random places of the corpus's first 100,000-message session. Goal: at most 5 ms.
* preflight: ``preflight_session(ws, session, prompt).to_json()`` of that stored session.
* change seen: one ``Workspace`` appends a message; the time until a second ``Workspace``'s
  ``ChangeWatch.poll()`` (SQLite's ``data_version``; PostgreSQL's ``LISTEN`` thread) reports
  it, from the start of the write and from its commit, polled every millisecond (the window
  polls every ``POLL_MS``, on the team store every ``TEAM_POLL_MS``, of
  ``gui/db_watch.py``, which adds up to that much on screen).
  Goal: at most 1 s. Measured on a small database of its own on each backend.

The machine's load average is printed with each section and in the summary.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sqlite3
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _common
import bench_import
import make_corpus

from workbench.core.conversation import Message
from workbench.store import Database, Repository
from workbench.store.opening import open_database
from workbench.store.searching import SearchQuery, search
from workbench.store.types import text_to_time

SQLITE = "SQLite"
POSTGRESQL = "PostgreSQL"
BACKENDS = (SQLITE, POSTGRESQL)
SHORT = {SQLITE: "SQLite", POSTGRESQL: "PG"}
SECTIONS = ("import", "search", "paging", "preflight", "watch")

IMPORT_GOAL_RATIO = 2.0
SEARCH_GOAL_S = {SQLITE: 0.050, POSTGRESQL: 0.100}
PAGING_GOAL_S = 0.005
WATCH_GOAL_S = 1.0
DEFAULT_IMPORT_LIMIT = 500_000
LIMIT = 50
PAGE = 200
# The most time the timed runs of one figure on one backend take (a slow figure gets fewer).
BUDGET_S = 20.0
PROMPT = "Which of my orders from last week have not shipped yet?"
CORPUS_DATABASE = "bench_corpus"
IMPORT_DATABASE = "bench_import"
WATCH_DATABASE = "bench_watch"


# -- figures --------------------------------------------------------------------------------


@dataclass
class Figure:
    """One line of the side-by-side table: a median per backend, or why it failed."""

    section: str
    name: str
    goal: dict[str, float] = field(default_factory=dict)  # backend -> at most (seconds)
    seconds: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    load: float = 0.0
    ratio_goal: float | None = None  # PostgreSQL / SQLite at most this

    def cell(self, backend: str) -> str:
        if backend in self.failed:
            return "failed"
        if backend not in self.seconds:
            return "-"
        text = _common.ms(self.seconds[backend]) if self.seconds[backend] < 10 else (
            f"{self.seconds[backend]:,.1f} s")
        return text

    def ratio(self) -> float | None:
        if SQLITE in self.seconds and POSTGRESQL in self.seconds and self.seconds[SQLITE] > 0:
            return self.seconds[POSTGRESQL] / self.seconds[SQLITE]
        return None

    def verdicts(self) -> str:
        out = []
        for backend in BACKENDS:
            if backend in self.goal and backend in self.seconds:
                ok = _common.verdict(self.seconds[backend], self.goal[backend], at_most=True)
                out.append(f"{SHORT[backend]} <= {_fmt_goal(self.goal[backend])} {ok}")
        ratio = self.ratio()
        if self.ratio_goal is not None and ratio is not None:
            ok = _common.verdict(ratio, self.ratio_goal, at_most=True)
            out.append(f"ratio <= {self.ratio_goal:g} {ok}")
        return "; ".join(out)


def _fmt_goal(seconds: float) -> str:
    return f"{seconds * 1000:g} ms" if seconds < 1 else f"{seconds:g} s"


def reason(exc: BaseException) -> str:
    """One line saying why a figure failed."""
    text = (str(exc).strip().splitlines() or [""])[0]
    if len(text) > 160:
        text = text[:157] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Table:
    """The figures of the run, printed as they come and once more at the end."""

    NAME_WIDTH = 44

    def __init__(self, show_tracebacks: bool):
        self.figures: list[Figure] = []
        self.show_tracebacks = show_tracebacks

    def header(self, title: str) -> None:
        _common.header(title)
        print(f"  {_common.load_note()}")
        print(f"  {'':<{self.NAME_WIDTH}} {SQLITE:>11} {POSTGRESQL:>11} {'PG/SQLite':>10}")

    def attempt(self, figure: Figure, backend: str, fn: Callable[[], Any]) -> Any:
        """Run one backend's measurement; a failure is recorded, never raised."""
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - each figure stands alone
            figure.failed[backend] = reason(exc)
            if self.show_tracebacks:
                traceback.print_exc()
            return None

    def add(self, figure: Figure) -> None:
        try:
            figure.load = os.getloadavg()[0]
        except OSError:
            figure.load = 0.0
        self.figures.append(figure)
        self.print_row(figure)

    def print_row(self, figure: Figure, *, with_load: bool = False) -> None:
        ratio = figure.ratio()
        line = (
            f"  {figure.name:<{self.NAME_WIDTH}} {figure.cell(SQLITE):>11}"
            f" {figure.cell(POSTGRESQL):>11} {f'{ratio:.2f}' if ratio is not None else '':>10}"
        )
        extra = [figure.verdicts()]
        if with_load:
            extra.append(f"load {figure.load:.1f}")
        extra += [f"{SHORT[b]}: {n}" for b, n in figure.notes.items()]
        line += "  " + "; ".join(e for e in extra if e)
        print(line.rstrip())
        for backend, why in figure.failed.items():
            print(f"      {backend} failed: {why}")

    def summary(self) -> None:
        _common.header("summary: medians, both backends (load = 1-minute average at the time)")
        print(f"  {_common.load_note()} now")
        print(f"  {'':<{self.NAME_WIDTH}} {SQLITE:>11} {POSTGRESQL:>11} {'PG/SQLite':>10}")
        section = None
        for figure in self.figures:
            if figure.section != section:
                section = figure.section
                print(f"  [{section}]")
            self.print_row(figure, with_load=True)


def timed(fn: Callable[[], Any], runs: int) -> tuple[_common.Timing, Any, str]:
    """One warm-up call, then ``runs`` timed calls, fewer when the warm-up says they would
    take more than :data:`BUDGET_S`: the timing, the warm-up's result, and a note naming
    the number of runs when it was cut."""
    t0 = time.perf_counter()
    result = fn()
    first = time.perf_counter() - t0
    note = ""
    if first * runs > BUDGET_S:
        runs = max(1, int(BUDGET_S / first))
        note = f" ({runs} run{'s' if runs > 1 else ''})"
    return _common.time_calls(fn, runs=runs, warmup=0), result, note


# -- the two sides --------------------------------------------------------------------------


@dataclass
class Side:
    """One backend: where its corpus is, the open database, or why it cannot be used."""

    name: str
    target: str = ""  # a file path or a postgresql:// URL
    db: Database | None = None
    error: str | None = None
    big_session: int | None = None
    search_fn: Callable[[SearchQuery], Any] | None = None
    counts: dict[str, int] = field(default_factory=dict)

    def need(self) -> Database:
        if self.db is None:
            raise RuntimeError(self.error or f"the {self.name} corpus is not open")
        return self.db


class PostgresPlace:
    """Where the PostgreSQL databases live: a throwaway cluster, or ``--pg-url``'s server."""

    def __init__(self, url: str | None):
        self.server: Any = None
        self.given = url
        self.base = ""  # a postgresql:// URL whose database part is replaced

    def start(self) -> None:
        if self.given:
            self.base = self.given
            return
        self.server = _common.start_postgres()
        self.base = self.server.url("postgres").replace("postgresql+psycopg://", "postgresql://", 1)

    def url(self, database: str) -> str:
        from sqlalchemy.engine import make_url

        return make_url(self.base).set(database=database).render_as_string(hide_password=False)

    def corpus_url(self) -> str:
        return self.given or self.url(CORPUS_DATABASE)

    def admin(self) -> Any:
        import sqlalchemy as sa

        url = self.url("postgres").replace("postgresql://", "postgresql+psycopg://", 1)
        return sa.create_engine(url, isolation_level="AUTOCOMMIT")

    def fresh(self, database: str) -> str:
        """Drop and create ``database``; its URL."""
        import sqlalchemy as sa

        engine = self.admin()
        try:
            with engine.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
                conn.execute(sa.text(f'CREATE DATABASE "{database}"'))
        finally:
            engine.dispose()
        return self.url(database)

    def drop(self, database: str) -> None:
        import sqlalchemy as sa

        engine = self.admin()
        try:
            with engine.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
        finally:
            engine.dispose()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


def driver_url(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


def pg_corpus_meta(url: str) -> dict[str, Any] | None:
    """The corpus description stored in a PostgreSQL database, or None."""
    import json

    import sqlalchemy as sa

    engine = sa.create_engine(driver_url(url))
    try:
        with engine.connect() as conn:
            if not conn.execute(sa.text("SELECT to_regclass('settings') IS NOT NULL")).scalar():
                return None
            value = conn.execute(sa.text("SELECT value FROM settings WHERE key = :k"),
                                 {"k": make_corpus.SETTINGS_KEY}).scalar()
    finally:
        engine.dispose()
    return None if value is None else dict(json.loads(value))


def store_pg_meta(url: str, meta: dict[str, Any]) -> None:
    """Record the corpus description (as the SQLite corpus does) and analyze the tables."""
    import json

    import sqlalchemy as sa

    clean = {k: v for k, v in meta.items() if not k.startswith("_")}
    engine = sa.create_engine(driver_url(url), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(sa.text(
                "INSERT INTO settings (key, value) VALUES (:k, :v) ON CONFLICT (key)"
                " DO UPDATE SET value = excluded.value"),
                {"k": make_corpus.SETTINGS_KEY, "v": json.dumps(clean)})
            conn.execute(sa.text("VACUUM ANALYZE"))
    finally:
        engine.dispose()


# -- reading the corpus in batches ----------------------------------------------------------


def corpus_batches(corpus: Path, batch_messages: int, *, after_session: int = 0,
                   limit: int = 0) -> Iterator[bench_import.Batch]:
    """The corpus's sessions after ``after_session``, in order, in batches of about
    ``batch_messages`` messages; with ``limit``, only the first sessions up to that many
    messages."""
    return bench_import.read_batches(corpus, limit, batch_messages,
                                     after_session=after_session)


# -- loading the PostgreSQL corpus ----------------------------------------------------------

# The tables copied by the bench's own loader, parents first.
_COPY_TABLES = ("agents", "sessions", "session_context", "messages", "message_calls",
                "memory_entries", "compactions", "settings", "provider_configs")


def copy_corpus(corpus: Path, url: str) -> tuple[dict[str, int], dict[str, float]]:
    """Copy every row of the SQLite corpus into the migrated PostgreSQL database at ``url``
    with its id (``COPY``; the GIN indexes of ``messages`` dropped meanwhile and built
    again after). The bench's loader, used when the workbench's own import fails there.
    Returns the rows copied per table and the seconds of each step."""
    import psycopg
    from psycopg import sql

    conninfo = url
    src = sqlite3.connect(f"file:{corpus}?mode=ro", uri=True)
    started = time.perf_counter()
    counts: dict[str, int] = {}
    seconds: dict[str, float] = {}
    try:
        with psycopg.connect(conninfo, autocommit=True) as pg:
            pg.execute("SET maintenance_work_mem = '1GB'")
            present = [t for t in _COPY_TABLES if pg.execute(
                "SELECT to_regclass(%s) IS NOT NULL", (t,)).fetchone()[0]]  # type: ignore[index]
            pg.execute(sql.SQL("TRUNCATE {} CASCADE").format(
                sql.SQL(", ").join(sql.Identifier(t) for t in present)))
            indexes = pg.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()"
                " AND tablename = 'messages' AND indexdef ILIKE '% USING gin %'").fetchall()
            for name, _definition in indexes:
                pg.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(name)))
            for table in present:
                pg_columns = [r[0] for r in pg.execute(
                    "SELECT column_name FROM information_schema.columns"
                    " WHERE table_schema = current_schema() AND table_name = %s"
                    " AND is_generated = 'NEVER' ORDER BY ordinal_position", (table,))]
                sqlite_columns = {r[1] for r in src.execute(f"PRAGMA table_info({table})")}
                columns = [c for c in pg_columns if c in sqlite_columns]
                if not columns:
                    continue
                select = f"SELECT {', '.join(columns)} FROM {table}"
                copy = sql.SQL("COPY {} ({}) FROM STDIN").format(
                    sql.Identifier(table), sql.SQL(", ").join(sql.Identifier(c) for c in columns))
                n = 0
                if table == "message_calls":
                    # The messages' insert trigger listed their calls already (with ids
                    # of its own); the corpus's rows replace them.
                    pg.execute("TRUNCATE message_calls")
                with pg.transaction(), pg.cursor() as cur, cur.copy(copy) as out:
                    for row in src.execute(select):
                        out.write_row(row)
                        n += 1
                counts[table] = n
                if "id" in columns and n:
                    pg.execute(sql.SQL(
                        "SELECT setval(pg_get_serial_sequence({t}, 'id'),"
                        " (SELECT max(id) FROM {i}))"
                    ).format(t=sql.Literal(table), i=sql.Identifier(table)))
            seconds["COPY"] = time.perf_counter() - started
            for name, definition in indexes:
                t0 = time.perf_counter()
                pg.execute(definition)
                seconds[name] = time.perf_counter() - t0
    finally:
        src.close()
    return counts, seconds


# -- import ---------------------------------------------------------------------------------


@dataclass
class PgLoad:
    """How far the PostgreSQL corpus got through ``import_many`` during the import."""

    url: str = ""
    next_after: int = 0  # the last corpus session id imported
    messages: int = 0
    seconds: float = 0.0
    ok: bool = False


def run_import(args: argparse.Namespace, info: make_corpus.CorpusInfo, table: Table,
               pg: Side, place: PostgresPlace | None, into_corpus: bool) -> PgLoad:
    """Import the first sessions on both backends, batch by batch in turns."""
    limit = args.import_limit or info.meta["messages"]
    workdir = _common.prepare_data_dir() / "backends"
    workdir.mkdir(exist_ok=True)
    sqlite_path = workdir / "import.db"
    load = PgLoad()
    fig = Figure("import", "import_many, first sessions", ratio_goal=IMPORT_GOAL_RATIO)
    sqlite_db: Database | None = None
    pg_db: Database | None = None
    sqlite_repo: Repository | None = None
    pg_repo: Repository | None = None
    agents: dict[str, int] = {}
    cpu = {SQLITE: 0.0, POSTGRESQL: 0.0}
    seconds = {SQLITE: 0.0, POSTGRESQL: 0.0}
    merged = {SQLITE: 0.0, POSTGRESQL: 0.0}

    def open_sqlite() -> None:
        nonlocal sqlite_db, sqlite_repo
        bench_import.fresh_schema(sqlite_path)
        sqlite_db = open_database(sqlite_path)
        sqlite_repo = Repository(sqlite_db)
        agents[SQLITE] = sqlite_repo.default_agent().id

    def open_pg() -> None:
        nonlocal pg_db, pg_repo
        if place is None:
            raise RuntimeError(pg.error or "no PostgreSQL server")
        load.url = place.fresh(CORPUS_DATABASE if into_corpus else IMPORT_DATABASE)
        pg_db = open_database(load.url)
        pg_repo = Repository(pg_db)
        agents[POSTGRESQL] = pg_repo.default_agent().id

    table.attempt(fig, SQLITE, open_sqlite)
    table.attempt(fig, POSTGRESQL, open_pg)
    messages = sessions = 0
    last_session = 0
    try:
        for number, batch in enumerate(corpus_batches(info.path, args.batch_messages,
                                                      limit=limit)):
            order = [(SQLITE, sqlite_repo), (POSTGRESQL, pg_repo)]
            if number % 2:
                order.reverse()  # neither backend always goes first
            for backend, repo in order:
                if repo is None or backend in fig.failed:
                    continue

                def one(repo: Repository = repo, backend: str = backend,
                        batch: bench_import.Batch = batch) -> None:
                    cpu0 = time.thread_time()
                    t0 = time.perf_counter()
                    repo.import_many(batch.conversations, agent_id=agents[backend])
                    seconds[backend] += time.perf_counter() - t0
                    cpu[backend] += time.thread_time() - cpu0
                    merger = getattr(repo.db, "search_index_merger", None)
                    if merger is not None:
                        # The words PostgreSQL's import left pending are merged on a
                        # thread after its commit; in an import of its own that overlaps
                        # the next batch. Here it would run during SQLite's turn: it is
                        # waited for, and its time reported apart.
                        t0 = time.perf_counter()
                        merger.wait_idle()
                        merged[backend] += time.perf_counter() - t0

                table.attempt(fig, backend, one)
            messages += batch.messages
            sessions += len(batch.session_rows)
            last_session = batch.session_rows[-1][0]
            print(f"    {messages:>9,} messages: SQLite {seconds[SQLITE]:6.1f} s,"
                  f" PostgreSQL {seconds[POSTGRESQL]:6.1f} s"
                  + (" (failed)" if POSTGRESQL in fig.failed else ""), flush=True)
    finally:
        for db in (sqlite_db, pg_db):
            if db is not None:
                db.close()
    fig.name = f"import_many, {messages:,} messages"
    for backend in BACKENDS:
        if backend not in fig.failed and ((backend == SQLITE and sqlite_repo) or
                                          (backend == POSTGRESQL and pg_repo)):
            fig.seconds[backend] = seconds[backend]
            fig.cpu[backend] = cpu[backend]
            fig.notes[backend] = (f"{messages / seconds[backend]:,.0f} msg/s, "
                                  f"cpu {cpu[backend]:.1f} s") if seconds[backend] else ""
            if merged[backend]:
                with_merge = seconds[backend] + merged[backend]
                fig.notes[backend] += (
                    f"; then {merged[backend]:.1f} s merging the search index's pending"
                    f" words after the commits (with it {with_merge:.1f} s, "
                    f"{with_merge / max(seconds[SQLITE], 1e-9):.2f}x SQLite)")
    table.add(fig)
    if sessions:
        print(f"    ({sessions:,} sessions; the SQLite corpus's own build imported all "
              f"{info.meta['messages']:,} messages in "
              f"{info.meta.get('phase_seconds', {}).get('import', 0):.1f} s)")
    if POSTGRESQL not in fig.failed and pg_repo is not None:
        load.ok = True
        load.next_after = last_session
        load.messages = messages
        load.seconds = seconds[POSTGRESQL]
    if not args.keep:
        _common.remove_database(sqlite_path)
    if place is not None and not into_corpus and pg_repo is not None:
        table.attempt(fig, POSTGRESQL, lambda: place.drop(IMPORT_DATABASE))
    return load


def load_pg_corpus(args: argparse.Namespace, info: make_corpus.CorpusInfo,
                   place: PostgresPlace, started: PgLoad | None) -> str:
    """Fill the PostgreSQL corpus database: on through ``import_many`` from where the import
    left it, else all of it through the bench's copy; a sentence of what was done."""
    url = place.corpus_url()
    if started is None or not started.ok:
        # Nothing imported yet: try the workbench's own import on an empty database.
        started = PgLoad(url=place.fresh(CORPUS_DATABASE) if not place.given else url)
        try:
            db = open_database(url)
            try:
                Repository(db).default_agent()
            finally:
                db.close()
            started.ok = True
        except Exception as exc:  # noqa: BLE001
            why = reason(exc)
            return _copy_in(info, place, url, f"import_many is not usable ({why})")
    db = open_database(url)
    repo = Repository(db)
    seconds = started.seconds
    messages = started.messages
    try:
        agent = repo.default_agent().id
        for batch in corpus_batches(info.path, args.batch_messages,
                                    after_session=started.next_after):
            t0 = time.perf_counter()
            repo.import_many(batch.conversations, agent_id=agent)
            seconds += time.perf_counter() - t0
            messages += batch.messages
            print(f"    {messages:>9,} messages into PostgreSQL: {seconds:6.1f} s", flush=True)
    except Exception as exc:  # noqa: BLE001
        db.close()
        return _copy_in(info, place, url, f"import_many failed after {messages:,} messages "
                                          f"({reason(exc)})")
    db.close()
    t0 = time.perf_counter()
    store_pg_meta(url, info.meta)
    return (f"loaded through import_many: {messages:,} messages in {seconds:.1f} s "
            f"({messages / max(seconds, 1e-9):,.0f} msg/s), then VACUUM ANALYZE "
            f"{time.perf_counter() - t0:.1f} s")


def _copy_in(info: make_corpus.CorpusInfo, place: PostgresPlace, url: str, why: str) -> str:
    print(f"    {why}; copying the corpus in with the bench's own loader instead", flush=True)
    if not place.given:
        url = place.fresh(CORPUS_DATABASE)
    open_database(url).close()  # the schema, migrated by the workbench
    t0 = time.perf_counter()
    counts, steps = copy_corpus(info.path, url)
    copied = time.perf_counter() - t0
    t0 = time.perf_counter()
    store_pg_meta(url, info.meta)
    return (f"{why}; copied by the bench's loader (COPY with ids, GIN indexes built after): "
            f"{counts.get('messages', 0):,} messages in {copied:.1f} s ("
            + ", ".join(f"{k} {v:.1f} s" for k, v in steps.items())
            + "), then VACUUM ANALYZE "
            f"{time.perf_counter() - t0:.1f} s")


def pg_corpus_ready(url: str, info: make_corpus.CorpusInfo) -> bool:
    try:
        meta = pg_corpus_meta(url)
    except Exception:  # noqa: BLE001 - no such database or no schema yet
        return False
    return meta is not None and meta.get("params") == info.meta.get("params")


# -- search ---------------------------------------------------------------------------------


@dataclass
class Case:
    name: str
    query: SearchQuery
    goal: dict[str, float]


def build_cases(meta: dict[str, Any], span: tuple[str, str]) -> list[Case]:
    words = meta["words"]
    rare = words["rare"]["word"]
    medium = words["medium"]["word"]
    common = words["very_common"]["word"]
    top = words["top"]["word"]
    phrase = meta["phrase"]
    prefix = meta["prefix"]
    first, last = (text_to_time(t) for t in span)
    assert first is not None and last is not None
    middle = first + (last - first) / 2
    date_from = middle - (last - first) / 20  # a tenth of the corpus's time span
    date_to = middle + (last - first) / 20
    both = dict(SEARCH_GOAL_S)
    pg_only = {POSTGRESQL: SEARCH_GOAL_S[POSTGRESQL]}

    def q(text: str, **kw: Any) -> SearchQuery:
        return SearchQuery(text=text, limit=LIMIT, **kw)

    return [
        Case(f"rare word {rare!r}", q(rare), both),
        Case(f"medium word {medium!r}", q(medium), both),
        Case(f"very common word {common!r}", q(common), both),
        Case(f"most common word {top!r}", q(top), pg_only),
        Case(f'phrase "{phrase}"', q(f'"{phrase}"'), pg_only),
        Case(f"prefix {prefix}", q(prefix), pg_only),
        Case(f"{rare} OR {medium}", q(f"{rare} OR {medium}"), pg_only),
        Case(f"{common} NOT {medium}", q(f"{common} NOT {medium}"), pg_only),
        Case(f"{common}, role user", q(common, roles=["user"]), pg_only),
        Case(f"{common}, state folded", q(common, states=["folded"]), pg_only),
        Case(f"{common}, a tenth of the dates", q(common, date_from=date_from,
                                                  date_to=date_to), pg_only),
        Case("substring '->'", q("->"), pg_only),
        Case("substring '<=>' (matches nothing)", q("<=>"), pg_only),
    ]


def choose_search(side: Side) -> None:
    """``search()`` as the application calls it (FTS5 or the team store's search)."""
    db = side.need()
    side.search_fn = lambda query: search(db, query)
    search(db, SearchQuery(text="probe", limit=1))


def run_search(args: argparse.Namespace, info: make_corpus.CorpusInfo, table: Table,
               sides: list[Side]) -> None:
    conn = sqlite3.connect(f"file:{info.path}?mode=ro", uri=True)
    try:
        span = conn.execute("SELECT min(created_at), max(created_at) FROM messages").fetchone()
    finally:
        conn.close()
    cases = build_cases(info.meta, span)
    probe = Figure("search", "search() usable")
    for side in sides:
        table.attempt(probe, side.name, lambda side=side: choose_search(side))
    table.header(f"search: top {LIMIT} with snippets, median of {args.runs} runs after one "
                 "warm-up (goals: PostgreSQL <= 100 ms every class; SQLite <= 50 ms for the "
                 "rare, medium and very common word)")
    for side in sides:
        if side.name in probe.failed:
            print(f"  note: {side.name}: search not usable: {probe.failed[side.name]}")
    for case in cases:
        fig = Figure("search", case.name, goal=dict(case.goal))
        for side in sides:
            if side.name in probe.failed:
                fig.failed[side.name] = "search not usable (see above)"
                continue
            fn = side.search_fn
            assert fn is not None

            def measure(fn: Callable[[SearchQuery], Any] = fn, side: Side = side,
                        query: SearchQuery = case.query, fig: Figure = fig) -> None:
                timing, hits, cut = timed(lambda: fn(query), args.runs)
                fig.seconds[side.name] = timing.median
                fig.cpu[side.name] = timing.cpu
                fig.notes[side.name] = f"{len(hits)} hits{cut}"

            table.attempt(fig, side.name, measure)
        table.add(fig)


# -- paging and preflight -------------------------------------------------------------------


def corpus_counts(side: Side) -> dict[str, int]:
    """Rows of the main tables, to tell that both sides hold the same corpus (a table the
    import leaves empty on one side changes what the figures measure)."""
    import sqlalchemy as sa

    counts = {}
    with side.need().engine.connect() as conn:
        for table in ("sessions", "messages", "session_context", "message_calls"):
            counts[table] = int(conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one())
    side.counts = counts
    return counts


def big_session_of(side: Side, info: make_corpus.CorpusInfo) -> int:
    """The corpus's first long session on ``side`` (found by its source id: the ids of a
    corpus loaded through the import need not be the SQLite file's)."""
    if side.big_session is not None:
        return side.big_session
    conn = sqlite3.connect(f"file:{info.path}?mode=ro", uri=True)
    try:
        source_id = conn.execute("SELECT source_id FROM sessions WHERE id = ?",
                                 (info.big_session_ids[0],)).fetchone()[0]
    finally:
        conn.close()
    import sqlalchemy as sa

    db = side.need()
    with db.engine.connect() as c:
        found = c.execute(sa.text("SELECT id FROM sessions WHERE source_id = :s"),
                          {"s": source_id}).scalar()
    if found is None:
        raise RuntimeError(f"the long session {source_id} is not in the {side.name} corpus")
    side.big_session = int(found)
    return side.big_session


def run_paging(args: argparse.Namespace, info: make_corpus.CorpusInfo, table: Table,
               sides: list[Side]) -> None:
    size = info.meta["big_size"]
    rng = random.Random(args.seed)
    randoms = [rng.randrange(-1, size - PAGE) for _ in range(args.random_positions)]
    classes = {"start": [-1], "middle": [size // 2], "end": [size - PAGE - 1],
               f"random ({len(randoms)} places)": randoms}
    table.header(f"paging: page_messages(limit={PAGE}) in a {size:,}-message session, median "
                 f"of {args.runs} runs per place after one warm-up (goal <= 5 ms)")
    for name, positions in classes.items():
        fig = Figure("paging", f"page of {PAGE}, {name}",
                     goal={SQLITE: PAGING_GOAL_S, POSTGRESQL: PAGING_GOAL_S})
        for side in sides:

            def measure(side: Side = side, positions: list[int] = positions,
                        fig: Figure = fig) -> None:
                repo = Repository(side.need())
                session = big_session_of(side, info)
                total = _common.Timing([], [])
                rows = 0
                for pos in positions:
                    rows = len(repo.page_messages(session, after_position=pos, limit=PAGE))
                    one = _common.time_calls(
                        lambda p=pos: repo.page_messages(session, after_position=p, limit=PAGE),
                        runs=args.runs)
                    total.samples += one.samples
                    total.cpu_samples += one.cpu_samples
                fig.seconds[side.name] = total.median
                fig.cpu[side.name] = total.cpu
                fig.notes[side.name] = f"{rows} rows"

            table.attempt(fig, side.name, measure)
        table.add(fig)


def run_preflight(args: argparse.Namespace, info: make_corpus.CorpusInfo, table: Table,
                  sides: list[Side]) -> None:
    from workbench.engine.turn import preflight_session
    from workbench.engine.workspace import Workspace

    table.header(f"preflight: preflight_session(ws, session, prompt).to_json() of the stored "
                 f"{info.meta['big_size']:,}-message session, median of {args.runs} runs")
    fig = Figure("preflight", f"preflight of a {info.meta['big_size']:,}-message session")
    for side in sides:

        def measure(side: Side = side) -> None:
            calls = {s.name: s.counts.get("message_calls") for s in sides}
            if calls[side.name] == 0 and any(calls.values()):
                # Every tool result would look orphaned: minutes per call, and not the
                # same work as on the other side.
                raise RuntimeError("skipped: message_calls is empty in this corpus (the "
                                   "import did not fill it) but not in the other")
            ws = Workspace(side.need())
            session = big_session_of(side, info)
            timing, data, cut = timed(
                lambda: preflight_session(ws, session, PROMPT).to_json(), args.runs)
            fig.seconds[side.name] = timing.median
            fig.cpu[side.name] = timing.cpu
            left = sum(item.get("count", 1) for item in data["left_out"] or ())
            fig.notes[side.name] = (f"{len(data['payload']['messages']):,} messages sent, "
                                    f"{left:,} left out{cut}")

        table.attempt(fig, side.name, measure)
    table.add(fig)


# -- a change seen by a second window -------------------------------------------------------


def watch_latency(target: str, rounds: int, timeout: float = 10.0) -> tuple[
        _common.Timing, _common.Timing, _common.Timing]:
    """Write times, and times until a second Workspace's ChangeWatch reports each write:
    from the write's start and from its commit."""
    from workbench.engine.watch import ChangeWatch
    from workbench.engine.workspace import Workspace

    writer = Workspace.open(target)
    reader = Workspace.open(target)
    try:
        session = writer.repo.create_session("watched").id
        watch = ChangeWatch(reader)
        listener = getattr(reader.db, "listener", None)
        if listener is not None:  # PostgreSQL: wait until its LISTEN connection is up
            if not listener().wait_for(lambda heard: heard.connections > 0, timeout):
                raise RuntimeError(f"the listener did not connect: {listener().last_error}")
        watch.poll()
        writes: list[float] = []
        from_start: list[float] = []
        from_commit: list[float] = []
        for n in range(rounds + 1):
            t0 = time.perf_counter()
            writer.repo.append_messages(session, [Message(role="user", content=f"change {n}")])
            t1 = time.perf_counter()
            while not watch.poll():
                if time.perf_counter() - t0 > timeout:
                    raise RuntimeError(f"change {n} not seen within {timeout:g} s")
                time.sleep(0.001)
            t2 = time.perf_counter()
            if n:  # the first round warms up
                writes.append(t1 - t0)
                from_start.append(t2 - t0)
                from_commit.append(t2 - t1)
        return _common.Timing(writes), _common.Timing(from_start), _common.Timing(from_commit)
    finally:
        reader.close()
        writer.close()


def run_watch(args: argparse.Namespace, table: Table, place: PostgresPlace | None,
              pg_error: str | None) -> None:
    try:  # what the window adds on screen: its own polling interval
        from workbench.gui import db_watch

        polls = (f"the window polls every {db_watch.POLL_MS} ms on a file, "
                 f"{getattr(db_watch, 'TEAM_POLL_MS', db_watch.POLL_MS)} ms on the team store")
    except ImportError:
        polls = "the window adds its own polling interval"
    table.header(f"change seen: a Workspace appends a message, a second Workspace's "
                 f"ChangeWatch polls every 1 ms; median of {args.watch_rounds} changes "
                 f"(goal <= 1 s; {polls})")
    workdir = _common.prepare_data_dir() / "backends"
    workdir.mkdir(exist_ok=True)
    figs = {
        "write": Figure("watch", "append_messages (one message)"),
        "start": Figure("watch", "seen, from the write's start",
                        goal={SQLITE: WATCH_GOAL_S, POSTGRESQL: WATCH_GOAL_S}),
        "commit": Figure("watch", "seen, from the write's return",
                         goal={SQLITE: WATCH_GOAL_S, POSTGRESQL: WATCH_GOAL_S}),
    }

    def targets() -> Iterator[tuple[str, Callable[[], str]]]:
        def sqlite_target() -> str:
            path = workdir / "watch.db"
            _common.remove_database(path)
            return str(path)

        def pg_target() -> str:
            if place is None:
                raise RuntimeError(pg_error or "no PostgreSQL server")
            return place.fresh(WATCH_DATABASE)

        yield SQLITE, sqlite_target
        yield POSTGRESQL, pg_target

    for backend, target in targets():

        def measure(backend: str = backend, target: Callable[[], str] = target) -> None:
            writes, start, commit = watch_latency(target(), args.watch_rounds)
            for key, timing in (("write", writes), ("start", start), ("commit", commit)):
                figs[key].seconds[backend] = timing.median
                figs[key].notes[backend] = f"max {_common.ms(max(timing.samples))}"

        probe = Figure("watch", "")
        table.attempt(probe, backend, measure)
        for fig in figs.values():
            fig.failed.update(probe.failed)
    for fig in figs.values():
        table.add(fig)
    _common.remove_database(workdir / "watch.db")
    if place is not None:
        try:
            place.drop(WATCH_DATABASE)
        except Exception:  # noqa: BLE001, S110 - the throwaway server goes anyway
            pass


# -- main -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    make_corpus.add_corpus_arguments(parser)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--import-limit", type=int, default=DEFAULT_IMPORT_LIMIT,
                        help="messages of the import figure (default "
                        f"{DEFAULT_IMPORT_LIMIT:,}; 0 for the whole corpus)")
    parser.add_argument("--batch-messages", type=int, default=50_000)
    parser.add_argument("--random-positions", type=int, default=10)
    parser.add_argument("--watch-rounds", type=int, default=20)
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help=f"sections to run, of {','.join(SECTIONS)}")
    parser.add_argument("--pg-url", default=None,
                        help="a postgresql:// database to use instead of a throwaway cluster")
    parser.add_argument("--keep", action="store_true",
                        help="keep the SQLite import database in bench/.data/backends")
    parser.add_argument("--traceback", action="store_true",
                        help="print the traceback of each failing figure")
    args = parser.parse_args(argv)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    unknown = only - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")

    # A terminated run still stops its throwaway cluster (the finally clause below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    info = make_corpus.corpus_from_args(args)
    make_corpus.print_summary(info)
    table = Table(args.traceback)
    sqlite_side = Side(SQLITE, str(info.path))
    pg_side = Side(POSTGRESQL)
    place: PostgresPlace | None = PostgresPlace(args.pg_url)
    try:
        assert place is not None
        t0 = time.perf_counter()
        place.start()
        where = ("the given server" if args.pg_url else
                 f"a throwaway cluster ({time.perf_counter() - t0:.1f} s to start; settings "
                 + ", ".join(f"{k}={v}" for k, v in _common.BENCH_PG_SETTINGS.items()) + ")")
        print(f"PostgreSQL: {where}")
    except Exception as exc:  # noqa: BLE001
        pg_side.error = f"no PostgreSQL server: {reason(exc)}"
        print(pg_side.error)
        place = None
    try:
        sqlite_side.db = open_database(info.path)
        started: PgLoad | None = None
        ready = place is not None and pg_corpus_ready(place.corpus_url(), info)
        if "import" in only:
            started = run_import(args, info, table, pg_side, place,
                                 into_corpus=place is not None and not ready
                                 and not args.pg_url)
        if place is not None and only - {"import", "watch"}:
            if ready:
                print(f"PostgreSQL corpus: {place.corpus_url()} holds this corpus already")
            else:
                t0 = time.perf_counter()
                try:
                    how = load_pg_corpus(args, info, place, started)
                    print(f"PostgreSQL corpus ({time.perf_counter() - t0:.1f} s): {how}")
                except Exception as exc:  # noqa: BLE001
                    pg_side.error = f"the PostgreSQL corpus could not be loaded: {reason(exc)}"
                    print(pg_side.error)
                    if args.traceback:
                        traceback.print_exc()
            if pg_side.error is None:
                pg_side.target = place.corpus_url()
                try:
                    pg_side.db = open_database(pg_side.target)
                except Exception as exc:  # noqa: BLE001
                    pg_side.error = f"the PostgreSQL corpus does not open: {reason(exc)}"
        sides = [sqlite_side, pg_side]
        if only - {"import", "watch"}:
            for side in sides:
                try:
                    counts = corpus_counts(side)
                    print(f"{side.name} corpus: "
                          + ", ".join(f"{n:,} {table}" for table, n in counts.items()))
                except Exception as exc:  # noqa: BLE001
                    print(f"{side.name} corpus: not counted ({reason(exc)})")
        if "search" in only:
            run_search(args, info, table, sides)
        if "paging" in only:
            run_paging(args, info, table, sides)
        if "preflight" in only:
            run_preflight(args, info, table, sides)
        if "watch" in only:
            run_watch(args, table, place, pg_side.error)
        table.summary()
    finally:
        for side in (sqlite_side, pg_side):
            if side.db is not None:
                side.db.close()
        if place is not None:
            place.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
