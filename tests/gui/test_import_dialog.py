"""File → Import: progress while the writer imports, and a cancel that keeps whole ones."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from tests.gui.journey import click
from workbench.engine.workspace import Workspace
from workbench.gui.dialogs.import_progress import report_text
from workbench.gui.dialogs.job_progress import JobProgressDialog
from workbench.gui.main_window import MainWindow
from workbench.gui.models.sessions import SessionRole

MESSAGES_EACH = 6


def write_context_files(folder: Path, count: int) -> Path:
    """``count`` context-file sessions of MESSAGES_EACH messages each."""
    folder.mkdir(parents=True, exist_ok=True)
    for number in range(count):
        history = [
            {"timestamp": f"2025-01-01T10:{i:02d}:00Z",
             "role": "user" if i % 2 == 0 else "assistant",
             "content": f"conversation {number}, message {i}"}
            for i in range(MESSAGES_EACH)
        ]
        (folder / f"session-{number:03d}.json").write_text(json.dumps({
            "session_id": f"conv-{number}", "title": f"Conversation {number}",
            "recent_history": history,
        }), encoding="utf-8")
    return folder


def test_import_a_folder_shows_progress_then_a_report(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow], tmp_path: Path,
) -> None:
    folder = write_context_files(tmp_path / "exports", 12)
    window = open_window(workspace)
    dialog = window.start_import(folder)
    assert dialog.running and dialog.isVisible()
    with qtbot.waitSignal(dialog.import_finished, timeout=20_000) as finished:
        pass
    report = finished.args[0]
    assert len(report.sessions) == 12 and not report.cancelled
    assert dialog.conversations_read == 12
    assert "Imported 12 sessions." in dialog.label.text()
    window.ctx.workers.wait_idle()
    model = window.browser.model
    qtbot.waitUntil(lambda: model.rowCount() == 12)
    titles = {model.index(r, 0).data(SessionRole).title for r in range(model.rowCount())}
    assert titles == {f"Conversation {n}" for n in range(12)}
    # The first imported session is shown.
    assert window.ctx.current_session_id in {info.id for info, _new in report.sessions}
    dialog.reject()
    assert not dialog.isVisible()


def test_cancel_leaves_only_whole_conversations(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = write_context_files(tmp_path / "many", 40)
    window = open_window(workspace)
    # The import waits after its first conversation until the person has pressed
    # Cancel, so the cancel lands mid-import however fast or slow the machine is.
    first_read, pressed = threading.Event(), threading.Event()
    original = JobProgressDialog._progress

    def progress(self: JobProgressDialog, done: int, total: int | None) -> bool:
        if done >= 1 and not first_read.is_set():
            first_read.set()
            pressed.wait(30)
        return original(self, done, total)

    monkeypatch.setattr(JobProgressDialog, "_progress", progress)
    dialog = window.start_import(folder)
    qtbot.waitUntil(first_read.is_set, timeout=20_000)
    click(qtbot, dialog, "Cancel")
    pressed.set()
    assert dialog.cancel_requested
    with qtbot.waitSignal(dialog.import_finished, timeout=20_000) as finished:
        pass
    report = finished.args[0]
    assert report.cancelled
    stored = workspace.list_sessions()
    assert 1 <= len(stored) < 40
    # Every conversation that was stored is whole; none is half there.
    assert all(info.message_count == MESSAGES_EACH for info in stored)
    assert len(stored) == len(report.sessions)
    assert "cancelled" in dialog.label.text()


def test_a_bad_file_is_reported_and_the_rest_imported(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow], tmp_path: Path,
) -> None:
    folder = write_context_files(tmp_path / "mixed", 3)
    # (A bad history entry costs only itself now: this file's session is bad as a whole.)
    (folder / "broken.json").write_text('{"session_id": "x", "recent_history": 5}',
                                        encoding="utf-8")
    window = open_window(workspace)
    dialog = window.start_import(folder, format="context-json")
    with qtbot.waitSignal(dialog.import_finished, timeout=20_000) as finished:
        pass
    report = finished.args[0]
    assert len([s for s, new in report.sessions if new]) == 3
    assert [s.entry for s in report.skipped] == ["file broken.json"]
    text = report_text(report)
    assert "Imported 3 sessions." in text and "skipped" in text


def test_a_file_that_cannot_be_read_fails_with_a_sentence(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow], tmp_path: Path,
) -> None:
    bogus = tmp_path / "notes.txt"
    bogus.write_text("just some notes", encoding="utf-8")
    window = open_window(workspace)
    dialog = window.start_import(bogus)
    with qtbot.waitSignal(dialog.import_failed, timeout=20_000):
        pass
    assert not dialog.running
    assert dialog.label.text().endswith(".")
    assert "notes.txt" in dialog.label.text()


def test_hostile_files_are_reported_in_the_dialog_and_the_rest_imported(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow], tmp_path: Path,
) -> None:
    folder = write_context_files(tmp_path / "hostile", 2)
    # A lone surrogate in a title, an entry nested 1,500 deep, and a file cut short.
    (folder / "surrogate.json").write_text(
        '{"session_id": "s-1", "title": "bad \\ud800 title",'
        ' "recent_history": [{"role": "user", "content": "hi"}]}', encoding="utf-8")
    (folder / "deep.json").write_text(
        '{"session_id": "d-1", "facts": ' + "[" * 1500 + "]" * 1500 + "}", encoding="utf-8")
    good = json.dumps({"session_id": "t-1", "recent_history": [{"role": "user", "content": "x"}]})
    (folder / "truncated.json").write_text(f"[{good}, {good[:20]}", encoding="utf-8")
    window = open_window(workspace)
    dialog = window.start_import(folder, format="context-json")
    with qtbot.waitSignal(dialog.import_finished, timeout=20_000) as finished:
        pass
    report = finished.args[0]
    titles = sorted(info.title for info, new in report.sessions if new)
    assert titles == ["Conversation 0", "Conversation 1", "bad \ufffd title", "x"]
    text = dialog.label.text()
    assert "1 entry was imported with changes" in text and "\\ud800" in text
    assert "file deep.json" in text and "100 levels deep" in text
    assert "truncated.json" in text and "line 1" in text
