"""The ChatGPT export importer: trees, branches, node kinds, files, ZIPs, split exports."""

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

T0 = 1_714_585_000.0


def node(
    node_id: str,
    parent: str | None,
    role: str | None = None,
    text: str | None = None,
    *,
    time: float | None = None,
    content: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    **message_keys: Any,
) -> dict[str, Any]:
    """A mapping node; children are filled in by :func:`conversation`."""
    message = None
    if role is not None:
        message = {
            "id": node_id,
            "author": {"role": role, "name": message_keys.pop("author_name", None), "metadata": {}},
            "create_time": time,
            "content": content or {"content_type": "text", "parts": [text or ""]},
            "status": "finished_successfully",
            "metadata": metadata or {},
            "recipient": message_keys.pop("recipient", "all"),
            **message_keys,
        }
    return {"id": node_id, "message": message, "parent": parent, "children": []}


def conversation(
    nodes: list[dict[str, Any]], current: str | None, conv_id: str = "conv-1", **keys: Any
) -> dict[str, Any]:
    mapping = {n["id"]: n for n in nodes}
    for n in nodes:
        if n["parent"] is not None:
            mapping[n["parent"]]["children"].append(n["id"])
    entry: dict[str, Any] = {
        "title": keys.pop("title", "A chat"),
        "create_time": T0,
        "update_time": T0 + 100,
        "mapping": mapping,
        "conversation_id": conv_id,
        "id": conv_id,
        **keys,
    }
    if current is not None:
        entry["current_node"] = current
    return entry


def linear(conv_id: str = "conv-1", title: str = "A chat") -> dict[str, Any]:
    return conversation(
        [
            node("root", None),
            node("u1", "root", "user", "hello", time=T0 + 1),
            node("a1", "u1", "assistant", "hi there", time=T0 + 2),
        ],
        "a1",
        conv_id,
        title=title,
    )


def write_export(path: Path, entries: list[Any]) -> Path:
    path.write_text(json.dumps(entries), encoding="utf-8")
    return path


def read(path: Path) -> list[Conversation | SkippedEntry]:
    return list(read_conversations(path, "chatgpt"))


def conversations(items: list[Conversation | SkippedEntry]) -> list[Conversation]:
    return [i for i in items if isinstance(i, Conversation)]


def texts(conv: Conversation) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in conv.messages]


FORKED = [
    node("root", None),
    node("u1", "root", "user", "question", time=T0 + 1),
    node("a1", "u1", "assistant", "first answer", time=T0 + 2),
    node("u2", "a1", "user", "follow-up A", time=T0 + 3),
    node("a2", "u2", "assistant", "answer A", time=T0 + 4),
    node("u3", "a1", "user", "follow-up B", time=T0 + 5),
    node("a3", "u3", "assistant", "answer B", time=T0 + 6),
]


# --------------------------------------------------------------------------- the tree


def test_session_follows_current_node_not_the_newest_leaf(tmp_path: Path) -> None:
    path = write_export(tmp_path / "conversations.json", [conversation(FORKED, "a2")])

    session = conversations(read(path))[0]

    assert texts(session) == [
        ("user", "question"),
        ("assistant", "first answer"),
        ("user", "follow-up A"),
        ("assistant", "answer A"),
    ]
    assert [m.position for m in session.messages] == [0, 1, 2, 3]
    assert session.source == "chatgpt" and session.source_id == "conv-1"


def test_other_branch_becomes_a_conversation_of_its_own(tmp_path: Path) -> None:
    path = write_export(tmp_path / "conversations.json", [conversation(FORKED, "a2")])

    session, branch = conversations(read(path))

    assert texts(branch)[2:] == [("user", "follow-up B"), ("assistant", "answer B")]
    assert texts(branch)[:2] == texts(session)[:2]
    assert branch.source_id == "conv-1#branch-a3"
    assert branch.title == "A chat (branch 1)"
    assert branch.metadata == {"branch_of": "conv-1", "branch_leaf": "a3", "branch_fork": "a1"}
    starts = [m.content for m in branch.messages if m.metadata.get("branch_start")]
    assert starts == ["follow-up B"]


