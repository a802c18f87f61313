"""The status bar's message, readable whole at any width.

A status bar cuts a sentence longer than its room at the edge. Here the bar's temporary
message is shown by :class:`StatusMessageLabel`: one line, elided with "…" when it does
not fit, the whole sentence in its tooltip. Every message also goes into
:class:`StatusLog`, which :class:`StatusLogDialog` lists with the time it was said
(View → Status Messages, or a click on the line), so a sentence that went by or was cut
can still be read.
"""

from __future__ import annotations

from collections import deque
from datetime import datetime

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QMouseEvent, QTextCursor
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QPlainTextEdit,
    QStatusBar,
    QVBoxLayout,
    QWidget,
)

from workbench.gui.layout import ElidedLabel

_KEPT = 200  # messages the log keeps, newest last


class StatusLog(QObject):
    """The status bar's messages of this run, each with the time it was shown."""

    message_added = Signal(str)  # the line added, time first

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._lines: deque[str] = deque(maxlen=_KEPT)
        self._last = ""

    def add(self, text: str) -> None:
        """Note ``text`` (the bar cleared its message when empty; the same message
        shown again right after itself is noted once)."""
        if not text or text == self._last:
            self._last = text or self._last
            return
        self._last = text
        line = f"{datetime.now():%H:%M:%S}  {text}"
        self._lines.append(line)
        self.message_added.emit(line)

    def lines(self) -> list[str]:
        return list(self._lines)


class StatusMessageLabel(ElidedLabel):
    """The status bar's current message on one line, elided when it does not fit (the
    tooltip has it whole); a click opens the message history."""

    clicked = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("", parent, lines=1)
        self.setAccessibleName("Status message")
        self.setCursor(Qt.CursorShape.PointingHandCursor)

    def show_message(self, text: str) -> None:
        self.setText(text)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt's name
        super().mouseReleaseEvent(event)
        if event.button() == Qt.MouseButton.LeftButton and self.rect().contains(
                event.position().toPoint()):
            self.clicked.emit()


def show_messages_in(bar: QStatusBar, log: StatusLog) -> StatusMessageLabel:
    """Put a :class:`StatusMessageLabel` at the left of ``bar``, showing its messages in
    place of the bar's own clipped text, and note each message in ``log``."""
    label = StatusMessageLabel(bar)
    # A permanent widget that stretches: the room the bar would paint its message in is
    # left of the first permanent widget, so it has none and the label alone shows it.
    bar.insertPermanentWidget(0, label, 1)
    bar.messageChanged.connect(label.show_message)
    bar.messageChanged.connect(log.add)
    return label


class StatusLogDialog(QDialog):
    """The status bar's earlier messages, oldest first, as selectable text."""

    def __init__(self, log: StatusLog, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Status Messages")
        self.setAccessibleName("Status messages")
        self.text = QPlainTextEdit(self)
        self.text.setReadOnly(True)
        self.text.setAccessibleName("Status message history")
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.text.setPlainText("\n".join(log.lines()) or "No messages yet.")
        self._empty = not log.lines()
        log.message_added.connect(self._added)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.close)
        layout = QVBoxLayout(self)
        layout.addWidget(self.text)
        layout.addWidget(buttons)
        self.resize(640, 320)
        self._to_end()

    def _added(self, line: str) -> None:
        if self._empty:
            self.text.setPlainText(line)
            self._empty = False
        else:
            self.text.appendPlainText(line)
        self._to_end()

    def _to_end(self) -> None:
        self.text.moveCursor(QTextCursor.MoveOperation.End)
        self.text.ensureCursorVisible()
