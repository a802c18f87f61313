"""The fast import: a reading thread, batches of whole conversations, token counts.

``import_conversations`` reads on a thread of its own and writes batches on the caller's
thread; by default each message is counted (on a counting thread) before its row is
written, and with ``count_tokens=False`` messages are stored without counts and
``count_missing_tokens`` fills them after. These tests hold it to the same promises as
the plain path: whole conversations only, in order, searchable at once, no duplicates,
and correct token counts once the pass is done.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import workbench.engine.workspace as workspace_module
from workbench.core.conversation import Conversation, Message, SkippedEntry
from workbench.core.tokens import get_counter
from workbench.engine import importing
from workbench.engine.importing import count_missing_tokens, import_conversations
from workbench.engine.workspace import Workspace


def _conversations(count: int, *, prefix: str = "c", words: str = "") -> list[Conversation]:
    return [
        Conversation(
            title=f"{prefix} {i}",
            source="tests",
            source_id=f"{prefix}-{i}",
            messages=[
                Message(role=("user", "assistant")[j % 2], content=f"{prefix} {i} says {j} {words}")
                for j in range(1 + i % 3)
            ],
        )
        for i in range(count)
    ]


def _reader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "workbench-import-reader"]


def _assert_counted(workspace: Workspace, session_ids: list[int]) -> None:
    counter = get_counter()
    for sid in session_ids:
        messages = workspace.repo.list_messages(sid)
        for m in messages:
            fresh = Message(role=m.role, content=m.content, name=m.name,
                            tool_calls=m.tool_calls, tool_call_id=m.tool_call_id)
            assert m.token_count == counter.count_message(fresh)
            assert m.token_encoding == counter.encoding_name
        total = sum(m.token_count or 0 for m in messages if m.state == "active")
        assert workspace.repo.get_session(sid).token_count == total


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches and hand-over chunks of a few conversations, so tests cross many."""
    monkeypatch.setattr(importing, "BATCH_CONVERSATIONS", 7)
    monkeypatch.setattr(importing, "BATCH_MESSAGES", 15)
    monkeypatch.setattr(importing, "MIN_BATCH_MESSAGES", 1)
    monkeypatch.setattr(importing, "CHUNK_CONVERSATIONS", 3)
    monkeypatch.setattr(importing, "QUEUE_CHUNKS", 2)


def test_deferred_counts_are_searchable_at_once_and_filled_by_the_pass(
    workspace: Workspace, tmp_path: Path, write_jsonl: Callable[[Path, Any], Path]
) -> None:
    path = write_jsonl(
        tmp_path / "chats.jsonl",
        [
            {"title": f"chat {i}", "messages": [
                {"role": "user", "content": f"question {i} about the quokka"},
                {"role": "assistant", "content": f"answer {i}, at length " * (i + 1)},
            ]}
            for i in range(30)
        ],
    )
    report = workspace.import_path(path, count_tokens=False)
    ids = [info.id for info, created in report.sessions if created]
    assert len(ids) == 30
    # Stored and indexed when import_path returns; the counts are not there yet.
    assert {h.session_id for h in workspace.search("quokka", limit=100)} == set(ids)
    assert workspace.repo.stats()["uncounted_messages"] == 60
    assert all(m.token_count is None for m in workspace.repo.list_messages(ids[0]))
    # Meanwhile the totals count what is missing.
    counter = get_counter()
    expected = sum(
        counter.count_message(Message(role=m.role, content=m.content))
        for m in workspace.repo.list_messages(ids[3])
    )
    assert workspace.repo.token_total(ids[3]) == expected

    steps = list(count_missing_tokens(workspace.repo, chunk=7))
    assert [done for done, _ in steps] == sorted(done for done, _ in steps)
    assert steps[-1] == (60, 60)
    assert len(steps) == 9  # 60 messages, 7 per transaction
    assert workspace.repo.stats()["uncounted_messages"] == 0
    _assert_counted(workspace, ids)
    assert workspace.repo.token_total(ids[3]) == expected
    assert list(workspace.count_missing_tokens()) == []


def test_stopping_the_counting_pass_keeps_whole_steps_and_the_next_pass_finishes(
    workspace: Workspace,
) -> None:
    report = import_conversations(workspace.repo, _conversations(12), count_tokens=False)
    ids = [info.id for info, _ in report.sessions]
    total = workspace.repo.stats()["uncounted_messages"]
    steps = count_missing_tokens(workspace.repo, chunk=5)
    assert next(steps) == (5, total)
    steps.close()  # stopped after one transaction
    assert workspace.repo.stats()["uncounted_messages"] == total - 5
    for sid in ids:  # every session total agrees with its counted messages
        messages = workspace.repo.list_messages(sid)
        active = sum(m.token_count or 0 for m in messages if m.state == "active")
        assert workspace.repo.get_session(sid).token_count == active
    assert list(count_missing_tokens(workspace.repo))[-1] == (total - 5, total - 5)
    _assert_counted(workspace, ids)