def test_regenerated_answer_with_the_same_words_is_not_a_branch(tmp_path: Path) -> None:
    nodes = [
        node("root", None),
        node("u1", "root", "user", "tell me a joke", time=T0 + 1),
        node("a1", "u1", "assistant", "the same joke", time=T0 + 2),
        node("a2", "u1", "assistant", "the same joke", time=T0 + 3),
    ]
    path = write_export(tmp_path / "c.json", [conversation(nodes, "a2")])

    items = read(path)

    assert len(items) == 1
    assert texts(conversations(items)[0]) == [
        ("user", "tell me a joke"),
        ("assistant", "the same joke"),
    ]


def test_without_current_node_the_latest_leaf_is_the_session(tmp_path: Path) -> None:
    nodes = [
        node("root", None),
        node("u1", "root", "user", "q", time=T0 + 1),
        node("late", "u1", "assistant", "later answer", time=T0 + 9),
        node("early", "u1", "assistant", "earlier answer", time=T0 + 2),
    ]
    path = write_export(tmp_path / "c.json", [conversation(nodes, None)])

    session = conversations(read(path))[0]

    assert session.messages[-1].content == "later answer"
    assert session.metadata["current_node_guessed"] is True


def test_minimal_nodes_without_children_or_content_type_import(tmp_path: Path) -> None:
    # The shape some third-party tools write: parent links only, no times, no content type.
    entry = {
        "id": "min-1",
        "title": "Minimal",
        "mapping": {
            "root": {"parent": None, "message": None},
            "m1": {
                "parent": "root",
                "message": {"author": {"role": "user"}, "content": {"parts": ["q"]}},
            },
            "m2": {
                "parent": "m1",
                "message": {"author": {"role": "assistant"}, "content": {"parts": ["a"]}},
            },
            "m3": {
                "parent": "m1",
                "message": {"author": {"role": "assistant"}, "content": {"parts": ["b"]}},
            },
        },
    }
    path = write_export(tmp_path / "c.json", [entry])

    session = conversations(read(path))[0]

    # No times anywhere: the last leaf in mapping order is taken.
    assert texts(session) == [("user", "q"), ("assistant", "b")]
    assert session.source_id == "min-1"


def test_cyclic_parent_links_do_not_hang(tmp_path: Path) -> None:
    nodes = [
        node("x", "y", "user", "one", time=T0),
        node("y", "x", "assistant", "two", time=T0 + 1),
    ]
    entry = conversation(nodes, "y")
    for n in entry["mapping"].values():
        n["children"] = []
    path = write_export(tmp_path / "c.json", [entry])

    session = conversations(read(path))[0]

    assert sorted(m.content for m in session.messages) == ["one", "two"]


# --------------------------------------------------------------------------- node kinds


def test_hidden_and_empty_system_and_custom_instruction_nodes_are_skipped(tmp_path: Path) -> None:
    nodes = [
        node("root", None),
        node("sys", "root", "system", "", metadata={"is_visually_hidden_from_conversation": True}),
        node(
            "ctx",
            "sys",
            "user",
            content={"content_type": "user_editable_context", "user_profile": "an SRE"},
        ),
        node("sys2", "ctx", "system", ""),
        node("u1", "sys2", "user", "visible", time=T0 + 1),
        node(
            "hid",
            "u1",
            "assistant",
            "secret",
            metadata={"is_visually_hidden_from_conversation": True},
        ),
        node("a1", "hid", "assistant", "shown", time=T0 + 2),
    ]
    path = write_export(tmp_path / "c.json", [conversation(nodes, "a1")])

    session = conversations(read(path))[0]

    assert texts(session) == [("user", "visible"), ("assistant", "shown")]


def test_system_message_with_text_is_kept(tmp_path: Path) -> None:
    nodes = [
        node("root", None),
        node("sys", "root", "system", "Be brief."),
        node("u1", "sys", "user", "hi", time=T0 + 1),
    ]
    path = write_export(tmp_path / "c.json", [conversation(nodes, "u1")])

    assert texts(conversations(read(path))[0]) == [("system", "Be brief."), ("user", "hi")]


