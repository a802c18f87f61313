"""Journeys found walking the app as a stranger would (issue 13's last part), each
driven as a person drives it: keys into the focus, clicks on named controls, then what
the database and the widgets show."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from tests.gui.journey import focus, press, type_text
from workbench.core.conversation import SessionInfo
from workbench.engine.workspace import Workspace
from workbench.gui.main_window import MainWindow
from workbench.gui.models.timeline import MessageRole

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier


def _activate(qtbot: QtBot, window: MainWindow) -> None:
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)


def test_down_in_the_search_box_goes_to_the_hits_and_enter_opens_one(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    filler = [("user", f"small talk {i}") for i in range(40)]
    first = make_session(workspace, "First", [("user", "bring an umbrella")])
    second = make_session(workspace, "Second", [*filler, ("assistant", "no umbrella needed"),
                                                *filler])
    window = open_window(workspace)
    window.open_session(first.id)
    _activate(qtbot, window)
    qtbot.keyClick(window, Qt.Key.Key_F, CTRL | SHIFT)
    assert focus() is window.search.query_edit
    with qtbot.waitSignal(window.search.search_finished, timeout=10_000):
        type_text(qtbot, "umbrella")
        press(qtbot, Qt.Key.Key_Return)
    hits = window.search.hits()
    assert len(hits) == 2
    # Down leaves the box for the results, on the first hit; Down again goes on.
    press(qtbot, Qt.Key.Key_Down)
    assert focus() is window.search.results
    assert window.search.results.currentIndex().row() == 0
    press(qtbot, Qt.Key.Key_Down)
    target = hits[1]
    press(qtbot, Qt.Key.Key_Return)
    window.ctx.workers.wait_idle()
    assert window.ctx.current_session_id == target.session_id
    current = window.timeline.view.currentIndex().data(MessageRole)
    assert current.id == target.message_id
    assert current.content in ("bring an umbrella", "no umbrella needed")
    assert {first.id, second.id} == {h.session_id for h in hits}
