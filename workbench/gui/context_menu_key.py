"""Shift+F10 opens the context menu of the focused widget, as the Menu key does.

Qt turns the Menu key into a context-menu event for the focused widget; keyboards without
that key (most laptops) use Shift+F10 by the desktops' convention, which Qt does not know.
The window's "Context Menu" action (Shift+F10) sends the same event, at the place Qt
would use: the focused widget's cursor or current item (its input-method cursor
rectangle), else its centre.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, QRectF, Qt
from PySide6.QtGui import QContextMenuEvent
from PySide6.QtWidgets import QAbstractScrollArea, QApplication, QWidget


def open_context_menu(widget: QWidget | None = None) -> None:
    """Send ``widget`` (the focused one by default) the event the Menu key would send."""
    if widget is None:
        widget = QApplication.focusWidget()
    if widget is None:
        return
    inner = widget.viewport() if isinstance(widget, QAbstractScrollArea) else widget
    rect = widget.inputMethodQuery(Qt.InputMethodQuery.ImCursorRectangle)
    if isinstance(rect, QRectF):
        rect = rect.toRect()
    pos = rect.center() if isinstance(rect, QRect) and rect.isValid() \
        else inner.rect().center()
    pos.setX(max(0, min(pos.x(), inner.width() - 1)))
    pos.setY(max(0, min(pos.y(), inner.height() - 1)))
    event = QContextMenuEvent(QContextMenuEvent.Reason.Keyboard, pos, inner.mapToGlobal(pos))
    QApplication.sendEvent(widget, event)
