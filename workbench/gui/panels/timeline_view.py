"""The timeline's view: variable-height rows whose layout cost does not grow with the session.

Why not a ``QListView``: it lays out every row before painting, and with rows of
varying height (wrapped Markdown) that is one text layout per message: 6 to 35 s for
100,000 messages, and again on every width change. Here only the rows on screen are
ever measured.

How: the view's place is an **anchor**, the row at the top of the viewport and how many
pixels of it are scrolled out of sight. Painting lays out rows downward from the anchor
until the viewport is full, measuring each with the delegate (heights are cached by the
row's key, so a row is measured once per width). Scrolling by pixels (wheel, touchpad)
moves the anchor across rows, measuring only the rows it passes.

The scroll bar counts **rows, not pixels**: its value is ``row * sub + fraction`` of the
anchor row (``sub`` sub-steps per row), so dragging the thumb to any place in 100,000
messages is one division, and its range comes from the number of rows and the last
screenful (the "bottom anchor": the anchor that shows the last row at the bottom edge),
measured from the end upward. A row far away is never measured to place the bar.

The view keeps to the end of the session while it is there (``follow_end``), so a reply
that streams in or grows stays in sight; otherwise rows inserted above keep the rows on
screen where they are. Around a model reset (a role filter, a collapsed run) the view
remembers the *position in the session* of its anchor row and finds it again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

from PySide6.QtCore import (
    QAbstractItemModel,
    QEvent,
    QItemSelection,
    QItemSelectionModel,
    QModelIndex,
    QPersistentModelIndex,
    QPoint,
    QRect,
    Qt,
    Signal,
)
from PySide6.QtGui import (
    QKeyEvent,
    QPainter,
    QPalette,
    QPixmap,
    QRegion,
    QResizeEvent,
    QWheelEvent,
)
from PySide6.QtWidgets import (
    QAbstractItemDelegate,
    QAbstractItemView,
    QApplication,
    QStyle,
    QStyleOptionViewItem,
    QWidget,
)

from workbench.gui.controls import single_shot
from workbench.gui.delegates.message_editor import MessageEditor
from workbench.gui.models import ModelIndex
from workbench.gui.models.timeline import KeyRole, TimelineModel

MAX_SUB = 1000
#: Pictures of rows kept: this many screenfuls.
PICTURE_SCREENS = 3
_INT_LIMIT = 2**31 - 2


class TimelineView(QAbstractItemView):
    """Shows a :class:`TimelineModel` (see the module docstring for how it scrolls)."""

    place_changed = Signal()  # the rows on screen changed (scrolling, resizing, a reset)
    toggle_requested = Signal(QModelIndex)  # Space or Enter on the current row

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._anchor_row = 0
        self._anchor_offset = 0
        self._follow_end = True
        self._heights: dict[Any, int] = {}
        self._heights_width = -1
        self._layout: list[tuple[int, int, int]] | None = None
        self._sub = MAX_SUB
        self._syncing = False
        self._saved_place: tuple[int, int, bool] | None = None
        self._saved_current: int | None = None  # position of the current row across resets
        self._editing: QPersistentModelIndex | None = None
        self._hover_row = -1
        # Pictures of rows as last painted, by what they show (see _row_picture).
        self._pictures: OrderedDict[Hashable, QPixmap] = OrderedDict()
        self._picture_bytes = 0
        self.empty_text = "No session is open."

        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOn)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setEditTriggers(QAbstractItemView.EditTrigger.DoubleClicked
                             | QAbstractItemView.EditTrigger.EditKeyPressed)
        self.setMouseTracking(True)
        self.setAccessibleName("Message timeline")
        self.setAccessibleDescription("The messages of the open session, oldest first")
        self._prefetch_timer = single_shot(self, 40, self._prefetch)

    # -- model -------------------------------------------------------------------------

    def setModel(self, model: QAbstractItemModel | None) -> None:
        old = self.model()
        if old is not None:
            for signal, slot in self._model_connections(old):
                try:
                    signal.disconnect(slot)
                except (RuntimeError, TypeError):
                    pass
        super().setModel(model)
        if model is not None:
            for signal, slot in self._model_connections(model):
                signal.connect(slot)
        self._anchor_row = self._anchor_offset = 0
        self._follow_end = True
        self._invalidate()

    def _model_connections(self, model: QAbstractItemModel) -> list[tuple[Any, Any]]:
        return [
            (model.modelAboutToBeReset, self._save_place),
            (model.rowsRemoved, self._after_rows_removed),
            (model.layoutChanged, self._invalidate),
        ]

    def _timeline(self) -> TimelineModel | None:
        model = self.model()
        return model if isinstance(model, TimelineModel) else None

    def _save_place(self) -> None:
        model = self._timeline()
        if model is None or model.rowCount() == 0:
            self._saved_place = None
            return
        row = min(self._anchor_row, model.rowCount() - 1)
        self._saved_place = (model.position_at(row), self._anchor_offset, self._follow_end)
        current = self.currentIndex()
        self._saved_current = (model.position_at(current.row())
                               if current.isValid() and not model.is_pending_row(current.row())
                               else None)

    def reset(self) -> None:
        super().reset()
        self._hover_row = -1
        model = self._timeline()
        place, self._saved_place = self._saved_place, None
        if model is not None and place is not None and model.rowCount() > 0:
            position, offset, follow = place
            row = model.row_for_position(position)
            self._anchor_row = row
            self._anchor_offset = offset if model.position_at(row) == position else 0
            self._follow_end = follow
        else:
            self._anchor_row = self._anchor_offset = 0
            self._follow_end = True
        current, self._saved_current = self._saved_current, None
        if model is not None and current is not None and model.rowCount() > 0:
            row = model.row_for_position(current)
            if model.position_at(row) == current:
                self.selectionModel().setCurrentIndex(
                    model.index(row, 0), QItemSelectionModel.SelectionFlag.ClearAndSelect)
        self._refresh()

    def rowsInserted(self, parent: ModelIndex, start: int, end: int) -> None:
        super().rowsInserted(parent, start, end)
        if not self._follow_end and start <= self._anchor_row:
            self._anchor_row += end - start + 1
        self._refresh()

    def rowsAboutToBeRemoved(self, parent: ModelIndex, start: int, end: int) -> None:
        super().rowsAboutToBeRemoved(parent, start, end)
        if end < self._anchor_row:
            self._anchor_row -= end - start + 1
        elif start <= self._anchor_row:
            self._anchor_row, self._anchor_offset = start, 0

    def _after_rows_removed(self, *_args: Any) -> None:
        self._refresh()

    def dataChanged(self, top_left: ModelIndex, bottom_right: ModelIndex,
                    roles: list[int] | None = None) -> None:
        super().dataChanged(top_left, bottom_right, roles or [])
        self._refresh()

    # -- heights and layout --------------------------------------------------------------

    def _option(self, rect: QRect) -> QStyleOptionViewItem:
        option = QStyleOptionViewItem()
        self.initViewItemOption(option)
        option.rect = rect
        return option

    def _delegate(self, index: ModelIndex) -> QAbstractItemDelegate:
        return self.itemDelegateForIndex(index)

    def row_height(self, row: int) -> int:
        """The height of ``row`` at the current width (measured once, then cached)."""
        model = self.model()
        width = self.viewport().width()
        if width != self._heights_width:
            self._heights.clear()
            self._heights_width = width
        index = model.index(row, 0)
        key = index.data(KeyRole)
        height = self._heights.get(key) if key is not None else None
        if height is None:
            option = self._option(QRect(0, 0, width, 0))
            height = max(8, self._delegate(index).sizeHint(option, index).height())
            if key is not None:
                self._heights[key] = height
        if self._editing is not None and self._editing.isValid() and self._editing.row() == row:
            editor = self._editor_widget()
            if editor is not None:
                height = max(height, editor.preferred_height() + 8)
        return height

    def _editor_widget(self) -> MessageEditor | None:
        for editor in self.viewport().findChildren(MessageEditor):
            return editor
        return None

    def _bottom_anchor(self) -> tuple[int, int]:
        """The anchor that shows the last row's bottom at the viewport's bottom edge."""
        rows = self.model().rowCount() if self.model() is not None else 0
        space = self.viewport().height()
        row = rows - 1
        while row >= 0:
            height = self.row_height(row)
            if height >= space:
                return row, height - space
            space -= height
            row -= 1
        return 0, 0

    def _clamp_anchor(self) -> None:
        rows = self.model().rowCount() if self.model() is not None else 0
        if rows == 0:
            self._anchor_row = self._anchor_offset = 0
            return
        self._anchor_row = max(0, min(self._anchor_row, rows - 1))
        self._anchor_offset = max(0, self._anchor_offset)
        bottom = self._bottom_anchor()
        if self._follow_end or (self._anchor_row, self._anchor_offset) >= bottom:
            self._anchor_row, self._anchor_offset = bottom
            self._follow_end = True

    def _ensure_layout(self) -> list[tuple[int, int, int]]:
        if self._layout is not None:
            return self._layout
        model = self.model()
        if model is None or model.rowCount() == 0:
            self._layout = []
            return self._layout
        self._clamp_anchor()
        rows = model.rowCount()
        space = self.viewport().height()
        layout: list[tuple[int, int, int]] = []
        row, y = self._anchor_row, -self._anchor_offset
        while row < rows and y < space:
            height = self.row_height(row)
            layout.append((row, y, height))
            y += height
            row += 1
        self._layout = layout
        if not self._prefetch_timer.isActive():
            # A throttle, not a debounce: pages are read ahead during a long scroll too.
            self._prefetch_timer.start()
        return layout

    def _invalidate(self) -> None:
        self._layout = None

    def _refresh(self) -> None:
        """Lay out again, move the scroll bar to match and repaint."""
        self._layout = None
        self._ensure_layout()
        self._sync_scrollbar()
        self.viewport().update()
        self.updateEditorGeometries()
        self.place_changed.emit()

    def _fraction(self, row: int, offset: int) -> int:
        return min(self._sub - 1, offset * self._sub // max(1, self.row_height(row)))

    def _sync_scrollbar(self) -> None:
        bar = self.verticalScrollBar()
        model = self.model()
        rows = model.rowCount() if model is not None else 0
        self._syncing = True
        try:
            if rows == 0:
                bar.setRange(0, 0)
                return
            self._sub = max(1, min(MAX_SUB, _INT_LIMIT // rows))
            bottom_row, bottom_offset = self._bottom_anchor()
            maximum = bottom_row * self._sub + self._fraction(bottom_row, bottom_offset)
            bar.setRange(0, maximum)
            shown = len(self._layout or [])
            bar.setPageStep(max(1, shown - 1) * self._sub)
            bar.setSingleStep(max(1, self._sub // 4))
            value = self._anchor_row * self._sub + self._fraction(self._anchor_row,
                                                                  self._anchor_offset)
            bar.setValue(maximum if self._follow_end else min(value, maximum))
        finally:
            self._syncing = False

    def _prefetch(self) -> None:
        model = self._timeline()
        if model is not None and self._layout:
            model.prefetch(self._layout[0][0], self._layout[-1][0])

    # -- scrolling ---------------------------------------------------------------------

    def scrollContentsBy(self, dx: int, dy: int) -> None:
        if self._syncing:
            return
        model = self.model()
        if model is None or model.rowCount() == 0:
            return
        bar = self.verticalScrollBar()
        value = bar.value()
        row = min(value // self._sub, model.rowCount() - 1)
        offset = (value % self._sub) * self.row_height(row) // self._sub
        self._anchor_row, self._anchor_offset = row, offset
        self._follow_end = value >= bar.maximum()
        self._layout = None
        self._ensure_layout()
        self.viewport().update()
        self.updateEditorGeometries()
        self.place_changed.emit()

    def scroll_by_pixels(self, dy: int) -> None:
        """Scroll the content up by ``dy`` pixels (down when negative), row by row."""
        model = self.model()
        if model is None or model.rowCount() == 0 or dy == 0:
            return
        self._clamp_anchor()
        rows = model.rowCount()
        row, offset = self._anchor_row, self._anchor_offset + dy
        while offset < 0 and row > 0:
            row -= 1
            offset += self.row_height(row)
        offset = max(0, offset)
        while row < rows - 1 and offset >= self.row_height(row):
            offset -= self.row_height(row)
            row += 1
        self._anchor_row, self._anchor_offset = row, offset
        self._follow_end = False
        bottom = self._bottom_anchor()
        if (row, offset) >= bottom:
            self._anchor_row, self._anchor_offset = bottom
            self._follow_end = True
        self._refresh()

    def wheelEvent(self, event: QWheelEvent) -> None:
        pixels = event.pixelDelta().y()
        if pixels == 0:
            notches = event.angleDelta().y() / 120
            pixels = int(notches * QApplication.wheelScrollLines()
                         * self.fontMetrics().lineSpacing())
        if pixels:
            self.scroll_by_pixels(-pixels)
        event.accept()

    def scroll_to_end(self) -> None:
        """Show the last rows and keep to the end."""
        self._follow_end = True
        self._refresh()

    def scroll_to_start(self) -> None:
        self._follow_end = False
        self._anchor_row = self._anchor_offset = 0
        self._refresh()

    @property
    def at_end(self) -> bool:
        """Whether the last row is shown at the bottom."""
        self._ensure_layout()
        return self._follow_end

    def scrollTo(self, index: ModelIndex,
                 hint: QAbstractItemView.ScrollHint = QAbstractItemView.ScrollHint.EnsureVisible,
                 ) -> None:
        if not index.isValid() or self.model() is None:
            return
        row = index.row()
        layout = self._ensure_layout()
        space = self.viewport().height()
        height = self.row_height(row)
        Hint = QAbstractItemView.ScrollHint
        if hint == Hint.EnsureVisible:
            for shown_row, y, h in layout:
                if shown_row == row and y >= 0 and (y + h <= space or h > space):
                    return
            above = row < self._anchor_row or (row == self._anchor_row
                                               and self._anchor_offset > 0)
            hint = Hint.PositionAtTop if above or height >= space else Hint.PositionAtBottom
        if hint == Hint.PositionAtTop or height >= space:
            self._anchor_row, self._anchor_offset = row, 0
        else:
            room = space - height if hint == Hint.PositionAtBottom else (space - height) // 2
            anchor = row
            while room > 0 and anchor > 0:
                anchor -= 1
                room -= self.row_height(anchor)
            self._anchor_row, self._anchor_offset = anchor, max(0, -room)
        self._follow_end = False
        self._refresh()

    # -- geometry for QAbstractItemView ----------------------------------------------------

    def visualRect(self, index: ModelIndex) -> QRect:
        if not index.isValid():
            return QRect()
        width = self.viewport().width()
        for row, y, height in self._ensure_layout():
            if row == index.row():
                return QRect(0, y, width, height)
        return QRect()

    def indexAt(self, point: QPoint) -> QModelIndex:
        model = self.model()
        if model is None:
            return QModelIndex()
        for row, y, height in self._ensure_layout():
            if y <= point.y() < y + height:
                return model.index(row, 0)
        return QModelIndex()

    def moveCursor(self, action: QAbstractItemView.CursorAction,
                   modifiers: Qt.KeyboardModifier) -> QModelIndex:
        model = self.model()
        if model is None or model.rowCount() == 0:
            return QModelIndex()
        layout = self._ensure_layout()
        current = self.currentIndex()
        row = current.row() if current.isValid() else (layout[0][0] if layout else 0)
        page = max(1, len(layout) - 1)
        Action = QAbstractItemView.CursorAction
        moves = {
            Action.MoveUp: row - 1, Action.MovePrevious: row - 1,
            Action.MoveDown: row + 1, Action.MoveNext: row + 1,
            Action.MovePageUp: row - page, Action.MovePageDown: row + page,
            Action.MoveHome: 0, Action.MoveEnd: model.rowCount() - 1,
        }
        target = max(0, min(model.rowCount() - 1, moves.get(action, row)))
        return model.index(target, 0)

    def horizontalOffset(self) -> int:
        return 0

    def verticalOffset(self) -> int:
        return 0

    def isIndexHidden(self, index: ModelIndex) -> bool:
        return False

    def setSelection(self, rect: QRect, command: QItemSelectionModel.SelectionFlag) -> None:
        model = self.model()
        area = rect.normalized()
        rows = [row for row, y, height in self._ensure_layout()
                if y <= area.bottom() and y + height > area.top()]
        selection = QItemSelection()
        if rows and model is not None:
            selection.select(model.index(min(rows), 0), model.index(max(rows), 0))
        self.selectionModel().select(selection, command)

    def visualRegionForSelection(self, selection: QItemSelection) -> QRegion:
        region = QRegion()
        model = self.model()
        width = self.viewport().width()
        for row, y, height in self._ensure_layout():
            if selection.contains(model.index(row, 0)):
                region += QRect(0, y, width, height)
        return region

    def updateGeometries(self) -> None:
        super().updateGeometries()
        self._sync_scrollbar()

    def doItemsLayout(self) -> None:
        # Qt calls this when a delegate's size hint changes: measure again what is shown.
        super().doItemsLayout()
        self._refresh()

    def setItemDelegate(self, delegate: QAbstractItemDelegate) -> None:
        super().setItemDelegate(delegate)
        delegate.sizeHintChanged.connect(self.forget_row)

    def forget_row(self, index: ModelIndex) -> None:
        """Measure one row again (its look changed without its key changing)."""
        if index.isValid():
            self._heights.pop(index.data(KeyRole), None)
        self._refresh()

    # -- editing -----------------------------------------------------------------------

    def edit(self, index: ModelIndex, trigger: Any = None, event: QEvent | None = None) -> bool:
        if trigger is None:
            trigger = QAbstractItemView.EditTrigger.AllEditTriggers
        opened = super().edit(index, trigger, event)
        # Qt's edit() also answers True when the delegate took the event (a click on a
        # copy button, the star or "Show all"): only an open editor makes an edit, else
        # the row would be left unpainted as if an editor covered it.
        if opened and self.state() == QAbstractItemView.State.EditingState:
            self._editing = QPersistentModelIndex(index)
            self.scrollTo(index)
            self._refresh()
        return opened

    def closeEditor(self, editor: QWidget, hint: QAbstractItemDelegate.EndEditHint) -> None:
        super().closeEditor(editor, hint)
        self._editing = None
        self._refresh()
        self.setFocus(Qt.FocusReason.OtherFocusReason)

    def commit_edit(self) -> bool:
        """Save the message being edited in place and close its editor, as clicking
        another message does (before the session or the database changes, or the
        window closes); the keyboard focus stays where it is. Returns whether an
        editor was open."""
        if not self.editing or self._editing is None:
            return False
        model = self.model()
        editor = self.indexWidget(model.index(self._editing.row(), 0))
        if editor is None:
            self._editing = None
            return False
        self.commitData(editor)
        super().closeEditor(editor, QAbstractItemDelegate.EndEditHint.NoHint)
        self._editing = None
        self._refresh()
        return True

    @property
    def editing(self) -> bool:
        return self._editing is not None and self._editing.isValid()

    # -- events ------------------------------------------------------------------------

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._refresh()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        # Space and Enter do on the current row what a click on its expander does: show
        # all of a long message (or fold it again), open or close a folded run.
        plain = event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier \
            == Qt.KeyboardModifier.NoModifier
        if plain and event.key() in (Qt.Key.Key_Space, Qt.Key.Key_Return, Qt.Key.Key_Enter) \
                and not self.editing and self.currentIndex().isValid():
            self.toggle_requested.emit(QModelIndex(self.currentIndex()))
            event.accept()
            return
        super().keyPressEvent(event)

    def mouseMoveEvent(self, event: Any) -> None:
        row = self.indexAt(event.position().toPoint()).row()
        if row != self._hover_row:
            self._hover_row = row
            self.viewport().update()
        super().mouseMoveEvent(event)

    def leaveEvent(self, event: QEvent) -> None:
        self._hover_row = -1
        self.viewport().update()
        super().leaveEvent(event)

    def paintEvent(self, event: Any) -> None:
        painter = QPainter(self.viewport())
        model = self.model()
        layout = self._ensure_layout()
        if not layout:
            painter.setPen(self.palette().color(QPalette.ColorRole.PlaceholderText))
            margin = self.fontMetrics().averageCharWidth() * 4
            painter.drawText(self.viewport().rect().adjusted(margin, 0, -margin, 0),
                             Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap,
                             self.empty_text)
            painter.end()
            return
        width = self.viewport().width()
        selection = self.selectionModel()
        current = self.currentIndex()
        exposed = event.rect()
        space = self.viewport().height()
        for row, y, height in layout:
            rect = QRect(0, y, width, height)
            if not rect.intersects(exposed):
                continue
            index = model.index(row, 0)
            option = self._option(rect)
            if selection is not None and selection.isSelected(index):
                option.state |= QStyle.StateFlag.State_Selected
            if current.isValid() and current.row() == row and self.hasFocus():
                option.state |= QStyle.StateFlag.State_HasFocus
            if row == self._hover_row:
                option.state |= QStyle.StateFlag.State_MouseOver
            if self._editing is not None and self._editing.isValid() \
                    and self._editing.row() == row:
                continue  # the editor covers this row
            delegate = self._delegate(index)
            picture = self._row_picture(delegate, option, index) \
                if height <= 2 * space else None
            if picture is None:
                delegate.paint(painter, option, index)
            else:
                painter.drawPixmap(QPoint(0, y), picture)
        painter.end()

    def _row_picture(self, delegate: QAbstractItemDelegate, option: QStyleOptionViewItem,
                     index: ModelIndex) -> QPixmap | None:
        """The row's picture as ``delegate`` paints it with ``option``: kept from an
        earlier paint while what it shows is the same (the delegate's ``paint_key``), so
        scrolling paints only the rows that came into view. None for a row the delegate
        paints every time."""
        paint_key = getattr(delegate, "paint_key", None)
        key = paint_key(option, index) if paint_key is not None else None
        if key is None:
            return None
        picture = self._pictures.get(key)
        if picture is not None:
            self._pictures.move_to_end(key)
            return picture
        viewport = self.viewport()
        ratio = viewport.devicePixelRatioF()
        size = option.rect.size()
        picture = QPixmap(max(1, round(size.width() * ratio)), max(1, round(size.height() * ratio)))
        picture.setDevicePixelRatio(ratio)
        if viewport.autoFillBackground():
            picture.fill(viewport.palette().color(viewport.backgroundRole()))
        else:
            picture.fill(Qt.GlobalColor.transparent)
        local = QStyleOptionViewItem(option)
        local.rect = QRect(QPoint(0, 0), size)
        painter = QPainter(picture)
        try:
            delegate.paint(painter, local, index)
        finally:
            painter.end()
        self._pictures[key] = picture
        self._picture_bytes += picture.width() * picture.height() * 4
        budget = PICTURE_SCREENS * 4 * viewport.width() * viewport.height() * ratio * ratio
        while self._picture_bytes > budget and len(self._pictures) > 1:
            _key, old = self._pictures.popitem(last=False)
            self._picture_bytes -= old.width() * old.height() * 4
        return picture

    def forget_pictures(self) -> None:
        """Paint every row anew (its look changed in a way its key does not tell)."""
        self._pictures.clear()
        self._picture_bytes = 0

    # -- what is on screen (for the window and for tests) ---------------------------------

    def visible_rows(self) -> list[int]:
        """Rows at least partly on screen, top to bottom."""
        return [row for row, _y, _h in self._ensure_layout()]

    def first_visible_row(self) -> int:
        rows = self.visible_rows()
        return rows[0] if rows else -1

    def last_visible_row(self) -> int:
        rows = self.visible_rows()
        return rows[-1] if rows else -1

    def forget_heights(self) -> None:
        """Measure every row again (after a font or theme change)."""
        self._heights.clear()
        self.forget_pictures()
        self._refresh()
