"""What the status bar says after an edit and its undo: never a line about something
that was undone since, the same kind of line for Archive as for Delete, and numbers a
person can read."""

from __future__ import annotations

import re
from collections.abc import Callable

from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QApplication, QLabel, QPlainTextEdit, QWidget
from pytestqt.qtbot import QtBot

from tests.gui.conftest import settle
from tests.gui.journey import click, focus, named, press
from workbench.core.conversation import SessionInfo
from workbench.engine import compaction
from workbench.engine.chat import context_gauge
from workbench.engine.workspace import Workspace
from workbench.gui.main_window import MainWindow

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier


def _activate(qtbot: QtBot, window: MainWindow) -> None:
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)


def _one_message_deleted(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> tuple[MainWindow, SessionInfo]:
    """A window on a two-message session whose first message was just deleted by keys."""
    info = make_session(workspace, "Chat", [("user", "keep me"), ("assistant", "and me")])
    window = open_window(workspace)
    window.open_session(info.id)
    _activate(qtbot, window)
    qtbot.keyClick(window, Qt.Key.Key_0, CTRL)  # Go to Timeline
    press(qtbot, Qt.Key.Key_Home, CTRL)
    press(qtbot, Qt.Key.Key_Delete)
    settle(window)
    return window, info


def test_undoing_a_message_delete_says_it_came_back(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    window, info = _one_message_deleted(qtbot, workspace, make_session, open_window)
    assert window.statusBar().currentMessage().startswith("Deleted 1 message")
    press(qtbot, Qt.Key.Key_Z, CTRL)
    settle(window)
    assert window.statusBar().currentMessage() == "Brought back 1 message."
    assert [m.content for m in workspace.repo.list_messages(info.id)] == ["keep me", "and me"]


def test_archive_says_where_the_session_went_and_undo_says_it_is_back(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Old plans", [("user", "a trip in May")])
    window = open_window(workspace)
    _activate(qtbot, window)
    qtbot.keyClick(window, Qt.Key.Key_L, CTRL)  # Go to Sessions
    press(qtbot, Qt.Key.Key_Down)
    assert focus() is window.browser.view
    press(qtbot, Qt.Key.Key_A, CTRL | SHIFT)
    settle(window)
    qtbot.waitUntil(lambda: window.browser.model.rowCount() == 0)
    assert workspace.get_session(info.id).archived
    said = window.statusBar().currentMessage()
    assert said.startswith("Archived 1 session") and "Archived" in said[8:]
    assert "Ctrl+Z" in said
    qtbot.keyClick(window, Qt.Key.Key_Z, CTRL)
    settle(window)
    assert not workspace.get_session(info.id).archived
    assert window.statusBar().currentMessage() == "Brought back 1 session from the archive."


def test_the_compaction_line_groups_the_digits_of_its_token_counts(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    text = "notes on the cabinets, the worktop and the hob " * 12
    info = make_session(workspace, "Kitchen", [(("user", "assistant")[i % 2], f"{i}: {text}")
                                               for i in range(60)])
    window = open_window(workspace)
    panel = window.compaction_panel
    _activate(qtbot, window)
    with qtbot.waitSignal(panel.policy_loaded, timeout=15_000):
        window.open_session(info.id)
    settle(window)
    press(qtbot, Qt.Key.Key_3, CTRL)  # the Compaction panel
    with qtbot.waitSignal(panel.preview_shown, timeout=15_000):
        click(qtbot, window, "Preview the compaction")
    with qtbot.waitSignal(panel.history_loaded, timeout=15_000):
        qtbot.mouseClick(panel.apply_button, Qt.MouseButton.LeftButton)
    settle(window)
    record = next(r for r in compaction.history(workspace, info.id) if not r.undone)
    assert record.tokens_before >= 1000 and record.tokens_after >= 1000
    said = window.statusBar().currentMessage()
    assert f"from {record.tokens_before:,} to {record.tokens_after:,} tokens" in said, said
    assert not re.search(r"\d{4}", said), said
    # The gauge measures the request again after the compaction and after its undo.
    def gauge_shows_the_request_now() -> int:
        now = context_gauge(workspace, info.id, provider=None, prompt="").request_tokens
        qtbot.waitUntil(lambda: window.composer.gauge.format().startswith(
            f"next request: {now:,} "), timeout=15_000)
        return now

    compacted = gauge_shows_the_request_now()
    qtbot.keyClick(window, Qt.Key.Key_0, CTRL)  # Go to Timeline
    press(qtbot, Qt.Key.Key_Z, CTRL)
    settle(window)
    assert any(r.undone for r in compaction.history(workspace, info.id))
    assert gauge_shows_the_request_now() > compacted


def _settled_gauge(qtbot: QtBot, window: MainWindow) -> str:
    qtbot.waitUntil(lambda: window.composer.gauge.format() != "context: …", timeout=15_000)
    return window.composer.gauge.format()


def test_the_gauge_never_shows_the_session_before_after_a_switch(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    short = make_session(workspace, "Short", [("user", "hi")])
    long = make_session(workspace, "Long", [("user", "a long story " * 300)])
    window = open_window(workspace)
    gauge = window.composer.gauge
    window.open_session(long.id)
    long_text = _settled_gauge(qtbot, window)
    window.open_session(short.id)
    short_text = _settled_gauge(qtbot, window)
    assert long_text != short_text and "tokens" in short_text
    # The person picks the long session in the list: the short one's figure goes at once.
    _activate(qtbot, window)
    qtbot.keyClick(window, Qt.Key.Key_L, CTRL)
    press(qtbot, Qt.Key.Key_Down)
    assert focus() is window.browser.view
    press(qtbot, Qt.Key.Key_Home)
    for _ in range(window.browser.model.rowCount()):
        if window.ctx.current_session_id == long.id:
            break
        press(qtbot, Qt.Key.Key_Down)
    assert window.ctx.current_session_id == long.id, window.browser.selected_ids()
    assert gauge.format() == "context: …"
    # A measurement of the short session still running when the person switches is
    # not shown: the gauge says "counting" or the long session's figure, nothing else.
    window.open_session(short.id)
    window.composer.refresh_gauge()
    window.open_session(long.id)
    settle(window)
    assert gauge.format() in ("context: …", long_text)
    assert _settled_gauge(qtbot, window) == long_text
    # No session: it says so at once.
    window.open_session(0)
    assert gauge.format() == "context: no session"


def test_a_line_about_ctrl_z_goes_once_ctrl_z_would_undo_something_else(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    window, info = _one_message_deleted(qtbot, workspace, make_session, open_window)
    assert "Ctrl+Z" in window.statusBar().currentMessage()
    # Pin the session: Ctrl+Z would now unpin it, so the line about the delete goes.
    qtbot.keyClick(window, Qt.Key.Key_L, CTRL)
    press(qtbot, Qt.Key.Key_Down)
    assert focus() is window.browser.view
    press(qtbot, Qt.Key.Key_P, CTRL | SHIFT)
    settle(window)
    assert workspace.get_session(info.id).pinned
    assert "brings it back" not in window.statusBar().currentMessage()
    press(qtbot, Qt.Key.Key_Z, CTRL)
    settle(window)
    assert not workspace.get_session(info.id).pinned
    assert [m.content for m in workspace.repo.list_messages(info.id)] == ["and me"]
    # Undoing the delete after it, the line said about it is replaced too.
    press(qtbot, Qt.Key.Key_Z, CTRL)
    settle(window)
    assert window.statusBar().currentMessage() == "Brought back 1 message."


def _status_dialog() -> QWidget | None:
    shown = [w for w in QApplication.topLevelWidgets()
             if w.isVisible() and w.accessibleName() == "Status messages"]
    return shown[0] if shown else None


def test_a_long_status_line_can_be_read_whole_at_1024_pixels(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    make_session(workspace, "Old plans", [("user", "a trip in May")])
    window = open_window(workspace, size=(1024, 700))
    _activate(qtbot, window)
    qtbot.keyClick(window, Qt.Key.Key_L, CTRL)  # Go to Sessions
    press(qtbot, Qt.Key.Key_Down)
    press(qtbot, Qt.Key.Key_A, CTRL | SHIFT)  # Archive
    settle(window)
    said = window.statusBar().currentMessage()
    assert said.startswith("Archived 1 session") and said.endswith("brings it back.")

    line = named(window, "Status message", QLabel)
    bar = window.statusBar()
    # The line lies inside the bar, beside the permanent labels, and what it shows fits.
    shown = QRect(line.mapTo(bar, QPoint(0, 0)), line.size())
    assert bar.rect().contains(shown)
    for label in (window.session_label, window.tokens_label, window.database_label):
        if label.isVisible():
            assert not shown.intersects(label.geometry())
    assert line.fontMetrics().horizontalAdvance(line.text()) <= line.contentsRect().width()
    if line.text() != said:  # too long for the room: cut with an ellipsis...
        assert line.text().endswith("…") and said.startswith(line.text()[:-1])
        tip = QTextDocument()
        tip.setHtml(line.toolTip())
        assert tip.toPlainText() == said  # ...and whole on hover

    # The whole sentence stays in the messages a person can open, by keys and by a click,
    # after the bar let it go.
    bar.clearMessage()
    assert line.text() == ""
    qtbot.keyClick(window, Qt.Key.Key_M, CTRL | SHIFT)
    qtbot.waitUntil(lambda: _status_dialog() is not None)
    dialog = _status_dialog()
    assert dialog is not None
    log = named(dialog, "Status message history", QPlainTextEdit)
    assert log.toPlainText().splitlines()[-1].endswith(said)
    click(qtbot, dialog, "Close")
    qtbot.waitUntil(lambda: _status_dialog() is None)

    bar.showMessage(said)
    qtbot.mouseClick(line, Qt.MouseButton.LeftButton, pos=line.rect().center())
    qtbot.waitUntil(lambda: _status_dialog() is not None)
    dialog = _status_dialog()
    assert dialog is not None
    log = named(dialog, "Status message history", QPlainTextEdit)
    # One line per message: the same message shown twice in a row is listed once.
    assert [x for x in log.toPlainText().splitlines() if x.endswith(said)] == \
        [log.toPlainText().splitlines()[-1]]
    dialog.close()
