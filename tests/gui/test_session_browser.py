"""The session browser: lazy list, filter, and undoable session actions."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from PySide6.QtCore import QItemSelectionModel, QModelIndex, QRect, Qt
from PySide6.QtGui import QFontMetrics, QImage, QPainter
from PySide6.QtWidgets import QApplication, QLabel, QListView, QStyleOptionViewItem
from pytestqt.qtbot import QtBot

from tests.gui.conftest import settle
from tests.gui.journey import click_into, named, press, type_text
from workbench.core.conversation import Conversation, Message, SessionInfo
from workbench.engine.workspace import Workspace
from workbench.gui.main_window import MainWindow
from workbench.gui.models.sessions import SessionListModel, SessionRole

T0 = datetime(2025, 5, 1, 9, 0, tzinfo=UTC)


def titles(window: MainWindow) -> list[str]:
    model = window.browser.model
    return [model.index(r, 0).data(SessionRole).title for r in range(model.rowCount())]


def wait_list(qtbot: QtBot, window: MainWindow, expected: list[str]) -> None:
    window.ctx.workers.wait_idle()
    try:
        qtbot.waitUntil(lambda: titles(window) == expected, timeout=5_000)
    except Exception:
        raise AssertionError(f"{titles(window)} != {expected}") from None


def select(window: MainWindow, *names: str) -> None:
    view = window.browser.view
    selection = view.selectionModel()
    selection.clearSelection()
    for row in range(window.browser.model.rowCount()):
        if window.browser.model.session_at(row).title in names:
            selection.select(window.browser.model.index(row, 0),
                             QItemSelectionModel.SelectionFlag.Select)
            view.setCurrentIndex(window.browser.model.index(row, 0)) if len(names) == 1 \
                else None


def test_model_reads_sessions_a_page_at_a_time(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
) -> None:
    for number in range(7):
        make_session(workspace, f"Session {number}", [("user", "hi")])
    model = SessionListModel(workspace, page_size=3)
    assert model.rowCount() == 3
    while model.canFetchMore(QModelIndex()):
        model.fetchMore(QModelIndex())
    assert {model.session_at(r).title for r in range(model.rowCount())} == {
        f"Session {n}" for n in range(7)}
    model.set_filter_text("session 5")
    assert [model.session_at(r).title for r in range(model.rowCount())] == ["Session 5"]
    assert model.total() == 1


def test_filter_box_narrows_the_list(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    make_session(workspace, "Lisbon trip", [("user", "hi")])
    make_session(workspace, "Bug triage", [("user", "hi")])
    window = open_window(workspace)
    qtbot.keyClicks(window.browser.filter_edit, "lisb")
    qtbot.waitUntil(lambda: titles(window) == ["Lisbon trip"], timeout=3_000)
    window.browser.filter_edit.clear()
    qtbot.waitUntil(lambda: len(titles(window)) == 2, timeout=3_000)


def test_rename_pin_and_tag_then_undo(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    older = make_session(workspace, "Older", [("user", "hi")])
    make_session(workspace, "Newer", [("user", "hi")])
    window = open_window(workspace)
    browser = window.browser
    wait_list(qtbot, window, ["Newer", "Older"])

    browser.set_pinned([older.id], True)
    # Pinned sessions come first.
    wait_list(qtbot, window, ["Older", "Newer"])
    browser.rename_session(older.id, "Older, renamed")
    browser.set_tags(older.id, ["work", "urgent"])
    wait_list(qtbot, window, ["Older, renamed", "Newer"])
    info = workspace.repo.get_session(older.id)
    assert (info.title, info.pinned, info.tags) == ("Older, renamed", True, ["work", "urgent"])

    for _ in range(3):
        window.undo_action.trigger()
    window.ctx.workers.wait_idle()
    # The store stamps every change with the time, so the undone session counts as the
    # most recently updated: its values come back, its place in the list does not.
    qtbot.waitUntil(lambda: sorted(titles(window)) == ["Newer", "Older"], timeout=5_000)
    info = workspace.repo.get_session(older.id)
    assert (info.title, info.pinned, info.tags) == ("Older", False, [])


def test_rename_in_place(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Draft", [("user", "hi")])
    window = open_window(workspace)
    model = window.browser.model
    assert model.setData(model.index(0, 0), "Final title", Qt.ItemDataRole.EditRole)
    wait_list(qtbot, window, ["Final title"])
    assert workspace.repo.get_session(info.id).title == "Final title"
    assert window.ctx.undo_stack.undoText() == "Rename session"


def test_archive_hides_and_the_archived_switch_shows(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    keep = make_session(workspace, "Keep", [("user", "hi")])
    old = make_session(workspace, "Old", [("user", "hi")])
    window = open_window(workspace)
    window.browser.set_archived([old.id], True)
    wait_list(qtbot, window, ["Keep"])
    window.browser.archived_box.setChecked(True)
    wait_list(qtbot, window, ["Old", "Keep"])
    assert window.browser.model.session_at(0).archived
    window.undo_action.trigger()
    window.browser.archived_box.setChecked(False)
    window.ctx.workers.wait_idle()
    qtbot.waitUntil(lambda: sorted(titles(window)) == ["Keep", "Old"], timeout=5_000)
    assert not workspace.repo.get_session(old.id).archived
    assert keep.id in {s.id for s in workspace.list_sessions()}


def test_delete_several_then_undo_restores_them_exactly(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    first = make_session(workspace, "First", [("user", "a"), ("assistant", "b")])
    second = make_session(workspace, "Second", [("user", "c")])
    make_session(workspace, "Third", [("user", "d")])
    before = {s.id: s for s in workspace.list_sessions()}
    window = open_window(workspace)
    window.open_session(first.id)
    order = titles(window)
    select(window, "First", "Second")
    window.browser.view.setFocus()
    qtbot.keyClick(window.browser.view, Qt.Key.Key_Delete)
    wait_list(qtbot, window, ["Third"])
    # The open session was among them: the timeline is empty now.
    assert window.ctx.current_session_id == 0
    # Nothing is deleted from the database while the delete can be undone.
    assert workspace.repo.get_session(first.id).message_count == 2

    window.undo_action.trigger()
    wait_list(qtbot, window, order)
    after = {s.id: s for s in workspace.list_sessions()}
    # Same ids, same times, same order: the sessions are back exactly.
    assert after == before
    # The session that was open is open again (the walk: undo left "No session is open").
    qtbot.waitUntil(lambda: window.ctx.current_session_id == first.id)
    qtbot.waitUntil(lambda: window.timeline.model.rowCount() == 2)

    window.redo_action.trigger()
    wait_list(qtbot, window, ["Third"])
    window.close()
    assert [s.title for s in workspace.list_sessions(include_archived=True)] == ["Third"]
    assert second.id not in {s.id for s in workspace.list_sessions()}


def test_fork_copies_the_session(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Original", [("user", "a"), ("assistant", "b")])
    window = open_window(workspace)
    window.browser.fork(info.id)
    window.ctx.workers.wait_idle()
    qtbot.waitUntil(lambda: "Original (fork)" in titles(window))
    forked = window.ctx.current_session_id
    assert forked != info.id
    assert [m.content for m in workspace.repo.list_messages(forked)] == ["a", "b"]
    assert workspace.repo.get_session(forked).forked_from_session_id == info.id


def test_search_hides_sessions_waiting_in_the_trash(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    gone = make_session(workspace, "Gone", [("user", "pineapple pizza")])
    window = open_window(workspace)
    window.browser.delete_sessions([gone.id])
    window.ctx.workers.wait_idle()
    window.search.query_edit.setText("pineapple")
    with qtbot.waitSignal(window.search.search_finished, timeout=5_000):
        window.search.search()
    assert window.search.hits() == []


def test_a_filter_that_matches_nothing_says_so_in_the_list(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    make_session(workspace, "Lisbon weekend", [("user", "hi")])
    window = open_window(workspace)
    field = named(window, "Filter sessions")
    click_into(qtbot, field)
    type_text(qtbot, "zanzibar")
    wait_list(qtbot, window, [])
    note = named(window, "No sessions listed", QLabel)
    qtbot.waitUntil(note.isVisible)
    assert note.text().startswith("No session matches “zanzibar”.")
    assert "tick Archived" in note.text()
    assert window.browser.view.viewport().rect().contains(note.geometry())
    press(qtbot, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    press(qtbot, Qt.Key.Key_Backspace)
    wait_list(qtbot, window, ["Lisbon weekend"])
    assert not note.isVisible()


@pytest.mark.parametrize("size", [(1024, 700), (1280, 800), (1920, 1080)],
                         ids=["1024x700", "1280x800", "1920x1080"])
def test_rows_show_their_counts_whole_and_their_tags_at_every_size(
    size: tuple[int, int], qtbot: QtBot, workspace: Workspace,
    open_window: Callable[..., MainWindow],
) -> None:
    """At 1024 and 1280 the counts were cut ("3,000 message…", "928,7…") and tags were
    only seen at 1920."""
    messages = [Message(role=("user", "assistant")[i % 2], content=f"m{i}",
                        created_at=T0 + timedelta(seconds=i), token_count=310,
                        token_encoding="o200k_base") for i in range(3_000)]
    big = workspace.repo.import_many([Conversation(title="Big export", messages=messages,
                                                   tags=["support", "customer-care"])])
    info = workspace.get_session(big[0].session.id)
    assert (info.message_count, info.token_count) == (3_000, 930_000)
    window = open_window(workspace, size=size)
    view = window.browser.view
    index = window.browser.model.index(0, 0)
    drawn = _drawn_texts(view, index)
    counts = [(rect, text, fm) for rect, text, fm in drawn if "msgs" in text]
    assert [t for _r, t, _fm in counts] == ["3,000 msgs · 930k tok"]
    rect, text, fm = counts[0]
    assert fm.horizontalAdvance(text) <= rect.width()
    tags = [t for _r, t, _fm in drawn if t.startswith("#")]
    assert tags and tags[0].startswith("#sup"), drawn
    # The tooltip keeps the full figures.
    tip = index.data(Qt.ItemDataRole.ToolTipRole)
    assert "3,000 messages" in tip and "930,000 tokens" in tip


def _drawn_texts(view: QListView, index: QModelIndex) -> list[tuple[QRect, str, QFontMetrics]]:
    """What the row's delegate draws, as (rect, text, metrics) triples."""

    class RecordingPainter(QPainter):
        def __init__(self, device: QImage) -> None:
            super().__init__(device)
            self.texts: list[tuple[QRect, str, QFontMetrics]] = []

        def drawText(self, *args: object) -> None:  # noqa: N802 - Qt's name
            if len(args) == 3 and isinstance(args[0], QRect) and isinstance(args[2], str):
                self.texts.append((QRect(args[0]), args[2], QFontMetrics(self.font())))
            super().drawText(*args)  # type: ignore[call-overload]

    option = QStyleOptionViewItem()
    option.rect = view.visualRect(index)
    option.font = view.font()
    option.palette = view.palette()
    option.widget = view
    image = QImage(view.viewport().size(), QImage.Format.Format_ARGB32)
    painter = RecordingPainter(image)
    view.itemDelegate().paint(painter, option, index)
    painter.end()
    return painter.texts


