"""SQLite storage: tables, migrations, the repository and full-text search."""

from workbench.store.db import Database, default_db_path
from workbench.store.repository import ImportOutcome, Repository

__all__ = ["Database", "ImportOutcome", "Repository", "default_db_path"]
