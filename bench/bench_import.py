"""Bulk import speed: ``Repository.import_many`` against plain ``sqlite3``.

Run as ``.venv/bin/python bench/bench_import.py [--limit N] [--batch-messages 50000]
[--trigger] [--keep] [--corpus PATH]``. The rows are those of the benchmark corpus (built first when
missing), read back with their token counts, so counting is excluded from every timing.
By default the corpus's first sessions up to 500,000 messages are imported (about half
of it, including one 100,000-message session), because the whole million takes about
three minutes per path on a two-core machine; ``--limit 0`` imports all of it.

In the same run, batch by batch (each about ``--batch-messages`` messages), the same
rows go into three fresh databases of the workbench's schema:

* ours: ``Repository.import_many(conversations)`` per batch (one transaction each; the
  store drops the index trigger, inserts, fills the index for the new rows and puts
  the trigger back). Timed: the ``import_many`` calls only, not building the
  ``Conversation`` objects handed to it.
* raw: plain ``sqlite3`` with the store's pragmas, the full-text insert trigger dropped,
  ``executemany`` of the same session, message and context rows per batch (one
  transaction each), then one ``INSERT INTO messages_fts(messages_fts) VALUES('rebuild')``.
* with ``--trigger``, for reference: plain ``executemany`` with the trigger in place,
  indexing row by row.

It prints rows per second of each and the ratio of times ours / raw (goal: at most 2.0).

With ``--postgresql URL`` (an empty database on a PostgreSQL server, the team store) the
same ``import_many`` calls are also timed there, for reference: rows go in with COPY and
the server computes each message's search column and its two GIN indexes.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _common
import make_corpus

from workbench.core.conversation import Conversation, SessionContext
from workbench.store import Database, Repository
from workbench.store.opening import open_database
from workbench.store.rows import MESSAGE_INSERT, MESSAGE_SELECT, message_from_row
from workbench.store.types import json_value, text_to_time

GOAL_RATIO = 2.0
# Half the corpus: the whole million takes about three minutes per path on two cores
# (indexing the text dominates), too long for a routine `make bench`.
DEFAULT_LIMIT = 500_000

_SESSION_COLUMNS = (
    "id, agent_id, title, created_at, updated_at, tags, pinned, archived, overrides,"
    " source, source_id, message_count, token_count"
)
_CONTEXT_COLUMNS = (
    "session_id, facts, summary, tasks, tool_stats, token_usage, system_state, environment,"
    " updated_at"
)


@dataclass
class Batch:
    """One batch of the corpus, as rows and as conversations."""

    session_rows: list[tuple[Any, ...]]
    message_rows: list[tuple[Any, ...]]
    context_rows: list[tuple[Any, ...]]
    conversations: list[Conversation] = field(default_factory=list)

    @property
    def messages(self) -> int:
        return len(self.message_rows)


def read_batches(
    corpus: Path, limit: int, batch_messages: int, *, after_session: int = 0
) -> Iterator[Batch]:
    """The corpus's sessions after ``after_session`` (by id, in order), in batches of
    about ``batch_messages`` messages; with ``limit``, only the first sessions up to that
    many messages (0: all of them)."""
    conn = sqlite3.connect(f"file:{corpus}?mode=ro", uri=True)
    try:
        sessions = conn.execute(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id > ? ORDER BY id",
            (after_session,),
        ).fetchall()
        chosen: list[tuple[Any, ...]] = []
        total = 0
        for row in sessions:
            if limit and chosen and total + row[11] > limit:
                break
            chosen.append(row)
            total += row[11]
        group: list[tuple[Any, ...]] = []
        size = 0
        for row in chosen:
            group.append(row)
            size += row[11]
            if size >= batch_messages or row is chosen[-1]:
                yield _load(conn, group)
                group, size = [], 0
    finally:
        conn.close()


def _load(conn: sqlite3.Connection, sessions: list[tuple[Any, ...]]) -> Batch:
    first, last = sessions[0][0], sessions[-1][0]
    message_rows = conn.execute(
        f"SELECT {MESSAGE_SELECT} FROM messages WHERE session_id BETWEEN ? AND ?"
        " ORDER BY session_id, position",
        (first, last),
    ).fetchall()
    context_rows = conn.execute(
        f"SELECT {_CONTEXT_COLUMNS} FROM session_context WHERE session_id BETWEEN ? AND ?"
        " ORDER BY session_id",
        (first, last),
    ).fetchall()
    by_session: dict[int, list[Any]] = {}
    for row in message_rows:
        by_session.setdefault(row[1], []).append(message_from_row(row))
    conversations = []
    for row in sessions:
        conversations.append(
            Conversation(
                title=row[2],
                messages=by_session.get(row[0], []),
                context=SessionContext(),
                source=row[9],
                source_id=row[10],
                created_at=text_to_time(row[3]),
                updated_at=text_to_time(row[4]),
                tags=list(json_value(row[5]) or []),
            )
        )
    # The raw rows leave out the message id: both paths let SQLite assign it.
    return Batch(list(sessions), [r[1:] for r in message_rows], context_rows, conversations)


def fresh_schema(path: Path) -> None:
    """An empty database of the workbench's schema with its default agent."""
    _common.remove_database(path)
    db = Database.open(path)
    try:
        Repository(db).default_agent()
    finally:
        db.close()


