"""What the list models over a Python list share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from PySide6.QtCore import QAbstractListModel, QModelIndex, QObject, Qt

from workbench.gui.models import ModelIndex

T = TypeVar("T")


def item_at(index: ModelIndex, items: Sequence[T]) -> T | None:
    """The item a list model's ``index`` stands for (None: an invalid index, or a row that
    is no longer there)."""
    row = index.row()
    return items[row] if index.isValid() and 0 <= row < len(items) else None


class ItemListModel(QAbstractListModel):
    """A list model over the Python list ``self._items``: :meth:`data` answers
    :attr:`item_role` with the item itself and asks :meth:`item_data` for the others."""

    item_role: int

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._items: list[Any] = []

    def rowCount(self, parent: ModelIndex = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self._items)

    def data(self, index: ModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        item = item_at(index, self._items)
        if item is None:
            return None
        if role == self.item_role:
            return item
        return self.item_data(item, role)

    def item_data(self, item: Any, role: int) -> Any:
        """What ``item`` shows for ``role`` (None: nothing)."""
        return None