def test_multimodal_text_puts_a_placeholder_for_the_image_and_keeps_the_parts(
    tmp_path: Path,
) -> None:
    image = {
        "content_type": "image_asset_pointer",
        "asset_pointer": "file-service://f1",
        "width": 8,
    }
    content = {"content_type": "multimodal_text", "parts": [image, "what is in this picture?"]}
    nodes = [node("root", None), node("u1", "root", "user", content=content, time=T0)]
    path = write_export(tmp_path / "c.json", [conversation(nodes, "u1")])

    message = conversations(read(path))[0].messages[0]

    assert message.content == "[image]\nwhat is in this picture?"
    assert message.parts is not None
    assert message.parts[0]["type"] == "image_asset_pointer"
    assert message.parts[0]["asset_pointer"] == "file-service://f1"
    assert message.parts[1] == {"type": "text", "text": "what is in this picture?"}


def test_code_to_python_and_its_output_are_a_linked_tool_call(tmp_path: Path) -> None:
    code = {"content_type": "code", "language": "python", "text": "print(6 * 7)"}
    output = {"content_type": "execution_output", "text": "42"}
    nodes = [
        node("root", None),
        node("u1", "root", "user", "compute", time=T0),
        node("c1", "u1", "assistant", content=code, recipient="python", time=T0 + 1),
        node("o1", "c1", "tool", content=output, author_name="python", time=T0 + 2),
        node("a1", "o1", "assistant", "It is 42.", time=T0 + 3),
    ]
    path = write_export(tmp_path / "c.json", [conversation(nodes, "a1")])

    call, result, answer = conversations(read(path))[0].messages[1:]

    assert call.role == "assistant"
    assert call.tool_calls is not None and len(call.tool_calls) == 1
    function = call.tool_calls[0]["function"]
    assert function["name"] == "python"
    assert json.loads(function["arguments"]) == {"code": "print(6 * 7)"}
    assert result.role == "tool"
    assert result.content == "42"
    assert result.name == "python"
    assert result.tool_call_id == call.tool_calls[0]["id"]
    assert answer.content == "It is 42."


def web_run_export() -> dict[str, Any]:
    """Two web.run calls, as newer exports hold them: the first one's answer is empty."""
    search = {"content_type": "code", "language": "unknown", "text": '{"search_query": "x"}'}
    empty = {"content_type": "text", "parts": [""]}
    found = {"content_type": "text", "parts": ["result of the second search"]}
    return conversation(
        [
            node("n0", None),
            node("n1", "n0", "user", "look it up", time=T0),
            node("n2", "n1", "assistant", content=search, recipient="web.run", time=T0 + 1),
            node("n3", "n2", "tool", content=empty, author_name="web.run", time=T0 + 2),
            node("n4", "n3", "assistant", "nothing yet, again", time=T0 + 3),
            node("n5", "n4", "assistant", content=search, recipient="web.run", time=T0 + 4),
            node("n6", "n5", "tool", content=found, author_name="web.run", time=T0 + 5),
            node("n7", "n6", "assistant", "here it is", time=T0 + 6),
        ],
        "n7",
    )


def test_every_call_keeps_its_own_result_even_an_empty_one(tmp_path: Path) -> None:
    path = write_export(tmp_path / "c.json", [web_run_export()])

    messages = conversations(read(path))[0].messages

    assert [m.role for m in messages] == [
        "user", "assistant", "tool", "assistant", "assistant", "tool", "assistant"
    ]
    first_call, first_result = messages[1], messages[2]
    second_call, second_result = messages[4], messages[5]
    assert first_result.content == ""
    assert first_result.tool_call_id == first_call.tool_calls[0]["id"]  # type: ignore[index]
    assert second_result.content == "result of the second search"
    assert second_result.tool_call_id == second_call.tool_calls[0]["id"]  # type: ignore[index]
    assert first_call.tool_calls[0]["id"] != second_call.tool_calls[0]["id"]  # type: ignore[index]


def test_exported_calls_each_have_their_answer(tmp_path: Path) -> None:
    ws = Workspace.open(tmp_path / "wb.db")
    report = ws.import_path(write_export(tmp_path / "c.json", [web_run_export()]))
    out = tmp_path / "out.jsonl"
    ws.export_sessions([report.sessions[0][0].id], "openai-jsonl", out)

    exported = json.loads(out.read_text(encoding="utf-8").splitlines()[0])["messages"]
    call_ids = [c["id"] for m in exported for c in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in exported if m["role"] == "tool"]
    assert len(call_ids) == 2
    assert answered == call_ids


