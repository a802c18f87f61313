"""Ctrl+Z never writes over another desktop's change: two workspaces on one database
(as two desktops are), a window on the first; the person renames, pins or marks, the
other desktop changes the same field, Ctrl+Z in the window leaves that change, says so,
and undoes what was not changed elsewhere."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from tests.gui.conftest import settle
from tests.gui.journey import focus, press, type_text
from workbench.core.conversation import SessionInfo
from workbench.engine.workspace import Workspace
from workbench.gui.main_window import MainWindow

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier
CHAT = [("user", "Where should we stay in Lisbon?"), ("assistant", "Alfama.")]


@pytest.fixture
def other_desktop(tmp_path: Path, workspace: Workspace) -> Iterator[Workspace]:
    """A second workspace on the test's database file."""
    ws = Workspace.open(tmp_path / "workbench.db")
    try:
        yield ws
    finally:
        ws.close()


def _window(qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
            ) -> tuple[MainWindow, list[str]]:
    window = open_window(workspace)
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    said: list[str] = []
    window.ctx.error_reported.connect(lambda text, _cause: said.append(text))
    return window, said


def _in_the_list(qtbot: QtBot, window: MainWindow) -> None:
    qtbot.keyClick(window, Qt.Key.Key_L, CTRL)  # Go to Sessions
    press(qtbot, Qt.Key.Key_Down)
    qtbot.waitUntil(lambda: focus() is window.browser.view)


def _rename_in_place(
    qtbot: QtBot, window: MainWindow, workspace: Workspace, session_id: int, title: str
) -> None:
    """F2 on the session in the list, the new title typed, Enter; until it is stored."""
    _in_the_list(qtbot, window)
    press(qtbot, Qt.Key.Key_F2)
    press(qtbot, Qt.Key.Key_A, CTRL)
    type_text(qtbot, title)
    press(qtbot, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: workspace.get_session(session_id).title == title)


def test_ctrl_z_of_a_rename_leaves_another_desktops_rename(
    qtbot: QtBot, workspace: Workspace, other_desktop: Workspace,
    make_session: Callable[..., SessionInfo], open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Lisbon", CHAT)
    window, said = _window(qtbot, workspace, open_window)
    _rename_in_place(qtbot, window, workspace, info.id, "Lisbon, May")
    settle(window)

    other_desktop.editing().rename_session(info.id, "Lisbon trip")  # the other desktop
    press(qtbot, Qt.Key.Key_Z, CTRL)
    settle(window)
    qtbot.waitUntil(lambda: bool(said))
    assert "another desktop since" in said[0] and "Lisbon trip" in said[0]
    assert workspace.get_session(info.id).title == "Lisbon trip"
    # The list shows the title the database holds, and the bar says why.
    qtbot.waitUntil(lambda: window.browser.model.index(0, 0).data() is not None
                    and "Lisbon trip" in window.browser.model.index(0, 0).data())
    assert window.statusBar().currentMessage() == said[0]

    # A redo does not write over it either.
    press(qtbot, Qt.Key.Key_Z, CTRL | SHIFT)
    settle(window)
    assert workspace.get_session(info.id).title == "Lisbon trip"


def test_ctrl_z_of_a_rename_nobody_else_touched_still_undoes(
    qtbot: QtBot, workspace: Workspace, other_desktop: Workspace,
    make_session: Callable[..., SessionInfo], open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Lisbon", CHAT)
    window, said = _window(qtbot, workspace, open_window)
    _rename_in_place(qtbot, window, workspace, info.id, "Lisbon, May")
    other_desktop.editing().set_pinned(info.id, True)  # another field: no conflict
    press(qtbot, Qt.Key.Key_Z, CTRL)
    settle(window)
    qtbot.waitUntil(lambda: workspace.get_session(info.id).title == "Lisbon")
    assert workspace.get_session(info.id).pinned
    press(qtbot, Qt.Key.Key_Z, CTRL | SHIFT)
    settle(window)
    qtbot.waitUntil(lambda: workspace.get_session(info.id).title == "Lisbon, May")
    assert said == []


def test_ctrl_z_of_a_pin_and_of_an_important_mark_leave_changes_made_elsewhere(
    qtbot: QtBot, workspace: Workspace, other_desktop: Workspace,
    make_session: Callable[..., SessionInfo], open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Lisbon", CHAT)
    window, said = _window(qtbot, workspace, open_window)
    _in_the_list(qtbot, window)
    press(qtbot, Qt.Key.Key_P, CTRL | SHIFT)  # Pin
    qtbot.waitUntil(lambda: workspace.get_session(info.id).pinned)
    settle(window)
    other_desktop.editing().set_pinned(info.id, False)
    other_desktop.editing().set_pinned(info.id, True)  # unpinned and pinned again there
    other_desktop.editing().rename_session(info.id, "Lisbon trip")
    # Pinned again, the field holds what this window wrote: the undo unpins.
    press(qtbot, Qt.Key.Key_Z, CTRL)
    qtbot.waitUntil(lambda: not workspace.get_session(info.id).pinned)
    assert said == []

    window.open_session(info.id)
    settle(window)
    qtbot.keyClick(window, Qt.Key.Key_0, CTRL)  # Go to Timeline
    press(qtbot, Qt.Key.Key_Home, CTRL)
    first = workspace.repo.list_messages(info.id)[0]
    press(qtbot, Qt.Key.Key_B, CTRL)  # Mark Important
    qtbot.waitUntil(lambda: workspace.repo.get_message(first.id).important)
    settle(window)
    other_desktop.editing().set_important(first.id, False)
    press(qtbot, Qt.Key.Key_Z, CTRL)
    settle(window)
    qtbot.waitUntil(lambda: bool(said))
    assert "important mark" in said[0] and "another desktop since" in said[0]
    assert not workspace.repo.get_message(first.id).important
