"""Every panel and dialog laid out whole at 1024×700, 1280×800 and 1920×1080.

The window is filled with what a person has after a few days of use (a provider with a
long model name, a session with tool calls, a compaction, facts, tasks and memory
entries); each dock is raised in turn and each dialog opened, and every visible control
is checked the way a person would look at it:

* a control with an accessible name must lie inside the visible part of its dock or
  dialog horizontally (and vertically, unless a scroll area can scroll to it);
* no control is squeezed below the minimum size its content needs;
* a label's text is not cut: a single line fits its width, a wrapped text its height;
* a combo box shows its whole current text, a progress bar its whole text;
* a list or a table does not scroll sideways, a table's shown columns are as wide as
  their headers and values need, and its rows as high as their wrapped text.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from PySide6.QtCore import QEventLoop, QPoint, QRect, Qt
from PySide6.QtGui import QFontMetrics, QTextDocument
from PySide6.QtGui import Qt as GuiQt
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractScrollArea,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QDialog,
    QLabel,
    QLineEdit,
    QListView,
    QProgressBar,
    QSizePolicy,
    QStyle,
    QStyleOptionComboBox,
    QTableView,
    QWidget,
)
from pytestqt.qtbot import QtBot

from workbench.core.conversation import Conversation, Message, Task
from workbench.core.provider import ProviderConfig
from workbench.core.tokens import fill_counts
from workbench.engine import compaction
from workbench.engine.providers import ProviderSettings
from workbench.engine.session_context import add_memory_entry
from workbench.engine.workspace import Workspace
from workbench.gui.dialogs.message_editor import MessageEditorDialog
from workbench.gui.dialogs.team_database import TeamDatabaseDialog
from workbench.gui.main_window import MainWindow

SIZES = [(1024, 700), (1280, 800), (1920, 1080)]
SIZE_IDS = [f"{w}x{h}" for w, h in SIZES]
PROVIDER = "Gemma local"
MODEL = "gemma-3-270m-it-Q4_K_M.gguf"
T0 = datetime(2025, 6, 3, 14, 0, tzinfo=UTC)


# -- what a person sees ---------------------------------------------------------------------


def _describe(widget: QWidget) -> str:
    name = widget.accessibleName() or widget.objectName()
    text = ""
    if isinstance(widget, QLabel | QAbstractButton):
        text = widget.text()
    elif isinstance(widget, QComboBox):
        text = widget.currentText()
    shown = f" {text[:40]!r}" if text else ""
    return f"{type(widget).__name__} {name!r}{shown}"


def _is_part_of_another_control(widget: QWidget) -> bool:
    """Line edits inside spin and combo boxes, scroll bars, headers, viewports: checked
    as part of the control that owns them."""
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QAbstractSpinBox | QComboBox | QLineEdit):
            return True
        if isinstance(parent, QAbstractScrollArea) and widget is not parent.viewport() \
                and not parent.viewport().isAncestorOf(widget):
            return True  # a scroll bar, a corner or a header of a view
        parent = parent.parentWidget()
    return False


def _rect_in(widget: QWidget, container: QWidget) -> QRect:
    return QRect(widget.mapTo(container, QPoint(0, 0)), widget.size())


def _visible_part(widget: QWidget, container: QWidget) -> tuple[tuple[int, int],
                                                              tuple[int, int], bool]:
    """The columns and the rows of ``widget`` its ancestors up to ``container`` let be
    seen (container coordinates, each span clipped on its own), and whether a scroll
    area on the way can scroll it vertically."""
    rect = _rect_in(widget, container)
    left, right, top, bottom = rect.left(), rect.right(), rect.top(), rect.bottom()
    scrolls = False
    ancestor = widget.parentWidget()
    while ancestor is not None:
        clip = _rect_in(ancestor, container)
        left, right = max(left, clip.left()), min(right, clip.right())
        top, bottom = max(top, clip.top()), min(bottom, clip.bottom())
        holder = ancestor.parentWidget()
        if isinstance(holder, QAbstractScrollArea) and ancestor is holder.viewport() \
                and holder.verticalScrollBarPolicy() != Qt.ScrollBarPolicy.ScrollBarAlwaysOff:
            scrolls = True
        if ancestor is container:
            break
        ancestor = ancestor.parentWidget()
    return (left, right), (top, bottom), scrolls


def _minimum_size(widget: QWidget) -> tuple[int, int]:
    """The width and height below which Qt would not shrink ``widget`` if it could."""
    policy = widget.sizePolicy()
    hint = widget.minimumSizeHint()
    width = widget.minimumWidth()
    if policy.horizontalPolicy() != QSizePolicy.Policy.Ignored:
        width = max(width, hint.width())
    height = widget.minimumHeight()
    if policy.verticalPolicy() != QSizePolicy.Policy.Ignored:
        if widget.hasHeightForWidth():
            # Its height follows its width (wrapping content): what it needs at the
            # width it was given, not at the narrowest it could be.
            height = max(height, widget.heightForWidth(widget.width()))
        else:
            height = max(height, hint.height())
    return width, height


def _text_width(label: QLabel) -> int:
    text = label.text()
    if label.textFormat() == Qt.TextFormat.RichText or (
            label.textFormat() == Qt.TextFormat.AutoText and GuiQt.mightBeRichText(text)):
        doc = QTextDocument()
        doc.setDocumentMargin(0)
        doc.setDefaultFont(label.font())
        doc.setHtml(text)
        return int(doc.idealWidth() + 0.999)
    fm = QFontMetrics(label.font())
    plain = text.replace("&&", "\0").replace("&", "").replace("\0", "&") \
        if label.buddy() is not None else text
    return max((fm.horizontalAdvance(line) for line in plain.split("\n")), default=0)


def _label_problem(label: QLabel) -> str | None:
    if not label.text() or label.pixmap() is not None and not label.pixmap().isNull():
        return None
    room = label.contentsRect().width() - 2 * max(label.margin(), 0) - max(label.indent(), 0)
    if label.wordWrap():
        needed = label.heightForWidth(label.width())
        if needed > label.height() + 1:
            return f"text needs {needed} px of height, has {label.height()}"
        return None
    needed = _text_width(label)
    if needed > room + 1:
        return f"text needs {needed} px, has {room} (elided or cut)"
    return None


def _combo_problem(combo: QComboBox) -> str | None:
    text = combo.currentText()
    if not text:
        return None
    fm = QFontMetrics(combo.font())
    if combo.isEditable() and combo.lineEdit() is not None:
        edit = combo.lineEdit()
        room = edit.width() - 8  # the line edit's own margins and cursor
    else:
        option = QStyleOptionComboBox()
        option.initFrom(combo)
        option.editable = False
        option.currentText = text
        field = combo.style().subControlRect(QStyle.ComplexControl.CC_ComboBox, option,
                                             QStyle.SubControl.SC_ComboBoxEditField, combo)
        room = field.width() - 4
    needed = fm.horizontalAdvance(text)
    if needed > room:
        return f"shows {text!r} in {room} px, needs {needed}"
    return None


def _progress_problem(bar: QProgressBar) -> str | None:
    if not bar.isTextVisible() or not bar.text() or bar.maximum() == bar.minimum() == 0:
        return None
    needed = QFontMetrics(bar.font()).horizontalAdvance(bar.text()) + 8
    if needed > bar.width():
        return f"text {bar.text()!r} needs {needed} px, has {bar.width()}"
    return None


def _table_problems(table: QTableView) -> list[str]:
    """Shown columns narrower than their header or values, or past the viewport. A
    free-text column set to stretch elides its long values on purpose (its cells carry
    the whole text in a tooltip), so only its end is checked."""
    from PySide6.QtWidgets import QHeaderView

    header = table.horizontalHeader()
    out = []
    room = table.viewport().width()
    for column in range(header.count()):
        if header.isSectionHidden(column):
            continue
        title = str(table.model().headerData(column, Qt.Orientation.Horizontal))
        need = max(header.sectionSizeHint(column), table.sizeHintForColumn(column))
        stretch = header.sectionResizeMode(column) == QHeaderView.ResizeMode.Stretch
        if not stretch and header.sectionSize(column) < need:
            out.append(f"column {title!r} is {header.sectionSize(column)} px, needs {need}")
        if header.sectionViewportPosition(column) + header.sectionSize(column) > room + 1:
            out.append(f"column {title!r} ends past the {room} px viewport")
    for row in range(table.model().rowCount()):
        # A cell whose text wraps onto more lines than its row is high shows it cut.
        if not table.isRowHidden(row) and table.sizeHintForRow(row) > table.rowHeight(row):
            out.append(f"row {row + 1} needs {table.sizeHintForRow(row)} px of height, "
                       f"has {table.rowHeight(row)}")
    return out


def layout_problems(container: QWidget, where: str) -> list[str]:
    """Every control of ``container`` that a person would see cut, squeezed or elided."""
    problems: list[str] = []
    for widget in container.findChildren(QWidget):
        if not widget.isVisible() or widget.width() <= 0 or widget.height() <= 0:
            continue
        if QWidget.window(widget) is not QWidget.window(container) \
                or _is_part_of_another_control(widget):
            continue
        named = bool(widget.accessibleName())
        is_text = isinstance(widget, QLabel | QAbstractButton | QComboBox | QProgressBar)
        if not named and (not is_text or isinstance(widget, QLabel) and not widget.text()):
            continue
        what = f"{where}: {_describe(widget)}"
        rect = _rect_in(widget, container)
        (left, right), (top, bottom), scrolls = _visible_part(widget, container)
        if left > rect.left() or right < rect.right():
            problems.append(f"{what} is cut horizontally: x {rect.left()}–{rect.right()}, "
                            f"visible {left}–{right}")
        elif not scrolls and (top > rect.top() or bottom < rect.bottom()):
            problems.append(f"{what} is cut vertically: y {rect.top()}–{rect.bottom()}, "
                            f"visible {top}–{bottom}")
        min_width, min_height = _minimum_size(widget)
        if widget.width() < min_width:
            problems.append(f"{what} is squeezed to {widget.width()} px (needs {min_width})")
        if widget.height() < min_height:
            problems.append(f"{what} is squeezed to {widget.height()} px high "
                            f"(needs {min_height})")
        problem = None
        if isinstance(widget, QLabel):
            problem = _label_problem(widget)
        elif isinstance(widget, QComboBox):
            problem = _combo_problem(widget)
        elif isinstance(widget, QProgressBar):
            problem = _progress_problem(widget)
        if problem:
            problems.append(f"{what}: {problem}")
        if isinstance(widget, QListView | QTableView) \
                and widget.horizontalScrollBar().isVisible():
            problems.append(f"{what} scrolls sideways")
        if isinstance(widget, QTableView):
            problems += [f"{what}: {p}" for p in _table_problems(widget)]
    return problems + _overlap_problems(container, where)


def _overlap_problems(container: QWidget, where: str) -> list[str]:
    """Shown controls that lie over a sibling (a row laid out one line too short puts a
    button over the text under it)."""
    problems: list[str] = []
    for parent in [container, *container.findChildren(QWidget)]:
        if not parent.isVisible() or isinstance(parent, QAbstractScrollArea | QComboBox
                                                | QAbstractSpinBox):
            continue
        shown = [w for w in parent.findChildren(
                     QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly)
                 if w.isVisible() and not w.isWindow() and w.width() > 0 and w.height() > 0
                 and not _is_part_of_another_control(w)]
        for i, one in enumerate(shown):
            for other in shown[i + 1:]:
                if one.geometry().intersects(other.geometry()):
                    problems.append(f"{where}: {_describe(one)} {one.geometry().getRect()} "
                                    f"lies over {_describe(other)} "
                                    f"{other.geometry().getRect()}")
    return problems


# -- a furnished workspace ------------------------------------------------------------------


def _agent_messages() -> list[Message]:
    call = {"id": "call_weather_1", "type": "function",
            "function": {"name": "get_forecast",
                         "arguments": '{"city": "Lisbon", "date": "2026-04-18"}'}}
    texts = [
        ("system", "You are a travel agent. Check the weather before you plan."),
        ("user", "Plan a weekend in Lisbon for two, with a vegetarian lunch each day."),
        ("assistant", ""),
        ("tool", '{"city": "Lisbon", "high_c": 21, "low_c": 13, "rain_probability": 0.15}'),
        ("assistant", "Saturday: Alfama in the morning, lunch in Baixa, tram 28 after."),
    ] + [(("user", "assistant")[i % 2], f"Step {i}: notes on the plan " * (1 + i % 3))
         for i in range(40)]
    out = []
    for i, (role, text) in enumerate(texts):
        extra: dict[str, object] = {}
        if i == 2:
            extra = {"tool_calls": [call]}
        if role == "tool":
            extra = {"tool_call_id": "call_weather_1", "name": "get_forecast"}
        out.append(Message(role=role, content=text, created_at=T0 + timedelta(minutes=i),
                           **extra))  # type: ignore[arg-type]
    fill_counts(out)
    return out


@pytest.fixture
def furnished(workspace: Workspace) -> Iterator[tuple[Workspace, int]]:
    """A workspace with a provider, and a session with tools, a compaction and context."""
    ProviderSettings(workspace.db).add(ProviderConfig(
        name=PROVIDER, kind="openai", base_url="http://127.0.0.1:9/v1", model=MODEL,
        context_window=8192, max_output_tokens=512))
    for i in range(6):
        workspace.import_conversation(Conversation(
            title=f"Support ticket #44{i} about a very long subject line that goes on",
            messages=[Message(role="user", content="Hello", created_at=T0)],
            tags=["support", "customer-care"]))
    session_id = workspace.import_conversation(Conversation(
        title="Sample: planning a weekend in Lisbon with a vegetarian lunch",
        messages=_agent_messages(), tags=["sample", "travel"])).id
    compaction.compact(workspace, session_id, keep=30)
    context = workspace.repo.get_context(session_id)
    context.facts = ["The traveller prefers trains over flights when the trip is under "
                     "five hours.", "Budget for the weekend is 600 EUR including lodging."]
    context.tasks = [Task("t1", "Find a guesthouse in Alfama under 120 EUR a night",
                          "running", progress=0.5)]
    workspace.repo.set_context(session_id, context)
    add_memory_entry(workspace, session_id, "The traveller is vegetarian.", scope="agent")
    yield workspace, session_id


def _busy(window: MainWindow) -> bool:
    """Work is under way or due: a job, or the Request panel's debounce timer running."""
    inspector = window.request_inspector
    return not window.ctx.workers.idle or (
        inspector is not None and inspector.isVisible() and inspector.busy)


