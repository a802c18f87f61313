"""Opening the database a path or an address names: a SQLite file, or a team store on a
PostgreSQL server (``postgresql://user@host/database``)."""

from __future__ import annotations

from pathlib import Path

from workbench.store.db import Database, OpenProgress, default_location, is_database_url, refuse_url
from workbench.store.db_postgresql import PostgresDatabase

__all__ = ["open_database"]


def open_database(target: Path | str | None = None, *, migrate: bool = True,
                  progress: OpenProgress | None = None) -> Database:
    """Open (creating if needed) and migrate the database ``target`` names; None: the
    default (``WORKBENCH_DB``, which may be an address, else the file in the workbench's
    home)."""
    where = target if target is not None else default_location()
    if is_database_url(where):
        refuse_url(where)
        return PostgresDatabase.open_url(str(where), migrate=migrate, progress=progress)
    return Database.open(where, migrate=migrate, progress=progress)
