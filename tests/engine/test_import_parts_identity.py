"""Conversations that differ only in what their text does not say (an image, a file)
are different conversations: import never takes one for the other (SPEC §7, §11).

A vision dataset asks the same question of many images and often gets the same answer;
a regenerated DALL·E image shows as the same ``[image]`` text as the first one. The
fixtures are small files shaped like those.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import text

from workbench.core.conversation import Message
from workbench.core.identity import fingerprint_messages
from workbench.engine.workspace import Workspace

CliRunner = Callable[..., Any]


def _vision_line(image: str, answer: str = "A cat.") -> str:
    return json.dumps({"messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "What animal is this?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image}"}},
        ]},
        {"role": "assistant", "content": answer},
    ]})


def test_two_images_asked_the_same_question_are_two_sessions(
    workspace: Workspace, tmp_path: Path
) -> None:
    path = tmp_path / "vision.jsonl"
    path.write_text(_vision_line("AAAA") + "\n" + _vision_line("BBBB") + "\n", encoding="utf-8")

    first = workspace.import_path(path)
    again = workspace.import_path(path)

    assert first.counts()["created"] == 2
    assert again.counts() == {"created": 0, "updated": 0, "unchanged": 2, "skipped": 0}
    urls = set()
    for info, _ in first.sessions:
        assert info.id is not None
        question = workspace.page_messages(info.id)[0]
        assert question.parts is not None
        urls.add(question.parts[1]["image_url"]["url"])
    assert urls == {"data:image/png;base64,AAAA", "data:image/png;base64,BBBB"}


def test_an_image_added_to_a_file_imported_before_is_a_new_session(
    cli: CliRunner, tmp_path: Path
) -> None:
    one = tmp_path / "one.jsonl"
    one.write_text(_vision_line("AAAA") + "\n", encoding="utf-8")
    two = tmp_path / "two.jsonl"
    two.write_text(_vision_line("BBBB") + "\n", encoding="utf-8")

    cli("import", one)
    second = cli("import", two, "--json").json()

    assert second["counts"]["created"] == 1
    assert len(cli("sessions", "--json").json()) == 2


def test_a_session_fingerprinted_before_parts_counted_is_still_recognised(
    workspace: Workspace, tmp_path: Path
) -> None:
    path = tmp_path / "vision.jsonl"
    path.write_text(_vision_line("AAAA") + "\n", encoding="utf-8")
    workspace.import_path(path)
    # As an older version stored it: the fingerprint without the parts.
    legacy = fingerprint_messages(
        [
            Message(role="user", content="What animal is this?", parts=[{"type": "image_url"}]),
            Message(role="assistant", content="A cat."),
        ],
        with_parts=False,
    )
    with workspace.repo.db.write() as conn:
        conn.execute(text("UPDATE sessions SET fingerprint = :fp"), {"fp": legacy})

    again = workspace.import_path(path)

    assert again.counts() == {"created": 0, "updated": 0, "unchanged": 1, "skipped": 0}
    assert len(workspace.list_sessions()) == 1


def test_a_message_without_parts_keeps_the_fingerprint_it_had() -> None:
    plain = [Message(role="user", content="Hi"), Message(role="assistant", content="Hello",
                                                          parts=[{"type": "text",
                                                                  "text": "Hello"}])]
    assert fingerprint_messages(plain) == fingerprint_messages(plain, with_parts=False)
    pictured = [Message(role="user", content="[image]",
                        parts=[{"type": "image_asset_pointer", "asset_pointer": "a"}])]
    other = [Message(role="user", content="[image]",
                     parts=[{"type": "image_asset_pointer", "asset_pointer": "b"}])]
    assert fingerprint_messages(pictured) != fingerprint_messages(other)
