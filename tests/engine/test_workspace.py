"""The workspace: opening databases, the first-run sample, importing with progress, views."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from workbench.core.conversation import Message
from workbench.engine.workspace import SearchQuery, Workspace
from workbench.errors import FormatError, NotFoundError, UnknownFormatError

# -- opening ---------------------------------------------------------------------------------


def test_open_creates_the_file_and_folders(db_path: Path) -> None:
    assert not db_path.parent.exists()
    with Workspace.open(db_path) as ws:
        assert ws.db_path == db_path
        assert ws.count_sessions() == 0
    assert db_path.is_file()


def test_open_without_a_path_follows_the_environment(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Workspace.open() as ws:
        assert ws.db_path == isolated_home / "workbench.db"
    explicit = tmp_path / "explicit.db"
    monkeypatch.setenv("WORKBENCH_DB", str(explicit))
    with Workspace.open() as ws:
        assert ws.db_path == explicit
    other = tmp_path / "other.db"
    with Workspace.open(other) as ws:
        assert ws.db_path == other


def test_data_survives_reopening(db_target: Path | str, sample_session_file: Path) -> None:
    with Workspace.open(db_target) as ws:
        [(info, created)] = ws.import_path(sample_session_file).sessions
        assert created
    with Workspace.open(db_target) as ws:
        again, messages, _ = ws.session_view(info.id)
        assert again.title == info.title
        assert len(messages) == info.message_count


# -- the sample session on first start ---------------------------------------------------------


def test_sample_session_is_added_once_to_an_empty_database(
    db_target: Path | str, sample_session_file: Path
) -> None:
    raw = json.loads(sample_session_file.read_text("utf-8"))
    with Workspace.open(db_target) as ws:
        added = ws.ensure_sample_session()
        assert added is not None
        assert added.title == raw["title"]
        assert added.message_count == len(raw["recent_history"])
        _, _, context = ws.session_view(added.id)
        assert context.facts == raw["facts"]
        assert ws.ensure_sample_session() is None
        assert ws.count_sessions(include_archived=True) == 1
    with Workspace.open(db_target) as ws:
        assert ws.ensure_sample_session() is None
        assert ws.count_sessions(include_archived=True) == 1


def test_sample_session_is_not_added_again_after_the_user_deletes_it(db_target: Path | str) -> None:
    with Workspace.open(db_target) as ws:
        added = ws.ensure_sample_session()
        assert added is not None
        ws.repo.delete_session(added.id)
        assert ws.ensure_sample_session() is None
        assert ws.count_sessions(include_archived=True) == 0
    with Workspace.open(db_target) as ws:
        assert ws.ensure_sample_session() is None
        assert ws.count_sessions(include_archived=True) == 0


def test_sample_session_is_not_added_to_a_database_with_sessions(db_target: Path | str) -> None:
    with Workspace.open(db_target) as ws:
        mine = ws.repo.create_session("My own work")
        assert ws.ensure_sample_session() is None
        assert [s.title for s in ws.list_sessions(include_archived=True)] == ["My own work"]
        # Emptying the database later does not bring the sample in either.
        ws.repo.delete_session(mine.id)
        assert ws.ensure_sample_session() is None
        assert ws.count_sessions(include_archived=True) == 0


def test_an_archived_session_counts_as_not_empty(db_target: Path | str) -> None:
    with Workspace.open(db_target) as ws:
        hidden = ws.repo.create_session("Hidden")
        ws.repo.set_archived(hidden.id, True)
        assert ws.ensure_sample_session() is None
        assert ws.count_sessions(include_archived=True) == 1


# -- import_path: progress and cancelling ----------------------------------------------------

MANY = 1100


def _many_conversations(path: Path, write_jsonl: Callable[[Path, Any], Path]) -> dict[str, int]:
    """A JSONL file of :data:`MANY` conversations of 1 to 4 messages; title → count."""
    expected: dict[str, int] = {}
    items = []
    for i in range(MANY):
        count = 1 + i % 4
        title = f"conversation {i}"
        expected[title] = count
        items.append(
            {
                "title": title,
                "messages": [
                    {"role": ("user", "assistant")[j % 2], "content": f"message {j} of {i}"}
                    for j in range(count)
                ],
            }
        )
    write_jsonl(path, items)
    return expected


def test_import_path_reports_progress(
    workspace: Workspace, tmp_path: Path, write_jsonl: Callable[[Path, Any], Path]
) -> None:
    expected = _many_conversations(tmp_path / "many.jsonl", write_jsonl)
    calls: list[tuple[int, int | None]] = []

    def progress(done: int, total: int | None) -> bool:
        calls.append((done, total))
        return True

    report = workspace.import_path(tmp_path / "many.jsonl", progress=progress)
    assert not report.cancelled
    assert len(report.sessions) == MANY
    assert calls, "the callback was never called"
    done = [d for d, _ in calls]
    assert done == sorted(done)
    assert done[-1] == MANY
    for d, total in calls:
        assert total is None or total >= d
    assert workspace.count_sessions() == MANY
    assert workspace.repo.stats()["messages"] == sum(expected.values())


def test_cancelling_an_import_keeps_only_whole_conversations(
    workspace: Workspace, tmp_path: Path, write_jsonl: Callable[[Path, Any], Path]
) -> None:
    expected = _many_conversations(tmp_path / "many.jsonl", write_jsonl)
    calls: list[int] = []

    def cancel(done: int, total: int | None) -> bool:
        calls.append(done)
        return False

    report = workspace.import_path(tmp_path / "many.jsonl", progress=cancel)
    assert report.cancelled
    assert len(calls) == 1, "no more work after the callback said stop"
    stored = workspace.list_sessions(include_archived=True)
    assert 0 < len(stored) < MANY
    assert len(stored) == len(report.sessions) == calls[0]
    for info in stored:
        assert info.message_count == expected[info.title]
        assert len(workspace.repo.list_messages(info.id)) == expected[info.title]
    assert workspace.repo.stats()["messages"] == sum(expected[s.title] for s in stored)

    # Importing again afterwards completes the job without duplicating anything.
    rest = workspace.import_path(tmp_path / "many.jsonl")
    assert len(rest.sessions) == MANY
    assert sum(created for _, created in rest.sessions) == MANY - len(stored)
    assert workspace.count_sessions() == MANY


def test_import_path_errors(workspace: Workspace, tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="does not exist"):
        workspace.import_path(tmp_path / "absent.json")
    (tmp_path / "x.json").write_text('{"messages": []}', encoding="utf-8")
    with pytest.raises(FormatError) as unknown_name:
        workspace.import_path(tmp_path / "x.json", format="nope")
    assert "context-json" in str(unknown_name.value) and "openai" in str(unknown_name.value)
    (tmp_path / "y.txt").write_text("plain words", encoding="utf-8")
    with pytest.raises(UnknownFormatError) as unknown_file:
        workspace.import_path(tmp_path / "y.txt")
    assert "context-json" in str(unknown_file.value) and "openai" in str(unknown_file.value)
    assert workspace.count_sessions(include_archived=True) == 0


# -- views, export and search -------------------------------------------------------------------


def test_session_view_by_id_source_id_and_title(
    workspace: Workspace,
    build_rich_session: Callable[[Workspace], int],
    sample_session_file: Path,
) -> None:
    rich = build_rich_session(workspace)
    sample = workspace.import_path(sample_session_file).sessions[0][0]
    info, messages, context = workspace.session_view(rich)
    assert info.id == rich
    assert [m.position for m in messages] == list(range(len(messages)))
    assert context.facts
    assert workspace.session_view("Cancel QX7")[0].id == rich
    assert workspace.session_view(str(rich))[0].id == rich
    assert workspace.session_view("sample-trip-planner")[0].id == sample.id
    with pytest.raises(NotFoundError):
        workspace.session_view("nothing like this")


def test_export_of_an_unknown_session_writes_nothing(workspace: Workspace, tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    with pytest.raises(NotFoundError):
        workspace.export_sessions(["404"], "context-json", target)
    assert not target.exists()


def test_export_with_an_unknown_format_lists_the_known(
    workspace: Workspace, build_rich_session: Callable[[Workspace], int], tmp_path: Path
) -> None:
    rich = build_rich_session(workspace)
    with pytest.raises(FormatError) as err:
        workspace.export_sessions([rich], "yaml", tmp_path / "out.yaml")
    for name in ("context-json", "openai-jsonl", "markdown"):
        assert name in str(err.value)
    assert not (tmp_path / "out.yaml").exists()


def test_search_finds_folded_messages_and_honours_filters(
    workspace: Workspace,
    build_rich_session: Callable[[Workspace], int],
    sample_session_file: Path,
) -> None:
    rich = build_rich_session(workspace)
    workspace.import_path(sample_session_file)
    _, messages, _ = workspace.session_view(rich)
    folded_ids = {m.id for m in messages if m.state == "folded"}

    hits = workspace.search(SearchQuery(text="QX7", kinds=("message",)))
    hit_ids = {h.message_id for h in hits}
    assert folded_ids & hit_ids, "folded messages stay searchable"
    assert {h.session_id for h in hits} == {rich}

    active_only = workspace.search(SearchQuery(text="QX7", states=["active"], kinds=("message",)))
    assert active_only
    assert not folded_ids & {h.message_id for h in active_only}

    users = workspace.search(SearchQuery(text="QX7", roles=["user"], kinds=("message",)))
    assert users and {h.role for h in users} == {"user"}

    limited = workspace.search(SearchQuery(text="QX7", limit=1, kinds=("message",)))
    assert len(limited) == 1

    elsewhere = workspace.search("Lisbon")
    assert elsewhere and rich not in {h.session_id for h in elsewhere}


def test_workspace_import_conversation_counts_tokens(workspace: Workspace) -> None:
    from workbench.core.conversation import Conversation

    info = workspace.import_conversation(
        Conversation(title="Direct", messages=[Message(role="user", content="Hello, tokens.")])
    )
    [message] = workspace.repo.list_messages(info.id)
    assert message.token_encoding == "o200k_base"
    assert message.token_count and message.token_count > 0
    assert workspace.repo.get_session(info.id).token_count == message.token_count


# -- the typed facade the GUI and the CLI use instead of ws.repo --------------------------------


def test_sessions_messages_and_context_through_the_workspace(workspace: Workspace) -> None:
    created = workspace.create_session("Facade")
    assert workspace.find_session("Facade").id == created.id
    assert workspace.get_session(created.id).message_count == 0

    edit = workspace.editing()
    first = edit.append_message(created.id, "user", "One")
    second = edit.append_message(created.id, "assistant", "Two")
    assert workspace.get_message(second.id).content == "Two"
    assert [row[0] for row in workspace.message_index(created.id)] == [first.id, second.id]
    assert [m.content for m in workspace.page_messages(created.id, after_position=0)] == ["Two"]
    assert [m.content for m in workspace.page_messages(created.id, roles=["user"])] == ["One"]
    last = workspace.page_before(created.id, before_position=2**62, limit=1)
    assert [m.id for m in last] == [second.id]
    assert workspace.get_context(created.id).summary == ""
    assert workspace.stats()["sessions"] >= 1

    trash = workspace.session_trash()
    trash.put([created.id])
    assert created.id in trash.hidden()
    assert trash.purge() == 1
    with pytest.raises(NotFoundError):
        workspace.get_session(created.id)


def test_deleting_a_session_through_the_workspace(workspace: Workspace) -> None:
    info = workspace.create_session("Short-lived")
    workspace.delete_session(info.id)
    with pytest.raises(NotFoundError):
        workspace.find_session("Short-lived")


def test_agents_through_the_workspace(workspace: Workspace) -> None:
    default = workspace.default_agent()
    helper = workspace.create_agent("Helper", instructions="Be brief.", tools=["clock"])
    assert [a.name for a in workspace.list_agents()] == sorted([default.name, "Helper"])
    changed = workspace.update_agent(helper.id, instructions="Be very brief.")
    assert changed.instructions == "Be very brief."
    assert workspace.delete_agent(helper.id) == 0
    assert [a.id for a in workspace.list_agents()] == [default.id]


def test_first_run_offer_and_provider_settings_through_the_workspace(
    workspace: Workspace,
) -> None:
    assert workspace.first_run_offer_due()
    workspace.mark_first_run_offered()
    assert not workspace.first_run_offer_due()
    assert workspace.provider_settings().list() == []
