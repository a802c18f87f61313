"""The summary line each message keeps (0003_summary_lines): written with its token count,
filled by the counting pass, forgotten when what it is made of changes."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from workbench.core.conversation import Conversation, Message
from workbench.core.summarizers import line_cache
from workbench.core.tokens import fill_counts, get_counter
from workbench.store import Database, Repository
from workbench.store import db as db_module
from workbench.store.migrations import MIGRATIONS
from workbench.store.rows import MESSAGE_INSERT, message_params

COUNTER = get_counter()
CL100K = get_counter("cl100k_base")


def call(cid: str, name: str = "search") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}


def _messages() -> list[Message]:
    return [
        Message("system", "You are a booking agent who answers in short sentences."),
        Message("user", "I want to fly from Porto to Lisbon on Friday morning, window seat."),
        Message("assistant", "", tool_calls=[call("c1")]),
        Message("tool", "3 flights found between 7:00 and 11:00", tool_call_id="c1",
                name="search"),
        Message("assistant", "Found 3 flights.\n\nThe first   leaves at 7:00."),
        Message("user", "   "),
        Message("user", "naïve café 🎉 " * 10),
    ]


def _kept(db: Database, session_id: int) -> list[tuple[Any, ...]]:
    with db.read() as conn:
        return [
            tuple(r)
            for r in conn.execute(
                sa.text("SELECT id, summary_line, summary_line_tokens, token_encoding"
                        " FROM messages WHERE session_id = :sid ORDER BY position"),
                {"sid": session_id},
            )
        ]


def _expected(messages: list[Message], counter: Any) -> list[tuple[str, int]]:
    """The line and count of each message, counted in ``counter``'s encoding."""
    counted = [m.copy() for m in messages]
    for m in counted:
        m.token_count, m.token_encoding = m.token_count or 0, counter.encoding_name
    bodies, tokens = line_cache(counted)
    return list(zip(bodies, tokens, strict=True))


def test_appended_messages_keep_their_line_and_its_count(repo: Repository) -> None:
    messages = _messages()
    fill_counts(messages, COUNTER)
    info = repo.create_session("lines")
    stored = repo.append_messages(info.id, messages)
    kept = _kept(repo.db, info.id)
    assert [(r[1], r[2]) for r in kept] == _expected(stored, COUNTER)
    assert kept[2][1] == "[called search]"
    assert kept[3][1].startswith("search → 3 flights")
    assert kept[5][1] == "(empty)"
    for _, body, tokens, _ in kept:
        assert tokens == COUNTER.count_text(f" {body}\n")


def test_without_a_count_the_line_is_kept_and_the_counting_pass_counts_it(
    repo: Repository,
) -> None:
    info = repo.create_session("uncounted")
    stored = repo.append_messages(info.id, _messages())
    kept = _kept(repo.db, info.id)
    assert [r[1] for r in kept] == [body for body, _ in _expected(stored, COUNTER)]
    assert {r[2] for r in kept} == {None}
    # An import writes neither; the pass after it fills counts and lines together.
    (outcome,) = repo.import_many(
        [Conversation(title="imported", messages=_messages(), source="t", source_id="1")]
    )
    assert {(r[1], r[2]) for r in _kept(repo.db, outcome.session.id)} == {(None, None)}
    while repo.fill_token_counts(COUNTER.count_messages, COUNTER.encoding_name)[0]:
        pass
    for sid in (info.id, outcome.session.id):
        rows = _kept(repo.db, sid)
        stored = repo.list_messages(sid)
        assert [(r[1], r[2]) for r in rows] == _expected(stored, COUNTER)