class RawImporter:
    """The plain-sqlite3 peer: executemany per batch, optionally without the trigger."""

    def __init__(self, path: Path, *, keep_trigger: bool):
        self.conn = _common.raw_connect(path)
        self.keep_trigger = keep_trigger
        # The index trigger as the schema has it, put back after the rebuild.
        self.trigger_sql = self.conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'messages_fts_insert'"
        ).fetchone()[0]
        if not keep_trigger:
            self.conn.execute("DROP TRIGGER messages_fts_insert")
        self.seconds = 0.0
        self.rebuild_seconds = 0.0
        self.cpu = 0.0

    def add(self, batch: Batch) -> None:
        conn = self.conn
        cpu_started = time.thread_time()
        started = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            f"INSERT INTO sessions ({_SESSION_COLUMNS}) VALUES ({', '.join('?' * 13)})",
            batch.session_rows,
        )
        conn.executemany(MESSAGE_INSERT, batch.message_rows)
        conn.executemany(
            f"INSERT INTO session_context ({_CONTEXT_COLUMNS}) VALUES ({', '.join('?' * 9)})",
            batch.context_rows,
        )
        conn.execute("COMMIT")
        self.seconds += time.perf_counter() - started
        self.cpu += time.thread_time() - cpu_started

    def finish(self) -> None:
        if self.keep_trigger:
            return
        cpu_started = time.thread_time()
        started = time.perf_counter()
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO messages_fts(messages_fts) VALUES('rebuild')")
        conn.execute(self.trigger_sql)
        conn.execute("COMMIT")
        self.rebuild_seconds = time.perf_counter() - started
        self.cpu += time.thread_time() - cpu_started

    def close(self) -> None:
        self.conn.close()


