"""0004_import_identity: sessions imported before it are recognised by their content."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.core.conversation import Conversation, Message
from workbench.store import Database, Repository
from workbench.store import db as db_module
from workbench.store.migrations import MIGRATIONS


def _conversation(*texts: str) -> Conversation:
    return Conversation(
        title="old import",
        messages=[Message(role="user", content=t) for t in texts],
        source="sharegpt",
        source_id="identity_0",
    )


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
