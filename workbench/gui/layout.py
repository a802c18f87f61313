"""Layout pieces that let panels fit the width they are given.

* :class:`FlowLayout`: a row of controls that wraps onto more lines when the width runs
  out (button rows, the composer's selectors), instead of pushing the last ones out of
  sight.
* :class:`VerticalScrollArea`: a scroll area that scrolls up and down only and is never
  narrower than its content's minimum, so the dock holding it cannot squeeze controls
  past its edge; Qt honours that minimum when the window or a splitter is resized.
* :class:`FittedProgressBar`: a progress bar whose minimum width is its text's.
* :class:`FittedComboBox`: a combo box whose minimum width shows its longest entry
  whole (up to a limit), where Qt's would let it shrink to a few letters.
* :class:`FittingTableWidget`: a table that hides its least needed columns when its
  width runs out, instead of scrolling sideways (their values go in a tooltip).
* :class:`ElidedLabel`: a plain-text label (a title) that wraps onto a few lines and
  elides the rest, whatever its length: it never asks the window to be wider, and its
  tooltip holds the whole text.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, QPoint, QRect, QSize, Qt
from PySide6.QtGui import QFont, QFontMetrics, QResizeEvent, QTextLayout, QTextOption
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QHeaderView,
    QLabel,
    QLayout,
    QLayoutItem,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QStyle,
    QTableWidget,
    QVBoxLayout,
    QWidget,
)

from workbench.gui.controls import named
from workbench.gui.delegates.markdown import plain_tooltip, visible_text

_DEFAULT_SPACING = 6


def named_button(text: str, name: str, tip: str = "", *,
                 clicked: Callable[[], object] | None = None,
                 parent: QWidget | None = None) -> QPushButton:
    """A push button with its accessible name (and tooltip); pressing calls ``clicked``."""
    button = named(QPushButton(text, parent), name, tip=tip)
    if clicked is not None:
        button.clicked.connect(clicked)
    return button

_FLIP_WIDTH = 40  # wider than any scroll bar


class FlowLayout(QLayout):
    """Items left to right, wrapping onto a new line when the next one does not fit.

    On each line the room left over goes to the items that expand horizontally (a
    gauge, a text field), so a line that fits is used in full. Its minimum height is
    that of the lines at the width it was last given: a splitter or a layout that does
    not ask for the height at a width still leaves room for every line.
    """

    def __init__(self, parent: QWidget | None = None, *, spacing: int = -1) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self._wrapped_height = 0  # the height at the width last laid out
        self._passes: list[tuple[int, int]] = []  # (width, height) of the last passes
        if parent is None:
            self.setContentsMargins(0, 0, 0, 0)
        if spacing >= 0:
            self.setSpacing(spacing)

    @classmethod
    def of(cls, *items: QWidget | QLayout) -> FlowLayout:
        """A flow of these widgets and nested layouts, in this order."""
        flow = cls()
        for item in items:
            if isinstance(item, QLayout):
                flow.addLayout(item)
            else:
                flow.addWidget(item)
        return flow

    # -- the item list QLayout asks for ----------------------------------------------------

    def addItem(self, item: QLayoutItem) -> None:  # noqa: N802 - Qt's name
        self._items.append(item)

    def addLayout(self, layout: QLayout) -> None:  # noqa: N802 - as QBoxLayout names it
        """Add a nested layout, kept together on one line."""
        self.addChildLayout(layout)
        self.addItem(layout)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:  # noqa: N802 - Qt's name
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:  # noqa: N802 - Qt's name
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    # -- sizes ---------------------------------------------------------------------------

    def expandingDirections(self) -> Qt.Orientation:  # noqa: N802 - Qt's name
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:  # noqa: N802 - Qt's name
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802 - Qt's name
        return self._arrange(QRect(0, 0, width, 0), move=False)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        items = self._visible()
        gap = self._gap()
        width = sum(i.sizeHint().width() for i in items) + gap * max(0, len(items) - 1)
        height = max((i.sizeHint().height() for i in items), default=0)
        return QSize(width, height) + self._margin_size()

    def minimumSize(self) -> QSize:  # noqa: N802 - Qt's name
        items = self._visible()
        width = max((i.minimumSize().width() for i in items), default=0)
        height = max((i.minimumSize().height() for i in items), default=0)
        size = QSize(width, height) + self._margin_size()
        return QSize(size.width(), max(size.height(), self._wrapped_height))

    def setGeometry(self, rect: QRect) -> None:  # noqa: N802 - Qt's name
        super().setGeometry(rect)
        height = self._arrange(rect, move=True)
        passes, self._passes = self._passes, (self._passes + [(rect.width(), height)])[-2:]
        if height == self._wrapped_height:
            return
        if len(passes) == 2 and passes[0] == (rect.width(), height) \
                and abs(passes[1][0] - rect.width()) <= _FLIP_WIDTH:
            # Back to the width of two passes ago: a scroll bar that comes and goes makes
            # the width flip. Settle on the taller of the two rather than lay out again.
            self._wrapped_height = max(height, passes[1][1])
            return
        self._wrapped_height = height
        self.invalidate()  # the minimum changed: the layouts above ask again

    # -- placing ---------------------------------------------------------------------------

    def _visible(self) -> list[QLayoutItem]:
        return [item for item in self._items if not item.isEmpty()]

    def _gap(self) -> int:
        spacing = self.spacing()
        if spacing >= 0:
            return spacing
        parent = self.parentWidget()
        if parent is not None:
            return parent.style().pixelMetric(QStyle.PixelMetric.PM_LayoutHorizontalSpacing)
        return _DEFAULT_SPACING

    def _margin_size(self) -> QSize:
        m = self.contentsMargins()
        return QSize(m.left() + m.right(), m.top() + m.bottom())

    def _arrange(self, rect: QRect, *, move: bool) -> int:
        """Lay the items out in ``rect`` (when ``move``); returns the height it takes."""
        m = self.contentsMargins()
        area = rect.adjusted(m.left(), m.top(), -m.right(), -m.bottom())
        room = max(1, area.width())
        gap = self._gap()
        lines: list[list[tuple[QLayoutItem, int]]] = [[]]
        used = 0
        for item in self._visible():
            width = min(max(item.sizeHint().width(), item.minimumSize().width()), room)
            line = lines[-1]
            if line and used + gap + width > room:
                lines.append([])
                line, used = lines[-1], 0
            used += (gap if line else 0) + width
            line.append((item, width))
        y = area.top()
        for line in lines:
            if not line:
                continue
            height = max(item.sizeHint().height() for item, _w in line)
            spare = room - sum(w for _i, w in line) - gap * (len(line) - 1)
            growing = [i for i, (item, _w) in enumerate(line)
                       if item.expandingDirections() & Qt.Orientation.Horizontal]
            x = area.left()
            for index, (item, width) in enumerate(line):
                if growing and index in growing:
                    share = spare // len(growing)
                    if index == growing[-1]:
                        share = spare - share * (len(growing) - 1)
                    width = min(width + max(0, share), item.maximumSize().width())
                if move:
                    item_height = min(height, max(item.sizeHint().height(),
                                                  item.minimumSize().height()))
                    if item.expandingDirections() & Qt.Orientation.Vertical:
                        item_height = height
                    top = y + (height - item_height) // 2
                    item.setGeometry(QRect(QPoint(x, top), QSize(width, item_height)))
                x += width + gap
            y += height + self._line_gap()
        return max(0, y - self._line_gap() - area.top()) + m.top() + m.bottom()

    def _line_gap(self) -> int:
        parent = self.parentWidget()
        if parent is not None:
            spacing = parent.style().pixelMetric(QStyle.PixelMetric.PM_LayoutVerticalSpacing)
            if spacing >= 0:
                return spacing
        return self._gap()


class VerticalScrollArea(QScrollArea):
    """Its content as wide as the view, scrolled up and down only; the area asks for at
    least the content's minimum width (plus room for the scroll bar)."""

    def __init__(self, content: QWidget, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setWidget(content)
        content.installEventFilter(self)

    def _extra_width(self) -> int:
        bar = self.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent, None, self)
        return bar + 2 * self.frameWidth()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        hint = super().minimumSizeHint()
        content = self.widget()
        if content is None:
            return hint
        return QSize(content.minimumSizeHint().width() + self._extra_width(), hint.height())

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        hint = super().sizeHint()
        content = self.widget()
        if content is None:
            return hint
        width = max(content.sizeHint().width(), content.minimumSizeHint().width())
        return QSize(width + self._extra_width(), hint.height())

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if watched is self.widget() and event.type() == QEvent.Type.LayoutRequest:
            self.updateGeometry()  # the content's minimum may have changed
        return super().eventFilter(watched, event)

    @classmethod
    def filling(cls, panel: QWidget, content: QWidget, name: str) -> VerticalScrollArea:
        """``content`` scrolled in an area that fills ``panel`` edge to edge."""
        area = cls(content, panel)
        area.setAccessibleName(name)
        layout = QVBoxLayout(panel)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(area)
        return area


