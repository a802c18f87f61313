"""Opening the SQLite file: location, pragmas, version check, backup and migrations.

Transactions are explicit. The driver runs in autocommit mode and the store issues
``BEGIN IMMEDIATE`` for every change (:meth:`Database.write`) and a deferred ``BEGIN``
for multi-statement reads (:meth:`Database.read`), so a change is always whole and a
writer waits for the lock (busy timeout) instead of failing half-way.

Every change this process makes goes through one connection kept for writing. Its
temporary triggers (seen by no other connection, no part of the schema) record which
sessions' messages each commit changed and from which position, and its
``PRAGMA data_version`` moves only when another connection (another process) commits:
:meth:`Database.change_mark` and :meth:`Database.message_changes` tell a reader what
changed since it last read, so it may keep the rest (the Request panel's history pages).
"""

from __future__ import annotations

import os
import re
import sqlite3
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import QueuePool

from workbench.core.conversation import utcnow
from workbench.errors import DatabaseUnavailableError, StorageError
from workbench.store.dialect import SQLITE_DIALECT, Dialect, sqlite_fold
from workbench.store.migrations import MIGRATIONS, Migration, refuse_newer
from workbench.store.types import time_to_text

APP_NAME = "conversation-workbench"
DB_FILENAME = "workbench.db"
BUSY_TIMEOUT_MS = 10_000
SQLITE_HEADER = b"SQLite format 3\x00"
# Connections the pool keeps open; more are opened for bursts and closed after them.
POOL_SIZE = 4
POOL_OVERFLOW = 8
#: Commits whose changes to messages are remembered (see Database.message_changes).
CHANGES_KEPT = 256
#: message_changes' answer when a session's messages did not change.
UNCHANGED = sys.maxsize


@dataclass(frozen=True)
class ChangeMark:
    """Where a database stood (:meth:`Database.change_mark`)."""

    epoch: int  # the writer connection's life
    outside: int  # its data_version: moves when another connection commits
    writes: int  # this process's commits


# Temporary triggers on the connection that writes (invisible to every other connection
# and to the schema) record the sessions whose messages each write transaction changes,
# with the lowest position it changed, in a temporary table read before the commit.
_TOUCH_TRIGGERS = ("wb_touch_insert", "wb_touch_update", "wb_touch_delete")
_TOUCH = ("INSERT INTO wb_touched (session_id, low) VALUES ({sid}, {pos}) "
          "ON CONFLICT (session_id) DO UPDATE SET low = min(low, excluded.low);")
_RECORDING = (
    "CREATE TEMP TABLE IF NOT EXISTS wb_touched "
    "(session_id INTEGER PRIMARY KEY, low INTEGER NOT NULL)",
    "CREATE TEMP TRIGGER IF NOT EXISTS wb_touch_insert AFTER INSERT ON main.messages "
    f"BEGIN {_TOUCH.format(sid='new.session_id', pos='new.position')} END",
    "CREATE TEMP TRIGGER IF NOT EXISTS wb_touch_update AFTER UPDATE ON main.messages "
    f"BEGIN {_TOUCH.format(sid='old.session_id', pos='min(old.position, new.position)')} "
    f"{_TOUCH.format(sid='new.session_id', pos='min(old.position, new.position)')} END",
    "CREATE TEMP TRIGGER IF NOT EXISTS wb_touch_delete AFTER DELETE ON main.messages "
    f"BEGIN {_TOUCH.format(sid='old.session_id', pos='old.position')} END",
)
_TRIGGERS_THERE = (
    "SELECT count(*) FROM temp.sqlite_master WHERE type = 'trigger' AND name IN "
    f"({', '.join(repr(name) for name in _TOUCH_TRIGGERS)})"
)


def _record_changes(conn: Connection) -> bool:
    """Make sure the writer's triggers record what this transaction changes (once the
    messages table exists); whether they do."""
    if conn.exec_driver_sql(_TRIGGERS_THERE).scalar_one() == len(_TOUCH_TRIGGERS):
        return True
    if conn.exec_driver_sql(
        "SELECT count(*) FROM main.sqlite_master WHERE type = 'table' AND name = 'messages'"
    ).scalar_one() == 0:
        return False
    for statement in _RECORDING:
        conn.exec_driver_sql(statement)
    return True


