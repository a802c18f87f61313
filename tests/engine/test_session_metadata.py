"""Conversation-level data of every format is kept, shown and exported (issue 16 item 3).

Each fixture is a small file shaped like the real export it stands for: tau-bench
trajectories, a ChatGPT export with a branch, a ShareGPT entry with tools, a Claude
export with a summary, model and project.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workbench.engine.workspace import Workspace

CliRunner = Callable[..., Any]
T0 = 1_714_585_000.0


def write(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


TAU = [
    {
        "task_id": 3,
        "reward": 0.0,
        "info": {"task": {"user_id": "mia_li_3668", "actions": [{"name": "book"}]}},
        "traj": [
            {"role": "system", "content": "You are an airline agent."},
            {"role": "user", "content": "Book me a flight."},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_user_details", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "name": "get_user_details",
             "content": "{}"},
            {"role": "assistant", "content": "Done."},
        ],
        "trial": 0,
    }
]


def test_tau_bench_reward_and_info_are_kept_shown_and_exported(
    cli: CliRunner, tmp_path: Path
) -> None:
    [session] = cli("import", write(tmp_path / "tau.json", TAU), "--json").json()["sessions"]

    shown = cli("show", session["id"], "--json").json()
    human = cli("show", session["id"]).out
    out = tmp_path / "out.jsonl"
    assert cli("export", session["id"], "--format", "openai-jsonl", "-o", out).code == 0
    line = json.loads(out.read_text(encoding="utf-8"))

    # tau-bench trajectories hold no times: the session says so rather than pose.
    assert shown["metadata"] == {"task_id": 3, "reward": 0.0, "info": TAU[0]["info"],
                                 "trial": 0, "time_missing": True}
    assert "reward: 0.0" in human and "mia_li_3668" in human
    assert (line["reward"], line["trial"], line["info"]) == (0.0, 0, TAU[0]["info"])
    assert line["title"] == "task 3, trial 0"


def chatgpt_node(node_id: str, parent: str | None, role: str | None, text: str = "",
                 time: float | None = None) -> dict[str, Any]:
    message = None
    if role is not None:
        message = {
            "id": node_id, "author": {"role": role}, "create_time": time,
            "content": {"content_type": "text", "parts": [text]},
            "status": "finished_successfully", "metadata": {"model_slug": "gpt-4o"},
            "recipient": "all",
        }
    return {"id": node_id, "message": message, "parent": parent, "children": []}


def chatgpt_export() -> list[dict[str, Any]]:
    nodes = [
        chatgpt_node("root", None, None),
        chatgpt_node("u1", "root", "user", "question", T0 + 1),
        chatgpt_node("a1", "u1", "assistant", "first answer", T0 + 2),
        chatgpt_node("u2", "a1", "user", "follow-up A", T0 + 3),
        chatgpt_node("a2", "u2", "assistant", "answer A", T0 + 4),
        chatgpt_node("u3", "a1", "user", "follow-up B", T0 + 5),
        chatgpt_node("a3", "u3", "assistant", "answer B", T0 + 6),
    ]
    mapping = {n["id"]: n for n in nodes}
    for n in nodes:
        if n["parent"]:
            mapping[n["parent"]]["children"].append(n["id"])
    return [{
        "title": "Forked chat", "create_time": T0, "update_time": T0 + 10,
        "mapping": mapping, "current_node": "a2", "conversation_id": "c-1", "id": "c-1",
        "default_model_slug": "gpt-4o", "is_archived": True,
    }]


def test_chatgpt_model_archived_flag_and_branch_fork_are_kept(
    cli: CliRunner, tmp_path: Path, db_path: Path
) -> None:
    sessions = cli("import", write(tmp_path / "c.json", chatgpt_export()), "--json").json()
    main, branch = sessions["sessions"]

    main_shown = cli("show", main["id"], "--json").json()
    branch_shown = cli("show", branch["id"], "--json").json()

    assert main_shown["metadata"]["model"] == "gpt-4o"
    assert main_shown["metadata"]["archived"] is True
    assert branch_shown["metadata"]["branch_of"] == "c-1"
    fork = branch_shown["forked_from"]
    assert fork["session"] == main["id"]
    # The branch leaves the main session after "first answer" (position 1).
    forked_at = [m for m in main_shown["messages"] if m["id"] == fork["message"]]
    assert [m["content"] for m in forked_at] == ["first answer"]
    assert f"Forked from session {main['id']}" in cli("show", branch["id"]).out


def test_sharegpt_tools_and_extra_keys_are_kept(cli: CliRunner, tmp_path: Path) -> None:
    entry = {
        "id": "glaive-1",
        "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}],
        "tools": json.dumps([{"name": "get_weather", "parameters": {}}]),
        "source": "glaive-function-calling",
        "category": "weather",
    }
    [session] = cli("import", write(tmp_path / "s.json", [entry]), "--json").json()["sessions"]

    metadata = cli("show", session["id"], "--json").json()["metadata"]

    assert metadata["tools"] == [{"name": "get_weather", "parameters": {}}]
    assert metadata["source"] == "glaive-function-calling"
    assert metadata["category"] == "weather"


def test_claude_summary_model_and_project_are_kept(cli: CliRunner, tmp_path: Path) -> None:
    entry = {
        "uuid": "9a1c", "name": "Trip notes", "summary": "Planning a trip to Porto.",
        "model": "claude-3-5-sonnet", "project": {"uuid": "p-1", "name": "Travel"},
        "created_at": "2024-05-01T10:00:00Z", "updated_at": "2024-05-01T10:05:00Z",
        "chat_messages": [
            {"uuid": "m1", "sender": "human", "text": "Plan Porto",
             "created_at": "2024-05-01T10:00:00Z"},
            {"uuid": "m2", "sender": "assistant", "text": "Sure.",
             "created_at": "2024-05-01T10:01:00Z"},
        ],
    }
    [session] = cli("import", write(tmp_path / "conversations.json", [entry]), "--json"
                    ).json()["sessions"]

    metadata = cli("show", session["id"], "--json").json()["metadata"]

    assert metadata["summary"] == "Planning a trip to Porto."
    assert metadata["model"] == "claude-3-5-sonnet"
    assert metadata["project"] == "Travel"


def test_the_session_list_tooltip_shows_the_metadata(
    qtbot: Any, tmp_path: Path, db_path: Path
) -> None:
    from PySide6.QtCore import Qt

    from workbench.gui.models.sessions import SessionListModel

    with Workspace.open(db_path) as ws:
        ws.import_path(write(tmp_path / "tau.json", TAU))
        model = SessionListModel(ws)
        tip = model.index(0, 0).data(Qt.ItemDataRole.ToolTipRole)

    assert "Imported from openai" in tip
    assert "reward: 0.0" in tip


def test_export_command_says_what_the_format_cannot_hold(cli: CliRunner, tmp_path: Path) -> None:
    session = {"session_id": "s-1", "facts": ["likes tea"],
               "recent_history": [{"role": "user", "content": "hi"}]}
    [info] = cli("import", write(tmp_path / "s.json", session), "--json").json()["sessions"]
    out = tmp_path / "out.jsonl"

    human = cli("export", info["id"], "--format", "openai-jsonl", "-o", out)
    as_json = cli("export", info["id"], "--format", "openai-jsonl", "-o", out, "--json").json()
    lossless = cli("export", info["id"], "--format", "context-json", "-o", tmp_path / "c.json",
                   "--json").json()

    assert human.code == 0
    assert "Not written (openai-jsonl cannot hold it): the context" in human.err
    assert any("context" in note for note in as_json["not_exported"])
    assert lossless["not_exported"] == []
