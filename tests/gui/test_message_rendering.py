"""How messages and titles are shown: content is data, never markup; copy, code, tables,
the model and usage of a reply, and messages whose time is unknown."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from PySide6.QtCore import QEvent, Qt, QTimer
from PySide6.QtGui import (
    QContextMenuEvent,
    QGuiApplication,
    QHelpEvent,
    QTextDocument,
    QTextOption,
    QTextTable,
)
from PySide6.QtWidgets import QApplication, QLineEdit, QMenu, QToolTip
from pytestqt.qtbot import QtBot

from tests.gui.conftest import settle
from tests.gui.journey import click, focus, press, type_text
from workbench.core.conversation import Message, SessionInfo
from workbench.engine.session_context import read_session_context
from workbench.engine.workspace import Workspace
from workbench.gui.delegates.code_lexing import lexing_thread
from workbench.gui.delegates.markdown import SafeDocument, plain_tooltip, render_markdown
from workbench.gui.delegates.message import (
    message_details,
    message_details_line,
    message_markdown,
    message_time_text,
)
from workbench.gui.main_window import MainWindow
from workbench.gui.models.search_results import SnippetRole, TitleRole
from workbench.gui.models.sessions import SessionListModel, SessionRole
from workbench.gui.models.timeline import KeyRole, MessageRole

ROOT = Path(__file__).resolve().parents[2]
CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier


def _load_hostile() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "hostile_window", Path(__file__).with_name("hostile_window.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hostile_window = _load_hostile()
T0 = datetime(2025, 5, 1, 9, 0, tzinfo=UTC)
CODE = 'def greet(name):\n    return f"<b>{name}</b>"  # not bold'
REPLY = (
    "Here you go:\n\n"
    f"```python\n{CODE}\n```\n\n"
    "| Name | Size |\n|:-----|-----:|\n| alpha | 1 |\n| beta | 22,000 |\n"
)
META = {"model": "gemma-3-270m-it", "finish_reason": "length",
        "usage": {"input_tokens": 1200, "output_tokens": 85}}


def rendered_text(tip: str) -> str:
    """What a rich tooltip or label shows, as plain text."""
    doc = SafeDocument()
    doc.setHtml(tip)
    return doc.toPlainText()


def render(markdown: str) -> QTextDocument:
    doc = SafeDocument()
    render_markdown(doc, markdown, dark=False, code_header=16)
    doc.setTextWidth(600)
    doc.size()  # lays it out, which is when Qt would fetch images
    return doc


def open_chat(workspace: Workspace, open_window: Callable[..., MainWindow],
              make_session: Callable[..., SessionInfo]) -> MainWindow:
    info = make_session(workspace, "Chat", [
        Message(role="user", content="Show me code", created_at=T0, token_count=3),
        Message(role="assistant", content=REPLY, created_at=T0, token_count=40,
                metadata=dict(META)),
    ])
    window = open_window(workspace)
    window.open_session(info.id)
    return window


def row_regions(window: MainWindow, row: int) -> dict:
    view = window.timeline.view
    index = window.timeline.model.index(row, 0)
    view.scrollTo(index)
    QApplication.processEvents()
    option = view._option(view.visualRect(index))  # noqa: SLF001 - the option rows paint with
    return window.timeline.delegate.hit_regions(option, index)


# == hostile content ==========================================================================


def test_hostile_sessions_open_under_a_memory_cap_and_show_every_word(tmp_path: Path) -> None:
    # A window that read /dev/zero as an image would allocate into the cap and abort.
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT),
               WORKBENCH_HOME=str(tmp_path / "home"))
    done = subprocess.run(
        [sys.executable, hostile_window.__file__, str(tmp_path / "hostile.db"), "1500"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[-1] == "DONE"
    reports = [json.loads(line) for line in lines[:-1]]
    assert len(reports) == len(hostile_window.PAYLOADS)
    for name, report in zip(hostile_window.PAYLOADS, reports, strict=True):
        assert report["visible"]
        # Titles are plain text: the markup is shown, not obeyed.
        assert report["title_format"] == "PlainText"
        assert report["title_label"].startswith(hostile_window.TITLE)
        shown = report["title_shown"].replace("\n", "")
        assert report["title_label"].startswith(shown.removesuffix("…")), shown
        assert report["window_title"].startswith(hostile_window.TITLE)
        assert len(report["texts"]) == 2
        for text in report["texts"]:
            assert "\ufffc" not in text  # no object (image) left in the document
            if name == "huge":
                assert text.endswith("word")  # its first lines, with "Show all" below
            else:
                assert text.endswith(hostile_window.TAIL), (name, text)
    texts = {name: r["texts"][0] for name, r in zip(hostile_window.PAYLOADS, reports,
                                                    strict=True)}
    assert "<script>alert('hidden')</script>" in texts["script"]
    assert '<span style="font-size:40px;color:red">shout</span>' in texts["red span"]
    assert "[image: x] (/dev/zero)" in texts["markdown image"]
    assert 'file:///dev/zero "hidden words"' in texts["reference"]
    # Nothing the model receives is invisible, and nothing reorders the text after it.
    assert texts["bidi override"].startswith("RLO:⟨U+202E⟩evil ⟨U+2067⟩isolate⟨U+2069⟩")
    assert texts["zero width"].startswith(
        "zero⟨U+200B⟩width⟨U+2060⟩joined⟨U+FEFF⟩mark⟨U+00AD⟩soft")
    assert texts["tag characters"].startswith("hi⟨U+E0072⟩⟨U+E0075⟩⟨U+E006E⟩⟨U+E0020⟩")
    assert texts["entities"].startswith("&amp; &lt;tag&gt; &#x202E;x &amp; ")


def _shown_items(view: Any, column: int = 0) -> list[str]:
    """What each row of an item view shows in ``column`` (what its delegate paints)."""
    model = view.model()
    return [view.itemDelegateForIndex(model.index(row, column)).shown_text(
                model.index(row, column))
            for row in range(model.rowCount())]


def _named_and_not_raw(texts: list[str], *, marks: int = 1) -> None:
    for text in texts:
        assert hostile_window.RLO not in text and "\u200b" not in text, text
    assert sum(t.count("⟨U+") for t in texts) >= marks, texts


def test_hostile_text_is_named_in_search_request_context_and_tags(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    session_id = hostile_window.build_panels(workspace)
    window = open_window(workspace)
    window.open_session(session_id)
    settle(window)

    # Search: Ctrl+Shift+F, "evil", Enter; the hits' titles and snippets name the RLO.
    qtbot.keyClick(window, Qt.Key.Key_F, CTRL | SHIFT)
    with qtbot.waitSignal(window.search.search_finished, timeout=10_000):
        type_text(qtbot, "evil")
        press(qtbot, Qt.Key.Key_Return)
    model = window.search.model
    assert model.rowCount() >= 2  # the session's title and its message
    titles = [model.index(r, 0).data(TitleRole) for r in range(model.rowCount())]
    snippets = [model.index(row, 0).data(SnippetRole).text
                for row in range(model.rowCount())]
    assert all(t.startswith("RLO ⟨U+202E⟩evil title here") for t in titles), titles
    assert any("bidi ⟨U+202E⟩evil⟨U+202C⟩ text, zero⟨U+200B⟩width" in s for s in snippets)
    _named_and_not_raw(titles + snippets, marks=3)

    # The Request panel's payload (Ctrl+5) names them; Copy gives the JSON as it is.
    qtbot.keyClick(window, Qt.Key.Key_5, CTRL)
    inspector = window.request_inspector
    assert inspector is not None
    qtbot.waitUntil(lambda: inspector.shown is not None and not inspector.busy
                    and "evil" in inspector.payload_view.toPlainText(), timeout=15_000)
    payload = inspector.payload_view.toPlainText()
    assert "bidi ⟨U+202E⟩evil⟨U+202C⟩ text" in payload
    _named_and_not_raw([payload])
    click(qtbot, window, "Copy the request payload")
    copied = QGuiApplication.clipboard().text()
    assert f"bidi {hostile_window.RLO}evil" in copied and "⟨U+" not in copied
    # A selection copied out of the payload gives the characters back too.
    inspector.payload_view.selectAll()
    inspector.payload_view.copy()
    assert QGuiApplication.clipboard().text() == inspector.shown.payload_text

    # The Context panel (Ctrl+4): facts, tasks and memory entries.
    qtbot.keyClick(window, Qt.Key.Key_4, CTRL)
    panel = window.context_panel
    qtbot.waitUntil(lambda: panel.overview is not None
                    and panel.overview.session_id == session_id, timeout=10_000)
    facts = _shown_items(panel.facts_list)
    assert facts == ["fact ⟨U+202E⟩gnp.exe end", "zero⟨U+200B⟩width⟨U+2060⟩fact"]
    assert panel.facts() == hostile_window.PANEL_FACTS  # stored as they were
    assert _shown_items(panel.tasks_table) == ["task ⟨U+202E⟩evil task"]
    assert _shown_items(panel.memory_table) == ["memory ⟨U+202E⟩evil entry"]
    assert panel.summary_edit.toPlainText() == "summary ⟨U+202E⟩evil"
    assert panel.summary_edit.text() == hostile_window.PANEL_SUMMARY
    assert not panel.summary_dirty  # the names shown are not an edit
    tip = rendered_text(panel.tasks_table.item(0, 0).toolTip())
    assert "task ⟨U+202E⟩evil task" in tip and hostile_window.RLO not in tip
    # Edited in place (F2), a fact shows the names; saved unchanged, it stays as it was.
    panel.facts_list.setFocus()
    panel.facts_list.setCurrentRow(0)
    press(qtbot, Qt.Key.Key_F2)
    editor = focus()
    assert isinstance(editor, QLineEdit)
    assert editor.text() == "fact ⟨U+202E⟩gnp.exe end"
    press(qtbot, Qt.Key.Key_End)
    type_text(qtbot, "!")
    press(qtbot, Qt.Key.Key_Return)
    edited = [f"{hostile_window.PANEL_FACTS[0]}!", hostile_window.PANEL_FACTS[1]]
    qtbot.waitUntil(lambda: read_session_context(workspace, session_id).context.facts
                    == edited, timeout=10_000)

    # Tags: the session row's tooltip, and the Tags dialog's field (Ctrl+Shift+T).
    browser = window.browser
    row = next(r for r in range(browser.model.rowCount())
               if browser.model.index(r, 0).data(SessionRole).id == session_id)
    tip = rendered_text(browser.model.index(row, 0).data(Qt.ItemDataRole.ToolTipRole))
    assert "#x⟨U+202E⟩evil" in tip and hostile_window.RLO not in tip
    accessible = browser.model.index(row, 0).data(Qt.ItemDataRole.AccessibleTextRole)
    assert "RLO ⟨U+202E⟩evil" in accessible and hostile_window.RLO not in accessible
    qtbot.keyClick(window, Qt.Key.Key_L, CTRL)
    press(qtbot, Qt.Key.Key_Down)
    browser.view.setCurrentIndex(browser.model.index(row, 0))
    assert browser.selected_ids() == [session_id]
    seen: list[str] = []

    def answer() -> None:
        dialog = QApplication.activeModalWidget()
        if dialog is None:  # not shown yet
            QTimer.singleShot(10, answer)
            return
        field = dialog.findChild(QLineEdit)
        seen.append(field.text())
        field.end(False)
        qtbot.keyClicks(field, ", more")
        qtbot.keyClick(field, Qt.Key.Key_Return)

    QTimer.singleShot(0, answer)
    press(qtbot, Qt.Key.Key_T, CTRL | SHIFT)
    assert seen == ["x⟨U+202E⟩evil, "]  # the caret waits after the tags, for another
    qtbot.waitUntil(lambda: workspace.get_session(session_id).tags
                    == [hostile_window.PANEL_TAG, "more"], timeout=10_000)


def test_the_document_never_loads_a_resource(qapp: QApplication) -> None:
    before = SafeDocument.refused
    doc = SafeDocument()
    doc.setHtml('<p>a <img src="/dev/zero" width="10"> b</p>')
    doc.setTextWidth(300)
    doc.size()
    assert SafeDocument.refused > before  # Qt asked, and got nothing
    assert doc.size().height() < 200


def test_markdown_shows_html_as_text_images_as_links_and_link_targets(qapp: QApplication) -> None:
    doc = render(
        'a ![chart](/etc/passwd "t") b <img src="/dev/zero"> c <script>x()</script> d '
        '<style>*{display:none}</style> e <iframe src="http://x"></iframe> f '
        '[docs](https://example.com/d) g [t](https://e.x "hidden title") h'
    )
    text = doc.toPlainText()
    assert text == (
        'a [image: chart] (/etc/passwd "t") b <img src="/dev/zero"> c <script>x()</script> d '
        '<style>*{display:none}</style> e <iframe src="http://x"></iframe> f '
        'docs (https://example.com/d) g t (https://e.x "hidden title") h'
    )
    block = doc.begin()
    it = block.begin()
    while not it.atEnd():
        assert not it.fragment().charFormat().isImageFormat()
        it += 1


def test_titles_are_plain_text_in_the_label_the_list_and_its_tooltip(
    workspace: Workspace, open_window: Callable[..., MainWindow],
    make_session: Callable[..., SessionInfo],
) -> None:
    title = '<b>bold?</b> <img src="/dev/zero"> <a href="x">link</a>'
    info = make_session(workspace, title, [("user", "hi")])
    window = open_window(workspace)
    window.open_session(info.id)
    label = window.timeline.title_label
    assert label.textFormat() == Qt.TextFormat.PlainText
    assert label.text().replace("\n", "") == title == label.full_text()
    assert window.windowTitle().startswith(title)
    model = window.browser.model
    assert isinstance(model, SessionListModel)
    row = next(r for r in range(model.rowCount())
               if model.index(r, 0).data(Qt.ItemDataRole.DisplayRole) == title)
    tip = model.index(row, 0).data(Qt.ItemDataRole.ToolTipRole)
    assert rendered_text(tip).startswith(title)


def test_plain_tooltip_shows_markup_literally(qapp: QApplication) -> None:
    shown = rendered_text(plain_tooltip('<img src="/dev/zero">\n<b>x</b>'))
    assert shown == '<img src="/dev/zero">\n<b>x</b>'


# == code, tables and copying ===================================================================


def test_code_blocks_are_highlighted_and_keep_their_text(qapp: QApplication) -> None:
    doc = render(f"```python\n{CODE}\n```")
    assert doc.toPlainText() == CODE  # highlighting adds colour, never text or markup
    block = doc.begin()
    colours = set()
    it = block.begin()
    while not it.atEnd():
        colours.add(it.fragment().charFormat().foreground().color().name())
        it += 1
    assert len(colours) > 1  # the keyword and the name differ in colour


def test_tables_get_a_bold_header_row_aligned_like_its_column(qapp: QApplication) -> None:
    doc = render("| Name | Size |\n|:-----|-----:|\n| alpha | 1 |\n")
    (table,) = [f for f in doc.rootFrame().childFrames() if isinstance(f, QTextTable)]
    assert table.format().headerRowCount() == 1
    assert table.format().border() == 1
    size_header = doc.findBlock(table.cellAt(0, 1).firstPosition())
    size_value = doc.findBlock(table.cellAt(1, 1).firstPosition())
    assert size_header.blockFormat().alignment() & Qt.AlignmentFlag.AlignRight
    assert size_value.blockFormat().alignment() & Qt.AlignmentFlag.AlignRight
    assert table.cellAt(0, 0).format().fontWeight() > 400


def _table_text(rows: int, columns: int) -> str:
    def line(cell: str) -> str:
        return "|" + "|".join(cell for _ in range(columns)) + "|"

    return "\n".join([line("head"), line("---"), *[line(f"v{r}") for r in range(rows)]])


def test_a_table_too_big_to_lay_out_shows_as_its_text(qapp: QApplication) -> None:
    # 30,000 rows held the window for over a minute in Qt's Markdown reader; 5,000
    # columns for seconds. Either shows as the text it is, in a code block, whole.
    for rows, columns in ((2_000, 2), (2, 5_000)):
        table = _table_text(rows, columns)
        doc = render(f"before\n\n{table}\n\nafter `x` | y")
        assert not [f for f in doc.rootFrame().childFrames() if isinstance(f, QTextTable)]
        shown = doc.toPlainText()
        assert table in shown
        assert shown.startswith("before") and shown.endswith("after x | y")
    # A fence inside the table's cells cannot end the block early.
    doc = render(_table_text(1_000, 2).replace("v5", "````v5"))
    assert "````v5" in doc.toPlainText()
    assert not [f for f in doc.rootFrame().childFrames() if isinstance(f, QTextTable)]


def test_a_word_too_long_to_look_for_breaks_in_wraps_anywhere(qapp: QApplication) -> None:
    # Qt looked for a word break along the whole run for every line: 200,000 unbroken
    # characters took two seconds to lay out, each time the row was measured.
    word = "<" * 5_000
    doc = render(f"before {word} after")
    assert doc.defaultTextOption().wrapMode() == QTextOption.WrapMode.WrapAnywhere
    assert doc.toPlainText() == f"before {word} after"
    ordinary = render("a paragraph of ordinary words " * 50)
    assert ordinary.defaultTextOption().wrapMode() == (
        QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)


def test_a_table_of_a_readable_size_stays_a_table(qapp: QApplication) -> None:
    doc = render(_table_text(30, 30) + "\n\n" + _table_text(2, 3))
    tables = [f for f in doc.rootFrame().childFrames() if isinstance(f, QTextTable)]
    assert [(t.rows(), t.columns()) for t in tables] == [(31, 30), (3, 3)]


def test_a_table_after_a_code_block_keeps_its_header_on_one_line(qapp: QApplication
                                                                   ) -> None:
    """Qt's reader opens the first cell of such a table with an empty paragraph, which
    pushed its header a line below the others."""
    doc = render("```python\nx = 1\n```\n\n| a | b |\n|---|--:|\n| 1 | 2 |\n")
    (table,) = [f for f in doc.rootFrame().childFrames() if isinstance(f, QTextTable)]
    for row in range(table.rows()):
        for column in range(table.columns()):
            cell = table.cellAt(row, column)
            first = doc.findBlock(cell.firstPosition())
            assert first.text() == "ab12"[row * 2 + column]
            assert first.position() + first.length() > cell.lastPosition()  # one paragraph


def test_the_copy_button_on_hover_copies_the_message(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
    make_session: Callable[..., SessionInfo],
) -> None:
    window = open_chat(workspace, open_window, make_session)
    QGuiApplication.clipboard().clear()
    regions = row_regions(window, 1)
    point = regions["copy"].center()
    viewport = window.timeline.view.viewport()
    qtbot.mouseMove(viewport, point)
    qtbot.mouseClick(viewport, Qt.MouseButton.LeftButton, pos=point)
    qtbot.waitUntil(lambda: QGuiApplication.clipboard().text() == REPLY)


def test_the_code_block_copy_button_copies_only_the_code(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
    make_session: Callable[..., SessionInfo],
) -> None:
    window = open_chat(workspace, open_window, make_session)
    QGuiApplication.clipboard().clear()
    regions = row_regions(window, 1)
    ((code, button),) = regions["code"]
    assert code.language == "python"
    # The code is coloured after the row's first paint, its text unchanged.
    index = window.timeline.model.index(1, 0)
    qtbot.waitUntil(lambda: window.timeline.delegate.is_coloured(index))
    doc = row_regions(window, 1)["doc"]
    block = doc.findBlockByNumber(code.first)
    assert block.text() == CODE.split("\n")[0]
    colours = set()
    it = block.begin()
    while not it.atEnd():
        colours.add(it.fragment().charFormat().foreground().color().name())
        it += 1
    assert len(colours) > 1
    qtbot.mouseClick(window.timeline.view.viewport(), Qt.MouseButton.LeftButton,
                     pos=button.center())
    qtbot.waitUntil(lambda: QGuiApplication.clipboard().text() == CODE)


def test_a_closed_window_that_coloured_code_leaves_no_thread_an_exit_waits_for(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
    make_session: Callable[..., SessionInfo],
) -> None:
    # The lexing thread ends once it has nothing to lex: an idle one, left for the rest
    # of the process, kept a later `workbench import` in the same process from ending
    # at once (cli.run only does so when no thread is left that a normal exit awaits).
    window = open_chat(workspace, open_window, make_session)
    index = window.timeline.model.index(1, 0)
    qtbot.waitUntil(lambda: window.timeline.delegate.is_coloured(index))
    window.close()

    def awaited() -> list[str]:
        return [t.name for t in threading.enumerate()
                if t is not threading.main_thread() and not t.daemon]

    qtbot.waitUntil(lambda: not awaited())
    assert lexing_thread() is None


def test_the_context_menu_copies_the_message(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
    make_session: Callable[..., SessionInfo],
) -> None:
    window = open_chat(workspace, open_window, make_session)
    QGuiApplication.clipboard().clear()
    view = window.timeline.view
    index = window.timeline.model.index(0, 0)
    point = view.visualRect(index).center()
    chosen: list[str] = []

    def choose() -> None:
        menu = QApplication.activePopupWidget()
        if not isinstance(menu, QMenu):
            QTimer.singleShot(20, choose)
            return
        action = next(a for a in menu.actions() if a.text().replace("&", "") == "Copy Text")
        chosen.append(action.text())
        menu.setActiveAction(action)
        qtbot.keyClick(menu, Qt.Key.Key_Return)

    QTimer.singleShot(0, choose)
    # A right-click: the press, then the context-menu event the window system sends.
    qtbot.mousePress(view.viewport(), Qt.MouseButton.RightButton, pos=point)
    QApplication.sendEvent(view.viewport(), QContextMenuEvent(
        QContextMenuEvent.Reason.Mouse, point, view.viewport().mapToGlobal(point)))
    qtbot.waitUntil(lambda: QGuiApplication.clipboard().text() == "Show me code")
    assert chosen


# == the model, finish reason and usage; unknown times ===========================================


def test_a_reply_shows_its_model_and_the_tooltip_its_finish_reason_and_usage(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
    make_session: Callable[..., SessionInfo],
) -> None:
    window = open_chat(workspace, open_window, make_session)
    regions = row_regions(window, 1)
    assert regions["details"] is not None  # the line under the header
    assert row_regions(window, 0)["details"] is None  # a user message has none
    view = window.timeline.view
    point = regions["header"].center()
    event = QHelpEvent(QEvent.Type.ToolTip, point, view.viewport().mapToGlobal(point))
    QApplication.sendEvent(view.viewport(), event)
    qtbot.waitUntil(QToolTip.isVisible)
    shown = rendered_text(QToolTip.text())
    assert "Model: gemma-3-270m-it" in shown
    assert "Finish reason: length" in shown
    assert "Billed usage: 1,200 input + 85 output tokens" in shown
    QToolTip.hideText()
    message = window.timeline.model.index(1, 0).data(MessageRole)
    assert message_details_line(message) == (
        "gemma-3-270m-it · finish: length · 1,200 input + 85 output tokens")


def test_a_message_without_a_time_says_time_unknown() -> None:
    # An imported message whose source recorded no time reads back with created_at None
    # (the store's side of this is issue 16's); the row and its tooltip say so.
    unknown = Message(role="user", content="when was this?", id=5)
    known = Message(role="user", content="then", id=6, created_at=T0)
    assert message_time_text(unknown) == "time unknown"
    assert message_time_text(known) == T0.astimezone().strftime("%Y-%m-%d %H:%M")
    assert "Time: unknown" in message_details(unknown)
    assert "Time: unknown" not in message_details(known)


def test_tool_call_arguments_and_results_stay_code(qapp: QApplication) -> None:
    message = Message(role="assistant", content="calling",
                      tool_calls=[{"id": "c1", "function": {"name": "f",
                                                             "arguments": '{"a": "<b>"}'}}])
    doc = render(message_markdown(message)[0])
    assert '"a": "<b>"' in doc.toPlainText()


def test_show_all_never_hides_a_single_line() -> None:
    from workbench.core.conversation import Message
    from workbench.gui.delegates.message import COLLAPSED_LINES, message_markdown

    one_more = "\n".join(f"line {i}" for i in range(COLLAPSED_LINES + 1))
    text, truncated, lines = message_markdown(Message(role="user", content=one_more), False)
    assert not truncated and text.endswith(f"line {COLLAPSED_LINES}")
    many = "\n".join(f"line {i}" for i in range(COLLAPSED_LINES + 10))
    text, truncated, lines = message_markdown(Message(role="user", content=many), False)
    assert truncated and lines == COLLAPSED_LINES + 10
    assert f"line {COLLAPSED_LINES - 1}" in text and f"line {COLLAPSED_LINES}" not in text
    # A long single paragraph just over the limit is shown whole too.
    slightly = "word " * 490  # 2,450 characters
    assert not message_markdown(Message(role="user", content=slightly), False)[1]
    assert message_markdown(Message(role="user", content="word " * 2000), False)[1]


def test_a_message_opening_with_code_keeps_the_strip_below_its_header(
    qapp: QApplication,
) -> None:
    """Qt drops the first block's top margin: a tool result (all code) had its language
    strip and Copy code button drawn over the message header."""
    from workbench.gui.delegates.markdown import SafeDocument, render_markdown

    for text in ("```json\n{\"a\": 1}\n```", "Before\n\n```json\n{\"a\": 1}\n```"):
        doc = SafeDocument()
        doc.setTextWidth(400)
        header = 20.0
        [code] = render_markdown(doc, text, False, header)
        doc.size()  # lay it out
        top = doc.findBlockByNumber(code.first).layout().position().y()
        assert top - header >= 0, f"the strip starts {top - header} above the document"


def _row_is_painted(window: MainWindow, row: int) -> bool:
    """Whether the row shows more than the view's background (a blank box has one colour)."""
    view = window.timeline.view
    rect = view.visualRect(window.timeline.model.index(row, 0))
    image = view.viewport().grab(rect).toImage()
    colours = {image.pixel(x, y) for x in range(0, image.width(), 3)
               for y in range(0, image.height(), 3)}
    return len(colours) > 6


