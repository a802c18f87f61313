"""Reading the real tau-bench sample (read in place, never copied into the repository)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.core.conversation import Conversation
from workbench.formats import detect_format, read_conversations

SAMPLE = (
    Path(__file__).parents[2]
    / ".."
    / "shared"
    / "samples"
    / "openai"
    / "tau-bench_gpt-4o-airline_first20.json"
)

pytestmark = pytest.mark.skipif(not SAMPLE.exists(), reason="shared samples not present")


def test_tau_bench_sample_reads_completely_with_tool_calls_intact() -> None:
    raw = json.loads(SAMPLE.read_text(encoding="utf-8"))

    assert detect_format(SAMPLE).name == "openai"
    items = list(read_conversations(SAMPLE))

    assert all(isinstance(item, Conversation) for item in items)
    convs = [item for item in items if isinstance(item, Conversation)]
    assert len(convs) == 20
    assert sum(len(c.messages) for c in convs) == 610
    assert len({c.source_id for c in convs}) == 20
    for conv, item in zip(convs, raw, strict=True):
        assert conv.metadata["task_id"] == item["task_id"]
        assert conv.metadata["reward"] == item["reward"]
        assert conv.metadata["info"] == item["info"]
        assert len(conv.messages) == len(item["traj"])
        for message, original in zip(conv.messages, item["traj"], strict=True):
            assert message.role == original["role"]
            assert message.content == (original["content"] or "")
            assert message.tool_calls == original.get("tool_calls")
            if original["role"] == "tool":
                assert message.tool_call_id == original["tool_call_id"]
                assert message.name == original["name"]