def test_counts_a_file_carries_are_kept(workspace: Workspace) -> None:
    conv = Conversation(
        title="carried",
        messages=[
            Message(role="user", content="hello", token_count=42, token_encoding="cl100k_base"),
            Message(role="assistant", content="hi"),
        ],
    )
    report = import_conversations(workspace.repo, [conv], count_tokens=False)
    sid = report.sessions[0][0].id
    assert report.sessions[0][0].token_count == 42
    assert list(workspace.count_missing_tokens())[-1] == (1, 1)
    kept, counted = workspace.repo.list_messages(sid)
    assert (kept.token_count, kept.token_encoding) == (42, "cl100k_base")
    assert counted.token_encoding == get_counter().encoding_name
    assert workspace.repo.get_session(sid).token_count == 42 + (counted.token_count or 0)


@pytest.mark.usefixtures("small_batches")
def test_many_batches_store_whole_conversations_in_order(workspace: Workspace) -> None:
    conversations = _conversations(50, words="wombat")
    bad = Conversation(title="bad one", source="tests", source_id="bad",
                       messages=[Message(role="robot", content="wombat")])
    skipped = SkippedEntry(entry="line 3", reason="not JSON.")
    items: list[Conversation | SkippedEntry] = [*conversations[:20], bad, skipped,
                                                *conversations[20:]]
    report = import_conversations(workspace.repo, items)
    assert [info.title for info, _ in report.sessions] == [c.title for c in conversations]
    ids = [info.id for info, _ in report.sessions]
    assert ids == sorted(ids)
    for info, conv in zip((i for i, _ in report.sessions), conversations, strict=True):
        assert [m.content for m in workspace.repo.list_messages(info.id)] == [
            m.content for m in conv.messages
        ]
        assert info.message_count == len(conv.messages)
    assert {s.entry for s in report.skipped} == {"bad", "line 3"}
    assert len({h.session_id for h in workspace.search("wombat", limit=500)}) == 50
    _assert_counted(workspace, ids)  # counted before storing (count_tokens=True)
    assert not _reader_threads()


@pytest.mark.usefixtures("small_batches")
def test_cancelling_while_the_reader_is_ahead_stores_exactly_what_was_read(
    workspace: Workspace,
) -> None:
    conversations = _conversations(200)
    seen: list[int] = []

    def progress(done: int, total: int | None) -> bool:
        seen.append(done)
        return done < 23

    report = import_conversations(
        workspace.repo, conversations, progress=progress, count_tokens=False
    )
    assert report.cancelled and seen[-1] == 23
    stored = workspace.list_sessions(include_archived=True)
    assert sorted(s.title for s in stored) == sorted(c.title for c in conversations[:23])
    for info in stored:
        assert info.message_count == len(workspace.repo.list_messages(info.id))
    assert not _reader_threads()
    # A second import completes the job without duplicating anything.
    again = import_conversations(workspace.repo, conversations, count_tokens=False)
    assert sum(created for _, created in again.sessions) == 200 - 23
    assert workspace.count_sessions(include_archived=True) == 200


@pytest.mark.usefixtures("small_batches")
def test_an_error_while_reading_is_reported_and_what_was_read_is_kept(
    workspace: Workspace,
) -> None:
    def items() -> Iterator[Conversation]:
        yield from _conversations(30)
        raise RuntimeError("the disk went away")

    before = sys.getswitchinterval()
    report = import_conversations(workspace.repo, items(), count_tokens=False)
    assert not _reader_threads()
    assert sys.getswitchinterval() == before
    # The conversations read before the error are stored whole; the report says where
    # reading stopped and why, instead of a traceback.
    assert len(report.sessions) == 30
    (stop,) = report.skipped
    assert stop.entry == "the rest of the file"
    assert "RuntimeError: the disk went away" in stop.reason and "30 conversation" in stop.reason
    assert workspace.count_sessions(include_archived=True) == 30
    for info in workspace.list_sessions(include_archived=True):
        assert info.message_count == len(workspace.repo.list_messages(info.id))


def test_the_switch_interval_comes_back_after_an_import(workspace: Workspace) -> None:
    before = sys.getswitchinterval()
    seen: list[float] = []

    def progress(done: int, total: int | None) -> bool:
        seen.append(sys.getswitchinterval())
        return True

    import_conversations(workspace.repo, _conversations(3), progress=progress)
    assert seen and max(seen) <= min(before, importing.IMPORT_SWITCH_INTERVAL)
    assert sys.getswitchinterval() == before


def test_the_cyclic_collector_is_paused_while_importing_and_runs_again_after(
    workspace: Workspace,
) -> None:
    assert gc.isenabled()
    seen: list[bool] = []

    def progress(done: int, total: int | None) -> bool:
        seen.append(gc.isenabled())
        return True

    import_conversations(workspace.repo, _conversations(3), progress=progress)
    assert seen == [False, False, False]
    assert gc.isenabled()

    def failing() -> Iterator[Conversation]:
        yield from _conversations(2)
        raise RuntimeError("the disk went away")

    import_conversations(workspace.repo, failing(), count_tokens=False)
    assert gc.isenabled()