def test_copy_code_keeps_the_message_and_says_copied(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
    make_session: Callable[..., SessionInfo],
) -> None:
    """A click on Copy code used to leave the row blank (the view took the click for an
    edit and stopped painting the row) until the session was opened again."""
    window = open_chat(workspace, open_window, make_session)
    QGuiApplication.clipboard().clear()
    regions = row_regions(window, 1)
    ((code, button),) = regions["code"]
    viewport = window.timeline.view.viewport()
    assert _row_is_painted(window, 1)
    qtbot.mouseMove(viewport, button.center())
    qtbot.mouseClick(viewport, Qt.MouseButton.LeftButton, pos=button.center())
    qtbot.waitUntil(lambda: QGuiApplication.clipboard().text() == CODE)
    QApplication.processEvents()
    assert not window.timeline.view.editing
    assert _row_is_painted(window, 1)
    key = window.timeline.model.index(1, 0).data(KeyRole)
    assert window.timeline.delegate.copied_button() == (key, code.first)
    assert "Copied 2 lines" in window.statusBar().currentMessage()
    # The message's own Copy button (and the star) leave the row painted too.
    copy = row_regions(window, 1)["copy"]
    qtbot.mouseMove(viewport, copy.center())
    qtbot.mouseClick(viewport, Qt.MouseButton.LeftButton, pos=copy.center())
    qtbot.waitUntil(lambda: QGuiApplication.clipboard().text() == REPLY)
    assert window.timeline.delegate.copied_button() == (key, "message")
    assert not window.timeline.view.editing and _row_is_painted(window, 1)
    star = row_regions(window, 1)["star"]
    qtbot.mouseClick(viewport, Qt.MouseButton.LeftButton, pos=star.center())
    qtbot.waitUntil(lambda: window.timeline.model.index(1, 0).data(MessageRole).important)
    assert not window.timeline.view.editing and _row_is_painted(window, 1)


