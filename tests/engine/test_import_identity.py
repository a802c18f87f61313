"""Import recognises a conversation by source, id and content (issue 16 items 2 and 8).

ShareGPT datasets reuse ids such as ``identity_0``; context files reuse session ids; an
llm log or a ChatGPT export grows. The fixtures are small files shaped like those.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workbench.engine.workspace import Workspace

CliRunner = Callable[..., Any]


def sharegpt(path: Path, *turns: tuple[str, str], entry_id: str = "identity_0") -> Path:
    entry = {"id": entry_id, "conversations": [{"from": f, "value": v} for f, v in turns]}
    path.write_text(json.dumps([entry]), encoding="utf-8")
    return path


def test_a_dataset_reusing_an_id_is_imported_as_new_and_reported(
    cli: CliRunner, tmp_path: Path
) -> None:
    first = sharegpt(tmp_path / "a.json", ("human", "What is 2+2?"), ("gpt", "4"))
    second = sharegpt(tmp_path / "b.json", ("human", "Name a colour."), ("gpt", "Blue."))

    one = cli("import", first, "--json").json()
    two = cli("import", second, "--json").json()
    human = cli("import", sharegpt(tmp_path / "c.json", ("human", "Hi"), ("gpt", "Hello")))

    assert one["counts"]["created"] == 1 and two["counts"]["created"] == 1
    assert two["sessions"][0]["source_id_reused"] is True
    assert two["sessions"][0]["id"] != one["sessions"][0]["id"]
    assert "reuses the source id 'identity_0'" in human.out
    shown = cli("show", two["sessions"][0]["id"], "--json").json()
    assert [m["content"] for m in shown["messages"]] == ["Name a colour.", "Blue."]
    assert len(cli("sessions", "--json").json()) == 3


def test_importing_the_same_file_again_is_a_no_op_a_script_can_tell(
    cli: CliRunner, tmp_path: Path
) -> None:
    path = sharegpt(tmp_path / "a.json", ("human", "What is 2+2?"), ("gpt", "4"))
    cli("import", path)

    again = cli("import", path, "--json")

    assert again.code == 0
    assert again.json()["counts"] == {"created": 0, "updated": 0, "unchanged": 1, "skipped": 0}
    assert again.json()["sessions"][0]["status"] == "unchanged"
    assert "1 session(s) were already imported" in cli("import", path).out
    assert len(cli("sessions", "--json").json()) == 1


def test_replace_leaves_a_session_of_another_file_alone(cli: CliRunner, tmp_path: Path) -> None:
    first = sharegpt(tmp_path / "a.json", ("human", "What is 2+2?"), ("gpt", "4"))
    [mine] = cli("import", first, "--json").json()["sessions"]
    other = sharegpt(tmp_path / "b.json", ("human", "Name a colour."), ("gpt", "Blue."))

    result = cli("import", other, "--replace", "--json").json()

    assert result["counts"]["created"] == 1 and result["counts"]["updated"] == 0
    kept = cli("show", mine["id"], "--json").json()
    assert [m["content"] for m in kept["messages"]] == ["What is 2+2?", "4"]


def write_context_file(path: Path, turns: list[str]) -> Path:
    history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": text,
         "timestamp": f"2024-05-01T10:{i:02d}:00Z"}
        for i, text in enumerate(turns)
    ]
    path.write_text(json.dumps({"session_id": "s-7", "recent_history": history}), "utf-8")
    return path


def test_a_source_that_grew_appends_the_new_turns(cli: CliRunner, tmp_path: Path) -> None:
    path = write_context_file(tmp_path / "s.json", ["q1", "a1"])
    [first] = cli("import", path, "--json").json()["sessions"]
    write_context_file(path, ["q1", "a1", "q2", "a2"])

    grown = cli("import", path, "--json").json()

    assert grown["counts"] == {"created": 0, "updated": 1, "unchanged": 0, "skipped": 0}
    assert grown["sessions"][0]["id"] == first["id"]
    shown = cli("show", first["id"], "--json").json()
    assert [m["content"] for m in shown["messages"]] == ["q1", "a1", "q2", "a2"]
    assert "1 session(s) imported before were updated" in cli(
        "import", write_context_file(path, ["q1", "a1", "q2", "a2", "q3"])
    ).out


def test_replace_on_a_compacted_session_removes_its_compactions(
    cli: CliRunner, tmp_path: Path, db_target: Path | str
) -> None:
    turns = [f"turn {i} " + "words " * 20 for i in range(24)]
    path = write_context_file(tmp_path / "s.json", turns)
    [first] = cli("import", path, "--json").json()["sessions"]
    assert cli("compact", first["id"], "--keep", "4").code == 0
    assert len(cli("compactions", first["id"], "--json").json()) == 1

    turns[0] = "turn 0, edited"
    replaced = cli("import", write_context_file(path, turns), "--replace", "--json").json()

    assert replaced["sessions"][0]["status"] == "updated"
    assert cli("compactions", first["id"], "--json").json() == []
    undo = cli("undo-compaction", first["id"])
    assert undo.code != 0 and "no compaction to undo" in undo.err
    with Workspace.open(db_target) as ws:
        _, messages, _ = ws.session_view(first["id"])
    assert [m.state for m in messages] == ["active"] * 24
    assert messages[0].content == "turn 0, edited"


def chatgpt_export(turns: list[tuple[str, str]]) -> list[dict[str, Any]]:
    mapping: dict[str, Any] = {"root": {"id": "root", "message": None, "parent": None,
                                        "children": []}}
    parent = "root"
    for i, (role, text) in enumerate(turns):
        node_id = f"n{i}"
        mapping[node_id] = {
            "id": node_id, "parent": parent, "children": [],
            "message": {"id": node_id, "author": {"role": role},
                        "create_time": 1_714_585_000.0 + i,
                        "content": {"content_type": "text", "parts": [text]}},
        }
        mapping[parent]["children"].append(node_id)
        parent = node_id
    return [{"title": "Growing", "id": "conv-9", "conversation_id": "conv-9",
             "create_time": 1_714_585_000.0, "current_node": parent, "mapping": mapping}]


def test_a_newer_chatgpt_export_adds_the_new_turns(cli: CliRunner, tmp_path: Path) -> None:
    older = tmp_path / "export-may" / "conversations.json"
    newer = tmp_path / "export-june" / "conversations.json"
    for path in (older, newer):
        path.parent.mkdir()
    first_turns = [("user", "plan a trip"), ("assistant", "where to?")]
    older.write_text(json.dumps(chatgpt_export(first_turns)), "utf-8")
    newer.write_text(json.dumps(chatgpt_export(
        [*first_turns, ("user", "Porto"), ("assistant", "Good choice.")])), "utf-8")

    [first] = cli("import", older, "--json").json()["sessions"]
    grown = cli("import", newer, "--json").json()

    assert grown["counts"]["updated"] == 1 and grown["counts"]["created"] == 0
    shown = cli("show", first["id"], "--json").json()
    assert [m["content"] for m in shown["messages"]] == [
        "plan a trip", "where to?", "Porto", "Good choice."]


def test_a_context_file_saved_again_with_new_facts_updates_the_context(
    cli: CliRunner, tmp_path: Path
) -> None:
    """The same turns with new facts and tasks: the session is "updated" and holds the
    new context (it used to count as unchanged and drop them)."""
    def context_file(facts: list[str], status: str) -> Path:
        path = tmp_path / "session.json"
        path.write_text(json.dumps({
            "session_id": "trip-7",
            "facts": facts,
            "recent_history": [
                {"timestamp": "2025-01-01T10:00:00Z", "role": "user", "content": "Plan it"},
                {"timestamp": "2025-01-01T10:01:00Z", "role": "assistant", "content": "OK"},
            ],
            "active_tasks": [{"id": "t1", "description": "book", "status": status}],
        }), encoding="utf-8")
        return path

    first = cli("import", context_file(["likes trains"], "running"), "--json").json()
    session = first["sessions"][0]["id"]
    same = cli("import", context_file(["likes trains"], "running"), "--json").json()
    assert same["counts"]["unchanged"] == 1
    grown = cli("import", context_file(["likes trains", "vegetarian"], "Completed"),
                "--json").json()
    assert grown["counts"] == {"created": 0, "updated": 1, "unchanged": 0, "skipped": 0}
    shown = cli("show", session, "--json").json()
    assert shown["context"]["facts"] == ["likes trains", "vegetarian"]
    assert [t["status"] for t in shown["context"]["tasks"]] == ["Completed"]
    assert len(shown["messages"]) == 2
