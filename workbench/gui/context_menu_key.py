"""Shift+F10 opens the context menu of the focused widget, as the Menu key does.

Qt turns the Menu key into a context-menu event for the focused widget; keyboards without
that key (most laptops) use Shift+F10 by the desktops' convention, which Qt does not know.
An application-wide event filter sends the same event, at the place Qt would use: the
focused widget's cursor or current item (its input-method cursor rectangle), else its
centre.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QContextMenuEvent, QKeyEvent
from PySide6.QtWidgets import QAbstractScrollArea, QApplication, QWidget


class ContextMenuKeyFilter(QObject):
    """Sends a keyboard context-menu event to the focused widget on Shift+F10."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if event.type() != QEvent.Type.KeyPress or not isinstance(event, QKeyEvent):
            return False
        if event.key() != Qt.Key.Key_F10 \
                or event.modifiers() != Qt.KeyboardModifier.ShiftModifier:
            return False
        widget = QApplication.focusWidget()
        if widget is None or watched is not widget:
            return False
        open_context_menu(widget)
        return True


def open_context_menu(widget: QWidget) -> None:
    """Send ``widget`` the context-menu event the Menu key would send."""
    rect = widget.inputMethodQuery(Qt.InputMethodQuery.ImCursorRectangle)
    inner = widget.viewport() if isinstance(widget, QAbstractScrollArea) else widget
    if rect is not None and hasattr(rect, "toRect") and rect.toRect().isValid():
        pos = rect.toRect().center()
    else:
        pos = inner.rect().center()
    pos.setX(max(0, min(pos.x(), inner.width() - 1)))
    pos.setY(max(0, min(pos.y(), inner.height() - 1)))
    event = QContextMenuEvent(QContextMenuEvent.Reason.Keyboard, pos, inner.mapToGlobal(pos))
    QApplication.sendEvent(widget, event)


_installed: list[ContextMenuKeyFilter] = []


def install_context_menu_key(app: QApplication) -> None:
    """Install the filter on ``app`` (once)."""
    if not _installed:
        _installed.append(ContextMenuKeyFilter(app))
        app.installEventFilter(_installed[0])
