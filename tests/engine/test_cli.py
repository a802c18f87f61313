"""The ``workbench`` command line (SPEC §8, issue 2 "Command line" and "Bad input").

Commands run in-process through :func:`workbench.cli.main` (fast, output captured) and,
for a few, as a real ``python -m workbench`` child process with ``WORKBENCH_DB`` set.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from workbench.core.conversation import Conversation, Message
from workbench.engine.importing import import_conversations
from workbench.engine.workspace import Workspace

SESSION_KEYS = {"id", "title", "messages", "tokens", "updated_at", "pinned", "tags"}
SHOW_KEYS = {"id", "title", "messages", "context", "source", "source_id", "forked_from", "metadata"}
SHOW_MESSAGE_KEYS = {
    "id",
    "position",
    "role",
    "content",
    "state",
    "token_count",
    "name",
    "tool_calls",
    "tool_call_id",
    "metadata",
}
SHOW_CONTEXT_KEYS = {"facts", "summary", "tasks", "tool_stats", "token_usage"}
SEARCH_KEYS = {"session_id", "message_id", "role", "snippet", "score"}

TRIP: dict[str, Any] = {
    "session_id": "trip-1",
    "title": "Trip to Porto",
    "tags": ["travel"],
    "facts": ["Likes trains."],
    "long_term_summary": "Planning a trip to Porto.",
    "recent_history": [
        {"timestamp": "2025-01-02T10:00:00Z", "role": "system", "content": "Be brief."},
        {
            "timestamp": "2025-01-02T10:00:05Z",
            "role": "user",
            "content": "Which train goes to Porto tomorrow morning?",
        },
        {
            "timestamp": "2025-01-02T10:00:07Z",
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "trains", "arguments": '{"to": "Porto"}'},
                }
            ],
        },
        {
            "timestamp": "2025-01-02T10:00:08Z",
            "role": "tool",
            "name": "trains",
            "tool_call_id": "c1",
            "content": "Alfa Pendular 08:09",
        },
        {
            "timestamp": "2025-01-02T10:00:10Z",
            "role": "assistant",
            "content": "The Alfa Pendular train leaves at 08:09.",
            "metadata": {"important": True},
        },
    ],
    "active_tasks": [{"id": "t1", "description": "Book the train", "status": "pending"}],
    "tool_stats": {"total_calls": 1, "by_tool": {"trains": 1}, "failures": 0},
    "token_usage": {"total_input": 90, "total_output": 30},
}

CHATS: list[dict[str, Any]] = [
    {
        "title": "Soup",
        "messages": [
            {"role": "user", "content": "How long should lentil soup simmer?"},
            {"role": "assistant", "content": "About 25 minutes, until the lentils are soft."},
        ],
    },
    {
        "title": "Bread",
        "messages": [
            {"role": "system", "content": "You are a baker."},
            {"role": "user", "content": "Why did my bread not rise? The soup was fine."},
            {"role": "assistant", "content": "The yeast may have been old; proof it first."},
        ],
    },
]


@pytest.fixture
def trip_file(tmp_path: Path, write_json: Callable[[Path, Any], Path]) -> Path:
    return write_json(tmp_path / "trip.json", TRIP)


@pytest.fixture
def chats_file(tmp_path: Path, write_jsonl: Callable[[Path, Any], Path]) -> Path:
    return write_jsonl(tmp_path / "chats.jsonl", CHATS)


@pytest.fixture
def loaded(cli: Callable[..., Any], trip_file: Path, chats_file: Path) -> dict[str, int]:
    """The database holding the trip (context file) and the two chats (JSONL): title → id."""
    ids: dict[str, int] = {}
    for path in (trip_file, chats_file):
        result = cli("import", path, "--json")
        assert result.code == 0, result.err
        ids.update({s["title"]: s["id"] for s in result.json()["sessions"]})
    return ids


# -- the JSON shapes of issue 2 ---------------------------------------------------------------


def test_import_json_shape(cli: Callable[..., Any], trip_file: Path) -> None:
    result = cli("import", trip_file, "--json")
    assert result.code == 0, result.err
    data = result.json()
    assert set(data) == {"sessions", "counts", "skipped", "notes"}
    assert data["skipped"] == [] and data["notes"] == []
    assert data["counts"] == {"created": 1, "updated": 0, "unchanged": 0, "skipped": 0}
    assert len(data["sessions"]) == 1
    session = data["sessions"][0]
    assert set(session) == {"id", "title", "messages", "status"}
    assert session["status"] == "created"
    assert session["title"] == "Trip to Porto"
    assert session["messages"] == len(TRIP["recent_history"])
    assert isinstance(session["id"], int)


def test_importing_the_same_file_again_says_nothing_new_not_imported_0(
    cli: Callable[..., Any], chats_file: Path
) -> None:
    assert cli("import", chats_file).out.startswith("Imported 2 session(s) with 5 message(s)")
    again = cli("import", chats_file)
    assert again.code == 0, again.err
    assert again.out.splitlines() == [
        f"No new session from {chats_file}.",
        "2 session(s) were already imported and were left as they are.",
    ]


def test_import_human_text_names_the_counts(cli: Callable[..., Any], chats_file: Path) -> None:
    result = cli("import", chats_file)
    assert result.code == 0, result.err
    assert "2 session(s)" in result.out
    assert "5 message(s)" in result.out


def test_sessions_json_shape(cli: Callable[..., Any], loaded: dict[str, int]) -> None:
    result = cli("sessions", "--json")
    assert result.code == 0, result.err
    sessions = result.json()
    assert isinstance(sessions, list)
    assert {s["title"] for s in sessions} == set(loaded)
    for s in sessions:
        assert set(s) == SESSION_KEYS
        assert s["id"] == loaded[s["title"]]
        assert isinstance(s["tokens"], int) and s["tokens"] > 0
        assert isinstance(s["pinned"], bool)
        assert isinstance(s["tags"], list)
        assert isinstance(s["updated_at"], str) and s["updated_at"]
    by_title = {s["title"]: s for s in sessions}
    assert by_title["Trip to Porto"]["messages"] == 5
    assert by_title["Trip to Porto"]["tags"] == ["travel"]
    assert by_title["Bread"]["messages"] == 3


def test_sessions_on_empty_database(cli: Callable[..., Any]) -> None:
    assert cli("sessions", "--json").json() == []
    text = cli("sessions")
    assert text.code == 0
    assert "import" in text.out.lower()


def test_sessions_human_text_lists_titles(cli: Callable[..., Any], loaded: dict[str, int]) -> None:
    result = cli("sessions")
    assert result.code == 0, result.err
    for title in loaded:
        assert title in result.out


def test_show_json_shape(cli: Callable[..., Any], loaded: dict[str, int]) -> None:
    result = cli("show", loaded["Trip to Porto"], "--json")
    assert result.code == 0, result.err
    data = result.json()
    assert set(data) == SHOW_KEYS
    assert data["id"] == loaded["Trip to Porto"]
    assert data["title"] == "Trip to Porto"
    assert set(data["context"]) == SHOW_CONTEXT_KEYS
    messages = data["messages"]
    assert [m["position"] for m in messages] == list(range(len(TRIP["recent_history"])))
    for shown, raw in zip(messages, TRIP["recent_history"], strict=True):
        assert set(shown) == SHOW_MESSAGE_KEYS
        assert shown["role"] == raw["role"]
        assert shown["content"] in (raw["content"], "" if raw["content"] is None else None)
        assert shown["name"] == raw.get("name")
        assert shown["tool_calls"] == raw.get("tool_calls")
        assert shown["tool_call_id"] == raw.get("tool_call_id")
        assert shown["state"] == "active"
        assert isinstance(shown["token_count"], int) and shown["token_count"] > 0
    assert messages[-1]["metadata"].get("important") is True
    ctx = data["context"]
    assert ctx["facts"] == TRIP["facts"]
    assert ctx["summary"] == TRIP["long_term_summary"]
    assert [t["id"] for t in ctx["tasks"]] == ["t1"]
    assert ctx["tool_stats"]["by_tool"] == {"trains": 1}
    assert ctx["token_usage"]["total_input"] == 90
    assert ctx["token_usage"]["total_output"] == 30


def test_show_finds_a_session_by_title_and_by_source_id(
    cli: Callable[..., Any], loaded: dict[str, int]
) -> None:
    by_title = cli("show", "Trip to Porto", "--json")
    by_source = cli("show", "trip-1", "--json")
    assert by_title.code == 0 and by_source.code == 0
    assert by_title.json()["id"] == by_source.json()["id"] == loaded["Trip to Porto"]


def test_show_human_text_has_every_message(cli: Callable[..., Any], loaded: dict[str, int]) -> None:
    result = cli("show", loaded["Trip to Porto"])
    assert result.code == 0, result.err
    for raw in TRIP["recent_history"]:
        if raw["content"]:
            assert raw["content"] in result.out
    assert "trains" in result.out  # the tool call is shown by name


def test_search_json_shape_and_ranking(cli: Callable[..., Any], loaded: dict[str, int]) -> None:
    result = cli("search", "soup", "--json")
    assert result.code == 0, result.err
    hits = result.json()
    assert isinstance(hits, list) and hits
    for hit in hits:
        assert SEARCH_KEYS <= set(hit)
    message_hits = [h for h in hits if h["message_id"] is not None]
    assert {h["session_id"] for h in message_hits} == {loaded["Soup"], loaded["Bread"]}
    assert all("soup" in h["snippet"].lower() for h in message_hits)
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)


def test_search_filters_role_session_limit(cli: Callable[..., Any], loaded: dict[str, int]) -> None:
    by_role = cli("search", "soup", "--role", "user", "--json").json()
    assert len(by_role) == 2, "both questions mention soup"
    assert {h["role"] for h in by_role} == {"user"}
    assert cli("search", "soup", "--role", "assistant", "--json").json() == []

    bread = loaded["Bread"]
    in_session = cli("search", "soup", "--session", bread, "--json").json()
    assert in_session
    assert {h["session_id"] for h in in_session} == {bread}

    every = cli("search", "the", "--json").json()
    assert len(every) > 1
    limited = cli("search", "the", "--limit", "1", "--json").json()
    assert len(limited) == 1
    assert limited[0]["score"] == max(h["score"] for h in every)


def test_search_without_hits(cli: Callable[..., Any], loaded: dict[str, int]) -> None:
    assert cli("search", "xylophonist", "--json").json() == []
    text = cli("search", "xylophonist")
    assert text.code == 0


def test_stats_json_counts(cli: Callable[..., Any], loaded: dict[str, int]) -> None:
    result = cli("stats", "--json")
    assert result.code == 0, result.err
    stats = result.json()
    assert stats["sessions"] == 3
    assert stats["messages"] == 10
    assert sum(stats["messages_by_role"].values()) == 10
    assert stats["messages_by_role"]["tool"] == 1
    assert stats["uncounted_messages"] == 0
    listed = cli("sessions", "--json").json()
    assert stats["active_tokens"] == sum(s["tokens"] for s in listed)
    human = cli("stats")
    assert human.code == 0 and "10" in human.out


def test_stats_names_the_database_without_a_password(
    cli: Callable[..., Any], loaded: dict[str, int], db_target: Path | str, backend: str
) -> None:
    """The file's path, or the server's URL as people write it with its password masked
    (the test server trusts local connections: a password in the URL changes nothing)."""
    target, shown = str(db_target), str(db_target)
    if backend == "postgresql":
        target = target.replace("workbench@", "workbench:s3cret@", 1)
        shown = shown.replace("postgresql+psycopg://workbench@", "postgresql://workbench:***@")
    stats = cli("stats", "--json", db=target)
    assert stats.code == 0, stats.err
    assert stats.json()["database"] == shown
    human = cli("stats", db=target)
    assert f"Database: {shown}" in human.out and "s3cret" not in human.out


@pytest.mark.parametrize(
    ("fmt", "suffix"), [("context-json", ".json"), ("openai-jsonl", ".jsonl"), ("markdown", ".md")]
)
def test_export_each_format_writes_the_file(
    cli: Callable[..., Any], loaded: dict[str, int], tmp_path: Path, fmt: str, suffix: str
) -> None:
    out = tmp_path / f"out{suffix}"
    result = cli("export", loaded["Trip to Porto"], "--format", fmt, "-o", out)
    assert result.code == 0, result.err
    text = out.read_text(encoding="utf-8")
    assert "The Alfa Pendular train leaves at 08:09." in text
    if fmt == "context-json":
        assert json.loads(text)["session_id"] == "trip-1"
    if fmt == "openai-jsonl":
        lines = text.splitlines()
        assert len(lines) == 1
        assert [m["role"] for m in json.loads(lines[0])["messages"]] == [
            m["role"] for m in TRIP["recent_history"]
        ]
    as_json = cli("export", loaded["Trip to Porto"], "--format", fmt, "-o", out, "--json")
    assert as_json.code == 0, as_json.err
    assert isinstance(as_json.json(), dict)


def test_export_several_sessions_to_openai_jsonl(
    cli: Callable[..., Any], loaded: dict[str, int], tmp_path: Path
) -> None:
    out = tmp_path / "two.jsonl"
    result = cli("export", loaded["Soup"], loaded["Bread"], "--format", "openai-jsonl", "-o", out)
    assert result.code == 0, result.err
    lines = out.read_text(encoding="utf-8").splitlines()
    assert [len(json.loads(line)["messages"]) for line in lines] == [2, 3]


@pytest.mark.parametrize("fmt", ["context-json", "openai-jsonl", "markdown"])
def test_export_to_a_dash_prints_the_file_and_nothing_else(
    cli: Callable[..., Any], loaded: dict[str, int], tmp_path: Path, fmt: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = tmp_path / "file"
    assert cli("export", loaded["Soup"], loaded["Bread"], "--format", fmt, "-o", out).code == 0
    monkeypatch.chdir(tmp_path)
    result = cli("export", loaded["Soup"], loaded["Bread"], "--format", fmt, "-o", "-")
    assert result.code == 0, result.err
    assert result.out == out.read_text(encoding="utf-8")
    assert not (tmp_path / "-").exists()
    both = cli("export", loaded["Soup"], "--format", fmt, "-o", "-", "--json")
    assert both.code != 0 and both.out == ""
    assert len(both.err.strip().splitlines()) == 1 and "-o PATH" in both.err


# -- choosing the database ------------------------------------------------------------------


def test_db_option_and_environment_pick_the_database(
    cli: Callable[..., Any], tmp_path: Path, trip_file: Path, monkeypatch: pytest.MonkeyPatch,
    db_target: Path | str,
) -> None:
    env_db = tmp_path / "env.db"
    flag_db = db_target  # the test's database: a file or a team-store URL
    monkeypatch.setenv("WORKBENCH_DB", str(env_db))

    assert cli("import", trip_file, db=flag_db).code == 0  # --db wins over WORKBENCH_DB
    assert [s["title"] for s in cli("sessions", "--json", db=flag_db).json()] == ["Trip to Porto"]
    assert cli("sessions", "--json", db=None).json() == []  # WORKBENCH_DB alone

    assert cli("import", trip_file, db=None).code == 0
    assert env_db.is_file()
    assert len(cli("sessions", "--json", db=None).json()) == 1
    assert len(cli("sessions", "--json", db=flag_db).json()) == 1


@pytest.mark.sqlite_only("the default database is the file in WORKBENCH_HOME")
def test_default_database_lives_in_workbench_home(
    cli: Callable[..., Any], isolated_home: Path, trip_file: Path
) -> None:
    assert cli("import", trip_file, db=None).code == 0
    assert (isolated_home / "workbench.db").is_file()
    assert len(cli("sessions", "--json", db=None).json()) == 1


def test_global_db_option_before_subcommand_is_used(
    cli: Callable[..., Any], tmp_path: Path, trip_file: Path, monkeypatch: pytest.MonkeyPatch,
    db_target: Path | str,
) -> None:
    # ``workbench --db B sessions`` must not silently fall back to WORKBENCH_DB.
    env_db = tmp_path / "env.db"
    flag_db = db_target
    monkeypatch.setenv("WORKBENCH_DB", str(env_db))
    assert cli("import", trip_file, db=flag_db).code == 0
    result = cli("--db", flag_db, "sessions", "--json", db=None)
    assert result.code == 0, result.err
    assert [s["title"] for s in result.json()] == ["Trip to Porto"]


# -- errors: one line on stderr, non-zero exit ----------------------------------------------


def test_unknown_session(cli: Callable[..., Any], loaded: dict[str, int], tmp_path: Path) -> None:
    for args in (("show", "9999", "--json"), ("show", "no such title")):
        result = cli(*args)
        line = result.assert_one_line_error()
        assert args[1] in line
        assert result.out == ""
    out = tmp_path / "never.json"
    export = cli("export", "9999", "--format", "context-json", "-o", out)
    assert "9999" in export.assert_one_line_error()
    assert not out.exists()
    search = cli("search", "soup", "--session", "9999")
    assert "9999" in search.assert_one_line_error()


def test_missing_file(cli: Callable[..., Any], tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "chats.json"
    result = cli("import", missing, "--json")
    line = result.assert_one_line_error()
    assert str(missing) in line
    assert result.out == ""


def test_unknown_format_name_is_one_line_listing_known_formats(
    cli: Callable[..., Any], trip_file: Path, loaded: dict[str, int], tmp_path: Path
) -> None:
    result = cli("import", trip_file, "--format", "nope")
    line = result.assert_one_line_error()
    assert "nope" in line
    assert "context-json" in line and "openai" in line
    export = cli("export", loaded["Bread"], "--format", "nope", "-o", tmp_path / "x")
    line = export.assert_one_line_error()
    assert "markdown" in line and "openai-jsonl" in line


def test_explicit_format_skips_detection(cli: Callable[..., Any], chats_file: Path) -> None:
    result = cli("import", chats_file, "--format", "openai", "--json")
    assert result.code == 0, result.err
    assert [s["title"] for s in result.json()["sessions"]] == ["Soup", "Bread"]


def test_malformed_json_names_file_and_line(cli: Callable[..., Any], tmp_path: Path) -> None:
    bad = tmp_path / "broken.json"
    bad.write_text(
        '{\n  "session_id": "b",\n  "recent_history": [\n'
        '    {"role": "user", "content": "hi"},,\n  ]\n}\n',
        encoding="utf-8",
    )
    line = cli("import", bad).assert_one_line_error()
    assert "broken.json" in line
    assert "line 4" in line
    assert cli("stats", "--json").json()["sessions"] == 0


def test_jsonl_bad_lines_are_skipped_and_leave_nothing(
    cli: Callable[..., Any], tmp_path: Path, write_jsonl: Callable[[Path, Any], Path]
) -> None:
    path = write_jsonl(
        tmp_path / "mixed.jsonl",
        [
            {
                "messages": [
                    {"role": "user", "content": "alpha first question"},
                    {"role": "assistant", "content": "alpha answer"},
                ]
            },
            {
                "messages": [
                    {"role": "user", "content": "zebracorn is lost"},
                    {"role": "wizard", "content": "zebracorn spell"},
                ]
            },
            '{"messages": [{"role": "user", "content": "quokkaword never closed',
            {"messages": [{"role": "user", "content": "gamma third question"}]},
        ],
    )
    result = cli("import", path, "--json")
    assert result.code == 0, result.err
    data = result.json()
    # A bad message costs only itself: line 2's conversation keeps its first message.
    assert [s["messages"] for s in data["sessions"]] == [2, 1, 1]
    skipped = {s["entry"]: s["reason"] for s in data["skipped"]}
    assert set(skipped) == {"line 2 messages[1]", "line 3"}
    assert "wizard" in skipped["line 2 messages[1]"]
    assert "json" in skipped["line 3"].lower()
    assert all(set(s) == {"entry", "reason"} for s in data["skipped"])
    # Nothing of a skipped entry is stored: not the bad message, nor the broken line.
    hits = cli("search", "zebracorn", "--json").json()
    assert [h["snippet"] for h in hits if h["kind"] == "message"] == ["«zebracorn» is lost"]
    assert cli("search", "spell", "--json").json() == []
    assert cli("search", "quokkaword", "--json").json() == []
    stats = cli("stats", "--json").json()
    assert (stats["sessions"], stats["messages"]) == (3, 4)


def test_skipped_entries_are_reported_on_stderr_in_text_mode(
    cli: Callable[..., Any], tmp_path: Path, write_jsonl: Callable[[Path, Any], Path]
) -> None:
    path = write_jsonl(
        tmp_path / "mixed.jsonl",
        [
            {"messages": [{"role": "user", "content": "fine"}]},
            "{not json",
            {"messages": [{"role": "user", "content": "fine too"}]},
        ],
    )
    result = cli("import", path)
    assert result.code == 0
    assert "line 2" in result.err
    assert "2 session(s)" in result.out


def test_a_file_of_unrecognisable_lines_fails(
    cli: Callable[..., Any], tmp_path: Path, write_jsonl: Callable[[Path, Any], Path]
) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", ['{"messages": [', '{"messages": 3}'])
    cli("import", path, "--json").assert_one_line_error()
    assert cli("stats", "--json").json()["sessions"] == 0


def test_a_file_with_only_bad_entries_fails_with_a_reason(
    cli: Callable[..., Any], tmp_path: Path, write_jsonl: Callable[[Path, Any], Path]
) -> None:
    path = write_jsonl(
        tmp_path / "bad.jsonl",
        [{"messages": {"role": "wizard", "content": "a"}}, {"messages": 3}],
    )
    # (A line whose messages are all bad is a conversation still: each bad message costs
    # only itself. These two lines are bad as a whole, so the format is named.)
    result = cli("import", path, "--format", "openai", "--json")
    # The report still says what was skipped; the exit status and stderr say it failed.
    assert [s["entry"] for s in result.json()["skipped"]] == ["line 1", "line 2"]
    result.assert_one_line_error()
    assert cli("stats", "--json").json()["sessions"] == 0
    # As text, the failure is that one line, naming the count and the first reason.
    text = cli("import", path, "--format", "openai")
    line = text.assert_one_line_error()
    assert text.out == ""
    assert "2 entries were skipped" in line and "line 1" in line and "'messages'" in line


def test_directory_with_one_bad_file(
    cli: Callable[..., Any], tmp_path: Path, write_json: Callable[[Path, Any], Path]
) -> None:
    folder = tmp_path / "contexts"
    folder.mkdir()
    write_json(folder / "a_good.json", TRIP)
    (folder / "b_bad.json").write_text('{"session_id": "x", "facts": [}', encoding="utf-8")
    result = cli("import", folder, "--format", "context-json", "--json")
    assert result.code == 0, result.err
    data = result.json()
    assert [s["title"] for s in data["sessions"]] == ["Trip to Porto"]
    assert len(data["skipped"]) == 1
    assert "b_bad.json" in data["skipped"][0]["entry"]
    assert "line 1" in data["skipped"][0]["reason"]


@pytest.mark.parametrize(
    "content", ["just some notes\nabout nothing\n", '{"foo": [1, 2, 3]}', "[1, 2, 3]"]
)
def test_unknown_file_format_lists_known_formats(
    cli: Callable[..., Any], tmp_path: Path, content: str
) -> None:
    path = tmp_path / "mystery.dat"
    path.write_text(content, encoding="utf-8")
    line = cli("import", path).assert_one_line_error()
    assert "mystery.dat" in line
    names = ["context-json", "openai", "chatgpt", "claude", "openwebui", "llm", "sharegpt",
             "markdown"]
    assert f"known formats: {', '.join(names)}." in line
    # Short enough to read (it used to carry every format's description, ~700
    # characters); import --help describes each.
    assert len(line) < len(str(path)) + 160
    described = cli("import", "--help", db=None)
    assert described.code == 0
    assert "ShareGPT-style dataset" in described.out and "simonw/llm logs.db" in described.out


def test_export_into_missing_folder_fails_cleanly(
    cli: Callable[..., Any], loaded: dict[str, int], tmp_path: Path
) -> None:
    target = tmp_path / "no" / "such" / "dir" / "out.json"
    line = cli(
        "export", loaded["Soup"], "--format", "context-json", "-o", target
    ).assert_one_line_error()
    assert "out.json" in line
    assert not target.exists()


@pytest.mark.sqlite_only("the database is a file an export could name")
def test_an_export_onto_the_database_file_is_refused_and_the_database_kept(
    cli: Callable[..., Any], loaded: dict[str, int], db_target: Any, tmp_path: Path
) -> None:
    db_file = Path(db_target)
    before = cli("sessions", "--json").json()
    link = tmp_path / "looks-harmless.md"
    link.symlink_to(db_file)
    for target in (db_file, link, Path(f"{db_file}-wal")):
        line = cli("export", loaded["Soup"], "--format", "markdown",
                   "-o", target).assert_one_line_error()
        assert "would destroy it" in line
    assert db_file.read_bytes().startswith(b"SQLite format 3\x00")
    assert cli("sessions", "--json").json() == before


@pytest.mark.sqlite_only("a file that is not a database")
def test_corrupt_database_file_is_refused_and_untouched(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    db = tmp_path / "corrupt.db"
    junk = bytes(range(256)) * 40
    db.write_bytes(junk)
    for args in (("sessions", "--json"), ("stats",), ("import", tmp_path / "nothing.json")):
        result = cli(*args, db=db)
        line = result.assert_one_line_error()
        assert "corrupt.db" in line
        assert db.read_bytes() == junk


@pytest.mark.sqlite_only("a file with SQLite's header and garbage")
def test_database_with_sqlite_header_but_garbage_is_refused(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    db = tmp_path / "garbage.db"
    data = b"SQLite format 3\x00" + bytes((i * 7) % 256 for i in range(8192))
    db.write_bytes(data)
    line = cli("sessions", db=db).assert_one_line_error()
    assert "garbage.db" in line
    assert db.read_bytes() == data


def _damaged_copy_of_full_database(path: Path) -> bytes:
    """A real workbench database whose middle pages are overwritten; returns its bytes."""
    ws = Workspace.open(path)
    try:
        words = "refund flight luggage window aisle seat meal upgrade gate delay".split()
        conversations = [
            Conversation(
                title=f"conversation {i}",
                messages=[
                    Message(
                        role=("user", "assistant")[j % 2],
                        content=" ".join(words[(i + j + k) % 10] for k in range(60)),
                    )
                    for j in range(6)
                ],
            )
            for i in range(150)
        ]
        report = import_conversations(ws.repo, conversations)
        assert len(report.sessions) == 150
    finally:
        ws.close()
    assert not path.with_name(path.name + "-wal").exists()
    data = bytearray(path.read_bytes())
    start, end = len(data) * 2 // 5, len(data) * 4 // 5
    data[start:end] = bytes([0xA5]) * (end - start)
    path.write_bytes(bytes(data))
    return bytes(data)


@pytest.mark.sqlite_only("a SQLite file damaged inside")
def test_database_damaged_inside_gives_one_line(cli: Callable[..., Any], tmp_path: Path) -> None:
    db = tmp_path / "damaged.db"
    data = _damaged_copy_of_full_database(db)
    failures = 0
    for args in (("stats", "--json"), ("search", "refund", "--json"), ("show", "75", "--json")):
        result = cli(*args, db=db)
        # A command may get by on the pages that are intact; one that cannot must say so
        # in one line instead of a traceback.
        if result.code != 0:
            failures += 1
            result.assert_one_line_error()
        assert db.read_bytes() == data
    assert failures, "the damage was not noticed by any command"


@pytest.mark.sqlite_only("a file path that is a folder")
def test_database_path_that_is_a_folder(cli: Callable[..., Any], tmp_path: Path) -> None:
    folder = tmp_path / "a_folder"
    folder.mkdir()
    assert "a_folder" in cli("sessions", db=folder).assert_one_line_error()
    assert list(folder.iterdir()) == []


@pytest.mark.sqlite_only("a file's bytes stay as they were")
def test_database_from_a_newer_version_is_refused(
    cli: Callable[..., Any], tmp_path: Path, trip_file: Path
) -> None:
    db = tmp_path / "future.db"
    assert cli("import", trip_file, db=db).code == 0
    conn = sqlite3.connect(db)
    try:
        with conn:
            conn.execute(
                "INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)",
                ("9999_from_the_future", "2099-01-01T00:00:00Z"),
            )
    finally:
        conn.close()
    data = db.read_bytes()
    before = sorted(p.name for p in tmp_path.iterdir())
    for args in (("sessions", "--json"), ("import", trip_file)):
        line = cli(*args, db=db).assert_one_line_error()
        assert "newer" in line.lower()
        assert "future.db" in line
    assert db.read_bytes() == data
    # No backup or migration was attempted on a file this version does not understand.
    assert sorted(p.name for p in tmp_path.iterdir()) == before


# -- a real child process -------------------------------------------------------------------


def test_subprocess_import_then_list_with_workbench_db(
    run_workbench: Callable[..., Any], db_target: Path | str, chats_file: Path
) -> None:
    imported = run_workbench("import", chats_file, "--json")
    assert imported.code == 0, imported.err
    assert [s["title"] for s in imported.json()["sessions"]] == ["Soup", "Bread"]
    with Workspace.open(db_target) as ws:
        assert ws.count_sessions() == 2
    hits = run_workbench("search", "yeast", "--json")
    assert hits.code == 0, hits.err
    assert [h["role"] for h in hits.json()] == ["assistant"]


def test_subprocess_error_is_one_line_and_nonzero(run_workbench: Callable[..., Any]) -> None:
    result = run_workbench("show", "4242", "--json")
    assert "4242" in result.assert_one_line_error()
    assert result.out == ""


@pytest.mark.sqlite_only("one child process is enough to check the output's encoding")
def test_an_output_that_cannot_encode_a_title_prints_question_marks_not_a_traceback(
    db_target: Path | str, tmp_path: Path
) -> None:
    """A terminal whose encoding cannot show every character (here ASCII): text shows
    ``?`` for them, JSON escapes them, an export to standard output stays UTF-8."""
    with Workspace.open(db_target) as ws:
        ws.import_path(_write(tmp_path / "ru.jsonl", json.dumps(
            {"title": "Напиши функцию…", "messages": [{"role": "user", "content": "Привет"}]}
        ) + "\n"))
    env = dict(os.environ, PYTHONIOENCODING="ascii", WORKBENCH_DB=str(db_target),
               PYTHONPATH=str(Path(__file__).resolve().parents[2]))

    def run(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([sys.executable, "-m", "workbench", *args], env=env,
                              capture_output=True, timeout=120, check=False)

    for args in (["sessions"], ["show", "1"], ["search", "Привет"]):
        done = run(*args)
        assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
        assert b"??????" in done.stdout
    listed = run("sessions", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)[0]["title"] == "Напиши функцию…"
    exported = run("export", "1", "--format", "markdown", "-o", "-")
    assert exported.returncode == 0, exported.stderr
    assert "# Напиши функцию…" in exported.stdout.decode("utf-8")


@pytest.mark.sqlite_only("one child process is enough for the engine's warnings")
def test_an_engine_warning_is_one_workbench_line_on_stderr(
    tmp_path: Path, chats_file: Path
) -> None:
    """A warning the engine logs (here: the token cache is damaged and rebuilt) reaches
    a person as one ``workbench:`` line, and the command still succeeds."""
    home = tmp_path / "home"
    cache = home / "cache" / "encodings"
    cache.mkdir(parents=True)
    (cache / "o200k_base.tiktoken").write_bytes(b"not a vocabulary\n" * 10)
    env = dict(os.environ, WORKBENCH_HOME=str(home),
               PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    env.pop("WORKBENCH_DB", None)
    done = subprocess.run([sys.executable, "-m", "workbench", "import", str(chats_file)],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines and all(line.startswith("workbench: ") for line in lines), done.stderr
    assert any("token encoding" in line and "rebuilding" in line for line in lines)


def test_a_bug_is_one_line_too_and_its_traceback_on_request(
    cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from workbench.cli import library

    def broken(_args: Any) -> int:
        raise KeyError("a bug")

    monkeypatch.setattr(library, "cmd_stats", broken)
    line = cli("stats").assert_one_line_error()
    assert "internal error (KeyError" in line and "WORKBENCH_DEBUG=1" in line
    monkeypatch.setenv("WORKBENCH_DEBUG", "1")
    with pytest.raises(KeyError):
        cli("stats")


@pytest.mark.skipif(not Path("/dev/stdin").exists(), reason="no /dev/stdin here")
def test_an_import_from_a_pipe_reads_it_whole(
    db_target: Path | str, chats_file: Path
) -> None:
    """``curl … | workbench import /dev/stdin`` (or ``<(…)``): a pipe cannot be read
    twice, as detection and the importer do; it was 'empty' (a pipe has no size)."""
    env = dict(os.environ, WORKBENCH_DB=str(db_target),
               PYTHONPATH=str(Path(__file__).resolve().parents[2]))

    def run(given: bytes, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "workbench", "import", "/dev/stdin",
                               *args], input=given.decode(), env=env, capture_output=True,
                              text=True, timeout=120, check=False)

    done = run(chats_file.read_bytes(), "--json")
    assert done.returncode == 0, done.stderr
    assert [s["title"] for s in json.loads(done.stdout)["sessions"]] == ["Soup", "Bread"]
    again = subprocess.run([sys.executable, "-m", "workbench", "import", "-", "--json"],
                           input=chats_file.read_text(encoding="utf-8"), env=env,
                           capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["counts"]["unchanged"] == 2
    nothing = run(b"")
    assert nothing.returncode == 1
    assert nothing.stderr.splitlines() == [
        "workbench: /dev/stdin gave nothing: there is nothing to import."]
    unknown = run(b"hello\n")
    assert unknown.returncode == 1 and "Cannot tell the format of the file /dev/stdin;" in (
        unknown.stderr) and "workbench-import-" not in unknown.stderr


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_subprocess_db_option_overrides_environment(
    run_workbench: Callable[..., Any], tmp_path: Path, trip_file: Path, db_target: Path | str
) -> None:
    env_db = tmp_path / "env.db"
    flag_db = db_target
    assert run_workbench("import", trip_file, "--db", flag_db, db=env_db).code == 0
    assert not env_db.exists()
    with Workspace.open(flag_db) as ws:
        assert [s.title for s in ws.list_sessions()] == ["Trip to Porto"]


def test_console_script_runs(
    run_workbench: Callable[..., Any], db_target: Path | str, trip_file: Path
) -> None:
    script = Path(sys.executable).with_name("workbench")
    if not script.is_file():
        pytest.skip("the workbench console script is not installed beside this Python")
    result = run_workbench("import", trip_file, "--json", program=[str(script)])
    assert result.code == 0, result.err
    assert [s["title"] for s in result.json()["sessions"]] == ["Trip to Porto"]
    with Workspace.open(db_target) as ws:
        assert ws.count_sessions() == 1


@pytest.mark.sqlite_only("a URL that is not a file, whatever the test's own backend")
@pytest.mark.parametrize("how", ["--db", "WORKBENCH_DB"])
@pytest.mark.parametrize("url", ["postgresql://wb:s3cret@db.invalid/team",
                                 "mysql://wb:s3cret@db.invalid/team",
                                 "postgresql:wb:s3cret@db.invalid/team",
                                 "postgres:/wb:s3cret@db.invalid/team"])
def test_a_database_url_never_becomes_a_file(
    cli: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str,
    url: str,
) -> None:
    """A server that cannot be reached (or a database the workbench does not know) is
    one sentence naming the URL without its password, and no file appears."""
    monkeypatch.chdir(tmp_path)
    if how == "--db":
        result = cli("sessions", db=url)
    else:
        monkeypatch.setenv("WORKBENCH_DB", url)
        result = cli("sessions", db=None)
    line = result.assert_one_line_error()
    assert "s3cret" not in line
    if url.startswith("mysql"):
        assert "database URL" in line and "PostgreSQL" in line
    elif "://" not in url:  # a PostgreSQL URL mistyped
        assert "not a URL" in line and "postgresql://user@host:port/database" in line
    else:
        assert "postgresql://wb:***@db.invalid/team" in line and "db.invalid" in line
    assert not any(p.name.startswith(("postgres", "mysql")) for p in tmp_path.rglob("*"))


def test_subprocess_import_ends_quickly_with_its_output_and_database_whole(
    run_workbench: Callable[..., Any], db_target: Path | str, chats_file: Path,
    tmp_path: Path,
) -> None:
    # `workbench import` ends the process without taking the interpreter apart (cli.run):
    # what it printed, on both streams, and what it stored are all there.
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"messages": [{"role": "user", "content": "hi"}]}\nnot json\n')
    imported = run_workbench("import", chats_file)
    assert imported.code == 0, imported.err
    assert imported.out.startswith("Imported 2 session(s)")
    if isinstance(db_target, Path):  # closed before the end: no write-ahead log left
        assert not db_target.with_name(db_target.name + "-wal").exists()
    with Workspace.open(db_target) as ws:
        assert ws.count_sessions() == 2
        assert ws.repo.stats()["uncounted_messages"] == 0
    missing = run_workbench("import", tmp_path / "missing.json")
    assert missing.code != 0 and "missing.json" in missing.assert_one_line_error()
    partial = run_workbench("import", broken)
    assert partial.code == 0, partial.err
    assert "Skipped" in partial.err and partial.out.startswith("Imported 1 session(s)")


class _Exited(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


@pytest.mark.parametrize(
    ("command", "busy", "quick"),
    [("import", False, True), ("import", True, False), ("sessions", False, False)],
)
def test_only_a_finished_import_with_no_other_thread_left_ends_the_process_at_once(
    command: str, busy: bool, quick: bool, monkeypatch: pytest.MonkeyPatch,
    db_target: Path | str, chats_file: Path,
) -> None:
    import os
    import threading

    import workbench.cli as cli_module

    def exit_now(code: int) -> None:
        raise _Exited(code)

    monkeypatch.setattr(os, "_exit", exit_now)
    argv = {"import": ["import", str(chats_file)], "sessions": ["sessions"]}[command]
    monkeypatch.setattr(sys, "argv", ["workbench", *argv, "--db", str(db_target)])
    release = threading.Event()
    worker = threading.Thread(target=release.wait)  # not a daemon: a normal exit waits
    if busy:
        worker.start()
    try:
        with pytest.raises((_Exited, SystemExit)) as ended:
            cli_module.run()
    finally:
        release.set()
        if busy:
            worker.join()
    assert isinstance(ended.value, _Exited) is quick
    assert ended.value.code == 0