def test_invisible_and_reordering_characters_are_named_and_copied_as_written(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
    make_session: Callable[..., SessionInfo],
) -> None:
    """U+202E made "RLO:evil" read "RLO:live"; zero-width characters showed nothing;
    ``&amp; &lt;tag&gt;`` showed as ``& <tag>``. The timeline shows what the model gets."""
    texts = ["RLO:\u202eevil", "a\u200bb c\u2066d", "&amp; &lt;tag&gt;",
             "```python\nx = 1\u202e  # y\n```", "NUL:\x00end"]
    info = make_session(workspace, "Hostile", [("user", t) for t in texts])
    window = open_window(workspace)
    window.open_session(info.id)
    shown = [row_regions(window, row)["doc"].toPlainText() for row in range(len(texts))]
    assert shown == ["RLO:⟨U+202E⟩evil", "a⟨U+200B⟩b c⟨U+2066⟩d", "&amp; &lt;tag&gt;",
                     "x = 1⟨U+202E⟩  # y", "NUL:⟨U+0000⟩end"]
    # Copying gives the text as written, control characters and all.
    QGuiApplication.clipboard().clear()
    view = window.timeline.view
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton,
                     pos=view.visualRect(window.timeline.model.index(0, 0)).center())
    assert QApplication.focusWidget() is view
    qtbot.keyClick(view, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: QGuiApplication.clipboard().text() == texts[0])
    ((code, _button),) = row_regions(window, 3)["code"]
    assert code.text == "x = 1\u202e  # y"


