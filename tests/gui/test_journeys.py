"""Journeys a person makes in the window, driven as they make them: keys into whatever
has the focus, clicks on controls found by accessible name, then what the database and
the widgets show."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLabel, QPlainTextEdit, QWidget
from pytestqt.qtbot import QtBot

from tests.gui.journey import focus, named, press, type_text, with_modal_dialog
from workbench.core.conversation import SessionInfo
from workbench.engine.workspace import Workspace
from workbench.gui.main_window import MainWindow

CHAT = [
    ("user", "What is the capital of France?"),
    ("assistant", "Paris."),
    ("user", "Thanks"),
]

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier


@pytest.fixture
def chat_open(workspace: Workspace, make_session: Callable[..., SessionInfo],
              open_window: Callable[..., MainWindow]) -> tuple[SessionInfo, MainWindow]:
    """The CHAT session, stored and open in a shown window."""
    info = make_session(workspace, "Chat", CHAT)
    window = open_window(workspace)
    window.open_session(info.id)
    return info, window


def _contents(ws: Workspace, session_id: int) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in ws.repo.list_messages(session_id)]


def _to_timeline_row(qtbot: QtBot, window: MainWindow, row: int) -> None:
    """Ctrl+0 to the timeline, Ctrl+Home, then Down to ``row``."""
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    qtbot.keyClick(window, Qt.Key.Key_0, CTRL)
    assert focus() is window.timeline.view
    press(qtbot, Qt.Key.Key_Home, CTRL)
    for _ in range(row):
        press(qtbot, Qt.Key.Key_Down)
    assert window.timeline.view.currentIndex().row() == row


def test_f2_puts_the_caret_in_the_editor_and_typing_edits_the_message(
    qtbot: QtBot, workspace: Workspace, chat_open: tuple[SessionInfo, MainWindow],
) -> None:
    info, window = chat_open
    _to_timeline_row(qtbot, window, 1)
    press(qtbot, Qt.Key.Key_F2)
    editor = focus()
    assert isinstance(editor, QPlainTextEdit) and editor.accessibleName() == "Message text"
    # End stays in the editor (it used to jump the list away and close the editor).
    press(qtbot, Qt.Key.Key_End, CTRL)
    type_text(qtbot, " On the Seine.")
    assert window.timeline.view.editing
    press(qtbot, Qt.Key.Key_Return, CTRL)
    window.ctx.workers.wait_idle()
    assert _contents(workspace, info.id)[1] == ("assistant", "Paris. On the Seine.")
    assert focus() is window.timeline.view  # back in the list after saving


def test_double_click_opens_the_editor_with_the_caret_in_it(
    qtbot: QtBot, workspace: Workspace, chat_open: tuple[SessionInfo, MainWindow],
) -> None:
    info, window = chat_open
    view = window.timeline.view
    rect = view.visualRect(window.timeline.model.index(2, 0))
    # A real double click: a first click, then the second press that Qt reports as a
    # double click.
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.mouseDClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.waitUntil(lambda: view.editing)
    assert focus().accessibleName() == "Message text"
    press(qtbot, Qt.Key.Key_A, CTRL)
    type_text(qtbot, "Thank you!")
    press(qtbot, Qt.Key.Key_Return, CTRL)
    window.ctx.workers.wait_idle()
    assert _contents(workspace, info.id)[2] == ("user", "Thank you!")


def test_insert_below_and_above_put_the_caret_in_the_new_message(
    qtbot: QtBot, workspace: Workspace, chat_open: tuple[SessionInfo, MainWindow],
) -> None:
    info, window = chat_open
    _to_timeline_row(qtbot, window, 1)
    typed: list[str] = []

    def type_into_dialog(text: str) -> Callable[[QWidget], None]:
        def act(_dialog: QWidget) -> None:
            widget = focus()
            typed.append(widget.accessibleName())
            qtbot.keyClicks(widget, text)
            qtbot.keyClick(widget, Qt.Key.Key_Return, CTRL)
        return act

    with_modal_dialog(qtbot, lambda: press(qtbot, Qt.Key.Key_Insert),
                      type_into_dialog("Inserted below"))
    window.ctx.workers.wait_idle()
    assert _contents(workspace, info.id)[2][1] == "Inserted below"

    _to_timeline_row(qtbot, window, 0)
    with_modal_dialog(qtbot, lambda: press(qtbot, Qt.Key.Key_Insert, SHIFT),
                      type_into_dialog("Inserted above"))
    window.ctx.workers.wait_idle()
    assert _contents(workspace, info.id)[0][1] == "Inserted above"
    assert typed == ["Message text", "Message text"]


def test_an_empty_message_is_not_saved_and_the_editor_says_why(
    qtbot: QtBot, workspace: Workspace, chat_open: tuple[SessionInfo, MainWindow],
) -> None:
    info, window = chat_open
    # Ins, then Ctrl+Enter with nothing typed: the dialog stays, saying why.
    _to_timeline_row(qtbot, window, 0)
    said: list[str] = []

    def save_empty_then_cancel(dialog: QWidget) -> None:
        assert focus().accessibleName() == "Message text"
        press(qtbot, Qt.Key.Key_Return, CTRL)
        assert dialog.isVisible()
        note = named(dialog, "Editor note", QLabel)
        said.append(note.text())
        press(qtbot, Qt.Key.Key_Escape)

    with_modal_dialog(qtbot, lambda: press(qtbot, Qt.Key.Key_Insert), save_empty_then_cancel)
    window.ctx.workers.wait_idle()
    assert "empty assistant message cannot be saved" in said[0]
    assert _contents(workspace, info.id) == CHAT

    # F2, Ctrl+A, Del, Ctrl+Enter: the editor stays open, the message as it was.
    _to_timeline_row(qtbot, window, 0)
    press(qtbot, Qt.Key.Key_F2)
    assert focus().accessibleName() == "Message text"
    press(qtbot, Qt.Key.Key_A, CTRL)
    press(qtbot, Qt.Key.Key_Delete)
    press(qtbot, Qt.Key.Key_Return, CTRL)
    window.ctx.workers.wait_idle()
    assert window.timeline.view.editing
    note = named(window.timeline.view, "Editor note", QLabel)
    assert "empty user message cannot be saved" in note.text()
    assert _contents(workspace, info.id) == CHAT
    # Typing something takes the note away, and saves.
    type_text(qtbot, "Where is Paris?")
    assert not note.isVisible()
    press(qtbot, Qt.Key.Key_Return, CTRL)
    window.ctx.workers.wait_idle()
    assert not window.timeline.view.editing
    assert _contents(workspace, info.id)[0] == ("user", "Where is Paris?")


def test_f2_in_the_session_list_renames_with_the_keyboard(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Chat", CHAT)
    window = open_window(workspace)
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    qtbot.keyClick(window, Qt.Key.Key_L, CTRL)  # the session filter
    press(qtbot, Qt.Key.Key_Down)  # into the list
    browser_view = window.browser.view
    qtbot.waitUntil(lambda: focus() is browser_view)
    press(qtbot, Qt.Key.Key_F2)
    editor = focus()
    assert editor is not browser_view, "F2 left the focus in the list"
    press(qtbot, Qt.Key.Key_A, CTRL)
    type_text(qtbot, "Paris questions")
    press(qtbot, Qt.Key.Key_Return)  # the view commits the edit on its next turn
    qtbot.waitUntil(lambda: workspace.repo.get_session(info.id).title == "Paris questions")
    assert focus() is browser_view


def _listed(window: MainWindow) -> list[tuple[str, int]]:
    from workbench.gui.models.sessions import SessionRole

    model = window.browser.model
    infos = [model.index(row, 0).data(SessionRole) for row in range(model.rowCount())]
    return [(info.title, info.message_count) for info in infos]


def test_the_session_list_follows_edits_inserts_and_activity(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    older = make_session(workspace, "Older", CHAT)
    make_session(workspace, "Newer", [("user", "Hello")] * 5)  # its last message is later
    window = open_window(workspace)
    assert _listed(window) == [("Newer", 5), ("Older", 3)]
    tokens_before = workspace.repo.get_session(older.id).token_count
    window.open_session(older.id)
    _to_timeline_row(qtbot, window, 2)

    def answer(_dialog: QWidget) -> None:
        qtbot.keyClicks(focus(), "A much longer message " * 20)
        qtbot.keyClick(focus(), Qt.Key.Key_Return, CTRL)

    with_modal_dialog(qtbot, lambda: press(qtbot, Qt.Key.Key_Insert), answer)
    # The inserted message counts, and the session moved to the top as the active one.
    qtbot.waitUntil(lambda: _listed(window) == [("Older", 4), ("Newer", 5)])
    from workbench.gui.models.sessions import SessionRole

    shown = window.browser.model.index(0, 0).data(SessionRole)
    assert shown.token_count == workspace.repo.get_session(older.id).token_count
    assert shown.token_count > tokens_before


def test_deleting_the_open_session_clears_the_role_chips(
    qtbot: QtBot, workspace: Workspace, chat_open: tuple[SessionInfo, MainWindow],
) -> None:
    info, window = chat_open
    chips = window.timeline.chips.chips
    qtbot.waitUntil(lambda: chips["user"].text().endswith("2"))
    window.browser.view.setFocus()
    press(qtbot, Qt.Key.Key_Delete)
    qtbot.waitUntil(lambda: not window.ctx.current_session_id)
    assert [chip.text().split()[-1] for chip in chips.values()] == ["0"] * len(chips)


WRITER = """
import sys
from workbench.engine.memory import Memory
from workbench.engine.workspace import Workspace

