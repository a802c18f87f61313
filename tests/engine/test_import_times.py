"""Times are never invented by an import (issue 16 item 7).

A source without times (ShareGPT, tau-bench), a ChatGPT conversation dated epoch 0 with
untimed messages, an llm thread written just after its first turn, and an llm
conversation of the old schema continued by a newer llm: what the source gives is kept,
what it does not give stays missing, and the session and the window say so.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from workbench.engine.workspace import Workspace

CliRunner = Callable[..., Any]


def _import(ws: Workspace, path: Path) -> list[int]:
    report = ws.import_path(path)
    assert not report.skipped, report.skipped
    return [info.id for info, _ in report.sessions]


def test_a_source_without_times_leaves_them_missing(tmp_path: Path, cli: CliRunner,
                                                     db_target: Path | str) -> None:
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps([{"conversations": [
        {"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}]), "utf-8")
    with Workspace.open(db_target) as ws:
        [sid] = _import(ws, path)
        _, messages, _ = ws.session_view(sid)
        metadata = ws.session_metadata(sid)
        # Exported and read back, they are still missing.
        out = tmp_path / "out.json"
        ws.export_sessions([sid], "context-json", out)

    assert [m.created_at for m in messages] == [None, None]
    assert metadata["time_missing"] is True
    assert [e["timestamp"] for e in json.loads(out.read_text("utf-8"))["recent_history"]] == [
        None, None]
    assert "Time unknown: the source gave none" in cli("show", sid).out


def chatgpt_epoch_zero() -> list[dict[str, Any]]:
    def node(node_id: str, parent: str | None, role: str | None, text: str = "") -> dict:
        message = None if role is None else {
            "id": node_id, "author": {"role": role}, "create_time": None,
            "content": {"content_type": "text", "parts": [text]}, "metadata": {},
        }
        return {"id": node_id, "message": message, "parent": parent,
                "children": []}

    nodes = [node("r", None, None), node("u", "r", "user", "q"), node("a", "u", "assistant", "a")]
    nodes[0]["children"], nodes[1]["children"] = ["u"], ["a"]
    return [{"title": "Old", "create_time": 0, "update_time": 0, "current_node": "a",
             "id": "c-0", "mapping": {n["id"]: n for n in nodes}}]


def test_an_epoch_zero_conversation_is_not_dated_1970(
    tmp_path: Path, db_target: Path | str
) -> None:
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(chatgpt_epoch_zero()), "utf-8")
    with Workspace.open(db_target) as ws:
        [sid] = _import(ws, path)
        info, messages, _ = ws.session_view(sid)
        metadata = ws.session_metadata(sid)

    assert info.created_at.year > 1970 and info.updated_at >= info.created_at
    assert metadata["time_missing"] is True
    assert [m.created_at for m in messages] == [None, None]


def test_the_session_list_says_when_the_time_is_unknown(tmp_path: Path, db_path: Path,
                                                         qtbot: Any) -> None:
    from PySide6.QtCore import Qt

    from workbench.gui.models.sessions import SessionListModel

    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(chatgpt_epoch_zero()), "utf-8")
    with Workspace.open(db_path) as ws:
        _import(ws, path)
        model = SessionListModel(ws)  # kept: an index must not outlive its model
        tip = model.index(0, 0).data(Qt.ItemDataRole.ToolTipRole)

    assert "Time unknown (imported" in tip


LLM_TABLES = """
CREATE TABLE conversations (id TEXT PRIMARY KEY, name TEXT, model TEXT);
CREATE TABLE responses (id TEXT PRIMARY KEY, model TEXT, prompt TEXT, system TEXT,
    prompt_json TEXT, options_json TEXT, response TEXT, response_json TEXT,
    conversation_id TEXT, duration_ms INTEGER, datetime_utc TEXT, input_tokens INTEGER,
    output_tokens INTEGER, token_details TEXT, schema_id TEXT, resolved_model TEXT);
