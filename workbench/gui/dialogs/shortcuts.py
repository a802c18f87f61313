"""Help → Keyboard Shortcuts: every action of the window that has a shortcut."""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtGui import QAction, QKeySequence, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.gui.screen_fit import keep_on_screen


def shortcut_rows(actions: Iterable[QAction]) -> list[tuple[str, str]]:
    """(action, keys) for every action with a shortcut, without duplicates, in order."""
    rows: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for action in actions:
        keys = ", ".join(
            s.toString(QKeySequence.SequenceFormat.NativeText) for s in action.shortcuts()
        )
        if not keys:
            continue
        name = action.text().replace("&", "").rstrip("…").strip()
        if not name:
            continue
        row = (name, keys)
        if row not in seen:
            seen.add(row)
            rows.append(row)
    return rows


class ShortcutsDialog(QDialog):
    """A two-column table of actions and their keys."""

    def __init__(self, actions: Iterable[QAction], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        self.setAccessibleName("Keyboard shortcuts")
        rows = shortcut_rows(actions)
        self.table = QTableWidget(len(rows), 2, self)
        self.table.setHorizontalHeaderLabels(["Action", "Keys"])
        self.table.setAccessibleName("Shortcut list")
        self.table.setTabKeyNavigation(False)  # Tab goes on to Close
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        for row, (name, keys) in enumerate(rows):
            self.table.setItem(row, 0, QTableWidgetItem(name))
            self.table.setItem(row, 1, QTableWidgetItem(keys))
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.table)
        layout.addWidget(buttons)
        self.resize(460, 560)

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        keep_on_screen(self)  # Close stays in reach at a large text scale

    def rows(self) -> list[tuple[str, str]]:
        return [(self.table.item(r, 0).text(), self.table.item(r, 1).text())
                for r in range(self.table.rowCount())]
