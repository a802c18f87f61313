"""The OpenAI messages importer and the openai-jsonl exporter."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from workbench.core.conversation import Conversation, Message, SkippedEntry
from workbench.errors import FormatError
from workbench.formats import ExportSession, get_exporter, read_conversations

TOOL_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
}

CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]},
    {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": '{"t": -3}'},
    {"role": "assistant", "content": "It is -3 °C in Oslo."},
]


def write_json(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value, ensure_ascii=False, indent=2), encoding="utf-8")
    return path


def write_jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def conversations(items: list[Any]) -> list[Conversation]:
    return [i for i in items if isinstance(i, Conversation)]


def skipped(items: list[Any]) -> list[SkippedEntry]:
    return [i for i in items if isinstance(i, SkippedEntry)]


def test_array_of_messages_is_one_conversation_with_tool_calls_intact(tmp_path: Path) -> None:
    path = write_json(tmp_path / "chat.json", CHAT)

    items = list(read_conversations(path))

    assert len(items) == 1
    conv = items[0]
    assert isinstance(conv, Conversation)
    assert conv.source == "openai"
    assert conv.source_id and conv.source_id.startswith("sha256:")
    assert conv.title == "Weather in Oslo?"
    assert [m.role for m in conv.messages] == [m["role"] for m in CHAT]
    assert [m.position for m in conv.messages] == list(range(len(CHAT)))
    call = conv.messages[2]
    assert call.content == ""
    assert call.tool_calls == [TOOL_CALL]
    result = conv.messages[3]
    assert result.tool_call_id == "call_1"
    assert (result.name, result.content) == ("get_weather", '{"t": -3}')
    assert conv.messages[4].content == "It is -3 °C in Oslo."


def test_content_parts_are_joined_and_kept(tmp_path: Path) -> None:
    parts = [
        {"type": "text", "text": "What is in this picture?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "text", "text": "Be brief."},
    ]
    path = write_json(tmp_path / "parts.json", [{"role": "user", "content": parts}])

    (conv,) = list(read_conversations(path))

    assert isinstance(conv, Conversation)
    message = conv.messages[0]
    assert "What is in this picture?" in message.content
    assert "Be brief." in message.content
    assert "data:image" not in message.content
    assert message.parts == parts


def test_developer_and_function_roles_are_mapped(tmp_path: Path) -> None:
    path = write_json(
        tmp_path / "roles.json",
        [
            {"role": "developer", "content": "Follow the policy."},
            {"role": "user", "content": "hi"},
            {"role": "function", "name": "lookup", "content": "42"},
        ],
    )

    (conv,) = list(read_conversations(path))

    assert isinstance(conv, Conversation)
    developer, _, function = conv.messages
    assert developer.role == "system"
    assert developer.metadata["original_role"] == "developer"
    assert function.role == "tool"
    assert function.name == "lookup"
    assert function.metadata["original_role"] == "function"


def test_unknown_message_keys_go_to_metadata(tmp_path: Path) -> None:
    path = write_json(
        tmp_path / "extra.json",
        [{"role": "assistant", "content": "ok", "refusal": None, "reasoning": "think", "x": [1]}],
    )

    (conv,) = list(read_conversations(path))

    assert isinstance(conv, Conversation)
    assert conv.messages[0].metadata == {"reasoning": "think", "x": [1]}


def test_tau_bench_items_keep_their_keys(tmp_path: Path) -> None:
    items = [
        {
            "task_id": 3,
            "reward": 1.0,
            "info": {"task": {"user_id": "u1"}},
            "traj": CHAT,
            "trial": 0,
        },
        {"task_id": 3, "reward": 0.0, "info": {}, "traj": CHAT[:2], "trial": 1},
    ]
    path = write_json(tmp_path / "tau.json", items)

    convs = conversations(list(read_conversations(path)))

    assert len(convs) == 2
    first, second = convs
    assert first.metadata == {
        "task_id": 3,
        "reward": 1.0,
        "info": {"task": {"user_id": "u1"}},
        "trial": 0,
    }
    assert "traj" not in first.metadata
    assert "3" in first.title and "0" in first.title
    assert first.title != second.title
    # Two trials of one task are different conversations.
    assert first.source_id != second.source_id
    assert len(first.messages) == len(CHAT)
    assert first.messages[2].tool_calls == [TOOL_CALL]


def test_array_of_conversations_skips_a_bad_item(tmp_path: Path) -> None:
    path = write_json(
        tmp_path / "convs.json",
        [
            {"messages": CHAT[:2]},
            {"messages": [{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}]},
            {"messages": CHAT},
        ],
    )

    items = list(read_conversations(path))

    # A bad message used to cost its whole conversation; now only itself.
    assert [len(c.messages) for c in conversations(items)] == [2, 1, len(CHAT)]
    assert conversations(items)[1].messages[0].content == "a"
    (skip,) = skipped(items)
    assert skip.entry == "item 1 messages[1]"
    assert skip.reason == (
        "conversation 'a': message 1 was skipped (role 'bot' is not one of system, user, "
        "assistant, tool, developer, function); the rest of the conversation was imported."
    )


def test_array_of_messages_skips_a_bad_message(tmp_path: Path) -> None:
    path = write_json(
        tmp_path / "msgs.json",
        [{"role": "user", "content": "a"}, {"content": "no role"}, {"role": "assistant"}],
    )

    items = list(read_conversations(path, format="openai"))

    (skip,) = skipped(items)
    assert skip.entry == "item 1"
    assert "role" in skip.reason
    (conv,) = conversations(items)
    assert [m.role for m in conv.messages] == ["user", "assistant"]


def test_jsonl_with_bad_lines_reports_them_and_reads_the_rest(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "data.jsonl",
        [
            json.dumps({"messages": CHAT[:2]}),
            "",
            '{"messages": [{"role": "user", "content": "cut off"',
            json.dumps({"messages": [{"role": "user", "content": 5}]}),
            json.dumps({"messages": CHAT}),
            json.dumps({"no_messages": []}),
        ],
    )

    items = list(read_conversations(path))

    convs = conversations(items)
    # Line 4's one message is bad: it costs only itself, the line's conversation (empty
    # now) is kept, as a conversation whose messages all fail is in the other importers.
    assert [len(c.messages) for c in convs] == [2, 0, len(CHAT)]
    ids = [c.source_id for c in convs]
    assert len(ids) == 3 and len(set(ids)) == 3
    skips = {s.entry: s.reason for s in skipped(items)}
    assert set(skips) == {"line 3", "line 4 messages[0]", "line 6"}
    assert "JSON" in skips["line 3"]
    assert "content" in skips["line 4 messages[0]"]
    assert "messages" in skips["line 6"]


def test_single_object_with_messages(tmp_path: Path) -> None:
    path = write_json(tmp_path / "one.json", {"messages": CHAT, "model": "gpt-4o"})

    (conv,) = list(read_conversations(path))

    assert isinstance(conv, Conversation)
    assert len(conv.messages) == len(CHAT)
    assert conv.metadata == {"model": "gpt-4o"}


def test_long_first_user_message_gives_a_short_title(tmp_path: Path) -> None:
    text = "Please help me plan " + "a very long trip across many countries " * 5
    path = write_json(tmp_path / "long.json", [{"role": "user", "content": text}])

    (conv,) = list(read_conversations(path))

    assert isinstance(conv, Conversation)
    assert len(conv.title) <= 60
    assert conv.title.startswith("Please help me plan")


def test_malformed_json_names_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('[\n  {"role": }\n]\n', encoding="utf-8")

    with pytest.raises(FormatError) as info:
        list(read_conversations(path, format="openai"))

    message = str(info.value)
    assert "broken.json" in message
    assert "line 2" in message
    assert "column" in message
    assert info.value.path == str(path)


def test_json_breaking_after_some_messages_keeps_them_and_names_the_place(
    tmp_path: Path,
) -> None:
    path = tmp_path / "broken.json"
    path.write_text('[\n  {"role": "user", "content": "hi"},\n  {"role": }\n]\n', encoding="utf-8")

    items = list(read_conversations(path, format="openai"))

    (conv,) = conversations(items)
    assert [(m.role, m.content) for m in conv.messages] == [("user", "hi")]
    (skip,) = skipped(items)
    assert skip.entry == "line 3"
    assert "broken.json" in skip.reason and "column" in skip.reason


def test_object_without_messages_is_a_format_error(tmp_path: Path) -> None:
    path = write_json(tmp_path / "other.json", {"hello": "world"})

    with pytest.raises(FormatError, match="other.json"):
        list(read_conversations(path, format="openai"))


def _roundtrip(tmp_path: Path, sessions: list[ExportSession]) -> list[Conversation]:
    out = tmp_path / "out.jsonl"
    get_exporter("openai-jsonl").write(sessions, out)
    items = list(read_conversations(out))
    assert not skipped(items)
    return conversations(items)


def test_export_writes_only_set_keys_and_null_content_for_tool_calls(
    tmp_path: Path, session_factory: Callable[..., ExportSession]
) -> None:
    messages = [
        Message(role="user", content="Weather?"),
        Message(role="assistant", content="", tool_calls=[TOOL_CALL]),
        Message(role="tool", content="-3", tool_call_id="call_1", name="get_weather"),
    ]
    out = tmp_path / "out.jsonl"

    get_exporter("openai-jsonl").write([session_factory(messages)], out)

    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1
    written = json.loads(lines[0])["messages"]
    assert written[0] == {"role": "user", "content": "Weather?"}
    assert written[1] == {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]}
    assert written[2] == {
        "role": "tool",
        "content": "-3",
        "name": "get_weather",
        "tool_call_id": "call_1",
    }


def test_export_then_import_gives_the_same_messages(
    tmp_path: Path, session_factory: Callable[..., ExportSession]
) -> None:
    source = tmp_path / "in.json"
    write_json(
        source,
        [
            {"messages": CHAT},
            {
                "messages": [
                    {"role": "developer", "content": "Rules."},
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "Look"},
                            {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
                        ],
                    },
                ]
            },
        ],
    )
    originals = conversations(list(read_conversations(source)))
    sessions = [session_factory(c.messages, title=c.title) for c in originals]

    again = _roundtrip(tmp_path, sessions)

    assert len(again) == 2
    for before, after in zip(originals, again, strict=True):
        for a, b in zip(before.messages, after.messages, strict=True):
            assert (a.role, a.content, a.name, a.tool_calls, a.tool_call_id, a.parts) == (
                b.role,
                b.content,
                b.name,
                b.tool_calls,
                b.tool_call_id,
                b.parts,
            )
    assert again[1].messages[0].metadata["original_role"] == "developer"


def test_export_of_edited_text_writes_the_text_not_stale_parts(
    tmp_path: Path, session_factory: Callable[..., ExportSession]
) -> None:
    message = Message(role="user", content="edited", parts=[{"type": "text", "text": "original"}])
    out = tmp_path / "out.jsonl"

    get_exporter("openai-jsonl").write([session_factory([message])], out)

    written = json.loads(out.read_text(encoding="utf-8"))["messages"][0]
    assert written["content"] == "edited"


# -- what the export carries beyond the chat API (issue 16 item 5) ---------------------------


def test_export_carries_reasoning_code_parts_title_times_and_model_and_reads_back(
    tmp_path: Path, session_factory: Callable[..., ExportSession]
) -> None:
    from datetime import UTC, datetime

    when = datetime(2024, 5, 15, 15, 30, 5, tzinfo=UTC)
    messages = [
        Message(role="user", content="Plot it", created_at=when),
        Message(role="assistant", content="Here.", created_at=when,
                parts=[{"type": "reasoning", "text": "Use matplotlib."},
                       {"type": "code", "language": "python", "text": "plot()"}],
                metadata={"model": "o3"}),
    ]
    out = tmp_path / "out.jsonl"
    exporter = get_exporter("openai-jsonl")
    session = session_factory(messages, title="Plotting")
    exporter.write([session], out)

    line = json.loads(out.read_text(encoding="utf-8"))
    [conv] = [i for i in read_conversations(out, "openai") if isinstance(i, Conversation)]

    assert line["title"] == "Plotting"
    assert line["created_at"] == "2024-05-15T15:00:00Z"
    assert conv.created_at == session.info.created_at
    reply = line["messages"][1]
    assert reply["reasoning_content"] == "Use matplotlib."
    assert reply["model"] == "o3" and reply["created_at"] == "2024-05-15T15:30:05Z"
    assert {"type": "code", "language": "python", "text": "plot()"} in reply["parts"]
    assert conv.title == "Plotting"
    back = conv.messages[1]
    assert back.parts == messages[1].parts
    assert back.created_at == when and back.metadata == {"model": "o3"}
    assert exporter.cannot_hold([session]) == []  # type: ignore[attr-defined]


def test_export_says_what_it_cannot_hold(
    tmp_path: Path, session_factory: Callable[..., ExportSession]
) -> None:
    from workbench.core.conversation import SessionContext

    messages = [
        Message(role="user", content="old", state="folded", important=True),
        Message(role="assistant", content="new", metadata={"finish_reason": "length"}),
    ]
    session = session_factory(messages, context=SessionContext(facts=["a fact"]),
                              tags=["x"])

    notes = get_exporter("openai-jsonl").cannot_hold([session])  # type: ignore[attr-defined]

    text = " | ".join(notes)
    assert "folded or evicted" in text and "important" in text
    assert "metadata of 1 message" in text and "context" in text and "tags" in text