def test_a_change_of_what_the_line_is_made_of_forgets_it(repo: Repository) -> None:
    messages = _messages()
    fill_counts(messages, COUNTER)
    info = repo.create_session("edits")
    ids = [m.id for m in repo.append_messages(info.id, messages)]
    assert all(isinstance(i, int) for i in ids)
    before = {r[0]: r for r in _kept(repo.db, info.id)}

    repo.update_message(ids[1], content="Now to Madrid.")
    repo.update_message(ids[4], role="user")
    repo.update_message(ids[3], name="price")
    repo.update_message(ids[2], tool_calls=[call("c1", "price")])
    # Nothing the line is made of: the line and its count stay.
    repo.update_message(ids[6], content=messages[6].content)
    repo.set_important(ids[0], True)
    repo.set_state([ids[5]], "folded")
    repo.update_message(ids[5], metadata={"note": "kept"})
    after = {r[0]: r for r in _kept(repo.db, info.id)}
    for changed in (ids[1], ids[4], ids[3], ids[2]):
        assert after[changed][1:3] == (None, None), changed
    for same in (ids[0], ids[5]):
        assert after[same][1:3] == before[same][1:3], same
    # Writing the same text keeps the line; its count goes with the message's own count,
    # which the repository clears on any write of the text.
    assert after[ids[6]][1:4] == (before[ids[6]][1], None, None)

    # A count in another encoding forgets the line's count, not the line.
    repo.set_token_counts([(ids[0], 9, "cl100k_base")])
    row = {r[0]: r for r in _kept(repo.db, info.id)}[ids[0]]
    assert row[1] == before[ids[0]][1] and row[2] is None and row[3] == "cl100k_base"
    # A new count in the same encoding keeps the line's count.
    repo.set_token_counts([(ids[5], 50, COUNTER.encoding_name)])
    assert {r[0]: r for r in _kept(repo.db, info.id)}[ids[5]][1:3] == before[ids[5]][1:3]


def test_a_fork_keeps_the_lines(repo: Repository) -> None:
    messages = _messages()
    fill_counts(messages, CL100K)
    info = repo.create_session("fork me")
    stored = repo.append_messages(info.id, messages)
    fork = repo.fork_session(info.id, stored[4].id)  # type: ignore[arg-type]
    original = [r[1:] for r in _kept(repo.db, info.id)][:5]
    assert [r[1:] for r in _kept(repo.db, fork.id)] == original
    assert original[1][2] == "cl100k_base"
    assert original[1][1] == CL100K.count_text(f" {original[1][0]}\n")