def test_neighbouring_invisible_characters_are_each_named_in_order(
    qapp: QApplication,
) -> None:
    # Named a run at a time (200,000 joiners were 200,000 edits of the document), each
    # still by its own name, characters above U+FFFF (two UTF-16 units) among them.
    text = "a\u200b\u200c\U000e0041\u202e\u2066b " + "\u200d" * 3000 + " c\u202e"
    shown = render(text).toPlainText()
    assert shown == ("a⟨U+200B⟩⟨U+200C⟩⟨U+E0041⟩⟨U+202E⟩⟨U+2066⟩b " + "⟨U+200D⟩" * 3000
                     + " c⟨U+202E⟩")


def test_nul_is_named_like_other_control_characters(qapp: QApplication) -> None:
    # The Markdown parser turned U+0000 into U+FFFD before it could be named: the row
    # showed "a�b", as if the text held a replacement character.
    assert render("a\x00b and \x01").toPlainText() == "a⟨U+0000⟩b and ⟨U+0001⟩"
    # A private-use character of the text stays itself while NUL is named.
    assert render("\ue000\x00\ue001").toPlainText() == "\ue000⟨U+0000⟩\ue001"
    doc = SafeDocument()
    (code,) = render_markdown(doc, "```\nx\x00y\n```", dark=False, code_header=16)
    assert doc.toPlainText() == "x⟨U+0000⟩y"
    assert code.text == "x\x00y"  # what Copy code copies: the text as written


