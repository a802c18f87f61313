"""One line of text asked for in a small dialog whose field a screen reader can name."""

from __future__ import annotations

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QInputDialog, QLineEdit, QWidget

from workbench.gui.delegates.markdown import (
    invisible_characters,
    restore_invisible,
    visible_text,
)


def ask_text(parent: QWidget | None, title: str, label: str, *, text: str = "",
             name: str, add_to_end: bool = False) -> tuple[str, bool]:
    """Like ``QInputDialog.getText``, with the field's accessible name set to ``name``;
    ``(text, accepted)``. Invisible characters of ``text`` are shown by name (a bidi
    control would reorder the field) and come back as they were. ``text`` is selected,
    so typing replaces it, unless ``add_to_end``: then the caret waits after it."""
    dialog = QInputDialog(parent)
    dialog.setWindowTitle(title)
    dialog.setLabelText(label)
    dialog.setTextValue(visible_text(text))
    dialog.setAccessibleName(title)
    for field in dialog.findChildren(QLineEdit):
        field.setAccessibleName(name)
        if add_to_end:
            # The dialog selects the whole text as it is shown: undo that once it is.
            QTimer.singleShot(0, field, lambda field=field: field.end(False))
    accepted = bool(dialog.exec())
    value = restore_invisible(dialog.textValue(), invisible_characters(text))
    dialog.deleteLater()
    return value, accepted
