"""What the list-and-form settings dialogs (Providers, Agents) share: unsaved edits are
never dropped unasked, whether the person closes the dialog or picks another entry."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QDialog, QLineEdit, QMessageBox


class SettingsFormDialog(QDialog):
    """A dialog editing one named entry at a time; a subclass sets :attr:`entry_kind`,
    keeps its name field in ``name_edit`` and says whether the form was edited."""

    entry_kind = "entry"  # "provider", "agent": how the question names what is edited
    name_edit: QLineEdit

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ask_before_closing = True

    def edited(self) -> bool:
        """Whether the form was changed since it was filled."""
        raise NotImplementedError

    def edited_name(self) -> str:
        """How the question names the entry being edited."""
        return self.name_edit.text() or "the new one"

    def reject(self) -> None:
        # Esc, Close and the window's close button: unsaved edits are not dropped unasked
        # (Cancel in the question goes back to the form, where Save is).
        if self.isVisible() and self._ask_before_closing and self.edited() \
                and not self.confirm_discard(self.edited_name()):
            return
        super().reject()

    def close_without_asking(self) -> None:
        """Close, dropping unsaved edits (the main window is quitting)."""
        self._ask_before_closing = False
        try:
            self.close()
        finally:
            self._ask_before_closing = True

    def confirm_discard(self, name: str) -> bool:
        """Ask whether the unsaved edits to the entry ``name`` may be dropped."""
        answer = QMessageBox.question(
            self, "Unsaved changes",
            f"Discard the unsaved changes to {self.entry_kind} {name!r}?",
            QMessageBox.StandardButton.Discard | QMessageBox.StandardButton.Cancel,
            QMessageBox.StandardButton.Cancel)
        return answer == QMessageBox.StandardButton.Discard
