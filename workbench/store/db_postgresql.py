"""The team store: the same database on a PostgreSQL server (SPEC §10).

:meth:`PostgresDatabase.open_url` connects to a ``postgresql://user@host/database`` URL,
brings the database to the current schema (:mod:`workbench.store.migrate_postgresql`) and
offers the transactions of :class:`~workbench.store.db.Database`:

- :meth:`write` takes a transaction-level advisory lock first, so the writers of every
  desktop take turns as SQLite's ``BEGIN IMMEDIATE`` makes a file's writers do: a
  change that reads (a position, a count) and then writes never interleaves with
  another's. At its end the transaction names the sessions it changed with
  ``pg_notify`` (:mod:`workbench.store.notify_postgresql`); PostgreSQL delivers that
  only if it commits.
- :meth:`read` is one ``REPEATABLE READ`` snapshot; :meth:`query` a single statement.
- :meth:`data_version` counts the changes other desktops made, heard by a
  :class:`~workbench.store.notify_postgresql.ChangeListener` on a thread of its own.
- After a bulk import commits, the words it added to the messages' search index are
  merged into the index on a thread of its own (:class:`SearchIndexMerger`), while the
  importer goes on with its next batch.

The password never comes from the workbench's settings: the URL may carry one (it is
kept in memory only and never shown), else the OS keyring entry
``conversation-workbench-postgresql`` / ``user@host:port/database`` is asked, else libpq
finds it itself in ``PGPASSWORD`` or ``~/.pgpass``.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    DisconnectionError,
    OperationalError,
    SQLAlchemyError,
)

from workbench.errors import StorageError, StoreUnreachableError
from workbench.store.db import POOL_OVERFLOW, POOL_SIZE, Database, OpenProgress
from workbench.store.dialect import (
    ICU_ROOT,
    POSTGRESQL_DIALECT,
    POSTGRESQL_ICU_DIALECT,
    Dialect,
)
from workbench.store.migrate_postgresql import migrate_postgresql
from workbench.store.migrations import MIGRATIONS
from workbench.store.notify_postgresql import ChangeListener, new_origin, notify

KEYRING_SERVICE = "conversation-workbench-postgresql"
# The advisory lock every workbench writing to a database holds until its transaction
# ends (any constant, the same in every version: the ASCII of "cwbwrite").
WRITE_LOCK = 0x637762777269
_CHANGED = "workbench_changed_sessions"
# Set in a write transaction's connection info by the bulk import when the words of its
# rows went to the search index's pending list, to be merged after the commit.
MERGE_SEARCH_INDEX = "workbench_merge_search_index"
# The tables a bulk import writes whose GIN indexes it leaves pending words in (their
# indexes belong to the tables' owner, who alone may merge them by hand).
IMPORTED_TABLES = ("messages", "sessions")
_MERGE_PENDING = text(
    "SELECT gin_clean_pending_list(i.indexrelid) FROM pg_index i"
    " JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam"
    " WHERE a.amname = 'gin'"
    " AND i.indrelid IN (SELECT to_regclass(t) FROM unnest(CAST(:tables AS text[])) t)"
)
# What an import (or the counting pass after it) writes in bulk: after it, the planner's
# statistics and the visibility map are brought up to date (SearchIndexMerger.settle).
SETTLED_TABLES = ("messages", "message_calls", "orphan_results", "sessions")
_SETTLE = text(
    "VACUUM (ANALYZE, SKIP_LOCKED) " + ", ".join(SETTLED_TABLES)
)
CONNECT_TIMEOUT_S = 10
# A pooled connection idle this long is asked whether it still works before it is used
# (the server may have restarted, or a firewall dropped it); a busier one is not: the
# question is a round trip, as long as the statement it would precede.
PING_AFTER_IDLE_S = 20.0
_IDLE_SINCE = "workbench_idle_since"


def _ping_after_idle(engine: Engine) -> None:
    """Check a connection taken from ``engine``'s pool only when it sat idle for
    :data:`PING_AFTER_IDLE_S` (SQLAlchemy's ``pool_pre_ping`` asks before every use). A
    dead one is replaced by a new connection; should a connection die between two close
    uses, the statement fails with the reason and the pool is renewed for the next."""

    def checked_in(_dbapi_conn: Any, record: Any) -> None:
        record.info[_IDLE_SINCE] = time.monotonic()

    def checked_out(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        since = record.info.pop(_IDLE_SINCE, None)
        if since is None or time.monotonic() - since < PING_AFTER_IDLE_S:
            return
        try:
            alive = engine.dialect.do_ping(dbapi_conn)
        except Exception:  # noqa: BLE001 - any failure means the same: not usable
            alive = False
        if not alive:
            raise DisconnectionError("the server closed the idle connection")

    event.listen(engine.pool, "checkin", checked_in)
    event.listen(engine.pool, "checkout", checked_out)


def keyring_account(url: URL) -> str:
    """The keyring account name of a server database: ``user@host:port/database``."""
    return f"{url.username or ''}@{url.host or 'localhost'}:{url.port or 5432}/{url.database or ''}"


def _password_from_keyring(url: URL) -> str | None:
    try:
        import keyring
        from keyring.errors import KeyringError
    except ImportError:  # pragma: no cover - keyring is a dependency
        return None
    try:
        return keyring.get_password(KEYRING_SERVICE, keyring_account(url))
    except (KeyringError, RuntimeError, OSError):
        return None  # no usable backend: libpq's own sources remain


def server_url(url: str) -> URL:
    """The SQLAlchemy URL of a ``postgresql://`` address, with the psycopg driver."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise StorageError(f"{url!r} is not a database URL the workbench can read.") from exc
    if not parsed.database:
        raise StorageError(
            "The database URL names no database: write postgresql://user@host/database."
        )
    return parsed.set(drivername="postgresql+psycopg")


def shown_url(url: URL) -> str:
    """The URL as shown to people: its password never printed."""
    return url.set(drivername="postgresql").render_as_string(hide_password=True)


class PostgresDatabase(Database):
    """One database on a PostgreSQL server, migrated and ready for the repository."""

    dialect: Dialect = POSTGRESQL_DIALECT

    def __init__(self, url: URL, engine: Engine):
        super().__init__(Path(), engine)
        self.url = url
        self.origin = new_origin()
        self._listener: ChangeListener | None = None
        self._listener_lock = threading.Lock()
        self._merger = SearchIndexMerger(engine)
        # Outages of the server, as the statements see them: one begins with a failure
        # to reach it and ends when a statement begun after that failure gets an answer.
        self._outage_lock = threading.Lock()
        self._outages = 0
        self._outage_since: float | None = None  # when the current one began

    @classmethod
    def open_url(cls, url: str, *, migrate: bool = True,
                 progress: OpenProgress | None = None) -> PostgresDatabase:
        """Connect to the database at ``url`` and bring it to the current schema."""
        parsed = server_url(url)
        if parsed.password is None:
            password = _password_from_keyring(parsed)
            if password:
                parsed = parsed.set(password=password)
        engine = create_engine(
            parsed,
            pool_size=POOL_SIZE,
            max_overflow=POOL_OVERFLOW,
            connect_args={"connect_timeout": CONNECT_TIMEOUT_S,
                          "application_name": "conversation-workbench"},
        )
        _ping_after_idle(engine)
        db = cls(parsed, engine)
        try:
            db._prepare_server(migrate, progress)
        except BaseException:
            engine.dispose()
            raise
        return db

    def _prepare_server(self, migrate: bool, progress: OpenProgress | None) -> None:
        where = self.location
        try:
            with self.engine.connect() as conn:
                has_ledger = conn.execute(
                    text("SELECT to_regclass('schema_migrations') IS NOT NULL")
                ).scalar_one()
                applied = (
                    {r[0] for r in conn.execute(text("SELECT name FROM schema_migrations"))}
                    if has_ledger else set()
                )
                tables = conn.execute(text(
                    "SELECT count(*) FROM information_schema.tables "
                    "WHERE table_schema = current_schema()"
                )).scalar_one()
                has_icu = conn.execute(
                    text("SELECT EXISTS (SELECT 1 FROM pg_collation WHERE collname = :name)"),
                    {"name": ICU_ROOT},
                ).scalar_one()
        except (SQLAlchemyError, self.engine.dialect.loaded_dbapi.Error) as exc:
            raise StorageError(f"Cannot open the database {where}: {_reason(exc)}.") from exc
        if has_icu:
            self.dialect = POSTGRESQL_ICU_DIALECT
        if tables and not has_ledger:
            raise StorageError(
                f"{where} has tables but is not a Conversation Workbench database; "
                "it was left untouched."
            )
        pending = [m for m in MIGRATIONS if m.name not in applied]
        if not pending:
            return
        if not migrate:
            raise StorageError(f"{where} needs schema changes: {pending[0].name} and on.")
        if progress is not None and applied:
            progress(f"Updating {where} to this version of the workbench…", 0, 1)
        migrate_postgresql(self.engine)

    # -- what it is --------------------------------------------------------------------

    @property
    def location(self) -> str:
        return shown_url(self.url)

    @property
    def is_file(self) -> bool:
        return False

    def backup(self, target: Path) -> Path:
        raise StorageError(
            f"{self.location} is on a server: its administrator backs it up (pg_dump)."
        )

    # -- transactions ------------------------------------------------------------------

    @contextmanager
    def write(self, *, shown: bool = True) -> Iterator[Connection]:
        """A transaction holding the store's write lock; commits on success (sending the
        change notice with it), else rolls back. ``shown=False`` is for a change no view
        shows (the summary lines the background upkeep keeps): no notice is sent, and it
        is left out of :attr:`local_writes`."""
        with self._write_lock, self._translated(), self.engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": WRITE_LOCK})
            changed: set[int] = set()
            conn.info[_CHANGED] = changed
            try:
                yield conn
                if shown:
                    notify(conn, self.origin, changed)
            except BaseException:
                conn.info.pop(_CHANGED, None)
                conn.info.pop(MERGE_SEARCH_INDEX, None)
                conn.rollback()
                raise
            conn.info.pop(_CHANGED, None)
            merge = conn.info.pop(MERGE_SEARCH_INDEX, False)
            conn.commit()
            if shown:
                self._writes += 1
        if merge:
            self._merger.request()

    def changed(self, conn: Connection, session_ids: Iterable[int]) -> None:
        changed = conn.info.get(_CHANGED)
        if changed is not None:
            changed.update(int(s) for s in session_ids)

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """One snapshot for every statement: the driver opens the transaction with
        ``BEGIN ISOLATION LEVEL REPEATABLE READ`` (no round trip of its own to say so)."""
        with self._translated(), self.engine.connect() as conn:
            conn.execution_options(isolation_level="REPEATABLE READ")
            try:
                yield conn
            finally:
                conn.rollback()

    @contextmanager
    def query(self) -> Iterator[Connection]:
        """A single statement, in autocommit: it is its own snapshot, and neither
        ``BEGIN`` nor ``ROLLBACK`` costs a round trip."""
        with self._translated(), self.engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT")
            yield conn

    def _renew_pool(self) -> None:
        """The listener lost the server: start a new pool, so that the next reads and
        writes connect afresh instead of failing once on a dropped connection (those
        in use finish as they can and are closed when given back)."""
        self.engine.dispose(close=False)

    def listener(self) -> ChangeListener:
        """The listener hearing other desktops' changes (started on first use)."""
        with self._listener_lock:
            if self._listener is None:
                conninfo = self.url.set(drivername="postgresql").render_as_string(
                    hide_password=False
                )
                self._listener = ChangeListener(conninfo, self.origin,
                                                on_lost=self._renew_pool).start()
            return self._listener

    def data_version(self) -> int:
        """How many changes other desktops made (and reconnections, after which what
        was missed is read again) since this database was opened."""
        return self.listener().version

    @contextmanager
    def _translated(self) -> Iterator[None]:
        begun = time.monotonic()
        try:
            yield
        except DBAPIError as exc:
            if _unreachable(exc):
                raise StoreUnreachableError(
                    f"The team database {self.location} cannot be reached right now "
                    f"({_reason(exc, hint=False)}). The workbench connects again by itself "
                    "once the server answers: try again then.",
                    outage=(self.location, self._unreached()),
                ) from exc
            self._answered(begun)
            raise StorageError(
                f"The database {self.location} refused the change: {_reason(exc)}."
            ) from exc
        self._answered(begun)

    def _unreached(self) -> int:
        """A statement could not reach the server: the number of the outage it is part
        of (a new one unless one is already under way)."""
        with self._outage_lock:
            if self._outage_since is None:
                self._outages += 1
                self._outage_since = time.monotonic()
            return self._outages

    def _answered(self, begun: float) -> None:
        """The server answered a statement begun at ``begun``: an outage that began
        before it is over (one that was under way when it began is not proven over:
        its connection may predate the outage)."""
        if self._outage_since is None:
            return
        with self._outage_lock:
            if self._outage_since is not None and begun >= self._outage_since:
                self._outage_since = None

    @property
    def search_index_merger(self) -> SearchIndexMerger:
        """What merges the words bulk imports left pending (see :class:`SearchIndexMerger`)."""
        return self._merger

    def close(self) -> None:
        with self._listener_lock:
            if self._listener is not None:
                self._listener.stop()
                self._listener = None
        self._merger.stop()
        super().close()

    def settle(self) -> None:
        """After a bulk change: vacuum and analyze the tables it wrote, on the merger's
        thread (see :meth:`SearchIndexMerger.settle`)."""
        self._merger.settle()


class SearchIndexMerger:
    """Merges the pending words of the messages' search index (and of every other GIN
    index of the tables an import writes) into the index, on a thread of its own, after
    a bulk import committed (see :mod:`workbench.store.bulk`).

    A GIN index first appends the words of new rows to a pending list, and whoever
    inserts when the list is over ``gin_pending_list_limit`` merges it into the index:
    for an import, more than half its time. An import raises the limit for its own
    transaction, so its rows only append, and asks this merger to run
    ``gin_clean_pending_list`` once it committed: the merge, which would have taken the
    same time inside the import, overlaps the next batch. Searches find the pending
    words too (a little slower, for the second or two until they are merged).
    Requests made while a merge runs are served by one more merge.

    After a whole import (and after the counting pass that follows one), :meth:`settle`
    also has it run ``VACUUM (ANALYZE)`` over the tables an import writes. Until
    autovacuum comes by (which it may not for long: a 100,000-message import into a
    store of a million is under its thresholds) the planner does not know the new rows,
    and no page holding them is marked all-visible, so every index-only scan of a new
    session reads its rows from the heap: the preflight of a just imported
    100,000-message session took 373 ms, 25 ms once settled (about 0.35 s of work here,
    on this thread). A member who does not own the tables gets a warning from the
    server and nothing done: autovacuum still comes by.
    """

    def __init__(self, engine: Engine):
        self._engine = engine
        self._wake = threading.Condition()
        self._due = False
        self._settle_due = False
        self._busy = False
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.merges = 0
        self.settles = 0
        self.last_error: str | None = None

    def request(self) -> None:
        """Merge the pending list soon (on the merger's thread, started on first use)."""
        self._ask(settle=False)

    def settle(self) -> None:
        """Merge the pending list, then vacuum and analyze :data:`SETTLED_TABLES`, soon
        (on the merger's thread)."""
        self._ask(settle=True)

    def _ask(self, *, settle: bool) -> None:
        with self._wake:
            if self._stopping:
                return
            self._due = True
            self._settle_due = self._settle_due or settle
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="search-index-merge", daemon=True
                )
                self._thread.start()
            self._wake.notify()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no merge is asked for or running; False when ``timeout`` passed."""
        with self._wake:
            return self._wake.wait_for(lambda: not self._due and not self._busy, timeout)

    def _run(self) -> None:
        while True:
            with self._wake:
                self._wake.wait_for(lambda: self._due or self._stopping)
                if self._stopping:
                    return
                self._due = False
                settle, self._settle_due = self._settle_due, False
                self._busy = True
            try:
                self._merge()
                if settle:
                    self._settle()
            finally:
                with self._wake:
                    self._busy = False
                    self._wake.notify_all()

    def _merge(self) -> None:
        try:
            with self._engine.connect() as conn:
                conn.execution_options(isolation_level="AUTOCOMMIT")
                conn.execute(_MERGE_PENDING, {"tables": list(IMPORTED_TABLES)}).all()
            self.merges += 1
            self.last_error = None
        except (SQLAlchemyError, DBAPIError) as exc:
            # The next import's own inserts merge what is left (or autovacuum does).
            self.last_error = _reason(exc)

    def _settle(self) -> None:
        try:
            with self._engine.connect() as conn:
                conn.execution_options(isolation_level="AUTOCOMMIT")  # VACUUM needs it
                conn.execute(_SETTLE)
            self.settles += 1
        except (SQLAlchemyError, DBAPIError) as exc:
            # Autovacuum does it later.
            self.last_error = _reason(exc)

    def stop(self) -> None:
        """Let a merge under way finish, and end the thread."""
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()


# SQLSTATEs of a lost or refused connection: class 08, and the server shutting down or
# starting up (57P01-57P03). A failure to connect carries none (libpq says it).
_CONNECTION_STATES = ("08", "57P01", "57P02", "57P03")


def _unreachable(exc: DBAPIError) -> bool:
    """Whether ``exc`` says the server could not be reached (not that it refused)."""
    if exc.connection_invalidated:
        return True
    if not isinstance(exc, OperationalError):
        return False
    state = getattr(exc.orig, "sqlstate", None)
    return state is None or str(state).startswith(_CONNECTION_STATES)


def _reason(exc: BaseException, *, hint: bool = True) -> str:
    """A driver error's own sentence, without SQLAlchemy's wrapping or a trailing dot;
    libpq's usual failures to connect are said in plain words (:func:`plain_reason`)."""
    orig: Any = getattr(exc, "orig", None) or exc
    return plain_reason(
        (str(orig).strip().splitlines() or [type(orig).__name__])[0].rstrip("."), hint=hint)


