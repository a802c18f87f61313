"""0014_orphan_results: the tool results whose call is missing, kept by triggers on both
backends under every way messages are written, moved, folded and removed, so preflight
reads the orphans of a left-out stretch instead of testing each of its tool results."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

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
        Message(role="tool", content="before any call", tool_call_id="a1"),
        Message(role="assistant", content="", tool_calls=[_call("a1")]),
        Message(role="tool", content="one", tool_call_id="a1"),
        Message(role="assistant", content="two", tool_calls=[_call("b1"), _call(None)]),
        Message(role="tool", content="b1", tool_call_id="b1"),
        Message(role="tool", content="no id, answered by the call without one"),
        Message(role="tool", content="lost", tool_call_id="nowhere"),
        Message(role="user", content="thanks"),
    ]


def _listed(db: Database) -> list[tuple[Any, ...]]:
    with db.read() as conn:
        return sorted(tuple(r) for r in conn.exec_driver_sql(
            "SELECT message_id, session_id, position, state, call_id FROM orphan_results"))


def _expected(db: Database) -> list[tuple[Any, ...]]:
    """The orphans worked out in Python: an active tool result is one when no active call
    of its session, with its call id, is listed at an earlier position (the calls as
    message_calls lists them, which test_message_calls checks against the messages)."""
    with db.read() as conn:
        results = conn.exec_driver_sql(
            "SELECT id, session_id, position, state, tool_call_id FROM messages"
            " WHERE role = 'tool'").all()
        calls = conn.exec_driver_sql(
            "SELECT session_id, state, call_id, position FROM message_calls"
            " WHERE call_id IS NOT NULL").all()
    earliest: dict[tuple[Any, ...], int] = {}
    for sid, state, cid, position in calls:
        key = (sid, state, cid)
        earliest[key] = min(position, earliest.get(key, position))
    out = []
    for mid, sid, position, state, cid in results:
        if state != "active":  # the only state kept: what requests carry
            continue
        first = earliest.get((sid, state, cid or ""))
        if first is None or first >= position:
            out.append((mid, sid, position, state, cid or ""))
    return sorted(out)


def _check(db: Database) -> list[tuple[Any, ...]]:
    listed = _listed(db)
    assert listed == _expected(db)
    return listed


def test_orphans_are_kept_by_every_way_messages_are_written_and_changed(db: Database) -> None:
    repo = Repository(db)
    # A call id only the server reads exactly (an escape): a team store's import leaves
    # that session's orphans to the server.
    odd = [Message(role="tool", content="early", tool_call_id="ctrl\x01"),
           Message(role="assistant", content="", tool_calls=[_call("ctrl\x01")]),
           Message(role="tool", content="answered", tool_call_id="ctrl\x01")]
    (imported, odd_one) = repo.import_many([Conversation(title="bulk", messages=_messages()),
                                            Conversation(title="odd", messages=odd)])
    session = repo.create_session(title="appended")
    stored = repo.append_messages(session.id, _messages())
    listed = _check(db)
    # In each session: the result before any call, and the one whose call is nowhere.
    assert sorted((r[1], r[2]) for r in listed) == sorted(
        [(s, p) for s in (imported.session.id, session.id) for p in (1, 7)]
        + [(odd_one.session.id, 0)])

    repo.update_message(stored[7].id, tool_call_id="b1")  # answered now
    repo.update_message(stored[5].id, tool_call_id="zz")  # an orphan now
    _check(db)
    repo.update_message(stored[2].id, tool_calls=[_call("zz")])  # a1's results lose it
    _check(db)
    repo.update_message(stored[4].id, role="user")  # its calls go, b1 and '' lose them
    _check(db)
    repo.update_message(stored[8].id, role="tool", tool_call_id="a1")
    repo.set_state([stored[2].id], "folded")  # the call folded without its result
    _check(db)
    repo.set_state([stored[3].id], "folded")  # and now its result too
    _check(db)
    repo.insert_message(session.id, 1, Message(role="assistant", content="in between",
                                               tool_calls=[_call("a1"), _call("nowhere")]))
    _check(db)
    repo.delete_message(stored[2].id)
    _check(db)
    with db.write() as conn:  # a call list that is not JSON lists no call id
        conn.exec_driver_sql(
            "UPDATE messages SET tool_calls = 'not json' WHERE content = 'in between'")
    _check(db)
    removed, _ = repo.replace_messages(session.id, [stored[1].id],
                                       [Message(role="tool", content="x", tool_call_id="a1")])
    assert removed
    _check(db)
    fork = repo.fork_session(imported.session.id, 5)
    assert any(r[1] == fork.id for r in _check(db))
    repo.delete_session(imported.session.id)
    assert {r[1] for r in _check(db)} <= {session.id, fork.id, odd_one.session.id}


def test_orphans_stay_right_under_random_edits(db: Database) -> None:
    """Seeded random moves, folds, edits, inserts and deletes; the list is checked after
    each against the answer worked out from scratch."""
    repo = Repository(db)
    chance = random.Random(14)
    session = repo.create_session(title="random")
    ids = ["a", "b", "c"]
    start = []
    for i in range(30):
        if i % 3 == 0:
            start.append(Message(role="assistant", content=f"m{i}",
                                 tool_calls=[_call(chance.choice(ids))]))
        else:
            start.append(Message(role="tool", content=f"m{i}", tool_call_id=chance.choice(ids)))
    repo.append_messages(session.id, start)
    _check(db)
    for step in range(60):
        messages = repo.list_messages(session.id, states=None)
        target = chance.choice(messages)
        action = chance.choice(["fold", "unfold", "call", "result", "insert", "delete",
                                "role"])
        if action == "fold":
            repo.set_state([target.id], "folded")
        elif action == "unfold":
            repo.set_state([target.id], "active")
        elif action == "call" and target.role == "assistant":
            repo.update_message(target.id, tool_calls=[_call(chance.choice(ids))
                                                      for _ in range(chance.randint(0, 2))])
        elif action == "result" and target.role == "tool":
            repo.update_message(target.id, tool_call_id=chance.choice([*ids, None]))
        elif action == "insert":
            repo.insert_message(session.id, chance.randrange(len(messages)), Message(
                role="assistant", content=f"new {step}", tool_calls=[_call(chance.choice(ids))]))
        elif action == "delete" and len(messages) > 5:
            repo.delete_message(target.id)
        elif action == "role":
            if target.role == "tool":
                repo.update_message(target.id, role="user")
            else:
                repo.update_message(target.id, role="tool", tool_call_id=chance.choice(ids))
        assert _listed(db) == _expected(db), f"step {step}: {action} of {target.id}"


def _written_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, migration: str) -> Path:
    """A SQLite file migrated up to just before ``migration``, with one session of
    :func:`_messages` written by the store of that time."""
    path = tmp_path / "old.db"
    at = [m.name for m in MIGRATIONS].index(migration)
    with monkeypatch.context() as patch:
        patch.setattr(db_module, "MIGRATIONS", MIGRATIONS[:at])
        old = Database.open(path)
        Repository(old).append_messages(Repository(old).create_session(title="old").id,
                                        _messages())
        old.close()
    return path


@pytest.mark.sqlite_only("an older SQLite file, looked into with sqlite3")
def test_the_migration_lists_the_orphans_of_messages_written_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _written_before(tmp_path, monkeypatch, "0014_orphan_results")
    raw = sqlite3.connect(path)
    assert not raw.execute(
        "SELECT 1 FROM sqlite_master WHERE name = 'orphan_results'").fetchall()
    raw.close()
    db = Database.open(path)
    try:
        assert [r[2] for r in _check(db)] == [1, 7]
    finally:
        db.close()


def test_the_postgresql_migration_lists_the_orphans_of_messages_written_before(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workbench.store import migrate_postgresql as migrate_module

    names = [m.name for m in MIGRATIONS]
    at = names.index("0014_orphan_results")
    with monkeypatch.context() as patch:
        patch.setattr(migrate_module, "MIGRATIONS", MIGRATIONS[:at])
        old = open_database(pg_url)
        repo = Repository(old)
        for title in ("one", "two"):
            repo.append_messages(repo.create_session(title=title).id, _messages())
        with old.read() as conn:
            assert not conn.exec_driver_sql(
                "SELECT 1 FROM information_schema.tables"
                " WHERE table_name = 'orphan_results'").all()
        old.close()
    db = open_database(pg_url)
    try:
        assert sorted(r[2] for r in _check(db)) == [1, 1, 7, 7]
    finally:
        db.close()


def _calls(db: Database) -> list[tuple[Any, ...]]:
    with db.read() as conn:
        return sorted(tuple(r) for r in conn.exec_driver_sql(
            "SELECT message_id, session_id, position, state, call_id FROM message_calls"
            " WHERE call_id IS NOT NULL"))


def _calls_expected(db: Database) -> list[tuple[Any, ...]]:
    """Each listed call where its message is now (its place taken from the message)."""
    with db.read() as conn:
        return sorted(tuple(r) for r in conn.exec_driver_sql(
            "SELECT c.message_id, m.session_id, m.position, m.state, c.call_id"
            " FROM message_calls c JOIN messages m ON m.id = c.message_id"
            " WHERE c.call_id IS NOT NULL"))


def test_a_compaction_and_its_undo_keep_the_calls_and_orphans_in_step(db: Database) -> None:
    """0015: the fold holds the calls' trigger back and moves them in one statement."""
    from workbench.core.compaction import CompactionPolicy, ExtractiveSummarizer, plan_compaction
    from workbench.core.conversation import SessionContext, utcnow
    from workbench.store.compactions import apply_plan, load_table, undo_compaction

    repo = Repository(db)
    session = repo.create_session(title="folds")
    repo.append_messages(session.id, _messages() * 3)
    before_calls, before_orphans = _calls(db), _check(db)
    plan = plan_compaction(
        load_table(db, session.id, None), SessionContext(), policy=CompactionPolicy(),
        summarizer=ExtractiveSummarizer(), request_tokens=lambda summary, history: 0,
        now=utcnow(), keep=4, session_id=session.id)
    assert plan.folded_count
    apply_plan(db, plan)
    calls = _calls(db)
    assert calls == _calls_expected(db)
    assert {row[3] for row in calls} == {"folded", "active"}  # some folded, some not
    _check(db)
    undo_compaction(db, session.id)
    assert _calls(db) == _calls_expected(db) == before_calls
    assert _check(db) == before_orphans


