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

The password never comes from the workbench's settings: the URL may carry one (it is
kept in memory only and never shown), else the OS keyring entry
``conversation-workbench-postgresql`` / ``user@host:port/database`` is asked, else libpq
finds it itself in ``PGPASSWORD`` or ``~/.pgpass``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, DisconnectionError, SQLAlchemyError

from workbench.errors import StorageError
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
    def write(self) -> Iterator[Connection]:
        """A transaction holding the store's write lock; commits on success (sending the
        change notice with it), else rolls back."""
        with self._write_lock, self._translated(), self.engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": WRITE_LOCK})
            changed: set[int] = set()
            conn.info[_CHANGED] = changed
            try:
                yield conn
                notify(conn, self.origin, changed)
            except BaseException:
                conn.info.pop(_CHANGED, None)
                conn.rollback()
                raise
            conn.info.pop(_CHANGED, None)
            conn.commit()
            self._writes += 1

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
        try:
            yield
        except DBAPIError as exc:
            raise StorageError(
                f"The database {self.location} refused the change: {_reason(exc)}."
            ) from exc

    def close(self) -> None:
        with self._listener_lock:
            if self._listener is not None:
                self._listener.stop()
                self._listener = None
        super().close()


def _reason(exc: BaseException) -> str:
    """A driver error's own sentence, without SQLAlchemy's wrapping or a trailing dot."""
    orig: Any = getattr(exc, "orig", None) or exc
    return (str(orig).strip().splitlines() or [type(orig).__name__])[0].rstrip(".")
