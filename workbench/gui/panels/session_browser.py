"""The session browser: filter, list and the actions on sessions (all undoable)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import (
    QEvent,
    QItemSelectionModel,
    QModelIndex,
    QObject,
    QPoint,
    Qt,
    Signal,
)
from PySide6.QtGui import QAction, QKeyEvent, QKeySequence, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QListView,
    QMenu,
    QVBoxLayout,
    QWidget,
)

from workbench.core.conversation import SessionInfo
from workbench.gui.commands import (
    DeleteSessionsCommand,
    ForkSessionCommand,
    NewSessionCommand,
    SessionFieldCommand,
)
from workbench.gui.context import AppContext
from workbench.gui.controls import filter_field, named, single_shot, view_action
from workbench.gui.delegates.markdown import visible_text
from workbench.gui.delegates.session import SessionDelegate
from workbench.gui.dialogs.ask_text import ask_text
from workbench.gui.models.sessions import ListRead, SessionListModel, SessionRole

FILTER_DELAY_MS = 150
_INTO_LIST_KEYS = (Qt.Key.Key_Down, Qt.Key.Key_PageDown, Qt.Key.Key_Return, Qt.Key.Key_Enter)


def _parse_tags(text: str) -> list[str]:
    return [t.strip().lstrip("#") for t in text.replace(";", ",").split(",") if t.strip()]


class SessionBrowserPanel(QWidget):
    """Sessions, pinned first then most recent; new, rename, pin, tag, fork, archive,
    delete (undoable) and export on the selection."""

    session_activated = Signal(int)  # the session chosen to be shown
    export_requested = Signal(list)  # ids of the sessions to export

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.setObjectName("SessionBrowserPanel")

        self.filter_edit = filter_field(self, "Filter sessions", "Title or #tag")
        self.archived_box = named(QCheckBox("Archived", self), "Show archived sessions",
                                  tip="Show archived sessions too")

        self.model = SessionListModel(ctx.workspace, hidden=ctx.trash.hidden, parent=self)
        self.view = QListView(self)
        self.view.setModel(self.model)
        self.view.setItemDelegate(SessionDelegate(self.view))
        # Rows with tags take a third line: sizes differ (each costs no text layout).
        self.view.setUniformItemSizes(False)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.view.setEditTriggers(QAbstractItemView.EditTrigger.EditKeyPressed)
        self.view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.view.setAccessibleName("Sessions")
        self.view.setAccessibleDescription("Pinned sessions first, then the most recent")
        # Said in the list's place when it is empty (a filter that matches nothing).
        self.empty_label = QLabel(self.view.viewport())
        self.empty_label.setAccessibleName("No sessions listed")
        self.empty_label.setTextFormat(Qt.TextFormat.PlainText)  # the filter is data
        self.empty_label.setWordWrap(True)
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop)
        self.empty_label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.empty_label.hide()
        self.view.viewport().installEventFilter(self)

        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.filter_edit, 1)
        top.addWidget(self.archived_box)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.setSpacing(4)
        layout.addLayout(top)
        layout.addWidget(self.view, 1)

        self._filter_timer = single_shot(self, FILTER_DELAY_MS, self._apply_filter)
        self._reload_timer = single_shot(self, 30, self.reload)
        self._restoring = False

        self._build_actions()
        self.filter_edit.textChanged.connect(lambda _text: self._filter_timer.start())
        # Down, Page Down or Enter in the filter hands the keyboard to the list.
        self.filter_edit.installEventFilter(self)
        self.archived_box.toggled.connect(self._archived_toggled)
        self.view.selectionModel().currentChanged.connect(self._current_changed)
        self.view.selectionModel().selectionChanged.connect(lambda *_: self._update_actions())
        self.view.customContextMenuRequested.connect(self._context_menu)
        self.model.rename_requested.connect(self.rename_session)
        for signal in (self.model.modelReset, self.model.rowsInserted, self.model.rowsRemoved):
            signal.connect(lambda *_: self._update_empty_text())
        ctx.sessions_changed.connect(self._reload_timer.start)
        # A message stored, edited, inserted or removed changes its session's counts and
        # its place in the list (the most recently active first).
        for signal in (ctx.message_changed, ctx.message_inserted, ctx.message_removed,
                       ctx.messages_appended, ctx.session_reloaded):
            signal.connect(lambda *_: self._reload_timer.start())
        ctx.session_updated.connect(self.model.update_session)
        ctx.workspace_replaced.connect(self._workspace_replaced)
        self._update_actions()
        self._update_empty_text()

    # -- actions -----------------------------------------------------------------------

    def _action(self, text: str, slot: object, shortcut: str | QKeySequence | None = None,
                *, local: bool = True, tip: str = "") -> QAction:
        return view_action(self, self.view, text, slot, shortcut, local=local, tip=tip)

    def _build_actions(self) -> None:
        self.new_action = QAction("&New Session", self)
        self.new_action.setShortcut(QKeySequence.StandardKey.New)
        self.new_action.setStatusTip("Create an empty session")
        self.new_action.triggered.connect(lambda: self.new_session())
        self.rename_action = self._action("&Rename…", self._rename_interactively, "F2")
        self.pin_action = self._action("&Pin", self._toggle_pin, "Ctrl+Shift+P",
                                       tip="Keep the session at the top of the list")
        self.tags_action = self._action("&Tags…", self._edit_tags_interactively, "Ctrl+Shift+T")
        self.fork_action = self._action("&Fork", self._fork_selected, "Ctrl+Shift+D",
                                        tip="Copy the session into a new one")
        self.archive_action = self._action("&Archive", self._toggle_archive, "Ctrl+Shift+A",
                                           tip="Hide the session from the list (undoable)")
        self.delete_action = self._action("&Delete", self.delete_selected,
                                          QKeySequence.StandardKey.Delete,
                                          tip="Delete the selected sessions (undoable)")
        self.export_action = self._action("E&xport…", self._export_selected)
        self.focus_filter_action = self._action("Filter sessions", self.focus_filter,
                                                "Ctrl+L", local=False)
        self.addAction(self.focus_filter_action)

    def _update_actions(self) -> None:
        selected = self.selected_sessions()
        for action in (self.pin_action, self.tags_action, self.archive_action,
                       self.delete_action, self.export_action):
            action.setEnabled(bool(selected))
        single = len(selected) == 1
        self.rename_action.setEnabled(single)
        self.fork_action.setEnabled(single and selected[0].message_count > 0)
        all_pinned = bool(selected) and all(s.pinned for s in selected)
        self.pin_action.setText("Un&pin" if all_pinned else "&Pin")
        all_archived = bool(selected) and all(s.archived for s in selected)
        self.archive_action.setText("Un&archive" if all_archived else "&Archive")

    def _context_menu(self, point: QPoint) -> None:
        index = self.view.indexAt(point)
        if index.isValid() and not self.view.selectionModel().isSelected(index):
            self.view.setCurrentIndex(index)
        menu = QMenu(self)
        menu.addAction(self.new_action)
        menu.addSeparator()
        for action in (self.rename_action, self.pin_action, self.tags_action,
                       self.fork_action, self.archive_action):
            menu.addAction(action)
        menu.addSeparator()
        menu.addAction(self.export_action)
        menu.addAction(self.delete_action)
        menu.exec(self.view.viewport().mapToGlobal(point))

    # -- selection ---------------------------------------------------------------------

    def selected_sessions(self) -> list[SessionInfo]:
        rows = sorted(index.row() for index in self.view.selectionModel().selectedRows())
        return [self.model.session_at(row) for row in rows]

    def selected_ids(self) -> list[int]:
        return [info.id for info in self.selected_sessions()]

    def select_session(self, session_id: int) -> bool:
        """Select (and scroll to) a session when it is among the rows read so far.

        A session further down is not hunted for (that could read the whole list): the
        selection is cleared instead, so it never points at another session.
        """
        row = self.model.row_of(session_id)
        if row is None:
            self._restoring = True
            try:
                self.view.selectionModel().clearSelection()
                self.view.selectionModel().setCurrentIndex(
                    QModelIndex(), QItemSelectionModel.SelectionFlag.NoUpdate)
            finally:
                self._restoring = False
            return False
        index = self.model.index(row, 0)
        self._restoring = True
        try:
            self.view.selectionModel().setCurrentIndex(
                index, QItemSelectionModel.SelectionFlag.ClearAndSelect)
        finally:
            self._restoring = False
        self.view.scrollTo(index)
        return True

    def _current_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        self._update_actions()
        if self._restoring or not current.isValid():
            return
        info = current.data(SessionRole)
        if info is not None and info.id != self.ctx.current_session_id:
            self.session_activated.emit(info.id)

    # -- list --------------------------------------------------------------------------

    def reload(self) -> None:
        """Read the list again, keeping the selection. On the team store the list is
        read on a worker (a server's round trips never hold the window up) and shown
        when it arrives; a file's list is read at once. Not while a title is being
        typed in place: it is read once the editor closes."""
        if self._renaming():
            self._reload_timer.start()
            return
        self.ctx.read_shown(self.model.list_request().read, name="read the session list",
                            key=(self, "list"), on_done=self._show_list)

    def _renaming(self) -> bool:
        """Whether a title is being typed in place: a new list would close its editor
        and lose what was typed (another desktop's change arriving meanwhile)."""
        return self.view.state() == QAbstractItemView.State.EditingState

    def _show_list(self, read: ListRead) -> None:
        if self._renaming():  # read before the editor opened: read again after it
            self._reload_timer.start()
            return
        keep = self.selected_ids()
        current = self.ctx.current_session_id
        self._restoring = True
        try:
            if not self.model.install(read):
                return  # asked for another list meanwhile
            selection = self.view.selectionModel()
            for sid in keep or ([current] if current else []):
                row = self.model.row_of(sid)
                if row is not None:
                    flag = QItemSelectionModel.SelectionFlag.Select
                    if sid == current or len(keep) == 1:
                        selection.setCurrentIndex(self.model.index(row, 0), flag)
                    else:
                        selection.select(self.model.index(row, 0), flag)
        finally:
            self._restoring = False
        self._update_actions()

    def _apply_filter(self) -> None:
        self.model.set_filter_text(self.filter_edit.text())

    def _archived_toggled(self, checked: bool) -> None:
        self.model.set_include_archived(checked)

    def empty_text(self) -> str:
        """What the list says when it shows no session ("" when it shows some)."""
        if self.model.rowCount():
            return ""
        wanted = self.model.filter_text
        if wanted:
            wanted = visible_text(wanted)
            if len(wanted) > 60:
                wanted = wanted[:59] + "…"
            text = f"No session matches “{wanted}”."
            if not self.archived_box.isChecked():
                text += "\n\nArchived sessions are left out: tick Archived to look there too."
            return text
        return ("No sessions yet.\n\nImport conversations with Ctrl+I or start a new "
                "session with Ctrl+N.")

    def _update_empty_text(self) -> None:
        text = self.empty_text()
        self.empty_label.setText(text)
        self.empty_label.setToolTip(text if len(text) > 200 else "")
        self._place_empty_label()
        self.empty_label.setVisible(bool(text))

    def _place_empty_label(self) -> None:
        margin = self.fontMetrics().averageCharWidth() * 2
        area = self.view.viewport().rect().adjusted(margin, margin * 2, -margin, -margin)
        self.empty_label.setGeometry(area)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.view.viewport() and event.type() == QEvent.Type.Resize:
            self._place_empty_label()
        if (watched is self.filter_edit and event.type() == QEvent.Type.KeyPress
                and isinstance(event, QKeyEvent) and event.key() in _INTO_LIST_KEYS):
            self._focus_list()
            return True
        return super().eventFilter(watched, event)

    def _focus_list(self) -> None:
        if self._filter_timer.isActive():  # what was typed is the filter to land in
            self._filter_timer.stop()
            self._apply_filter()
        if not self.view.currentIndex().isValid() and self.model.rowCount():
            self.view.setCurrentIndex(self.model.index(0, 0))
        self.view.setFocus(Qt.FocusReason.OtherFocusReason)

    def focus_filter(self) -> None:
        self.filter_edit.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.filter_edit.selectAll()

    def _workspace_replaced(self) -> None:
        self.model.set_workspace(self.ctx.workspace, hidden=self.ctx.trash.hidden)

    # -- operations (each one an undo command) -----------------------------------------------

    def new_session(self, title: str = "New session") -> NewSessionCommand:
        # A filter typed earlier would hide the new session, which then opened with no
        # row in the list to rename, tag or delete it by.
        if self.filter_edit.text():
            self.filter_edit.clear()
            self._filter_timer.stop()
            self._apply_filter()
        command = NewSessionCommand(self.ctx, title)
        self.ctx.undo_stack.push(command)
        return command

    def rename_session(self, session_id: int, title: str) -> None:
        self.ctx.undo_stack.push(
            SessionFieldCommand(self.ctx, [session_id], "title", title, "Rename session"))

    def _rename_interactively(self) -> None:
        selected = self.selected_sessions()
        if len(selected) != 1:
            return
        index = self.view.currentIndex()
        if index.isValid():
            self.view.edit(index)
            return
        title, ok = ask_text(self, "Rename session", "Title:", text=selected[0].title,
                             name="Session title")
        if ok and title.strip():
            self.rename_session(selected[0].id, title.strip())

    def set_pinned(self, session_ids: Sequence[int], pinned: bool) -> None:
        self._set_flag(session_ids, "pinned", pinned, "Pin" if pinned else "Unpin")

    def set_archived(self, session_ids: Sequence[int], archived: bool) -> None:
        self._set_flag(session_ids, "archived", archived,
                       "Archive" if archived else "Unarchive")

    def _set_flag(self, session_ids: Sequence[int], field: str, value: bool,
                  verb: str) -> None:
        text = verb + (" sessions" if len(session_ids) > 1 else " session")
        self.ctx.undo_stack.push(SessionFieldCommand(self.ctx, session_ids, field, value, text))

    def _toggle_pin(self) -> None:
        self._toggle("pinned", self.set_pinned)

    def _toggle_archive(self) -> None:
        self._toggle("archived", self.set_archived)

    def _toggle(self, field: str, setter: Callable[[list[int], bool], None]) -> None:
        # On for the selection unless every selected session has it already.
        selected = self.selected_sessions()
        if selected:
            setter([s.id for s in selected], not all(getattr(s, field) for s in selected))

    def set_tags(self, session_id: int, tags: Sequence[str]) -> None:
        self.ctx.undo_stack.push(
            SessionFieldCommand(self.ctx, [session_id], "tags", list(tags), "Change tags"))

    def add_tag(self, session_ids: Sequence[int], tag: str) -> None:
        self.ctx.undo_stack.push(SessionFieldCommand(
            self.ctx, session_ids, "tags", lambda info: [*info.tags, tag],
            f"Tag with {visible_text(tag)}"))

    def _edit_tags_interactively(self) -> None:
        selected = self.selected_sessions()
        if len(selected) == 1:
            # Typing adds a tag: the ones there are kept unless deleted on purpose.
            tags = ", ".join(selected[0].tags)
            text, ok = ask_text(self, "Tags", "Tags, separated by commas:",
                                text=tags + ", " if tags else "", name="Session tags",
                                add_to_end=True)
            if ok:
                self.set_tags(selected[0].id, _parse_tags(text))
        elif selected:
            text, ok = ask_text(self, "Add tag", f"Tag to add to {len(selected)} sessions:",
                                name="Tag to add")
            for tag in _parse_tags(text) if ok else []:
                self.add_tag([s.id for s in selected], tag)

    def fork(self, session_id: int, message_id: int | None = None) -> None:
        """Fork a session at a message (default: its last message)."""
        if message_id is None:
            last = self.ctx.workspace.page_before(session_id, before_position=2**62, limit=1)
            if not last or last[0].id is None:
                return
            message_id = int(last[0].id)
        self.ctx.undo_stack.push(ForkSessionCommand(self.ctx, session_id, message_id))

    def _fork_selected(self) -> None:
        selected = self.selected_sessions()
        if len(selected) == 1:
            self.fork(selected[0].id)

    def delete_selected(self) -> None:
        ids = self.selected_ids()
        if ids:
            self.delete_sessions(ids)

    def delete_sessions(self, session_ids: Sequence[int]) -> None:
        self.ctx.undo_stack.push(DeleteSessionsCommand(self.ctx, session_ids))

    def _export_selected(self) -> None:
        ids = self.selected_ids()
        if ids:
            self.export_requested.emit(ids)
