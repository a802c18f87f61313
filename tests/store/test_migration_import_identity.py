"""0004_import_identity: sessions imported before it are recognised by their content."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import update

from workbench.core.conversation import Conversation, Message
from workbench.store import Database, Repository
from workbench.store import db as db_module
from workbench.store.migrations import MIGRATIONS
from workbench.store.schema import SESSIONS


def _conversation(*texts: str) -> Conversation:
    return Conversation(
        title="old import",
        messages=[Message(role="user", content=t) for t in texts],
        source="sharegpt",
        source_id="identity_0",
    )


@pytest.mark.sqlite_only("migrates a SQLite file written at schema 0003")
def test_a_session_imported_at_0003_is_matched_by_content_after_the_upgrade(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert MIGRATIONS[3].name == "0004_import_identity"
    with monkeypatch.context() as patch:
        patch.setattr(db_module, "MIGRATIONS", MIGRATIONS[:3])
        old = Database.open(db_path)
        repo = Repository(old)
        agent_id = repo.default_agent().id
        with old.write() as conn:
            session_id = repo._insert_session(  # the 0003 columns only
                conn, "old import", agent_id, [], "sharegpt", "identity_0",
                None, None, None,
            )
            repo._insert_messages(conn, session_id, 0, _conversation("hello").messages)
        old.close()

    db = Database.open(db_path)
    try:
        repo = Repository(db)
        same = repo.import_conversation(_conversation("hello"))
        other = repo.import_conversation(_conversation("a different dataset"))
        grown = repo.import_conversation(_conversation("hello", "and more"))
    finally:
        db.close()

    assert (same.status, same.session.id) == ("unchanged", session_id)
    assert other.status == "created" and other.reused_id and other.session.id != session_id
    assert (grown.status, grown.session.id) == ("updated", session_id)
    assert grown.session.message_count == 2


def test_a_session_without_a_kept_fingerprint_is_fingerprinted_when_an_import_meets_it(
    repo: Repository,
) -> None:
    # What a session imported before 0004 looks like on either backend: no fingerprint.
    session_id = repo.import_conversation(_conversation("hello")).session.id
    with repo.db.write() as conn:
        conn.execute(
            update(SESSIONS).where(SESSIONS.c.id == session_id)
            .values(fingerprint=None, fingerprint_count=None)
        )
    same = repo.import_conversation(_conversation("hello"))
    assert (same.status, same.session.id) == ("unchanged", session_id)
    grown = repo.import_many([_conversation("hello", "and more")])[0]
    assert (grown.status, grown.session.id) == ("updated", session_id)
    assert grown.session.message_count == 2
