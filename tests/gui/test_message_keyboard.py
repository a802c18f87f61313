"""What the mouse reaches on a message, the keyboard reaches too: Space or Enter toggles
"Show all" and folded runs, Ctrl+Shift+C and the context menu copy code, the context menu
opens links, and Shift+F10 opens that menu as the Menu key does."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QPoint, Qt, QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication, QMenu, QWidget
from pytestqt.qtbot import QtBot

from tests.gui.conftest import settle
from tests.gui.journey import focus, press
from workbench.core.conversation import SessionInfo
from workbench.engine.workspace import Workspace
from workbench.gui.delegates.message import show_all_label
from workbench.gui.main_window import MainWindow
from workbench.gui.models.timeline import KindRole, MessageRole

LONG = "\n".join(f"line {i}" for i in range(60))
TWO_BLOCKS = ("First:\n\n```python\nprint(1)\n```\n\nthen see [the docs](https://example.com/d)"
              "\n\n```bash\nls -l\n```")
ONE_LINE = "word " * 3000


def _open(qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
          make_session: Callable[..., SessionInfo]) -> MainWindow:
    info = make_session(workspace, "Keys", [
        ("system", "Be brief."), ("user", "Hi"), ("assistant", "Hello"),
        ("user", LONG), ("assistant", TWO_BLOCKS), ("user", ONE_LINE),
        ("assistant", "```json\n{\"a\": 1}\n```")])
    messages = workspace.repo.list_messages(info.id)
    workspace.repo.set_state([messages[1].id, messages[2].id], "folded")
    window = open_window(workspace)
    window.open_session(info.id)
    return window


def _select(qtbot: QtBot, window: MainWindow, row: int) -> None:
    """Click the first message's badge (no control there), then walk down with the keys."""
    view = window.timeline.view
    first = window.timeline.model.index(0, 0)
    view.scrollTo(first)
    QApplication.processEvents()
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton,
                     pos=view.visualRect(first).topLeft() + QPoint(20, 20))
    assert focus() is view
    assert view.currentIndex().row() == 0
    for _ in range(row):
        press(qtbot, Qt.Key.Key_Down)
    assert view.currentIndex().row() == row


def _regions(window: MainWindow, row: int) -> dict:
    view = window.timeline.view
    index = window.timeline.model.index(row, 0)
    view.scrollTo(index)
    QApplication.processEvents()
    option = view._option(view.visualRect(index))  # noqa: SLF001 - the option rows paint with
    return window.timeline.delegate.hit_regions(option, index)


def _row_of(window: MainWindow, content: str) -> int:
    model = window.timeline.model
    for row in range(model.rowCount()):
        message = model.index(row, 0).data(MessageRole)
        if message is not None and message.content == content:
            return row
    raise AssertionError(content[:40])


def _menu_choice(qtbot: QtBot, path: list[str], seen: list[list[str]]) -> None:
    """Once a popup menu is up, record its entries and choose ``path`` with the keyboard."""

    def step() -> None:
        menu = QApplication.activePopupWidget()
        if not isinstance(menu, QMenu):
            QTimer.singleShot(20, step)
            return
        texts = [a.text().replace("&", "") for a in menu.actions() if not a.isSeparator()]
        seen.append(texts)
        wanted = path.pop(0)
        action = next(a for a in menu.actions() if a.text().replace("&", "") == wanted)
        menu.setActiveAction(action)
        qtbot.keyClick(menu, Qt.Key.Key_Return)
        if path:
            QTimer.singleShot(20, step)

    QTimer.singleShot(0, step)


def test_space_and_enter_show_all_and_open_a_folded_run(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
    make_session: Callable[..., SessionInfo],
) -> None:
    window = _open(qtbot, workspace, open_window, make_session)
    model, delegate = window.timeline.model, window.timeline.delegate
    assert model.index(1, 0).data(KindRole) == "marker"
    _select(qtbot, window, 1)
    press(qtbot, Qt.Key.Key_Space)
    kinds = [model.index(r, 0).data(KindRole) for r in range(model.rowCount())]
    assert kinds[:4] == ["message", "marker", "message", "message"]
    assert model.index(2, 0).data(MessageRole).content == "Hi"
    press(qtbot, Qt.Key.Key_Return)  # the marker is still the current row: it closes
    assert model.index(2, 0).data(MessageRole).content == LONG

    row = _row_of(window, LONG)
    _select(qtbot, window, row)
    message = model.index(row, 0).data(MessageRole)
    assert not delegate.is_expanded(message)
    press(qtbot, Qt.Key.Key_Return)
    assert delegate.is_expanded(message)
    press(qtbot, Qt.Key.Key_Space)
    assert not delegate.is_expanded(message)
    # One long line is folded by length: its expander counts characters ("1 lines" was
    # its label), and the fold ends on a whole word.
    row = _row_of(window, ONE_LINE)
    _select(qtbot, window, row)
    message = model.index(row, 0).data(MessageRole)
    assert show_all_label(message, False) == "Show all ▾ 15,000 characters"
    regions = _regions(window, row)
    assert regions["more"] is not None
    assert regions["doc"].toPlainText().endswith(" word")
    press(qtbot, Qt.Key.Key_Enter, Qt.KeyboardModifier.KeypadModifier)
    regions = _regions(window, row)
    assert regions["doc"].toPlainText() == ONE_LINE.strip()
    assert show_all_label(message, True) == "Show less ▴"
    # A short message has nothing to show: Space says so instead of doing nothing.
    _select(qtbot, window, 0)
    press(qtbot, Qt.Key.Key_Space)
    assert "shown whole" in window.statusBar().currentMessage()