def _take_changes(conn: Connection) -> dict[int, int] | None:
    """What the transaction changed, ``{session: lowest position}`` (and forgotten for
    the next one); None when the triggers went away meanwhile (a schema change)."""
    if conn.exec_driver_sql(_TRIGGERS_THERE).scalar_one() != len(_TOUCH_TRIGGERS):
        return None
    touched = {int(sid): int(low) for sid, low in
               conn.exec_driver_sql("SELECT session_id, low FROM wb_touched")}
    if touched:
        conn.exec_driver_sql("DELETE FROM wb_touched")
    return touched


def page_cache_kib(memory: int | None = None) -> int:
    """The page cache of each connection, in KiB: the pool's connections together may
    keep 1/64 of the machine's memory, at most 64 MiB (16 MiB each), at least 2 MiB each.

    Every connection has a cache of its own, filled by what it reads and kept while the
    connection lives; with a fixed 64 MiB each, a window whose reads spread over its
    connections grew by tens of MB per long session opened. The operating system keeps
    the file in its own cache as well, so a page read again from there costs a copy.
    """
    if memory is None:
        try:
            memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, ValueError, OSError):
            memory = 4 << 30  # unknown (Windows): as for a 4 GiB machine
    budget = min(64 << 20, max(8 << 20, memory // 64))
    return max(2048, budget // POOL_SIZE // 1024)


PAGE_CACHE_KIB = page_cache_kib()

OpenProgress = Callable[[str, int, int], object]
"""Told what opening a database is doing: ``(sentence, steps done, steps in all)``,
before the backup and before each schema change of an existing file (on the thread
that opens it)."""


_URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
POSTGRESQL_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")


# A PostgreSQL scheme with a colon but not the two slashes (``postgresql:team``, or
# ``postgresql:/wb@host/db`` as ``Path`` folds a URL): a URL mistyped, never a file name.
_POSTGRESQL_MISTYPED = re.compile(r"^(postgresql\+psycopg|postgresql|postgres):(?!//)", re.I)


def is_database_url(where: str | Path | None) -> bool:
    """Whether ``where`` is a URL (``scheme://...``, or a PostgreSQL one mistyped)
    rather than a file path."""
    return where is not None and bool(
        _URL_SCHEME.match(str(where)) or _POSTGRESQL_MISTYPED.match(str(where))
    )


def refuse_url(where: str | Path) -> None:
    """A database URL is never taken for a file path, and only PostgreSQL's is known.

    ``Path`` would fold ``postgresql://wb@host/db`` into ``postgresql:/wb@host/db`` and
    SQLite would create that file in the current folder; a URL of another database
    (``mysql://...``) is refused with a sentence instead.
    """
    text = str(where)
    mistyped = _POSTGRESQL_MISTYPED.match(text)
    if mistyped:
        # Not echoed: what follows the scheme may hold a password.
        raise StorageError(
            f"The database given starts with '{mistyped.group(0)}' but is not a URL the "
            "workbench can open: write it as postgresql://user@host:port/database (it was "
            "not taken for a file name)."
        )
    if _URL_SCHEME.match(text):
        scheme = text.split("://", 1)[0]
        if scheme.lower() in POSTGRESQL_SCHEMES:
            return
        raise StorageError(
            f"'{scheme}://…' is a database URL the workbench does not know: it keeps its "
            "sessions in a SQLite file (give its path) or on a PostgreSQL server (give a "
            "postgresql://user@host/database URL)."
        )


def default_db_path() -> Path:
    """Where the database lives unless told otherwise.

    ``WORKBENCH_DB`` names the file; else ``WORKBENCH_HOME`` names the folder; else the
    platform's user data folder (``~/.local/share/conversation-workbench`` on Linux).
    """
    explicit = os.environ.get("WORKBENCH_DB")
    if explicit and not is_database_url(explicit):
        return Path(explicit).expanduser()
    home = os.environ.get("WORKBENCH_HOME")
    if home:
        return Path(home).expanduser() / DB_FILENAME
    from platformdirs import user_data_dir

    return Path(user_data_dir(APP_NAME, appauthor=False)) / DB_FILENAME


def default_location() -> Path | str:
    """The database to open when none is named: ``WORKBENCH_DB`` when it is a
    ``postgresql://`` URL, else the file of :func:`default_db_path`."""
    explicit = os.environ.get("WORKBENCH_DB")
    if explicit and is_database_url(explicit):
        refuse_url(explicit)
        return explicit
    return default_db_path()


def _check_file(path: Path) -> bool:
    """Refuse a file that is not SQLite before SQLite touches it; True if it has data."""
    if path.is_dir():
        raise StorageError(f"{path} is a folder, not a database file.")
    if not path.exists():
        return False
    if not path.is_file():
        # SQLite would open /dev/null and write its journal beside it, in /dev.
        raise StorageError(
            f"{path} is not a file (a device, a pipe or a socket), so it cannot hold a "
            "database; it was left untouched."
        )
    try:
        with path.open("rb") as fh:
            header = fh.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StorageError(f"Cannot read the database file {path}: {exc.strerror}.") from exc
    if not header:
        return False
    if header != SQLITE_HEADER:
        raise StorageError(
            f"{path} is not a SQLite database (it may be damaged or another kind of file); "
            "it was left untouched."
        )
    return True


def _on_connect(dbapi_conn: sqlite3.Connection, _record: Any) -> None:
    # Autocommit at the driver level: the store says BEGIN itself (see module doc).
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    cur.execute("PRAGMA foreign_keys = ON")
    cur.execute("PRAGMA synchronous = NORMAL")
    cur.execute(f"PRAGMA cache_size = -{PAGE_CACHE_KIB}")
    cur.execute("PRAGMA temp_store = MEMORY")
    cur.close()
    # The session filter's case folding for text beyond ASCII (Dialect.contains_text).
    dbapi_conn.create_function("wb_fold", 1, sqlite_fold, deterministic=True)


class Database:
    """One SQLite file, migrated to the current schema and ready for the repository.

    :func:`workbench.store.opening.open_database` given a ``postgresql://`` URL returns
    the team store's :class:`~workbench.store.db_postgresql.PostgresDatabase` instead, with the same
    transactions (:meth:`write`, :meth:`read`, :meth:`query`) and change counter
    (:meth:`data_version`).
    """

    dialect: Dialect = SQLITE_DIALECT

    def __init__(self, path: Path, engine: Engine):
        self.path = path
        self.engine = engine
        self._write_lock = threading.RLock()
        self._writes = 0  # write transactions this process committed
        self._watch: Connection | None = None  # kept for data_version (see below)
        self._watch_lock = threading.Lock()
        # The connection every write goes through (see change_mark), a new one after a
        # failed write; each new one starts an epoch of its own.
        self._writer: Connection | None = None
        self._writer_epoch = 0
        self._writing = False
        self._close_writer = False  # closed while a write was under way
        # What the last commits changed: (commit number, {session: lowest position} or
        # None when not recorded).
        self._changes: deque[tuple[int, dict[int, int] | None]] = deque(maxlen=CHANGES_KEPT)

    # -- opening -----------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path | str | None = None, *, migrate: bool = True,
             progress: OpenProgress | None = None) -> Database:
        """Open (creating if needed) and migrate the database at ``path``.

        A file from a newer workbench raises :class:`DatabaseVersionError`; a file that is
        not a workbench database raises :class:`StorageError`. Neither is changed.
        Before an existing file is migrated, a backup copy is written beside it;
        ``progress`` hears of the backup and of each schema change.
        """
        target = path if path is not None else default_db_path()
        if is_database_url(target):
            refuse_url(target)  # another database's URL: its own sentence
            raise StorageError(
                f"{target!r} is a team store's address, not a file: it is opened with "
                "workbench.store.opening.open_database."
            )
        path = Path(target).expanduser()
        existed = _check_file(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"Cannot create the folder {path.parent}: {exc.strerror}.") from exc
        engine = create_engine(
            f"sqlite:///{path}",
            poolclass=QueuePool,
            pool_size=POOL_SIZE,
            max_overflow=POOL_OVERFLOW,
            connect_args={"check_same_thread": False, "timeout": BUSY_TIMEOUT_MS / 1000},
        )
        event.listen(engine, "connect", _on_connect)
        db = cls(path, engine)
        try:
            db._prepare(existed, migrate, progress)
        except BaseException:
            engine.dispose()
            raise
        return db

    @property
    def location(self) -> str:
        """What sentences and titles call this database: the file's path (a server's
        URL, without its password, for the team store)."""
        return str(self.path)

    @property
    def is_file(self) -> bool:
        """Whether this is a database file (backups, file dialogs) rather than a server."""
        return True

    def changed(self, conn: Connection, session_ids: Iterable[int]) -> None:
        """Tell the write transaction of ``conn`` which sessions it changes, for other
        desktops to refresh (the team store sends them when it commits; a SQLite file
        needs no word: other processes see ``data_version`` move)."""

    def _prepare(self, existed: bool, migrate: bool, progress: OpenProgress | None) -> None:
        try:
            with self.engine.connect() as conn:
                tables = {
                    row[0]
                    for row in conn.exec_driver_sql(
                        "SELECT name FROM sqlite_master WHERE type = 'table'"
                    )
                }
                applied: list[str] = []
                if "schema_migrations" in tables:
                    applied = [
                        r[0] for r in conn.exec_driver_sql("SELECT name FROM schema_migrations")
                    ]
                conn.rollback()
        except DBAPIError as exc:
            if not os.access(self.path.parent, os.W_OK):
                # SQLite writes its journal beside the file: a read-only folder (or
                # file system) stops even reading, and says no more than "unable to open".
                raise StorageError(
                    f"Cannot open {self.path} as a database: its folder is read-only, and "
                    f"SQLite needs to write its journal beside the file ({exc.orig}). Copy "
                    "the file to a folder you can write to; it was left untouched."
                ) from exc
            raise StorageError(
                f"Cannot open {self.path} as a database: {exc.orig}. "
                "The file may be damaged; it was left untouched."
            ) from exc
        user_tables = {t for t in tables if not t.startswith("sqlite_")}
        if user_tables and "schema_migrations" not in user_tables:
            raise StorageError(
                f"{self.path} is a SQLite database but not a Conversation Workbench one "
                f"(it has tables {', '.join(sorted(user_tables)[:5])}); it was left untouched."
            )
        refuse_newer(applied, str(self.path), "file")
        # Only now, with the file known to be ours (or new), switch it to WAL: the
        # pragma rewrites the header, and a refused file must stay byte for byte.
        with self.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA journal_mode = WAL")
            conn.rollback()
        pending = [m for m in MIGRATIONS if m.name not in applied]
        if not pending:
            return
        if not migrate:
            raise StorageError(f"{self.path} needs schema changes: {pending[0].name} and on.")
        # A change that is PostgreSQL's only is just recorded here: no copy for it.
        backup = existed and bool(applied) and any(m.statements for m in pending)
        steps = len(pending) + backup
        name = self.path.name
        if backup:
            if progress is not None:
                progress(f"Backing up {name} before updating it…", 0, steps)
            self.backup(self._backup_path())
        for number, migration in enumerate(pending, start=1):
            if progress is not None and applied:  # a new file is made too fast to tell
                progress(f"Updating {name} to this version of the workbench ({number} of "
                         f"{len(pending)})…", number - 1 + backup, steps)
            self._apply(migration)

    def _backup_path(self) -> Path:
        stamp = utcnow().strftime("%Y%m%dT%H%M%S")
        return self.path.with_name(f"{self.path.stem}.backup-{stamp}{self.path.suffix}")

    def backup(self, target: Path) -> Path:
        """Copy the whole database to ``target`` with SQLite's online backup."""
        src = sqlite3.connect(str(self.path))
        try:
            dst = sqlite3.connect(str(target))
            try:
                src.backup(dst)
            finally:
                dst.close()
        finally:
            src.close()
        return target

    def _apply(self, migration: Migration) -> None:
        try:
            with self.write() as conn:
                conn.exec_driver_sql(
                    "CREATE TABLE IF NOT EXISTS schema_migrations "
                    "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
                )
                for statement in migration.statements:
                    conn.exec_driver_sql(statement)
                conn.exec_driver_sql(
                    "INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)",
                    (migration.name, time_to_text(utcnow())),
                )
        except StorageError as exc:
            cause = exc.__cause__
            reason = getattr(cause, "orig", None) or exc
            raise StorageError(
                f"Schema change {migration.name} failed on {self.path}: {reason}; "
                "nothing of it was applied."
            ) from exc

    def applied_migrations(self) -> list[tuple[str, datetime]]:
        """Names of the applied migrations with their times, oldest first."""
        from workbench.store.types import text_to_time

        with self.engine.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT name, applied_at FROM schema_migrations ORDER BY applied_at, name"
            ).all()
        return [(r[0], text_to_time(r[1])) for r in rows]

    # -- transactions ------------------------------------------------------------------

    @contextmanager
    def write(self, *, shown: bool = True) -> Iterator[Connection]:
        """A connection inside ``BEGIN IMMEDIATE``; commits on success, else rolls back.

        Every write of this process goes through one connection kept for them (see
        :meth:`change_mark`). Errors from SQLite come out as :class:`StorageError`
        sentences. ``shown=False`` is for a change no view shows (the summary lines the
        background upkeep keeps): it is left out of :attr:`local_writes` and of what
        :meth:`message_changes` tells, so a window that sees the file change while only
        such writes were made takes it for another process's change, as it may be.
        """
        with self._write_lock, self._translated():
            conn = self._writer_connection()
            self._writing = True
            try:
                with self._dropped_on_failure():
                    conn.exec_driver_sql("BEGIN IMMEDIATE")
                    recording = _record_changes(conn)
                try:
                    yield conn
                    touched = _take_changes(conn) if recording else None
                except BaseException:
                    with self._dropped_on_failure():
                        conn.rollback()
                    raise
                with self._dropped_on_failure():
                    conn.commit()
            finally:
                self._writing = False
                if self._close_writer:
                    self._close_writer = False
                    self._drop_writer()
            if shown:
                self._writes += 1
                self._changes.append((self._writes, touched))

    def _writer_connection(self) -> Connection:
        """The connection this process writes through (held with the write lock)."""
        if self._writer is None:
            self._writer = self.engine.connect()
            self._writer_epoch += 1
        return self._writer

    @contextmanager
    def _dropped_on_failure(self) -> Iterator[None]:
        """The writer connection is closed when this fails: it is not kept in a state
        nobody checked (the next write opens another)."""
        try:
            yield
        except BaseException:
            self._drop_writer()
            raise

    def _drop_writer(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - it is being thrown away
                pass

    def change_mark(self) -> ChangeMark | None:
        """Where the database stands, for :meth:`message_changes` to tell later what
        changed since; None when the write lock is busy (a long write: nothing known).

        It counts this process's commits and reads ``PRAGMA data_version`` on the
        connection this process writes through, which moves only when *another*
        connection commits (another process: this one writes through that one only).
        """
        if not self._write_lock.acquire(blocking=False):
            return None
        if self._writing:  # asked from inside a write of this thread
            self._write_lock.release()
            return None
        try:
            with self._translated():
                conn = self._writer_connection()
                try:
                    outside = int(conn.exec_driver_sql("PRAGMA data_version").scalar_one())
                finally:
                    conn.rollback()
            return ChangeMark(self._writer_epoch, outside, self._writes)
        except BaseException:
            self._drop_writer()
            raise
        finally:
            self._write_lock.release()

    def message_changes(self, since: ChangeMark, until: ChangeMark, session_id: int
                        ) -> int | None:
        """The lowest position at which session ``session_id``'s messages changed
        between the two marks (:data:`UNCHANGED` when none did), from what this
        process's commits recorded; None when that cannot be told: another process
        committed meanwhile, a commit's changes were not recorded, or the record no
        longer reaches back that far."""
        if since.epoch != until.epoch or since.outside != until.outside \
                or until.writes < since.writes:
            return None
        if until.writes == since.writes:
            return UNCHANGED
        entries = [entry for entry in list(self._changes)
                   if since.writes < entry[0] <= until.writes]
        if len(entries) != until.writes - since.writes:
            return None
        lowest = UNCHANGED
        for _number, touched in entries:
            if touched is None:
                return None
            lowest = min(lowest, touched.get(session_id, UNCHANGED))
        return lowest

    @property
    def local_writes(self) -> int:
        """How many write transactions this process has committed (any thread)."""
        return self._writes

    def data_version(self) -> int:
        """SQLite's ``PRAGMA data_version`` on a connection kept for it: the number
        changes whenever any other connection, in this process or another, commits.
        Cheap enough to ask on a timer; :attr:`local_writes` tells this process's
        own commits apart."""
        with self._watch_lock, self._translated():
            if self._watch is None:
                self._watch = self.engine.connect()
            return int(self._watch.exec_driver_sql("PRAGMA data_version").scalar_one())

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection inside a read transaction: one consistent snapshot."""
        with self._translated(), self.engine.connect() as conn:
            conn.exec_driver_sql("BEGIN")
            try:
                yield conn
            finally:
                conn.rollback()

    @contextmanager
    def query(self) -> Iterator[Connection]:
        """A connection for a single-statement read: no explicit transaction around it
        (one statement is its own snapshot), which saves two round trips."""
        with self._translated(), self.engine.connect() as conn:
            yield conn

    @contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except DBAPIError as exc:
            reason = str(exc.orig).rstrip(".")
            if isinstance(exc.orig, sqlite3.DatabaseError) and (
                "malformed" in reason or "not a database" in reason
            ):
                raise StorageError(
                    f"The database {self.path} is damaged ({reason}); nothing was changed. "
                    "Restore it from a backup copy beside it, or open another database."
                ) from exc
            if isinstance(exc.orig, sqlite3.OperationalError) and "locked" in reason:
                raise DatabaseUnavailableError(
                    f"The database {self.path} is busy: another program kept it locked for "
                    f"{BUSY_TIMEOUT_MS / 1000:g} s ({reason}); nothing was changed. Try again "
                    "once it is done."
                ) from exc
            if "readonly" in reason or "read-only" in reason:
                raise DatabaseUnavailableError(
                    f"The database {self.path} cannot be written: the file or its folder is "
                    f"read-only ({reason}); nothing was changed."
                ) from exc
            if isinstance(exc.orig, sqlite3.OperationalError) and (
                "disk is full" in reason or "disk I/O error" in reason
            ):
                raise DatabaseUnavailableError(
                    f"The database {self.path} cannot be written: {reason} (is the disk "
                    "full or failing?); nothing was changed."
                ) from exc
            raise StorageError(f"The database {self.path} refused the change: {reason}.") from exc

    def settle(self) -> None:
        """After a bulk change (an import, the counting pass after one): bring what the
        store keeps about its tables up to date, in the background. SQLite needs nothing:
        its planner goes by the indexes, and a page read needs no visibility check. The
        team store vacuums and analyzes (see ``PostgresDatabase.settle``)."""

    def close(self) -> None:
        """Close every pooled connection."""
        with self._watch_lock:
            if self._watch is not None:
                self._watch.close()
                self._watch = None
        # The writer too, unless a write is under way (on another thread): that one
        # closes it when it ends.
        if self._write_lock.acquire(blocking=False):
            try:
                self._drop_writer()
            finally:
                self._write_lock.release()
        else:
            self._close_writer = True
        self.engine.dispose()


