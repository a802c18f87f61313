"""A conversation kept as a tree (ChatGPT, Claude, Open WebUI) imported again after its
current path moved to another branch: the path imported before is recognised under its
new (branch) id, not copied into a second session (SPEC §7, §11).

The fixtures are small ChatGPT exports of one conversation at three moments.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from workbench.engine.workspace import Workspace


def _node(node_id: str, parent: str, children: list[str], role: str, text: str,
          when: int) -> dict[str, Any]:
    return {"id": node_id, "parent": parent, "children": children,
            "message": {"id": node_id, "author": {"role": role}, "create_time": when,
                        "content": {"content_type": "text", "parts": [text]},
                        "metadata": {}, "recipient": "all"}}


def _export(path: Path, mapping: dict[str, Any], current: str, updated: int) -> Path:
    entry = {"id": "g1", "title": "Chat", "create_time": 1700000000, "update_time": updated,
             "current_node": current, "mapping": mapping}
    path.write_text(json.dumps([entry]), encoding="utf-8")
    return path


def _moments(folder: Path) -> tuple[Path, Path, Path]:
    """The conversation with two turns; with a regenerated last answer, the new one
    current; and the same tree with the first answer current again."""
    base = {"root": {"id": "root", "parent": None, "children": ["a"], "message": None},
            "a": _node("a", "root", ["b"], "user", "hi", 1700000001),
            "b": _node("b", "a", ["c"], "assistant", "hello", 1700000002),
            "c": _node("c", "b", ["d"], "user", "more", 1700000003),
            "d": _node("d", "c", [], "assistant", "sure", 1700000004)}
    first = _export(folder / "v1.json", base, "d", 1700000004)
    regenerated = json.loads(json.dumps(base))
    regenerated["c"]["children"] = ["d", "e"]
    regenerated["e"] = _node("e", "c", [], "assistant", "another answer", 1700000005)
    second = _export(folder / "v2.json", regenerated, "e", 1700000005)
    back = _export(folder / "v3.json", regenerated, "d", 1700000006)
    return first, second, back


def _contents(workspace: Workspace) -> list[list[str]]:
    return sorted(
        [m.content for m in workspace.page_messages(info.id)]
        for info in workspace.list_sessions() if info.id is not None
    )


def test_the_path_imported_before_is_recognised_as_the_branch_it_became(
    workspace: Workspace, tmp_path: Path
) -> None:
    first, second, back = _moments(tmp_path)
    workspace.import_path(first)

    moved = workspace.import_path(second)
    again = workspace.import_path(second)
    switched_back = workspace.import_path(back)

    assert moved.counts() == {"created": 1, "updated": 0, "unchanged": 1, "skipped": 0}
    assert again.counts()["created"] == 0
    assert switched_back.counts()["created"] == 0
    assert _contents(workspace) == [["hi", "hello", "more", "another answer"],
                                    ["hi", "hello", "more", "sure"]]


def test_a_branch_imported_before_that_became_current_is_not_copied(
    workspace: Workspace, tmp_path: Path
) -> None:
    _, second, back = _moments(tmp_path)
    workspace.import_path(second)

    switched = workspace.import_path(back)

    assert switched.counts()["created"] == 0
    assert len(workspace.list_sessions()) == 2


def test_an_older_export_imported_after_a_newer_one_is_the_same_session(
    workspace: Workspace, tmp_path: Path
) -> None:
    first, _, _ = _moments(tmp_path)
    short = {"root": {"id": "root", "parent": None, "children": ["a"], "message": None},
             "a": _node("a", "root", ["b"], "user", "hi", 1700000001),
             "b": _node("b", "a", [], "assistant", "hello", 1700000002)}
    older_file = _export(tmp_path / "v0.json", short, "b", 1700000002)
    workspace.import_path(first)

    older = workspace.import_path(older_file)

    assert older.counts() == {"created": 0, "updated": 0, "unchanged": 1, "skipped": 0}
    assert _contents(workspace) == [["hi", "hello", "more", "sure"]]


def test_what_the_source_says_of_the_whole_is_taken_when_only_that_changed(
    workspace: Workspace, tmp_path: Path
) -> None:
    first, _, _ = _moments(tmp_path)
    workspace.import_path(first)
    entry = json.loads(first.read_text(encoding="utf-8"))
    entry[0]["is_archived"] = True
    entry[0]["update_time"] = 1700000010
    archived = tmp_path / "archived.json"
    archived.write_text(json.dumps(entry), encoding="utf-8")

    report = workspace.import_path(archived)
    older = workspace.import_path(first)  # the export before: not newer, not taken

    assert report.counts() == {"created": 0, "updated": 1, "unchanged": 0, "skipped": 0}
    assert older.counts()["unchanged"] == 1
    (info,) = workspace.list_sessions()
    assert info.id is not None
    assert workspace.session_metadata(info.id)["archived"] is True
