"""Importing and exporting through the engine: the "Done when" checks of issue 2.

Round trips export a session built through the repository and import it into a fresh
database; the tau-bench checks read the suite's own log in that shape, and the real sample
too when ``../shared`` is present.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from workbench.core.conversation import Conversation, Message, SkippedEntry
from workbench.core.tokens import get_counter
from workbench.engine.importing import import_conversations
from workbench.engine.workspace import Workspace


def _full_message(m: Message) -> dict[str, Any]:
    """Everything a context-file round trip must keep of a message."""
    return {
        "position": m.position,
        "role": m.role,
        "content": m.content,
        "name": m.name,
        "tool_calls": m.tool_calls,
        "tool_call_id": m.tool_call_id,
        "state": m.state,
        "metadata": m.public_metadata(),
        "important": m.important,
        "token_count": m.token_count,
        "token_encoding": m.token_encoding,
        "created_at": m.created_at,
        "parts": m.parts,
    }


def _openai_message(m: Message) -> dict[str, Any]:
    """What the OpenAI messages format carries of a message."""
    return {
        "position": m.position,
        "role": m.role,
        "content": m.content,
        "name": m.name,
        "tool_calls": m.tool_calls,
        "tool_call_id": m.tool_call_id,
    }


# -- round trips ------------------------------------------------------------------------------


def test_context_json_round_trip_loses_nothing(
    cli: Callable[..., Any],
    workspace: Workspace,
    tmp_path: Path,
    build_rich_session: Callable[[Workspace], int],
) -> None:
    session_id = build_rich_session(workspace)
    info, messages, context = workspace.session_view(session_id)
    exported = tmp_path / "rich.json"
    assert cli("export", session_id, "--format", "context-json", "-o", exported).code == 0

    fresh = tmp_path / "fresh.db"
    result = cli("import", exported, "--json", db=fresh)
    assert result.code == 0, result.err
    data = result.json()
    assert data["skipped"] == []
    [imported] = data["sessions"]
    assert imported["messages"] == len(messages)

    with Workspace.open(fresh) as ws2:
        info2, messages2, context2 = ws2.session_view(imported["id"])
    assert [_full_message(m) for m in messages2] == [_full_message(m) for m in messages]
    assert context2.to_json() == context.to_json()
    assert (info2.title, info2.tags) == (info.title, info.tags)
    assert (info2.created_at, info2.updated_at) == (info.created_at, info.updated_at)
    assert info2.token_count == info.token_count
    # The states, flags and context the fixture set really are in the comparison.
    assert [m.state for m in messages2].count("folded") == 3
    assert [m.state for m in messages2].count("evicted") == 1
    assert sum(m.important for m in messages2) == 2
    assert context2.tool_stats.failures == 1 and context2.token_usage.output_tokens == 321

    again = tmp_path / "again.json"
    reexport = cli("export", imported["id"], "--format", "context-json", "-o", again, db=fresh)
    assert reexport.code == 0, reexport.err
    assert json.loads(again.read_text("utf-8")) == json.loads(exported.read_text("utf-8"))


def test_context_json_round_trip_of_several_sessions(
    cli: Callable[..., Any],
    workspace: Workspace,
    tmp_path: Path,
    build_rich_session: Callable[[Workspace], int],
    sample_session_file: Path,
) -> None:
    first = build_rich_session(workspace)
    second = workspace.import_path(sample_session_file).sessions[0][0].id
    out = tmp_path / "both.json"
    assert cli("export", first, second, "--format", "context-json", "-o", out).code == 0
    fresh = tmp_path / "fresh.db"
    data = cli("import", out, "--json", db=fresh).json()
    assert [s["messages"] for s in data["sessions"]] == [
        workspace.repo.get_session(first).message_count,
        workspace.repo.get_session(second).message_count,
    ]
    with Workspace.open(fresh) as ws2:
        for original, copy in zip((first, second), data["sessions"], strict=True):
            _, msgs, ctx = workspace.session_view(original)
            _, msgs2, ctx2 = ws2.session_view(copy["id"])
            assert [_full_message(m) for m in msgs2] == [_full_message(m) for m in msgs]
            assert ctx2.to_json() == ctx.to_json()


def test_openai_jsonl_round_trip_keeps_what_the_format_carries(
    cli: Callable[..., Any],
    workspace: Workspace,
    tmp_path: Path,
    build_rich_session: Callable[[Workspace], int],
) -> None:
    session_id = build_rich_session(workspace)
    _, messages, _ = workspace.session_view(session_id)
    exported = tmp_path / "rich.jsonl"
    assert cli("export", session_id, "--format", "openai-jsonl", "-o", exported).code == 0
    line = json.loads(exported.read_text("utf-8").splitlines()[0])
    # A tool-call message without text is written with null content, as the API sends it.
    assert line["messages"][2]["content"] is None

    fresh = tmp_path / "fresh.db"
    result = cli("import", exported, "--json", db=fresh)
    assert result.code == 0, result.err
    [imported] = result.json()["sessions"]
    with Workspace.open(fresh) as ws2:
        _, messages2, _ = ws2.session_view(imported["id"])
    assert [_openai_message(m) for m in messages2] == [_openai_message(m) for m in messages]
    assert all(m.token_count and m.token_encoding == "o200k_base" for m in messages2)


def test_markdown_export_has_every_message(
    cli: Callable[..., Any],
    workspace: Workspace,
    tmp_path: Path,
    build_rich_session: Callable[[Workspace], int],
) -> None:
    session_id = build_rich_session(workspace)
    info, messages, context = workspace.session_view(session_id)
    out = tmp_path / "rich.md"
    assert cli("export", session_id, "--format", "markdown", "-o", out).code == 0
    text = out.read_text("utf-8")
    assert info.title in text
    for m in messages:
        assert m.content in text
        for call in m.tool_calls or []:
            assert call["function"]["name"] in text
            assert call["id"] in text
    assert context.summary in text
    for fact in context.facts:
        assert fact in text


# -- tau-bench: the "Done when" of issue 2 -----------------------------------------------------


def _assert_same_as_raw(shown: dict[str, Any], traj: list[dict[str, Any]]) -> None:
    assert len(shown["messages"]) == len(traj)
    for i, (m, raw) in enumerate(zip(shown["messages"], traj, strict=True)):
        where = f"session {shown['id']} message {i}"
        assert m["position"] == i, where
        assert m["role"] == raw["role"], where
        if raw.get("content") is None:
            assert m["content"] in ("", None), where
        else:
            assert m["content"] == raw["content"], where
        assert m["tool_calls"] == raw.get("tool_calls"), where
        assert m["tool_call_id"] == raw.get("tool_call_id"), where
        assert m["name"] == raw.get("name"), where
        assert isinstance(m["token_count"], int) and m["token_count"] > 0, where


def test_tau_bench_import_keeps_every_message_and_tool_call(
    cli: Callable[..., Any], tau_sample: Path
) -> None:
    raw = json.loads(tau_sample.read_text("utf-8"))
    total = sum(len(item["traj"]) for item in raw)
    result = cli("import", tau_sample, "--json")
    assert result.code == 0, result.err
    data = result.json()
    assert data["skipped"] == []
    assert len(data["sessions"]) == len(raw) == 20
    assert sum(s["messages"] for s in data["sessions"]) == total

    calls_seen = 0
    for item, session in zip(raw, data["sessions"], strict=True):
        assert session["messages"] == len(item["traj"])
        shown = cli("show", session["id"], "--json")
        assert shown.code == 0, shown.err
        _assert_same_as_raw(shown.json(), item["traj"])
        calls_seen += sum(len(m["tool_calls"] or []) for m in shown.json()["messages"])
    assert calls_seen == sum(len(m.get("tool_calls") or []) for i in raw for m in i["traj"])
    assert calls_seen > 0

    again = cli("import", tau_sample, "--json")
    assert again.code == 0, again.err
    assert [s["id"] for s in again.json()["sessions"]] == [s["id"] for s in data["sessions"]]
    assert len(cli("sessions", "--json").json()) == 20
    assert cli("stats", "--json").json()["messages"] == total
    text = cli("import", tau_sample)
    assert "0 session(s)" in text.out and "20 session(s) were already imported" in text.out


def test_tau_bench_search_refund_is_ranked(cli: Callable[..., Any], tau_sample: Path) -> None:
    assert cli("import", tau_sample).code == 0
    result = cli("search", "refund", "--json")
    assert result.code == 0, result.err
    hits = result.json()
    assert hits
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert len(set(scores)) > 1, "a ranking gives different scores to different hits"
    shown: dict[int, dict[int, str]] = {}
    for hit in hits:
        assert {"session_id", "message_id", "role", "snippet", "score"} <= set(hit)
        if hit["message_id"] is None:
            continue
        if hit["session_id"] not in shown:
            view = cli("show", hit["session_id"], "--json").json()
            shown[hit["session_id"]] = {m["id"]: m["content"] for m in view["messages"]}
        assert "refund" in shown[hit["session_id"]][hit["message_id"]].lower()
        assert "refund" in hit["snippet"].lower()


def test_tau_bench_done_when_command_as_a_child_process(
    run_workbench: Callable[..., Any], tau_sample: Path
) -> None:
    # The command of the issue, run as a child process from the repository root.
    raw = json.loads(tau_sample.read_text("utf-8"))
    result = run_workbench("import", str(tau_sample), "--json")
    assert result.code == 0, result.err
    sessions = result.json()["sessions"]
    assert len(sessions) == 20
    assert sum(s["messages"] for s in sessions) == sum(len(item["traj"]) for item in raw)
    hits = run_workbench("search", "refund", "--json")
    assert hits.code == 0, hits.err
    scores = [h["score"] for h in hits.json()]
    assert scores and scores == sorted(scores, reverse=True)


# -- token counts, duplicates, replace ----------------------------------------------------------


def test_token_counts_are_filled_on_import(
    workspace: Workspace,
    tmp_path: Path,
    sample_session_file: Path,
    write_jsonl: Callable[[Path, Any], Path],
) -> None:
    chats = write_jsonl(
        tmp_path / "c.jsonl",
        [
            {
                "messages": [
                    {"role": "user", "content": "Count me, please."},
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "k",
                                "type": "function",
                                "function": {"name": "count", "arguments": "{}"},
                            }
                        ],
                    },
                    {"role": "tool", "tool_call_id": "k", "name": "count", "content": "42"},
                ]
            },
            {"messages": [{"role": "user", "content": "And me."}]},
        ],
    )
    reports = [workspace.import_path(sample_session_file), workspace.import_path(chats)]
    counter = get_counter()
    infos = [info for report in reports for info, _ in report.sessions]
    assert len(infos) == 3
    for info in infos:
        messages = workspace.repo.list_messages(info.id)
        assert messages
        for m in messages:
            assert m.token_encoding == "o200k_base"
            assert isinstance(m.token_count, int) and m.token_count > 0
            fresh = Message(
                role=m.role,
                content=m.content,
                name=m.name,
                tool_calls=m.tool_calls,
                tool_call_id=m.tool_call_id,
                parts=m.parts,
            )
            assert m.token_count == counter.count_message(fresh)
        active = sum(m.token_count or 0 for m in messages if m.state == "active")
        assert workspace.repo.get_session(info.id).token_count == active
    assert workspace.repo.stats()["uncounted_messages"] == 0


def test_reimporting_does_not_duplicate(
    cli: Callable[..., Any],
    tmp_path: Path,
    write_jsonl: Callable[[Path, Any], Path],
    sample_session_file: Path,
) -> None:
    chats = write_jsonl(
        tmp_path / "c.jsonl",
        [{"messages": [{"role": "user", "content": f"question {i}"}]} for i in range(3)],
    )
    for path in (chats, sample_session_file):
        first = cli("import", path, "--json").json()
        second = cli("import", path, "--json").json()
        assert [s["id"] for s in second["sessions"]] == [s["id"] for s in first["sessions"]]
    assert len(cli("sessions", "--json").json()) == 4
    assert cli("stats", "--json").json()["messages"] == 3 + len(
        json.loads(sample_session_file.read_text("utf-8"))["recent_history"]
    )


def test_same_file_name_in_two_folders_imports_both(
    cli: Callable[..., Any], tmp_path: Path, write_jsonl: Callable[[Path, Any], Path]
) -> None:
    # Two exports that happen to share a file name are different conversations.
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = write_jsonl(
        tmp_path / "a" / "chats.jsonl",
        [
            {"messages": [{"role": "user", "content": "apples from folder a"}]},
            {"messages": [{"role": "user", "content": "pears from folder a"}]},
        ],
    )
    second = write_jsonl(
        tmp_path / "b" / "chats.jsonl",
        [
            {"messages": [{"role": "user", "content": "bananas from folder b"}]},
            {"messages": [{"role": "user", "content": "kiwis from folder b"}]},
        ],
    )
    assert cli("import", first).code == 0
    assert cli("import", second).code == 0
    assert len(cli("sessions", "--json").json()) == 4
    assert cli("search", "bananas", "--json").json()


def test_two_runs_with_the_same_task_ids_import_both(
    cli: Callable[..., Any], tmp_path: Path, write_json: Callable[[Path, Any], Path]
) -> None:
    # tau-bench numbers tasks from 0 in every domain and run.
    airline = write_json(
        tmp_path / "airline.json",
        [
            {"task_id": 0, "trial": 0, "traj": [{"role": "user", "content": "change my flight"}]},
        ],
    )
    retail = write_json(
        tmp_path / "retail.json",
        [
            {"task_id": 0, "trial": 0, "traj": [{"role": "user", "content": "return my lamp"}]},
        ],
    )
    assert cli("import", airline).code == 0
    assert cli("import", retail).code == 0
    assert cli("stats", "--json").json()["sessions"] == 2
    assert cli("search", "lamp", "--json").json()


def test_sessions_exported_from_two_databases_import_side_by_side(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    # Both databases number their first hand-made session 1; the exports still differ.
    files = []
    for name, text in (("mine", "my own notes about otters"), ("yours", "your notes on owls")):
        with Workspace.open(tmp_path / f"{name}.db") as ws:
            info = ws.repo.create_session(f"{name} notes")
            ws.repo.append_messages(info.id, [Message(role="user", content=text)])
            files.append(tmp_path / f"{name}.json")
            ws.export_sessions([info.id], "context-json", files[-1])
    for path in files:
        assert cli("import", path).code == 0
    assert {s["title"] for s in cli("sessions", "--json").json()} == {"mine notes", "yours notes"}


def test_replace_reimports_in_place(
    cli: Callable[..., Any], tmp_path: Path, write_json: Callable[[Path, Any], Path]
) -> None:
    session: dict[str, Any] = {
        "session_id": "s-1",
        "recent_history": [{"role": "user", "content": "first version"}],
    }
    path = write_json(tmp_path / "s.json", session)
    [first] = cli("import", path, "--json").json()["sessions"]
    [kept] = cli("import", path, "--json").json()["sessions"]
    assert kept == {**first, "status": "unchanged"}
    # The file grew: the new turn is appended to the session imported before.
    session["recent_history"].append({"role": "assistant", "content": "second version"})
    write_json(path, session)
    [grown] = cli("import", path, "--json").json()["sessions"]
    assert (grown["id"], grown["status"], grown["messages"]) == (first["id"], "updated", 2)
    # An edited file is a different conversation, unless --replace says to replace it.
    session["recent_history"][0]["content"] = "first version, edited"
    write_json(path, session)
    [replaced] = cli("import", path, "--replace", "--json").json()["sessions"]
    assert replaced["id"] == first["id"]
    assert replaced["status"] == "updated"
    assert replaced["messages"] == 2
    assert [m["content"] for m in cli("show", first["id"], "--json").json()["messages"]] == [
        "first version, edited",
        "second version",
    ]
    assert cli("search", "version", "--role", "assistant", "--json").json()
    assert len(cli("sessions", "--json").json()) == 1


def test_openai_json_array_with_a_bad_item(
    cli: Callable[..., Any], tmp_path: Path, write_json: Callable[[Path, Any], Path]
) -> None:
    path = write_json(
        tmp_path / "items.json",
        [
            {"messages": [{"role": "user", "content": "kept one"}]},
            {"messages": [{"role": "user", "content": "narwhalword"}, {"content": "no role"}]},
            {"messages": [{"role": "user", "content": "kept two"}]},
        ],
    )
    data = cli("import", path, "--json").json()
    # The bad message costs only itself; its conversation keeps the good one.
    assert [s["messages"] for s in data["sessions"]] == [1, 1, 1]
    assert [s["entry"] for s in data["skipped"]] == ["item 1 messages[1]"]
    assert "role is missing" in data["skipped"][0]["reason"]
    hits = cli("search", "narwhalword", "--json").json()
    assert [h["kind"] for h in hits if h["kind"] == "message"] == ["message"]


# -- the per-conversation fallback of import_conversations -----------------------------------


def _conversation(title: str, *contents: str, role: str = "user") -> Conversation:
    return Conversation(
        title=title,
        source="tests",
        source_id=title,
        messages=[
            Message(role=role if i == 1 else "user", content=c) for i, c in enumerate(contents)
        ],
    )


def test_import_conversations_stores_the_good_and_skips_the_bad(workspace: Workspace) -> None:
    good_a = _conversation("alpha", "alpha question", "alpha answer", role="assistant")
    bad = _conversation("broken", "okapiword question", "okapiword reply", role="robot")
    good_c = _conversation("gamma", "gamma question")
    upstream = SkippedEntry(entry="line 9", reason="not valid JSON.")
    report = import_conversations(workspace.repo, [good_a, bad, upstream, good_c])

    assert [info.title for info, created in report.sessions] == ["alpha", "gamma"]
    assert all(created for _, created in report.sessions)
    assert [s.message_count for s, _ in report.sessions] == [2, 1]
    by_entry = {s.entry: s.reason for s in report.skipped}
    assert "line 9" in by_entry
    [(bad_entry, reason)] = [(e, r) for e, r in by_entry.items() if e != "line 9"]
    assert "broken" in bad_entry
    assert "robot" in reason
    assert not report.cancelled

    titles = {s.title for s in workspace.list_sessions(include_archived=True)}
    assert titles == {"alpha", "gamma"}
    assert workspace.search("okapiword") == []
    assert workspace.repo.stats()["messages"] == 3
    for info, _ in report.sessions:
        assert all(m.token_encoding == "o200k_base" for m in workspace.repo.list_messages(info.id))


def test_import_conversations_of_only_bad_entries(workspace: Workspace) -> None:
    bad = _conversation("broken", "x", "y", role="robot")
    report = import_conversations(workspace.repo, [bad])
    assert report.sessions == []
    assert len(report.skipped) == 1
    assert workspace.count_sessions(include_archived=True) == 0


def test_workspace_import_conversation_refuses_a_bad_one(workspace: Workspace) -> None:
    from workbench.errors import WorkbenchError

    info = workspace.import_conversation(_conversation("fine", "hello there"))
    assert info.message_count == 1
    with pytest.raises(WorkbenchError, match="robot"):
        workspace.import_conversation(_conversation("bad", "a", "b", role="robot"))
    assert workspace.count_sessions(include_archived=True) == 1


def test_export_progress_counts_sessions_and_stopping_writes_nothing(
    workspace: Workspace, tmp_path: Path, build_rich_session: Callable[[Workspace], int],
) -> None:
    ids = [build_rich_session(workspace) for _ in range(3)]
    out = tmp_path / "all.md"
    seen: list[tuple[int, int | None]] = []
    written = workspace.export_sessions(
        ids, "markdown", out, progress=lambda done, total: seen.append((done, total)) or True
    )
    assert [info.id for info in written] == ids
    assert seen == [(1, 3), (2, 3), (3, 3)]
    before = out.read_bytes()
    # Stopped after the second session: nothing written, the old file left as it was.
    stopped = workspace.export_sessions(ids, "markdown", out,
                                        progress=lambda done, total: done < 2)
    assert stopped == []
    assert out.read_bytes() == before
    fresh = tmp_path / "never.md"
    assert workspace.export_sessions(ids, "markdown", fresh, progress=lambda d, t: False) == []
    assert not fresh.exists()


@pytest.mark.sqlite_only("SQLite's file lock")
def test_an_import_into_a_database_another_program_locks_stops_at_once(
    db_target: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database no write can reach is the import's failure, said once: not a skipped
    entry per conversation, each after the lock's whole wait (20,000 of them took hours)."""
    import sqlite3

    from workbench.errors import DatabaseUnavailableError
    from workbench.store import db as db_module

    source = tmp_path / "chats.jsonl"
    source.write_text("".join(
        json.dumps({"title": f"Chat {i}", "messages": [{"role": "user", "content": f"hi {i}"}]})
        + "\n" for i in range(3)
    ), encoding="utf-8")
    Workspace.open(db_target).close()
    monkeypatch.setattr(db_module, "BUSY_TIMEOUT_MS", 50)
    other = sqlite3.connect(str(db_target), isolation_level=None)
    try:
        other.execute("BEGIN EXCLUSIVE")
        with Workspace.open(db_target) as ws, pytest.raises(DatabaseUnavailableError) as caught:
            ws.import_path(source)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert "another program kept it locked" in str(caught.value)
    with Workspace.open(db_target) as ws:
        assert ws.count_sessions() == 0
        # Once the lock is gone, the same import stores everything.
        report = ws.import_path(source)
        assert report.counts()["created"] == 3 and report.skipped == []
