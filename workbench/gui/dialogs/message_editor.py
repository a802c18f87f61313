"""A dialog to write a new message of any role (inserting above or below another)."""

from __future__ import annotations

from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QVBoxLayout, QWidget

from workbench.gui.delegates.message_editor import MessageEditor
from workbench.gui.screen_fit import keep_on_screen


class MessageEditorDialog(QDialog):
    """Role and text of a message; OK (or Ctrl+Enter) accepts, Esc cancels."""

    def __init__(self, parent: QWidget | None = None, *, role: str = "user", text: str = "",
                 title: str = "Message") -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.setAccessibleName(title)
        self.editor = MessageEditor(self, buttons=False)
        self.editor.set_message(role, text)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        self.editor.committed.connect(self.accept)
        self.editor.cancelled.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.editor, 1)
        layout.addWidget(buttons)
        self.resize(560, 320)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        keep_on_screen(self)  # OK stays in reach at a large text scale
        # A dialog focuses its first control when shown; the caret belongs in the text.
        self.editor.focus_text()

    def accept(self) -> None:
        # OK saves as Ctrl+Enter does: not an empty message (the editor says why).
        if self.editor.refusal():
            self.editor.commit()
            return
        super().accept()

    def role(self) -> str:
        return self.editor.role()

    def text(self) -> str:
        return self.editor.text()
