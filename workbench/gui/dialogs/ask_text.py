"""One line of text asked for in a small dialog whose field a screen reader can name."""

from __future__ import annotations

from PySide6.QtWidgets import QInputDialog, QLineEdit, QWidget

from workbench.gui.delegates.markdown import (
    invisible_characters,
    restore_invisible,
    visible_text,
)


def ask_text(parent: QWidget | None, title: str, label: str, *, text: str = "",
             name: str) -> tuple[str, bool]:
    """Like ``QInputDialog.getText``, with the field's accessible name set to ``name``;
    ``(text, accepted)``. Invisible characters of ``text`` are shown by name (a bidi
    control would reorder the field) and come back as they were."""
    dialog = QInputDialog(parent)
    dialog.setWindowTitle(title)
    dialog.setLabelText(label)
    dialog.setTextValue(visible_text(text))
    dialog.setAccessibleName(title)
    for field in dialog.findChildren(QLineEdit):
        field.setAccessibleName(name)
    accepted = bool(dialog.exec())
    value = restore_invisible(dialog.textValue(), invisible_characters(text))
    dialog.deleteLater()
    return value, accepted
