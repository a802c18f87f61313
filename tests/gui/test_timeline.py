"""The timeline: rows, role chips, folded runs, editing with undo, and long sessions."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QGuiApplication, QTextOption
from pytestqt.qtbot import QtBot

from tests.gui.journey import press
from workbench.core.conversation import Message, SessionInfo
from workbench.engine.workspace import Workspace
from workbench.gui.delegates.markdown import SafeDocument
from workbench.gui.main_window import MainWindow
from workbench.gui.models.timeline import (
    KindRole,
    MessageRole,
    SessionIndex,
    TimelineModel,
    build_rows,
)

CHAT = [
    ("system", "You are terse."),
    ("user", "What is the capital of France?"),
    ("assistant", "Paris."),
    ("tool", "lookup result: Paris, population 2.1M"),
    ("assistant", "Paris has about 2.1 million people."),
    ("user", "Thanks"),
]


def shown_contents(window: MainWindow) -> list[str]:
    model = window.timeline.model
    out = []
    for row in range(model.rowCount()):
        message = model.index(row, 0).data(MessageRole)
        out.append(message.content if message is not None else "<marker>")
    return out


def stored_contents(ws: Workspace, session_id: int) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in ws.repo.list_messages(session_id)]


def test_session_index_rows_follow_roles_and_folded_runs() -> None:
    rows = [(10 + i, i, role, state) for i, (role, state) in enumerate([
        ("system", "active"), ("user", "folded"), ("assistant", "folded"), ("tool", "folded"),
        ("user", "active"), ("assistant", "evicted"), ("assistant", "active")])]
    index = SessionIndex.from_rows(rows)
    assert index.role_counts() == {"system": 1, "user": 2, "assistant": 3, "tool": 1}

    every = build_rows(index, {"system", "user", "assistant", "tool"}, set())
    # Runs collapse behind one marker each: folded 1-3, evicted 5.
    assert list(every.rows) == [0, -1, 4, -2, 6]
    assert [(r.start, r.end, r.state, r.shown) for r in every.runs] == [
        (1, 4, "folded", 3), (5, 6, "evicted", 1)]

    opened = build_rows(index, {"system", "user", "assistant", "tool"}, {11})
    assert list(opened.rows) == [0, -1, 1, 2, 3, 4, -2, 6]

    no_tools = build_rows(index, {"system", "user", "assistant"}, {11})
    assert list(no_tools.rows) == [0, -1, 1, 2, 4, -2, 6]
    assert no_tools.runs[0].shown == 2

    only_users = build_rows(index, {"user"}, set())
    # The evicted run holds no user message: it is not shown at all.
    assert list(only_users.rows) == [-1, 4]


def test_session_shows_every_message_in_order(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Chat", CHAT)
    window = open_window(workspace)
    window.open_session(info.id)
    assert shown_contents(window) == [text for _role, text in CHAT]
    assert window.timeline.chips.chips["tool"].text().endswith("1")
    assert window.timeline.chips.chips["assistant"].text().endswith("2")
    assert "6 messages" in window.session_label.text()
    # The view keeps to the end of the session when it opens.
    assert window.timeline.view.at_end
    assert window.timeline.view.last_visible_row() == len(CHAT) - 1


def test_role_chip_hides_tool_messages(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Chat", CHAT)
    window = open_window(workspace)
    window.open_session(info.id)
    chip = window.timeline.chips.chips["tool"]
    qtbot.mouseClick(chip, Qt.MouseButton.LeftButton)
    assert not chip.isChecked()
    contents = shown_contents(window)
    assert "lookup result: Paris, population 2.1M" not in contents
    assert len(contents) == len(CHAT) - 1
    qtbot.mouseClick(chip, Qt.MouseButton.LeftButton)
    assert shown_contents(window) == [text for _role, text in CHAT]


def test_edit_in_place_then_undo_and_redo(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Chat", CHAT)
    window = open_window(workspace)
    window.open_session(info.id)
    timeline = window.timeline
    row = 2  # "Paris."
    index = timeline.model.index(row, 0)
    timeline.view.setCurrentIndex(index)
    timeline.view.setFocus()
    timeline.edit_action.trigger()
    editor = timeline.view._editor_widget()
    assert editor is not None and editor.isVisible()
    assert editor.text() == "Paris."
    editor.text_edit.setPlainText("Paris, on the Seine.")
    editor.role_box.setCurrentIndex(editor.role_box.findData("user"))
    qtbot.mouseClick(editor.save_button, Qt.MouseButton.LeftButton)
    settle = window.ctx.workers.wait_idle
    assert settle()

    stored = stored_contents(workspace, info.id)
    assert stored[row] == ("user", "Paris, on the Seine.")
    assert shown_contents(window)[row] == "Paris, on the Seine."
    # The edited text was counted again for the session total.
    assert workspace.repo.get_message(timeline.model.index(row, 0).data(MessageRole).id
                                      ).token_count is not None

    window.undo_action.trigger()
    assert settle()
    assert stored_contents(workspace, info.id)[row] == ("assistant", "Paris.")
    assert shown_contents(window)[row] == "Paris."

    window.redo_action.trigger()
    assert settle()
    assert stored_contents(workspace, info.id)[row] == ("user", "Paris, on the Seine.")


def test_editor_cancel_changes_nothing(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Chat", CHAT)
    window = open_window(workspace)
    window.open_session(info.id)
    view = window.timeline.view
    view.setCurrentIndex(window.timeline.model.index(1, 0))
    view.edit(view.currentIndex())
    editor = view._editor_widget()
    assert editor is not None
    editor.text_edit.setPlainText("something else")
    qtbot.keyClick(editor.text_edit, Qt.Key.Key_Escape)
    window.ctx.workers.wait_idle()
    assert not view.editing
    assert stored_contents(workspace, info.id) == CHAT
    assert window.ctx.undo_stack.count() == 0


def test_a_message_too_long_to_edit_says_so_and_is_never_saved_from_the_editor(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    # A text box holding 5 MB took seconds to open (20 MB most of a minute), the window
    # frozen: such a message opens an editor that says why it holds no text.
    from workbench.gui.delegates.message_editor import EDIT_CHARS

    huge = "x" * (EDIT_CHARS + 1)
    chat = [("user", "short"), ("assistant", huge)]
    info = make_session(workspace, "Chat", chat)
    window = open_window(workspace)
    window.open_session(info.id)
    view = window.timeline.view
    view.setCurrentIndex(window.timeline.model.index(1, 0))
    view.setFocus()
    press(qtbot, Qt.Key.Key_F2)
    editor = view._editor_widget()
    assert editor is not None and editor.isVisible()
    assert "too long to edit here" in editor.text_edit.toPlainText()
    assert editor.text_edit.isReadOnly() and not editor.save_button.isEnabled()
    press(qtbot, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert view.editing  # Ctrl+Enter saved nothing and closed nothing
    window.timeline.view.commit_edit()  # what opening another session does
    press(qtbot, Qt.Key.Key_Escape)
    window.ctx.workers.wait_idle()
    assert not view.editing
    assert stored_contents(workspace, info.id) == chat
    assert window.ctx.undo_stack.count() == 0


def test_a_message_with_a_long_word_is_edited_wrapped_anywhere(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    # Wrapping a line without break points costs the square of its length.
    word = "<" * 50_000
    info = make_session(workspace, "Chat", [("user", f"a {word} b"), ("user", "two words")])
    window = open_window(workspace)
    window.open_session(info.id)
    view = window.timeline.view
    for row, between_words in ((0, False), (1, True)):
        view.setCurrentIndex(window.timeline.model.index(row, 0))
        view.setFocus()
        press(qtbot, Qt.Key.Key_F2)
        editor = view.indexWidget(view.currentIndex())
        assert editor is not None
        mode = editor.text_edit.wordWrapMode()
        assert (mode == QTextOption.WrapMode.WrapAnywhere) is not between_words
        qtbot.keyClick(editor.text_edit, Qt.Key.Key_Escape)
        assert not view.editing
    assert stored_contents(workspace, info.id)[0] == ("user", f"a {word} b")


def test_delete_then_undo_restores_message_in_place(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Chat", CHAT)
    workspace.repo.set_important(workspace.repo.list_messages(info.id)[2].id, True)
    before = workspace.repo.list_messages(info.id)
    window = open_window(workspace)
    window.open_session(info.id)
    view = window.timeline.view
    view.setCurrentIndex(window.timeline.model.index(2, 0))
    view.setFocus()
    qtbot.keyClick(view, Qt.Key.Key_Delete)
    window.ctx.workers.wait_idle()
    assert stored_contents(workspace, info.id) == [CHAT[i] for i in (0, 1, 3, 4, 5)]
    assert "Paris." not in shown_contents(window)
    assert window.ctx.undo_stack.undoText() == "Delete 1 message"

    qtbot.keyClick(view, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    window.ctx.workers.wait_idle()
    after = workspace.repo.list_messages(info.id)
    assert [(m.role, m.content) for m in after] == CHAT
    restored = after[2]
    # Everything but the row id comes back: position, time, tokens, importance.
    assert (restored.position, restored.created_at, restored.token_count, restored.important) \
        == (before[2].position, before[2].created_at, before[2].token_count, True)
    assert shown_contents(window) == [text for _role, text in CHAT]


def test_undo_of_an_edit_finds_a_message_deleted_and_restored_since(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Chat", CHAT)
    window = open_window(workspace)
    window.open_session(info.id)
    timeline = window.timeline
    message = timeline.model.index(1, 0).data(MessageRole)
    timeline.edit_message(message, "user", "Capital of France?")
    timeline.delete_messages([message])
    window.ctx.workers.wait_idle()
    for _ in range(2):
        window.undo_action.trigger()
    window.ctx.workers.wait_idle()
    assert stored_contents(workspace, info.id) == CHAT


def test_insert_above_and_below(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Chat", CHAT[:3])
    window = open_window(workspace)
    window.open_session(info.id)
    timeline = window.timeline
    timeline.insert_message(1, "system", "Be kind.")
    timeline.insert_message(4, "tool", "appended result")
    window.ctx.workers.wait_idle()
    expected = [CHAT[0], ("system", "Be kind."), CHAT[1], CHAT[2], ("tool", "appended result")]
    assert stored_contents(workspace, info.id) == expected
    assert shown_contents(window) == [text for _role, text in expected]
    assert timeline.chips.chips["tool"].text().endswith("1")
    window.undo_action.trigger()
    window.undo_action.trigger()
    window.ctx.workers.wait_idle()
    assert stored_contents(workspace, info.id) == CHAT[:3]


def test_star_click_marks_important_and_undo_unmarks(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Chat", CHAT)
    window = open_window(workspace)
    window.open_session(info.id)
    timeline = window.timeline
    view = timeline.view
    row = view.visible_rows()[-1]
    rect = view.visualRect(timeline.model.index(row, 0))
    star = QPoint(rect.right() - 8 - 8 - 6, rect.top() + 3 + 8 + 6)  # inside the star's box
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=star)
    window.ctx.workers.wait_idle()
    last = workspace.repo.list_messages(info.id)[row]
    assert last.important
    assert timeline.model.index(row, 0).data(MessageRole).important
    window.undo_action.trigger()
    window.ctx.workers.wait_idle()
    assert not workspace.repo.list_messages(info.id)[row].important


def test_folded_messages_collapse_behind_a_marker_that_expands(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Chat", CHAT)
    messages = workspace.repo.list_messages(info.id)
    workspace.repo.set_state([m.id for m in messages[1:4]], "folded")
    context = workspace.repo.get_context(info.id)
    context.summary = "They talked."
    workspace.repo.set_context(info.id, context)
    window = open_window(workspace)
    window.open_session(info.id)
    model = window.timeline.model
    kinds = [model.index(r, 0).data(KindRole) for r in range(model.rowCount())]
    assert kinds == ["message", "marker", "message", "message"]
    # The marker tells what the folded messages became.
    tip = SafeDocument()
    tip.setHtml(model.index(1, 0).data(Qt.ItemDataRole.ToolTipRole))
    assert tip.toPlainText() == "Summary:\nThey talked."
    assert model.index(1, 0).data(Qt.ItemDataRole.DisplayRole).startswith(
        "3 messages folded into the summary")
    view = window.timeline.view
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton,
                     pos=view.visualRect(model.index(1, 0)).center())
    assert [model.index(r, 0).data(KindRole) for r in range(model.rowCount())] == [
        "message", "marker", "message", "message", "message", "message", "message"]
    assert shown_contents(window)[2:5] == [text for _role, text in CHAT[1:4]]


def test_copy_text_of_selected_messages(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Chat", CHAT)
    window = open_window(workspace)
    window.open_session(info.id)
    view = window.timeline.view
    view.setCurrentIndex(window.timeline.model.index(2, 0))
    view.setFocus()
    qtbot.keyClick(view, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QGuiApplication.clipboard().text() == "Paris."


def test_fork_from_a_message_opens_the_copy(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Chat", CHAT)
    window = open_window(workspace)
    window.open_session(info.id)
    window.timeline.view.setCurrentIndex(window.timeline.model.index(2, 0))
    window.timeline.fork_action.trigger()
    window.ctx.workers.wait_idle()
    forked = window.ctx.current_session_id
    assert forked != info.id
    assert stored_contents(workspace, forked) == CHAT[:3]
    assert shown_contents(window) == [text for _role, text in CHAT[:3]]
    # Undoing the fork hides the copy; closing the window deletes it.
    window.undo_action.trigger()
    window.ctx.workers.wait_idle()
    assert window.ctx.current_session_id == 0
    window.close()
    assert [s.id for s in workspace.list_sessions()] == [info.id]


def test_hundred_thousand_messages_open_at_the_end_and_scroll(
    qtbot: QtBot, big_workspace: tuple[Workspace, int], open_window: Callable[..., MainWindow],
) -> None:
    ws, session_id = big_workspace
    window = open_window(ws)
    window.open_session(session_id)
    model, view = window.timeline.model, window.timeline.view
    assert model.rowCount() == 100_000
    assert view.at_end
    last = model.index(view.last_visible_row(), 0).data(MessageRole)
    assert last.content == "Message 99999 of the long session."
    # Only the pages for what is on screen (and around it) were read.
    assert model.cached_pages() <= 4
    window.ctx.workers.wait_idle()
    qtbot.waitUntil(lambda: model.index_ready, timeout=15_000)
    assert window.timeline.chips.chips["assistant"].text().endswith("50,000")
    assert view.at_end

    view.verticalScrollBar().setValue(view.verticalScrollBar().maximum() // 2)
    middle = view.first_visible_row()
    assert 49_000 < middle < 51_000
    first = model.index(middle, 0).data(MessageRole)
    assert first.content.startswith(f"Message {middle} ")

    qtbot.keyClick(view, Qt.Key.Key_Home, Qt.KeyboardModifier.ControlModifier)
    view.setFocus()
    window.timeline.start_action.trigger()
    assert view.first_visible_row() == 0
    window.timeline.end_action.trigger()
    assert view.at_end and view.last_visible_row() == 99_999


def test_role_filter_and_jump_in_a_long_session(
    qtbot: QtBot, big_workspace: tuple[Workspace, int], open_window: Callable[..., MainWindow],
) -> None:
    ws, session_id = big_workspace
    window = open_window(ws)
    window.open_session(session_id)
    model, view = window.timeline.model, window.timeline.view
    qtbot.waitUntil(lambda: model.index_ready, timeout=15_000)
    window.timeline.chips.chips["tool"].click()
    assert model.rowCount() == 75_000
    assert view.at_end
    assert all(model.index(r, 0).data(MessageRole).role != "tool" for r in view.visible_rows())

    target = ws.repo.page_messages(session_id, after_position=41_999, limit=1)[0]
    assert window.timeline.jump_to(f"#{target.id}")
    current = view.currentIndex().data(MessageRole)
    assert current.id == target.id
    assert view.currentIndex().row() in view.visible_rows()
    # A jump to a hidden role shows that role again.
    tool_message = ws.repo.page_messages(session_id, after_position=41_001, limit=1)[0]
    assert tool_message.role == "tool"
    assert window.timeline.jump_to_message(tool_message.id)
    assert window.timeline.chips.chips["tool"].isChecked()
    assert view.currentIndex().data(MessageRole).id == tool_message.id


def test_message_with_tool_calls_and_long_text_is_drawn(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    long_text = "\n".join(f"line {i}" for i in range(300))
    call = {"id": "call_1", "type": "function",
            "function": {"name": "search", "arguments": '{"q": "paris"}'}}
    info = make_session(workspace, "Tools", [
        Message(role="assistant", content="", tool_calls=[call], token_count=3),
        Message(role="tool", content=long_text, tool_call_id="call_1", token_count=900),
    ])
    window = open_window(workspace)
    window.open_session(info.id)
    view, model = window.timeline.view, window.timeline.model
    collapsed = view.row_height(1)
    # A long tool output shows its first lines and a "show all" link that expands it.
    message = model.index(1, 0).data(MessageRole)
    window.timeline.delegate.set_expanded(message, True)
    view.forget_row(model.index(1, 0))
    assert view.row_height(1) > collapsed * 3
    image = window.timeline.view.viewport().grab()
    assert not image.isNull()


def test_what_the_workers_read_for_a_left_session_never_lands(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A long session's shape and a page, held on events while another session opens,
    are dropped by the worker pool (the model keeps no counter of its own)."""
    import threading

    from workbench.gui.models import timeline as module
    from workbench.gui.workers import WorkerPool

    monkeypatch.setattr(module, "SYNC_INDEX_LIMIT", 0)  # every session reads on a worker
    first = make_session(workspace, "First", [("user", f"first {i}") for i in range(30)])
    second = make_session(workspace, "Second", [("user", f"second {i}") for i in range(5)])
    release, entered = threading.Event(), threading.Event()
    real_load, real_page = module.SessionIndex.load, Workspace.page_messages

    def held_load(ws: Workspace, session_id: int) -> object:
        if session_id == first.id:
            entered.set()
            assert release.wait(10), "the test never released the read"
        return real_load(ws, session_id)

    def held_page(ws: Workspace, session_id: int, **kwargs: object) -> object:
        if session_id == first.id:
            assert release.wait(10), "the test never released the read"
        return real_page(ws, session_id, **kwargs)

    monkeypatch.setattr(module.SessionIndex, "load", staticmethod(held_load))
    monkeypatch.setattr(Workspace, "page_messages", held_page)
    pool = WorkerPool()
    model = TimelineModel(workspace, pool)
    shapes: list[int] = []
    model.index_loaded.connect(lambda: shapes.append(model.message_count))
    model.set_session(first.id)
    assert entered.wait(10)
    model.prefetch(0, 10)  # a page of the first session, held too
    assert model.cached_pages() == 0

    model.set_session(second.id)
    release.set()
    assert pool.wait_idle()
    assert shapes == [5]  # only the second session's shape arrived
    assert model.session_id == second.id and model.message_count == 5
    assert model.cached_pages() == 0  # the first session's page was dropped
    assert [model.message_at(p).content for p in range(5)] == [f"second {i}" for i in range(5)]
    pool.shutdown()