def _settle(window: MainWindow) -> None:
    """Run the event loop until no job is running or due, then lay out what they showed."""
    deadline = time.monotonic() + 30
    for _ in range(3):
        QApplication.processEvents()
        while _busy(window) and time.monotonic() < deadline:
            QApplication.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 20)
            time.sleep(0.002)
        assert not _busy(window), "the window's work did not finish"
    QApplication.processEvents()


def _open(open_window: Callable[..., MainWindow], furnished: tuple[Workspace, int],
          size: tuple[int, int]) -> MainWindow:
    workspace, session_id = furnished
    window = open_window(workspace, size=size)
    window.open_session(session_id)
    _settle(window)
    return window


# -- the tests ------------------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_every_panel_lays_out_whole(
    size: tuple[int, int], furnished: tuple[Workspace, int],
    open_window: Callable[..., MainWindow],
) -> None:
    window = _open(open_window, furnished, size)
    assert window.width() == size[0]
    problems: list[str] = []
    problems += layout_problems(window.sessions_dock, "Sessions")
    problems += layout_problems(window.timeline, "Timeline")
    problems += layout_problems(window.statusBar(), "Status bar")
    if window.composer is not None:
        window.composer.prompt.setPlainText("Which steps of the plan are still open?")
        window.composer.refresh_gauge()
        _settle(window)
        problems += layout_problems(window.composer, "Composer")
    panels = [("Search", window.search_dock), ("Compaction", window.compaction_dock),
              ("Context", window.context_dock)]
    if window.request_inspector is not None:
        panels.append(("Request", window.request_dock))
    for name, dock in panels:
        dock.show()
        dock.raise_()
        if name == "Search":
            window.search.query_edit.setText("plan")
            window.search.search()
        if name == "Compaction":
            panel = window.compaction_panel
            panel.keep_count_spin.setValue(10)
            panel.preview()
        _settle(window)
        assert dock.isVisible() and dock.widget().isVisible()
        problems += layout_problems(dock, name)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_every_dialog_lays_out_whole(
    size: tuple[int, int], furnished: tuple[Workspace, int],
    open_window: Callable[..., MainWindow], qtbot: QtBot, tmp_path: Path,
) -> None:
    window = _open(open_window, furnished, size)
    problems: list[str] = []

    def look(dialog: QDialog, name: str) -> None:
        qtbot.waitExposed(dialog)
        _settle(window)
        if dialog.width() > size[0] or dialog.height() > size[1]:
            problems.append(f"{name} is {dialog.width()}×{dialog.height()}, larger than the "
                            f"{size[0]}×{size[1]} window")
        problems.extend(layout_problems(dialog, name))
        dialog.reject()

    look(window.show_providers(), "Providers")
    look(window.show_agents(), "Agents")
    look(window.show_shortcuts(), "Shortcuts")
    look(MessageEditorDialog(window, role="user", text="A new message\n" * 3,
                             title="Insert message"), "Message editor")
    team = TeamDatabaseDialog(window, address="postgresql://alice@db.example.org:5432/team")
    team.password_edit.setText("secret")
    team.show()
    look(team, "Open Team Database")
    team = TeamDatabaseDialog(window, address="db.example.org/team")
    team.show()
    team.accept()  # not a URL: the sentence under the field must fit too
    assert team.problem_label.isVisible()
    look(team, "Open Team Database (address refused)")

    bogus = tmp_path / "notes.txt"
    bogus.write_text("just some notes", encoding="utf-8")
    dialog = window.start_import(bogus)
    with qtbot.waitSignal(dialog.import_failed, timeout=20_000):
        pass
    # A failed import's bar says so; it is not a full "100%" bar.
    assert dialog.bar.value() < dialog.bar.maximum() and dialog.bar.text() == "Failed"
    look(dialog, "Import (failed)")

    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "good.json").write_text(json.dumps({
        "session_id": "conv-1", "title": "Conversation 1",
        "recent_history": [{"timestamp": "2025-01-01T10:00:00Z", "role": "user",
                            "content": "hello"}]}), encoding="utf-8")
    (mixed / "broken.json").write_text('{"session_id": "x", "recent_history": [{"role": 5}]}',
                                       encoding="utf-8")
    dialog = window.start_import(mixed, format="context-json")
    with qtbot.waitSignal(dialog.import_finished, timeout=20_000):
        pass
    assert "1 entry was skipped" in dialog.label.text()
    assert dialog.bar.text() == "100%"
    look(dialog, "Import (one skipped)")
    assert not problems, "\n".join(problems)