def test_a_message_put_in_or_taken_out_moves_the_calls_and_orphans_after_it(
    db: Database,
) -> None:
    """The later messages move by one with the calls' and orphans' triggers held back
    (0015); the side lists move in one statement each and stay what triggers make."""
    repo = Repository(db)
    session = repo.create_session(title="moves")
    other = repo.create_session(title="untouched")
    stored = repo.append_messages(session.id, _messages() * 2)
    repo.append_messages(other.id, _messages())
    untouched = [row for row in _calls(db) if row[1] == other.id]
    for at in (0, 1, 5, len(stored)):
        added = repo.insert_message(session.id, at, Message(role="user", content="in"))
        assert _calls(db) == _calls_expected(db)
        _check(db)
        repo.delete_message(added.id)
        assert _calls(db) == _calls_expected(db)
        _check(db)
    # A call put in before an orphan answers it; taken out, the orphan is one again.
    orphans = _check(db)
    answer = repo.insert_message(session.id, 0, Message(
        role="assistant", content="", tool_calls=[_call("a1"), _call("nowhere")]))
    assert len(_check(db)) < len(orphans)
    repo.delete_message(answer.id)
    assert _check(db) == orphans
    assert [row for row in _calls(db) if row[1] == other.id] == untouched
    with db.read() as conn:  # the pause is lifted
        assert not conn.exec_driver_sql(
            "SELECT 1 FROM settings WHERE key = 'orphans_paused'").all()


