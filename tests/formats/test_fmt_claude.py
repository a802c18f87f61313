"""The Claude.ai export importer: blocks, tool use, attachments, null messages, titles."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from workbench.core.conversation import Conversation, SkippedEntry
from workbench.engine.workspace import Workspace
from workbench.errors import FormatError
from workbench.formats import detect_format, read_conversations


def message(sender: str, text: str = "", **keys: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "uuid": keys.pop("uuid", f"m-{sender}-{text[:8]}"),
        "sender": sender,
        "text": text,
        "created_at": keys.pop("created_at", "2026-01-17T14:23:33Z"),
        "attachments": [],
        "files": [],
    }
    if "content" not in keys and text:
        base["content"] = [{"type": "text", "text": text}]
    base.update(keys)
    return base


def chat(messages: list[Any], uuid: str = "c-1", name: str = "A chat") -> dict[str, Any]:
    return {
        "uuid": uuid,
        "name": name,
        "created_at": "2026-01-17T14:00:00Z",
        "updated_at": "2026-01-17T15:00:00Z",
        "chat_messages": messages,
    }


def read_file(tmp_path: Path, data: Any) -> list[Conversation | SkippedEntry]:
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    assert detect_format(path).name == "claude"
    return list(read_conversations(path))


def only_conversation(items: list[Conversation | SkippedEntry]) -> Conversation:
    convs = [i for i in items if isinstance(i, Conversation)]
    assert len(convs) == 1
    return convs[0]


def test_senders_text_times_and_ids(tmp_path: Path) -> None:
    conv = only_conversation(
        read_file(tmp_path, [chat([message("human", "hi"), message("assistant", "hello")])])
    )

    assert [(m.role, m.content) for m in conv.messages] == [("user", "hi"), ("assistant", "hello")]
    assert conv.source == "claude" and conv.source_id == "c-1"
    assert conv.title == "A chat"
    assert conv.messages[0].created_at is not None
    assert conv.messages[0].created_at.isoformat() == "2026-01-17T14:23:33+00:00"
    assert conv.created_at is not None and conv.created_at.hour == 14


def test_text_field_is_used_when_there_are_no_content_blocks(tmp_path: Path) -> None:
    raw = message("human", "")
    raw["text"] = "only the text field"
    conv = only_conversation(read_file(tmp_path, [chat([raw])]))

    assert conv.messages[0].content == "only the text field"


def test_thinking_becomes_a_reasoning_part_and_stays_out_of_the_text(tmp_path: Path) -> None:
    content = [
        {"type": "thinking", "thinking": "Consider the physiology."},
        {"type": "text", "text": "Yes, it can."},
    ]
    conv = only_conversation(read_file(tmp_path, [chat([message("assistant", content=content)])]))

    reply = conv.messages[0]
    assert reply.content == "Yes, it can."
    assert reply.parts is not None
    assert reply.parts[0] == {"type": "reasoning", "text": "Consider the physiology."}


def test_thinking_keeps_its_summaries_and_cut_off(tmp_path: Path) -> None:
    thinking = {
        "type": "thinking",
        "thinking": "Weigh both routes.",
        "summaries": [{"summary": "Comparing routes"}, {"summary": "Picking the coast"}],
        "cut_off": True,
        "start_timestamp": "2024-05-01T10:00:00.000Z",
        "stop_timestamp": "2024-05-01T10:00:04.000Z",
    }
    content = [thinking, {"type": "text", "text": "Take the coast road."}]
    conv = only_conversation(read_file(tmp_path, [chat([message("assistant", content=content)])]))

    part = conv.messages[0].parts[0]  # type: ignore[index]

    assert part["type"] == "reasoning" and part["text"] == "Weigh both routes."
    assert part["summaries"] == thinking["summaries"]
    assert part["cut_off"] is True
    assert part["stop_timestamp"] == "2024-05-01T10:00:04.000Z"


def test_tool_use_and_result_become_a_call_and_a_tool_message(tmp_path: Path) -> None:
    content = [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "web_search", "input": {"query": "paris"}},
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "name": "web_search",
            "content": [{"type": "text", "text": "18C and rain"}],
        },
        {"type": "text", "text": "It is raining."},
    ]
    conv = only_conversation(read_file(tmp_path, [chat([message("assistant", content=content)])]))

    call, result, answer = conv.messages
    assert call.role == "assistant" and call.content == "Let me look."
    assert call.tool_calls == [
        {
            "id": "toolu_1",
            "type": "function",
            "function": {"name": "web_search", "arguments": json.dumps({"query": "paris"})},
        }
    ]
    assert result.role == "tool"
    assert result.tool_call_id == "toolu_1"
    assert result.content == "18C and rain"
    assert answer.role == "assistant" and answer.content == "It is raining."
    assert [m.position for m in conv.messages] == [0, 1, 2]


def test_attachments_keep_their_extracted_text(tmp_path: Path) -> None:
    raw = message(
        "human",
        "summarise this",
        attachments=[
            {
                "file_name": "notes.txt",
                "file_type": "txt",
                "extracted_content": "line one\nline two",
            }
        ],
    )
    conv = only_conversation(read_file(tmp_path, [chat([raw])]))

    text = conv.messages[0].content
    assert text.startswith("summarise this")
    assert "[Attachment: notes.txt]\nline one\nline two" in text
    parts = conv.messages[0].parts
    assert parts is not None
    assert {
        "type": "attachment",
        "file_name": "notes.txt",
        "text": "line one\nline two",
        "file_type": "txt",
    } in parts


def test_files_without_content_leave_a_marker(tmp_path: Path) -> None:
    raw = message("human", "look", files=[{"file_name": "photo.png"}])
    conv = only_conversation(read_file(tmp_path, [chat([raw])]))

    assert conv.messages[0].content == "look\n\n[File: photo.png]"


def test_null_message_is_reported_and_the_rest_imported(tmp_path: Path) -> None:
    items = read_file(
        tmp_path,
        [chat([message("human", "q"), None, message("assistant", "a")], name="Scale")],
    )

    skipped = [i for i in items if isinstance(i, SkippedEntry)]
    assert len(skipped) == 1
    assert skipped[0].entry == "item 0 chat_messages[1]"
    assert "Scale" in skipped[0].reason and "message 1" in skipped[0].reason
    assert [m.content for m in only_conversation(items).messages] == ["q", "a"]


def test_unknown_sender_is_reported(tmp_path: Path) -> None:
    items = read_file(tmp_path, [chat([message("robot", "beep"), message("human", "hi")])])

    skipped = [i for i in items if isinstance(i, SkippedEntry)]
    assert "robot" in skipped[0].reason
    assert [m.content for m in only_conversation(items).messages] == ["hi"]


def test_empty_name_takes_the_first_human_message_as_title(tmp_path: Path) -> None:
    conv = only_conversation(
        read_file(tmp_path, [chat([message("human", "Напиши функцию на Python")], name="")])
    )

    assert conv.title == "Напиши функцию на Python"


def test_conversation_without_messages_is_an_empty_session(tmp_path: Path) -> None:
    conv = only_conversation(read_file(tmp_path, [chat([], name="Пустой чат")]))

    assert conv.title == "Пустой чат" and conv.messages == []


def test_export_zip_is_read(tmp_path: Path) -> None:
    archive = tmp_path / "data-2026.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("conversations.json", json.dumps([chat([message("human", "hi")])]))
        zf.writestr("users.json", "[]")

    assert detect_format(archive).name == "claude"
    assert [type(i).__name__ for i in read_conversations(archive)] == ["Conversation"]


def test_invalid_json_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    path.write_text('[{"uuid": "u", "chat_messages": [\n  {"sender": human}]}]', encoding="utf-8")

    with pytest.raises(FormatError, match=r"conversations\.json.*line 2"):
        read_conversations(path, "claude")


def test_importing_twice_does_not_duplicate(tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([chat([message("human", "hi")])]), encoding="utf-8")
    with Workspace.open(tmp_path / "w.db") as ws:
        ws.import_path(path)
        again = ws.import_path(path)
        count = ws.count_sessions()

    assert count == 1
    assert [created for _, created in again.sessions] == [False]


def test_an_object_that_is_no_conversation_is_skipped_and_unknown_keys_are_kept(
    tmp_path: Path,
) -> None:
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([
        {"uuid": "c-1", "name": "Kept", "account": {"uuid": "acc-9"}, "is_starred": True,
         "chat_messages": [{"uuid": "m1", "sender": "human", "text": "hi",
                            "created_at": "2025-01-01T00:00:00Z"}]},
        {"zz": 5},
    ]), encoding="utf-8")
    with Workspace.open(tmp_path / "wb.db") as ws:
        report = ws.import_path(path, format="claude")
        assert [s.entry for s in report.skipped] == ["item 1"]
        assert "Not a Claude conversation" in report.skipped[0].reason
        [info] = ws.list_sessions()
        metadata = ws.session_metadata(info.id)
    assert metadata["account"] == {"uuid": "acc-9"} and metadata["is_starred"] is True