def test_docks_take_their_share_when_the_window_grows_and_shrinks(
    furnished: tuple[Workspace, int], open_window: Callable[..., MainWindow],
    qtbot: QtBot,
) -> None:
    window = _open(open_window, furnished, (1024, 700))
    window.compaction_dock.show()
    window.compaction_dock.raise_()
    _settle(window)
    small = (window.sessions_dock.width(), window.compaction_dock.width())
    window.resize(1920, 1080)
    qtbot.waitUntil(lambda: window.compaction_dock.width() > small[1] + 200)
    _settle(window)
    # Not a fixed 310 px: a sensible share of a wide window on either side.
    assert window.compaction_dock.width() >= 0.25 * 1920
    assert window.sessions_dock.width() >= 0.15 * 1920
    assert window.centralWidget().width() >= 0.4 * 1920
    problems = layout_problems(window.compaction_dock, "Compaction after growing")
    window.resize(1024, 700)
    qtbot.waitUntil(lambda: window.compaction_dock.width() < 0.4 * 1024)
    _settle(window)
    problems += layout_problems(window.compaction_dock, "Compaction after shrinking")
    problems += layout_problems(window.sessions_dock, "Sessions after shrinking")
    assert not problems, "\n".join(problems)


def test_a_dragged_separator_sets_the_share_kept_at_the_next_start(
    furnished: tuple[Workspace, int], open_window: Callable[..., MainWindow],
    qtbot: QtBot,
) -> None:
    workspace, _session_id = furnished
    window = _open(open_window, furnished, (1280, 800))
    dock = window.search_dock
    before = dock.width()
    # The separator lies between the centre and the dock on the right.
    x = (window.centralWidget().geometry().right() + dock.geometry().left()) // 2
    y = dock.geometry().center().y()
    qtbot.mousePress(window, Qt.MouseButton.LeftButton, pos=QPoint(x, y))
    for step in range(1, 11):  # the event loop runs between the moves, as for a person
        qtbot.mouseMove(window, QPoint(x - 12 * step, y))
        QApplication.processEvents()
    qtbot.mouseRelease(window, Qt.MouseButton.LeftButton, pos=QPoint(x - 120, y))
    _settle(window)
    assert dock.width() > before + 60
    share = dock.width() / window.width()
    # Growing the window keeps that share rather than the default one.
    window.resize(1600, 900)
    qtbot.waitUntil(lambda: abs(dock.width() - share * 1600) < 12)
    window.close()
    second = open_window(workspace, size=(1600, 900))
    _settle(second)
    qtbot.waitUntil(lambda: abs(second.search_dock.width() - share * 1600) < 12)


