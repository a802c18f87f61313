"""Messages in columns (core.message_table): rows built on demand, and planning over plain
rows giving exactly the plan of the same messages kept whole."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workbench.core.assembly import RequestParts, assemble
from workbench.core.compaction import (
    CompactionPolicy,
    ExtractiveSummarizer,
    plan_compaction,
)
from workbench.core.conversation import Message, SessionContext
from workbench.core.message_table import MessageSelection, MessageTable, is_plain
from workbench.core.tokens import fill_counts, get_counter

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
COUNTER = get_counter()
FIELDS = ("role", "content", "id", "session_id", "position", "name", "tool_calls",
          "tool_call_id", "token_count", "token_encoding", "state", "important", "metadata",
          "compaction_id")


def call(cid: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}


def fields(message: Message) -> list[Any]:
    return [getattr(message, name) for name in FIELDS]


def _mixed() -> list[Message]:
    messages = [
        Message("system", "Be brief."),
        Message("user", "Plain question"),
        Message("assistant", "Plain answer", metadata={"model": "m1", "usage": {"in": 3}}),
        Message("user", "Named", name="ana"),
        Message("assistant", "", tool_calls=[call("c1")]),
        Message("tool", "result", tool_call_id="c1", name="lookup"),
        Message("user", "Pinned", metadata={"pinned": True}),
        Message("assistant", "Marked", important=True),
        Message("user", "Came back from a compaction", compaction_id=7),
    ]
    for i, msg in enumerate(messages):
        msg.id, msg.position, msg.session_id = 10 + i, i, 3
    fill_counts(messages, COUNTER)
    return messages


def test_a_lean_table_builds_each_plain_row_as_the_message_it_was() -> None:
    messages = _mixed()
    table = MessageTable.from_messages(messages, encoding=COUNTER.encoding_name, lean=True)
    assert len(table) == len(messages)
    # Plain: user/assistant without tool calls, not important, not pinned.
    assert [i for i in range(len(table)) if i not in table.whole] == [1, 2, 3, 8]
    assert [is_plain(m) for m in messages] == [i not in table.whole for i in range(9)]
    for i, msg in enumerate(messages):
        built = table.message(i)
        assert fields(built) == fields(msg)
        if i in table.whole:
            assert built is msg
    assert fields(table.message(-1)) == fields(messages[-1])


def test_a_default_table_keeps_every_message_whole_and_skips_inactive_ones() -> None:
    messages = _mixed()
    messages[2].state = "folded"
    table = MessageTable.from_messages(messages)
    active = [m for m in messages if m.state == "active"]
    assert len(table) == len(active)
    assert all(table.message(i) is m for i, m in enumerate(active))
    assert table.costs == [None] * len(active)  # no encoding given: no cached costs


def test_a_selection_is_a_sequence_of_its_rows() -> None:
    messages = _mixed()
    table = MessageTable.from_messages(messages, encoding=COUNTER.encoding_name, lean=True)
    selection = table.select([1, 4, 5, 8])
    assert isinstance(selection, Sequence)
    assert len(selection) == 4
    assert [m.id for m in selection] == [11, 14, 15, 18]
    assert selection[-1].content == "Came back from a compaction"
    sliced = selection[1:3]
    assert isinstance(sliced, MessageSelection)
    assert [m.role for m in sliced] == ["assistant", "tool"]
    assert selection.column(table.roles) == ["user", "assistant", "tool", "user"]
    assert [m is not None for m in selection.whole_messages()] == [False, True, True, False]
    assert len(table.everything()) == len(table)


def test_columns_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="one entry per row"):
        MessageTable(ids=[1, 2], positions=[0], roles=["user"], texts=["a"], costs=[None],
                     encoding=None, whole={})


def tokens(summary: str, history: Sequence[Message]) -> int:
    return assemble(
        RequestParts(instructions="Be helpful.", summary=summary, history=history),
        counter=COUNTER,
    ).tokens.total


@st.composite
def sessions(draw: st.DrawFn) -> list[Message]:
    """Plain and whole messages mixed: tool groups, system notes, important, pinned and
    named ones, metadata, missing or foreign token counts."""
    messages: list[Message] = []
    if draw(st.booleans()):
        messages.append(Message("system", "sys"))
    for n in range(draw(st.integers(0, 40))):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "system", "user"]))
        if kind == "tools":
            ids = [f"c{n}_{k}" for k in range(draw(st.integers(1, 2)))]
            messages.append(Message("assistant", "", tool_calls=[call(i) for i in ids]))
            messages.extend(Message("tool", f"result {i}", tool_call_id=i) for i in ids)
        elif kind == "system" and draw(st.integers(0, 4)) == 0:
            messages.append(Message("system", f"note {n}"))
        else:
            role = "assistant" if kind == "assistant" else "user"
            text = f"text {n} " * draw(st.integers(0, 30))
            messages.append(Message(role, text))
    fill_counts(messages, COUNTER)
    for i, msg in enumerate(messages):
        msg.id, msg.position = 100 + i, i
        roll = draw(st.integers(0, 14))
        if msg.role != "system":
            msg.important = roll == 0
        if roll == 1:
            msg.metadata = {"pinned": True}
        elif roll == 2:
            msg.metadata = {"source": "chatgpt"}
        elif roll == 3:
            msg.name = "ana"
        elif roll == 4:
            msg.token_count = None
            msg.token_encoding = None
        elif roll == 5:
            msg.token_count, msg.token_encoding = 1, "cl100k_base"
        elif roll == 6:
            msg.state = "folded"
    return messages


@given(sessions(), st.integers(0, 45), st.booleans(),
       st.sampled_from([None, (3, 12), (0, 60)]))
def test_plain_rows_plan_exactly_like_whole_messages(
    messages: list[Message], keep: int, manual: bool, fold_range: tuple[int, int] | None
) -> None:
    policy = CompactionPolicy(max_messages=8, keep_messages=4, line_chars=40)
    options: dict[str, Any] = {"keep": keep} if manual else {"fold_range": fold_range}

    def plan(source: Any) -> Any:
        return plan_compaction(
            source, SessionContext(summary="Before."), policy=policy,
            summarizer=ExtractiveSummarizer(policy.line_chars, policy.summary_chars),
            request_tokens=tokens, now=NOW, session_id=1, **options,
        )

    lean = MessageTable.from_messages(messages, encoding=COUNTER.encoding_name, lean=True)
    assert plan(lean).to_json() == plan(messages).to_json()