def test_a_tool_node_after_an_answer_does_not_take_an_old_call(tmp_path: Path) -> None:
    display = {"content_type": "tether_browsing_display", "result": "a page"}
    code = {"content_type": "code", "language": "python", "text": "1"}
    nodes = [
        node("root", None),
        node("u1", "root", "user", "compute", time=T0),
        node("c1", "u1", "assistant", content=code, recipient="python", time=T0 + 1),
        node("o1", "c1", "tool", content={"content_type": "execution_output", "text": "1"},
             author_name="python", time=T0 + 2),
        node("a1", "o1", "assistant", "done", time=T0 + 3),
        node("b1", "a1", "tool", content=display, author_name="browser", time=T0 + 4),
    ]
    path = write_export(tmp_path / "c.json", [conversation(nodes, "b1")])

    messages = conversations(read(path))[0].messages

    assert messages[2].tool_call_id == messages[1].tool_calls[0]["id"]  # type: ignore[index]
    assert messages[-1].content == "a page"
    assert messages[-1].tool_call_id is None


def test_code_interpreter_images_are_kept_as_attachments(tmp_path: Path) -> None:
    code = {"content_type": "code", "language": "python", "text": "plt.show()"}
    output = {"content_type": "execution_output", "text": "<<ImageDisplayed>>"}
    shown = {
        "aggregate_result": {
            "status": "success",
            "messages": [{"message_type": "image", "time": T0 + 2, "sender": "server",
                          "image_url": "file-service://file-9Qx", "width": 1200,
                          "height": 800}],
        }
    }
    nodes = [
        node("root", None),
        node("u1", "root", "user", "plot it", time=T0),
        node("c1", "u1", "assistant", content=code, recipient="python", time=T0 + 1),
        node("o1", "c1", "tool", content=output, author_name="python", time=T0 + 2,
             metadata=shown),
    ]
    path = write_export(tmp_path / "c.json", [conversation(nodes, "o1")])

    result = conversations(read(path))[0].messages[-1]

    assert result.content == "<<ImageDisplayed>>"
    images = [p for p in result.parts or [] if p["type"] == "image_asset_pointer"]
    assert [(i["asset_pointer"], i["width"], i["height"]) for i in images] == [
        ("file-service://file-9Qx", 1200, 800)
    ]


def test_browsing_results_and_quotes_are_tool_messages(tmp_path: Path) -> None:
    display = {"content_type": "tether_browsing_display", "result": "L0: a page", "summary": None}
    quote = {
        "content_type": "tether_quote",
        "url": "https://example.org/x",
        "title": "Example",
        "text": "quoted words",
    }
    nodes = [
        node("root", None),
        node("u1", "root", "user", "search", time=T0),
        node("b1", "u1", "tool", content=display, author_name="browser", time=T0 + 1),
        node("q1", "b1", "tool", content=quote, author_name="browser", time=T0 + 2),
    ]
    path = write_export(tmp_path / "c.json", [conversation(nodes, "q1")])

    tools = conversations(read(path))[0].messages[1:]

    assert [m.role for m in tools] == ["tool", "tool"]
    assert tools[0].content == "L0: a page"
    assert tools[1].content == "Example\nhttps://example.org/x\nquoted words"
    assert {m.name for m in tools} == {"browser"}


def test_reasoning_becomes_parts_of_the_next_assistant_message(tmp_path: Path) -> None:
    thoughts = {
        "content_type": "thoughts",
        "thoughts": [{"summary": "Checking", "content": "the user wants a number"}],
    }
    recap = {"content_type": "reasoning_recap", "content": "Thought for 4 seconds"}
    nodes = [
        node("root", None),
        node("u1", "root", "user", "pick a number", time=T0),
        node("t1", "u1", "assistant", content=thoughts, time=T0 + 1),
        node("r1", "t1", "assistant", content=recap, time=T0 + 2),
        node("a1", "r1", "assistant", "7", time=T0 + 3, metadata={"model_slug": "o3"}),
    ]
    path = write_export(tmp_path / "c.json", [conversation(nodes, "a1")])

    messages = conversations(read(path))[0].messages

    assert texts(conversations(read(path))[0]) == [("user", "pick a number"), ("assistant", "7")]
    parts = messages[1].parts
    assert parts is not None
    assert [p["type"] for p in parts] == ["reasoning", "reasoning", "text"]
    assert "the user wants a number" in parts[0]["text"]
    assert parts[1]["text"] == "Thought for 4 seconds"
    assert messages[1].metadata["model"] == "o3"