def test_a_tool_message_header_keeps_its_parts_apart(
    furnished: tuple[Workspace, int], open_window: Callable[..., MainWindow],
) -> None:
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtWidgets import QStyleOptionViewItem

    from workbench.gui.models.timeline import MessageRole

    class RecordingPainter(QPainter):
        def __init__(self, device: QImage) -> None:
            super().__init__(device)
            self.texts: list[tuple[QRect, str, QFontMetrics]] = []

        def drawText(self, *args: object) -> None:  # noqa: N802 - Qt's name
            if len(args) == 3 and isinstance(args[0], QRect) and isinstance(args[2], str):
                self.texts.append((QRect(args[0]), args[2], QFontMetrics(self.font())))
            super().drawText(*args)  # type: ignore[call-overload]

    workspace, _session_id = furnished
    window = _open(open_window, furnished, (1024, 700))
    tools = workspace.import_conversation(Conversation(title="Forecast",
                                                       messages=_agent_messages()[:5]))
    window.open_session(tools.id)
    _settle(window)
    view, model = window.timeline.view, window.timeline.model
    rows = [r for r in range(model.rowCount())
            if (m := model.index(r, 0).data(MessageRole)) is not None and m.role == "tool"]
    assert rows
    index = model.index(rows[0], 0)
    option = QStyleOptionViewItem()
    option.rect = QRect(0, 0, view.viewport().width(), view.sizeHintForIndex(index).height())
    option.font = view.font()
    option.palette = view.palette()
    option.widget = view
    image = QImage(option.rect.size(), QImage.Format.Format_ARGB32)
    painter = RecordingPainter(image)
    view.itemDelegate().paint(painter, option, index)
    painter.end()
    middle = [(r, t, fm) for r, t, fm in painter.texts if "call_weather_1" in t or "…" in t
              and "get_forecast" in t]
    right = [(r, t, fm) for r, t, fm in painter.texts if " tok" in t]
    assert middle and right, [t for _r, t, _fm in painter.texts]
    (m_rect, m_text, m_fm), (r_rect, r_text, r_fm) = middle[0], right[0]
    middle_end = m_rect.left() + m_fm.horizontalAdvance(m_text)
    right_start = r_rect.right() - r_fm.horizontalAdvance(r_text)
    assert middle_end < right_start, (m_text, r_text)


