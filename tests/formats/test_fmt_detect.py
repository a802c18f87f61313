"""Format detection, the registry, head sniffing and atomic writes."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workbench.core.conversation import Conversation, Message
from workbench.errors import FormatError, UnknownFormatError
from workbench.formats import (
    ExportSession,
    ImportItem,
    base,
    detect_format,
    exporters,
    get_exporter,
    importers,
    read_conversations,
    register_importer,
)
from workbench.formats.base import peek_json

CONTEXT = {"session_id": "s1", "facts": [], "recent_history": [{"role": "user", "content": "hi"}]}
MESSAGES = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (json.dumps(CONTEXT), "context-json"),
        (json.dumps([CONTEXT, CONTEXT]), "context-json"),
        (json.dumps({"session_id": "s", "long_term_summary": "x"}), "context-json"),
        (json.dumps(MESSAGES), "openai"),
        (json.dumps([{"messages": MESSAGES}]), "openai"),
        (json.dumps([{"task_id": 1, "reward": 1, "info": {}, "traj": MESSAGES}]), "openai"),
        (json.dumps({"messages": MESSAGES}), "openai"),
        ("\n".join(json.dumps({"messages": MESSAGES}) for _ in range(3)), "openai"),
    ],
)
def test_detects_each_shape(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path / "input.json", text)

    assert detect_format(path).name == expected


def test_detects_a_file_whose_first_item_is_larger_than_the_head(tmp_path: Path) -> None:
    huge = "x" * (base.HEAD_SIZE * 2)
    items = [{"task_id": 0, "traj": [{"role": "system", "content": huge}], "info": {}}]
    path = write(tmp_path / "big.json", json.dumps(items))

    assert detect_format(path).name == "openai"
    (conv,) = list(read_conversations(path))
    assert isinstance(conv, Conversation)
    assert len(conv.messages[0].content) == len(huge)


@pytest.mark.parametrize(
    "text",
    [
        "hello, world",
        "[1, 2, 3]",
        json.dumps({"messages": [{"sender": "User", "text": "not openai"}]}),
        json.dumps([{"title": "a list of objects of no known shape", "items": []}]),
    ],
)
def test_unknown_format_lists_the_known_ones(tmp_path: Path, text: str) -> None:
    path = write(tmp_path / "mystery.json", text)

    with pytest.raises(UnknownFormatError) as info:
        detect_format(path)

    message = str(info.value)
    assert "mystery.json" in message
    for importer in importers():
        assert importer.name in message


def test_an_empty_file_is_said_to_be_empty(tmp_path: Path) -> None:
    path = write(tmp_path / "mystery.json", "")
    with pytest.raises(UnknownFormatError, match="mystery.json is empty"):
        detect_format(path)


def test_directory_without_context_files_is_unknown(tmp_path: Path) -> None:
    write(tmp_path / "a.json", json.dumps(MESSAGES))

    with pytest.raises(UnknownFormatError, match="directory"):
        detect_format(tmp_path)


def test_missing_path_is_a_format_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.json"

    with pytest.raises(FormatError, match="nowhere.json"):
        detect_format(missing)
    with pytest.raises(FormatError, match="nowhere.json"):
        read_conversations(missing)


def test_unknown_format_name_lists_the_known(tmp_path: Path) -> None:
    path = write(tmp_path / "x.json", json.dumps(MESSAGES))

    with pytest.raises(FormatError) as info:
        read_conversations(path, format="chatgpt-zip")

    assert "chatgpt-zip" in str(info.value)
    assert "context-json" in str(info.value) and "openai" in str(info.value)


def test_get_exporter_knows_the_built_ins_and_lists_them_on_a_miss() -> None:
    names = [e.name for e in exporters()]
    assert {"context-json", "openai-jsonl", "markdown"} <= set(names)
    for name in names:
        assert get_exporter(name).name == name

    with pytest.raises(FormatError) as info:
        get_exporter("pdf")

    for name in names:
        assert name in str(info.value)


class _Everything:
    """An importer that claims every file, to check registry order."""

    name = "everything"
    description = "claims everything"

    def sniff(self, path: Path, head: bytes) -> bool:
        return True

    def read(self, path: Path) -> Iterator[ImportItem]:
        yield Conversation(title=path.name, messages=[Message(role="user", content="x")])


def test_registered_importers_are_tried_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(base, "_importers", list(base._importers))
    path = write(tmp_path / "x.txt", "anything at all")

    register_importer(_Everything())

    assert detect_format(path).name == "everything"
    assert detect_format(write(tmp_path / "c.json", json.dumps(CONTEXT))).name == "context-json"
    (conv,) = list(read_conversations(path, format="everything"))
    assert isinstance(conv, Conversation) and conv.title == "x.txt"


def test_peek_json_reads_what_a_cut_off_head_holds() -> None:
    text = json.dumps([{"task_id": 1, "traj": [{"role": "system", "content": "abc" * 50}]}])

    cut = text.index("abcabc") + 10

    value = peek_json(text[:cut].encode())

    assert isinstance(value, list)
    assert value[0]["task_id"] == 1
    # The string cut in the middle is unknown; the keys before it are there.
    assert value[0]["traj"] == [{"role": "system", "content": None}]


def test_peek_json_ignores_what_follows_the_first_value() -> None:
    head = b'{"messages": []}\n{"messages": [}'

    assert peek_json(head) == {"messages": []}


@given(st.binary(max_size=300))
def test_sniffing_never_raises_on_arbitrary_bytes(head: bytes) -> None:
    for importer in importers():
        assert importer.sniff(Path("whatever.bin"), head) in (True, False)


@given(st.text(alphabet='{}[]":,0123456789 aeflnrstu\\', max_size=80))
def test_peek_json_never_raises_on_json_like_text(text: str) -> None:
    value = peek_json(text.encode())
    assert value is None or isinstance(value, dict | list)


def test_export_replaces_the_file_and_leaves_no_temporary_files(
    tmp_path: Path, session_factory: Callable[..., ExportSession]
) -> None:
    out = write(tmp_path / "out.json", "old contents")
    session = session_factory([Message(role="user", content="new")])

    get_exporter("context-json").write([session], out)

    data: Any = json.loads(out.read_text(encoding="utf-8"))
    assert data["recent_history"][0]["content"] == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_export_to_a_missing_directory_is_a_format_error(
    tmp_path: Path, session_factory: Callable[..., ExportSession]
) -> None:
    out = tmp_path / "no" / "such" / "dir" / "out.md"

    with pytest.raises(FormatError, match="out.md"):
        get_exporter("markdown").write([session_factory([])], out)


def test_a_folder_of_openai_files_is_read_file_by_file(tmp_path: Path) -> None:
    folder = tmp_path / "chats"
    folder.mkdir()
    write(folder / "a.json", json.dumps({"messages": MESSAGES}))
    write(folder / "b.json", json.dumps([{"messages": [{"role": "user", "content": "two"}]},
                                         {"messages": [{"role": "user", "content": "three"}]}]))
    write(folder / "c.json", '{"messages": [{"role": "user", "content": "cut')
    write(folder / "notes.txt", "not a conversation")
    write(folder / "d.json", json.dumps({"unrelated": True}))
    items = list(read_conversations(folder))
    conversations = [i for i in items if isinstance(i, Conversation)]
    skipped = {i.entry: i.reason for i in items if not isinstance(i, Conversation)}
    assert [[m.content for m in c.messages] for c in conversations] == [
        ["hi", "hello"], ["two"], ["three"]]
    # Each file that cannot be read is one entry, named by the file; .txt is not tried.
    assert set(skipped) == {"c.json", "d.json"}
    assert "not valid JSON" in skipped["c.json"]
    assert "known format" in skipped["d.json"]


def test_a_folder_with_nothing_to_read_still_says_what_is_known(tmp_path: Path) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    write(folder / "notes.txt", "not a conversation")
    with pytest.raises(UnknownFormatError, match="known formats"):
        list(read_conversations(folder))


def test_a_folder_read_as_one_export_names_the_files_of_other_formats(
    tmp_path: Path,
) -> None:
    # The walk: Import Folder on a folder holding a ChatGPT export's conversations.json,
    # a JSONL of chats and a context file read the ChatGPT export only, without a word
    # about the two other files (or, before that, every *.json as a context file).
    from tests.own_samples import chatgpt_fork_export

    folder = tmp_path / "mixed"
    folder.mkdir()
    chatgpt_fork_export(folder / "conversations.json")
    write(folder / "chats.jsonl", json.dumps({"messages": MESSAGES}) + "\n")
    write(folder / "trip.json", json.dumps({"session_id": "trip", "recent_history": [
        {"role": "user", "content": "hi"}]}))
    write(folder / "user.json", json.dumps({"id": "user-1"}))  # an export's own file
    items = list(read_conversations(folder))
    conversations = [i for i in items if isinstance(i, Conversation)]
    skipped = {i.entry: i.reason for i in items if not isinstance(i, Conversation)}
    assert conversations and all(c.source == "chatgpt" for c in conversations)
    assert "chats.jsonl" in skipped and "trip.json" in skipped
    assert "import it on its own" in skipped["chats.jsonl"]
    assert "context-json" in skipped["trip.json"]
    assert "user.json" not in skipped
    # Each named file reads whole on its own.
    assert [c.source for c in read_conversations(folder / "trip.json")
            if isinstance(c, Conversation)] == ["context-json"]
