"""Painting one session in the browser: title (with a pin mark) over its details."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPalette
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem, QWidget

from workbench.gui.models import ModelIndex
from workbench.gui.models.sessions import SessionRole, session_summary

PAD_X = 8
PAD_Y = 5


class SessionDelegate(QStyledItemDelegate):
    """Two lines per session; pinned sessions carry a flag, archived ones are greyed."""

    def createEditor(self, parent: QWidget, option: QStyleOptionViewItem,
                     index: ModelIndex) -> QWidget:
        editor = super().createEditor(parent, option, index)
        editor.setAccessibleName("Session title")  # the in-place rename field
        return editor

    def sizeHint(self, option: QStyleOptionViewItem, index: ModelIndex) -> QSize:
        fm = QFontMetrics(option.font)
        # No width of its own: the row is as wide as the list, which never scrolls sideways
        # (the width of the rect asked about once stuck after the dock narrowed).
        return QSize(1, fm.height() * 2 + 2 * PAD_Y + 3)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: ModelIndex) -> None:
        info = index.data(SessionRole)
        if info is None:
            return
        painter.save()
        style = option.widget.style() if option.widget is not None else None
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""
        if style is not None:  # background, selection and focus as the style draws them
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, option.widget)
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        palette: QPalette = option.palette
        text_colour = palette.color(QPalette.ColorRole.HighlightedText if selected
                                    else QPalette.ColorRole.Text)
        muted = QColor(text_colour)
        muted.setAlpha(150)
        if info.archived:
            painter.setOpacity(0.6)
        fm = QFontMetrics(option.font)
        rect = option.rect.adjusted(PAD_X, PAD_Y, -PAD_X, -PAD_Y)
        title_font = QFont(option.font)
        title_font.setBold(True)
        title_rect = QRect(rect.left(), rect.top(), rect.width(), fm.height())
        x = title_rect.left()
        if info.pinned:
            painter.setPen(QColor("#d08a00"))
            painter.setFont(option.font)
            painter.drawText(title_rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                             "⚑")
            x += fm.horizontalAdvance("⚑ ")
        updated = info.updated_at.astimezone().strftime("%b %d")
        date_width = fm.horizontalAdvance(updated) + 6
        painter.setFont(option.font)
        painter.setPen(muted)
        painter.drawText(title_rect, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                         updated)
        painter.setFont(title_font)
        painter.setPen(text_colour)
        title_fm = QFontMetrics(title_font)
        available = title_rect.right() - x - date_width
        painter.drawText(QRect(x, title_rect.top(), max(0, available), title_rect.height()),
                         Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         title_fm.elidedText(info.title, Qt.TextElideMode.ElideRight, available))
        painter.setFont(option.font)
        painter.setPen(muted)
        detail_rect = QRect(rect.left(), title_rect.bottom() + 3, rect.width(), fm.height())
        painter.drawText(detail_rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         fm.elidedText(session_summary(info), Qt.TextElideMode.ElideRight,
                                       rect.width()))
        painter.restore()

    def updateEditorGeometry(self, editor: Any, option: QStyleOptionViewItem,
                             index: ModelIndex) -> None:
        fm = QFontMetrics(option.font)
        editor.setGeometry(option.rect.adjusted(PAD_X - 3, 2, -PAD_X,
                                                -(option.rect.height() - fm.height() - 10)))
