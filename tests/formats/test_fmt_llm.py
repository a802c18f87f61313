"""The simonw/llm logs.db importer: the old schema, the new one, and both in one file."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from workbench.core.conversation import Conversation, SkippedEntry
from workbench.engine.workspace import Workspace
from workbench.errors import FormatError, UnknownFormatError
from workbench.formats import detect_format, read_conversations

OLD_SCHEMA = """
CREATE TABLE conversations (id TEXT PRIMARY KEY, name TEXT, model TEXT);
CREATE TABLE responses (
    id TEXT PRIMARY KEY, model TEXT, prompt TEXT, system TEXT, prompt_json TEXT,
    options_json TEXT, response TEXT, response_json TEXT, conversation_id TEXT,
    duration_ms INTEGER, datetime_utc TEXT, input_tokens INTEGER, output_tokens INTEGER,
    token_details TEXT, schema_id TEXT, resolved_model TEXT);
CREATE TABLE fragments (id INTEGER PRIMARY KEY, hash TEXT, content TEXT, datetime_utc TEXT,
    source TEXT);
CREATE TABLE prompt_fragments (response_id TEXT, fragment_id INTEGER, "order" INTEGER);
CREATE TABLE system_fragments (response_id TEXT, fragment_id INTEGER, "order" INTEGER);
CREATE TABLE attachments (id TEXT PRIMARY KEY, type TEXT, path TEXT, url TEXT, content BLOB);
CREATE TABLE prompt_attachments (response_id TEXT, attachment_id TEXT, "order" INTEGER);
CREATE TABLE tool_calls (id INTEGER PRIMARY KEY, response_id TEXT, tool_id INTEGER,
    name TEXT, arguments TEXT, tool_call_id TEXT);
CREATE TABLE tool_results (id INTEGER PRIMARY KEY, response_id TEXT, tool_id INTEGER,
    name TEXT, output TEXT, tool_call_id TEXT, instance_id INTEGER, exception TEXT);
"""

NEW_SCHEMA = """
CREATE TABLE messages (hash TEXT PRIMARY KEY, parent_hash TEXT, role TEXT,
    provider_metadata TEXT);
CREATE TABLE parts (id INTEGER PRIMARY KEY, message_hash TEXT, position INTEGER, type TEXT,
    tool_name TEXT, text TEXT, payload TEXT);
CREATE TABLE threads (id TEXT PRIMARY KEY, name TEXT, tip_message_hash TEXT,
    forked_from TEXT, datetime_utc TEXT);
CREATE TABLE turns (id TEXT PRIMARY KEY, thread_id TEXT, parent_message_hash TEXT,
    tip_message_hash TEXT, model TEXT, resolved_model TEXT, options_json TEXT,
    schema_id TEXT, input_tokens INTEGER, output_tokens INTEGER, token_details TEXT,
    duration_ms INTEGER, datetime_utc TEXT, response_json TEXT);