def test_reasoning_at_the_end_is_an_assistant_message_of_its_own(tmp_path: Path) -> None:
    thoughts = {"content_type": "thoughts", "thoughts": [{"summary": "s", "content": "unfinished"}]}
    nodes = [
        node("root", None),
        node("u1", "root", "user", "hard question", time=T0),
        node("t1", "u1", "assistant", content=thoughts, time=T0 + 1),
    ]
    path = write_export(tmp_path / "c.json", [conversation(nodes, "t1")])

    last = conversations(read(path))[0].messages[-1]

    assert last.role == "assistant" and last.content == ""
    assert last.parts is not None and "unfinished" in last.parts[0]["text"]


def test_times_titles_and_model(tmp_path: Path) -> None:
    nodes = [
        node("root", None),
        node("u1", "root", "user", "When was this?", time=None),
        node("a1", "u1", "assistant", "now", time=T0 + 5, metadata={"model_slug": "gpt-4o"}),
    ]
    path = write_export(tmp_path / "c.json", [conversation(nodes, "a1", title="")])

    session = conversations(read(path))[0]

    assert session.title == "When was this?"
    assert session.messages[0].created_at is None
    assert session.messages[1].created_at is not None
    assert session.messages[1].created_at.timestamp() == pytest.approx(T0 + 5)
    assert session.messages[1].metadata["model"] == "gpt-4o"
    assert session.created_at is not None and session.created_at.timestamp() == pytest.approx(T0)


# --------------------------------------------------------------------------- bad entries


def test_entry_without_mapping_is_skipped_and_the_others_imported(tmp_path: Path) -> None:
    broken = {"title": "Corrupted", "id": "bad-1", "create_time": T0}
    path = write_export(tmp_path / "c.json", [linear("a"), broken, linear("b")])

    items = read(path)

    assert [c.source_id for c in conversations(items)] == ["a", "b"]
    skipped = [i for i in items if isinstance(i, SkippedEntry)]
    assert len(skipped) == 1
    assert skipped[0].entry == "item 1"
    assert "no 'mapping'" in skipped[0].reason and "Corrupted" in skipped[0].reason


def test_entry_that_is_not_an_object_is_skipped(tmp_path: Path) -> None:
    path = write_export(tmp_path / "c.json", [linear("a"), 42])

    skipped = [i for i in read(path) if isinstance(i, SkippedEntry)]

    assert skipped[0].entry == "item 1" and "a number" in skipped[0].reason


def test_invalid_json_raises_naming_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    path.write_text('[{"title": "t",\n "create_time": EPOCH, "mapping": {"n": {"author": {}}}}]')

    with pytest.raises(FormatError) as info:
        read_conversations(path)

    assert "conversations.json" in str(info.value)
    assert "line 2" in str(info.value)
    assert info.value.entry == "line 2"


def test_json_breaking_after_some_conversations_keeps_them(tmp_path: Path) -> None:
    good = json.dumps(linear("a"))
    path = tmp_path / "c.json"
    path.write_text(f'[{good},\n{{"title": oops}}]', encoding="utf-8")

    items = read(path)

    assert [c.source_id for c in conversations(items)] == ["a"]
    skipped = items[-1]
    assert isinstance(skipped, SkippedEntry)
    assert skipped.entry == "line 2"
    assert "item 1 on could not be read" in skipped.reason


def test_the_same_conversation_twice_is_imported_once(tmp_path: Path) -> None:
    path = write_export(tmp_path / "c.json", [linear("a"), linear("a")])

    items = read(path)

    assert len(conversations(items)) == 1
    assert isinstance(items[1], SkippedEntry) and "appears again" in items[1].reason


