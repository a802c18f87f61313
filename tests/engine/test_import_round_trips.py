"""Import, export, import again: what a hostile or foreign file held comes back the same.

Each test imports a small file of its own, exports the sessions in each export format
and reads the export back, on both stores.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from workbench.engine.workspace import Workspace

EXPORT_FORMATS = ["context-json", "openai-jsonl", "markdown"]


def _sessions(cli: Callable[..., Any]) -> list[dict[str, Any]]:
    return sorted(cli("sessions", "--json").json(), key=lambda s: s["title"])


# --------------------------------------------------------------------------- numbers


def test_numbers_json_cannot_hold_are_kept_as_their_names_and_export(
    cli: Callable[..., Any], workspace: Workspace, tmp_path: Path
) -> None:
    # A dataset written by Python holds NaN, and 1e400 decodes to infinity: both were
    # stored as they came (text that is not JSON in the metadata column), and every
    # export of the session then failed ('Out of range float values are not JSON
    # compliant').
    text = json.dumps([
        {"task_id": 1, "reward": "@nan@", "traj": [
            {"role": "user", "content": "hello", "score": "@inf@"},
            {"role": "assistant", "content": "hi"}]},
    ]).replace('"@nan@"', "NaN").replace('"@inf@"', "-1e400")
    source = tmp_path / "trajectories.json"
    source.write_text(text, encoding="utf-8")

    assert cli("import", source).code == 0

    (session,) = _sessions(cli)
    shown = cli("show", session["id"], "--json").json()
    assert shown["metadata"]["reward"] == "NaN"
    assert shown["messages"][0]["metadata"]["score"] == "-Infinity"
    for fmt in EXPORT_FORMATS:
        out = tmp_path / f"export-{fmt}"
        result = cli("export", session["id"], "--format", fmt, "-o", out)
        assert result.code == 0, result.err
    # The file read again is the same conversation: nothing new.
    again = cli("import", source, "--json").json()
    assert again["counts"] == {"created": 0, "updated": 0, "unchanged": 1, "skipped": 0}


# --------------------------------------------------------------------------- ids


def _chatgpt(conv_id: str, text: str) -> dict[str, Any]:
    def node(node_id: str, parent: str | None, children: list[str], role: str | None,
             words: str = "") -> dict[str, Any]:
        message = None if role is None else {
            "id": node_id, "author": {"role": role}, "create_time": 1_714_585_000,
            "content": {"content_type": "text", "parts": [words]}}
        return {"id": node_id, "parent": parent, "children": children, "message": message}

    return {"title": text, "conversation_id": conv_id, "create_time": 1_714_585_000,
            "current_node": "a", "mapping": {
                "root": node("root", None, ["u"], None),
                "u": node("u", "root", ["a"], "user", text),
                "a": node("a", "u", [], "assistant", f"re: {text}")}}


def _claude(conv_id: str, text: str) -> dict[str, Any]:
    return {"uuid": conv_id, "name": text, "created_at": "2024-05-01T10:00:00Z",
            "chat_messages": [{"sender": "human", "text": text},
                              {"sender": "assistant", "text": f"re: {text}"}]}


def _openwebui(conv_id: str, text: str) -> dict[str, Any]:
    return {"id": conv_id, "title": text, "created_at": 1_714_585_000, "chat": {"history": {
        "currentId": "a", "messages": {
            "u": {"id": "u", "parentId": None, "childrenIds": ["a"], "role": "user",
                  "content": text},
            "a": {"id": "a", "parentId": "u", "childrenIds": [], "role": "assistant",
                  "content": f"re: {text}"}}}}}


@pytest.mark.parametrize("build", [_chatgpt, _claude, _openwebui])
def test_another_conversation_under_an_id_already_read_is_imported_not_called_a_copy(
    cli: Callable[..., Any], tmp_path: Path, build: Callable[[str, str], dict[str, Any]]
) -> None:
    # The second conversation was skipped as 'appears again; its first copy was
    # imported' although it held other messages: recognised by its id alone.
    source = tmp_path / "export.json"
    source.write_text(json.dumps([build("same-id", "first"), build("same-id", "second"),
                                  build("same-id", "first")]), encoding="utf-8")

    report = cli("import", source, "--json").json()

    assert report["counts"]["created"] == 2
    # The true copy (item 2) is still skipped as one, naming where the first was.
    (skipped,) = report["skipped"]
    assert skipped["entry"] == "item 2" and "(item 0)" in skipped["reason"]
    assert [s["title"] for s in _sessions(cli)] == ["first", "second"]
    again = cli("import", source, "--json").json()
    assert again["counts"]["created"] == 0 and again["counts"]["unchanged"] == 2


# --------------------------------------------------------------------------- exports


def _import_two_chatgpt_chats(cli: Callable[..., Any], tmp_path: Path) -> list[dict[str, Any]]:
    source = tmp_path / "conversations.json"
    source.write_text(json.dumps([_chatgpt("conv-a", "alpha"), _chatgpt("conv-b", "beta")]),
                      encoding="utf-8")
    assert cli("import", source).code == 0
    return _sessions(cli)


@pytest.mark.parametrize("fmt", ["context-json", "openai-jsonl"])
def test_an_export_read_back_into_its_database_adds_nothing(
    cli: Callable[..., Any], tmp_path: Path, fmt: str
) -> None:
    # The export did not say where its sessions came from: read back, each ChatGPT chat
    # was a new context-json (or openai) conversation, and came in a second time.
    sessions = _import_two_chatgpt_chats(cli, tmp_path)
    out = tmp_path / f"backup.{fmt}"
    assert cli("export", *[s["id"] for s in sessions], "--format", fmt, "-o", out).code == 0

    report = cli("import", out, "--json").json()

    assert report["counts"] == {"created": 0, "updated": 0, "unchanged": 2, "skipped": 0}
    assert len(_sessions(cli)) == 2


@pytest.mark.parametrize("fmt", ["context-json", "openai-jsonl"])
def test_an_export_read_into_another_database_keeps_where_its_sessions_came_from(
    cli: Callable[..., Any], tmp_path: Path, fmt: str
) -> None:
    sessions = _import_two_chatgpt_chats(cli, tmp_path)
    out = tmp_path / f"backup.{fmt}"
    assert cli("export", *[s["id"] for s in sessions], "--format", fmt, "-o", out).code == 0
    other = tmp_path / "other.db"

    assert cli("import", out, db=other).code == 0

    moved = sorted(cli("sessions", "--json", db=other).json(), key=lambda s: s["title"])
    shown = [cli("show", s["id"], "--json", db=other).json() for s in moved]
    assert [(s["source"], s["source_id"]) for s in shown] == [
        ("chatgpt", "conv-a"), ("chatgpt", "conv-b")]
    # The ChatGPT export itself is then known there too.
    again = cli("import", tmp_path / "conversations.json", "--json", db=other).json()
    assert again["counts"]["unchanged"] == 2 and again["counts"]["created"] == 0


def test_a_context_file_export_writes_no_session_time_its_source_never_gave(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    # A session whose source had no time holds the import's time (marked time_missing);
    # the context-file export wrote it as the session's own created_at and updated_at.
    source = tmp_path / "data.json"
    source.write_text(json.dumps([{"conversations": [{"from": "human", "value": "hi"},
                                                     {"from": "gpt", "value": "hello"}]}]),
                      encoding="utf-8")
    assert cli("import", source).code == 0
    (session,) = _sessions(cli)
    out = tmp_path / "session.json"

    assert cli("export", session["id"], "--format", "context-json", "-o", out).code == 0

    written = json.loads(out.read_text(encoding="utf-8"))
    assert "created_at" not in written and "updated_at" not in written
    assert [e["timestamp"] for e in written["recent_history"]] == [None, None]
    assert written["time_missing"] is True


@pytest.mark.parametrize("fmt", ["context-json", "openai-jsonl"])
def test_an_export_says_it_leaves_out_the_pin_and_archive_marks(
    cli: Callable[..., Any], tmp_path: Path, fmt: str
) -> None:
    # Read back, a pinned session was not pinned, and the export had said nothing.
    (session, _other) = _import_two_chatgpt_chats(cli, tmp_path)
    assert cli("session", "pin", session["id"]).code == 0

    result = cli("export", session["id"], "--format", fmt, "-o", tmp_path / "out", "--json")

    assert result.json()["not_exported"] == ["the pin or archive mark of 1 session(s)"]
