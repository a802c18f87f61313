"""Walking the window with the keyboard alone: Tab goes round every control a person
can see and comes back to the prompt; it never enters a panel hidden behind another
one's tab, and no table keeps it."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtWidgets import QDockWidget, QTabBar, QTableWidget, QWidget
from pytestqt.qtbot import QtBot

from tests.gui.conftest import settle
from tests.gui.journey import focus, named, press
from workbench.engine.workspace import Workspace
from workbench.gui.main_window import MainWindow

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier
MAX_STEPS = 80  # far more controls than the window has: a trap goes on for ever


def _right_docks(window: MainWindow) -> list[QDockWidget]:
    return [window.search_dock, window.compaction_dock, window.context_dock,
            window.request_dock]


def _choose_tab(qtbot: QtBot, window: MainWindow, title: str) -> None:
    """Click the panel tab called ``title``, as a person would."""
    bar = named(window, "Panel tabs", QTabBar)
    index = next(i for i in range(bar.count()) if bar.tabText(i).replace("&", "") == title)
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(index).center())
    assert bar.currentIndex() == index


def _on_screen(window: MainWindow, widget: QWidget) -> bool:
    """Whether ``widget`` is shown and inside the window (not moved off it)."""
    if not widget.isVisible():
        return False
    top_left = widget.mapTo(window, QPoint(0, 0))
    return window.rect().intersects(QRect(top_left, widget.size()))


def _tab_round(qtbot: QtBot, window: MainWindow) -> list[QWidget]:
    """Press Tab from the prompt until the focus is back on it; the widgets visited,
    each of which was on the screen when it had the focus."""
    prompt = named(window, "Prompt")
    prompt.setFocus(Qt.FocusReason.TabFocusReason)
    assert focus() is prompt
    visited: list[QWidget] = []
    for _ in range(MAX_STEPS):
        press(qtbot, Qt.Key.Key_Tab)
        if focus() is prompt:
            return visited
        visited.append(focus())
        assert _on_screen(window, focus()), \
            f"Tab went to {focus().accessibleName() or type(focus()).__name__}, not shown"
    raise AssertionError(
        f"Tab did not come back to the prompt in {MAX_STEPS} steps; last: "
        + ", ".join(f"{type(w).__name__} {w.accessibleName()!r}" for w in visited[-6:]))



def _sample_window(workspace: Workspace, open_window: Callable[..., MainWindow]) -> MainWindow:
    """The window open on the sample session (it has two tasks and a memory entry)."""
    sample = workspace.ensure_sample_session()
    assert sample is not None
    window = open_window(workspace)
    window.open_session(sample.id)
    settle(window)
    return window

def test_tab_goes_round_the_window_and_back_to_the_prompt_with_each_panel_shown(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = _sample_window(workspace, open_window)
    assert window.context_panel.tasks_table.rowCount() >= 2  # the sample's tasks
    shown_panels = {"Search": window.search, "Compaction": window.compaction_panel,
                    "Context": window.context_panel, "Request": window.request_inspector}
    for title, panel in shown_panels.items():
        _choose_tab(qtbot, window, title)
        settle(window)
        visited = _tab_round(qtbot, window)
        assert any(panel.isAncestorOf(w) for w in visited), f"Tab skipped the {title} panel"
        for other_title, other in shown_panels.items():
            if other is not panel:
                assert not any(other.isAncestorOf(w) for w in visited), \
                    f"with {title} shown, Tab went into the hidden {other_title} panel"
        assert window.browser.view in visited and window.timeline.view in visited
    # With Context shown the walk passes each of its tables once and goes on.
    _choose_tab(qtbot, window, "Context")
    visited = _tab_round(qtbot, window)
    for table in (window.context_panel.tasks_table, window.context_panel.memory_table):
        assert visited.count(table) == 1


def test_panels_behind_another_tab_are_hidden_until_their_tab_is_chosen(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    assert window.search.isVisible()
    for panel in (window.compaction_panel, window.context_panel, window.request_inspector):
        assert not panel.isVisible()
    _choose_tab(qtbot, window, "Context")
    assert window.context_panel.isVisible() and not window.search.isVisible()
    assert named(window, "New task").isVisible()
    # Find brings Search back to the front, with the cursor in its query.
    press(qtbot, Qt.Key.Key_F, CTRL | SHIFT)
    assert focus() is window.search.query_edit
    assert not window.context_panel.isVisible()
    # Every tabbed panel's dock is still open: hiding is only about the tab shown.
    assert all(dock.isVisible() for dock in _right_docks(window))


def test_tab_leaves_a_table_and_the_arrows_move_in_it(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = _sample_window(workspace, open_window)
    _choose_tab(qtbot, window, "Context")
    tasks = named(window, "Tasks", QTableWidget)
    assert tasks.rowCount() >= 2
    tasks.setFocus(Qt.FocusReason.TabFocusReason)
    tasks.setCurrentCell(0, 0)
    press(qtbot, Qt.Key.Key_Down)
    assert focus() is tasks and tasks.currentRow() == 1
    press(qtbot, Qt.Key.Key_Tab, CTRL)
    assert focus() is tasks and (tasks.currentRow(), tasks.currentColumn()) == (1, 0)
    press(qtbot, Qt.Key.Key_Tab)
    assert focus() is named(window, "New task")
    press(qtbot, Qt.Key.Key_Backtab, SHIFT)
    assert focus() is tasks
    press(qtbot, Qt.Key.Key_Backtab, SHIFT)
    assert focus() is not tasks
    # Every table of the window lets Tab go.
    for table in window.findChildren(QTableWidget):
        assert not table.tabKeyNavigation(), table.accessibleName()
