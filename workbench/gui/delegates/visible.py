"""Stored text shown with its invisible characters named (``⟨U+202E⟩``), in item views and
text boxes, while the text itself (what is saved and copied) stays as it was.

A bidi control in a fact or a title would otherwise reorder what follows it ("fact
\\u202egnp.exe" reads "fact exe.png"), and a zero-width character would hide.
"""

from __future__ import annotations

from PySide6.QtCore import QAbstractItemModel, QMimeData, QModelIndex, QPersistentModelIndex
from PySide6.QtWidgets import (
    QLineEdit,
    QPlainTextEdit,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QWidget,
)

from workbench.gui.delegates.markdown import (
    invisible_characters,
    restore_invisible,
    visible_text,
    wrap_mode_for,
)

ModelIndex = QModelIndex | QPersistentModelIndex


class VisibleTextDelegate(QStyledItemDelegate):
    """Paints an item's text with its invisible characters named; its line editor shows
    the names too, and saves the characters they stand for."""

    def initStyleOption(self, option: QStyleOptionViewItem, index: ModelIndex) -> None:
        super().initStyleOption(option, index)
        if option.text:
            option.text = visible_text(option.text)

    def shown_text(self, index: ModelIndex) -> str:
        """What the item at ``index`` shows (for tests and accessibility)."""
        option = QStyleOptionViewItem()
        self.initStyleOption(option, index)
        return option.text

    def setEditorData(self, editor: QWidget, index: ModelIndex) -> None:
        if isinstance(editor, QLineEdit):
            raw = index.data()
            editor.setText(visible_text(raw) if isinstance(raw, str) else "")
            editor.setProperty("marked", "".join(invisible_characters(raw))
                               if isinstance(raw, str) else "")
            return
        super().setEditorData(editor, index)

    def setModelData(self, editor: QWidget, model: QAbstractItemModel,
                     index: ModelIndex) -> None:
        if isinstance(editor, QLineEdit):
            marked = str(editor.property("marked") or "")
            model.setData(index, restore_invisible(editor.text(), set(marked)))
            return
        super().setModelData(editor, model, index)


class MarkedPlainTextEdit(QPlainTextEdit):
    """A text box showing invisible characters by name: :meth:`set_text` names them,
    :meth:`text` and copying give the characters back; pasted ones are named too. A text
    with a word longer than :data:`LONG_WORD` wraps anywhere, not only between words."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._marked: set[str] = set()

    def set_text(self, text: str) -> None:
        self._marked = invisible_characters(text)
        shown = visible_text(text)
        self.setWordWrapMode(wrap_mode_for(shown))
        self.setPlainText(shown)

    def text(self) -> str:
        return restore_invisible(self.toPlainText(), self._marked)

    def createMimeDataFromSelection(self) -> QMimeData:
        data = super().createMimeDataFromSelection()
        if data.hasText():
            plain = QMimeData()
            plain.setText(restore_invisible(data.text(), self._marked))
            return plain
        return data

    def insertFromMimeData(self, source: QMimeData) -> None:
        if source.hasText():
            text = source.text()
            self._marked |= invisible_characters(text)
            self.insertPlainText(visible_text(text))
            return
        super().insertFromMimeData(source)
