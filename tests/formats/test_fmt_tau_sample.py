"""Reading an agent benchmark log in the tau-bench shape: the suite's own file always, and
the real tau-bench sample of ``../shared`` as well when it is present (read in place)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.own_samples import tau_like_export
from workbench.core.conversation import Conversation
from workbench.formats import detect_format, read_conversations

REAL_SAMPLE = (
    Path(__file__).parents[2]
    / ".."
    / "shared"
    / "samples"
    / "openai"
    / "tau-bench_gpt-4o-airline_first20.json"
)
SOURCES = ["own"] + (["shared"] if REAL_SAMPLE.is_file() else [])


@pytest.mark.parametrize("source", SOURCES)
def test_tau_bench_log_reads_completely_with_tool_calls_intact(
    tmp_path: Path, source: str
) -> None:
    path = tau_like_export(tmp_path / "tau.json") if source == "own" else REAL_SAMPLE
    raw = json.loads(path.read_text(encoding="utf-8"))

    assert detect_format(path).name == "openai"
    items = list(read_conversations(path))

    assert all(isinstance(item, Conversation) for item in items)
    convs = [item for item in items if isinstance(item, Conversation)]
    assert len(convs) == len(raw) == 20
    assert sum(len(c.messages) for c in convs) == sum(len(item["traj"]) for item in raw)
    assert len({c.source_id for c in convs}) == len(raw)
    calls = 0
    for conv, item in zip(convs, raw, strict=True):
        assert conv.metadata["task_id"] == item["task_id"]
        assert conv.metadata["reward"] == item["reward"]
        assert conv.metadata["info"] == item["info"]
        assert len(conv.messages) == len(item["traj"])
        for message, original in zip(conv.messages, item["traj"], strict=True):
            assert message.role == original["role"]
            assert message.content == (original["content"] or "")
            assert message.tool_calls == original.get("tool_calls")
            calls += len(message.tool_calls or [])
            if original["role"] == "tool":
                assert message.tool_call_id == original["tool_call_id"]
                assert message.name == original["name"]
    assert calls > 0