def test_rows_kept_as_pictures_look_as_rows_painted_anew(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    """The view keeps pictures of the rows it painted; whatever the user does to a row
    (select it, star it, show all of it, copy it), what is on screen is what painting
    every row anew shows."""
    long_text = "\n".join(f"line {i} with `code`" for i in range(60))
    info = make_session(workspace, "Looks", [
        *CHAT,
        Message(role="assistant", content="Some code:\n\n```python\nprint('hi')\n```"),
        Message(role="user", content=long_text),
    ])
    window = open_window(workspace)
    window.open_session(info.id)
    view, model = window.timeline.view, window.timeline.model
    window.ctx.workers.wait_idle()

    def same_as_painted_anew() -> None:
        window.ctx.workers.wait_idle()  # token counts, pages
        # Code colours arrive from a thread of their own.
        view.viewport().grab()
        qtbot.waitUntil(lambda: all(window.timeline.delegate.is_coloured(model.index(r, 0))
                                    for r in view.visible_rows()))
        kept = view.viewport().grab().toImage()
        view.forget_pictures()
        assert view.viewport().grab().toImage() == kept

    same_as_painted_anew()
    last = model.rowCount() - 1
    view.setFocus()
    qtbot.keyClick(view, Qt.Key.Key_End)
    same_as_painted_anew()
    qtbot.keyClick(view, Qt.Key.Key_Space)  # show all of the long message
    assert model.index(last, 0).data(MessageRole).content == long_text
    same_as_painted_anew()
    qtbot.keyClick(view, Qt.Key.Key_Up)
    qtbot.keyClick(view, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QGuiApplication.clipboard().text().startswith("Some code:")
    same_as_painted_anew()
    qtbot.keyClick(view, Qt.Key.Key_Home)
    same_as_painted_anew()
