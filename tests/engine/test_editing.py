"""Undoable edits: every operation and its inverse leave the store as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.core.conversation import Conversation, Message
from workbench.engine.editing import Editing, IdAliases, SessionTrash
from workbench.engine.workspace import Workspace
from workbench.errors import ChangedElsewhereError, NotFoundError, RequestError


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    workspace = Workspace.open(tmp_path / "edit.db")
    yield workspace
    workspace.close()


def _session(ws: Workspace) -> int:
    messages = [Message(role="system", content="Be brief."),
                Message(role="user", content="Hi", metadata={"source": "test"}),
                Message(role="assistant", content="Hello!", important=True,
                        tool_calls=[{"id": "c1", "type": "function",
                                     "function": {"name": "f", "arguments": "{}"}}])]
    return ws.repo.import_many([Conversation(title="Chat", messages=messages)])[0].session.id


def _rows(ws: Workspace, session_id: int) -> list[tuple]:
    return [(m.position, m.role, m.content, m.important, m.metadata, m.tool_calls,
             m.created_at, m.token_count) for m in ws.repo.list_messages(session_id)]


def test_edit_counts_tokens_and_restore_puts_everything_back(ws: Workspace) -> None:
    sid = _session(ws)
    editing = Editing(ws.repo)
    before = _rows(ws, sid)
    target = ws.repo.list_messages(sid)[1]
    change = editing.edit_message(target.id, content="Hello there, how are you today?",
                                  role="assistant")
    assert change.before.content == "Hi"
    assert change.after.role == "assistant"
    assert change.after.token_count is not None and change.after.token_count > 0
    assert ws.repo.get_session(sid).token_count == sum(
        m.token_count or 0 for m in ws.repo.list_messages(sid))
    editing.restore_fields(change.before)
    assert _rows(ws, sid) == before


def test_an_edit_from_a_text_changed_meanwhile_writes_nothing(ws: Workspace) -> None:
    sid = _session(ws)
    editing = Editing(ws.repo)
    read = ws.repo.list_messages(sid)[1]  # as an editor read it
    editing.edit_message(read.id, content="Hi from elsewhere")  # another window's edit
    before = _rows(ws, sid)
    with pytest.raises(ChangedElsewhereError, match="changed in another window"):
        editing.edit_message(read.id, content="Hi, mine", expected=read)
    assert _rows(ws, sid) == before
    # From the text as it is now, the edit is written.
    now = ws.repo.get_message(read.id)
    assert editing.edit_message(read.id, content="Hi, mine", expected=now).after.content \
        == "Hi, mine"


def test_an_undo_over_a_text_changed_since_writes_nothing(ws: Workspace) -> None:
    sid = _session(ws)
    editing = Editing(ws.repo)
    change = editing.edit_message(ws.repo.list_messages(sid)[1].id, content="Mine")
    editing.edit_message(change.after.id, content="Theirs")  # another window's, after
    before = _rows(ws, sid)
    with pytest.raises(ChangedElsewhereError, match="after your edit"):
        editing.restore_fields(change.before, expected=change.after)
    assert _rows(ws, sid) == before


def test_delete_and_restore_keep_every_field_and_the_old_id_resolves(ws: Workspace) -> None:
    sid = _session(ws)
    editing = Editing(ws.repo)
    before = _rows(ws, sid)
    old = ws.repo.list_messages(sid)[1]
    deleted = editing.delete_message(old.id)
    assert [m.content for m in ws.repo.list_messages(sid)] == ["Be brief.", "Hello!"]
    restored = editing.restore_message(deleted)
    assert _rows(ws, sid) == before
    # The old id still works for every later operation.
    assert editing.message(old.id).id == restored.id
    editing.set_important(old.id, True)
    assert ws.repo.get_message(restored.id).important


def test_insert_at_a_position_shifts_the_rest(ws: Workspace) -> None:
    sid = _session(ws)
    editing = Editing(ws.repo)
    inserted = editing.insert_message(sid, 1, "tool", "result text")
    assert inserted.position == 1 and inserted.token_count
    assert [m.role for m in ws.repo.list_messages(sid)] == ["system", "tool", "user",
                                                            "assistant"]


def test_id_aliases_follow_chains() -> None:
    aliases = IdAliases()
    aliases.add(1, 5)
    aliases.add(5, 9)
    assert aliases.resolve(1) == 9
    assert aliases.resolve(5) == 9
    assert aliases.resolve(7) == 7


def test_session_changes_return_before_and_after(ws: Workspace) -> None:
    sid = _session(ws)
    editing = Editing(ws.repo)
    change = editing.rename_session(sid, "Renamed")
    assert (change.before.title, change.after.title) == ("Chat", "Renamed")
    change = editing.set_tags(sid, ["a", "b"])
    assert (change.before.tags, change.after.tags) == ([], ["a", "b"])
    fork = editing.fork_session(sid, ws.repo.list_messages(sid)[1].id)
    assert fork.message_count == 2 and fork.forked_from_session_id == sid


def test_trash_hides_until_purged_and_take_back_leaves_the_session_untouched(
    ws: Workspace,
) -> None:
    sid = _session(ws)
    other = _session(ws)
    trash = SessionTrash(ws.repo)
    before = ws.repo.get_session(sid)
    trash.put([sid])
    assert sid in trash and trash.hidden() == frozenset({sid})
    # Nothing changed in the store yet.
    assert ws.repo.get_session(sid) == before
    trash.take_back([sid])
    assert len(trash) == 0
    trash.put([sid, other])
    assert trash.purge() == 2
    with pytest.raises(NotFoundError):
        ws.repo.get_session(sid)
    with pytest.raises(NotFoundError):
        trash.put([sid])


def test_a_title_given_is_one_line_and_never_empty(ws: Workspace) -> None:
    sid = _session(ws)
    edit = Editing(ws.repo)
    changed = edit.rename_session(sid, "  Trip\nto\tPorto \x1b[31m plan  ").after
    assert changed.title == "Trip to Porto [31m plan"
    for empty in ("", "  \n\t "):
        with pytest.raises(RequestError, match="cannot be empty"):
            edit.rename_session(sid, empty)
    assert ws.repo.get_session(sid).title == "Trip to Porto [31m plan"
