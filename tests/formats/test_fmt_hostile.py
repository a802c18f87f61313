"""Hostile and broken input, for every importer: one bad entry costs only itself.

Focused tests for each kind of damage (lone surrogates, deep nesting, files cut short,
bytes that are not UTF-8, a damaged llm database), the CLI's report of them, and a
hypothesis fuzz test that mixes them at random over every format.
"""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.cli import main as cli_main
from workbench.core.conversation import Conversation, ImportNote, SkippedEntry
from workbench.engine.workspace import ImportReport, Workspace
from workbench.errors import FormatError
from workbench.formats import read_conversations
from workbench.formats._reading import CHUNK_BYTES, MAX_NESTING, JsonStream

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hostile_payloads import (  # noqa: E402
    LAYOUT_BY_NAME,
    LAYOUTS,
    Entry,
    Layout,
    render,
    write,
)

LAYOUT_NAMES = [layout.name for layout in LAYOUTS]


def entries(count: int, **changes: dict[str, Any]) -> list[Entry]:
    """``count`` plain entries; ``changes`` maps ``"e<index>"`` to Entry fields."""
    made = [Entry(i, f"T{i}-title", f"U{i}: hello {i}") for i in range(count)]
    for key, fields in changes.items():
        entry = made[int(key[1:])]
        for name, value in fields.items():
            setattr(entry, name, value)
    return made


def import_file(path: Path, fmt: str, db: Path) -> tuple[ImportReport, list[tuple[str, list[str]]]]:
    with Workspace.open(db) as ws:
        report = ws.import_path(path, format=fmt)
        stored = [
            (info.title, [m.content for m in ws.repo.list_messages(info.id)])
            for info in ws.list_sessions(include_archived=True)
        ]
    return report, stored


def user_texts(stored: list[tuple[str, list[str]]]) -> set[str]:
    return {text for _title, texts in stored for text in texts if text.startswith("U")}


def names(label: str, entry: str) -> bool:
    """Whether a report's ``entry`` is the entry at position ``label`` (or inside it)."""
    return entry == label or entry.startswith(label + " ")


# -- 3. lone surrogates ---------------------------------------------------------------------


@pytest.mark.parametrize("name", LAYOUT_NAMES)
def test_a_lone_surrogate_is_replaced_and_noted_and_every_entry_imported(
    name: str, tmp_path: Path
) -> None:
    layout = LAYOUT_BY_NAME[name]
    made = entries(4, e1={"change": "surrogate", "where": "text"},
                   e2={"change": "surrogate", "where": "title"})
    path = write(layout, render(layout, made).data, tmp_path)

    report, stored = import_file(path, layout.format, tmp_path / "wb.db")

    assert not report.skipped
    assert len(stored) == 4
    titles = {title for title, _ in stored}
    assert layout.title_shown("T2-title\ufffd") in titles
    assert "U1: hello 1\ufffd" in user_texts(stored)
    notes = {note.entry: note.note for note in report.notes}
    assert set(notes) == {layout.position(1), layout.position(2)}
    assert "\\ud800" in notes[layout.position(1)] and "U+FFFD" in notes[layout.position(1)]


def test_bytes_that_are_not_utf8_are_replaced_in_their_entry_only(tmp_path: Path) -> None:
    layout = LAYOUT_BY_NAME["claude"]
    data = render(layout, entries(3)).data.replace(b"hello 1", b"hello \xff\xfe 1")
    path = write(layout, data, tmp_path)

    report, stored = import_file(path, "claude", tmp_path / "wb.db")

    assert len(stored) == 3 and not report.skipped
    assert "U1: hello \ufffd\ufffd 1" in user_texts(stored)
    (note,) = report.notes
    assert note.entry == "item 1" and "byte 0xFF" in note.note


# -- 4. deep nesting ------------------------------------------------------------------------


@pytest.mark.parametrize("name", LAYOUT_NAMES)
@pytest.mark.parametrize("depth", [MAX_NESTING + 5, 1500, 100_000])
def test_an_entry_nested_too_deep_is_skipped_and_named_and_the_rest_imported(
    name: str, depth: int, tmp_path: Path
) -> None:
    layout = LAYOUT_BY_NAME[name]
    made = entries(3, e1={"change": "deep", "where": "text", "depth": depth})
    path = write(layout, render(layout, made).data, tmp_path)

    report, stored = import_file(path, layout.format, tmp_path / "wb.db")

    assert user_texts(stored) == {"U0: hello 0", "U2: hello 2"}
    (skip,) = report.skipped
    assert skip.entry == layout.position(1)
    assert f"more than {MAX_NESTING} levels deep" in skip.reason