def test_a_database_from_0002_upgrades_with_no_lines_and_previews_alike(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workbench.engine import compaction
    from workbench.engine.workspace import Workspace

    assert MIGRATIONS[2].name == "0003_summary_lines"
    messages = [Message("user" if i % 2 == 0 else "assistant", f"Turn {i}: " + "word " * 30)
                for i in range(60)]
    fill_counts(messages, COUNTER)
    with monkeypatch.context() as patch:
        patch.setattr(db_module, "MIGRATIONS", MIGRATIONS[:2])
        old = Database.open(db_path)
        info = Repository(old).create_session("from 0002")
        with old.write() as conn:
            conn.exec_driver_sql(
                MESSAGE_INSERT,
                [message_params(m, info.id, i, m.created_at or _now()) for i, m in
                 enumerate(messages)],
            )
        old.close()
    db = Database.open(db_path)
    try:
        assert "0003_summary_lines" in [n for n, _ in db.applied_migrations()]
        assert {(r[1], r[2]) for r in _kept(db, info.id)} == {(None, None)}
        policy = compaction.CompactionPolicy(summary_chars=1000)
        ws = Workspace(db)
        without = compaction.preview(ws, info.id, policy=policy)
        # The lines written now (as the counting pass would) give the same preview.
        with db.write() as conn:
            stored = Repository(db).list_messages(info.id)
            conn.exec_driver_sql(
                "UPDATE messages SET summary_line = ?, summary_line_tokens = ? WHERE id = ?",
                [(b, t, m.id) for m, (b, t) in zip(stored, _expected(stored, COUNTER),
                                                   strict=True)],
            )
        with_lines = compaction.preview(ws, info.id, policy=policy)
        assert without.changed and without.folded_count == 30
        assert with_lines.to_json() | {"created_at": None} == without.to_json() | {
            "created_at": None
        }
    finally:
        db.close()
    conn2 = sqlite3.connect(str(db_path))
    try:
        names = {r[0] for r in conn2.execute("SELECT name FROM sqlite_master WHERE type='trigger'")}
    finally:
        conn2.close()
    assert {"messages_summary_line_stale", "messages_summary_line_tokens_stale"} <= names


def _now() -> Any:
    from workbench.core.conversation import utcnow

    return utcnow()


def test_the_lines_a_session_lacks_are_kept_once_and_preview_alike(repo: Repository) -> None:
    from workbench.engine import compaction
    from workbench.engine.workspace import Workspace

    messages = _messages() * 12
    fill_counts(messages, COUNTER)
    info = repo.create_session("written before lines were kept")
    stored = repo.append_messages(info.id, [m.copy() for m in messages])
    other = repo.create_session("another session").id
    repo.append_messages(other, [m.copy() for m in messages[:3]])
    with repo.db.write() as conn:  # as a database written before 0003 holds them
        conn.exec_driver_sql("UPDATE messages SET summary_line = NULL,"
                             " summary_line_tokens = NULL")
    ws = Workspace(repo.db)
    policy = compaction.CompactionPolicy(summary_chars=1000)
    without = compaction.preview(ws, info.id, policy=policy)
    assert without.changed and without.unkept_lines == len(stored)

    assert compaction.keep_summary_lines(ws, info.id) == len(stored)
    assert [(r[1], r[2]) for r in _kept(repo.db, info.id)] == _expected(stored, COUNTER)
    # Only that session's, and only once.
    assert {(r[1], r[2]) for r in _kept(repo.db, other)} == {(None, None)}
    assert compaction.keep_summary_lines(ws, info.id) == 0

    with_lines = compaction.preview(ws, info.id, policy=policy)
    assert with_lines.unkept_lines == 0
    assert with_lines.to_json() | {"created_at": None} == without.to_json() | {
        "created_at": None}


def test_kept_lines_come_in_batches_and_wait_for_a_count(repo: Repository) -> None:
    from workbench.store.summary_lines import keep_summary_lines

    info = repo.create_session("uncounted, many")
    stored = repo.append_messages(info.id, _messages() * 3)
    with repo.db.write() as conn:
        conn.exec_driver_sql("UPDATE messages SET summary_line = NULL")
    assert keep_summary_lines(repo.db, info.id, batch=4) == len(stored)
    kept = _kept(repo.db, info.id)
    assert [r[1] for r in kept] == [body for body, _ in _expected(stored, COUNTER)]
    assert {r[2] for r in kept} == {None}  # no count of their own yet: counted later
    assert keep_summary_lines(repo.db, 10_000) == 0  # no such session: nothing


def test_a_table_with_kept_lines_leaves_the_plain_rows_texts_unread(repo: Repository) -> None:
    from workbench.store.compactions import load_table

    messages = _messages() * 4
    messages[1] = Message("user", "with metadata", metadata={"source": "mail"})
    messages[8] = Message("user", "pinned one", metadata={"pinned": True})
    fill_counts(messages, COUNTER)
    info = repo.create_session("kept lines")
    stored = repo.append_messages(info.id, [m.copy() for m in messages])
    table = load_table(repo.db, info.id, COUNTER.encoding_name)
    # Plain rows (metadata that does not pin them too) need neither their text nor a
    # message: their line and counts are kept. Every other row is read whole, with its
    # text.
    whole = {i for i, m in enumerate(stored)
             if m.role in ("system", "tool") or m.tool_calls or m.metadata.get("pinned")}
    assert set(table.whole) == whole
    assert table.unread_texts == len(stored) - len(whole)
    assert list(table.texts) == [m.content for m in stored]
    assert table.unread_texts == 0


@pytest.mark.parametrize(
    "text",
    [
        '[{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]',
        '{"important": true, "pinned": false}',
        ' [1, 2] ', '[1, 2]\n', '\n{"a": 1}', '\ufeff[1]', '[1] x', '[1,', '', ' ', 'x',
        '{"a": 1, "a": 2}', '[NaN, Infinity]', '"text"', '12', '[1e400]', '[] []',
        b'[1, 2]', '{"\\u00e9": "\\ud83c\\udf89"}',
    ],
)
def test_the_table_reads_json_as_json_loads_does(text: Any) -> None:
    """The table's reading of tool calls and metadata gives what json.loads gives, or
    fails as it fails, whatever the text."""
    import json

    from workbench.store.compactions import _loads

    try:
        expected: Any = ("value", json.loads(text))
    except ValueError as exc:
        expected = ("error", type(exc), str(exc))
    try:
        got: Any = ("value", _loads(text))
    except ValueError as exc:
        got = ("error", type(exc), str(exc))
    assert repr(got) == repr(expected)