def test_the_filter_placeholder_fits_at_1024_wide(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace, size=(1024, 700))
    field = window.browser.filter_edit
    settle(window)
    # The frame and margins take a few pixels a side, the clear button about a square.
    margins = field.textMargins()
    room = (field.contentsRect().width() - margins.left() - margins.right()
            - field.height() - 8)
    shown = field.placeholderText()
    assert shown == "Title or #tag"
    assert field.fontMetrics().horizontalAdvance(shown) <= room, (shown, room)


def test_a_title_typed_in_place_survives_the_list_being_read_again(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    """Another window's or desktop's change arrives while a title is typed in the list
    (F2): the list is read again once the editor closes, not under it (a new list closed
    the editor and what was typed was lost)."""
    info = make_session(workspace, "Draft", [("user", "hi")])
    other = make_session(workspace, "Other", [("user", "hi")])
    window = open_window(workspace)
    window.activateWindow()
    window.browser.view.setFocus()
    window.browser.view.setCurrentIndex(window.browser.model.index(
        window.browser.model.row_of(info.id) or 0, 0))
    press(qtbot, Qt.Key.Key_F2)
    editor = QApplication.focusWidget()
    assert editor is not None and editor.accessibleName() == "Session title"
    press(qtbot, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    type_text(qtbot, "Typed while the list changed")
    workspace.repo.rename_session(other.id, "Renamed elsewhere")  # as another window would
    window.ctx.sessions_changed.emit()  # what the database watcher says then
    window.browser.reload()
    assert QApplication.focusWidget() is editor  # still typing
    press(qtbot, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: workspace.repo.get_session(info.id).title
                    == "Typed while the list changed", timeout=5_000)
    wait_list(qtbot, window, ["Typed while the list changed", "Renamed elsewhere"])


def test_a_new_session_is_in_the_list_even_when_a_filter_hid_it(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    # The walk: "Paris" typed in the filter, then Ctrl+N: the new session opened with no
    # row in the list (the filter kept only "Paris trip"), so F2 or Del had nothing to act on.
    make_session(workspace, "Paris trip", [("user", "hi")])
    make_session(workspace, "Bug triage", [("user", "hi")])
    window = open_window(workspace)
    press(qtbot, Qt.Key.Key_L, Qt.KeyboardModifier.ControlModifier)
    type_text(qtbot, "Paris")
    wait_list(qtbot, window, ["Paris trip"])
    press(qtbot, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: "New session" in titles(window), timeout=5_000)
    assert window.browser.filter_edit.text() == ""
    assert sorted(titles(window)) == ["Bug triage", "New session", "Paris trip"]
    qtbot.waitUntil(lambda: [s.title for s in window.browser.selected_sessions()]
                    == ["New session"], timeout=5_000)
