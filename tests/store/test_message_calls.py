"""0007_message_calls: the tool calls of assistant messages, one row each, kept in step
with the messages by triggers (and by the bulk import), so preflight tells orphaned tool
results by index lookups."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from workbench.core.assembly import REASON_EXCLUDED_SYSTEM, REASON_ORPHAN_RESULT, call_ids
from workbench.core.conversation import Conversation, Message
from workbench.store import Database, Repository
from workbench.store import db as db_module
from workbench.store.migrations import MIGRATIONS
from workbench.store.opening import open_database


def _call(cid: Any) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": "look", "arguments": "{}"}}


def _messages() -> list[Message]:
    return [
        Message(role="system", content="Be brief."),
        Message(role="assistant", content="", tool_calls=[_call("a1")]),
        Message(role="tool", content="one", tool_call_id="a1"),
        Message(role="assistant", content="two at once", tool_calls=[_call("b1"), _call("b2")]),
        Message(role="tool", content="b2 first", tool_call_id="b2"),
        Message(role="tool", content="lost", tool_call_id="nowhere"),
        Message(role="assistant", content="odd calls", tool_calls=[_call(7), "text", {}]),
        Message(role="assistant", content="an object", tool_calls={"id": "x"}),  # type: ignore[arg-type]
        Message(role="user", content="thanks"),
    ]


def _expected(db: Database) -> list[tuple[Any, ...]]:
    """What message_calls should hold, worked out from the messages through call_ids."""
    with db.read() as conn:
        rows = conn.exec_driver_sql(
            "SELECT id, session_id, position, state, tool_calls FROM messages"
            " WHERE role = 'assistant' AND tool_calls IS NOT NULL"
        ).all()
    out: list[tuple[Any, ...]] = []
    for mid, session_id, position, state, text in rows:
        place = (mid, session_id, position, state)
        try:
            value = json.loads(text)
        except ValueError:
            out.append((*place, None))
            continue
        if not value:
            continue
        if isinstance(value, dict):  # an object: one call without an id per member
            out += [(*place, "") for _ in value]
            continue
        msg = Message(role="assistant", content="", tool_calls=value)
        out += [(*place, cid) for cid in call_ids(msg)]
    return sorted(out, key=repr)


def _listed(db: Database) -> list[tuple[Any, ...]]:
    with db.read() as conn:
        return sorted(
            (tuple(r) for r in conn.exec_driver_sql(
                "SELECT message_id, session_id, position, state, call_id FROM message_calls")),
            key=repr,
        )


def _set_calls(db: Database, where: str, calls: str, **params: Any) -> None:
    """Write a message's tool calls as raw text (behind the store's back)."""
    with db.write() as conn:
        conn.execute(sa.text(f"UPDATE messages SET tool_calls = :calls WHERE {where}"),
                     {"calls": calls, **params})


def test_calls_are_listed_by_every_way_messages_are_written_and_changed(db: Database) -> None:
    repo = Repository(db)
    # The bulk import (triggers paused, one statement per batch) and appending.
    (imported,) = repo.import_many([Conversation(title="bulk", messages=_messages())])
    appended = repo.create_session(title="appended")
    stored = repo.append_messages(appended.id, _messages())
    assert _listed(db) == _expected(db)
    assert len(_listed(db)) == 2 * (1 + 2 + 3 + 1)

    first_call = stored[1]
    repo.update_message(first_call.id, tool_calls=[_call("a1"), _call("a9")])
    repo.update_message(stored[3].id, role="user")  # no longer an assistant message
    repo.update_message(stored[8].id, role="assistant", tool_calls=[_call("late")])
    repo.set_state([first_call.id, stored[6].id], "folded")
    repo.insert_message(appended.id, 1, Message(role="assistant", content="in between",
                                                tool_calls=[_call("mid")]))
    repo.delete_message(stored[7].id)
    assert _listed(db) == _expected(db)
    # Raw SQL too: a call list that is not JSON.
    _set_calls(db, "id = :mid", "not json", mid=first_call.id)
    assert (first_call.id, appended.id, 2, "folded", None) in _listed(db)
    assert _listed(db) == _expected(db)
    repo.delete_session(imported.session.id)
    assert _listed(db) == _expected(db)
    assert {r[1] for r in _listed(db)} == {appended.id}


@pytest.mark.sqlite_only("an older SQLite file, looked into with sqlite3")
def test_the_migration_lists_the_calls_of_messages_written_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "old.db"
    names = [m.name for m in MIGRATIONS]
    at = names.index("0007_message_calls")
    with monkeypatch.context() as patch:
        patch.setattr(db_module, "MIGRATIONS", MIGRATIONS[:at])
        old = Database.open(path)
        repo = Repository(old)
        for title in ("one", "two"):
            session = repo.create_session(title=title)
            repo.append_messages(session.id, _messages())
        with old.write() as conn:
            conn.exec_driver_sql(
                "UPDATE messages SET tool_calls = '[{' WHERE content = 'odd calls'")
        old.close()
    raw = sqlite3.connect(path)
    assert not raw.execute(
        "SELECT 1 FROM sqlite_master WHERE name = 'message_calls'").fetchall()
    raw.close()

    db = Database.open(path)
    try:
        listed = _listed(db)
        assert listed == _expected(db)
        assert sum(1 for r in listed if r[4] is None) == 2  # the calls that are not JSON
        with db.read() as conn:
            indexes = {r[0] for r in conn.exec_driver_sql(
                "SELECT name FROM sqlite_master WHERE type = 'index'")}
            # 0014 replaced 0007's index of tool results with one by call id.
            assert {"ix_message_calls_lookup", "ix_messages_results_by_call"} <= indexes
    finally:
        db.close()


def test_the_postgresql_migration_lists_the_calls_of_messages_written_before(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0008_message_calls_postgresql: the triggers, and the calls of the messages a team
    store held before (0007 made the table there without filling it)."""
    from workbench.store import migrate_postgresql as migrate_module
    from workbench.store.rows import MESSAGE_INSERT_ROWS, message_values
    from workbench.store.schema import AGENTS, SESSIONS

    names = [m.name for m in MIGRATIONS]
    at = names.index("0008_message_calls_postgresql")
    engine = sa.create_engine(pg_url)
    try:
        with monkeypatch.context() as patch:
            patch.setattr(migrate_module, "MIGRATIONS", MIGRATIONS[:at])
            migrate_module.migrate_postgresql(engine)
        now = datetime(2025, 1, 1, tzinfo=UTC)
        text = "2025-01-01T00:00:00.000000+00:00"
        with engine.begin() as conn:
            agent = conn.execute(sa.insert(AGENTS).values(
                name="A", instructions="", created_at=text, updated_at=text,
            ).returning(AGENTS.c.id)).scalar_one()
            for title in ("one", "two"):
                session = conn.execute(sa.insert(SESSIONS).values(
                    agent_id=agent, title=title, created_at=text, updated_at=text,
                ).returning(SESSIONS.c.id)).scalar_one()
                conn.execute(MESSAGE_INSERT_ROWS, [
                    message_values(m, session, i, now) for i, m in enumerate(_messages())
                ])
            conn.execute(sa.text(
                "UPDATE messages SET tool_calls = '[{' WHERE content = 'odd calls'"))
            assert conn.execute(sa.text("SELECT count(*) FROM message_calls")).scalar() == 0
    finally:
        engine.dispose()

    db = open_database(pg_url)
    try:
        listed = _listed(db)
        assert listed == _expected(db)
        assert sum(1 for r in listed if r[4] is None) == 2  # the calls that are not JSON
        assert len(listed) == 2 * (1 + 2 + 1 + 1)  # a1; b1, b2; not JSON; the object
    finally:
        db.close()


