"""The search panel: filters, highlighted snippets, and opening a hit at its message."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPalette, QTextCursor
from pytestqt.qtbot import QtBot

from workbench.core.conversation import SearchHit, SessionInfo
from workbench.engine.workspace import Workspace
from workbench.gui.main_window import MainWindow
from workbench.gui.models.search_results import (
    MARK_START,
    ShownSnippet,
    SnippetRole,
    shown_snippet,
)
from workbench.gui.models.timeline import MessageRole
from workbench.gui.panels.search import MATCH_HIGHLIGHT, snippet_document


def run_search(qtbot: QtBot, window: MainWindow, text: str) -> list[SearchHit]:
    window.search.query_edit.setText(text)
    with qtbot.waitSignal(window.search.search_finished, timeout=10_000):
        window.search.search()
    return window.search.hits()


def test_hit_opens_its_session_scrolled_to_the_message(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    filler = [("user", f"small talk {i}") for i in range(60)]
    target = make_session(workspace, "Target", [*filler, ("assistant", "the word is aubergine"),
                                                *filler])
    other = make_session(workspace, "Other", [("user", "nothing to see")])
    window = open_window(workspace)
    window.open_session(other.id)
    hits = run_search(qtbot, window, "aubergine")
    assert [(h.session_id, h.role) for h in hits if h.kind == "message"] == [
        (target.id, "assistant")]
    # The snippet marks the matched word, and the row shows the session's title.
    index = window.search.model.index(0, 0)
    assert MARK_START in hits[0].snippet
    shown = index.data(SnippetRole)
    assert [shown.text[start:start + length] for start, length in shown.marks] == [
        "aubergine"]
    assert "Target" in index.data()

    window.search.results.activated.emit(index)
    assert window.ctx.current_session_id == target.id
    view = window.timeline.view
    current = view.currentIndex().data(MessageRole)
    assert current.content == "the word is aubergine"
    assert view.currentIndex().row() in view.visible_rows()
    assert not view.at_end


def test_role_and_session_filters(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    first = make_session(workspace, "First", [("user", "kiwi question"), ("assistant", "kiwi")])
    make_session(workspace, "Second", [("user", "kiwi again")])
    window = open_window(workspace)
    window.open_session(first.id)
    assert len([h for h in run_search(qtbot, window, "kiwi") if h.kind == "message"]) == 3
    panel = window.search
    panel.role_box.setCurrentIndex(panel.role_box.findData("assistant"))
    assert [h.role for h in run_search(qtbot, window, "kiwi") if h.kind == "message"] == [
        "assistant"]
    panel.role_box.setCurrentIndex(0)
    window.find("session")
    hits = run_search(qtbot, window, "kiwi")
    assert {h.session_id for h in hits} == {first.id}
    assert "result" in panel.status_label.text()


def _highlighted(snippet: ShownSnippet) -> list[str]:
    """The stretches of the painted snippet that are on the match highlight."""
    doc = snippet_document(snippet, QColor("#202020"))
    found: list[str] = []
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            if fragment.charFormat().background().color() == QColor(MATCH_HIGHLIGHT):
                found.append(fragment.text())
            it += 1
        block = block.next()
    return found


def test_a_snippet_is_shown_as_text_never_read_as_markup() -> None:
    shown = shown_snippet("a <b>bold</b> &amp; <img src=x> \x02match\x03 here")
    assert shown.text == "a <b>bold</b> &amp; <img src=x> match here"
    doc = snippet_document(shown, QColor("#202020"))
    assert doc.toPlainText() == shown.text  # every character shown, none obeyed
    assert _highlighted(shown) == ["match"]
    cursor = QTextCursor(doc)
    assert cursor.charFormat().foreground().color() != QColor(MATCH_HIGHLIGHT)


def test_search_snippets_show_markdown_as_the_text_people_read(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    """A hit in a Markdown message: the row shows the words without their marks
    (``*Aeroporto*`` reads Aeroporto), the matched word still highlighted, and the row's
    accessible text and tooltip say it the same way."""
    make_session(workspace, "Lisbon", [
        ("assistant", "## Arrival\n- Land at *Aeroporto*; see [the map](https://ex.pt), "
                      "**red** line to `Saldanha`."),
    ])
    window = open_window(workspace)
    run_search(qtbot, window, "aeroporto")
    index = window.search.model.index(0, 0)
    shown = index.data(SnippetRole)
    for mark in ("*", "`", "##", "](", "https://"):
        assert mark not in shown.text, (mark, shown.text)
    assert shown.text == "Arrival Land at Aeroporto; see the map, red line to Saldanha."
    assert _highlighted(shown) == ["Aeroporto"]
    assert "Land at Aeroporto; see" in index.data()
    assert "*" not in index.data() and "*" not in index.data(Qt.ItemDataRole.ToolTipRole)
    # Painted in the list's own text colour, the match on the highlight.
    palette = window.search.results.palette()
    doc = snippet_document(shown, palette.color(QPalette.ColorRole.Text))
    assert doc.toPlainText() == shown.text


def test_hit_in_a_long_session_opens_at_the_message(
    qtbot: QtBot, big_workspace: tuple[Workspace, int], open_window: Callable[..., MainWindow],
) -> None:
    ws, session_id = big_workspace
    window = open_window(ws)
    hits = run_search(qtbot, window, "zebra42000")
    assert len(hits) == 1 and hits[0].session_id == session_id
    window.search.open_hit(hits[0])
    view = window.timeline.view
    assert window.ctx.current_session_id == session_id
    current = view.currentIndex().data(MessageRole)
    assert current.id == hits[0].message_id
    assert "zebra42000" in current.content
    assert view.currentIndex().row() in view.visible_rows()
    # The session's shape arrives later and rebuilds the rows: the message stays chosen.
    window.ctx.workers.wait_idle()
    qtbot.waitUntil(lambda: window.timeline.model.index_ready, timeout=15_000)
    assert view.currentIndex().data(MessageRole).id == hits[0].message_id
    assert view.currentIndex().row() in view.visible_rows()


def test_date_filter_keeps_messages_of_the_chosen_days(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    from datetime import UTC, datetime

    from PySide6.QtCore import QDate

    from workbench.core.conversation import Message

    make_session(workspace, "Dated", [
        Message(role="user", content="quince in march",
                created_at=datetime(2024, 3, 10, 12, tzinfo=UTC)),
        Message(role="user", content="quince in june",
                created_at=datetime(2024, 6, 10, 12, tzinfo=UTC)),
    ])
    window = open_window(workspace)
    panel = window.search
    panel.from_box.setChecked(True)
    panel.from_date.setDate(QDate(2024, 5, 1))
    hits = [h for h in run_search(qtbot, window, "quince") if h.kind == "message"]
    assert [h.snippet.replace(MARK_START, "").replace("\x03", "") for h in hits] == [
        "quince in june"]
    panel.to_box.setChecked(True)
    panel.to_date.setDate(QDate(2024, 5, 31))
    assert [h for h in run_search(qtbot, window, "quince") if h.kind == "message"] == []


def test_the_role_of_a_selected_hit_reads_against_the_selection(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    # The walk: Down onto a hit left its role ("Assistant", in the role's green) on the
    # selection's blue, where it could hardly be read.
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QFontMetrics, QPalette

    from tests.gui.journey import focus, press, type_text
    from tests.gui.test_theme import contrast

    make_session(workspace, "Trip", [("user", "Which metro?"), ("assistant", "The red metro")])
    window = open_window(workspace)
    window.activateWindow()
    qtbot.waitUntil(lambda: window.isActiveWindow())
    qtbot.keyClick(window, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier
                   | Qt.KeyboardModifier.ShiftModifier)
    with qtbot.waitSignal(window.search.search_finished, timeout=10_000):
        type_text(qtbot, "red metro")
        press(qtbot, Qt.Key.Key_Return)
    press(qtbot, Qt.Key.Key_Down)
    results = window.search.results
    assert focus() is results and results.currentIndex().row() == 0
    assert window.search.hits()[0].role == "assistant"
    rect = results.visualRect(results.currentIndex())
    fm = QFontMetrics(results.font())
    label = rect.adjusted(rect.width() - fm.horizontalAdvance("Assistant") - 8, 4, -6, 0)
    label.setHeight(fm.lineSpacing())
    image = results.viewport().grab().toImage()
    highlight = results.palette().color(QPalette.ColorGroup.Active, QPalette.ColorRole.Highlight)
    ink = max(contrast(image.pixelColor(x, y), highlight)
              for x in range(label.left(), label.right())
              for y in range(label.top(), label.bottom()))
    assert ink >= 3.0