ws = Workspace.open(sys.argv[1])
memory = Memory.open(ws, int(sys.argv[2]))
for i in range(int(sys.argv[3])):
    memory.append("user", f"from the other process {i}")
other = ws.repo.create_session("Made elsewhere")
ws.close()
"""


def test_the_window_follows_a_second_process_writing_to_the_database(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    import subprocess
    import sys

    info = make_session(workspace, "Chat", CHAT)
    window = open_window(workspace)
    window.db_watcher.timer.setInterval(100)
    window.open_session(info.id)
    assert window.timeline.model.rowCount() == 3
    done = subprocess.run([sys.executable, "-c", WRITER, str(workspace.db_path),
                           str(info.id), "5"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # The list shows the new session and the new count; the open timeline grew.
    qtbot.waitUntil(lambda: window.timeline.model.rowCount() == 8, timeout=10_000)
    qtbot.waitUntil(lambda: dict(_listed(window)) == {"Chat": 8, "Made elsewhere": 0},
                    timeout=10_000)
    last = window.timeline.model.message_at(7)
    assert last is not None and last.content == "from the other process 4"


def test_the_rename_tags_and_jump_fields_have_names_and_take_the_keys(
    qtbot: QtBot, workspace: Workspace, chat_open: tuple[SessionInfo, MainWindow],
) -> None:
    """The in-place rename field and the Tags and Jump boxes are named for screen
    readers, and what is typed into them (as the focus receives it) is what is stored."""
    info, window = chat_open
    window.browser.view.setFocus()
    press(qtbot, Qt.Key.Key_F2)
    assert focus().accessibleName() == "Session title"
    press(qtbot, Qt.Key.Key_Escape)

    def answer(text: str, name: str) -> Callable[[QWidget], None]:
        def act(_dialog: QWidget) -> None:
            assert focus().accessibleName() == name
            press(qtbot, Qt.Key.Key_A, CTRL)
            type_text(qtbot, text)
            press(qtbot, Qt.Key.Key_Return)
        return act

    with_modal_dialog(qtbot, window.browser.tags_action.trigger,
                      answer("travel, #france", "Session tags"))
    qtbot.waitUntil(lambda: workspace.get_session(info.id).tags == ["travel", "france"])

    window.timeline.view.setFocus()
    with_modal_dialog(qtbot, window.timeline.jump_action.trigger,
                      answer("2", "Message number or id"))
    assert window.timeline.view.currentIndex().row() == 1


def test_insert_below_offers_the_role_that_answers_the_message(
    qtbot: QtBot, workspace: Workspace, chat_open: tuple[SessionInfo, MainWindow],
) -> None:
    # The walk: Ins below the assistant's reply offered "Assistant" again, so the user's
    # next question was written as a second reply unless the role was changed by hand.
    info, window = chat_open
    offered: list[str] = []

    def write(dialog: QWidget) -> None:
        offered.append(dialog.role())
        type_text(qtbot, f"Below row {len(offered)}")
        press(qtbot, Qt.Key.Key_Return, CTRL)

    _to_timeline_row(qtbot, window, 1)  # "Paris." (assistant)
    with_modal_dialog(qtbot, lambda: press(qtbot, Qt.Key.Key_Insert), write)
    window.ctx.workers.wait_idle()
    _to_timeline_row(qtbot, window, 0)  # the user's question
    with_modal_dialog(qtbot, lambda: press(qtbot, Qt.Key.Key_Insert), write)
    window.ctx.workers.wait_idle()
    assert offered == ["user", "assistant"]
    assert _contents(workspace, info.id)[1:4] == [
        ("assistant", "Below row 2"), ("assistant", "Paris."), ("user", "Below row 1")]
