"""Painting one session in the browser: title (with a pin mark) and date; agent and
counts; tags.

The counts are short ("3,000 msgs · 929k tok") and right-aligned, so they are never the
part that is cut: the agent's name gives way first. Tags take a third line of their own
(only rows with tags have it), elided at the list's width, so they show at every size.
The full figures are in the row's tooltip.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPalette
from PySide6.QtWidgets import QStyle, QStyleOptionViewItem, QWidget

from workbench.core.conversation import SessionInfo
from workbench.gui.delegates.markdown import visible_text
from workbench.gui.delegates.visible import VisibleTextDelegate
from workbench.gui.models import ModelIndex
from workbench.gui.models.sessions import SessionRole

PAD_X = 8
PAD_Y = 5
LINE_GAP = 3


def short_count(count: int) -> str:
    """``count`` in at most five characters: 950, 9.5k, 929k, 1.2M."""
    if count < 1_000:
        return str(count)
    if count < 10_000:
        return f"{count / 1_000:.1f}".rstrip("0").rstrip(".") + "k"
    if count < 999_500:
        return f"{round(count / 1_000)}k"
    if count < 10_000_000:
        return f"{count / 1_000_000:.1f}".rstrip("0").rstrip(".") + "M"
    return f"{round(count / 1_000_000)}M"


def short_counts(info: SessionInfo) -> str:
    """The counts of a session's row: "3,000 msgs · 929k tok" (and "archived")."""
    noun = "msg" if info.message_count == 1 else "msgs"
    text = f"{info.message_count:,} {noun} · {short_count(info.token_count)} tok"
    if info.archived:
        text += " · archived"
    return text


def tags_text(info: SessionInfo) -> str:
    return " ".join(f"#{tag}" for tag in info.tags)


class SessionDelegate(VisibleTextDelegate):  # renaming in place shows marks too
    """Two lines per session (three with tags); pinned sessions carry a flag, archived
    ones are greyed (see the module docstring)."""

    def createEditor(self, parent: QWidget, option: QStyleOptionViewItem,
                     index: ModelIndex) -> QWidget:
        editor = super().createEditor(parent, option, index)
        editor.setAccessibleName("Session title")  # the in-place rename field
        return editor

    def sizeHint(self, option: QStyleOptionViewItem, index: ModelIndex) -> QSize:
        fm = QFontMetrics(option.font)
        info = index.data(SessionRole)
        lines = 3 if info is not None and info.tags else 2
        # No width of its own: the row is as wide as the list, which never scrolls sideways
        # (the width of the rect asked about once stuck after the dock narrowed).
        return QSize(1, fm.height() * lines + (lines - 1) * LINE_GAP + 2 * PAD_Y)

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
                         title_fm.elidedText(visible_text(info.title), Qt.TextElideMode.ElideRight,
                                             available))
        painter.setFont(option.font)
        painter.setPen(muted)
        left = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter
        detail_rect = QRect(rect.left(), title_rect.bottom() + 1 + LINE_GAP, rect.width(),
                            fm.height())
        counts = short_counts(info)
        painter.drawText(detail_rect, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                         fm.elidedText(counts, Qt.TextElideMode.ElideRight, rect.width()))
        room = rect.width() - fm.horizontalAdvance(counts) - fm.horizontalAdvance("  ")
        if info.agent_name and room > fm.horizontalAdvance("M…"):
            painter.drawText(QRect(rect.left(), detail_rect.top(), room, fm.height()), left,
                             fm.elidedText(visible_text(info.agent_name),
                                           Qt.TextElideMode.ElideRight, room))
        if info.tags:
            tags_rect = QRect(rect.left(), detail_rect.bottom() + 1 + LINE_GAP, rect.width(),
                              fm.height())
            painter.setPen(tag_colour(palette, selected))
            painter.drawText(tags_rect, left,
                             fm.elidedText(visible_text(tags_text(info)),
                                           Qt.TextElideMode.ElideRight, rect.width()))
        painter.restore()

    def updateEditorGeometry(self, editor: Any, option: QStyleOptionViewItem,
                             index: ModelIndex) -> None:
        fm = QFontMetrics(option.font)
        editor.setGeometry(option.rect.adjusted(PAD_X - 3, 2, -PAD_X,
                                                -(option.rect.height() - fm.height() - 10)))


def tag_colour(palette: QPalette, selected: bool) -> QColor:
    """Tags in the link colour (muted text on a selected row)."""
    if selected:
        colour = QColor(palette.color(QPalette.ColorRole.HighlightedText))
        colour.setAlpha(200)
        return colour
    return QColor(palette.color(QPalette.ColorRole.Link))
