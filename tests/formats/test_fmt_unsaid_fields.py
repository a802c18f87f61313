"""What real exports carry beyond their text is kept, never dropped without a word
(SPEC §7, §11): regenerated images, content types an importer has no reading for,
tool items, citations, structured-output schemas, block times.

Each fixture is a small file shaped like the tool's export.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from workbench.core.conversation import Conversation
from workbench.formats import read_conversations


def _conversations(path: Path, fmt: str | None = None) -> list[Conversation]:
    return [c for c in read_conversations(path, fmt) if isinstance(c, Conversation)]


# --------------------------------------------------------------------------- ChatGPT


def _chatgpt_node(node_id: str, parent: str | None, children: list[str],
                  message: dict[str, Any] | None) -> dict[str, Any]:
    return {"id": node_id, "parent": parent, "children": children, "message": message}


def _chatgpt_message(node_id: str, role: str, content: dict[str, Any], when: float,
                     **extra: Any) -> dict[str, Any]:
    author: dict[str, Any] = {"role": role}
    if "name" in extra:
        author["name"] = extra.pop("name")
    return {"id": node_id, "author": author, "create_time": when, "content": content,
            "metadata": {}, "recipient": extra.pop("recipient", "all"), **extra}


def _chatgpt_export(path: Path, mapping: dict[str, Any], current: str) -> Path:
    entry = {"id": "conv-1", "title": "Chat", "create_time": 1700000000.0,
             "update_time": 1700000100.0, "current_node": current, "mapping": mapping}
    path.write_text(json.dumps([entry]), encoding="utf-8")
    return path


def _image(pointer: str, seed: int) -> dict[str, Any]:
    return {"content_type": "multimodal_text", "parts": [
        {"content_type": "image_asset_pointer", "asset_pointer": pointer,
         "width": 1024, "height": 1024, "metadata": {"dalle": {"seed": seed}}}]}


def test_a_regenerated_image_is_a_branch_not_dropped_as_a_repeat(tmp_path: Path) -> None:
    mapping = {
        "root": _chatgpt_node("root", None, ["u"], None),
        "u": _chatgpt_node("u", "root", ["a"], _chatgpt_message(
            "u", "user", {"content_type": "text", "parts": ["draw a cat"]}, 1700000001)),
        "a": _chatgpt_node("a", "u", ["t1", "t2"], _chatgpt_message(
            "a", "assistant", {"content_type": "text", "parts": ['{"prompt": "a cat"}']},
            1700000002, recipient="dalle.text2im")),
        "t1": _chatgpt_node("t1", "a", [], _chatgpt_message(
            "t1", "tool", _image("file-service://file-ONE", 1), 1700000003,
            name="dalle.text2im")),
        "t2": _chatgpt_node("t2", "a", [], _chatgpt_message(
            "t2", "tool", _image("file-service://file-TWO", 2), 1700000004,
            name="dalle.text2im")),
    }
    path = _chatgpt_export(tmp_path / "conversations.json", mapping, current="t2")

    convs = _conversations(path)

    pointers = {c.source_id: c.messages[-1].parts[0]["asset_pointer"]  # type: ignore[index]
                for c in convs}
    assert pointers == {"conv-1": "file-service://file-TWO",
                        "conv-1#branch-t1": "file-service://file-ONE"}


def test_content_types_without_a_reading_keep_their_fields(tmp_path: Path) -> None:
    page = {"content_type": "sonic_webpage", "url": "https://example.org/a",
            "title": "Example page", "text": "What the page says."}
    screen = {"content_type": "computer_output", "computer_id": "vm-1",
              "screenshot": {"content_type": "image_asset_pointer",
                             "asset_pointer": "file-service://file-SHOT"}}
    quote = {"content_type": "tether_quote", "url": "https://example.org/q",
             "domain": "example.org", "title": "Q", "text": "Quoted."}
    mapping = {
        "root": _chatgpt_node("root", None, ["u"], None),
        "u": _chatgpt_node("u", "root", ["p"], _chatgpt_message(
            "u", "user", {"content_type": "text", "parts": ["open it"]}, 1700000001)),
        "p": _chatgpt_node("p", "u", ["s"], _chatgpt_message("p", "assistant", page,
                                                              1700000002)),
        "s": _chatgpt_node("s", "p", ["q"], _chatgpt_message("s", "assistant", screen,
                                                              1700000003)),
        "q": _chatgpt_node("q", "s", [], _chatgpt_message("q", "tool", quote, 1700000004,
                                                           name="browser")),
    }
    path = _chatgpt_export(tmp_path / "conversations.json", mapping, current="q")

    (conv,) = _conversations(path)

    by_time = {int(m.created_at.timestamp()): m for m in conv.messages}  # type: ignore[union-attr]
    assert by_time[1700000002].content == "What the page says."
    assert {"type": "sonic_webpage", "url": "https://example.org/a",
            "title": "Example page"} in by_time[1700000002].parts  # type: ignore[operator]
    screenshot = by_time[1700000003]
    assert screenshot.content == "[computer_output]"
    assert screenshot.parts == [{"type": "computer_output", "computer_id": "vm-1",
                                 "screenshot": screen["screenshot"]}]
    assert {"type": "tether_quote", "domain": "example.org"} in by_time[1700000004].parts  # type: ignore[operator]


# --------------------------------------------------------------------------- Open WebUI


def test_open_webui_output_items_without_a_reading_and_citations_are_kept(
    tmp_path: Path,
) -> None:
    search = {"type": "web_search_call", "id": "ws-1", "status": "completed",
              "action": {"query": "weather paris"}}
    image = {"type": "image_generation_call", "id": "ig-1", "result": "aW1hZ2U="}
    cited = [{"type": "url_citation", "url": "https://example.org/w", "title": "W"}]
    reply = {"id": "b", "parentId": "a", "childrenIds": [], "role": "assistant",
             "content": "Rain.", "timestamp": 1700000002, "model": "m",
             "output": [search,
                        {"type": "message", "id": "m-1", "role": "assistant",
                         "content": [{"type": "output_text", "text": "Rain.",
                                      "annotations": cited}]},
                        image]}
    chat = {"id": "w-1", "title": "Weather", "created_at": 1700000000,
            "updated_at": 1700000005,
            "chat": {"history": {"currentId": "b", "messages": {
                "a": {"id": "a", "parentId": None, "childrenIds": ["b"], "role": "user",
                      "content": "Weather in Paris?", "timestamp": 1700000001},
                "b": reply}}}}
    path = tmp_path / "openwebui.json"
    path.write_text(json.dumps([chat]), encoding="utf-8")

    (conv,) = _conversations(path)

    answer = conv.messages[-1]
    assert answer.content == "Rain."
    assert answer.parts == [search, {"type": "text", "text": "Rain.", "annotations": cited},
                            image]


# --------------------------------------------------------------------------- llm logs.db


def _llm_old_log(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE conversations (id TEXT PRIMARY KEY, name TEXT, model TEXT);
        CREATE TABLE schemas (id TEXT PRIMARY KEY, content TEXT);
        CREATE TABLE responses (
            id TEXT PRIMARY KEY, model TEXT, prompt TEXT, system TEXT, prompt_json TEXT,
            options_json TEXT, response TEXT, response_json TEXT, conversation_id TEXT,
            duration_ms INTEGER, datetime_utc TEXT, input_tokens INTEGER,
            output_tokens INTEGER, token_details TEXT, schema_id TEXT, resolved_model TEXT);
    """)
    conn.execute("INSERT INTO conversations VALUES ('c1', 'dogs', 'gpt-4o-mini')")
    conn.execute("INSERT INTO schemas VALUES ('s1', ?)",
                 (json.dumps({"type": "object", "properties": {"name": {"type": "string"}}}),))
    conn.execute(
        "INSERT INTO responses (id, model, prompt, response, response_json, conversation_id,"
        " datetime_utc, schema_id) VALUES ('r1', 'gpt-4o-mini', 'invent a dog',"
        " '{\"name\": \"Rex\"}', ?, 'c1', '2025-01-02T03:04:05', 's1')",
        (json.dumps({"id": "chatcmpl-1", "finish_reason": "stop"}),),
    )
    conn.commit()
    conn.close()
    return path


