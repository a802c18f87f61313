"""What the list models over a Python list share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from PySide6.QtCore import QModelIndex, QPersistentModelIndex

T = TypeVar("T")


def item_at(index: QModelIndex | QPersistentModelIndex, items: Sequence[T]) -> T | None:
    """The item a list model's ``index`` stands for (None: an invalid index, or a row that
    is no longer there)."""
    row = index.row()
    return items[row] if index.isValid() and 0 <= row < len(items) else None
