"""The main window: its parts, status bar, menus, shortcuts, layout memory and start-up."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QApplication, QDialogButtonBox
from pytestqt.qtbot import QtBot

from workbench.core.conversation import SessionInfo
from workbench.engine.workspace import Workspace
from workbench.gui.app import display_problem, run_gui
from workbench.gui.main_window import MainWindow
from workbench.gui.models.sessions import SessionRole
from workbench.gui.settings import settings_path


def listed_titles(window: MainWindow) -> list[str]:
    model = window.browser.model
    return [model.index(row, 0).data(SessionRole).title for row in range(model.rowCount())]


def test_window_lists_sessions_and_opens_the_first_with_its_size(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow], tmp_path: Path,
) -> None:
    make_session(workspace, "Trip planning", [("user", "hi")])
    make_session(workspace, "Bug triage", [("user", "first"), ("assistant", "second"),
                                           ("user", "third")])
    window = open_window(workspace)
    assert set(listed_titles(window)) == {"Trip planning", "Bug triage"}
    # The most recently updated session opens by itself.
    qtbot.waitUntil(lambda: window.ctx.current_session_id != 0)
    info = workspace.repo.get_session(window.ctx.current_session_id)
    assert window.windowTitle().startswith(info.title)
    assert f"{info.message_count} message" in window.session_label.text()
    assert f"{info.token_count:,} tokens" in window.tokens_label.text()
    assert workspace.db_path.name in window.database_label.text()
    assert window.database_label.toolTip() == str(workspace.db_path)

    image = window.grab()
    assert image.save(str(tmp_path / "window.png"))
    assert (tmp_path / "window.png").stat().st_size > 0


def test_menus_hold_the_actions_of_the_issue(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    menus = {a.text().replace("&", ""): a.menu() for a in window.menuBar().actions()}
    assert list(menus) == ["File", "Edit", "View", "Settings", "Help"]

    def texts(menu_name: str) -> list[str]:
        return [a.text().replace("&", "") for a in menus[menu_name].actions() if a.text()]

    assert {"New Session", "Import File…", "Export Sessions…", "Open Database…",
            "Quit"} <= set(texts("File"))
    assert {"Find in Session…", "Find Everywhere…"} <= set(texts("Edit"))
    assert any(t.startswith("Undo") for t in texts("Edit"))
    assert {"Panels", "Theme"} <= set(texts("View"))
    assert {"Keyboard Shortcuts", "About"} <= set(texts("Help"))
    assert texts("Settings") == ["Providers…", "Agents…"]


def test_keyboard_shortcuts_of_the_issue_are_bound(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    bound = {s.toString() for a in window.findChildren(QAction) for s in a.shortcuts()}
    for keys in ("Ctrl+N", "Ctrl+Z", "Ctrl+Shift+Z", "Ctrl+F", "Ctrl+Shift+F", "Ctrl+Return",
                 "Esc", "Ctrl+I", "Ctrl+E", "Ctrl+O", "Ctrl+Q", "Del", "F2", "Ctrl+G",
                 "Ctrl+C", "Ctrl+B"):
        assert QKeySequence(keys).toString() in bound, keys
    dialog = window.show_shortcuts()
    rows = dict(dialog.rows())
    assert rows["New Session"] == QKeySequence("Ctrl+N").toString(
        QKeySequence.SequenceFormat.NativeText)
    dialog.close()


def test_find_shortcuts_focus_the_search_query(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    window.search_dock.hide()
    window.find_action.trigger()
    assert window.search_dock.isVisible()
    assert window.search.scope_box.currentData() == "session"
    window.find_all_action.trigger()
    assert window.search.scope_box.currentData() == "all"


def test_widgets_have_accessible_names(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    for widget in (window.browser.view, window.browser.filter_edit, window.timeline.view,
                   window.search.query_edit, window.search.results, window.database_label,
                   *window.timeline.chips.chips.values()):
        assert widget.accessibleName(), widget
    assert window.composer is not None
    for widget in (window.composer.prompt, window.composer.provider_box,
                   window.composer.gauge, window.composer.send_button):
        assert widget.accessibleName(), widget


def test_layout_and_theme_are_remembered_between_runs(
    qtbot: QtBot, workspace: Workspace, isolated_home: Path,
) -> None:
    first = MainWindow(workspace)
    qtbot.addWidget(first)
    first.show()
    qtbot.waitExposed(first)
    first.search_dock.hide()
    # Within the offscreen screen (800 wide), which a restored geometry must fit.
    first.resize(760, 555)
    size = (first.width(), first.height())
    first.set_theme("dark")
    first.close()
    # The settings live under WORKBENCH_HOME, never in the user's real configuration.
    assert settings_path() == isolated_home / "gui.ini"
    assert settings_path().exists()

    second = MainWindow(workspace)
    qtbot.addWidget(second)
    second.show()
    qtbot.waitExposed(second)
    assert (second.width(), second.height()) == size
    assert not second.search_dock.isVisible()
    assert second.theme_actions["dark"].isChecked()
    assert QApplication.palette().color(QApplication.palette().ColorRole.Window).lightness() \
        < 128
    second.set_theme("light")
    second.close()
    assert QSettings(str(settings_path()), QSettings.Format.IniFormat).value(
        "view/theme") == "light"


def test_the_first_window_fits_a_screen_smaller_than_its_usual_size(
    qtbot: QtBot, workspace: Workspace, isolated_home: Path,
) -> None:
    # The offscreen screen is 800 wide, as 1920×1080 at 200 % text scale is 960×540:
    # a first window of 1280×800 went past its edge, with Send and the panels off it.
    window = MainWindow(workspace)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    room = window.screen().availableGeometry()
    assert room.width() < 1280
    frame = window.frameGeometry()
    # As wide as the screen, or as the window's narrowest layout (817 here: 800 is
    # below the 1024 the window is made for); never taller than the screen.
    assert frame.width() <= max(room.width(), window.minimumWidth() + 4), (frame, room)
    assert frame.top() >= room.top() and frame.bottom() <= room.bottom(), (frame, room)
    composer = window.composer
    assert composer is not None
    send = composer.send_button
    corner = send.mapToGlobal(send.rect().bottomLeft())
    assert send.isVisible() and room.contains(corner), (corner, room)
    window.close()


def test_open_database_switches_the_window(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow], tmp_path: Path,
) -> None:
    make_session(workspace, "In the first", [("user", "hi")])
    window = open_window(workspace)
    other = Workspace.open(tmp_path / "other.db")
    make_session(other, "In the second", [("user", "hello")])
    other.close()
    window.open_database(tmp_path / "other.db")  # on a worker: the window switches after
    qtbot.waitUntil(lambda: "other.db" in window.database_label.text(), timeout=10_000)
    assert listed_titles(window) == ["In the second"]
    window.ctx.workspace.close()


def test_quit_closes_the_window(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    window.quit_action.trigger()
    assert not window.isVisible()


def test_new_session_shortcut_creates_and_opens_one(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    window.activateWindow()
    window.new_session_action.trigger()
    window.ctx.workers.wait_idle()
    qtbot.waitUntil(lambda: listed_titles(window) == ["New session"])
    assert window.ctx.current_session_id == workspace.list_sessions()[0].id
    assert window.timeline.view.empty_text.startswith("This session has no messages")
    window.timeline.view.setFocus()
    qtbot.keyClick(window.timeline.view, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    window.ctx.workers.wait_idle()
    qtbot.waitUntil(lambda: listed_titles(window) == [])
    assert window.ctx.current_session_id == 0


@pytest.mark.parametrize(
    ("env", "platform", "has_problem"),
    [
        ({}, "linux", True),
        ({"DISPLAY": ":0"}, "linux", False),
        ({"WAYLAND_DISPLAY": "wayland-0"}, "linux", False),
        ({"QT_QPA_PLATFORM": "offscreen"}, "linux", False),
        ({"QT_QPA_PLATFORM": "xcb"}, "linux", True),
        ({}, "darwin", False),
        ({}, "win32", False),
    ],
)
def test_display_problem(env: dict[str, str], platform: str, has_problem: bool) -> None:
    problem = display_problem(env, platform)
    assert (problem is not None) == has_problem
    if problem:
        assert "QT_QPA_PLATFORM=offscreen" in problem


def test_run_gui_without_a_display_explains_instead_of_aborting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("sys.platform", "linux")

    assert run_gui(tmp_path / "never-created.db") == 2
    assert "no display" in capsys.readouterr().err
    assert not (tmp_path / "never-created.db").exists()


def test_export_writes_the_selected_sessions(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow], tmp_path: Path,
) -> None:
    info = make_session(workspace, "Exported", [("user", "the question"),
                                                ("assistant", "the answer")])
    window = open_window(workspace)
    target = tmp_path / "out.md"
    window.export_sessions([info.id], "markdown", target)
    window.ctx.workers.wait_idle()
    text = target.read_text(encoding="utf-8")
    assert "the question" in text and "the answer" in text
    assert "Exported 1 session" in window.statusBar().currentMessage()


def test_cancelling_an_export_writes_nothing_and_keeps_the_old_file(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow], tmp_path: Path,
) -> None:
    import threading

    from workbench.gui.dialogs.export_progress import ExportProgressDialog

    infos = [make_session(workspace, f"Session {i}", [("user", f"question {i}")])
             for i in range(3)]
    window = open_window(workspace)
    target = tmp_path / "out.md"
    target.write_text("the previous export\n", encoding="utf-8")
    dialog = ExportProgressDialog(window.ctx, [i.id for i in infos], "markdown", target,
                                  window)
    # The first session is being read when the person presses Cancel.
    reading, go_on = threading.Event(), threading.Event()
    progress = dialog._progress

    def slow(read: int, total: int | None) -> bool:
        reading.set()
        go_on.wait(5)
        return progress(read, total)

    dialog._progress = slow  # type: ignore[method-assign]
    dialog.show()
    dialog.start()
    assert reading.wait(5) and dialog.running
    cancel = dialog.buttons.button(QDialogButtonBox.StandardButton.Cancel)
    qtbot.mouseClick(cancel, Qt.MouseButton.LeftButton)
    assert "Stopping" in dialog.label.text()
    with qtbot.waitSignal(dialog.export_finished, timeout=5_000) as finished:
        go_on.set()
    assert finished.args == [[]]
    assert "not written" in dialog.label.text()
    assert target.read_text(encoding="utf-8") == "the previous export\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.md")]
    dialog.close()


def test_help_shortcuts_lists_every_action_with_keys(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    dialog = window.show_shortcuts()
    listed = dict(dialog.rows())
    for action in window.findChildren(QAction):
        name = action.text().replace("&", "").rstrip("…").strip()
        if action.shortcuts() and name:
            keys = action.shortcuts()[0].toString(QKeySequence.SequenceFormat.NativeText)
            assert name in listed and keys in listed[name], (name, keys)
    dialog.close()
    # Every menu and its entries can be reached with Alt and a letter.
    for menu_action in window.menuBar().actions():
        assert "&" in menu_action.text(), menu_action.text()


def test_every_focusable_control_has_a_name_for_screen_readers(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QAbstractButton, QLabel, QWidget

    workspace.ensure_sample_session()
    window = open_window(workspace)
    for dock in (window.search_dock, *window.findChildren(type(window.search_dock))):
        dock.show()
    # Labels that name a control (setBuddy) count as its name.
    named_by_label = {label.buddy() for label in window.findChildren(QLabel)
                      if label.buddy() is not None}
    nameless = []
    for widget in window.findChildren(QWidget):
        if widget.focusPolicy() == Qt.FocusPolicy.NoFocus or not widget.isEnabled():
            continue
        if widget.focusProxy() is not None or widget.objectName().startswith("qt_"):
            continue
        if widget.window() is not window:  # a combo box's popup list, a floating tool
            continue
        if type(widget).__name__ in ("QScrollBar", "QTabBar", "QMenuBar", "QMenu",
                                     "QSplitterHandle", "QDockWidget", "QToolBar",
                                     "QMainWindow", "MainWindow"):
            continue
        text = widget.text() if isinstance(widget, QAbstractButton) else ""
        if widget.accessibleName() or text.strip() or widget in named_by_label:
            continue
        nameless.append(f"{type(widget).__name__} {widget.objectName()!r} in "
                        f"{type(widget.parentWidget()).__name__}")
    assert nameless == [], "\n".join(nameless)


QUIT_PROGRAM = """
import sys
from pathlib import Path
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from workbench.gui.app import run_gui