def test_a_single_conversation_object_reads(tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_text(json.dumps(linear("solo")), encoding="utf-8")

    assert detect_format(path).name == "chatgpt"
    assert [c.source_id for c in conversations(read(path))] == ["solo"]


# --------------------------------------------------------------------------- files


def test_export_zip_with_conversations_json(tmp_path: Path) -> None:
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("conversations.json", json.dumps([linear("a"), linear("b")]))
        zf.writestr("user.json", json.dumps({"id": "user-1"}))
        zf.writestr("chat.html", "<html></html>")

    assert detect_format(archive).name == "chatgpt"
    assert [c.source_id for c in conversations(read(archive))] == ["a", "b"]


def test_export_zip_with_split_files_reads_every_file_in_order(tmp_path: Path) -> None:
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("conversations-001.json", json.dumps([linear("c")]))
        zf.writestr("conversations-000.json", json.dumps([linear("a"), linear("b")]))

    assert detect_format(archive).name == "chatgpt"
    assert [c.source_id for c in conversations(read(archive))] == ["a", "b", "c"]


def test_split_files_report_the_file_of_a_skipped_entry(tmp_path: Path) -> None:
    folder = tmp_path / "export"
    folder.mkdir()
    write_export(folder / "conversations-000.json", [linear("a")])
    write_export(folder / "conversations-001.json", [{"title": "no mapping"}, linear("b")])

    assert detect_format(folder).name == "chatgpt"
    items = read(folder)

    assert [c.source_id for c in conversations(items)] == ["a", "b"]
    skipped = [i for i in items if isinstance(i, SkippedEntry)]
    assert skipped[0].entry == "conversations-001.json item 0"


def test_one_split_file_on_its_own_reads(tmp_path: Path) -> None:
    path = write_export(tmp_path / "conversations-003.json", [linear("x")])

    assert detect_format(path).name == "chatgpt"
    assert [c.source_id for c in conversations(read(path))] == ["x"]


def test_a_zip_without_conversations_is_not_chatgpt(tmp_path: Path) -> None:
    archive = tmp_path / "other.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("notes.txt", "hello")

    with pytest.raises(FormatError, match="no conversations.json"):
        read_conversations(archive, "chatgpt")


# --------------------------------------------------------------------------- detection


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ([linear()], "chatgpt"),
        ([{"uuid": "u", "name": "n", "chat_messages": []}], "claude"),
        ([{"id": "c", "title": "t", "chat": {"history": {"messages": {}}}}], "openwebui"),
        ({"conversations": [{"from": "human", "value": "hi"}]}, "sharegpt"),
        ([{"messages": [{"role": "user", "content": "hi"}]}], "openai"),
        ({"session_id": "s", "recent_history": []}, "context-json"),
    ],
)
def test_each_export_shape_is_detected_as_its_own_format(
    tmp_path: Path, entry: Any, expected: str
) -> None:
    path = tmp_path / "input.json"
    path.write_text(json.dumps(entry), encoding="utf-8")

    assert detect_format(path).name == expected


def test_claude_zip_is_not_taken_for_a_chatgpt_zip(tmp_path: Path) -> None:
    archive = tmp_path / "claude.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("conversations.json", json.dumps([{"uuid": "u", "chat_messages": []}]))
        zf.writestr("users.json", "[]")

    assert detect_format(archive).name == "claude"


# --------------------------------------------------------------------------- re-import


def test_importing_again_skips_and_replace_updates(tmp_path: Path) -> None:
    path = write_export(tmp_path / "c.json", [conversation(FORKED, "a2")])
    with Workspace.open(tmp_path / "w.db") as ws:
        first = ws.import_path(path)
        again = ws.import_path(path)
        write_export(path, [conversation(FORKED, "a2", title="Renamed")])
        replaced = ws.import_path(path, replace=True)
        titles = sorted(s.title for s in ws.list_sessions())

    assert [created for _, created in first.sessions] == [True, True]
    assert [created for _, created in again.sessions] == [False, False]
    assert len(replaced.sessions) == 2
    assert titles == ["Renamed", "Renamed (branch 1)"]


def test_an_empty_export_has_nothing_to_import(tmp_path: Path) -> None:
    path = write_export(tmp_path / "conversations.json", [])

    assert read(path) == []


def test_an_empty_file_is_a_format_error(tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    path.write_text("  \n", encoding="utf-8")

    with pytest.raises(FormatError, match="empty"):
        read_conversations(path, "chatgpt")
