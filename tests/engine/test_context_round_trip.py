"""The context file round trips exactly (issue 16 item 4).

The seed's own example (SPEC §7) holds ``token_usage.by_session``, epoch times and a
``Running`` task; a file written by another tool adds keys of its own at every level.
Import then export gives the file back, field for field; a property test generates such
files and checks import → export → import is the identity.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.engine.workspace import Workspace

SEED_SHAPED: dict[str, Any] = {
    "session_id": "user:agent:1708654000",
    "system_state": {"last_workspace": "/home/user/project", "preferences": {}},
    "facts": ["User prefers verbose output", "Project uses Rust 1.75"],
    "recent_history": [
        {"timestamp": 1708654321, "role": "user", "content": "Create a new file",
         "token_count": 5},
        {"timestamp": 1708654322, "role": "assistant", "content": "I'll create the file",
         "token_count": 8},
        {"timestamp": 1708654323, "role": "tool", "content": "{\"success\": true}",
         "token_count": 12, "exit_code": 0},
    ],
    "long_term_summary": "User requested file creation.",
    "active_tasks": [
        {"id": "task_001", "description": "Monitor system resources", "status": "Running",
         "progress": 0.5, "created_at": 1708654000, "updated_at": 1708654321,
         "owner": "agent-7"},
    ],
    "tool_stats": {"total_calls": 42, "by_tool": {"file_write": 15, "file_read": 20,
                                                    "echo": 7},
                   "failures": 2, "last_failure": "file_write"},
    "last_known_environment": {"workspace": "/home/user/project", "last_update": 1708654321,
                               "system_snapshot": {"memory_usage_mb": 8192}},
    "token_usage": {"total_input": 15420, "total_output": 8930, "by_session": 24350},
    "schema_version": 3,
    "agent": {"name": "builder", "tools": ["file_write"]},
}


def round_trip(tmp_path: Path, data: dict[str, Any], name: str = "rt") -> dict[str, Any]:
    source = tmp_path / f"{name}.json"
    source.write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / f"{name}-out.json"
    with Workspace.open(tmp_path / f"{name}.db") as ws:
        # As `workbench import` and File → Import do: the file's own token counts are
        # kept, and only the missing ones are counted afterwards.
        report = ws.import_path(source, format="context-json", count_tokens=False)
        assert not report.skipped, report.skipped
        list(ws.count_missing_tokens())
        ws.export_sessions([report.sessions[0][0].id], "context-json", out)
    exported: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return exported


def test_the_seed_shaped_file_comes_back_field_for_field(tmp_path: Path) -> None:
    exported = round_trip(tmp_path, SEED_SHAPED)

    assert exported == SEED_SHAPED
    assert exported["token_usage"] == {"total_input": 15420, "total_output": 8930,
                                       "by_session": 24350}
    assert exported["active_tasks"][0]["created_at"] == 1708654000
    assert exported["recent_history"][0]["timestamp"] == 1708654321


_keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=3, max_size=10).filter(
    lambda k: k not in {
        "session_id", "system_state", "facts", "recent_history", "long_term_summary",
        "active_tasks", "tool_stats", "last_known_environment", "token_usage", "title",
        "tags", "created_at", "updated_at", "timestamp", "role", "content", "token_count",
        "name", "tool_calls", "tool_call_id", "parts", "state", "metadata",
        "token_encoding", "id", "description", "status", "progress", "total_calls",
        "by_tool", "calls_by_tool", "failures", "total_input", "total_output", "total",
        "input_tokens", "output_tokens", "entry_keys", "source_timestamp", "important",
    }
)
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10**6, 10**6), st.text(max_size=12),
)
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_keys, inner, max_size=3)),
    max_leaves=6,
)
_extras = st.dictionaries(_keys, _json, max_size=3)
_epoch = st.integers(1_500_000_000, 1_800_000_000)
_iso = _epoch.map(lambda t: __import__("datetime").datetime.fromtimestamp(t, __import__(
    "datetime").UTC).isoformat().replace("+00:00", "Z"))
_time = st.one_of(_epoch, _iso)


@st.composite
def context_files(draw: st.DrawFn) -> dict[str, Any]:
    count = draw(st.integers(1, 4))
    start = draw(_epoch)
    history = []
    for i in range(count):
        entry = {
            "timestamp": start + i if draw(st.booleans()) else _iso_of(start + i),
            "role": draw(st.sampled_from(["user", "assistant", "tool", "system"])),
            "content": draw(st.text(max_size=30)),
            "token_count": draw(st.integers(0, 500)),
        }
        entry.update(draw(_extras))
        history.append(entry)
    tasks = []
    for i in range(draw(st.integers(0, 2))):
        task = {
            "id": f"task_{i}", "description": draw(st.text(max_size=20)),
            "status": draw(st.sampled_from(["Running", "pending", "completed"])),
            "progress": draw(st.one_of(st.none(), st.integers(0, 1),
                                       st.floats(0, 1, allow_nan=False))),
            "created_at": draw(_time), "updated_at": draw(_time),
        }
        task.update(draw(_extras))
        tasks.append(task)
    usage = {"total_input": draw(st.integers(0, 10**6)),
             "total_output": draw(st.integers(0, 10**6))}
    usage.update(draw(st.dictionaries(_keys, _json, max_size=2)))
    stats = {"total_calls": draw(st.integers(0, 99)), "by_tool": draw(
        st.dictionaries(_keys, st.integers(0, 9), max_size=3)), "failures": draw(
        st.integers(0, 9))}
    stats.update(draw(_extras))
    data = {
        "session_id": draw(st.text(alphabet="abc:123", min_size=1, max_size=12)),
        "system_state": draw(st.dictionaries(_keys, _json, max_size=2)),
        "facts": draw(st.lists(st.text(max_size=15), max_size=3)),
        "recent_history": history,
        "long_term_summary": draw(st.text(max_size=20)),
        "active_tasks": tasks,
        "tool_stats": stats,
        "last_known_environment": draw(st.dictionaries(_keys, _json, max_size=2)),
        "token_usage": usage,
    }
    data.update(draw(_extras))
    return data


def _iso_of(epoch: int) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).isoformat().replace(
        "+00:00", "Z")


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=context_files())
def test_import_export_import_is_the_identity(tmp_path: Path, data: dict[str, Any]) -> None:
    # A database of its own for each example (tmp_path is shared by all of them).
    with tempfile.TemporaryDirectory(dir=tmp_path) as folder:
        exported = round_trip(Path(folder), data, name="p")
        again = round_trip(Path(folder), exported, name="q")

    assert exported == data
    assert again == exported