@pytest.mark.parametrize("size", SIZES[:1], ids=SIZE_IDS[:1])
def test_the_first_run_bar_lays_out_whole(
    size: tuple[int, int], furnished: tuple[Workspace, int],
    open_window: Callable[..., MainWindow], qtbot: QtBot,
) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on: no server answers
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    window = _open(open_window, furnished, size)
    bar = window.offer_local_servers([("llama.cpp", port)], force=True)
    # Nothing answers; the bar says so (or, with a provider set up, that one is).
    qtbot.waitUntil(lambda: "Looking for" not in bar.title.text(), timeout=15_000)
    _settle(window)
    assert window.width() == size[0]
    toolbar = bar.parentWidget()
    problems = layout_problems(toolbar, "First-run bar")
    if toolbar.geometry().right() >= window.width():
        problems.append(f"the first-run bar is {toolbar.width()} px wide in a "
                        f"{window.width()} px window")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_the_past_compactions_table_fits_its_dock(
    size: tuple[int, int], furnished: tuple[Workspace, int],
    open_window: Callable[..., MainWindow], qtbot: QtBot,
) -> None:
    workspace, session_id = furnished
    # A second compaction, undone: the longest state and the most rows.
    compaction.compact(workspace, session_id, keep=20)
    compaction.undo(workspace, session_id)
    window = _open(open_window, furnished, size)
    window.compaction_dock.show()
    window.compaction_dock.raise_()
    panel = window.compaction_panel
    table = panel.history_table
    qtbot.waitUntil(lambda: table.rowCount() == 2 and table.isVisible(), timeout=15_000)
    _settle(window)
    problems = layout_problems(window.compaction_dock, "Compaction")
    assert not problems, "\n".join(problems)
    assert not table.horizontalScrollBar().isVisible()
    shown = [str(table.horizontalHeaderItem(c).text()) for c in range(table.columnCount())
             if not table.isColumnHidden(c)]
    # What matters most stays in sight at every size ...
    assert {"When", "Folded", "Saved", "State"} <= set(shown), shown
    if size[0] >= 1920:
        assert len(shown) == table.columnCount(), shown
    # ... and what a narrow panel hides is in each row's tooltip.
    records = list(reversed(compaction.history(workspace, session_id)))
    for row, record in enumerate(records):
        tip = table.item(row, table.columnCount() - 1).toolTip()
        assert f"#{record.id}" in tip and record.policy in tip and record.summarizer in tip
        assert f"{record.tokens_saved:,} token" in tip
        assert ("Undone" in tip) == record.undone
    assert [r["State"] for r in panel.history_rows()] == ["undone", "applied"]