_AT_SERVER = re.compile(
    r'^(?:connection failed: )?connection to server at "(?P<host>[^"]*)"(?: \([^)]*\))?, '
    r"port (?P<port>\d+) failed: (?P<why>.*)$")
_SOCKET = re.compile(
    r'^(?:connection failed: )?connection to server on socket "[^"]*" failed: (?P<why>.*)$')
_KEEP_PASSWORD = "the password given, the one in the system keyring, PGPASSWORD or ~/.pgpass"


def plain_reason(text: str, *, hint: bool = True) -> str:
    """libpq's words for a failed connection as a person reads them: the password
    refused, none given, no such database, nothing listening, an unknown host, no
    answer in time, with what to check in brackets (left out without ``hint``). Other
    text is returned as it is (without libpq's ``FATAL:``)."""
    said = _plain_reason(text)
    return said if hint else re.sub(r" \([^()]*\)$", "", said)


def _plain_reason(text: str) -> str:
    host = port = ""
    found = _AT_SERVER.match(text) or _SOCKET.match(text)
    if found is not None:
        why = found.group("why")
        if "host" in found.groupdict():
            host, port = found.group("host"), found.group("port")
    else:
        why = text
    why = re.sub(r"^(?:FATAL|ERROR):\s+", "", why.strip())
    where = f"{host} port {port}" if host else "the server"
    said = re.match(r'password authentication failed for user "(?P<user>[^"]*)"', why)
    if said:
        return (f'the server refused the password for user "{said.group("user")}" (check '
                f"{_KEEP_PASSWORD}, and the user name)")
    if "no password supplied" in why:
        return ("the server asks for a password and none was given (type it, or keep "
                "it in the system keyring, PGPASSWORD or ~/.pgpass)")
    said = re.match(r'database "(?P<name>[^"]*)" does not exist', why)
    if said:
        return (f'{where} has no database "{said.group("name")}" (check the name, or '
                f"create it with createdb {said.group('name')})")
    if why.startswith("Connection refused"):
        return (f"nothing answers at {where} (check that PostgreSQL runs there and "
                "listens on that port)")
    said = re.match(r"failed to resolve host '(?P<name>[^']*)'", why)
    if said:
        return f'the host name "{said.group("name")}" is not known (check how it is spelt)'
    if "timeout expired" in why:
        return f"{where} did not answer in time"
    if found is not None:
        return f"the connection to {where} failed: {why}"
    return why