def test_the_calls_place_trigger_stands_aside_while_paused(db: Database) -> None:
    """0015 on both backends: under the pause a moved tool-call message leaves its call
    where it was (the write that paused moves it); without, the trigger moves it."""
    repo = Repository(db)
    session = repo.create_session(title="paused")
    stored = repo.append_messages(session.id, _messages())
    call = stored[2]
    pause = ("SELECT set_config('workbench.orphans_paused', 'on', true)"
             if db.dialect.is_postgresql else
             "INSERT INTO settings (key, value) VALUES ('orphans_paused', 'true')")
    move = f"UPDATE messages SET position = position + 100 WHERE id = {call.id}"
    place = f"SELECT position FROM message_calls WHERE message_id = {call.id}"
    with db.write() as conn:
        conn.exec_driver_sql(pause)
        conn.exec_driver_sql(move)
        paused = conn.exec_driver_sql(place).scalar_one()
        conn.rollback()
    with db.write() as conn:
        conn.exec_driver_sql(move)
        moved = conn.exec_driver_sql(place).scalar_one()
        conn.rollback()
    assert (paused, moved) == (call.position, call.position + 100)


@pytest.mark.sqlite_only("an older SQLite file, looked into with sqlite3")
def test_a_database_of_0014_gets_the_pausable_calls_trigger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _written_before(tmp_path, monkeypatch, "0015_calls_place_pausable")
    raw = sqlite3.connect(path)
    (before,) = raw.execute(
        "SELECT sql FROM sqlite_master WHERE name = 'message_calls_place'").fetchone()
    raw.close()
    assert "orphans_paused" not in before
    db = Database.open(path)
    try:
        repo = Repository(db)
        (session,) = repo.list_sessions()
        repo.insert_message(session.id, 0, Message(role="user", content="first"))
        assert _calls(db) == _calls_expected(db)
        assert [r[2] for r in _check(db)] == [2, 8]  # the two orphans moved by one
        with db.read() as conn:
            (after,) = conn.exec_driver_sql(
                "SELECT sql FROM sqlite_master WHERE name = 'message_calls_place'").one()
        assert "orphans_paused" in after
    finally:
        db.close()
