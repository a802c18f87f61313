"""The layout pieces panels are built from: a row that wraps, a scroll area that cannot
be squeezed below its content, and a combo box and a progress bar that show their text."""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import (
    QApplication,
    QLabel,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)
from pytestqt.qtbot import QtBot

from workbench.gui.layout import (
    FittedComboBox,
    FittedProgressBar,
    FlowLayout,
    VerticalScrollArea,
)

NAMES = ("Save for This Session", "Save for the Agent", "Use Agent Defaults")


def _row(qtbot: QtBot, width: int) -> tuple[QWidget, list[QPushButton]]:
    holder = QWidget()
    qtbot.addWidget(holder)
    column = QVBoxLayout(holder)
    row = FlowLayout()
    buttons = [QPushButton(name, holder) for name in NAMES]
    for button in buttons:
        row.addWidget(button)
    column.addLayout(row)
    column.addStretch(1)
    holder.resize(width, 200)
    holder.show()
    qtbot.waitExposed(holder)
    for _ in range(3):
        QApplication.processEvents()
    return holder, buttons


def test_a_flow_row_keeps_one_line_when_there_is_room(qtbot: QtBot) -> None:
    _holder, buttons = _row(qtbot, 900)
    assert len({b.geometry().top() for b in buttons}) == 1
    for button in buttons:
        assert button.width() >= button.sizeHint().width()


def test_a_flow_row_wraps_in_a_narrow_panel_and_asks_for_the_height(qtbot: QtBot) -> None:
    holder, buttons = _row(qtbot, 200)
    tops = [b.geometry().top() for b in buttons]
    assert len(set(tops)) == 3  # one a line
    for first, second in zip(buttons, buttons[1:], strict=False):
        assert not first.geometry().intersects(second.geometry())
    for button in buttons:
        assert 0 <= button.geometry().left() and button.geometry().right() < holder.width()
        assert button.width() >= button.minimumSizeHint().width()
    # The holder's minimum height now counts every line, so nothing above it squeezes them.
    needed = buttons[-1].geometry().bottom() - buttons[0].geometry().top()
    assert holder.minimumSizeHint().height() >= needed


def test_a_flow_row_settles_when_a_scroll_bar_makes_the_width_flip(qtbot: QtBot) -> None:
    holder = QWidget()
    qtbot.addWidget(holder)
    row = FlowLayout(holder)
    for name in NAMES:
        row.addWidget(QPushButton(name, holder))
    one_line = sum(row.itemAt(i).sizeHint().width() for i in range(row.count())) + 20
    # A width where all fit, then one a scroll bar narrower where they wrap, and back.
    row.setGeometry(QRect(0, 0, one_line, 100))
    row.setGeometry(QRect(0, 0, one_line - 30, 100))
    wrapped = row.minimumSize().height()
    row.setGeometry(QRect(0, 0, one_line, 100))
    # Settled on the taller height instead of asking for another pass.
    assert row.minimumSize().height() == wrapped


def test_a_vertical_scroll_area_is_never_narrower_than_its_content(qtbot: QtBot) -> None:
    content = QWidget()
    layout = QVBoxLayout(content)
    wide = QPushButton("A button that needs quite some room to be read whole", content)
    layout.addWidget(wide)
    area = VerticalScrollArea(content)
    splitter = QSplitter(Qt.Orientation.Horizontal)
    qtbot.addWidget(splitter)
    splitter.addWidget(QLabel("left"))
    splitter.addWidget(area)
    splitter.setChildrenCollapsible(False)
    splitter.resize(900, 300)
    splitter.show()
    qtbot.waitExposed(splitter)
    splitter.setSizes([880, 20])  # try to squeeze it
    QApplication.processEvents()
    assert area.width() >= area.minimumSizeHint().width()
    assert wide.width() >= wide.sizeHint().width()
    assert wide.mapTo(area, wide.rect().topRight()).x() < area.viewport().width()
    assert area.horizontalScrollBarPolicy() == Qt.ScrollBarPolicy.ScrollBarAlwaysOff


def test_a_fitted_combo_box_shows_its_longest_entry(qtbot: QtBot) -> None:
    combo = FittedComboBox()
    qtbot.addWidget(combo)
    combo.addItems(["Gemma local", "gemma-3-270m-it-Q4_K_M.gguf"])
    needed = QFontMetrics(combo.font()).horizontalAdvance("gemma-3-270m-it-Q4_K_M.gguf")
    assert combo.minimumSizeHint().width() > needed
    combo.addItem("x" * 200)  # a very long entry is elided rather than widen the panel
    assert combo.minimumSizeHint().width() < QFontMetrics(combo.font()).horizontalAdvance(
        "x" * 200)


def test_a_fitted_progress_bar_is_as_wide_as_its_text(qtbot: QtBot) -> None:
    bar = FittedProgressBar()
    qtbot.addWidget(bar)
    bar.setRange(0, 32768)
    bar.setValue(947)
    bar.setFormat("≈ 947 / 32,768 tokens")
    needed = QFontMetrics(bar.font()).horizontalAdvance(bar.text())
    assert bar.minimumSizeHint().width() > needed