def test_nesting_inside_a_string_is_only_text(tmp_path: Path) -> None:
    layout = LAYOUT_BY_NAME["openai"]
    made = entries(2, e0={"text": "U0: " + "[" * 5000 + "{" * 5000})
    path = write(layout, render(layout, made).data, tmp_path)

    report, stored = import_file(path, "openai", tmp_path / "wb.db")

    assert not report.skipped and len(stored) == 2


# -- 5. files cut short ---------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in LAYOUT_NAMES if not LAYOUT_BY_NAME[n].lines])
def test_an_array_cut_short_keeps_every_complete_entry_and_names_the_break(
    name: str, tmp_path: Path
) -> None:
    layout = LAYOUT_BY_NAME[name]
    written = render(layout, entries(18))
    cut = written.ends[16] + (written.ends[17] - written.ends[16]) // 2  # inside entry 17
    path = write(layout, written.data[:cut], tmp_path)

    report, stored = import_file(path, layout.format, tmp_path / "wb.db")

    assert user_texts(stored) == {f"U{i}: hello {i}" for i in range(17)}
    (skip,) = report.skipped
    line = written.data[:cut].count(b"\n") + 1
    assert skip.entry == f"line {line}"
    assert "is not valid JSON" in skip.reason and "column" in skip.reason
    assert "item 17 on could not be read" in skip.reason


def test_a_cut_inside_the_first_entry_reads_nothing_and_says_where(tmp_path: Path) -> None:
    layout = LAYOUT_BY_NAME["chatgpt"]
    written = render(layout, entries(2))
    path = write(layout, written.data[: written.ends[0] - 10], tmp_path)

    with pytest.raises(FormatError, match=r"line 2, column \d+"):
        list(read_conversations(path, "chatgpt"))


def test_unterminated_string_message_says_at_once(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    path.write_text('{"messages": [{"role": "user", "content": "never ends', encoding="utf-8")

    with pytest.raises(FormatError) as info:
        list(read_conversations(path, "openai"))

    assert "Unterminated string starting at line 1" in str(info.value)
    assert " at at " not in str(info.value)


def test_a_large_array_is_read_in_chunks_with_lines_counted_across_them(tmp_path: Path) -> None:
    layout = LAYOUT_BY_NAME["sharegpt"]
    made = [Entry(i, f"T{i}-title", f"U{i}: " + "x" * 2000) for i in range(1200)]
    written = render(layout, made)
    assert len(written.data) > 2 * CHUNK_BYTES
    cut = written.ends[1100] + 7
    path = write(layout, written.data[:cut], tmp_path)

    items = list(read_conversations(path, "sharegpt"))

    assert sum(isinstance(i, Conversation) for i in items) == 1101
    (skip,) = [i for i in items if isinstance(i, SkippedEntry)]
    line = written.data[:cut].count(b"\n") + 1
    assert skip.entry == f"line {line}"


def test_one_element_larger_than_a_chunk_is_read_whole(tmp_path: Path) -> None:
    big = "U0: " + "y" * (3 * CHUNK_BYTES)
    layout = LAYOUT_BY_NAME["openai"]
    path = write(layout, render(layout, [Entry(0, "T0-big", big), *entries(2)[1:]]).data,
                 tmp_path)
    with path.open("rb") as handle:
        values = list(JsonStream(handle, str(path), path).elements())
    assert [v["messages"][0]["content"] for v in values] == [big, "U1: hello 1"]


# -- llm logs.db ----------------------------------------------------------------------------


def _logs_db(path: Path, conversations: int) -> None:
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE conversations (id TEXT PRIMARY KEY, name TEXT, model TEXT);"
        "CREATE TABLE responses (id TEXT PRIMARY KEY, model TEXT, prompt TEXT, system TEXT,"
        " prompt_json TEXT, options_json TEXT, response TEXT, response_json TEXT,"
        " conversation_id TEXT, duration_ms INTEGER, datetime_utc TEXT,"
        " input_tokens INTEGER, output_tokens INTEGER);"
    )
    for i in range(conversations):
        conn.execute("INSERT INTO conversations VALUES (?, ?, 'm')", (f"c{i}", f"conv {i}"))
        conn.execute(
            "INSERT INTO responses (id, model, prompt, response, conversation_id, datetime_utc,"
            " options_json) VALUES (?, 'm', ?, ?, ?, ?, '{}')",
            (f"r{i}", f"hello {i} " * 40, f"reply {i}", f"c{i}", f"2024-05-01T10:00:{i:02d}"),
        )
    conn.commit()
    conn.close()