CREATE TABLE turn_fragments (turn_id TEXT, fragment_id INTEGER, "order" INTEGER, kind TEXT);
"""


class LogDb:
    """Writes rows the way llm lays them out."""

    def __init__(self, path: Path, *, old: bool = True, new: bool = True) -> None:
        self.path = path
        self.conn = sqlite3.connect(path)
        if old or new:
            # llm keeps the old tables after the new ones arrive.
            self.conn.executescript(OLD_SCHEMA)
        if new:
            self.conn.executescript(NEW_SCHEMA)

    def close(self) -> None:
        self.conn.commit()
        self.conn.close()

    def insert(self, table: str, **values: Any) -> None:
        columns = ", ".join(f'"{k}"' for k in values)
        marks = ", ".join("?" for _ in values)
        self.conn.execute(
            f"INSERT INTO {table} ({columns}) VALUES ({marks})", tuple(values.values())
        )

    def response(
        self, conv: str, rid: str, prompt: str, reply: str, when: str, **keys: Any
    ) -> None:
        self.insert(
            "responses",
            id=rid,
            conversation_id=conv,
            model=keys.pop("model", "gpt-4o-mini"),
            prompt=prompt,
            response=reply,
            datetime_utc=when,
            options_json=keys.pop("options_json", "{}"),
            **keys,
        )

    def message(self, parent: str | None, role: str, parts: list[dict[str, Any]]) -> str:
        digest = hashlib.sha256(json.dumps([parent, role, parts]).encode()).hexdigest()[:32]
        hash_ = f"b2:{digest}"
        self.insert("messages", hash=hash_, parent_hash=parent, role=role)
        for position, part in enumerate(parts):
            self.insert(
                "parts",
                message_hash=hash_,
                position=position,
                type=part["type"],
                tool_name=part.get("tool_name"),
                text=part.get("text"),
                payload=json.dumps(part["payload"]) if "payload" in part else None,
            )
        return hash_


@pytest.fixture
def log_db(tmp_path: Path) -> Iterator[LogDb]:
    db = LogDb(tmp_path / "logs.db")
    yield db
    db.conn.close()


def items_of(path: Path) -> list[Conversation | SkippedEntry]:
    return list(read_conversations(path, "llm"))


def convs(path: Path) -> list[Conversation]:
    return [i for i in items_of(path) if isinstance(i, Conversation)]


def text(part: str) -> dict[str, Any]:
    return {"type": "text", "text": part}


# --------------------------------------------------------------------------- old schema


def test_old_schema_conversation_with_system_prompt_and_tokens(log_db: LogDb) -> None:
    log_db.insert("conversations", id="c1", name="ships", model="gpt-4o-mini")
    log_db.response(
        "c1",
        "r1",
        "tell me about ships",
        "Arr.",
        "2025-01-02T10:00:00+00:00",
        system="You are a pirate",
        input_tokens=9,
        output_tokens=3,
        duration_ms=120,
    )
    log_db.response(
        "c1",
        "r2",
        "more",
        "Big boats.",
        "2025-01-02T10:01:00+00:00",
        system="You are a pirate",
        input_tokens=20,
        output_tokens=4,
        options_json='{"temperature": 0.5}',
    )
    log_db.close()

    assert detect_format(log_db.path).name == "llm"
    (conv,) = convs(log_db.path)

    assert [(m.role, m.content) for m in conv.messages] == [
        ("system", "You are a pirate"),
        ("user", "tell me about ships"),
        ("assistant", "Arr."),
        ("user", "more"),
        ("assistant", "Big boats."),
    ]
    assert conv.source == "llm" and conv.source_id == "c1" and conv.title == "ships"
    first_reply = conv.messages[2]
    assert first_reply.metadata["model"] == "gpt-4o-mini"
    assert first_reply.metadata["usage"] == {"input_tokens": 9, "output_tokens": 3}
    assert first_reply.metadata["duration_ms"] == 120
    assert conv.messages[4].metadata["options"] == {"temperature": 0.5}
    assert first_reply.created_at is not None and first_reply.created_at.minute == 0
    assert (conv.context.token_usage.input_tokens, conv.context.token_usage.output_tokens) == (
        29,
        7,
    )


def test_old_schema_fragments_are_resolved_like_llm_joins_them(log_db: LogDb) -> None:
    log_db.insert("conversations", id="c1", name="frag")
    log_db.insert("fragments", id=1, hash="h1", content="fragment text\n", source="/tmp/f.txt")
    log_db.insert("fragments", id=2, hash="h2", content="system part", source="sys.txt")
    log_db.response("c1", "r1", "summarize", "ok", "2025-01-02T10:00:00+00:00")
    log_db.insert("prompt_fragments", response_id="r1", fragment_id=1, order=0)
    log_db.insert("system_fragments", response_id="r1", fragment_id=2, order=0)
    log_db.close()

    (conv,) = convs(log_db.path)

    assert conv.messages[0].role == "system" and conv.messages[0].content == "system part"
    user = conv.messages[1]
    assert user.content == "fragment text\n\nsummarize"
    assert user.metadata["fragments"] == [
        {"kind": "prompt", "fragment_id": 1, "source": "/tmp/f.txt"}
    ]


def test_old_schema_tool_calls_without_ids_are_paired_by_name(log_db: LogDb) -> None:
    log_db.insert("conversations", id="c1", name="tools")
    log_db.response("c1", "r1", "what version?", "", "2025-01-02T10:00:00+00:00")
    log_db.insert(
        "tool_calls", response_id="r1", name="llm_version", arguments="{}", tool_call_id=""
    )
    log_db.response("c1", "r2", "", "It is 0.27.", "2025-01-02T10:00:01+00:00")
    log_db.insert(
        "tool_results", response_id="r2", name="llm_version", output="0.27.1", tool_call_id=""
    )
    log_db.close()

    (conv,) = convs(log_db.path)

    roles = [m.role for m in conv.messages]
    assert roles == ["user", "assistant", "tool", "assistant"]
    call = conv.messages[1].tool_calls
    assert call is not None and call[0]["function"] == {"name": "llm_version", "arguments": "{}"}
    tool = conv.messages[2]
    assert tool.content == "0.27.1" and tool.name == "llm_version"
    assert tool.tool_call_id == call[0]["id"]


def test_old_schema_attachment_is_a_part_with_a_marker(log_db: LogDb) -> None:
    log_db.insert("conversations", id="c1", name="img")
    log_db.response("c1", "r1", "describe this", "a pixel", "2025-01-02T10:00:00+00:00")
    log_db.insert("attachments", id="att1", type="image/png", path="/home/u/pixel.png")
    log_db.insert("prompt_attachments", response_id="r1", attachment_id="att1", order=0)
    log_db.close()

    user = convs(log_db.path)[0].messages[0]

    assert user.content == "describe this\n[attachment: pixel.png]"
    assert user.parts is not None
    assert user.parts[1] == {
        "type": "attachment",
        "id": "att1",
        "mime_type": "image/png",
        "path": "/home/u/pixel.png",
    }


# --------------------------------------------------------------------------- new schema


def build_thread(db: LogDb, thread_id: str = "t1", name: str = "pirates") -> dict[str, str]:
    """A thread: system → user → assistant (reasoning, tool call) → tool → assistant."""
    db.insert("fragments", id=1, hash="h1", content="FRAGMENT\n", source="notes.md")
    db.insert("attachments", id="att1", type="image/png", path="/x/pic.png")
    system = db.message(None, "system", [text("You are a pirate")])
    user = db.message(
        system,
        "user",
        [
            {"type": "text", "payload": {"text_ref": [{"fragment": 1}, {"literal": "\nsail?"}]}},
            {"type": "attachment", "payload": {"attachment": {"id": "att1"}}},
        ],
    )
    call = db.message(
        user,
        "assistant",
        [
            {"type": "reasoning", "text": "thinking hard"},
            text("Checking the wind."),
            {
                "type": "tool_call",
                "tool_name": "wind",
                "payload": {"name": "wind", "arguments": {"at": "sea"}, "tool_call_id": "tc_1"},
            },
        ],
    )
    result = db.message(
        call,
        "tool",
        [
            {
                "type": "tool_result",
                "tool_name": "wind",
                "payload": {"name": "wind", "output": "strong", "tool_call_id": "tc_1"},
            }
        ],
    )
    answer = db.message(result, "assistant", [text("Aye, we sail.")])
    db.insert(
        "threads",
        id=thread_id,
        name=name,
        tip_message_hash=answer,
        datetime_utc="2025-03-01 09:00:00.000000+00:00",
    )
    db.insert(
        "turns",
        id="turn1",
        thread_id=thread_id,
        parent_message_hash=user,
        tip_message_hash=call,
        model="gpt-4o",
        input_tokens=30,
        output_tokens=8,
        duration_ms=500,
        datetime_utc="2025-03-01T09:00:01+00:00",
    )
    db.insert(
        "turns",
        id="turn2",
        thread_id=thread_id,
        parent_message_hash=result,
        tip_message_hash=answer,
        model="gpt-4o",
        input_tokens=40,
        output_tokens=5,
        datetime_utc="2025-03-01T09:00:05+00:00",
    )
    db.insert("turn_fragments", turn_id="turn1", fragment_id=1, order=0, kind="prompt")
    return {"system": system, "user": user, "call": call, "result": result, "answer": answer}


def test_new_schema_thread_with_every_kind_of_part(log_db: LogDb) -> None:
    build_thread(log_db)
    log_db.close()

    assert detect_format(log_db.path).name == "llm"
    (conv,) = convs(log_db.path)

    assert [(m.role, m.content) for m in conv.messages] == [
        ("system", "You are a pirate"),
        ("user", "FRAGMENT\n\nsail?\n[attachment: pic.png]"),
        ("assistant", "Checking the wind."),
        ("tool", "strong"),
        ("assistant", "Aye, we sail."),
    ]
    system, user, call, tool, answer = conv.messages
    assert conv.source_id == "t1" and conv.title == "pirates"
    assert user.metadata["fragments"] == [
        {"kind": "prompt", "fragment_id": 1, "source": "notes.md"}
    ]
    assert user.parts is not None and user.parts[1]["mime_type"] == "image/png"
    assert call.parts is not None and call.parts[0] == {
        "type": "reasoning",
        "text": "thinking hard",
    }
    assert call.tool_calls == [
        {
            "id": "tc_1",
            "type": "function",
            "function": {"name": "wind", "arguments": json.dumps({"at": "sea"})},
        }
    ]
    assert (tool.tool_call_id, tool.name) == ("tc_1", "wind")
    assert call.metadata["model"] == "gpt-4o"
    assert call.metadata["usage"] == {"input_tokens": 30, "output_tokens": 8}
    assert answer.metadata["usage"] == {"input_tokens": 40, "output_tokens": 5}
    # The turn's time is its prompt's and its replies'; the root system prompt has none
    # of its own and keeps none (a time is never borrowed: issue 16 item 7).
    assert call.created_at is not None and call.created_at.second == 1
    assert user.created_at == call.created_at
    assert system.created_at is None
    assert tool.created_at is not None and tool.created_at.second == 5
    assert (conv.context.token_usage.input_tokens, conv.context.token_usage.output_tokens) == (
        70,
        13,
    )


def test_forked_threads_are_sessions_of_their_own(log_db: LogDb) -> None:
    hashes = build_thread(log_db)
    other = log_db.message(hashes["result"], "assistant", [text("Nay, we stay.")])
    log_db.insert(
        "threads",
        id="t2",
        name="fork",
        tip_message_hash=other,
        forked_from="t1",
        datetime_utc="2025-03-02 09:00:00+00:00",
    )
    log_db.close()

    first, fork = convs(log_db.path)

    assert fork.source_id == "t2" and fork.metadata["forked_from"] == "t1"
    assert [m.content for m in fork.messages[:-1]] == [m.content for m in first.messages[:-1]]
    assert fork.messages[-1].content == "Nay, we stay."


def test_thread_without_a_tip_is_reported(log_db: LogDb) -> None:
    log_db.insert("threads", id="empty", name="nothing", tip_message_hash=None)
    log_db.close()

    items = items_of(log_db.path)

    assert len(items) == 1 and isinstance(items[0], SkippedEntry)
    assert items[0].entry == "thread empty"


# --------------------------------------------------------------------------- both schemas


def test_database_with_both_schemas_imports_each_conversation_once(log_db: LogDb) -> None:
    build_thread(log_db, thread_id="shared")
    # The same conversation before the upgrade (thread id = conversation id) ...
    log_db.insert("conversations", id="shared", name="pirates")
    log_db.response("shared", "r-old", "sail?", "maybe", "2025-02-01T09:00:00+00:00")
    # ... and one only the old tables hold.
    log_db.insert("conversations", id="old-only", name="old")
    log_db.response("old-only", "r-1", "hello", "hi", "2025-01-01T09:00:00+00:00")
    # A response also logged as a turn is read from the turn.
    log_db.response("old-only", "turn1", "dup", "dup", "2025-01-01T09:01:00+00:00")
    log_db.close()

    conversations = convs(log_db.path)

    assert sorted(c.source_id or "" for c in conversations) == ["old-only", "shared"]
    shared = next(c for c in conversations if c.source_id == "shared")
    assert shared.metadata["schema"] == "threads"
    old = next(c for c in conversations if c.source_id == "old-only")
    assert [m.content for m in old.messages] == ["hello", "hi"]


def test_import_leaves_the_database_untouched_and_does_not_duplicate(
    log_db: LogDb, tmp_path: Path
) -> None:
    build_thread(log_db)
    log_db.insert("conversations", id="c1", name="old")
    log_db.response("c1", "r1", "hello", "hi", "2025-01-01T09:00:00+00:00")
    log_db.close()
    before = log_db.path.read_bytes()
    log_db.path.chmod(0o444)

    with Workspace.open(tmp_path / "w.db") as ws:
        first = ws.import_path(log_db.path)
        again = ws.import_path(log_db.path)

    assert [created for _, created in first.sessions] == [True, True]
    assert [created for _, created in again.sessions] == [False, False]
    assert log_db.path.read_bytes() == before
    assert sorted(p.name for p in log_db.path.parent.iterdir() if p.name.startswith("logs")) == [
        "logs.db"
    ]


# --------------------------------------------------------------------------- detection


def test_other_sqlite_files_are_not_llm_logs(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.commit()
    conn.close()

    with pytest.raises(UnknownFormatError):
        detect_format(path)
    with pytest.raises(FormatError, match="not an llm logs.db"):
        read_conversations(path, "llm")


def test_a_file_that_is_not_sqlite_cannot_be_read_as_llm(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    path.write_bytes(b"SQLite format 3\x00" + b"\x00" * 50)

    with pytest.raises(FormatError):
        list(read_conversations(path, "llm"))


# --------------------------------------------------------------------------- odd values


def test_a_count_of_tokens_that_is_text_costs_no_conversation(log_db: LogDb) -> None:
    # Summing the session's usage did int('many'): the reading stopped there, and every
    # conversation after it was lost.
    log_db.response("c1", "r1", "hello", "hi", "2025-01-02T10:00:00+00:00",
                    input_tokens="many", output_tokens=3)
    log_db.response("c2", "r2", "again", "yes", "2025-01-02T11:00:00+00:00",
                    input_tokens=4, output_tokens=2)
    build_thread(log_db)
    log_db.conn.execute("UPDATE turns SET output_tokens = 'lots' WHERE id = 'turn1'")
    log_db.close()

    items = items_of(log_db.path)

    assert not [i for i in items if isinstance(i, SkippedEntry)]
    by_id = {c.source_id: c for c in items if isinstance(c, Conversation)}
    assert set(by_id) == {"c1", "c2", "t1"}
    assert by_id["c1"].messages[1].metadata["usage"]["input_tokens"] == "many"
    assert by_id["c1"].context.token_usage.output_tokens == 3
    assert by_id["t1"].context.token_usage.output_tokens == 5


def test_a_blob_where_llm_writes_text_is_read_as_text(log_db: LogDb) -> None:
    # A value of bytes went into the message's metadata, which could not be stored.
    log_db.response("c1", "r1", "hello", "hi", "2025-01-02T10:00:00+00:00",
                    model=b"gpt-4o", resolved_model=b"gpt-4o-2024\xff")
    log_db.close()

    (conv,) = convs(log_db.path)

    reply = conv.messages[1]
    assert reply.metadata["model"] == "gpt-4o"
    assert reply.metadata["resolved_model"] == "gpt-4o-2024\ufffd"
    json.dumps(reply.metadata)  # storable


def test_a_cycle_of_parent_links_repeats_no_message(log_db: LogDb) -> None:
    # The chain from the tip went round the cycle down to the depth limit: the session
    # held the two messages again and again.
    hashes = build_thread(log_db)
    log_db.conn.execute("UPDATE messages SET parent_hash = ? WHERE hash = ?",
                        (hashes["answer"], hashes["system"]))
    log_db.close()

    (conv,) = convs(log_db.path)

    assert [m.content for m in conv.messages].count("Aye, we sail.") == 1
    assert len(conv.messages) == 5
