"""Another desktop's change is never written over (SPEC §9: every view follows the
database, on the team store too).

A change made with ``expected`` (what the window last saw: an undo's is what it wrote)
is written only while the field still holds it, and the comparison is the condition of
the UPDATE that writes: another desktop's write that lands between the window's read
and its write transaction is found too. Each test runs on a SQLite file and on the
team store, with two workspaces on one database as two desktops are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from workbench.core.conversation import Conversation, Message
from workbench.engine.workspace import Workspace
from workbench.errors import ChangedElsewhereError


@pytest.fixture
def other(db_target: Path | str, workspace: Workspace) -> Iterator[Workspace]:
    """A second workspace on the same database: another desktop."""
    ws = Workspace.open(db_target)
    try:
        yield ws
    finally:
        ws.close()


def _session(ws: Workspace, tags: list[str] | None = None) -> int:
    messages = [Message(role="user", content="Where to stay in Lisbon?"),
                Message(role="assistant", content="Alfama.")]
    conversation = Conversation(title="Lisbon", messages=messages, tags=tags or [])
    return int(ws.repo.import_many([conversation])[0].session.id)


def _before_the_next_write(ws: Workspace, act: Callable[[], object]) -> list[bool]:
    """Run ``act`` once, just before ``ws``'s next write transaction takes the store's
    write lock: after whatever ``ws`` read first, before it writes."""
    fired: list[bool] = []

    def hook(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if not fired and ("BEGIN IMMEDIATE" in statement
                          or "pg_advisory_xact_lock" in statement):
            fired.append(True)
            act()

    event.listen(ws.db.engine, "before_cursor_execute", hook)
    return fired


# -- session fields ---------------------------------------------------------------------


@pytest.mark.parametrize(("field", "mine", "theirs", "setter"), [
    ("title", "Lisbon, May", "Lisbon trip", "rename_session"),
    ("pinned", True, False, "set_pinned"),
    ("archived", True, False, "set_archived"),
    ("tags", ["travel"], ["travel", "family"], "set_tags"),
])
def test_an_undo_of_a_session_field_changed_elsewhere_since_writes_nothing(
    workspace: Workspace, other: Workspace, field: str, mine: Any, theirs: Any, setter: str,
) -> None:
    sid = _session(workspace)
    editing = workspace.editing()
    change = getattr(editing, setter)(sid, mine)
    old, written = getattr(change.before, field), getattr(change.after, field)
    getattr(other.editing(), setter)(sid, theirs)  # the other desktop, after

    with pytest.raises(ChangedElsewhereError, match="another desktop since"):
        getattr(editing, setter)(sid, old, expected=written)
    assert getattr(workspace.get_session(sid), field) == theirs
    # Over what it holds now, the change is written.
    assert getattr(getattr(editing, setter)(sid, old, expected=theirs).after, field) == old


def test_the_refusal_names_the_field_and_the_session(
    workspace: Workspace, other: Workspace,
) -> None:
    sid = _session(workspace)
    workspace.editing().rename_session(sid, "Mine")
    other.editing().rename_session(sid, "Theirs")
    with pytest.raises(ChangedElsewhereError) as caught:
        workspace.editing().rename_session(sid, "Lisbon", expected="Mine")
    assert str(caught.value).startswith("The title of the session “Theirs” was changed in "
                                        "another window or on another desktop since")


def test_no_tags_stored_either_way_match_an_empty_list(workspace: Workspace) -> None:
    sid = _session(workspace)  # imported without tags
    change = workspace.editing().set_tags(sid, ["a"], expected=[])
    assert change.after.tags == ["a"]
    assert workspace.editing().set_tags(sid, [], expected=["a"]).after.tags == []
    assert workspace.editing().set_tags(sid, ["b"], expected=[]).after.tags == ["b"]


def test_an_important_mark_changed_elsewhere_since_is_not_written_over(
    workspace: Workspace, other: Workspace,
) -> None:
    sid = _session(workspace)
    first = workspace.repo.list_messages(sid)[0]
    editing = workspace.editing()
    editing.set_important(first.id, True)
    other.editing().set_important(first.id, False)
    with pytest.raises(ChangedElsewhereError, match="important mark"):
        editing.set_important(first.id, False, expected=True)
    assert not workspace.repo.get_message(first.id).important
    assert editing.set_important(first.id, True, expected=False).after.important


# -- the check and the write are one statement --------------------------------------------


def test_a_rename_landing_between_the_read_and_the_write_is_not_written_over(
    workspace: Workspace, other: Workspace,
) -> None:
    sid = _session(workspace)
    workspace.editing().rename_session(sid, "Mine")
    fired = _before_the_next_write(
        workspace, lambda: other.editing().rename_session(sid, "Theirs"))
    with pytest.raises(ChangedElsewhereError):
        workspace.editing().rename_session(sid, "Lisbon", expected="Mine")
    assert fired == [True]
    assert workspace.get_session(sid).title == "Theirs"


def test_an_edit_landing_between_the_read_and_the_write_is_not_written_over(
    workspace: Workspace, other: Workspace,
) -> None:
    sid = _session(workspace)
    read = workspace.repo.list_messages(sid)[1]  # as the editor read it
    fired = _before_the_next_write(
        workspace, lambda: other.editing().edit_message(read.id, content="Theirs."))
    with pytest.raises(ChangedElsewhereError, match="while you edited it"):
        workspace.editing().edit_message(read.id, content="Mine.", expected=read)
    assert fired == [True]
    assert workspace.repo.get_message(read.id).content == "Theirs."


def test_an_undo_landing_after_another_edit_is_not_written_over_it(
    workspace: Workspace, other: Workspace,
) -> None:
    sid = _session(workspace)
    editing = workspace.editing()
    change = editing.edit_message(workspace.repo.list_messages(sid)[1].id, content="Mine.")
    fired = _before_the_next_write(
        workspace, lambda: other.editing().edit_message(change.after.id, content="Theirs."))
    with pytest.raises(ChangedElsewhereError, match="after your edit"):
        editing.restore_fields(change.before, expected=change.after)
    assert fired == [True]
    assert workspace.repo.get_message(change.after.id).content == "Theirs."


def test_a_mark_landing_between_the_read_and_the_write_is_not_written_over(
    workspace: Workspace, other: Workspace,
) -> None:
    sid = _session(workspace)
    first = workspace.repo.list_messages(sid)[0]
    workspace.editing().set_important(first.id, True)
    fired = _before_the_next_write(
        workspace, lambda: other.editing().set_important(first.id, False))
    with pytest.raises(ChangedElsewhereError):
        workspace.editing().set_important(first.id, False, expected=True)
    assert fired == [True]
    assert not workspace.repo.get_message(first.id).important