@pytest.mark.usefixtures("small_batches")
def test_counts_made_while_importing_are_exact_and_stored_with_the_rows(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A tree's branches repeat their main conversation's messages (counted once through
    # the memo, emptied often here); tool calls, names and counts of another encoding
    # are counted as count_message does.
    monkeypatch.setattr(importing, "COUNT_MEMO_CHARS", 40)
    main = _conversations(40, words="numbat " * 5)
    branches = [
        Conversation(title=f"{c.title} branch", source="tests", source_id=f"{c.source_id}-b",
                     messages=[*(Message(role=m.role, content=m.content) for m in c.messages),
                               Message(role="assistant", content="another ending")])
        for c in main
    ]
    tools = Conversation(title="tools", messages=[
        Message(role="assistant", content="", tool_calls=[{"id": "t1", "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}]),
        Message(role="tool", content="numbat", name="read_file", tool_call_id="t1"),
        Message(role="user", content="numbat", token_count=5, token_encoding="other"),
    ])
    items = [x for pair in zip(main, branches, strict=True) for x in pair] + [tools]
    calls: list[int] = []
    fill = workspace.repo.fill_token_counts
    monkeypatch.setattr(workspace.repo, "fill_token_counts",
                        lambda *a, **k: calls.append(1) or fill(*a, **k))
    report = import_conversations(workspace.repo, items)
    ids = [info.id for info, _ in report.sessions]
    assert len(ids) == 81
    assert workspace.repo.stats()["uncounted_messages"] == 0
    _assert_counted(workspace, ids)
    assert list(workspace.count_missing_tokens()) == [] and not calls
    assert not [t for t in threading.enumerate() if t.name.startswith("workbench-import")]


def test_an_error_while_counting_stops_reading_and_keeps_what_was_stored(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(importing, "CHUNK_CONVERSATIONS", 2)
    monkeypatch.setattr(importing, "MIN_BATCH_MESSAGES", 1)
    seen: list[int] = []
    real = importing.fill_counts

    def fill_counts(messages: Any, counter: Any) -> int:
        seen.append(len(messages))
        if len(seen) == 3:
            raise RuntimeError("the counter broke")
        return real(messages, counter)

    monkeypatch.setattr(importing, "fill_counts", fill_counts)
    report = import_conversations(workspace.repo, _conversations(10))
    assert len(report.sessions) == 4  # the two chunks counted before the failure
    (stop,) = report.skipped
    assert "RuntimeError: the counter broke" in stop.reason
    assert workspace.repo.stats()["uncounted_messages"] == 0
    assert not [t for t in threading.enumerate() if t.name.startswith("workbench-import")]


def test_cli_import_counts_while_importing_and_counts_what_an_older_version_left(
    cli: Callable[..., Any], tmp_path: Path, write_jsonl: Callable[[Path, Any], Path],
    db_target: Path | str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    older = write_jsonl(tmp_path / "old.jsonl", [{"messages": [
        {"role": "user", "content": "stored by an older version"}]}])
    with Workspace.open(db_target) as ws:
        ws.import_path(older, count_tokens=False)
        assert ws.repo.stats()["uncounted_messages"] == 1
    path = write_jsonl(
        tmp_path / "new.jsonl",
        [{"messages": [{"role": "user", "content": f"count me {i}"}]} for i in range(5)],
    )
    passes: list[int] = []
    real = importing.count_missing_tokens

    def counting_pass(repo: Any, **kwargs: Any) -> Iterator[tuple[int, int]]:
        for step in real(repo, **kwargs):
            passes.append(step[0])
            yield step

    # The workspace calls the pass by the name it imported.
    monkeypatch.setattr(workspace_module, "count_missing_tokens", counting_pass)
    assert cli("import", path, "--json").code == 0
    assert passes == [1]  # only the older version's message went through the pass
    assert cli("stats", "--json").json()["uncounted_messages"] == 0


def test_cli_import_fills_the_counts_after_storing(
    cli: Callable[..., Any], tmp_path: Path, write_jsonl: Callable[[Path, Any], Path]
) -> None:
    path = write_jsonl(
        tmp_path / "c.jsonl",
        [{"messages": [{"role": "user", "content": f"count me {i}"}]} for i in range(5)],
    )
    result = cli("import", path, "--json")
    assert result.code == 0, result.err
    assert cli("stats", "--json").json()["uncounted_messages"] == 0
    sessions = cli("sessions", "--json").json()
    assert len(sessions) == 5 and all(s["tokens"] > 0 for s in sessions)
    again = cli("import", path, "--json").json()
    assert [s["id"] for s in again["sessions"]] == [s["id"] for s in result.json()["sessions"]]
    assert len(cli("sessions", "--json").json()) == 5