def test_llm_text_that_is_not_utf8_is_replaced_and_noted_per_conversation(
    tmp_path: Path,
) -> None:
    db = tmp_path / "logs.db"
    _logs_db(db, 4)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE conversations SET name = CAST(X'626164ED' || X'A080' AS TEXT) "
                 "WHERE id = 'c1'")
    conn.execute("UPDATE responses SET prompt = CAST(X'6869FF' AS TEXT) WHERE id = 'r2'")
    conn.execute("UPDATE responses SET options_json = ? WHERE id = 'r3'",
                 ('{"a": [' * 2000 + "1" + "]}" * 2000,))
    conn.commit()
    conn.close()

    report, stored = import_file(db, "llm", tmp_path / "wb.db")

    assert len(stored) == 4 and not report.skipped
    assert "bad\ufffd\ufffd\ufffd" in {title for title, _ in stored}
    assert any("hi\ufffd" in texts for _, texts in stored)
    notes = {note.entry: note.note for note in report.notes}
    assert set(notes) == {"conversation c1", "conversation c2"}
    assert "byte 0xED" in notes["conversation c1"] and "title" in notes["conversation c1"]


@pytest.mark.parametrize("keep", [100, 4096, 0.5])
def test_a_cut_short_llm_database_is_called_damaged(keep: float, tmp_path: Path) -> None:
    db = tmp_path / "logs.db"
    _logs_db(db, 300)
    data = db.read_bytes()
    cut = tmp_path / "cut.db"
    cut.write_bytes(data[: int(len(data) * keep) if isinstance(keep, float) else keep])
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(["import", str(cut), "--db", str(tmp_path / "wb.db"), "--json"])
    message = err.getvalue()
    assert "damaged or cut short" in message, message
    assert "Cannot tell the format" not in message and "Traceback" not in message
    if code == 0:  # the first pages were whole: what they hold was imported
        assert json.loads(out.getvalue())["sessions"]
    else:
        assert code == 1


# -- the CLI's report -----------------------------------------------------------------------


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(list(args))
    return code, out.getvalue(), err.getvalue()


def test_cli_import_json_reports_notes_skips_and_the_break(tmp_path: Path) -> None:
    layout = LAYOUT_BY_NAME["chatgpt"]
    made = entries(5, e1={"change": "surrogate", "where": "title"},
                   e2={"change": "deep", "where": "text"})
    written = render(layout, made)
    path = write(layout, written.data[: written.ends[3] + 3], tmp_path)

    code, out, err = run_cli("import", str(path), "--db", str(tmp_path / "wb.db"), "--json")

    assert code == 0, err
    data = json.loads(out)
    assert [s["title"] for s in data["sessions"]] == ["T0-title", "T1-title\ufffd", "T3-title"]
    assert [n["entry"] for n in data["notes"]] == ["item 1"]
    assert [s["entry"] for s in data["skipped"]] == ["item 2", "line 6"]
    assert "Traceback" not in err


def test_cli_import_text_lists_changes_and_skips_on_stderr(tmp_path: Path) -> None:
    layout = LAYOUT_BY_NAME["openai-jsonl"]
    made = entries(3, e0={"change": "surrogate"}, e2={"change": "deep"})
    path = write(layout, render(layout, made).data, tmp_path)

    code, out, err = run_cli("import", str(path), "--db", str(tmp_path / "wb.db"))

    assert code == 0
    assert "Imported 2 session(s)" in out
    assert "Changed line 1: Replaced 1 character" in err
    assert "Skipped line 3: The line nests arrays or objects more than" in err


def test_cli_import_of_only_bad_entries_fails_with_one_line(tmp_path: Path) -> None:
    layout = LAYOUT_BY_NAME["sharegpt"]
    made = entries(2, e0={"change": "deep"}, e1={"change": "deep", "where": "entry"})
    path = write(layout, render(layout, made).data, tmp_path)

    code, out, err = run_cli("import", str(path), "--db", str(tmp_path / "wb.db"), "--json")

    assert code == 1
    assert json.loads(out)["sessions"] == []
    assert err.count("\n") == 1 and "nothing was imported" in err


# -- the fuzz test --------------------------------------------------------------------------

TITLE_TEXT = st.text(st.characters(whitelist_categories=("L", "N", "P", "S")), max_size=12)
# Any text at all, control characters and NULs included (no surrogates: those are a change).
MESSAGE_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
WRONG = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False), st.just([]), st.just({}),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(),
                                                          max_size=2),
)


@st.composite
def fuzz_cases(draw: st.DrawFn) -> tuple[Layout, list[Entry], float | None]:
    layout = draw(st.sampled_from(LAYOUTS))
    count = draw(st.integers(1, 5))
    made: list[Entry] = []
    for i in range(count):
        entry = Entry(i, f"T{i}-{draw(TITLE_TEXT)}", f"U{i}:{draw(MESSAGE_TEXT)}")
        change = draw(st.sampled_from([None, None, "surrogate", "deep", "type"]))
        if change is not None:
            entry.change = change
            entry.where = draw(st.sampled_from(["title", "text", "entry"]))
            entry.depth = draw(st.sampled_from([MAX_NESTING + 1, 400, 1500, 5000]))
            entry.wrong = draw(WRONG)
        made.append(entry)
    cut = draw(st.none() | st.floats(0.0, 1.0))
    return layout, made, cut


