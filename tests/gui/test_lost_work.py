"""Journeys where a person used to lose work without being asked (the new-user walk's
"lost work" findings), each driven as a person drives it: keys into the focus, clicks on
named controls, then what the database and the widgets show."""

from __future__ import annotations

import threading
from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractButton, QApplication, QLabel, QPlainTextEdit, QWidget
from pytestqt.qtbot import QtBot

from tests.gui.journey import click, click_into, named, press, type_text, with_modal_dialog
from workbench.core.conversation import SessionInfo
from workbench.engine.providers import ProviderSettings
from workbench.engine.session_context import read_session_context, update_context
from workbench.engine.workspace import Workspace
from workbench.gui.main_window import MainWindow


def _answer(qtbot: QtBot, text: str, asked: str) -> Callable[[QWidget], None]:
    """Click the button ``text`` of the question box, after checking it asks ``asked``."""
    def act(box: QWidget) -> None:
        assert asked in box.findChild(QLabel, "qt_msgbox_label").text()
        button = next(b for b in box.findChildren(QAbstractButton)
                      if b.text().replace("&", "") == text)
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    return act


def _text(edit: QWidget) -> str:
    return edit.toPlainText() if isinstance(edit, QPlainTextEdit) else edit.text()


def test_add_in_the_settings_dialogs_asks_before_dropping_typed_edits(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    for open_it, field, typed, add in (
            (window.show_providers, "Provider name", "My server", "Add a provider"),
            (window.show_agents, "Instructions", "Always answer in French.", "Add an agent")):
        dialog = open_it()
        qtbot.waitUntil(lambda d=dialog: QApplication.activeWindow() is d)
        edit = named(dialog, field)
        target = edit.viewport() if isinstance(edit, QPlainTextEdit) else edit
        qtbot.mouseClick(target, Qt.MouseButton.LeftButton)
        type_text(qtbot, typed)
        # Add asks; Cancel goes back to the form with the text still there.
        with_modal_dialog(qtbot, lambda d=dialog, a=add: click(qtbot, d, a),
                          _answer(qtbot, "Cancel", "Discard the unsaved changes"))
        assert dialog.isVisible()
        assert typed in _text(edit)
        # Add again and Discard: a blank form, nothing stored.
        dialog.activateWindow()
        qtbot.waitUntil(lambda d=dialog: QApplication.activeWindow() is d)
        with_modal_dialog(qtbot, lambda d=dialog, a=add: click(qtbot, d, a),
                          _answer(qtbot, "Discard", "Discard the unsaved changes"))
        assert typed not in _text(edit)
        assert _text(named(dialog, "Provider name" if "provider" in add else "Agent name")
                     ) == ""
        # Unedited, Add asks nothing (a question would leave the dialog open here).
        click(qtbot, dialog, add)
        assert QApplication.activeModalWidget() in (None, dialog)
        dialog.close_without_asking()
    assert ProviderSettings(workspace.db).list() == []
    assert not workspace.repo.default_agent().instructions


def _hold_the_writer(window: MainWindow) -> threading.Event:
    """Keep the database writer busy until the returned event is set, so what is
    submitted meanwhile waits behind it (as when the person types faster than it runs)."""
    release = threading.Event()
    window.ctx.workers.write(lambda: release.wait(10), name="hold the writer")
    return release


def test_two_facts_and_two_tasks_added_quickly_are_both_stored(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Trip", [("user", "Plan a trip."), ("assistant", "Where?")])
    update_context(workspace, info.id, facts=["Old fact"])
    window = open_window(workspace)
    panel = window.context_panel
    window.context_dock.show()
    window.context_dock.raise_()
    window.open_session(info.id)
    qtbot.waitUntil(lambda: panel.overview is not None
                    and panel.overview.session_id == info.id, timeout=10_000)

    def stored() -> tuple[list[str], list[str]]:
        context = read_session_context(workspace, info.id).context
        return context.facts, [t.description for t in context.tasks]

    for field in ("New fact", "New task"):
        release = _hold_the_writer(window)
        click_into(qtbot, named(window, field))
        for text in ("A", "B"):
            type_text(qtbot, f"{field[4:]} {text}")
            press(qtbot, Qt.Key.Key_Return)
        release.set()
    qtbot.waitUntil(lambda: stored() == (["Old fact", "fact A", "fact B"],
                                         ["task A", "task B"]), timeout=10_000)
    qtbot.waitUntil(lambda: panel.facts() == ["Old fact", "fact A", "fact B"], timeout=10_000)
    assert [panel.tasks_table.item(r, 0).text() for r in range(panel.tasks_table.rowCount())
            ] == ["task A", "task B"]
    # Undo takes out the last add only, then the one before.
    for expected in ((["Old fact", "fact A", "fact B"], ["task A"]),
                     (["Old fact", "fact A", "fact B"], []),
                     (["Old fact", "fact A"], []),
                     (["Old fact"], [])):
        window.ctx.undo_stack.undo()
        qtbot.waitUntil(lambda e=expected: stored() == e, timeout=10_000)
    window.ctx.undo_stack.redo()
    qtbot.waitUntil(lambda: stored() == (["Old fact", "fact A"], []), timeout=10_000)
