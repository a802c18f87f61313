"""The main window: for now a table of the workspace's sessions."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QLabel, QMainWindow, QTableView

from workbench.core.conversation import SessionInfo
from workbench.engine.workspace import Workspace

_Index = QModelIndex | QPersistentModelIndex


class SessionTableModel(QAbstractTableModel):
    """Sessions as rows (title, messages, tokens, updated), fetched from the workspace in pages.

    Only the pages the view has asked for are held, so a workspace with many thousands of
    sessions opens as fast as one with ten.
    """

    COLUMNS = ("Title", "Messages", "Tokens", "Updated")
    TITLE, MESSAGES, TOKENS, UPDATED = range(4)

    def __init__(self, workspace: Workspace, page_size: int = 200, parent: Any = None) -> None:
        super().__init__(parent)
        self._workspace = workspace
        self._page_size = page_size
        self._rows: list[SessionInfo] = []
        self._exhausted = False
        self.reload()

    def reload(self) -> None:
        """Drop what is loaded and read the first page again."""
        self.beginResetModel()
        self._rows = self._fetch_page(0)
        self.endResetModel()

    def session_at(self, row: int) -> SessionInfo:
        """The session shown in ``row``."""
        return self._rows[row]

    def _fetch_page(self, offset: int) -> list[SessionInfo]:
        page = self._workspace.list_sessions(limit=self._page_size, offset=offset)
        self._exhausted = len(page) < self._page_size
        return page

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self.COLUMNS)

    def canFetchMore(self, parent: _Index) -> bool:
        return not parent.isValid() and not self._exhausted

    def fetchMore(self, parent: _Index) -> None:
        if parent.isValid() or self._exhausted:
            return
        page = self._fetch_page(len(self._rows))
        if not page:
            return
        first = len(self._rows)
        self.beginInsertRows(QModelIndex(), first, first + len(page) - 1)
        self._rows.extend(page)
        self.endInsertRows()

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.COLUMNS[section]
        return None

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        session = self._rows[index.row()]
        column = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            if column == self.TITLE:
                return session.title
            if column == self.MESSAGES:
                return f"{session.message_count:,}"
            if column == self.TOKENS:
                return f"{session.token_count:,}"
            if column == self.UPDATED:
                return session.updated_at.astimezone().strftime("%Y-%m-%d %H:%M")
        elif role == Qt.ItemDataRole.TextAlignmentRole and column in (self.MESSAGES, self.TOKENS):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        elif role == Qt.ItemDataRole.ToolTipRole and column == self.TITLE:
            return session.title
        return None


class MainWindow(QMainWindow):
    """The workbench's main window over one open workspace."""

    def __init__(self, workspace: Workspace, parent: Any = None) -> None:
        super().__init__(parent)
        self._workspace = workspace
        self.setWindowTitle("Conversation Workbench")
        self.resize(960, 600)

        self.session_model = SessionTableModel(workspace, parent=self)
        self.session_view = QTableView(self)
        self.session_view.setModel(self.session_model)
        self.session_view.setAccessibleName("Sessions")
        self.session_view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.session_view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.session_view.setAlternatingRowColors(True)
        self.session_view.verticalHeader().setVisible(False)
        header = self.session_view.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(SessionTableModel.TITLE, QHeaderView.ResizeMode.Stretch)
        self.setCentralWidget(self.session_view)

        self._build_menus()

        self.database_label = QLabel(f"Database: {workspace.db_path}")
        self.database_label.setAccessibleName("Database file")
        self.statusBar().addPermanentWidget(self.database_label)
        self.session_model.modelReset.connect(self._show_session_count)
        self._show_session_count()

    def _build_menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        self.reload_action = QAction("&Reload", self)
        self.reload_action.setShortcut(QKeySequence.StandardKey.Refresh)
        self.reload_action.triggered.connect(self.session_model.reload)
        file_menu.addAction(self.reload_action)
        file_menu.addSeparator()
        self.quit_action = QAction("&Quit", self)
        self.quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        self.quit_action.setMenuRole(QAction.MenuRole.QuitRole)
        self.quit_action.triggered.connect(self.close)
        file_menu.addAction(self.quit_action)

    def _show_session_count(self) -> None:
        total = self._workspace.count_sessions()
        self.statusBar().showMessage(f"{total:,} session{'s' if total != 1 else ''}")