def _same_content(paths: list[Path], word: str) -> list[tuple[int, int, int]]:
    """Messages, sessions and rows matching ``word`` in each database."""
    out = []
    for path in paths:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            out.append((
                conn.execute("SELECT count(*) FROM messages").fetchone()[0],
                conn.execute("SELECT count(*) FROM sessions").fetchone()[0],
                conn.execute(
                    "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?",
                    ('"' + word + '"',),
                ).fetchone()[0],
            ))
        finally:
            conn.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    make_corpus.add_corpus_arguments(parser)
    parser.add_argument(
        "--limit", type=int, default=DEFAULT_LIMIT,
        help="import the corpus's first sessions up to this many messages (default "
        f"{DEFAULT_LIMIT:,}; 0 for the whole corpus)",
    )
    parser.add_argument("--batch-messages", type=int, default=50_000)
    parser.add_argument("--trigger", action="store_true",
                        help="also time plain inserts with the row-by-row index trigger")
    parser.add_argument("--postgresql", metavar="URL", default=None,
                        help="also import into this empty PostgreSQL database")
    parser.add_argument("--keep", action="store_true",
                        help="keep the imported databases in bench/.data/import")
    args = parser.parse_args(argv)

    info = make_corpus.corpus_from_args(args)
    make_corpus.print_summary(info)
    workdir = _common.prepare_data_dir() / "import"
    workdir.mkdir(exist_ok=True)
    ours_path, raw_path, trig_path = (workdir / f"{n}.db" for n in ("ours", "raw", "trigger"))
    paths = [ours_path, raw_path] + ([trig_path] if args.trigger else [])
    for path in paths:
        fresh_schema(path)

    db = Database.open(ours_path)
    repo = Repository(db)
    agent_id = repo.default_agent().id
    raw = RawImporter(raw_path, keep_trigger=False)
    trig = RawImporter(trig_path, keep_trigger=True) if args.trigger else None
    team = open_database(args.postgresql) if args.postgresql else None
    team_repo = Repository(team) if team is not None else None
    team_agent = team_repo.default_agent().id if team_repo is not None else 0
    team_s = 0.0
    ours_s = ours_cpu = 0.0
    read_s = 0.0
    messages = sessions = 0
    try:
        started = time.perf_counter()
        for batch in read_batches(
            info.path, args.limit or info.meta["messages"], args.batch_messages
        ):
            read_s += time.perf_counter() - started
            cpu0 = time.thread_time()
            t0 = time.perf_counter()
            repo.import_many(batch.conversations, agent_id=agent_id)
            ours_s += time.perf_counter() - t0
            ours_cpu += time.thread_time() - cpu0
            raw.add(batch)
            if trig is not None:
                trig.add(batch)
            if team_repo is not None:
                t0 = time.perf_counter()
                team_repo.import_many(batch.conversations, agent_id=team_agent)
                team_s += time.perf_counter() - t0
            messages += batch.messages
            sessions += len(batch.session_rows)
            print(
                f"  {messages:>9,} messages: ours {ours_s:6.1f} s, raw {raw.seconds:6.1f} s"
                + (f", trigger {trig.seconds:6.1f} s" if trig else "")
                + (f", postgresql {team_s:6.1f} s" if team else ""),
                flush=True,
            )
            started = time.perf_counter()
        raw.finish()
    finally:
        raw.close()
        if trig is not None:
            trig.close()
        if team is not None:
            team.close()
        db.close()

    raw_total = raw.seconds + raw.rebuild_seconds
    _common.header(
        f"bulk import of {messages:,} messages in {sessions:,} sessions "
        f"(batches of about {args.batch_messages:,}; reading the corpus took {read_s:.1f} s, "
        "not counted)"
    )
    print(f"  {_common.load_note()}; cpu = CPU time of the importing thread")
    print(
        f"  ours, Repository.import_many: {ours_s:6.1f} s = {messages / ours_s:>9,.0f} rows/s"
        f"  (cpu {ours_cpu:.1f} s)"
    )
    print(
        f"  raw, executemany + FTS rebuild: {raw_total:6.1f} s = "
        f"{messages / raw_total:>9,.0f} rows/s  (inserts {raw.seconds:.1f} s, "
        f"rebuild {raw.rebuild_seconds:.1f} s; cpu {raw.cpu:.1f} s)"
    )
    if trig is not None:
        print(
            f"  reference, executemany with the FTS trigger: {trig.seconds:6.1f} s = "
            f"{messages / trig.seconds:>9,.0f} rows/s; trigger / raw = "
            f"{trig.seconds / raw_total:.2f}"
        )
    if team is not None:
        print(
            f"  team store, Repository.import_many on PostgreSQL: {team_s:6.1f} s = "
            f"{messages / team_s:>9,.0f} rows/s"
        )
    ratio = ours_s / raw_total
    print(
        f"  ours / raw = {ratio:.2f} by the clock, {ours_cpu / raw.cpu:.2f} by CPU time "
        f"(goal <= {GOAL_RATIO:g}: {_common.verdict(ratio, GOAL_RATIO, at_most=True)})"
    )
    counts = _same_content(paths, info.meta["words"]["very_common"]["word"])
    names = ["ours", "raw", "trigger"]
    print(
        "  check (messages, sessions, rows matching the very common word): "
        + "; ".join(f"{n} {c}" for n, c in zip(names, counts, strict=False))
    )
    if not args.keep:
        for path in paths:
            _common.remove_database(path)
        if not any(workdir.iterdir()):
            workdir.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
