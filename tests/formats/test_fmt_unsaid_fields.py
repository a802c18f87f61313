"""What real exports carry beyond their text is kept, never dropped without a word
(SPEC §7, §11): regenerated images, content types an importer has no reading for,
tool items, citations, structured-output schemas, block times.

Each fixture is a small file shaped like the tool's export.
"""

from __future__ import annotations

import json
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
