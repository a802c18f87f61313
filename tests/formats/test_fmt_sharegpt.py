"""The ShareGPT importer: speakers, tool turns, empty replies, JSON and JSONL, source ids."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from workbench.core.conversation import Conversation, SkippedEntry
from workbench.engine.workspace import Workspace
from workbench.formats import detect_format, read_conversations


def entry(*turns: tuple[str, str], **keys: Any) -> dict[str, Any]:
    return {"conversations": [{"from": f, "value": v} for f, v in turns], **keys}


def write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def read(path: Path) -> list[Conversation | SkippedEntry]:
    assert detect_format(path).name == "sharegpt"
    return list(read_conversations(path))


def convs(items: list[Conversation | SkippedEntry]) -> list[Conversation]:
    return [i for i in items if isinstance(i, Conversation)]


@pytest.mark.parametrize(
    ("speaker", "role"),
    [
        ("human", "user"),
        ("user", "user"),
        ("gpt", "assistant"),
        ("assistant", "assistant"),
        ("chatgpt", "assistant"),
        ("bing", "assistant"),
        ("bard", "assistant"),
        ("system", "system"),
        ("observation", "tool"),
    ],
)
def test_speakers_map_to_roles(tmp_path: Path, speaker: str, role: str) -> None:
    path = write(tmp_path / "d.json", [entry(("human", "q"), (speaker, "text"))])

    message = convs(read(path))[0].messages[1]

    assert message.role == role
    assert message.content == "text"


def test_unusual_speaker_names_are_kept_in_metadata(tmp_path: Path) -> None:
    path = write(tmp_path / "d.json", [entry(("human", "q"), ("bing", "a"))])

    user, reply = convs(read(path))[0].messages

    assert "from" not in user.metadata
    assert reply.metadata["from"] == "bing"


def test_function_call_and_observation_are_a_linked_tool_call(tmp_path: Path) -> None:
    call = json.dumps({"name": "get_weather", "arguments": {"city": "Oslo"}})
    path = write(
        tmp_path / "d.json",
        [
            entry(
                ("human", "weather in Oslo?"),
                ("function_call", call),
                ("observation", '{"temp": 3}'),
                ("gpt", "It is 3 degrees."),
                tools='[{"name": "get_weather"}]',
            )
        ],
    )

    conv = convs(read(path))[0]
    assistant, tool = conv.messages[1], conv.messages[2]

    assert assistant.role == "assistant" and assistant.tool_calls is not None
    function = assistant.tool_calls[0]["function"]
    assert function["name"] == "get_weather"
    assert json.loads(function["arguments"]) == {"city": "Oslo"}
    assert tool.tool_call_id == assistant.tool_calls[0]["id"]
    assert tool.name == "get_weather"
    assert conv.metadata["tools"] == [{"name": "get_weather"}]


def test_function_call_that_is_not_json_stays_text(tmp_path: Path) -> None:
    path = write(tmp_path / "d.json", [entry(("human", "q"), ("function_call", "call it"))])

    reply = convs(read(path))[0].messages[1]

    assert reply.role == "assistant" and reply.content == "call it" and reply.tool_calls is None


def test_empty_reply_is_kept_as_an_empty_message(tmp_path: Path) -> None:
    path = write(
        tmp_path / "d.json", entry(("human", "q1"), ("gpt", ""), ("human", "q2"), ("gpt", "a2"))
    )

    messages = convs(read(path))[0].messages

    assert [(m.role, m.content) for m in messages] == [
        ("user", "q1"),
        ("assistant", ""),
        ("user", "q2"),
        ("assistant", "a2"),
    ]
    assert messages[1].metadata["empty"] is True


def test_unknown_speaker_is_reported_and_the_rest_imported(tmp_path: Path) -> None:
    path = write(
        tmp_path / "d.json", [entry(("human", "q"), ("narrator", "meanwhile"), ("gpt", "a"))]
    )

    items = read(path)

    skipped = [i for i in items if isinstance(i, SkippedEntry)]
    assert len(skipped) == 1
    assert skipped[0].entry == "item 0 conversations[1]"
    assert "narrator" in skipped[0].reason
    assert [m.content for m in convs(items)[0].messages] == ["q", "a"]


def test_jsonl_reads_each_line_and_reports_bad_lines(tmp_path: Path) -> None:
    lines = [
        json.dumps(entry(("human", "one"), ("gpt", "1"))),
        "{not json",
        "",
        json.dumps(entry(("human", "two"), ("gpt", "2"))),
    ]
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    items = read(path)

    assert [c.messages[0].content for c in convs(items)] == ["one", "two"]
    skipped = [i for i in items if isinstance(i, SkippedEntry)]
    assert [s.entry for s in skipped] == ["line 2"]


def test_role_and_content_turns_and_a_top_level_system_prompt(tmp_path: Path) -> None:
    data = {
        "system": "Be kind.",
        "conversations": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
        ],
    }
    path = write(tmp_path / "d.json", [data])

    conv = convs(read(path))[0]

    assert [(m.role, m.content) for m in conv.messages] == [
        ("system", "Be kind."),
        ("user", "hi"),
        ("assistant", "hello"),
    ]


def test_source_ids_are_the_entry_id_or_a_stable_content_hash(tmp_path: Path) -> None:
    same = entry(("human", "same"), ("gpt", "same"))
    path = write(tmp_path / "d.json", [entry(("human", "x"), id="abc-1"), same, same])

    ids = [c.source_id for c in convs(read(path))]
    ids_again = [c.source_id for c in convs(read(path))]

    assert ids[0] == "abc-1"
    assert ids == ids_again
    assert ids[2] == f"{ids[1]}~2"
    assert convs(read(path))[1].title == "same"


def test_importing_the_dataset_twice_does_not_duplicate(tmp_path: Path) -> None:
    path = write(tmp_path / "d.json", [entry(("human", "q"), ("gpt", "a")), entry(("human", "r"))])
    with Workspace.open(tmp_path / "w.db") as ws:
        ws.import_path(path)
        again = ws.import_path(path)
        count = ws.count_sessions()

    assert count == 2
    assert [created for _, created in again.sessions] == [False, False]
