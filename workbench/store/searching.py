"""Search, on whichever backend the database is: SQLite's FTS5 tables
(:mod:`workbench.store.search`) or the team store's tsvector columns
(:mod:`workbench.store.search_postgresql`), with one query language and one kind of hit."""

from __future__ import annotations

from workbench.core.conversation import SearchHit
from workbench.store.db import Database
from workbench.store.search import KINDS, SearchQuery, search_sqlite
from workbench.store.search_postgresql import search_team_store

__all__ = ["KINDS", "SearchQuery", "search"]


def search(db: Database, query: SearchQuery) -> list[SearchHit]:
    """Run a search; hits of every requested kind, best first (higher score = better)."""
    if db.dialect.is_postgresql:
        return search_team_store(db, query)
    return search_sqlite(db, query)