CREATE TABLE messages (hash TEXT PRIMARY KEY, parent_hash TEXT, role TEXT,
    provider_metadata TEXT);
CREATE TABLE parts (id INTEGER PRIMARY KEY, message_hash TEXT, position INTEGER, type TEXT,
    tool_name TEXT, text TEXT, payload TEXT);
CREATE TABLE threads (id TEXT PRIMARY KEY, name TEXT, tip_message_hash TEXT,
    forked_from TEXT, datetime_utc TEXT);
CREATE TABLE turns (id TEXT PRIMARY KEY, thread_id TEXT, parent_message_hash TEXT,
    tip_message_hash TEXT, model TEXT, resolved_model TEXT, options_json TEXT,
    schema_id TEXT, input_tokens INTEGER, output_tokens INTEGER, token_details TEXT,
    duration_ms INTEGER, datetime_utc TEXT, response_json TEXT);
"""


def continued_llm_log(path: Path) -> None:
    """An old-schema conversation of two exchanges, continued by a newer llm: the thread
    holds all four old messages (no turns) and one new turn."""
    conn = sqlite3.connect(path)
    conn.executescript(LLM_TABLES)
    conn.execute("INSERT INTO conversations VALUES ('c1', 'ships', 'gpt-4o-mini')")
    old = [("r1", "first question", "first answer", "2024-01-10T08:00:00"),
           ("r2", "second question", "second answer", "2024-01-10T08:05:00")]
    for rid, prompt, reply, when in old:
        conn.execute("INSERT INTO responses (id, model, prompt, response, conversation_id,"
                     " datetime_utc) VALUES (?, 'gpt-4o-mini', ?, ?, 'c1', ?)",
                     (rid, prompt, reply, when))
    parent = None
    hashes = []
    texts = [("user", "first question"), ("assistant", "first answer"),
             ("user", "second question"), ("assistant", "second answer"),
             ("user", "third question"), ("assistant", "third answer")]
    for i, (role, text) in enumerate(texts):
        digest = f"b2:{i:032d}"
        conn.execute("INSERT INTO messages VALUES (?, ?, ?, NULL)", (digest, parent, role))
        conn.execute("INSERT INTO parts (message_hash, position, type, text) VALUES (?, 0,"
                     " 'text', ?)", (digest, text))
        hashes.append(digest)
        parent = digest
    conn.execute("INSERT INTO threads VALUES ('c1', 'ships', ?, NULL,"
                 " '2025-06-01 12:00:00.500000+00:00')", (hashes[-1],))
    conn.execute("INSERT INTO turns (id, thread_id, parent_message_hash, tip_message_hash,"
                 " model, datetime_utc) VALUES ('t3', 'c1', ?, ?, 'gpt-4o',"
                 " '2025-06-01T12:00:00+00:00')", (hashes[4], hashes[5]))
    conn.commit()
    conn.close()


def test_a_continued_llm_conversation_keeps_its_old_times(
    tmp_path: Path, db_target: Path | str
) -> None:
    path = tmp_path / "logs.db"
    continued_llm_log(path)
    with Workspace.open(db_target) as ws:
        [sid] = _import(ws, path)
        info, messages, _ = ws.session_view(sid)

    times = [m.created_at for m in messages]
    assert times[:4] == [
        datetime(2024, 1, 10, 8, 0, tzinfo=UTC), datetime(2024, 1, 10, 8, 0, tzinfo=UTC),
        datetime(2024, 1, 10, 8, 5, tzinfo=UTC), datetime(2024, 1, 10, 8, 5, tzinfo=UTC),
    ]
    assert times[4:] == [datetime(2025, 6, 1, 12, 0, tzinfo=UTC)] * 2
    # The thread row is written after its first turn; the session never ends before it starts.
    assert info.created_at == times[0]
    assert info.updated_at >= info.created_at
