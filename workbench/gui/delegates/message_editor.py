"""The widget that edits one message: its role and its text."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from workbench.core.conversation import ROLES
from workbench.gui.controls import named
from workbench.gui.delegates.markdown import visible_text
from workbench.gui.delegates.visible import MarkedPlainTextEdit
from workbench.gui.theme import ROLE_LABELS, monospace_font

EDITOR_MIN_HEIGHT = 170
EDITOR_MAX_HEIGHT = 420
EDIT_CHARS = 200_000
"""The longest text (as shown, invisible characters named) the editor takes: a text box
holding 5 MB took four seconds to open, 20 MB most of a minute, with the window frozen."""


class MessageEditor(QFrame):
    """Role selector, text box, Save and Cancel. Ctrl+Enter saves, Esc cancels."""

    committed = Signal()
    cancelled = Signal()

    def __init__(self, parent: QWidget | None = None, *, buttons: bool = True) -> None:
        super().__init__(parent)
        self.setObjectName("MessageEditor")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setAutoFillBackground(True)
        self.setAccessibleName("Message editor")

        self.role_box = QComboBox(self)
        for role in ROLES:
            self.role_box.addItem(ROLE_LABELS[role], role)
        self.role_box.setAccessibleName("Message role")
        self.text_edit = MarkedPlainTextEdit(self)  # names bidi controls: nothing reorders
        self.text_edit.setAccessibleName("Message text")
        self.text_edit.setFont(monospace_font())
        self.text_edit.setTabChangesFocus(True)
        # The view focuses the editor it opens (F2, double-click): the text takes the keys.
        self.setFocusProxy(self.text_edit)

        # Why Save did nothing (an empty message), in a sentence; hidden otherwise.
        self.note_label = named(QLabel(self), "Editor note")
        self.note_label.setWordWrap(True)
        self.note_label.hide()
        self._has_tool_calls = False
        self._too_long = ""  # why the text is not in the box ("" when it is)
        self.text_edit.textChanged.connect(self._clear_note)
        self.role_box.currentIndexChanged.connect(self._clear_note)

        top = QHBoxLayout()
        top.addWidget(QLabel("Role:", self))
        top.addWidget(self.role_box)
        top.addStretch(1)
        self.save_button = named(QPushButton("Save", self), "Save message",
                                 tip="Save the message (Ctrl+Enter)")
        self.cancel_button = named(QPushButton("Cancel", self), "Cancel editing",
                                   tip="Discard the changes (Esc)")
        if buttons:
            top.addWidget(self.save_button)
            top.addWidget(self.cancel_button)
        else:
            self.save_button.hide()
            self.cancel_button.hide()

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(4)
        layout.addLayout(top)
        layout.addWidget(self.text_edit, 1)
        layout.addWidget(self.note_label)

        self.save_button.clicked.connect(self.commit)
        self.cancel_button.clicked.connect(self.cancelled)
        # Keys are caught before the text box sees them (it would take Ctrl+Enter as a
        # line break), and without depending on the window being active.
        self.text_edit.installEventFilter(self)
        self.role_box.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.KeyPress and isinstance(event, QKeyEvent):
            key = event.key()
            if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and (
                event.modifiers() & Qt.KeyboardModifier.ControlModifier
            ):
                self.commit()
                return True
            if key == Qt.Key.Key_Escape:
                self.cancelled.emit()
                return True
        return super().eventFilter(watched, event)

    def commit(self) -> bool:
        """Save (``committed``) unless the message may not be saved as it is; then the
        editor says why and stays open. Returns whether it was saved."""
        refusal = self.refusal()
        if refusal:
            if self._too_long:
                return False  # said already, and the note stays
            self.note_label.setText(refusal)
            self.note_label.show()
            return False
        self.committed.emit()
        return True

    def refusal(self) -> str:
        """Why the message cannot be saved as it is ("" when it can): an empty user,
        system or assistant message would be sent as empty content, which providers
        reject; an assistant message carrying tool calls, or a tool result, may be
        empty. A text too long to edit here is never saved from here."""
        if self._too_long:
            return self._too_long
        if self.text().strip():
            return ""
        role = self.role()
        if role == "tool" or (role == "assistant" and self._has_tool_calls):
            return ""
        label = ROLE_LABELS.get(role, role).lower()
        return (f"An empty {label} message cannot be saved: providers reject empty "
                "messages. Type its text, or press Esc to cancel (Delete removes a "
                "message).")

    def _clear_note(self) -> None:
        if self.note_label.isVisible():
            self.note_label.hide()

    def set_message(self, role: str, text: str, *, has_tool_calls: bool = False) -> None:
        self._has_tool_calls = has_tool_calls
        index = self.role_box.findData(role)
        self.role_box.setCurrentIndex(max(0, index))
        shown = len(text) if len(text) > EDIT_CHARS else len(visible_text(text))
        if shown > EDIT_CHARS:
            self._too_long = (
                f"This message is too long to edit here ({len(text):,} characters; the "
                f"editor takes up to {EDIT_CHARS:,}). Copy gives its text, and "
                "`workbench message edit` on the command line changes it. Esc closes this.")
            # The sentence stands in the read-only box, which keeps the keys (Esc).
            self.text_edit.setReadOnly(True)
            self.text_edit.set_text(self._too_long)
            self.role_box.setEnabled(False)
            self.save_button.setEnabled(False)
            return
        self._too_long = ""
        self.text_edit.setReadOnly(False)
        self.role_box.setEnabled(True)
        self.save_button.setEnabled(True)
        self.text_edit.set_text(text)
        self.text_edit.moveCursor(self.text_edit.textCursor().MoveOperation.End)

    def role(self) -> str:
        return str(self.role_box.currentData())

    def text(self) -> str:
        return self.text_edit.text()

    def preferred_height(self) -> int:
        """Room for the text (within limits), so short messages get a short editor."""
        lines = self.text_edit.document().blockCount() + 2
        line_height = self.text_edit.fontMetrics().lineSpacing()
        wanted = lines * line_height + 70
        return max(EDITOR_MIN_HEIGHT, min(EDITOR_MAX_HEIGHT, wanted))

    def focus_text(self) -> None:
        self.text_edit.setFocus(Qt.FocusReason.OtherFocusReason)