class FittedProgressBar(QProgressBar):
    """A progress bar never narrower than the text it shows."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def _text_width(self) -> int:
        if not self.isTextVisible():
            return 0
        return self.fontMetrics().horizontalAdvance(self.text()) + 16

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        # QProgressBar's own minimum asks sizeHint(): built from the base class's sizes.
        hint = QProgressBar.minimumSizeHint(self)
        return QSize(max(hint.width(), self._text_width()), hint.height())

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        hint = QProgressBar.sizeHint(self)
        return QSize(max(hint.width(), self._text_width()), hint.height())

    def setFormat(self, text: str) -> None:  # noqa: N802 - Qt's name
        super().setFormat(text)
        self.updateGeometry()


class FittedComboBox(QComboBox):
    """A combo box that is never narrower than its longest entry (up to ``limit``
    characters; longer entries are elided)."""

    def __init__(self, parent: QWidget | None = None, *, limit: int = 36) -> None:
        super().__init__(parent)
        self.limit = limit
        self.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        hint = QComboBox.minimumSizeHint(self)
        cap = hint.width() + self.fontMetrics().averageCharWidth() * self.limit
        return QSize(max(hint.width(), min(self.sizeHint().width(), cap)), hint.height())


class FittingTableWidget(QTableWidget):
    """A table whose columns fit the width it gets: each column is as wide as its
    content, and when they do not all fit, the columns of ``drop_order`` are hidden one
    by one (first the least needed) until the rest do. Whoever fills the table puts what
    a hidden column says in each row's tooltip, so nothing is only reachable by scrolling
    sideways. Call :meth:`fit_columns` after changing the content."""

    def __init__(self, rows: int, columns: int, parent: QWidget | None = None, *,
                 drop_order: tuple[int, ...] = ()) -> None:
        super().__init__(rows, columns, parent)
        self.drop_order = drop_order
        self._fitting = False
        # Tab leaves the table for the next control; the arrow keys move inside it.
        self.setTabKeyNavigation(False)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)

    def column_needs(self) -> list[int]:
        """The width each column needs to show its header and its values whole."""
        header = self.horizontalHeader()
        hidden = [c for c in range(self.columnCount()) if self.isColumnHidden(c)]
        for column in hidden:
            self.setColumnHidden(column, False)
        needs = [max(header.sectionSizeHint(c), self.sizeHintForColumn(c))
                 for c in range(self.columnCount())]
        for column in hidden:
            self.setColumnHidden(column, True)
        return needs

    def fit_columns(self) -> None:
        """Show every column that fits the viewport's width, hiding the ones of
        ``drop_order`` in turn while they do not."""
        if self._fitting:
            return
        self._fitting = True
        try:
            needs = self.column_needs()
            room = self.viewport().width()
            hide: set[int] = set()
            for column in self.drop_order:
                if sum(n for c, n in enumerate(needs) if c not in hide) <= room:
                    break
                hide.add(column)
            for column in range(self.columnCount()):
                if self.isColumnHidden(column) != (column in hide):
                    self.setColumnHidden(column, column in hide)
        finally:
            self._fitting = False

    def resizeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)  # type: ignore[arg-type]
        self.fit_columns()


def fit_lines(text: str, font: QFont, width: int, lines: int,
              mode: Qt.TextElideMode = Qt.TextElideMode.ElideRight) -> list[str]:
    """``text`` broken into at most ``lines`` lines of ``width`` pixels (at spaces, or
    anywhere in a word longer than a line), the last line elided when text is left."""
    width = max(1, width)
    fm = QFontMetrics(font)
    if lines <= 1 or "\n" in text:
        first = text.split("\n", 1)[0]
        elided = fm.elidedText(first, mode, width)
        return [elided if first == text else fm.elidedText(first + " …", mode, width)]
    layout = QTextLayout(text, font)
    option = QTextOption()
    option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
    layout.setTextOption(option)
    layout.beginLayout()
    starts: list[int] = []
    while True:
        line = layout.createLine()
        if not line.isValid():
            break
        line.setLineWidth(width)
        starts.append(line.textStart())
    layout.endLayout()
    if len(starts) <= lines:
        return [text[start:end] for start, end in zip(starts, starts[1:] + [len(text)],
                                                      strict=True)]
    shown = [text[starts[i]:starts[i + 1]] for i in range(lines - 1)]
    shown.append(fm.elidedText(text[starts[lines - 1]:], mode, width))
    return shown


class ElidedLabel(QLabel):
    """A label for a title: plain text (invisible characters named), up to ``lines``
    lines, elided past them; the tooltip holds the whole text when any is cut.

    Its minimum width is a few characters whatever the text, so a 5,000-character title
    or a file name without spaces never makes its dock or the window wider. ``text()``
    is what is shown; :meth:`full_text` the whole text.
    """

    def __init__(self, text: str = "", parent: QWidget | None = None, *, lines: int = 2,
                 mode: Qt.TextElideMode = Qt.TextElideMode.ElideRight) -> None:
        super().__init__(parent)
        self._full = ""
        self._lines = lines
        self._mode = mode
        self._fitted_width = -1
        self.setTextFormat(Qt.TextFormat.PlainText)  # a title is data, not markup
        self.setWordWrap(False)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setText(text)

    def full_text(self) -> str:
        return self._full

    def setText(self, text: str) -> None:  # noqa: N802 - Qt's name
        self._full = text
        self._fitted_width = -1
        self._fit()

    def _fit(self) -> None:
        width = self.contentsRect().width()
        if width <= 1:
            width = self.fontMetrics().averageCharWidth() * 60
        if width == self._fitted_width:
            return
        self._fitted_width = width
        shown = visible_text(self._full)
        lines = fit_lines(shown, self.font(), width - 1, self._lines, self._mode)
        joined = "".join(lines)
        super().setText("\n".join(lines))
        cut = joined != shown
        self.setToolTip(plain_tooltip(self._full) if cut or shown != self._full else "")
        self.setAccessibleDescription(self._full if cut else "")

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self._fit()

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt's name
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self._fitted_width = -1
            self._fit()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        hint = super().minimumSizeHint()
        return QSize(self.fontMetrics().averageCharWidth() * 8, hint.height())

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        hint = super().sizeHint()
        fm = self.fontMetrics()
        width = min(fm.horizontalAdvance(visible_text(self._full)),
                    fm.averageCharWidth() * 60)
        return QSize(width + 2 * self.margin(), hint.height())
