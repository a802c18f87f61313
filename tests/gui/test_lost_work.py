"""Journeys where a person used to lose work without being asked (the new-user walk's
"lost work" findings), each driven as a person drives it: keys into the focus, clicks on
named controls, then what the database and the widgets show."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractButton, QApplication, QLabel, QPlainTextEdit, QWidget
from pytestqt.qtbot import QtBot

from tests.gui.journey import click, named, type_text, with_modal_dialog
from workbench.engine.providers import ProviderSettings
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