app = QApplication(sys.argv[:1])

def act() -> None:
    windows = [w for w in QApplication.topLevelWidgets() if w.objectName() == "MainWindow"]
    if not windows:  # the database is still being opened (on a worker)
        QTimer.singleShot(100, act)
        return
    [window] = windows
    for dock in (window.compaction_dock, window.context_dock, window.request_dock,
                 window.search_dock):
        dock.show()
    window.new_session_action.trigger()  # commands on the undo stack
    window.preview_compaction_action.trigger()
    QTimer.singleShot(300, window.new_session_action.trigger)
    QTimer.singleShot(600, window.quit_action.trigger)

QTimer.singleShot(500, act)
print("exit", run_gui(Path(sys.argv[1])))
"""


def test_quitting_with_every_panel_open_prints_nothing(tmp_path: Path) -> None:
    """Ctrl+Q with the Compaction, Context, Request and Search panels open, undoable
    commands on the stack and a preview under way: the process exits 0 and says nothing
    (it printed "Internal C++ object (QPushButton) already deleted")."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", WORKBENCH_HOME=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", QUIT_PROGRAM, str(tmp_path / "wb.db")],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("exit 0")
    errors = [line for line in done.stderr.splitlines()
              if "propagateSizeHints" not in line and line.strip()]
    assert errors == []


