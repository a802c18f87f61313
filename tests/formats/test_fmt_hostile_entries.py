"""Hostile values inside one entry of an export: the entry costs at most itself.

Each test writes a small file of three conversations of one format, spoils the middle
one (a time no clock can show, a value of the wrong type, a cycle in its tree…) and
checks that the two others come in whole, that nothing hangs or raises, and that no
time is made up.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from workbench.core.conversation import Conversation, SkippedEntry
from workbench.formats import read_conversations
from workbench.formats._support import epoch_time

T0 = 1_714_585_000

# --------------------------------------------------------------------------- entries


def chatgpt(i: int, **keys: Any) -> dict[str, Any]:
    def node(node_id: str, parent: str | None, children: list[str],
             role: str | None = None, text: str = "") -> dict[str, Any]:
        message = None if role is None else {
            "id": node_id, "author": {"role": role}, "create_time": T0 + len(children),
            "content": {"content_type": "text", "parts": [text]}, "recipient": "all"}
        return {"id": node_id, "parent": parent, "children": children, "message": message}

    return {"title": f"chat {i}", "conversation_id": f"c-{i}", "create_time": T0,
            "update_time": T0 + 9, "current_node": "a",
            "mapping": {"root": node("root", None, ["u"]),
                        "u": node("u", "root", ["a", "b"], "user", f"hello {i}"),
                        "a": node("a", "u", [], "assistant", f"reply {i}"),
                        "b": node("b", "u", [], "assistant", f"other reply {i}")},
            **keys}


def openwebui(i: int) -> dict[str, Any]:
    return {"id": f"ow-{i}", "title": f"chat {i}", "created_at": T0, "updated_at": T0 + 9,
            "chat": {"history": {"currentId": "a", "messages": {
                "u": {"id": "u", "parentId": None, "childrenIds": ["a", "b"], "role": "user",
                      "content": f"hello {i}", "timestamp": T0 + 1},
                "a": {"id": "a", "parentId": "u", "childrenIds": [], "role": "assistant",
                      "content": f"reply {i}", "timestamp": T0 + 2},
                "b": {"id": "b", "parentId": "u", "childrenIds": [], "role": "assistant",
                      "content": f"other reply {i}", "timestamp": T0 + 3}}}}}


def claude(i: int) -> dict[str, Any]:
    return {"uuid": f"cl-{i}", "name": f"chat {i}", "created_at": "2024-05-01T10:00:00Z",
            "chat_messages": [
                {"uuid": f"m{i}", "sender": "human", "text": f"hello {i}",
                 "created_at": "2024-05-01T10:00:01Z"},
                {"uuid": f"n{i}", "sender": "assistant", "text": f"reply {i}",
                 "created_at": "2024-05-01T10:00:02Z"}]}


def openai(i: int) -> dict[str, Any]:
    return {"title": f"chat {i}", "messages": [
        {"role": "user", "content": [{"type": "text", "text": f"hello {i}"}]},
        {"role": "assistant", "content": f"reply {i}"}]}


def write(tmp_path: Path, entries: list[Any], name: str = "export.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(entries), encoding="utf-8")
    return path


def write_text(tmp_path: Path, text: str, name: str = "export.json") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def read(path: Path, fmt: str) -> list[Conversation | SkippedEntry]:
    return list(read_conversations(path, fmt))


def texts(items: list[Conversation | SkippedEntry]) -> list[str]:
    return [m.content for c in items if isinstance(c, Conversation) for m in c.messages]


def assert_neighbours_whole(items: list[Conversation | SkippedEntry]) -> None:
    every = texts(items)
    for i in (0, 2):
        assert f"hello {i}" in every and f"reply {i}" in every


# --------------------------------------------------------------------------- times


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, 1e300, 10**30, 10**400,
                                   -1, -1.5, -1e20, 0, 7, 0.5, 7000])
def test_a_time_no_clock_can_show_is_no_time(value: Any) -> None:
    # Infinity looped for ever (divided by 1000 until below 1e11); 1e300 became a day
    # of 2001, -1 a second before 1970 and 0 or 7 a second of 1970: times the source
    # never held (the store already took a session time in 1970 for a placeholder).
    assert epoch_time(value) is None


@pytest.mark.parametrize("value, expected", [
    (T0, T0), (T0 * 1000, T0), (T0 * 1_000_000, T0), (T0 * 1_000_000_000, T0),
    (float(T0) + 0.5, T0 + 0.5),
])
def test_an_epoch_time_in_any_unit_reads_as_the_same_time(value: Any, expected: float) -> None:
    assert epoch_time(value) == datetime.fromtimestamp(expected, UTC)


@pytest.mark.parametrize("fmt, entry", [
    ("chatgpt", lambda: chatgpt(1, create_time="@@", update_time="@@")),
    ("openwebui", lambda: {**openwebui(1), "created_at": "@@"}),
    ("claude", lambda: {**claude(1), "created_at": "@@"}),
])
@pytest.mark.parametrize("literal", ["1e400", "-1e400", "-5", "1e300"])
def test_a_huge_or_negative_time_in_a_file_imports_without_a_time(
    tmp_path: Path, fmt: str, entry: Any, literal: str
) -> None:
    builders = {"chatgpt": chatgpt, "openwebui": openwebui, "claude": claude}
    text = json.dumps([builders[fmt](0), entry(), builders[fmt](2)])
    path = write_text(tmp_path, text.replace('"@@"', literal))

    items = read(path, fmt)

    assert_neighbours_whole(items)
    spoiled = [c for c in items if isinstance(c, Conversation) and c.title == "chat 1"]
    assert spoiled and spoiled[0].created_at is None


# --------------------------------------------------------------------------- trees


def _chatgpt_cycle() -> dict[str, Any]:
    entry = chatgpt(1)
    entry["mapping"]["root"]["parent"] = "b"  # root -> b -> u -> root
    entry["mapping"]["b"]["children"] = ["root"]
    return entry


def _openwebui_cycle() -> dict[str, Any]:
    entry = openwebui(1)
    nodes = entry["chat"]["history"]["messages"]
    nodes["u"]["parentId"] = "b"  # u -> b -> u
    nodes["b"]["childrenIds"] = ["u"]
    return entry


@pytest.mark.parametrize("fmt, build, spoiled", [
    ("chatgpt", chatgpt, _chatgpt_cycle), ("openwebui", openwebui, _openwebui_cycle)])
def test_a_cycle_in_a_tree_mixes_no_branch_into_another(
    tmp_path: Path, fmt: str, build: Any, spoiled: Any
) -> None:
    # The walk up from a leaf went round the cycle: the session read 'other reply 1',
    # 'hello 1', 'reply 1' (the other branch's answer above the question).
    path = write(tmp_path, [build(0), spoiled(), build(2)])

    items = read(path, fmt)

    assert_neighbours_whole(items)
    chats = {c.title: [m.content for m in c.messages]
             for c in items if isinstance(c, Conversation)}
    assert chats["chat 1"] == ["hello 1", "reply 1"]
    assert chats["chat 1 (branch 1)"] == ["hello 1", "other reply 1"]


# --------------------------------------------------------------------------- wrong types


def _chatgpt_role(value: Any) -> dict[str, Any]:
    entry = chatgpt(1)
    entry["mapping"]["a"]["message"]["author"]["role"] = value
    return entry


def _chatgpt_no_node_objects() -> dict[str, Any]:
    return {**chatgpt(1), "mapping": {"a": [1], "b": "x"}}


def _openwebui_role(value: Any) -> dict[str, Any]:
    entry = openwebui(1)
    entry["chat"]["history"]["messages"]["a"]["role"] = value
    return entry


def _openwebui_children(value: Any) -> dict[str, Any]:
    entry = openwebui(1)
    entry["chat"]["history"]["messages"]["u"]["childrenIds"] = value
    return entry


def _openwebui_no_message_objects() -> dict[str, Any]:
    entry = openwebui(1)
    entry["chat"]["history"]["messages"] = {"a": [1], "b": 2}
    return entry


def _openai_part_type(value: Any) -> dict[str, Any]:
    entry = openai(1)
    entry["messages"][0]["content"][0]["type"] = value
    return entry


@pytest.mark.parametrize("fmt, build, spoiled", [
    ("chatgpt", chatgpt, lambda: _chatgpt_role({"name": "assistant"})),
    ("chatgpt", chatgpt, lambda: _chatgpt_role(["assistant"])),
    ("chatgpt", chatgpt, _chatgpt_no_node_objects),
    ("openwebui", openwebui, lambda: _openwebui_role({"role": "assistant"})),
    ("openwebui", openwebui, lambda: _openwebui_children(7)),
    ("openwebui", openwebui, lambda: _openwebui_children(True)),
    ("openwebui", openwebui, _openwebui_no_message_objects),
    ("openai", openai, lambda: _openai_part_type({"kind": "text"})),
    ("openai", openai, lambda: _openai_part_type(["text"])),
])
def test_a_value_of_a_type_nobody_expected_costs_at_most_its_entry(
    tmp_path: Path, fmt: str, build: Any, spoiled: Any
) -> None:
    # Each of these raised TypeError (unhashable type, not iterable) or AssertionError:
    # the import stopped there, and the entries after it were never read.
    path = write(tmp_path, [build(0), spoiled(), build(2)])

    items = read(path, fmt)

    assert_neighbours_whole(items)
    skipped = [i for i in items if isinstance(i, SkippedEntry)]
    assert all(s.entry == "item 1" for s in skipped)
    assert not any("could not be read (" in s.reason for s in skipped)


def test_a_role_of_the_wrong_type_keeps_the_message_and_says_what_it_was(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, [_chatgpt_role({"name": "critic"})])

    (session, _branch) = [c for c in read(path, "chatgpt") if isinstance(c, Conversation)]

    reply = session.messages[-1]
    assert (reply.role, reply.content) == ("assistant", "reply 1")
    assert reply.metadata["original_role"] == {"name": "critic"}


def test_an_unforeseen_fault_in_one_entry_skips_that_entry_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import workbench.formats.chatgpt as chatgpt_format

    parse = chatgpt_format.parse_conversation

    def fragile(item: Any, where: str, fallback_id: str) -> list[Any]:
        if item.get("title") == "chat 1":
            raise KeyError("a fault of the reader")
        return parse(item, where, fallback_id)

    monkeypatch.setattr(chatgpt_format, "parse_conversation", fragile)
    path = write(tmp_path, [chatgpt(0), chatgpt(1), chatgpt(2)])

    items = read(path, "chatgpt")

    assert_neighbours_whole(items)
    (skipped,) = [i for i in items if isinstance(i, SkippedEntry)]
    assert skipped.entry == "item 1"
    assert "KeyError" in skipped.reason and "a fault of the reader" in skipped.reason


def context(i: int) -> dict[str, Any]:
    return {"session_id": f"ctx-{i}", "title": f"chat {i}", "recent_history": [
        {"timestamp": "2024-05-01T10:00:00Z", "role": "user", "content": f"hello {i}"},
        {"timestamp": "2024-05-01T10:00:01Z", "role": "assistant", "content": f"reply {i}"}],
        "tool_stats": {"total_calls": 1, "by_tool": {"f": 1}, "failures": 0},
        "token_usage": {"total_input": 1, "total_output": 2}}


@pytest.mark.parametrize("where", ["tool_stats.total_calls", "tool_stats.by_tool.f",
                                   "tool_stats.failures", "token_usage.total_input"])
def test_a_count_of_1e400_in_a_context_file_is_named_as_what_is_wrong(
    tmp_path: Path, where: str
) -> None:
    # int(infinity) raised OverflowError, which no check of the context file caught.
    entry = context(1)
    *path, last = where.split(".")
    holder = entry
    for key in path:
        holder = holder[key]
    holder[last] = "@@"
    text = json.dumps([context(0), entry, context(2)]).replace('"@@"', "1e400")

    items = read(write_text(tmp_path, text), "context-json")

    assert_neighbours_whole(items)
    (skipped,) = [i for i in items if isinstance(i, SkippedEntry)]
    assert skipped.entry == "item 1" and skipped.reason.startswith(path[0])


@pytest.mark.parametrize("entry, fmt", [
    ({"task_id": 1, "reward": "@@", "traj": [{"role": "user", "content": "hi"}]}, "openai"),
    ({"id": "g", "score": "@@", "conversations": [{"from": "human", "value": "hi"}]},
     "sharegpt"),
])
def test_a_file_python_wrote_with_nan_in_its_first_entry_is_recognised(
    tmp_path: Path, entry: dict[str, Any], fmt: str
) -> None:
    # Detection read the head with its own small parser, which knew no NaN: 'Cannot tell
    # the format of the file'.
    from workbench.formats import detect_format

    path = write_text(tmp_path, json.dumps([entry]).replace('"@@"', "NaN"))

    assert detect_format(path).name == fmt


# --------------------------------------------------------------------------- JSON Lines


def sharegpt(i: int) -> dict[str, Any]:
    return {"id": f"g-{i}", "conversations": [{"from": "human", "value": f"hello {i}"},
                                              {"from": "gpt", "value": f"reply {i}"}]}


@pytest.mark.parametrize("fmt, build", [("openai", openai), ("sharegpt", sharegpt)])
def test_bytes_that_are_not_utf8_in_a_jsonl_line_are_replaced_in_that_line_only(
    tmp_path: Path, fmt: str, build: Any
) -> None:
    # The OpenAI reader skipped the whole line ('the line is not UTF-8 text'), the
    # ShareGPT one refused the whole file ('is not UTF-8 text'); in a JSON array the
    # same bytes are replaced with U+FFFD and noted.
    lines = [json.dumps(build(i)).encode() for i in range(3)]
    lines[1] = lines[1].replace(b"hello 1", b"hello \xff1")
    path = tmp_path / "data.jsonl"
    path.write_bytes(b"\r\n".join(lines) + b"\r\n")

    items = list(read_conversations(path, fmt))

    assert_neighbours_whole(items)
    assert "hello \ufffd1" in texts(items)
    (note,) = [i for i in items if not isinstance(i, Conversation | SkippedEntry)]
    assert note.entry == "line 2" and "0xFF" in note.note


def test_a_line_separator_inside_a_sharegpt_jsonl_string_does_not_end_the_line(
    tmp_path: Path,
) -> None:
    # JSON text holds U+2028, U+0085 and U+000C unescaped inside strings (Python writes
    # them so with ensure_ascii=False); splitlines() cut the line there, and the
    # conversation was skipped as two lines of broken JSON.
    entries = [sharegpt(i) for i in range(3)]
    entries[1]["conversations"][0]["value"] = "hello 1\u2028second\x85third\x0cfourth"
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(json.dumps(e, ensure_ascii=False) for e in entries) + "\n",
                    encoding="utf-8")

    items = list(read_conversations(path, "sharegpt"))

    assert not [i for i in items if isinstance(i, SkippedEntry)]
    assert "hello 1\u2028second\x85third\x0cfourth" in texts(items)
    assert_neighbours_whole(items)


# --------------------------------------------------------------------------- kept data


def test_chatgpt_custom_instructions_and_hidden_text_are_kept_in_the_session(
    tmp_path: Path,
) -> None:
    # The custom instructions the model was given (user_editable_context) and the text
    # of hidden messages were dropped without a word.
    entry = chatgpt(1)
    mapping = entry["mapping"]
    mapping["root"]["children"] = ["ctx"]
    mapping["ctx"] = {"id": "ctx", "parent": "root", "children": ["hid"], "message": {
        "author": {"role": "user"}, "content": {
            "content_type": "user_editable_context", "user_profile": "I am an SRE.",
            "user_instructions": "Answer concisely."}}}
    mapping["hid"] = {"id": "hid", "parent": "ctx", "children": ["u"], "message": {
        "author": {"role": "system"}, "metadata": {"is_visually_hidden_from_conversation": True},
        "content": {"content_type": "text", "parts": ["Today is Monday."]}}}
    mapping["u"]["parent"] = "hid"

    session, branch = [c for c in read(write(tmp_path, [entry]), "chatgpt")
                       if isinstance(c, Conversation)]

    assert [m.content for m in session.messages] == ["hello 1", "reply 1"]
    assert session.metadata["user_editable_context"] == {
        "user_profile": "I am an SRE.", "user_instructions": "Answer concisely."}
    assert session.metadata["hidden_messages"] == [
        {"node": "hid", "role": "system", "text": "Today is Monday."}]
    assert "user_editable_context" not in branch.metadata


def test_open_webui_keeps_the_files_system_prompt_rating_and_sources(tmp_path: Path) -> None:
    # An image's data URL, the upload's record (with the text extracted from it), the
    # chat's params (its system prompt), user_id, and the reply's sources, rating and
    # the rest were dropped without a word: only model and usage were kept.
    chat = openwebui(1)
    chat.update(user_id="user-77", share_id="share-9", meta={"tags": ["work"], "note": "n"})
    chat["chat"]["params"] = {"system": "You are terse.", "temperature": 0.3}
    nodes = chat["chat"]["history"]["messages"]
    image = {"type": "image", "url": "data:image/png;base64,iVBORw0KGgo=", "name": "shot.png"}
    upload = {"type": "file", "name": "notes.txt",
              "file": {"id": "f1", "data": {"content": "extracted notes"}}}
    nodes["u"]["files"] = [image, upload]
    nodes["a"].update(model="llama3", done=True, sources=[{"source": {"name": "kb"}}],
                      annotation={"rating": -1, "comment": "too short"},
                      statusHistory=[{"action": "web_search"}], error=None)

    session, _branch = [c for c in read(write(tmp_path, [chat]), "openwebui")
                        if isinstance(c, Conversation)]

    assert session.metadata["params"] == {"system": "You are terse.", "temperature": 0.3}
    assert session.metadata["user_id"] == "user-77" and session.metadata["share_id"] == "share-9"
    assert session.metadata["meta"] == {"note": "n"} and session.tags == ["work"]
    question, reply = session.messages
    assert question.parts is not None and question.parts[1:] == [image, upload]
    assert reply.metadata == {
        "model": "llama3", "sources": [{"source": {"name": "kb"}}],
        "annotation": {"rating": -1, "comment": "too short"},
        "statusHistory": [{"action": "web_search"}]}


def test_open_webui_turn_data_is_on_the_first_message_of_a_split_turn_only(
    tmp_path: Path,
) -> None:
    chat = openwebui(1)
    chat["chat"]["history"]["messages"]["a"].update(
        model="m", usage={"total_tokens": 9}, sources=["s"], output=[
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "out"},
            {"type": "message", "content": [{"type": "output_text", "text": "reply 1"}]}])

    session = next(c for c in read(write(tmp_path, [chat]), "openwebui")
                   if isinstance(c, Conversation))

    calling, _result, answer = session.messages[1:]
    assert calling.metadata == {"model": "m", "usage": {"total_tokens": 9}, "sources": ["s"]}
    assert answer.metadata == {"model": "m"}


def test_open_webui_time_that_cannot_be_read_is_kept_as_it_was(tmp_path: Path) -> None:
    chat = openwebui(1)
    chat["chat"]["history"]["messages"]["u"]["timestamp"] = "yesterday"

    session = next(c for c in read(write(tmp_path, [chat]), "openwebui")
                   if isinstance(c, Conversation))

    assert session.messages[0].created_at is None
    assert session.messages[0].metadata == {"timestamp": "yesterday"}


def test_chatgpt_keeps_the_attachments_ids_and_the_sources_an_answer_cites(
    tmp_path: Path,
) -> None:
    # An attachment kept only its name, type and size (its id, which names its file in
    # the export's ZIP, was dropped), and the citations of an answer were dropped.
    entry = chatgpt(1)
    attachment = {"id": "file-abc123", "name": "plan.pdf", "size": 2048,
                  "mime_type": "application/pdf", "file_token_size": 900}
    entry["mapping"]["u"]["message"]["metadata"] = {"attachments": [attachment],
                                                    "request_id": "req-1"}
    cites = [{"start_ix": 0, "end_ix": 7, "metadata": {"url": "https://example.org/a"}}]
    refs = [{"matched_text": "[1]", "items": [{"url": "https://example.org/a"}]}]
    entry["mapping"]["a"]["message"]["metadata"] = {
        "model_slug": "gpt-4o", "citations": cites, "content_references": refs,
        "timestamp_": "absolute"}

    session = next(c for c in read(write(tmp_path, [entry]), "chatgpt")
                   if isinstance(c, Conversation))

    question, answer = session.messages
    assert question.metadata == {"attachments": [attachment]}
    assert answer.metadata == {"model": "gpt-4o", "citations": cites,
                               "content_references": refs}


ROOT = "00000000-0000-4000-8000-000000000000"


def _claude_message(uuid: str, parent: str, sender: str, text: str, minute: int) -> dict[str, Any]:
    return {"uuid": uuid, "parent_message_uuid": parent, "sender": sender, "text": text,
            "created_at": f"2024-05-01T10:{minute:02d}:00Z"}


def _claude_edited(**keys: Any) -> dict[str, Any]:
    # q1 -> a1 -> q2 -> a2, then q2 edited into q2b -> a2b: both branches in the list.
    return {"uuid": "conv", "name": "Edited", "created_at": "2024-05-01T10:00:00Z",
            "chat_messages": [
                _claude_message("q1", ROOT, "human", "first question", 0),
                _claude_message("a1", "q1", "assistant", "first answer", 1),
                _claude_message("q2", "a1", "human", "second question", 2),
                _claude_message("a2", "q2", "assistant", "second answer", 3),
                _claude_message("q2b", "a1", "human", "second question, edited", 4),
                _claude_message("a2b", "q2b", "assistant", "answer to the edit", 5)],
            **keys}


def test_a_claude_conversation_with_an_edited_question_keeps_its_branches_apart(
    tmp_path: Path,
) -> None:
    # chat_messages holds the abandoned branch beside the live one (parent links say
    # which is which): read as a list, the session asked the second question twice and
    # had both answers in a row.
    items = read(write(tmp_path, [_claude_edited()]), "claude")

    session, branch = [c for c in items if isinstance(c, Conversation)]
    assert [m.content for m in session.messages] == [
        "first question", "first answer", "second question, edited", "answer to the edit"]
    assert session.metadata["current_leaf_guessed"] is True
    assert [m.content for m in branch.messages] == [
        "first question", "first answer", "second question", "second answer"]
    assert branch.source_id == "conv#branch-a2" and branch.title == "Edited (branch 1)"


def test_a_claude_conversation_follows_its_current_leaf(tmp_path: Path) -> None:
    items = read(write(tmp_path, [_claude_edited(current_leaf_message_uuid="a2")]), "claude")

    session, branch = [c for c in items if isinstance(c, Conversation)]
    assert [m.content for m in session.messages][2:] == ["second question", "second answer"]
    assert "current_leaf_guessed" not in session.metadata
    assert [m.content for m in branch.messages][2:] == [
        "second question, edited", "answer to the edit"]


def test_a_claude_conversation_in_one_line_reads_in_list_order(tmp_path: Path) -> None:
    entry = _claude_edited()
    entry["chat_messages"] = entry["chat_messages"][:4]

    (session,) = [c for c in read(write(tmp_path, [entry]), "claude")
                  if isinstance(c, Conversation)]

    assert [m.content for m in session.messages] == [
        "first question", "first answer", "second question", "second answer"]


def test_claude_keeps_citations_attachment_ids_and_why_an_answer_stopped(
    tmp_path: Path,
) -> None:
    cites = [{"url": "https://example.org/y", "title": "a source"}]
    entry = claude(1)
    question, answer = entry["chat_messages"]
    question["attachments"] = [{"id": "att-1", "file_name": "notes.txt", "file_size": 5,
                                "file_type": "text/plain", "extracted_content": "notes"}]
    answer.update(stop_reason="max_tokens", truncated=True,
                  content=[{"type": "text", "text": "reply 1", "citations": cites}])

    (session,) = [c for c in read(write(tmp_path, [entry]), "claude")
                  if isinstance(c, Conversation)]

    first, second = session.messages
    assert first.parts is not None and first.parts[1] == {
        "type": "attachment", "file_name": "notes.txt", "text": "notes", "id": "att-1",
        "file_size": 5, "file_type": "text/plain"}
    assert second.content == "reply 1"
    assert second.parts == [{"type": "text", "text": "reply 1", "citations": cites}]
    assert second.metadata["stop_reason"] == "max_tokens" and second.metadata["truncated"]


# --------------------------------------------------------------------------- folders


def test_a_folder_read_file_by_file_reads_markdown_transcripts_and_names_inner_folders(
    tmp_path: Path, session_factory: Any
) -> None:
    # The workbench's own Markdown transcripts beside a JSON file were passed over
    # without a word (only .json, .jsonl, .zip and .db were tried), and so was a folder
    # inside (a Claude export unpacked there).
    from workbench.core.conversation import Message
    from workbench.formats import get_exporter

    folder = tmp_path / "mixed"
    (folder / "claude-export").mkdir(parents=True)
    write(folder / "claude-export", [claude(1)], "conversations.json")
    write(folder, [openai(0)], "chats.json")
    transcript = session_factory([Message(role="user", content="hello 2", position=0),
                                  Message(role="assistant", content="reply 2", position=1)])
    get_exporter("markdown").write([transcript], folder / "session.md")

    items = list(read_conversations(folder))

    assert_neighbours_whole(items)
    assert "hello 1" not in texts(items)
    skipped = {i.entry: i.reason for i in items if isinstance(i, SkippedEntry)}
    assert set(skipped) == {"claude-export/"}
    assert "import it on its own" in skipped["claude-export/"]


def test_a_byte_that_is_not_utf8_in_a_markdown_transcript_costs_one_character(
    tmp_path: Path, session_factory: Any
) -> None:
    # The whole transcript was refused ('is not UTF-8 text'), every session in it lost.
    from workbench.core.conversation import Message
    from workbench.formats import get_exporter

    sessions = [session_factory([Message(role="user", content=f"hello {i}", position=0),
                                 Message(role="assistant", content=f"reply {i}", position=1)],
                                title=f"chat {i}") for i in range(3)]
    path = tmp_path / "chats.md"
    get_exporter("markdown").write(sessions, path)
    path.write_bytes(path.read_bytes().replace(b"hello 1", b"hello \xff1"))

    items = list(read_conversations(path))

    assert_neighbours_whole(items)
    assert "hello \ufffd1" in texts(items)
    notes = [i for i in items if not isinstance(i, Conversation | SkippedEntry)]
    assert len(notes) == 1 and "0xFF" in notes[0].note


def test_open_webui_keeps_the_files_of_a_reply(tmp_path: Path) -> None:
    # A reply's files (an image the model generated) were dropped: only a user
    # message's files were read.
    chat = openwebui(1)
    made = [{"type": "image", "url": "/api/v1/files/abc/content"}]
    chat["chat"]["history"]["messages"]["a"]["files"] = made

    session = next(c for c in read(write(tmp_path, [chat]), "openwebui")
                   if isinstance(c, Conversation))

    assert session.messages[1].metadata["files"] == made


def test_a_conversation_under_a_known_id_with_other_tool_calls_is_no_copy(
    tmp_path: Path,
) -> None:
    def chat(arguments: str) -> dict[str, Any]:
        entry = openwebui(1)
        nodes = entry["chat"]["history"]["messages"]
        del nodes["b"]  # no branch: only the session itself
        nodes["u"]["childrenIds"] = ["a"]
        nodes["a"]["output"] = [
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": arguments},
            {"type": "function_call_output", "call_id": "c1", "output": "same"}]
        return entry

    items = read(write(tmp_path, [chat('{"city": "Paris"}'), chat('{"city": "Oslo"}')]),
                 "openwebui")

    assert not [i for i in items if isinstance(i, SkippedEntry)]


@pytest.mark.parametrize("value", [[1, 2], "messages", 7])
def test_open_webui_history_of_the_wrong_kind_is_reported_not_an_empty_session(
    tmp_path: Path, value: Any
) -> None:
    # With the (usual, empty) flat 'messages' list beside it, the chat became a session
    # without messages, and nothing said its history could not be read.
    chat = openwebui(1)
    chat["chat"]["history"]["messages"] = value
    chat["chat"]["messages"] = []

    items = read(write(tmp_path, [openwebui(0), chat, openwebui(2)]), "openwebui")

    assert_neighbours_whole(items)
    assert "chat 1" not in [c.title for c in items if isinstance(c, Conversation)]
    (skipped,) = [i for i in items if isinstance(i, SkippedEntry)]
    assert skipped.entry == "item 1" and "history.messages" in skipped.reason


def test_an_open_webui_chat_without_messages_is_still_an_empty_session(tmp_path: Path) -> None:
    chat = openwebui(1)
    chat["chat"]["history"]["messages"] = {}
    chat["chat"]["messages"] = []

    (session,) = [c for c in read(write(tmp_path, [chat]), "openwebui")
                  if isinstance(c, Conversation)]

    assert session.title == "chat 1" and session.messages == []


def test_a_tree_both_wide_and_deep_is_not_copied_without_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each branch holds its whole path from the root: a chain of 1,000 nodes with 1,000
    # leaves at its end (a file of 200 kB) made a million messages. The branches stop
    # at a budget of messages (200,000; 40 here), and the rest are reported.
    import workbench.formats._support as support

    monkeypatch.setattr(support, "BRANCH_MESSAGES", 40)
    mapping: dict[str, Any] = {"root": {"id": "root", "parent": None, "children": [],
                                        "message": None}}
    above = "root"
    for i in range(10):
        node = f"n{i}"
        mapping[node] = {"id": node, "parent": above, "children": [], "message": {
            "author": {"role": "user" if i % 2 == 0 else "assistant"},
            "content": {"content_type": "text", "parts": [f"turn {i}"]}}}
        mapping[above]["children"].append(node)
        above = node
    for j in range(8):
        leaf = f"leaf{j}"
        mapping[leaf] = {"id": leaf, "parent": above, "children": [], "message": {
            "author": {"role": "assistant"}, "content": {"content_type": "text",
                                                        "parts": [f"answer {j}"]}}}
        mapping[above]["children"].append(leaf)
    entry = {"title": "wide", "conversation_id": "w", "mapping": mapping,
             "current_node": "leaf7"}

    items = read(write(tmp_path, [entry]), "chatgpt")

    conversations = [c for c in items if isinstance(c, Conversation)]
    # The session (11 messages) and three branches of 11 (33 of the 40), then no more.
    assert len(conversations) == 4
    assert sum(len(c.messages) for c in conversations[1:]) <= 40
    (skipped,) = [i for i in items if isinstance(i, SkippedEntry)]
    assert skipped.entry == "item 0" and "4 more branch(es) were left out" in skipped.reason


def test_chatgpt_keeps_what_a_conversation_says_of_itself(tmp_path: Path) -> None:
    # Only the model, gizmo id and archived flag were kept: memory_scope, the
    # conversation template, the starred flag and the rest were dropped.
    entry = chatgpt(1, memory_scope="global_enabled", conversation_template_id="g-123",
                    is_starred=True, moderation_results=[], plugin_ids=None)

    session = next(c for c in read(write(tmp_path, [entry]), "chatgpt")
                   if isinstance(c, Conversation))

    assert session.metadata == {"conversation_id": "c-1", "memory_scope": "global_enabled",
                                "conversation_template_id": "g-123", "is_starred": True}


def test_open_webui_keeps_when_the_model_thought(tmp_path: Path) -> None:
    chat = openwebui(1)
    chat["chat"]["history"]["messages"]["a"]["output"] = [
        {"type": "reasoning", "content": [{"type": "output_text", "text": "hmm"}],
         "started_at": 1700000007.0, "ended_at": 1700000010.0, "duration": 3},
        {"type": "message", "content": [{"type": "output_text", "text": "reply 1"}]}]

    session = next(c for c in read(write(tmp_path, [chat]), "openwebui")
                   if isinstance(c, Conversation))

    assert session.messages[1].parts == [
        {"type": "reasoning", "text": "hmm", "duration": 3, "started_at": 1700000007.0,
         "ended_at": 1700000010.0},
        {"type": "text", "text": "reply 1"}]


def test_sharegpt_keeps_a_turns_own_keys(tmp_path: Path) -> None:
    # axolotl's per-turn weight (0: the turn is not trained on) was dropped.
    entry = sharegpt(1)
    entry["conversations"][0]["weight"] = 0
    entry["conversations"][1].update(weight=1, loss=True)

    (session,) = [c for c in read(write(tmp_path, [entry]), "sharegpt")
                  if isinstance(c, Conversation)]

    assert [m.metadata for m in session.messages] == [{"weight": 0},
                                                      {"weight": 1, "loss": True}]
