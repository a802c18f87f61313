"""0002_pausable_index_triggers: a database written at 0001 upgrades with its data intact."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from workbench.core.conversation import Conversation, Message, utcnow
from workbench.store import Database, Repository
from workbench.store import db as db_module
from workbench.store.migrations import FTS_PAUSE_SETTING, MIGRATIONS
from workbench.store.rows import MESSAGE_INSERT, message_params
from workbench.store.searching import SearchQuery, search


def _hits(db: Database, text: str, kind: str = "message") -> list[int]:
    return sorted(h.session_id for h in search(db, SearchQuery(text, kinds=(kind,), limit=100)))


def _integrity_check(db: Database) -> None:
    with db.write() as conn:
        for fts in ("messages_fts", "sessions_fts"):
            conn.exec_driver_sql(f"INSERT INTO {fts}({fts}, rank) VALUES ('integrity-check', 1)")


def _triggers(path: Path) -> dict[str, str]:
    conn = sqlite3.connect(str(path))
    try:
        return dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"))
    finally:
        conn.close()


def test_a_database_with_data_from_0001_upgrades(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert [m.name for m in MIGRATIONS][:2] == ["0001_initial", "0002_pausable_index_triggers"]
    with monkeypatch.context() as patch:
        patch.setattr(db_module, "MIGRATIONS", MIGRATIONS[:1])
        old = Database.open(db_path)
        repo = Repository(old)
        # Written the way 0001 indexes: the triggers, row by row.
        before = repo.create_session("Walrus planning")
        # Row by row with the columns 0001 has (later migrations add some).
        now = utcnow()
        with old.write() as conn:
            conn.exec_driver_sql(
                MESSAGE_INSERT,
                [
                    message_params(Message(role="user", content="walrus tusks"), before.id, 0, now),
                    message_params(Message(role="assistant", content="ok"), before.id, 1, now),
                ],
            )
        old.close()
    assert "WHEN" not in _triggers(db_path)["messages_fts_insert"].upper()

    db = Database.open(db_path)
    try:
        assert [n for n, _ in db.applied_migrations()] == [m.name for m in MIGRATIONS]
        triggers = _triggers(db_path)
        for name in ("messages_fts_insert", "sessions_fts_insert"):
            assert FTS_PAUSE_SETTING in triggers[name]
        repo = Repository(db)
        assert [m.content for m in repo.list_messages(before.id)] == ["walrus tusks", "ok"]
        assert _hits(db, "walrus") == [before.id]
        assert _hits(db, "walrus", "session") == [before.id]

        # Both ways of writing index once each: the bulk path and the triggers.
        (bulk,) = repo.import_many(
            [
                Conversation(
                    title="Walrus census",
                    messages=[Message(role="user", content="walrus count")],
                    source="test",
                    source_id="census",
                )
            ]
        )
        later = repo.create_session("Walrus diet")
        repo.append_message(later.id, Message(role="user", content="walrus clams"))
        expected = sorted([before.id, bulk.session.id, later.id])
        assert _hits(db, "walrus") == expected
        assert _hits(db, "walrus", "session") == expected
        assert repo.get_setting(FTS_PAUSE_SETTING) is None
        _integrity_check(db)
    finally:
        db.close()
    # The upgrade was backed up first, as every upgrade of a file with data is.
    backups = [p for p in db_path.parent.iterdir() if ".backup-" in p.name]
    assert len(backups) == 1