def test_export_says_what_the_format_could_not_hold(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow], tmp_path: Path,
) -> None:
    from workbench.core.conversation import SessionContext

    info = make_session(workspace, "With facts", [("user", "the question")])
    workspace.repo.set_context(info.id, SessionContext(facts=["likes tea"]))
    window = open_window(workspace)
    target = tmp_path / "out.jsonl"

    dialog = window.export_sessions([info.id], "openai-jsonl", target)
    assert dialog is not None
    window.ctx.workers.wait_idle()
    qtbot.waitUntil(lambda: "could not hold" in dialog.label.text(), timeout=5_000)

    assert "the context" in dialog.label.text()
    assert dialog.isVisible()  # left open so the note can be read
    assert target.exists()


@pytest.mark.parametrize("format", ["context-json", "openai-jsonl", "markdown"])
def test_exporting_a_pinned_session_says_the_pin_is_not_kept(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow], tmp_path: Path, format: str,
) -> None:
    # The walk: a pinned session exported and imported again came back unpinned, and
    # the context-file and JSONL exports had said nothing about it.
    info = make_session(workspace, "Pinned", [("user", "the question")])
    workspace.editing().set_pinned(info.id, True)
    window = open_window(workspace)
    dialog = window.export_sessions([info.id], format, tmp_path / "out")
    assert dialog is not None
    window.ctx.workers.wait_idle()
    qtbot.waitUntil(lambda: "could not hold" in dialog.label.text(), timeout=5_000)
    assert "the pin or archive mark of 1 session(s)" in dialog.label.text()
    assert dialog.isVisible()