def test_llm_keeps_the_schema_a_structured_prompt_asked_for_and_the_raw_response(
    tmp_path: Path,
) -> None:
    (conv,) = _conversations(_llm_old_log(tmp_path / "logs.db"))

    reply = conv.messages[-1]
    assert reply.content == '{"name": "Rex"}'
    assert reply.metadata["schema_id"] == "s1"
    assert reply.metadata["schema"] == {"type": "object",
                                        "properties": {"name": {"type": "string"}}}
    assert reply.metadata["response_json"] == {"id": "chatcmpl-1", "finish_reason": "stop"}


def test_llm_new_schema_keeps_provider_metadata_and_the_turn_schema_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "logs.db"
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE messages (hash TEXT PRIMARY KEY, parent_hash TEXT, role TEXT,
            provider_metadata TEXT);
        CREATE TABLE parts (id INTEGER PRIMARY KEY, message_hash TEXT, position INTEGER,
            type TEXT, tool_name TEXT, text TEXT, payload TEXT);
        CREATE TABLE threads (id TEXT PRIMARY KEY, name TEXT, tip_message_hash TEXT,
            forked_from TEXT, datetime_utc TEXT);
        CREATE TABLE turns (id TEXT PRIMARY KEY, thread_id TEXT, parent_message_hash TEXT,
            tip_message_hash TEXT, model TEXT, resolved_model TEXT, options_json TEXT,
            schema_id TEXT, input_tokens INTEGER, output_tokens INTEGER, token_details TEXT,
            duration_ms INTEGER, datetime_utc TEXT, response_json TEXT);
        CREATE TABLE schemas (id TEXT PRIMARY KEY, content TEXT);
        INSERT INTO schemas VALUES ('s1', '{"type": "object"}');
        INSERT INTO messages VALUES ('h1', NULL, 'user', NULL);
        INSERT INTO messages VALUES ('h2', 'h1', 'assistant', '{"signature": "sig-1"}');
        INSERT INTO parts VALUES (1, 'h1', 0, 'text', NULL, 'hi', NULL);
        INSERT INTO parts VALUES (2, 'h2', 0, 'text', NULL, '{}', NULL);
        INSERT INTO threads VALUES ('t1', 'hello', 'h2', NULL, '2025-01-02T03:04:05');
        INSERT INTO turns VALUES ('u1', 't1', NULL, 'h2', 'm', NULL, NULL, 's1', 1, 2, NULL,
            10, '2025-01-02T03:04:05', '{"id": "resp-1"}');
    """)
    conn.commit()
    conn.close()

    (conv,) = _conversations(path)

    reply = conv.messages[-1]
    assert reply.metadata["provider_metadata"] == {"signature": "sig-1"}
    assert reply.metadata["schema"] == {"type": "object"}
    assert reply.metadata["response_json"] == {"id": "resp-1"}
    assert "response_json" not in conv.messages[0].metadata


# --------------------------------------------------------------------------- Claude


def test_claude_block_times_tool_status_and_message_keys_are_kept(tmp_path: Path) -> None:
    use = {"start_timestamp": "2025-01-01T10:00:03Z", "stop_timestamp": "2025-01-01T10:00:04Z",
           "flags": None, "type": "tool_use", "id": "toolu_1", "name": "web_search",
           "input": {"query": "x"}, "message": "Searching the web", "icon_name": "globe",
           "display_content": None}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "name": "web_search",
              "content": [{"type": "knowledge", "title": "X", "url": "https://x",
                           "text": "x is y"}],
              "is_error": False, "display_content": {"type": "rich_link", "url": "https://x"}}
    text = {"start_timestamp": "2025-01-01T10:00:05Z", "stop_timestamp": "2025-01-01T10:00:06Z",
            "flags": None, "type": "text", "text": "x is y.", "citations": []}
    export = [{"uuid": "k1", "name": "Search", "created_at": "2025-01-01T10:00:00Z",
               "updated_at": "2025-01-01T10:05:00Z", "chat_messages": [
                   {"uuid": "m1", "sender": "human", "text": "find x",
                    "created_at": "2025-01-01T10:00:00Z",
                    "updated_at": "2025-01-01T10:00:01Z"},
                   {"uuid": "m2", "sender": "assistant", "content": [use, result, text],
                    "created_at": "2025-01-01T10:00:02Z"}]}]
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(export), encoding="utf-8")

    (conv,) = _conversations(path)

    question, call, answer, reply = conv.messages
    assert question.metadata["updated_at"] == "2025-01-01T10:00:01Z"
    assert call.metadata["content_blocks"] == [
        {"index": 0, "type": "tool_use", "start_timestamp": "2025-01-01T10:00:03Z",
         "stop_timestamp": "2025-01-01T10:00:04Z", "message": "Searching the web",
         "icon_name": "globe"}]
    assert answer.metadata["content_blocks"] == [
        {"index": 1, "type": "tool_result", "display_content": result["display_content"]}]
    assert reply.content == "x is y."
    assert reply.metadata["content_blocks"] == [
        {"index": 2, "type": "text", "start_timestamp": "2025-01-01T10:00:05Z",
         "stop_timestamp": "2025-01-01T10:00:06Z"}]


def test_chatgpt_message_metadata_beyond_the_bookkeeping_is_kept(tmp_path: Path) -> None:
    answer = _chatgpt_message(
        "a", "assistant", {"content_type": "text", "parts": ["Hi there."]}, 1700000002,
        update_time=1700000009, channel="analysis", weight=0.0)
    answer["author"]["name"] = "Helper GPT"
    answer["metadata"] = {"request_id": "r-1", "timestamp_": "absolute", "pad": "xxxx",
                          "model_slug": "gpt-4o", "gizmo_id": "g-abc",
                          "voice_mode_message": True, "search_queries": [{"q": "hi"}]}
    run = _chatgpt_message("o", "tool", {"content_type": "execution_output", "text": "1"},
                           1700000004, name="python")
    run["metadata"] = {"aggregate_result": {
        "status": "failed_with_in_kernel_exception", "run_id": "x", "start_time": 1700000003.5,
        "end_time": 1700000003.9, "code": "1/0",
        "in_kernel_exception": {"name": "ZeroDivisionError"},
        "messages": [], "jupyter_messages": [{"msg_type": "status"}]}}
    mapping = {
        "root": _chatgpt_node("root", None, ["u"], None),
        "u": _chatgpt_node("u", "root", ["a"], _chatgpt_message(
            "u", "user", {"content_type": "text", "parts": ["hello"]}, 1700000001)),
        "a": _chatgpt_node("a", "u", ["c"], answer),
        "c": _chatgpt_node("c", "a", ["o"], _chatgpt_message(
            "c", "assistant", {"content_type": "code", "language": "python", "text": "1/0"},
            1700000003, recipient="python")),
        "o": _chatgpt_node("o", "c", [], run),
    }
    path = _chatgpt_export(tmp_path / "conversations.json", mapping, current="o")

    (conv,) = _conversations(path)

    meta = conv.messages[1].metadata
    assert meta == {"model": "gpt-4o", "gizmo_id": "g-abc", "voice_mode_message": True,
                    "search_queries": [{"q": "hi"}], "message_update_time": 1700000009,
                    "message_channel": "analysis", "message_weight": 0.0,
                    "author_name": "Helper GPT"}
    assert conv.messages[3].metadata["execution"] == {
        "status": "failed_with_in_kernel_exception", "start_time": 1700000003.5,
        "end_time": 1700000003.9, "in_kernel_exception": {"name": "ZeroDivisionError"}}


def test_llm_keeps_the_bytes_of_an_attachment_the_log_holds_the_only_copy_of(
    tmp_path: Path,
) -> None:
    path = _llm_old_log(tmp_path / "logs.db")
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE attachments (id TEXT PRIMARY KEY, type TEXT, path TEXT, url TEXT,
            content BLOB);
        CREATE TABLE prompt_attachments (response_id TEXT, attachment_id TEXT,
            "order" INTEGER);
        INSERT INTO prompt_attachments VALUES ('r1', 'piped', 0);
        INSERT INTO prompt_attachments VALUES ('r1', 'file', 1);
    """)
    conn.execute("INSERT INTO attachments VALUES ('piped', 'image/png', NULL, NULL, ?)",
                 (b"\x89PNG-bytes",))
    conn.execute("INSERT INTO attachments VALUES ('file', 'image/jpeg', '/tmp/cat.jpg', NULL,"
                 " NULL)")
    conn.commit()
    conn.close()

    (conv,) = _conversations(path)

    prompt = conv.messages[0]
    piped, on_disk = [p for p in prompt.parts or [] if p["type"] == "attachment"]
    assert piped["data_url"] == "data:image/png;base64,iVBORy1ieXRlcw=="
    assert on_disk == {"type": "attachment", "id": "file", "mime_type": "image/jpeg",
                       "path": "/tmp/cat.jpg"}


def test_a_hidden_node_of_another_content_type_is_kept_in_the_session_metadata(
    tmp_path: Path,
) -> None:
    hidden = _chatgpt_message("h", "tool", {"content_type": "tether_browsing_display",
                                             "result": "page shown to the model",
                                             "summary": None}, 1700000002, name="browser")
    hidden["metadata"] = {"is_visually_hidden_from_conversation": True}
    mapping = {
        "root": _chatgpt_node("root", None, ["u"], None),
        "u": _chatgpt_node("u", "root", ["h"], _chatgpt_message(
            "u", "user", {"content_type": "text", "parts": ["look it up"]}, 1700000001)),
        "h": _chatgpt_node("h", "u", ["a"], hidden),
        "a": _chatgpt_node("a", "h", [], _chatgpt_message(
            "a", "assistant", {"content_type": "text", "parts": ["Found."]}, 1700000003)),
    }
    path = _chatgpt_export(tmp_path / "conversations.json", mapping, current="a")

    (conv,) = _conversations(path)

    assert [m.content for m in conv.messages] == ["look it up", "Found."]
    assert conv.metadata["hidden_messages"] == [
        {"node": "h", "role": "tool",
         "content": {"content_type": "tether_browsing_display",
                     "result": "page shown to the model"}}]
