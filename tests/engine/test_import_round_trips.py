"""Import, export, import again: what a hostile or foreign file held comes back the same.

Each test imports a small file of its own, exports the sessions in each export format
and reads the export back, on both stores.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