def test_copy_code_and_open_link_from_the_keyboard(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
    make_session: Callable[..., SessionInfo],
) -> None:
    window = _open(qtbot, workspace, open_window, make_session)
    QGuiApplication.clipboard().clear()
    json_row = window.timeline.model.rowCount() - 1
    _select(qtbot, window, json_row)
    press(qtbot, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier
          | Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(lambda: QGuiApplication.clipboard().text() == '{"a": 1}')
    assert window.timeline.delegate.copied_button() is not None  # its button says Copied

    # Two blocks: the context menu (Shift+F10) offers each, and the link.
    row = _row_of(window, TWO_BLOCKS)
    _select(qtbot, window, row)
    seen: list[list[str]] = []
    _menu_choice(qtbot, ["Copy Code Block", "2 bash: ls -l"], seen)
    press(qtbot, Qt.Key.Key_F10, Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(lambda: QGuiApplication.clipboard().text() == "ls -l")
    assert "Open Link" in seen[0] and "Copy Text" in seen[0]
    opened: list[str] = []
    window.timeline.delegate.link_activated.disconnect()
    window.timeline.delegate.link_activated.connect(opened.append)
    _menu_choice(qtbot, ["Open Link", "https://example.com/d"], [])
    press(qtbot, Qt.Key.Key_F10, Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(lambda: opened == ["https://example.com/d"])


def test_shift_f10_opens_the_session_list_menu_too(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
    make_session: Callable[..., SessionInfo],
) -> None:
    window = _open(qtbot, workspace, open_window, make_session)
    view = window.browser.view
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton,
                     pos=view.visualRect(view.model().index(0, 0)).center())
    assert focus() is view
    seen: list[list[str]] = []

    def close() -> None:
        menu = QApplication.activePopupWidget()
        if not isinstance(menu, QMenu):
            QTimer.singleShot(20, close)
            return
        seen.append([a.text() for a in menu.actions()])
        menu.close()

    QTimer.singleShot(0, close)
    press(qtbot, Qt.Key.Key_F10, Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(lambda: bool(seen))
    assert any("Rename" in t.replace("&", "") for t in seen[0])


def test_tab_reaches_the_role_in_the_insert_dialog_and_in_place(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
    make_session: Callable[..., SessionInfo],
) -> None:
    from tests.gui.journey import type_text, with_modal_dialog

    info = make_session(workspace, "Roles", [("user", "Hi"), ("assistant", "Hello")])
    window = open_window(workspace)
    window.open_session(info.id)
    settle(window)
    _select(qtbot, window, 1)

    def write_a_system_note(dialog: QWidget) -> None:
        assert focus().accessibleName() == "Message text"
        type_text(qtbot, "Answer in French.")
        press(qtbot, Qt.Key.Key_Tab)
        assert focus().accessibleName() == "Message role"
        press(qtbot, Qt.Key.Key_S)  # the first role named S…: System
        assert focus().currentText() == "System"
        press(qtbot, Qt.Key.Key_Tab)
        assert focus().text().replace("&", "") == "OK"
        press(qtbot, Qt.Key.Key_Space)

    with_modal_dialog(qtbot, lambda: press(qtbot, Qt.Key.Key_Insert), write_a_system_note)
    settle(window)
    assert [(m.role, m.content) for m in workspace.repo.list_messages(info.id)] == [
        ("user", "Hi"), ("assistant", "Hello"), ("system", "Answer in French.")]

    # In place (F2): Tab goes from the text to the role, then Save and Cancel.
    window.activateWindow()  # the window manager's part once a dialog closes
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    window.timeline.view.setFocus()
    press(qtbot, Qt.Key.Key_F2)
    names = [focus().accessibleName()]
    for _ in range(3):
        press(qtbot, Qt.Key.Key_Tab)
        names.append(focus().accessibleName())
    assert names == ["Message text", "Message role", "Save message", "Cancel editing"]
