"""The Open WebUI importer: the history tree, details blocks, output items, branches."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from workbench.core.conversation import Conversation, SkippedEntry
from workbench.engine.workspace import Workspace
from workbench.formats import detect_format, read_conversations


def msg(
    msg_id: str, parent: str | None, role: str, content: str, ts: int, **keys: Any
) -> dict[str, Any]:
    return {
        "id": msg_id,
        "parentId": parent,
        "childrenIds": [],
        "role": role,
        "content": content,
        "timestamp": ts,
        **keys,
    }


def chat(
    messages: list[dict[str, Any]], current: str | None, chat_id: str = "chat-1", **keys: Any
) -> dict[str, Any]:
    by_id = {m["id"]: m for m in messages}
    for m in messages:
        if m["parentId"] is not None:
            by_id[m["parentId"]]["childrenIds"].append(m["id"])
    history: dict[str, Any] = {"messages": by_id}
    if current is not None:
        history["currentId"] = current
    return {
        "id": chat_id,
        "user_id": "u1",
        "title": keys.pop("title", "A chat"),
        "chat": {"title": "A chat", "models": ["llama3"], "history": history},
        "created_at": 1_700_000_000,
        "updated_at": 1_700_000_100,
        **keys,
    }


def read(tmp_path: Path, chats: list[Any]) -> list[Conversation | SkippedEntry]:
    path = tmp_path / "chat-export.json"
    path.write_text(json.dumps(chats), encoding="utf-8")
    assert detect_format(path).name == "openwebui"
    return list(read_conversations(path))


def convs(items: list[Conversation | SkippedEntry]) -> list[Conversation]:
    return [i for i in items if isinstance(i, Conversation)]


def test_path_to_current_id_is_the_session(tmp_path: Path) -> None:
    messages = [
        msg("u1", None, "user", "Hello", 1_700_000_000),
        msg("a1", "u1", "assistant", "Hi!", 1_700_000_005, model="llama3"),
        msg("a2", "u1", "assistant", "Hey there.", 1_700_000_009, model="llama3"),
    ]
    session, branch = convs(read(tmp_path, [chat(messages, "a1")]))

    assert [(m.role, m.content) for m in session.messages] == [
        ("user", "Hello"),
        ("assistant", "Hi!"),
    ]
    assert session.messages[1].metadata["model"] == "llama3"
    assert session.messages[1].created_at is not None
    assert session.messages[1].created_at.timestamp() == 1_700_000_005
    assert session.source == "openwebui" and session.source_id == "chat-1"
    assert branch.source_id == "chat-1#branch-a2"
    assert branch.messages[-1].content == "Hey there."


def test_reasoning_details_become_a_part_and_leave_the_text(tmp_path: Path) -> None:
    content = (
        '<details type="reasoning" done="true" duration="3">'
        "<summary>Thought for 3 seconds</summary>"
        "&gt; Let me break this down...\n&gt; 15 * 17 = 255</details>\n255"
    )
    messages = [
        msg("u1", None, "user", "What is 15 * 17?", 1),
        msg("a1", "u1", "assistant", content, 2),
    ]
    reply = convs(read(tmp_path, [chat(messages, "a1")]))[0].messages[1]

    assert reply.content == "255"
    assert reply.parts is not None
    assert reply.parts[0]["type"] == "reasoning"
    assert reply.parts[0]["text"] == "Let me break this down...\n15 * 17 = 255"
    assert reply.parts[0]["duration"] == "3"


def test_tool_call_details_with_attributes_become_call_and_result(tmp_path: Path) -> None:
    arguments = html.escape(json.dumps({"city": "Paris"}), quote=True)
    result = html.escape(json.dumps("Paris: 18C, rain"), quote=True)
    content = (
        f'<details type="tool_calls" done="true" id="call_9" name="get_weather" '
        f'arguments="{arguments}" result="{result}" files="">'
        "<summary>Tool Executed</summary></details>\nThe weather in Paris is 18C with rain."
    )
    messages = [msg("u1", None, "user", "Weather?", 1), msg("a1", "u1", "assistant", content, 2)]

    call, tool, answer = convs(read(tmp_path, [chat(messages, "a1")]))[0].messages[1:]

    assert call.tool_calls == [
        {
            "id": "call_9",
            "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})},
        }
    ]
    assert (tool.role, tool.content, tool.tool_call_id, tool.name) == (
        "tool",
        "Paris: 18C, rain",
        "call_9",
        "get_weather",
    )
    assert answer.content == "The weather in Paris is 18C with rain."


def test_output_items_win_over_the_content(tmp_path: Path) -> None:
    output = [
        {"type": "reasoning", "content": [{"type": "output_text", "text": "think"}]},
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"q": 1}'},
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": [{"type": "input_text", "text": "found"}],
        },
        {"type": "message", "content": [{"type": "output_text", "text": "Done."}]},
    ]
    messages = [
        msg("u1", None, "user", "go", 1),
        msg(
            "a1",
            "u1",
            "assistant",
            '<details type="tool_calls">stale</details>Done.',
            2,
            output=output,
        ),
    ]

    call, tool, answer = convs(read(tmp_path, [chat(messages, "a1")]))[0].messages[1:]

    assert call.parts is not None and call.parts[0] == {"type": "reasoning", "text": "think"}
    assert call.tool_calls is not None and call.tool_calls[0]["function"]["name"] == "lookup"
    assert (tool.content, tool.tool_call_id, tool.name) == ("found", "c1", "lookup")
    assert answer.content == "Done."


def test_flat_messages_list_without_history(tmp_path: Path) -> None:
    item = {
        "id": "flat",
        "title": "Flat",
        "chat": {
            "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
        },
    }
    conv = convs(read(tmp_path, [item]))[0]

    assert [(m.role, m.content) for m in conv.messages] == [("user", "a"), ("assistant", "b")]


def test_missing_current_id_takes_the_latest_leaf(tmp_path: Path) -> None:
    messages = [
        msg("u1", None, "user", "q", 1),
        msg("late", "u1", "assistant", "late", 9),
        msg("early", "u1", "assistant", "early", 3),
    ]
    session = convs(read(tmp_path, [chat(messages, None)]))[0]

    assert session.messages[-1].content == "late"


def test_chat_without_messages_is_skipped_and_tags_are_kept(tmp_path: Path) -> None:
    good = chat([msg("u1", None, "user", "q", 1)], "u1", chat_id="good", meta={"tags": ["work"]})
    bad = {"id": "bad", "title": "Empty", "chat": {"models": []}}

    items = read(tmp_path, [bad, good])

    skipped = [i for i in items if isinstance(i, SkippedEntry)]
    assert skipped[0].entry == "item 0" and "Empty" in skipped[0].reason
    assert convs(items)[0].tags == ["work"]


def test_reimport_skips_known_chats(tmp_path: Path) -> None:
    path = tmp_path / "export.json"
    path.write_text(json.dumps([chat([msg("u1", None, "user", "q", 1)], "u1")]), encoding="utf-8")
    with Workspace.open(tmp_path / "w.db") as ws:
        ws.import_path(path)
        again = ws.import_path(path)

    assert [created for _, created in again.sessions] == [False]


def test_millisecond_timestamps_read_as_the_same_time(tmp_path: Path) -> None:
    messages = [
        msg("u1", None, "user", "in seconds", 1_700_000_000),
        msg("a1", "u1", "assistant", "in milliseconds", 1_700_000_000_500),
    ]
    user, reply = convs(read(tmp_path, [chat(messages, "a1")]))[0].messages

    assert user.created_at is not None and reply.created_at is not None
    assert (reply.created_at - user.created_at).total_seconds() == 0.5
