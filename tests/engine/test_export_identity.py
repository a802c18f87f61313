"""A session made in the workbench, and a fork, exported and read back.

The export names a session made here by its own identity (it has no source id), so
reading the export back into the same database finds the session instead of making a
copy, while another database makes it (and then recognises it in turn). A fork's export
names the session it was forked from and where, so reading it back links the fork again
when that session is in the same file or in the database, and says so when it is not.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.own_samples import chatgpt_fork_export
from workbench.core.conversation import SessionInfo
from workbench.engine.session_context import add_facts
from workbench.engine.workspace import Workspace

EXPORT_FORMATS = {"context-json": ".json", "openai-jsonl": ".jsonl", "markdown": ".md"}


@pytest.fixture
def other(tmp_path: Path) -> Iterator[Workspace]:
    """A second database (a SQLite file), to import into."""
    ws = Workspace.open(tmp_path / "other" / "other.db")
    try:
        yield ws
    finally:
        ws.close()


def _made_here(ws: Workspace, title: str, *texts: str) -> SessionInfo:
    info = ws.create_session(title)
    editing = ws.editing()
    for i, text in enumerate(texts):
        editing.append_message(info.id, "user" if i % 2 == 0 else "assistant", text)
    return ws.get_session(info.id)


def _fork(ws: Workspace, parent: SessionInfo, at: int, *more: str) -> SessionInfo:
    editing = ws.editing()
    message_id = ws.message_index(parent.id)[at][0]
    fork = editing.fork_session(parent.id, message_id, title=f"{parent.title} (fork)")
    for text in more:
        editing.append_message(fork.id, "user", text)
    return ws.get_session(fork.id)


def _export(ws: Workspace, ids: list[int], fmt: str, path: Path) -> Path:
    ws.export_sessions([str(i) for i in ids], fmt, path)
    return path


def _titles(ws: Workspace) -> list[str]:
    return sorted(s.title for s in ws.repo.list_sessions(include_archived=True))


def _origin(ws: Workspace, info: SessionInfo) -> tuple[str, int] | None:
    """(parent title, position of the fork's message in it), or None: not linked."""
    info = ws.get_session(info.id)
    if info.forked_from_session_id is None:
        return None
    parent = ws.get_session(info.forked_from_session_id)
    assert info.forked_from_message_id is not None
    message = ws.get_message(info.forked_from_message_id)
    assert message.session_id == parent.id
    return parent.title, message.position


def _by_title(ws: Workspace, title: str) -> SessionInfo:
    (found,) = [s for s in ws.repo.list_sessions(include_archived=True) if s.title == title]
    return found


# --------------------------------------------------------------------------- identity


@pytest.mark.parametrize("fmt", list(EXPORT_FORMATS))
def test_own_export_read_back_is_the_session_itself(
    workspace: Workspace, cli: Callable[..., Any], tmp_path: Path, fmt: str
) -> None:
    session = _made_here(workspace, "Planning", "Where to?", "Bergen.", "When?")
    path = _export(workspace, [session.id], fmt, tmp_path / f"out{EXPORT_FORMATS[fmt]}")

    result = cli("import", path)

    # It used to be a second copy of the session (no source id to recognise it by).
    assert result.code == 0, result.err
    assert result.out.splitlines()[0] == f"No new session from {path}."
    assert _titles(workspace) == ["Planning"]
    after = workspace.get_session(session.id)
    assert (after.source, after.source_id, after.message_count) == (None, None, 3)


@pytest.mark.parametrize("fmt", list(EXPORT_FORMATS))
def test_own_export_into_another_database_makes_it_once(
    workspace: Workspace, other: Workspace, tmp_path: Path, fmt: str
) -> None:
    session = _made_here(workspace, "Planning", "Where to?", "Bergen.")
    path = _export(workspace, [session.id], fmt, tmp_path / f"out{EXPORT_FORMATS[fmt]}")

    first = other.import_path(path)
    again = other.import_path(path)

    assert first.counts()["created"] == 1
    assert again.counts() == {"created": 0, "updated": 0, "unchanged": 1, "skipped": 0}
    (copy,) = other.repo.list_sessions(include_archived=True)
    assert [m.content for m in other.repo.list_messages(copy.id)] == ["Where to?", "Bergen."]
    # Its export read back where the session was made is that session too.
    back = _export(other, [copy.id], fmt, tmp_path / f"back{EXPORT_FORMATS[fmt]}")
    report = workspace.import_path(back)
    assert report.counts()["created"] == 0
    assert _titles(workspace) == ["Planning"]


def test_context_export_round_trip_stays_exact(
    workspace: Workspace, other: Workspace, tmp_path: Path
) -> None:
    session = _made_here(workspace, "Planning", "Where to?", "Bergen.")
    first = _export(workspace, [session.id], "context-json", tmp_path / "first.json")
    other.import_path(first)
    (copy,) = other.repo.list_sessions(include_archived=True)

    second = _export(other, [copy.id], "context-json", tmp_path / "second.json")

    assert second.read_text(encoding="utf-8") == first.read_text(encoding="utf-8")


def test_an_older_export_of_a_grown_session_adds_nothing(
    workspace: Workspace, tmp_path: Path
) -> None:
    session = _made_here(workspace, "Planning", "Where to?", "Bergen.")
    add_facts(workspace, session.id, ["Likes trains."])
    path = _export(workspace, [session.id], "context-json", tmp_path / "old.json")
    workspace.editing().append_message(session.id, "user", "And back?")
    add_facts(workspace, session.id, ["Has a rail pass."])

    report = workspace.import_path(path)

    assert report.counts() == {"created": 0, "updated": 0, "unchanged": 1, "skipped": 0}
    assert [m.content for m in workspace.repo.list_messages(session.id)] == [
        "Where to?", "Bergen.", "And back?"]
    # The older copy's context is not taken over the session's newer one.
    assert workspace.get_context(session.id).facts == ["Likes trains.", "Has a rail pass."]


# --------------------------------------------------------------------------- forks


@pytest.mark.parametrize("fmt", list(EXPORT_FORMATS))
def test_fork_and_parent_in_one_export_are_linked_again(
    workspace: Workspace, other: Workspace, tmp_path: Path, fmt: str
) -> None:
    parent = _made_here(workspace, "Trip", "Where to?", "Bergen.", "When?", "Friday.")
    fork = _fork(workspace, parent, 1, "What about Oslo?")
    # The fork first: its parent comes after it in the file.
    path = _export(workspace, [fork.id, parent.id], fmt, tmp_path / f"both{EXPORT_FORMATS[fmt]}")

    report = other.import_path(path)

    assert report.counts()["created"] == 2 and not report.notes
    assert _origin(other, _by_title(other, "Trip (fork)")) == ("Trip", 1)
    assert _origin(other, _by_title(other, "Trip")) is None


def test_fork_whose_parent_is_in_the_database_is_linked_to_it(
    workspace: Workspace, other: Workspace, tmp_path: Path
) -> None:
    parent = _made_here(workspace, "Trip", "Where to?", "Bergen.", "When?")
    fork = _fork(workspace, parent, 2, "Or Saturday?")
    _export(workspace, [parent.id], "openai-jsonl", tmp_path / "parent.jsonl")
    _export(workspace, [fork.id], "context-json", tmp_path / "fork.json")

    other.import_path(tmp_path / "parent.jsonl")
    report = other.import_path(tmp_path / "fork.json")

    assert report.counts()["created"] == 1 and not report.notes
    assert _origin(other, _by_title(other, "Trip (fork)")) == ("Trip", 2)


def test_fork_read_back_where_its_parent_was_made_is_linked_to_it(
    workspace: Workspace, tmp_path: Path
) -> None:
    parent = _made_here(workspace, "Trip", "Where to?", "Bergen.")
    fork = _fork(workspace, parent, 0, "Or Oslo?")
    path = _export(workspace, [fork.id], "openai-jsonl", tmp_path / "fork.jsonl")
    workspace.delete_session(fork.id)

    report = workspace.import_path(path)

    assert report.counts()["created"] == 1 and not report.notes
    assert _origin(workspace, _by_title(workspace, "Trip (fork)")) == ("Trip", 0)


@pytest.mark.parametrize("fmt", ["context-json", "openai-jsonl"])
def test_fork_without_its_parent_is_imported_and_the_lost_link_reported(
    workspace: Workspace, other: Workspace, tmp_path: Path, fmt: str
) -> None:
    parent = _made_here(workspace, "Trip", "Where to?", "Bergen.")
    fork = _fork(workspace, parent, 1, "And back?")
    path = _export(workspace, [fork.id], fmt, tmp_path / f"fork{EXPORT_FORMATS[fmt]}")

    report = other.import_path(path)

    (copy,) = other.repo.list_sessions(include_archived=True)
    assert report.counts()["created"] == 1
    assert _origin(other, copy) is None
    (note,) = report.notes
    assert note.entry == f"session {copy.id} ('Trip (fork)')"
    assert "neither in the file nor in the database" in note.note
    assert note.note.endswith("it was imported without the link to it.")


def _forked_from(ws: Workspace, info: SessionInfo) -> tuple[str | None, int | None]:
    """(parent title or None, the fork's message id in it or None)."""
    info = ws.get_session(info.id)
    if info.forked_from_session_id is None:
        return None, None
    return ws.get_session(info.forked_from_session_id).title, info.forked_from_message_id


@pytest.mark.parametrize("fmt", list(EXPORT_FORMATS))
def test_a_fork_whose_message_was_deleted_keeps_its_link_to_the_parent_session(
    workspace: Workspace, other: Workspace, tmp_path: Path, fmt: str
) -> None:
    """The parent's message the fork was made at is deleted: the export says the
    position is unknown, and reading it back links the fork to the parent session at
    no message, with a sentence in the report (not a link silently lost)."""
    parent = _made_here(workspace, "Trip", "Where to?", "Bergen.", "When?", "Friday.")
    fork = _fork(workspace, parent, 1, "What about Oslo?")
    workspace.editing().delete_message(workspace.message_index(parent.id)[1][0])
    path = _export(workspace, [fork.id, parent.id], fmt, tmp_path / f"both{EXPORT_FORMATS[fmt]}")
    assert re.search(r'"forked_from": \{[^}]*"position": null', path.read_text("utf-8"))

    report = other.import_path(path)

    assert report.counts()["created"] == 2
    copy = _by_title(other, "Trip (fork)")
    assert _forked_from(other, copy) == ("Trip", None)
    (note,) = report.notes
    assert note.entry == f"session {copy.id} ('Trip (fork)')"
    assert "linked to the session it was forked from" in note.note
    assert "deleted from that session before the export" in note.note


def test_a_fork_whose_parent_no_longer_holds_its_message_is_linked_to_the_session(
    workspace: Workspace, other: Workspace, tmp_path: Path
) -> None:
    """The parent in the database is shorter than the position the export names: the
    fork is linked to it at no message, and the report says why."""
    parent = _made_here(workspace, "Trip", "Where to?", "Bergen.", "When?", "Friday.")
    fork = _fork(workspace, parent, 3, "Or Saturday?")
    _export(workspace, [parent.id], "openai-jsonl", tmp_path / "parent.jsonl")
    _export(workspace, [fork.id], "context-json", tmp_path / "fork.json")
    other.import_path(tmp_path / "parent.jsonl")
    copied_parent = _by_title(other, "Trip")
    for message_id, *_rest in other.message_index(copied_parent.id)[2:]:
        other.editing().delete_message(message_id)

    report = other.import_path(tmp_path / "fork.json")

    assert _forked_from(other, _by_title(other, "Trip (fork)")) == ("Trip", None)
    (note,) = report.notes
    assert "no longer holds the message it was forked at (position 3)" in note.note


@pytest.mark.parametrize("fmt", ["context-json", "openai-jsonl"])
def test_an_imported_branch_keeps_its_link_through_an_export(
    workspace: Workspace, other: Workspace, tmp_path: Path, fmt: str
) -> None:
    workspace.import_path(chatgpt_fork_export(tmp_path / "conversations.json"))
    sessions = workspace.repo.list_sessions(include_archived=True)
    branch = next(s for s in sessions if s.forked_from_session_id is not None)
    main = workspace.get_session(branch.forked_from_session_id or 0)
    assert _origin(workspace, branch) == (main.title, 2)
    # The branch first: its main session comes after it in the file.
    path = _export(workspace, [branch.id, main.id], fmt, tmp_path / f"x{EXPORT_FORMATS[fmt]}")

    report = other.import_path(path)

    assert report.counts()["created"] == 2 and not report.notes
    assert _origin(other, _by_title(other, branch.title)) == (main.title, 2)
