"""Bringing a PostgreSQL database (the team store, SPEC §10) to the current schema.

The same ordered :data:`~workbench.store.migrations.MIGRATIONS` as SQLite, with each
entry's PostgreSQL statements. Several desktops may start at once against one server:
every migration runs in one transaction that first takes a transaction-level advisory
lock (``pg_advisory_xact_lock``), then reads which migrations are applied, so exactly
one of them applies each change and the others find it done when they get the lock.
A database that has a migration this version does not know (written by a newer
workbench) is refused and left untouched.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from workbench.core.conversation import utcnow
from workbench.errors import DatabaseVersionError, StorageError
from workbench.store.migrations import MIGRATIONS, Migration, refuse_newer
from workbench.store.types import time_to_text

# The advisory lock every workbench migrating a database takes (any constant, the same
# in every version: the ASCII of "cwbmigr").
MIGRATION_LOCK = 0x6377626D696772

_CREATE_LEDGER = (
    "CREATE TABLE IF NOT EXISTS schema_migrations "
    "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
)


def _applied(conn: Connection) -> list[str]:
    return [row[0] for row in conn.execute(text("SELECT name FROM schema_migrations"))]


def _apply_one(engine: Engine, migration: Migration, where: str) -> bool:
    """Apply ``migration`` unless another process did; True when this call applied it."""
    with engine.begin() as conn:
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
        conn.execute(text(_CREATE_LEDGER))
        applied = _applied(conn)
        refuse_newer(applied, where)
        if migration.name in applied:
            return False
        # Through the driver's cursor without parameters: the statements are DDL that may
        # hold a literal % (format() in a DO block), never a placeholder.
        cursor = conn.connection.cursor()
        try:
            for statement in migration.statements_for("postgresql"):
                cursor.execute(statement)
        finally:
            cursor.close()
        conn.execute(
            text("INSERT INTO schema_migrations (name, applied_at) VALUES (:name, :at)"),
            {"name": migration.name, "at": time_to_text(utcnow())},
        )
        return True


def migrate_postgresql(engine: Engine) -> list[str]:
    """Apply every pending migration to the PostgreSQL database of ``engine``.

    Returns the names this call applied (empty when the database was current or another
    process migrated it meanwhile). Raises :class:`DatabaseVersionError` for a database
    of a newer version and :class:`StorageError` when a change fails (that change is
    rolled back whole; the ones before it stay).
    """
    where = engine.url.render_as_string(hide_password=True)
    done: list[str] = []
    for migration in MIGRATIONS:
        try:
            if _apply_one(engine, migration, where):
                done.append(migration.name)
        except DatabaseVersionError:
            raise
        except (SQLAlchemyError, engine.dialect.loaded_dbapi.Error) as exc:
            reason = getattr(exc, "orig", None) or exc
            raise StorageError(
                f"Schema change {migration.name} failed on {where}: {reason}; "
                "nothing of it was applied."
            ) from exc
    return done
