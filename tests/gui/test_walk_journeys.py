"""Journeys found walking the app as a stranger would (issue 13's last part), each
driven as a person drives it: keys into the focus, clicks on named controls, then what
the database and the widgets show."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QAbstractButton,
    QApplication,
    QFileDialog,
    QLabel,
    QPlainTextEdit,
    QWidget,
)
from pytestqt.qtbot import QtBot

from tests.gui.journey import focus, named, press, type_text, with_modal_dialog
from workbench.core.conversation import SessionInfo
from workbench.engine.providers import ProviderSettings
from workbench.engine.workspace import Workspace
from workbench.gui.dialogs.import_progress import ImportProgressDialog
from workbench.gui.dialogs.shortcuts import ShortcutsDialog
from workbench.gui.main_window import MainWindow
from workbench.gui.models.timeline import MessageRole

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier


def _shown(kind: type[QWidget]) -> list[QWidget]:
    return [w for w in QApplication.topLevelWidgets() if isinstance(w, kind) and w.isVisible()]


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


def test_import_folder_of_openai_files_from_the_menu(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
    tmp_path: Path,
) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    (folder / "one.json").write_text(json.dumps({"messages": [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4"}]}), encoding="utf-8")
    (folder / "two.json").write_text(json.dumps([
        {"messages": [{"role": "user", "content": "Folder chat A"}]},
        {"messages": [{"role": "user", "content": "Folder chat B"}]}]), encoding="utf-8")
    (folder / "broken.json").write_text('{"messages": [{"role": "user", "content": "cut',
                                        encoding="utf-8")
    window = open_window(workspace)
    _activate(qtbot, window)

    def choose(dialog: QWidget) -> None:
        assert isinstance(dialog, QFileDialog)
        type_text(qtbot, str(folder))
        press(qtbot, Qt.Key.Key_Return)

    with_modal_dialog(qtbot, lambda: qtbot.keyClick(window, Qt.Key.Key_I, CTRL | SHIFT),
                      choose)
    dialogs = [w for w in QApplication.topLevelWidgets()
               if isinstance(w, ImportProgressDialog) and w.isVisible()]
    assert len(dialogs) == 1
    dialog = dialogs[0]
    qtbot.waitUntil(lambda: dialog.label.text().startswith("Imported"), timeout=20_000)
    window.ctx.workers.wait_idle()
    text = dialog.label.text()
    assert "Imported 3 sessions." in text
    assert "broken.json" in text and "not valid JSON" in text
    firsts = sorted(workspace.repo.list_messages(s.id)[0].content
                    for s in workspace.repo.list_sessions())
    assert firsts == ["Folder chat A", "Folder chat B", "What is 2+2?"]
    # Esc leaves the report, and the list shows the new sessions.
    dialog.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog)
    qtbot.keyClick(dialog, Qt.Key.Key_Escape)
    assert not dialog.isVisible()
    qtbot.waitUntil(lambda: window.browser.model.rowCount() == 3)


def test_f1_twice_shows_one_shortcuts_window_that_esc_closes(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    _activate(qtbot, window)
    qtbot.keyClick(window, Qt.Key.Key_F1)
    dialogs = _shown(ShortcutsDialog)
    assert len(dialogs) == 1
    dialog = dialogs[0]
    qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog)
    assert dialog.isAncestorOf(focus())  # the keys go to the help, Up/Down scroll it
    assert ("Keyboard Shortcuts", "F1, Ctrl+/") in dialog.rows()
    # F1 (or Ctrl+/) again, from the main window: the same window comes back.
    _activate(qtbot, window)
    qtbot.keyClick(window, Qt.Key.Key_Slash, CTRL)
    assert _shown(ShortcutsDialog) == [dialog]
    qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog)
    press(qtbot, Qt.Key.Key_Escape)
    assert not _shown(ShortcutsDialog)
    _activate(qtbot, window)  # what the window manager does when a window closes
    qtbot.keyClick(window, Qt.Key.Key_F1)
    assert len(_shown(ShortcutsDialog)) == 1


def test_the_first_keys_after_start_go_to_the_prompt(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Chat", [("system", "Be brief."), ("user", "Hi")])
    window = open_window(workspace)
    window.open_session(info.id)
    _activate(qtbot, window)
    assert window.composer is not None
    assert focus() is window.composer.prompt
    # Space used to land on the first role chip and hide the system messages.
    type_text(qtbot, "What next? ")
    assert window.composer.prompt.toPlainText() == "What next? "
    chips = [w for w in window.timeline.findChildren(QAbstractButton)
             if w.accessibleName().startswith("Show ") and w.isVisible()]
    assert chips and all(chip.isChecked() for chip in chips)


def test_an_empty_database_says_how_to_begin_and_the_steps_work(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow], tmp_path: Path,
) -> None:
    make_session(workspace, "Old", [("user", "hello")])
    window = open_window(workspace)
    _activate(qtbot, window)
    target = tmp_path / "fresh.db"

    def choose(dialog: QWidget) -> None:
        assert isinstance(dialog, QFileDialog)
        type_text(qtbot, str(target))
        press(qtbot, Qt.Key.Key_Return)

    with_modal_dialog(qtbot, lambda: qtbot.keyClick(window, Qt.Key.Key_O, CTRL), choose)
    # Opened on a worker (with progress when it takes a while): the window then switches.
    qtbot.waitUntil(lambda: window.ctx.workspace.db_path == target, timeout=10_000)
    view = window.timeline.view
    assert view.empty_text.startswith("No session is open.")
    assert "Ctrl+I" in view.empty_text and "Ctrl+N" in view.empty_text
    assert "prompt below" in view.empty_text
    # The step it names works: Ctrl+N makes a session, which then says what to do next.
    _activate(qtbot, window)
    qtbot.keyClick(window, Qt.Key.Key_N, CTRL)
    window.ctx.workers.wait_idle()
    qtbot.waitUntil(lambda: window.ctx.current_session_id != 0)
    assert len(window.ctx.workspace.repo.list_sessions()) == 1
    assert view.empty_text.startswith("This session has no messages yet.")
    assert "Ctrl+Enter" in view.empty_text and "Ins" in view.empty_text
    # ... and so does Ins in the empty timeline.
    _activate(qtbot, window)
    qtbot.keyClick(window, Qt.Key.Key_0, CTRL)
    assert focus() is view

    def write(dialog: QWidget) -> None:
        type_text(qtbot, "A first note")
        press(qtbot, Qt.Key.Key_Return, CTRL)

    with_modal_dialog(qtbot, lambda: press(qtbot, Qt.Key.Key_Insert), write)
    window.ctx.workers.wait_idle()
    session = window.ctx.workspace.repo.list_sessions()[0]
    assert [m.content for m in window.ctx.workspace.repo.list_messages(session.id)] == [
        "A first note"]


def test_typing_a_tag_as_the_list_shows_it_filters_the_sessions(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    trip = workspace.repo.create_session("Lisbon weekend", tags=["sample", "travel"])
    workspace.repo.create_session("Sample size maths")
    workspace.repo.create_session("Groceries", tags=["home"])
    window = open_window(workspace)
    _activate(qtbot, window)
    qtbot.keyClick(window, Qt.Key.Key_L, CTRL)
    assert focus().accessibleName() == "Filter sessions"
    type_text(qtbot, "#sample")
    press(qtbot, Qt.Key.Key_Down)  # lands in the filtered list
    assert focus() is window.browser.view
    assert [window.browser.model.index(r, 0).data() for r in
            range(window.browser.model.rowCount())] == [trip.title]
    press(qtbot, Qt.Key.Key_Return)
    assert window.ctx.current_session_id == trip.id


def test_ctrl_g_from_the_prompt_puts_the_keys_on_the_message_jumped_to(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Chat", [("user", "one"), ("assistant", "two"),
                                            ("user", "three")])
    window = open_window(workspace)
    window.open_session(info.id)
    _activate(qtbot, window)
    assert window.composer is not None and focus() is window.composer.prompt

    def answer(dialog: QWidget) -> None:
        type_text(qtbot, "2")
        press(qtbot, Qt.Key.Key_Return)

    with_modal_dialog(qtbot, lambda: qtbot.keyClick(focus(), Qt.Key.Key_G, CTRL), answer)
    _activate(qtbot, window)
    assert focus() is window.timeline.view
    assert window.timeline.view.currentIndex().data(MessageRole).content == "two"
    press(qtbot, Qt.Key.Key_F2)
    assert focus().accessibleName() == "Message text"
    press(qtbot, Qt.Key.Key_End, CTRL)
    type_text(qtbot, "!")
    press(qtbot, Qt.Key.Key_Return, CTRL)
    window.ctx.workers.wait_idle()
    assert [m.content for m in workspace.repo.list_messages(info.id)] == ["one", "two!",
                                                                          "three"]


def test_deleting_a_session_says_how_to_bring_it_back_and_ctrl_z_does(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Only one", [("user", "precious words")])
    window = open_window(workspace)
    _activate(qtbot, window)
    qtbot.keyClick(window, Qt.Key.Key_L, CTRL)
    press(qtbot, Qt.Key.Key_Down)
    assert focus() is window.browser.view
    press(qtbot, Qt.Key.Key_Delete)
    window.ctx.workers.wait_idle()
    qtbot.waitUntil(lambda: window.browser.model.rowCount() == 0)
    said = window.statusBar().currentMessage()
    assert "Deleted 1 session" in said and "Ctrl+Z" in said
    qtbot.keyClick(window, Qt.Key.Key_Z, CTRL)
    window.ctx.workers.wait_idle()
    qtbot.waitUntil(lambda: window.browser.model.rowCount() == 1)
    assert "Brought back 1 session" in window.statusBar().currentMessage()
    assert [m.content for m in workspace.repo.list_messages(info.id)] == ["precious words"]
    # A message deleted in the timeline says so too.
    window.open_session(info.id)
    qtbot.keyClick(window, Qt.Key.Key_0, CTRL)
    press(qtbot, Qt.Key.Key_Home, CTRL)
    press(qtbot, Qt.Key.Key_Delete)
    window.ctx.workers.wait_idle()
    said = window.statusBar().currentMessage()
    assert "Deleted 1 message" in said and "Ctrl+Z" in said
    assert workspace.repo.list_messages(info.id) == []


def test_enter_closes_the_import_report_once_it_is_done(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
    tmp_path: Path,
) -> None:
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps({"messages": [{"role": "user", "content": "What is 2+2?"},
                                             {"role": "assistant", "content": "4"}]}),
                    encoding="utf-8")
    window = open_window(workspace)
    _activate(qtbot, window)

    def choose(dialog: QWidget) -> None:
        type_text(qtbot, str(chat))
        press(qtbot, Qt.Key.Key_Return)

    with_modal_dialog(qtbot, lambda: qtbot.keyClick(window, Qt.Key.Key_I, CTRL), choose)
    dialog = _shown(ImportProgressDialog)[0]
    assert isinstance(dialog, ImportProgressDialog)
    dialog.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog)
    qtbot.waitUntil(lambda: dialog.label.text() == "Imported 1 session.", timeout=20_000)
    # The Close button that replaced Cancel has the keyboard: Enter closes the report.
    assert dialog.isAncestorOf(focus()) and focus().text().replace("&", "") == "Close"
    press(qtbot, Qt.Key.Key_Return)
    assert not dialog.isVisible()
    assert len(workspace.repo.list_sessions()) == 1


def _answer(qtbot: QtBot, text: str) -> Callable[[QWidget], None]:
    def act(box: QWidget) -> None:
        assert "Discard the unsaved changes" in box.findChild(QLabel, "qt_msgbox_label").text()
        button = next(b for b in box.findChildren(QAbstractButton)
                      if b.text().replace("&", "") == text)
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    return act


def test_esc_in_the_settings_dialogs_asks_before_dropping_typed_edits(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    for open_it, field, typed in (
            (window.show_providers, "Provider name", "My server"),
            (window.show_agents, "Instructions", "Always answer in French.")):
        dialog = open_it()
        qtbot.waitUntil(lambda d=dialog: QApplication.activeWindow() is d)
        edit = named(dialog, field)
        target = edit.viewport() if isinstance(edit, QPlainTextEdit) else edit
        qtbot.mouseClick(target, Qt.MouseButton.LeftButton)
        type_text(qtbot, typed)
        # Esc asks; Cancel goes back to the form with the text still there.
        with_modal_dialog(qtbot, lambda: press(qtbot, Qt.Key.Key_Escape),
                          _answer(qtbot, "Cancel"))
        assert dialog.isVisible()
        text = edit.toPlainText() if isinstance(edit, QPlainTextEdit) else edit.text()
        assert typed in text
        # Esc again and Discard: the dialog closes and nothing was stored.
        dialog.activateWindow()
        qtbot.waitUntil(lambda d=dialog: QApplication.activeWindow() is d)
        with_modal_dialog(qtbot, lambda: press(qtbot, Qt.Key.Key_Escape),
                          _answer(qtbot, "Discard"))
        assert not dialog.isVisible()
    assert ProviderSettings(workspace.db).list() == []
    assert not workspace.repo.default_agent().instructions
    # Unedited, Esc just closes.
    dialog = window.show_agents()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog)
    press(qtbot, Qt.Key.Key_Escape)
    assert not dialog.isVisible()


def test_ctrl_n_from_a_side_panel_puts_the_keys_in_the_new_sessions_prompt(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    # The walk: with the keyboard last in the Compaction panel, Ctrl+N opened a new
    # session and the prompt typed next went into the panel's policy fields (a space
    # ticked a box) instead of the prompt the empty session asks for.
    info = make_session(workspace, "Chat", [("user", "Hi")])
    window = open_window(workspace)
    window.open_session(info.id)
    _activate(qtbot, window)
    press(qtbot, Qt.Key.Key_3, CTRL)
    assert window.compaction_panel.isAncestorOf(focus())
    before = {s.id for s in workspace.list_sessions()}
    press(qtbot, Qt.Key.Key_N, CTRL)
    qtbot.waitUntil(lambda: window.ctx.current_session_id not in (0, info.id), timeout=5_000)
    assert window.ctx.current_session_id not in before
    assert window.composer is not None
    assert focus() is window.composer.prompt
    type_text(qtbot, "Plan a trip to Porto ")
    assert window.composer.prompt.toPlainText() == "Plan a trip to Porto "


def test_an_export_named_with_a_formats_ending_is_written_in_that_format(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow], tmp_path: Path,
) -> None:
    # The walk: "notes.md" typed under the first filter (Context file JSON) wrote JSON
    # into notes.md; a name ending in .json got Markdown when that filter was chosen.
    make_session(workspace, "Porto plan", [("user", "Where to eat?"), ("assistant", "Bolhão")])
    window = open_window(workspace)
    _activate(qtbot, window)
    press(qtbot, Qt.Key.Key_L, CTRL)
    press(qtbot, Qt.Key.Key_Down)
    assert window.browser.selected_sessions()
    written: dict[str, str] = {}
    for name in ("notes.md", "chat.jsonl", "session.json", "plain"):
        target = tmp_path / name

        def choose(dialog: QWidget, target: Path = target) -> None:
            assert isinstance(dialog, QFileDialog)
            type_text(qtbot, str(target))
            press(qtbot, Qt.Key.Key_Return)

        _activate(qtbot, window)
        with_modal_dialog(qtbot, lambda: qtbot.keyClick(window, Qt.Key.Key_E, CTRL), choose)
        window.ctx.workers.wait_idle()
        qtbot.waitUntil(lambda: "Exported 1 session" in window.statusBar().currentMessage())
        found = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(name))
        assert len(found) == 1, found
        written[found[0]] = (tmp_path / found[0]).read_text(encoding="utf-8")
    assert written["notes.md"].lstrip().startswith("#")
    assert json.loads(written["chat.jsonl"].splitlines()[0])["messages"][0]["content"] \
        == "Where to eat?"
    assert json.loads(written["session.json"])["recent_history"][1]["content"] == "Bolhão"
    # No ending: the chosen filter's (the first, context-file JSON) is added.
    assert json.loads(written["plain.json"])["recent_history"][0]["role"] == "user"


def test_a_markdown_export_is_listed_for_import_and_imports(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow], tmp_path: Path,
) -> None:
    # The walk: File → Import File listed .json, .jsonl, .zip and .db files only, so the
    # Markdown transcript just exported could not be picked to import it again.
    from PySide6.QtWidgets import QTreeView

    folder = tmp_path / "out"
    folder.mkdir()
    source = Workspace.open(tmp_path / "source.db")
    try:
        info = make_session(source, "Porto plan", [("user", "Where to eat?"),
                                                   ("assistant", "Bolhão market")])
        source.export_sessions([info.id], "markdown", folder / "porto.md")
    finally:
        source.close()
    window = open_window(workspace)
    _activate(qtbot, window)
    listed: list[str] = []

    def choose(dialog: QWidget) -> None:
        assert isinstance(dialog, QFileDialog)
        type_text(qtbot, str(folder))
        press(qtbot, Qt.Key.Key_Return)  # into the folder
        files = dialog.findChild(QTreeView, "treeView")
        assert files is not None

        def names() -> list[str]:
            model, root = files.model(), files.rootIndex()
            return [model.index(row, 0, root).data() for row in range(model.rowCount(root))]

        qtbot.waitUntil(lambda: "porto.md" in names(), timeout=5_000)
        listed.extend(names())
        type_text(qtbot, "porto.md")
        press(qtbot, Qt.Key.Key_Return)

    with_modal_dialog(qtbot, lambda: qtbot.keyClick(window, Qt.Key.Key_I, CTRL), choose)
    assert listed == ["porto.md"]
    dialogs = [w for w in QApplication.topLevelWidgets()
               if isinstance(w, ImportProgressDialog) and w.isVisible()]
    assert len(dialogs) == 1
    qtbot.waitUntil(lambda: dialogs[0].label.text().startswith("Imported"), timeout=20_000)
    window.ctx.workers.wait_idle()
    sessions = workspace.list_sessions()
    assert [s.title for s in sessions] == ["Porto plan"]
    assert [m.content for m in workspace.repo.list_messages(sessions[0].id)] == [
        "Where to eat?", "Bolhão market"]
    dialogs[0].reject()


def test_typing_in_the_tags_box_adds_a_tag_and_keeps_the_others(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    # The walk: Ctrl+Shift+T on a session tagged "sample" and typing "lisbon" left it
    # tagged "lisbon" only: the box opened with every tag selected, so typing replaced them.
    info = make_session(workspace, "Trip", [("user", "Hi")])
    workspace.editing().set_tags(info.id, ["sample", "travel"])
    window = open_window(workspace)
    _activate(qtbot, window)
    press(qtbot, Qt.Key.Key_L, CTRL)
    press(qtbot, Qt.Key.Key_Down)
    assert [s.id for s in window.browser.selected_sessions()] == [info.id]
    shown: list[str] = []

    def add(dialog: QWidget) -> None:
        assert focus().accessibleName() == "Session tags"
        qtbot.waitUntil(lambda: not focus().hasSelectedText())
        shown.append(focus().text())
        type_text(qtbot, "lisbon")
        press(qtbot, Qt.Key.Key_Return)

    with_modal_dialog(qtbot, lambda: press(qtbot, Qt.Key.Key_T, CTRL | SHIFT), add)
    assert shown == ["sample, travel, "]
    qtbot.waitUntil(lambda: workspace.get_session(info.id).tags == ["sample", "travel",
                                                                     "lisbon"])


class _X11LineEditKeys(QObject):
    """Claims Ctrl+E for a field the way a line edit does under the X11 key scheme (end
    of line); the offscreen platform's scheme has no such binding."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if (event.type() == QEvent.Type.ShortcutOverride and isinstance(event, QKeyEvent)
                and event.key() == Qt.Key.Key_E
                and event.modifiers() == Qt.KeyboardModifier.ControlModifier):
            event.accept()
            return True
        return False