def test_every_format_character_is_named() -> None:
    import unicodedata

    from workbench.gui.delegates.markdown import invisible_spans, visible_text

    for point in range(0x110000):
        ch = chr(point)
        if unicodedata.category(ch) == "Cf" or (unicodedata.category(ch) == "Cc"
                                                and ch not in "\t\n\r"):
            assert invisible_spans(f"a {ch} b") == [(2, f"⟨U+{point:04X}⟩")], hex(point)
    # Joiners inside an emoji sequence or a Persian word, and an emoji's presentation
    # selector, are how that text is written: left alone.
    for text in ("👨\u200d👩\u200d👧", "می\u200cخواهم", "❤\ufe0f"):
        assert visible_text(text) == text
    assert visible_text("a\u200db") == "a⟨U+200D⟩b"
    assert visible_text("x\ufe0f\ufe01") == "x\ufe0f⟨U+FE01⟩"


def test_entity_text_stays_as_written_in_prose_and_code(qapp: QApplication) -> None:
    cases = {
        "&amp; &lt;tag&gt; &#x202E; &copy;": "&amp; &lt;tag&gt; &#x202E; &copy;",
        "`&amp;` and ``a `&lt;` b`` x &gt;": "&amp; and a `&lt;` b x &gt;",
        "```\n&amp;\n```": "&amp;",
        "Text\n\n    &amp; indented code": "Text\n&amp; indented code",
        "AT&T and a & b": "AT&T and a & b",
    }
    for markdown, shown in cases.items():
        assert render(markdown).toPlainText() == shown, markdown
