"""A file read again never writes over a context changed in the workbench since its
import (0016_imported_context, ``ContextStore._imported_context``).

A context file saved again by the agent that keeps it (new facts, tasks, usage) still
updates the session it was imported as. But when the session's facts, summary or tasks
were changed here after the import (an edit, a chat, a compaction), the file's would
write over that change: the session's are kept, and the import says so.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from workbench.core.conversation import Conversation, Message, SessionContext, Task
from workbench.engine.importing import import_conversations
from workbench.store import Repository


def _file(facts: list[str], *, turns: int = 2, summary: str = "") -> Conversation:
    """A context file's conversation: the same source and id each time it is read."""
    return Conversation(
        title="agent memory",
        messages=[Message(("user", "assistant")[i % 2], f"turn {i}") for i in range(turns)],
        context=SessionContext(facts=list(facts), summary=summary),
        source="context-json",
        source_id="agent-1",
    )


def _facts(repo: Repository, session_id: int) -> list[str]:
    return list(repo.get_context(session_id).facts)


def _imported(repo: Repository, conversation: Conversation) -> int:
    report = import_conversations(repo, [conversation], count_tokens=False)
    assert not report.skipped
    return report.sessions[0][0].id


def test_a_context_file_saved_again_updates_the_session_it_was_imported_as(
    repo: Repository,
) -> None:
    sid = _imported(repo, _file(["Ana flies on Fridays."]))
    report = import_conversations(repo, [_file(["Ana flies on Fridays.", "Ana likes tea."])])
    assert report.counts()["updated"] == 1 and not report.notes
    assert _facts(repo, sid) == ["Ana flies on Fridays.", "Ana likes tea."]
    # and again: what the import wrote is what it compares with
    report = import_conversations(repo, [_file(["Ana likes tea."])])
    assert report.counts()["updated"] == 1
    assert _facts(repo, sid) == ["Ana likes tea."]


def test_the_same_file_read_again_keeps_the_facts_added_in_the_workbench(
    repo: Repository,
) -> None:
    sid = _imported(repo, _file(["Ana flies on Fridays."]))
    repo.change_context(sid, lambda c: c.facts.append("Ana's team is four people."))
    report = import_conversations(repo, [_file(["Ana flies on Fridays."])])
    assert report.counts() == {"created": 0, "updated": 0, "unchanged": 1, "skipped": 0}
    assert not report.notes  # the file holds just what was imported: nothing is lost
    assert _facts(repo, sid) == ["Ana flies on Fridays.", "Ana's team is four people."]


def test_a_newer_file_does_not_write_over_an_edit_and_the_import_says_so(
    repo: Repository,
) -> None:
    sid = _imported(repo, _file(["Ana flies on Fridays."]))
    repo.change_context(sid, lambda c: c.tasks.append(Task("t1", "Book Porto")))
    report = import_conversations(repo, [_file(["Ana flies on Mondays."])])
    assert report.counts()["unchanged"] == 1
    [note] = report.notes
    assert note.entry == "agent-1"
    assert f"session {sid}'s were changed in the workbench" in note.note
    context = repo.get_context(sid)
    assert list(context.facts) == ["Ana flies on Fridays."]
    assert [t.description for t in context.tasks] == ["Book Porto"]


def test_a_grown_file_appends_its_turns_but_keeps_the_edited_context(
    repo: Repository,
) -> None:
    sid = _imported(repo, _file(["Ana flies on Fridays."]))
    repo.change_context(sid, lambda c: setattr(c, "summary", "Ana books for her team."))
    report = import_conversations(repo, [_file(["Ana flies on Mondays."], turns=4)])
    assert report.counts()["updated"] == 1
    assert [m.content for m in repo.list_messages(sid)] == [f"turn {i}" for i in range(4)]
    [note] = report.notes
    assert "kept over the file's" in note.note
    context = repo.get_context(sid)
    assert context.summary == "Ana books for her team."
    assert list(context.facts) == ["Ana flies on Fridays."]


def test_a_grown_file_updates_a_context_not_changed_here(repo: Repository) -> None:
    sid = _imported(repo, _file(["Ana flies on Fridays."]))
    report = import_conversations(repo, [_file(["Ana flies on Mondays."], turns=4)])
    assert report.counts()["updated"] == 1 and not report.notes
    assert _facts(repo, sid) == ["Ana flies on Mondays."]


def test_replace_takes_the_files_context_over_an_edit(repo: Repository) -> None:
    sid = _imported(repo, _file(["Ana flies on Fridays."]))
    repo.change_context(sid, lambda c: c.facts.append("edited here"))
    report = import_conversations(repo, [_file(["Ana flies on Mondays."])], replace=True)
    assert report.counts()["updated"] == 1 and not report.notes
    assert _facts(repo, sid) == ["Ana flies on Mondays."]
    # the replace recorded what it wrote: a later file saved again is taken again
    import_conversations(repo, [_file(["Ana flies on Tuesdays."])])
    assert _facts(repo, sid) == ["Ana flies on Tuesdays."]


def test_a_context_imported_before_the_fingerprints_is_updated_as_before(
    repo: Repository,
) -> None:
    sid = _imported(repo, _file(["Ana flies on Fridays."]))
    with repo.db.write() as conn:  # as 0016 left a context written before it
        conn.execute(text("UPDATE session_context SET imported_fingerprint = NULL"))
    import_conversations(repo, [_file(["Ana flies on Mondays."])])
    assert _facts(repo, sid) == ["Ana flies on Mondays."]


@pytest.mark.parametrize("one_by_one", [False, True])
def test_both_import_paths_record_what_they_wrote(repo: Repository, one_by_one: bool) -> None:
    conversation = _file(["Ana flies on Fridays."])
    if one_by_one:
        sid = repo.import_conversation(conversation).session.id
    else:
        [outcome] = repo.import_many([conversation])
        sid = outcome.session.id
    with repo.db.query() as conn:
        recorded = conn.execute(text(
            "SELECT imported_fingerprint FROM session_context WHERE session_id = :s"),
            {"s": sid}).scalar_one()
    assert recorded and len(recorded) == 64
    repo.change_context(sid, lambda c: c.facts.append("edited here"))
    with repo.db.query() as conn:  # an edit leaves the import's fingerprint as it was
        assert conn.execute(text(
            "SELECT imported_fingerprint FROM session_context WHERE session_id = :s"),
            {"s": sid}).scalar_one() == recorded
