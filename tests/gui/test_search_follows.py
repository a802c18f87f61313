"""Search results follow the database: a renamed session's hits show the new title, a
deleted session's hits go, and a hit whose session went behind the window's back says
so when it is opened."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from tests.gui.conftest import settle
from tests.gui.journey import focus, press, type_text
from workbench.core.conversation import SessionInfo
from workbench.engine.workspace import Workspace
from workbench.gui.main_window import MainWindow
from workbench.gui.models.search_results import TitleRole

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier


def _titles(window: MainWindow) -> list[str]:
    model = window.search.model
    return [model.index(r, 0).data(TitleRole) for r in range(model.rowCount())]


def _search(qtbot: QtBot, window: MainWindow, text: str) -> None:
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    qtbot.keyClick(window, Qt.Key.Key_F, CTRL | SHIFT)
    with qtbot.waitSignal(window.search.search_finished, timeout=10_000):
        type_text(qtbot, text)
        press(qtbot, Qt.Key.Key_Return)


def _select_in_list(qtbot: QtBot, window: MainWindow, session_id: int) -> None:
    qtbot.keyClick(window, Qt.Key.Key_L, CTRL)
    press(qtbot, Qt.Key.Key_Down)
    assert focus() is window.browser.view
    press(qtbot, Qt.Key.Key_Home)
    for _ in range(window.browser.model.rowCount()):
        if window.browser.selected_ids() == [session_id]:
            return
        press(qtbot, Qt.Key.Key_Down)
    raise AssertionError(f"session {session_id} is not in the list")


def test_hits_follow_a_rename_and_a_delete(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    trip = make_session(workspace, "Trip", [("user", "bring an umbrella")])
    walk = make_session(workspace, "Walk", [("assistant", "no umbrella needed")])
    window = open_window(workspace)
    _search(qtbot, window, "umbrella")
    assert sorted(_titles(window)) == ["Trip", "Walk"]

    _select_in_list(qtbot, window, trip.id)
    press(qtbot, Qt.Key.Key_F2)
    press(qtbot, Qt.Key.Key_A, CTRL)
    type_text(qtbot, "Rainy trip")
    press(qtbot, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: workspace.get_session(trip.id).title == "Rainy trip")
    settle(window)
    assert sorted(_titles(window)) == ["Rainy trip", "Walk"]
    # Searched again, the hits keep the new title.
    qtbot.keyClick(window, Qt.Key.Key_F, CTRL | SHIFT)
    with qtbot.waitSignal(window.search.search_finished, timeout=10_000):
        press(qtbot, Qt.Key.Key_Return)
    assert sorted(_titles(window)) == ["Rainy trip", "Walk"]

    _select_in_list(qtbot, window, walk.id)
    press(qtbot, Qt.Key.Key_Delete)
    settle(window)
    assert _titles(window) == ["Rainy trip"]
    assert window.search.status_label.text().startswith("1 result")
    # Undo brings the session back, and its hit with it once the search runs again.
    press(qtbot, Qt.Key.Key_Z, CTRL)
    settle(window)
    qtbot.waitUntil(lambda: sorted(_titles(window)) == ["Rainy trip", "Walk"], timeout=10_000)


def test_a_hit_of_a_session_deleted_elsewhere_says_so_when_opened(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    keep = make_session(workspace, "Keep", [("user", "the umbrella stays")])
    gone = make_session(workspace, "Gone", [("user", "an umbrella to lose")])
    window = open_window(workspace)
    window.open_session(keep.id)
    _search(qtbot, window, "umbrella")
    assert sorted(_titles(window)) == ["Gone", "Keep"]
    # Another program (the command line) deletes the session behind the window's back.
    workspace.delete_session(gone.id)
    press(qtbot, Qt.Key.Key_Down)
    assert focus() is window.search.results
    if _titles(window)[window.search.results.currentIndex().row()] != "Gone":
        press(qtbot, Qt.Key.Key_Down)
    assert _titles(window)[window.search.results.currentIndex().row()] == "Gone"
    press(qtbot, Qt.Key.Key_Return)
    said = window.search.status_label.text()
    assert "deleted" in said, said
    assert "deleted" in window.statusBar().currentMessage()
    assert _titles(window) == ["Keep"]
    assert window.ctx.current_session_id == keep.id  # what was open stays open


def test_the_hit_of_the_open_session_goes_when_the_filtered_list_deletes_it(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    # The walk's case: the session is open, the list is filtered down to it, the hit is a
    # message of it, and the list's Delete key deletes it while the hits are shown.
    make_session(workspace, "Other", [("user", "nothing to find")])
    big = make_session(workspace, "Big import", [
        ("user" if i % 2 == 0 else "assistant", f"Message {i}: harbour item {i}"
         + (" needle pelican2500" if i == 25 else "")) for i in range(40)])
    window = open_window(workspace)
    window.open_session(big.id)
    settle(window)
    _search(qtbot, window, "pelican2500")
    assert _titles(window) == ["Big import"]
    qtbot.keyClick(window, Qt.Key.Key_L, CTRL)
    type_text(qtbot, "Big import")
    qtbot.waitUntil(lambda: window.browser.model.rowCount() == 1, timeout=10_000)
    press(qtbot, Qt.Key.Key_Down)
    assert focus() is window.browser.view
    if window.browser.selected_ids() != [big.id]:
        press(qtbot, Qt.Key.Key_Home)
    assert window.browser.selected_ids() == [big.id]
    press(qtbot, Qt.Key.Key_Delete)
    settle(window)
    assert _titles(window) == []
    assert window.search.status_label.text().startswith("0 results")