def test_ctrl_e_exports_from_the_session_filter_where_a_field_takes_it_for_end_of_line(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow], tmp_path: Path,
) -> None:
    # The walk (X11): Ctrl+L, "#travel" to find the sessions, Ctrl+E did nothing: the
    # filter box took the key as "end of line", so the Export dialog never opened.
    make_session(workspace, "Porto plan", [("user", "Where to eat?"), ("assistant", "Bolhão")])
    window = open_window(workspace)
    _activate(qtbot, window)
    x11 = _X11LineEditKeys()
    for field in (window.browser.filter_edit, window.search.query_edit):
        field.installEventFilter(x11)
    press(qtbot, Qt.Key.Key_L, CTRL)
    assert focus() is window.browser.filter_edit
    type_text(qtbot, "Porto")
    qtbot.waitUntil(lambda: window.browser.selected_sessions() != [])
    target = tmp_path / "porto.md"

    def choose(dialog: QWidget) -> None:
        assert isinstance(dialog, QFileDialog)
        type_text(qtbot, str(target))
        press(qtbot, Qt.Key.Key_Return)

    with_modal_dialog(qtbot, lambda: press(qtbot, Qt.Key.Key_E, CTRL), choose)
    window.ctx.workers.wait_idle()
    qtbot.waitUntil(lambda: "Exported 1 session" in window.statusBar().currentMessage())
    assert "Bolhão" in target.read_text(encoding="utf-8")
    # The field keeps its own editing keys: Ctrl+A selects its text, not every session.
    _activate(qtbot, window)
    press(qtbot, Qt.Key.Key_L, CTRL)
    press(qtbot, Qt.Key.Key_A, CTRL)
    assert window.browser.filter_edit.selectedText() == "Porto"