def _check(layout: Layout, made: list[Entry], cut: float | None, folder: Path) -> None:
    written = render(layout, made)
    size = len(written.data) if cut is None else int(len(written.data) * cut)
    path = write(layout, written.data[:size], folder)
    complete = [e for e, end in zip(made, written.ends, strict=True) if end <= size]
    good = [e for e in complete if e.change is None or (
        e.change == "surrogate" and e.where != "entry")]
    try:
        report, stored = import_file(path, layout.format, folder / "wb.db")
    except FormatError:
        # The file as a whole cannot be read: only when no good entry in it is complete
        # (the break comes before the first, or its one entry is bad).
        assert not good, "a readable entry was lost with the whole file"
        return
    # A JSON Lines file of one line is read as one JSON document: its entry is "item 0".
    single = layout.lines and written.data[:size].strip().count(b"\n") == 0

    def position(index: int) -> list[str]:
        return [layout.position(index)] + (["item 0"] if single else [])

    items = [i for i in report.sessions]
    # Which entry each stored session came from, by the markers of its title and text.
    def owner(title: str, texts: list[str]) -> int | None:
        for e in made:
            if title == layout.title_shown(e.title) or title.startswith(
                layout.title_shown(f"T{e.index}-")
            ) or any(t.startswith(f"U{e.index}:") for t in texts):
                return e.index
            if e.where == "entry" and not texts and title.endswith(f"#{e.index}"):
                return e.index  # an object with no fields: an empty session, named by place
        return None

    owners = [owner(title, texts) for title, texts in stored]
    assert None not in owners, f"a stored session belongs to no entry: {stored}"
    assert len(owners) == len(set(owners)), "an entry was stored twice"
    assert len(items) == len(stored)
    done = set(owners)
    labels = [s.entry for s in report.skipped]
    for e in made:
        label = layout.position(e.index)
        options = position(e.index)
        if e not in complete:
            assert e.index not in done, f"{label} was cut short but stored"
            continue
        if e.change is None or (e.change == "surrogate" and e.where != "entry"):
            # A valid entry (or one with a replaced character) is stored exactly.
            assert e.index in done, f"{label} was lost: {report.skipped}"
            (title, texts) = stored[owners.index(e.index)]
            want_title, want_text = e.title, e.text
            if e.change == "surrogate":
                if e.where == "title":
                    want_title += "\ufffd"
                else:
                    want_text += "\ufffd"
                assert any(names(o, n.entry) for o in options for n in report.notes), (
                    report.notes
                )
            assert title == layout.title_shown(want_title)
            assert want_text in texts
        elif single and e.where == "entry" and e.change == "type" and e.wrong == []:
            continue  # a file holding only "[]" is an empty export: nothing to report
        elif e.change == "deep" and e.where != "title" or (
                e.where == "entry" and not isinstance(e.wrong, dict)):
            assert e.index not in done, f"{label} should have been skipped"
            assert any(names(o, entry) for o in options for entry in labels), labels
        else:
            # A wrong type or a deep value in one field: the entry is stored (the field
            # read as absent) or skipped, and then said so. An object of unknown keys in
            # place of an entry is a conversation whose data is kept (as metadata), or
            # a skipped entry.
            assert e.index in done or any(
                names(o, entry) for o in options for entry in labels
            ), labels
    assert all(isinstance(n, ImportNote) for n in report.notes)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fuzz_cases())
def test_fuzz_every_importer_keeps_every_complete_entry_and_never_raises(
    case: tuple[Layout, list[Entry], float | None],
) -> None:
    layout, made, cut = case
    with tempfile.TemporaryDirectory() as folder:
        _check(layout, made, cut, Path(folder))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fuzz_cases())
def test_fuzz_the_cli_exit_status_matches_its_report(
    case: tuple[Layout, list[Entry], float | None],
) -> None:
    layout, made, cut = case
    written = render(layout, made)
    size = len(written.data) if cut is None else int(len(written.data) * cut)
    with tempfile.TemporaryDirectory() as folder:
        path = write(layout, written.data[:size], Path(folder))
        db = Path(folder) / "wb.db"
        code, out, err = run_cli("import", str(path), "--db", str(db), "--format",
                                 layout.format, "--json")
        assert "Traceback" not in err
        if not out:
            # Nothing could be read at all: one line on stderr, exit status 1.
            assert code == 1 and err.count("\n") == 1 and err.startswith("workbench: ")
            return
        data = json.loads(out)
        with Workspace.open(db) as ws:
            assert ws.count_sessions(include_archived=True) == len(data["sessions"])
        assert code == (1 if not data["sessions"] and data["skipped"] else 0)