def test_orphans_are_told_from_the_listed_calls_and_unreadable_calls_say_so(
    db: Database,
) -> None:
    repo = Repository(db)
    (outcome,) = repo.import_many([Conversation(title="bulk", messages=_messages())])
    sid = outcome.session.id
    found = repo.prefix_exceptions(sid, state="active", after_position=-1, last_position=8,
                                   exclude_system=True, asked=["b1", "a1", "zz"])
    assert found is not None
    rows, issued = found
    by_position = {position: reason for _, position, reason in rows}
    assert by_position == {0: REASON_EXCLUDED_SYSTEM, 5: REASON_ORPHAN_RESULT}
    assert issued == {"a1", "b1"}
    # A stretch starting after a1's call: its result is an orphan there.
    rows, _ = repo.prefix_exceptions(sid, state="active", after_position=1, last_position=8,
                                     exclude_system=False) or ([], set())
    assert [position for _, position, _ in rows] == [2, 5]
    _set_calls(db, "session_id = :sid AND position = 6", "not json", sid=sid)
    assert repo.prefix_exceptions(sid, state="active", after_position=-1, last_position=8,
                                  exclude_system=True) is None
    assert repo.prefix_exceptions(sid, state="active", after_position=-1, last_position=5,
                                  exclude_system=True) is not None


def test_the_postgresql_import_lists_the_calls_as_the_server_function_does(
    pg_url: str,
) -> None:
    """0013: a bulk import on the team store lists its messages' calls itself; the rows
    are those the server's workbench_list_message_calls makes of the same texts, also
    for the texts it leaves to that function (escapes, a member twice, NaN)."""
    from workbench.store.bulk import listed_calls

    odd: list[Any] = [
        [_call("a1"), _call("a2")], [], [_call(7), "text", {}, None, 3], {"id": "x", "y": 1},
        [_call("quote\"back\\slash/ü")], [_call("ctrl\x01")], [_call(float("nan"))],
        "", 0, False, 0.0, -0.0, "text",
        [[_call("nested")]], {"id": {"deeper": "z"}}, [_call("")], 1, True, None,
    ]
    messages = [Message(role="assistant", content=f"calls {i}", tool_calls=value)
                for i, value in enumerate(odd)]
    messages.append(Message(role="user", content="no calls", tool_calls=[_call("u1")]))
    db = open_database(pg_url)
    try:
        Repository(db).import_many([Conversation(title="odd", messages=messages)])
        listed = _listed(db)
        with db.write() as conn:
            conn.exec_driver_sql("DELETE FROM message_calls")
            conn.exec_driver_sql(
                "SELECT workbench_list_message_calls(id, session_id, position, state,"
                " tool_calls) FROM messages WHERE role = 'assistant'"
                " AND tool_calls IS NOT NULL ORDER BY id").all()
        by_server = _listed(db)
        with db.read() as conn:
            texts = conn.exec_driver_sql(
                "SELECT tool_calls FROM messages WHERE role = 'assistant'"
                " AND tool_calls IS NOT NULL").scalars().all()
    finally:
        db.close()
    assert listed == by_server
    assert len(listed) > 10
    # Some were listed here and some left to the server: both ways were taken.
    assert any(listed_calls(t) is None for t in texts)
    assert sum(listed_calls(t) not in (None, []) for t in texts) >= 5
    assert listed_calls('[{"id":"a","id":"b"}]') is None  # a member twice
    assert listed_calls('[{"id":"a"},{"id":1},{}] ') == ["a", "", ""]
    assert listed_calls("[{") is None and listed_calls("0.0") == []