LONG_WORD_TITLE = ("conversation_export_2024_05_01_final_version_really_final_v2_copy_of_copy_"
                   "of_the_original_session_name_backup.json")
HUGE_TITLE = "Weird title " + "x" * 5_000


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_a_long_title_is_elided_and_the_window_keeps_its_width(
    size: tuple[int, int], furnished: tuple[Workspace, int],
    open_window: Callable[..., MainWindow], qtbot: QtBot,
) -> None:
    """A 114-character file name forced the window to 1,323 px (the session list shrank
    to 90 px at 1024), and a 5,000-character title to 32,767 px."""
    workspace, _session_id = furnished
    window = _open(open_window, furnished, size)
    window.context_dock.show()
    window.context_dock.raise_()
    _settle(window)
    list_width = window.sessions_dock.width()
    for title in (LONG_WORD_TITLE, HUGE_TITLE):
        info = workspace.import_conversation(Conversation(
            title=title, messages=[Message(role="user", content="hi", created_at=T0)]))
        window.browser.reload()
        window.open_session(info.id)
        _settle(window)
        assert window.width() == size[0], title[:20]
        assert abs(window.sessions_dock.width() - list_width) <= 2
        for label in (window.timeline.title_label, window.context_panel.title_label):
            shown = label.text().replace("\n", "")
            assert label.full_text().startswith(title)
            if shown != label.full_text():  # elided: the tooltip holds the whole title
                assert shown.endswith("…") and title.startswith(shown[:-1])
                assert title in _plain(label.toolTip())
            if title is HUGE_TITLE:
                assert shown != label.full_text()
            assert label.geometry().right() < window.width()
        assert len(window.windowTitle()) < 200
        problems = layout_problems(window.timeline, "Timeline")
        problems += layout_problems(window.sessions_dock, "Sessions")
        # (Only the Context dock's header: its usage rows have a width problem of their
        # own with a one-message session, titles or not.)
        problems += [p for p in layout_problems(window.context_dock, "Context")
                     if "'Context of'" in p]
        assert not problems, "\n".join(problems)


def _plain(tip: str) -> str:
    doc = QTextDocument()
    doc.setHtml(tip)
    return doc.toPlainText()
