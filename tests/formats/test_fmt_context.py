"""The context-file importer and exporter, including a lossless round trip."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.core.conversation import (
    ROLES,
    STATES,
    Conversation,
    ForkOrigin,
    Message,
    SessionContext,
    SessionInfo,
    SkippedEntry,
    Task,
    TaskStatus,
    TokenUsage,
    ToolStats,
)
from workbench.errors import FormatError
from workbench.formats import ExportSession, detect_format, get_exporter, read_conversations

PLAIN: dict[str, Any] = {
    "session_id": "sess-42",
    "system_state": {"mode": "planning", "verbose": False},
    "facts": ["The user lives in Oslo.", "Prefers metric units."],
    "recent_history": [
        {
            "timestamp": "2024-05-15T15:00:00Z",
            "role": "system",
            "content": "You are a travel agent.",
            "token_count": 6,
        },
        {
            "timestamp": "2024-05-15T15:00:05+02:00",
            "role": "user",
            "content": "Book me a flight to Bergen.",
            "token_count": 8,
        },
        {
            "timestamp": 1715785210,
            "role": "assistant",
            "content": None,
            "token_count": None,
        },
    ],
    "long_term_summary": "Planning a trip.",
    "active_tasks": [
        {
            "id": "t1",
            "description": "Find flights",
            "status": "running",
            "progress": 0.5,
            "created_at": "2024-05-15T15:00:00Z",
            "updated_at": None,
        },
        "Pack bags",
    ],
    "tool_stats": {"total_calls": 3, "by_tool": {"search": 2, "book": 1}, "failures": 1},
    "last_known_environment": {"cwd": "/home/me", "os": "linux"},
    "token_usage": {"total_input": 120, "total_output": 45},
}


def write_json(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value, ensure_ascii=False, indent=2), encoding="utf-8")
    return path


def conversations(items: list[Any]) -> list[Conversation]:
    return [i for i in items if isinstance(i, Conversation)]


def skipped(items: list[Any]) -> list[SkippedEntry]:
    return [i for i in items if isinstance(i, SkippedEntry)]


def test_plain_file_is_read_field_by_field(tmp_path: Path) -> None:
    path = write_json(tmp_path / "session.json", PLAIN)

    assert detect_format(path).name == "context-json"
    (conv,) = list(read_conversations(path))

    assert isinstance(conv, Conversation)
    assert conv.source == "context-json"
    assert conv.source_id == "sess-42"
    assert conv.title == "Book me a flight to Bergen."
    roles = [m.role for m in conv.messages]
    assert roles == ["system", "user", "assistant"]
    system, user, assistant = conv.messages
    assert system.created_at == datetime(2024, 5, 15, 15, 0, tzinfo=UTC)
    assert user.created_at == datetime(2024, 5, 15, 13, 0, 5, tzinfo=UTC)
    assert user.created_at is not None and user.created_at.tzinfo is not None
    assert assistant.created_at == datetime.fromtimestamp(1715785210, UTC)
    assert (system.token_count, assistant.token_count) == (6, None)
    assert assistant.content == ""
    assert conv.created_at == system.created_at
    assert conv.updated_at == assistant.created_at
    ctx = conv.context
    assert ctx.facts == PLAIN["facts"]
    assert ctx.summary == "Planning a trip."
    assert ctx.system_state == PLAIN["system_state"]
    assert ctx.environment == PLAIN["last_known_environment"]
    assert ctx.tool_stats == ToolStats(total_calls=3, by_tool={"search": 2, "book": 1}, failures=1)
    assert ctx.token_usage == TokenUsage(input_tokens=120, output_tokens=45)
    assert [(t.id, t.description, t.status, t.progress) for t in ctx.tasks] == [
        ("t1", "Find flights", "running", 0.5),
        ("Pack bags", "Pack bags", "pending", None),
    ]


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"role": "bot", "content": "hi"}, "role 'bot' is not one of system, user, assistant"),
        ({"content": "hi"}, "role is missing"),
        ({"role": "user", "content": ["x"]}, "content must be a string or null"),
        ({"role": "user", "content": "x", "timestamp": "yesterday"}, "timestamp 'yesterday'"),
        ({"role": "user", "content": "x", "token_count": -1}, "token_count -1"),
        ({"role": "user", "content": "x", "state": "gone"}, "state 'gone'"),
    ],
)
def test_invalid_entry_costs_only_itself_named_by_position(
    tmp_path: Path, entry: dict[str, Any], expected: str
) -> None:
    # A bad history entry used to cost its whole session; now only itself, as in the
    # other importers.
    first, _, third = PLAIN["recent_history"]
    data = dict(PLAIN, recent_history=[first, entry, third])
    path = write_json(tmp_path / "bad.json", data)

    items = list(read_conversations(path, format="context-json"))

    skip, conv = items
    assert isinstance(skip, SkippedEntry) and isinstance(conv, Conversation)
    assert skip.entry == "file bad.json recent_history[1]"
    assert skip.reason.startswith(f"session sess-42: message 1 was skipped ({expected}")
    assert skip.reason.endswith("); the rest of the conversation was imported.")
    assert conv.source_id == "sess-42"
    assert [(m.role, m.position) for m in conv.messages] == [("system", 0), ("assistant", 1)]
    assert conv.context.facts == PLAIN["facts"]


def test_bad_entries_in_an_array_and_a_directory_are_named_by_position(
    tmp_path: Path,
) -> None:
    bad = {"role": "bot", "content": "hi"}
    history = [PLAIN["recent_history"][0], bad]
    many = write_json(
        tmp_path / "many.json",
        [dict(PLAIN, session_id="a"), dict(PLAIN, session_id="b", recent_history=history)],
    )
    folder = tmp_path / "sessions"
    folder.mkdir()
    write_json(folder / "x.json", dict(PLAIN, session_id="x", recent_history=[bad, bad]))

    from_array = list(read_conversations(many))
    from_folder = list(read_conversations(folder, format="context-json"))

    assert [c.source_id for c in conversations(from_array)] == ["a", "b"]
    assert [s.entry for s in skipped(from_array)] == ["item 1 recent_history[1]"]
    assert [m.role for m in conversations(from_array)[1].messages] == ["system"]
    (empty,) = conversations(from_folder)
    assert empty.messages == [] and empty.context.facts == PLAIN["facts"]
    assert [s.entry for s in skipped(from_folder)] == [
        "file x.json recent_history[0]",
        "file x.json recent_history[1]",
    ]


def test_invalid_context_fields_are_named(tmp_path: Path) -> None:
    path = write_json(tmp_path / "bad.json", dict(PLAIN, facts=["ok", 3]))

    (skip,) = list(read_conversations(path))

    assert isinstance(skip, SkippedEntry)
    assert "facts[1]" in skip.reason


def test_array_file_skips_a_bad_session(tmp_path: Path) -> None:
    good = dict(PLAIN, session_id="a")
    bad = dict(PLAIN, session_id="b", recent_history="not a list")
    path = write_json(tmp_path / "many.json", [good, bad, dict(PLAIN, session_id="c")])

    items = list(read_conversations(path))

    assert [c.source_id for c in conversations(items)] == ["a", "c"]
    (skip,) = skipped(items)
    assert skip.entry == "item 1"
    assert "recent_history" in skip.reason


def test_directory_import_reports_a_bad_file_and_reads_the_others(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    write_json(folder / "a.json", dict(PLAIN, session_id="a"))
    (folder / "b.json").write_text('{"session_id": "b", "facts": [', encoding="utf-8")
    write_json(folder / "c.json", dict(PLAIN, session_id="c"))
    (folder / "notes.txt").write_text("not json", encoding="utf-8")

    assert detect_format(folder).name == "context-json"
    items = list(read_conversations(folder))

    assert [c.source_id for c in conversations(items)] == ["a", "c"]
    (skip,) = skipped(items)
    assert skip.entry == "file b.json"
    assert "b.json" in skip.reason and "line 1" in skip.reason


def test_file_without_session_id_is_identified_by_its_content(tmp_path: Path) -> None:
    data = {"recent_history": [{"role": "user", "content": "hello"}]}
    path = write_json(tmp_path / "notes.json", data)
    (tmp_path / "elsewhere").mkdir()
    same = write_json(tmp_path / "elsewhere" / "notes.json", data)
    other = write_json(
        tmp_path / "other.json", {"recent_history": [{"role": "user", "content": "bye"}]}
    )

    (conv,) = list(read_conversations(path))
    (conv_same,) = list(read_conversations(same))
    (conv_other,) = list(read_conversations(other))

    assert isinstance(conv, Conversation)
    assert conv.source_id and conv.source_id == conv_same.source_id
    assert conv_other.source_id != conv.source_id
    assert conv.title == "hello"
    assert conv.context == SessionContext()


def test_malformed_file_raises_format_error_with_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{\n  "session_id": "x",\n  "facts": [1,,]\n}', encoding="utf-8")

    with pytest.raises(FormatError) as info:
        list(read_conversations(path, format="context-json"))

    assert "broken.json" in str(info.value)
    assert "line 3" in str(info.value)


def test_export_of_a_plain_session_stays_plain(
    tmp_path: Path, session_factory: Callable[..., ExportSession]
) -> None:
    source = write_json(tmp_path / "in.json", PLAIN)
    (conv,) = conversations(list(read_conversations(source)))
    session = session_factory(
        conv.messages,
        title=conv.title,
        context=conv.context,
        source="context-json",
        source_id=conv.source_id,
        created_at=conv.created_at,
        updated_at=conv.updated_at,
    )
    out = tmp_path / "out.json"

    get_exporter("context-json").write([session], out)

    written = json.loads(out.read_text(encoding="utf-8"))
    assert set(written) == set(PLAIN)
    assert written["session_id"] == "sess-42"
    for entry in written["recent_history"]:
        assert set(entry) == {"timestamp", "role", "content", "token_count"}
    assert written["token_usage"]["total_input"] == 120
    assert written["token_usage"]["total_output"] == 45


def test_export_of_one_session_is_an_object_and_of_several_an_array(
    tmp_path: Path, session_factory: Callable[..., ExportSession]
) -> None:
    exporter = get_exporter("context-json")
    one, many = tmp_path / "one.json", tmp_path / "many.json"
    sessions = [
        session_factory([Message(role="user", content="hi")], session_id=1),
        session_factory([Message(role="user", content="yo")], session_id=2),
    ]

    exporter.write(sessions[:1], one)
    exporter.write(sessions, many)

    assert isinstance(json.loads(one.read_text(encoding="utf-8")), dict)
    assert isinstance(json.loads(many.read_text(encoding="utf-8")), list)
    ids = [c.source_id for c in conversations(list(read_conversations(many)))]
    assert len(ids) == 2 and ids[0].endswith("-1") and ids[1].endswith("-2")
    assert len(set(ids)) == 2


# --------------------------------------------------------------------------- round trip

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=3)
times = st.datetimes(
    min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)
optional_text = st.none() | st.text(max_size=10)

tool_calls = st.lists(
    st.builds(
        lambda i, name, args: {
            "id": i,
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        },
        st.text(min_size=1, max_size=8),
        st.text(min_size=1, max_size=8),
        json_objects,
    ),
    max_size=2,
)

messages = st.builds(
    Message,
    role=st.sampled_from(ROLES),
    content=st.text(max_size=40),
    name=optional_text,
    tool_calls=st.none() | tool_calls,
    tool_call_id=optional_text,
    parts=st.none() | st.lists(json_objects, max_size=2),
    created_at=st.none() | times,
    token_count=st.none() | st.integers(min_value=0, max_value=10**6),
    token_encoding=st.none() | st.sampled_from(["cl100k_base", "o200k_base"]),
    state=st.sampled_from(STATES),
    important=st.booleans(),
    # ``important`` lives in its own field, never as a metadata key.
    metadata=st.dictionaries(
        st.text(max_size=8).filter(lambda k: k != "important"), json_values, max_size=3
    ),
)

tasks = st.builds(
    Task,
    id=st.text(min_size=1, max_size=8),
    description=st.text(max_size=20),
    status=st.sampled_from([s.value for s in TaskStatus]),
    progress=st.none() | st.floats(min_value=0, max_value=1),
    created_at=st.none() | times,
    updated_at=st.none() | times,
)

contexts = st.builds(
    SessionContext,
    facts=st.lists(st.text(max_size=20), max_size=3),
    summary=st.text(max_size=30),
    tasks=st.lists(tasks, max_size=3),
    tool_stats=st.builds(
        ToolStats,
        total_calls=st.integers(min_value=0, max_value=1000),
        by_tool=st.dictionaries(st.text(max_size=6), st.integers(min_value=0, max_value=100)),
        failures=st.integers(min_value=0, max_value=100),
    ),
    token_usage=st.builds(
        TokenUsage,
        input_tokens=st.integers(min_value=0, max_value=10**9),
        output_tokens=st.integers(min_value=0, max_value=10**9),
    ),
    system_state=json_objects,
    environment=json_objects,
)


@st.composite
def export_sessions(draw: st.DrawFn, session_id: int) -> ExportSession:
    source_id = draw(st.none() | st.text(min_size=1, max_size=10))
    info = SessionInfo(
        id=session_id,
        title=draw(st.text(max_size=30)),
        agent_id=1,
        created_at=draw(times),
        updated_at=draw(times),
        tags=draw(st.lists(st.text(min_size=1, max_size=8), max_size=3)),
        source="context-json" if source_id else None,
        source_id=source_id,
    )
    return ExportSession(
        info=info, messages=draw(st.lists(messages, max_size=6)), context=draw(contexts)
    )


@st.composite
def session_lists(draw: st.DrawFn) -> list[ExportSession]:
    count = draw(st.integers(min_value=1, max_value=3))
    return [draw(export_sessions(i + 1)) for i in range(count)]


MESSAGE_FIELDS = (
    "role",
    "content",
    "name",
    "tool_calls",
    "tool_call_id",
    "parts",
    "created_at",
    "token_count",
    "token_encoding",
    "state",
    "important",
    "metadata",
)


@settings(
    max_examples=60,
    suppress_health_check=[
        *settings.default.suppress_health_check,
        HealthCheck.function_scoped_fixture,
    ],
)
@given(sessions=session_lists())
def test_round_trip_loses_nothing(tmp_path: Path, sessions: list[ExportSession]) -> None:
    out = tmp_path / "roundtrip.json"

    get_exporter("context-json").write(sessions, out)
    items = list(read_conversations(out))

    assert not skipped(items)
    convs = conversations(items)
    assert len(convs) == len(sessions)
    for session, conv in zip(sessions, convs, strict=True):
        info = session.info
        assert conv.title == info.title
        assert conv.tags == info.tags
        assert conv.created_at == info.created_at
        assert conv.updated_at == info.updated_at
        if info.source_id:
            assert conv.source_id == info.source_id
        else:
            assert conv.source_id and conv.source_id.endswith(f"-{info.id}")
        assert conv.context == session.context
        assert len(conv.messages) == len(session.messages)
        for before, after in zip(session.messages, conv.messages, strict=True):
            for name in MESSAGE_FIELDS:
                assert getattr(after, name) == getattr(before, name), name


# --------------------------------------------------------------------------- fork links


@pytest.mark.parametrize("fmt", ["context-json", "openai-jsonl", "markdown"])
def test_a_fork_origin_is_written_and_read_back(
    tmp_path: Path, session_factory: Callable[..., ExportSession], fmt: str
) -> None:
    fork = session_factory([Message(role="user", content="hi")], session_id=7)
    fork.forked_from = ForkOrigin("workbench", "wb-20250301T120000000001-3", 4)
    plain = session_factory([Message(role="user", content="yo")], session_id=8)
    path = tmp_path / "out"

    get_exporter(fmt).write([fork, plain], path)

    reader = {"openai-jsonl": "openai"}.get(fmt, fmt)
    back = conversations(list(read_conversations(path, format=reader)))
    assert [c.forked_from for c in back] == [fork.forked_from, None]
    assert "forked_from" not in back[0].metadata


def test_a_forked_from_key_of_another_shape_stays_in_the_metadata(tmp_path: Path) -> None:
    odd = {"source": "x", "source_id": "y", "position": "three"}
    path = write_json(tmp_path / "odd.json", dict(PLAIN, forked_from=odd))

    (conv,) = conversations(list(read_conversations(path)))

    assert conv.forked_from is None
    assert conv.metadata["forked_from"] == odd
