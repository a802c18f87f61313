"""One line of text asked for in a small dialog whose field a screen reader can name."""

from __future__ import annotations

from PySide6.QtWidgets import QInputDialog, QLineEdit, QWidget


def ask_text(parent: QWidget | None, title: str, label: str, *, text: str = "",
             name: str) -> tuple[str, bool]:
    """Like ``QInputDialog.getText``, with the field's accessible name set to ``name``;
    ``(text, accepted)``."""
    dialog = QInputDialog(parent)
    dialog.setWindowTitle(title)
    dialog.setLabelText(label)
    dialog.setTextValue(text)
    dialog.setAccessibleName(title)
    for field in dialog.findChildren(QLineEdit):
        field.setAccessibleName(name)
    accepted = bool(dialog.exec())
    value = dialog.textValue()
    dialog.deleteLater()
    return value, accepted
