"""The session browser's model: sessions read a page at a time, never all at once.

Rows come from :meth:`Workspace.list_sessions` (pinned first, then most recently
updated), :data:`PAGE` at a time as the view scrolls (``canFetchMore``/``fetchMore``).
A filter text and the archived switch are passed to the store; sessions waiting in the
trash are left out here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QModelIndex, Qt, Signal

from workbench.core.conversation import SessionInfo
from workbench.core.identity import metadata_lines
from workbench.engine.workspace import Workspace
from workbench.errors import WorkbenchError
from workbench.gui.delegates.markdown import plain_tooltip, visible_text
from workbench.gui.models import ModelIndex
from workbench.gui.models.rows import ItemListModel

PAGE = 100
_DETAIL_LINES = 12  # metadata lines a tooltip shows at most
TIME_UNKNOWN = "time unknown"
SessionRole = Qt.ItemDataRole.UserRole + 1


def session_summary(info: SessionInfo) -> str:
    """One line about a session: agent, counts and tags."""
    parts = []
    if info.agent_name:
        parts.append(info.agent_name)
    noun = "message" if info.message_count == 1 else "messages"
    parts.append(f"{info.message_count:,} {noun}")
    parts.append(f"{info.token_count:,} tokens")
    if info.archived:
        parts.append("archived")
    line = " · ".join(parts)
    if info.tags:
        line += "  " + " ".join(f"#{tag}" for tag in info.tags)
    return line


@dataclass(frozen=True)
class ListRequest:
    """The first ``count`` sessions a list shows, as asked for on the UI thread."""

    workspace: Workspace
    filter_text: str
    include_archived: bool
    count: int

    def read(self) -> ListRead:
        """Read them (any thread)."""
        return ListRead(self, self.workspace.list_sessions(
            include_archived=self.include_archived, filter_text=self.filter_text or None,
            limit=self.count, offset=0))


@dataclass(frozen=True)
class ListRead:
    request: ListRequest
    page: list[SessionInfo]


class SessionListModel(ItemListModel):
    """Sessions as rows, fetched in pages (see the module docstring)."""

    item_role = SessionRole

    rename_requested = Signal(int, str)  # session id, new title (from editing in place)

    def __init__(self, workspace: Workspace, *, hidden: Any = None, page_size: int = PAGE,
                 parent: Any = None) -> None:
        super().__init__(parent)
        self._workspace = workspace
        self._hidden = hidden if hidden is not None else (lambda: frozenset())
        self._page_size = page_size
        self._consumed = 0  # rows read from the store (hidden ones included)
        self._exhausted = True
        self._filter = ""
        self._include_archived = False
        self.reload()

    # -- what is listed ----------------------------------------------------------------

    def set_workspace(self, workspace: Workspace, hidden: Any = None) -> None:
        self._workspace = workspace
        if hidden is not None:
            self._hidden = hidden
        self.reload()

    @property
    def filter_text(self) -> str:
        return self._filter

    def set_filter_text(self, text: str) -> None:
        self._reload_if_changed("_filter", text.strip())

    @property
    def include_archived(self) -> bool:
        return self._include_archived

    def set_include_archived(self, include: bool) -> None:
        self._reload_if_changed("_include_archived", include)

    def _reload_if_changed(self, attribute: str, value: object) -> None:
        if value != getattr(self, attribute):
            setattr(self, attribute, value)
            self.reload()

    def reload(self) -> None:
        """Read the list again, as many rows as were loaded (at least one page)."""
        self.install(self.list_request().read())

    def list_request(self) -> ListRequest:
        """What :meth:`reload` reads, to be read elsewhere (on a worker) and then given
        to :meth:`install`."""
        return ListRequest(self._workspace, self._filter, self._include_archived,
                           max(self._page_size, self._consumed))

    def install(self, read: ListRead) -> bool:
        """Show a list read for :meth:`list_request`; False (nothing changes) when the
        workspace, filter or archived switch changed since it was asked for."""
        request = read.request
        if (request.workspace, request.filter_text, request.include_archived) != (
                self._workspace, self._filter, self._include_archived):
            return False
        self.beginResetModel()
        self._consumed = len(read.page)
        self._exhausted = len(read.page) < request.count
        hidden = self._hidden()
        self._items = [info for info in read.page if info.id not in hidden]
        self.endResetModel()
        return True

    def _read(self, count: int) -> list[SessionInfo]:
        page = self._workspace.list_sessions(
            include_archived=self._include_archived,
            filter_text=self._filter or None,
            limit=count,
            offset=self._consumed,
        )
        self._consumed += len(page)
        self._exhausted = len(page) < count
        hidden = self._hidden()
        return [info for info in page if info.id not in hidden]

    def total(self) -> int:
        """Sessions matching the filter (trashed ones not counted)."""
        count = self._workspace.count_sessions(
            include_archived=self._include_archived, filter_text=self._filter or None
        )
        return max(0, count - len(self._hidden()))

    # -- rows --------------------------------------------------------------------------

    def canFetchMore(self, parent: ModelIndex) -> bool:
        return not parent.isValid() and not self._exhausted

    def fetchMore(self, parent: ModelIndex) -> None:
        if parent.isValid() or self._exhausted:
            return
        page = self._read(self._page_size)
        if not page:
            return
        first = len(self._items)
        self.beginInsertRows(QModelIndex(), first, first + len(page) - 1)
        self._items.extend(page)
        self.endInsertRows()

    def session_at(self, row: int) -> SessionInfo:
        return self._items[row]

    def row_of(self, session_id: int) -> int | None:
        for row, info in enumerate(self._items):
            if info.id == session_id:
                return row
        return None

    def update_session(self, info: SessionInfo) -> None:
        """Show a session's new details in place (its order is fixed by the next reload)."""
        row = self.row_of(info.id)
        if row is not None:
            self._items[row] = info
            index = self.index(row, 0)
            self.dataChanged.emit(index, index)

    def item_data(self, info: SessionInfo, role: int) -> Any:
        if role == Qt.ItemDataRole.DisplayRole:
            return info.title
        if role == Qt.ItemDataRole.EditRole:
            return info.title
        if role == Qt.ItemDataRole.ToolTipRole:
            updated = info.updated_at.astimezone().strftime("%Y-%m-%d %H:%M")
            details = self._details(info)
            when = (f"Time unknown (imported {updated})" if TIME_UNKNOWN in details
                    else f"Updated {updated}")
            return plain_tooltip("\n".join(
                [f"{info.title}", session_summary(info), when,
                 *(d for d in details if d != TIME_UNKNOWN)]
            ))
        if role == Qt.ItemDataRole.AccessibleTextRole:
            pinned = "pinned, " if info.pinned else ""
            return visible_text(f"{info.title}, {pinned}{session_summary(info)}")
        return None

    def _details(self, info: SessionInfo) -> list[str]:
        """Where an imported session came from and what its source said about it."""
        lines: list[str] = []
        if info.source:
            lines.append(f"Imported from {info.source}")
        if info.forked_from_session_id is not None:
            lines.append(f"Forked from session {info.forked_from_session_id}")
        try:
            metadata = self._workspace.session_metadata(info.id)
        except WorkbenchError:
            return lines  # deleted meanwhile: the next reload drops the row
        if metadata.get("time_missing") is True:
            lines.append(TIME_UNKNOWN)
            metadata = {k: v for k, v in metadata.items() if k != "time_missing"}
        return lines + metadata_lines(metadata, limit=80)[:_DETAIL_LINES]

    def flags(self, index: ModelIndex) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return (Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
                | Qt.ItemFlag.ItemIsEditable)

    def setData(self, index: ModelIndex, value: Any, role: int = Qt.ItemDataRole.EditRole) -> bool:
        """A title typed in place: asked for through ``rename_requested`` (undoable)."""
        if role != Qt.ItemDataRole.EditRole or not index.isValid():
            return False
        title = str(value).strip()
        info = self._items[index.row()]
        if not title or title == info.title:
            return False
        self.rename_requested.emit(info.id, title)
        return True