def test_export_suggests_the_sessions_title_as_the_file_name(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow], tmp_path: Path,
) -> None:
    # The walk: Ctrl+E opened the save dialog with an empty name, so every export began
    # by inventing one; the session's title is what the file is about.
    make_session(workspace, "Porto: plan/day 1", [("user", "Where to eat?"),
                                                  ("assistant", "Bolhão")])
    window = open_window(workspace)
    _activate(qtbot, window)
    press(qtbot, Qt.Key.Key_L, CTRL)
    press(qtbot, Qt.Key.Key_Down)
    offered: list[str] = []

    def first(dialog: QWidget) -> None:  # into tmp_path, which the window then remembers
        offered.append(focus().selectedText())
        type_text(qtbot, str(tmp_path / "first"))
        press(qtbot, Qt.Key.Key_Return)

    def second(dialog: QWidget) -> None:  # the name as offered: Enter
        offered.append(focus().selectedText())
        press(qtbot, Qt.Key.Key_Return)

    for act in (first, second):
        _activate(qtbot, window)
        with_modal_dialog(qtbot, lambda: qtbot.keyClick(window, Qt.Key.Key_E, CTRL), act)
        window.ctx.workers.wait_idle()
        qtbot.waitUntil(lambda: "Exported 1 session" in window.statusBar().currentMessage())
        window.statusBar().clearMessage()
    assert offered == ["Porto plan day 1"] * 2
    assert sorted(p.name for p in tmp_path.glob("*.json")) == [
        "Porto plan day 1.json", "first.json"]
