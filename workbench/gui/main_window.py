"""The main window: sessions on the left, the timeline and composer in the centre,
tabbed panels on the right, and a status bar with the database and the session's size.

Menus: File (new session, import, export, open database, quit), Edit (undo, redo, find,
message and session actions), View (panels, theme, navigation), Settings (providers,
agents), Help (shortcuts, about). The window's geometry, dock layout, splitter and
theme are kept in the GUI settings file (:mod:`workbench.gui.settings`) and restored
at the next start.

Deleted sessions wait in the trash while the window is open (their delete can be
undone); closing the window removes them for good.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, TypeVar

from PySide6.QtCore import QByteArray, QChildEvent, QEvent, QSettings, Qt, QTimer
from PySide6.QtGui import QAction, QActionGroup, QCloseEvent, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QDockWidget,
    QFileDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QScrollArea,
    QSplitter,
    QTabBar,
    QToolBar,
    QWidget,
)

from workbench.core.conversation import SessionInfo
from workbench.core.tokens import get_counter
from workbench.engine.team import team_address
from workbench.engine.workspace import Workspace, export_format_names
from workbench.errors import NotFoundError, WorkbenchError
from workbench.gui.context import AppContext
from workbench.gui.context_menu_key import open_context_menu
from workbench.gui.controls import message_box, single_shot
from workbench.gui.db_watch import DatabaseWatcher
from workbench.gui.delegates.markdown import visible_text
from workbench.gui.dialogs.import_progress import ImportProgressDialog
from workbench.gui.dialogs.open_database import OpenDatabaseDialog
from workbench.gui.dialogs.shortcuts import ShortcutsDialog
from workbench.gui.dialogs.team_database import TeamDatabaseDialog
from workbench.gui.dock_sizing import DockSharesSizer, format_shares, parse_shares
from workbench.gui.panels.search import SearchPanel
from workbench.gui.panels.session_browser import SessionBrowserPanel
from workbench.gui.panels.timeline import TimelinePanel
from workbench.gui.screen_fit import keep_on_screen
from workbench.gui.settings import gui_settings
from workbench.gui.status_log import StatusLog, StatusLogDialog, show_messages_in
from workbench.gui.theme import THEMES, apply_theme
from workbench.gui.window_keys import ShortcutNotice, give_window_keys

APP_TITLE = "Conversation Workbench"
_EXPORT_FILTERS = {
    "context-json": "Context file JSON (*.json)",
    "openai-jsonl": "OpenAI messages JSONL (*.jsonl)",
    "markdown": "Markdown transcript (*.md)",
}
_SETTINGS_VERSION = 1
FIRST_SIZE = (1280, 800)  # the window's size on first start, when the screen has room
_D = TypeVar("_D", bound=QDialog)


# The last team store opened (its URL without any password), offered next time.
TEAM_ADDRESS_KEY = "team/last_address"

DATABASE_LABEL_PX = 320  # the widest a team store's URL is shown in the status bar
TITLE_CHARS = 120  # the longest session title the window title takes whole


def stored_session(workspace: Workspace, session_id: int) -> SessionInfo | None:
    """The session as stored now, None when it is gone."""
    try:
        return workspace.get_session(session_id)
    except NotFoundError:
        return None


def error_boxes_shown() -> bool:
    """Whether an error also gets a message box (not on the offscreen platform of tests
    and scripted runs, where nobody could close it)."""
    return QApplication.platformName() != "offscreen"


class MainWindow(QMainWindow):
    """The workbench's main window over one open workspace."""

    def __init__(self, workspace: Workspace, parent: QWidget | None = None, *,
                 settings: QSettings | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("MainWindow")
        self.settings = settings if settings is not None else gui_settings()
        self.ctx = AppContext(workspace, self)
        self._prompt_on_open = False  # New Session: the keys go to the prompt once it opens
        self._error_boxed: str | None = None  # the last error shown in a box
        # The team store's outages already said in a box (each is said once, however
        # many reads and writes it fails and whatever the driver said each time).
        self._outages_boxed: set[Hashable] = set()
        self._not_heard = ""  # why other desktops are not heard now ("": they are)
        self.dock_sizer = DockSharesSizer(self)
        self._panel_keys = ShortcutNotice(self)  # Ctrl+1…5 pressed, or the menu clicked
        self.setWindowTitle(APP_TITLE)
        self.setDockOptions(QMainWindow.DockOption.AnimatedDocks
                            | QMainWindow.DockOption.AllowTabbedDocks)

        self.timeline = TimelinePanel(self.ctx, self)
        self.composer = self._make_composer()
        self.centre = QSplitter(Qt.Orientation.Vertical, self)
        self.centre.setObjectName("CentreSplitter")
        self.centre.setChildrenCollapsible(False)
        self.centre.addWidget(self.timeline)
        if self.composer is not None:
            self.centre.addWidget(self.composer)
            self.centre.setStretchFactor(0, 4)
            self.centre.setStretchFactor(1, 1)
        self.setCentralWidget(self.centre)

        self.browser = SessionBrowserPanel(self.ctx, self)
        self.sessions_dock = self._dock("Sessions", "SessionsDock", self.browser,
                                        Qt.DockWidgetArea.LeftDockWidgetArea)
        self.search = SearchPanel(self.ctx, self)
        self.search_dock = self._dock("Search", "SearchDock", self.search,
                                      Qt.DockWidgetArea.RightDockWidgetArea)

        self._build_status_bar()
        self._build_menus()
        self._add_compaction_panel()
        self._add_context_panels()
        self._connect()
        self._restore_layout()
        # Ctrl+E is "end of line" in a field under the X11 key scheme: see window_keys.
        self.window_keys = give_window_keys(self, [self.export_action])
        self._opened_once = False
        self._opening: OpenDatabaseDialog | None = None  # File → Open Database running
        self._stopped_note = ""  # what stopping a reply to open a database kept
        self._closing = False
        self.first_run_bar: Any = None
        self._refresh_status_timer = single_shot(self, 80, self._refresh_session_status)
        self.db_watcher = DatabaseWatcher(self.ctx, self._busy_with_own_work, self)
        # Another window or desktop may have renamed the open session.
        self.db_watcher.outside_change_seen.connect(
            lambda _reread: self._refresh_status_timer.start())
        self.db_watcher.hearing_changed.connect(self._hearing_changed)
        # What a person types first goes to the prompt (or, without a composer, to the
        # timeline), not to the first role chip, which Space would switch off.
        start = self.composer.prompt if self.composer is not None else self.timeline.view
        start.setFocus(Qt.FocusReason.OtherFocusReason)
        # The token encoding is built once per process, and tiktoken holds the interpreter
        # lock for the whole build (150-500 ms on a busy two-core machine): built now,
        # while the window opens, rather than at the Request panel's first count, which
        # froze scrolling for as long.
        self.ctx.workers.read(get_counter, name="load the token encoding")

    # -- building ----------------------------------------------------------------------

    def _make_composer(self) -> QWidget | None:
        try:
            from workbench.gui.panels.composer import ComposerPanel
        except ImportError:  # the chat engine is not part of this installation
            return None
        return ComposerPanel(self.ctx, self)

    def _dock(self, title: str, name: str, widget: QWidget,
              area: Qt.DockWidgetArea) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(name)
        dock.setWidget(widget)
        dock.setAccessibleName(f"{title} panel")
        # A panel behind another one's tab is moved off the window by Qt, not hidden, so
        # Tab would walk through controls nobody can see: its content is hidden while its
        # tab is not the current one (keeping its size, so switching tabs moves nothing).
        policy = widget.sizePolicy()
        policy.setRetainSizeWhenHidden(True)
        widget.setSizePolicy(policy)
        dock.visibilityChanged.connect(widget.setVisible)
        dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable
                         | QDockWidget.DockWidgetFeature.DockWidgetClosable
                         | QDockWidget.DockWidgetFeature.DockWidgetFloatable)
        self.addDockWidget(area, dock)
        self.dock_sizer.watch(dock)
        return dock

    def childEvent(self, event: QChildEvent) -> None:  # noqa: N802 - Qt's name
        super().childEvent(event)
        child = event.child()
        # Qt makes a tab bar for each group of tabbed panels: give it a name screen
        # readers can say.
        if event.type() == QEvent.Type.ChildPolished and isinstance(child, QTabBar) \
                and not child.accessibleName():
            child.setAccessibleName("Panel tabs")

    def add_panel(self, title: str, name: str, widget: QWidget) -> QDockWidget:
        """Add a panel tabbed with Search on the right (later parts add theirs here)."""
        dock = self._dock(title, name, widget, Qt.DockWidgetArea.RightDockWidgetArea)
        self.tabifyDockWidget(self.search_dock, dock)
        self.search_dock.raise_()
        keys = {"Compaction": ("&Compaction", "Ctrl+3"), "Context": ("Conte&xt", "Ctrl+4"),
                "Request": ("Re&quest", "Ctrl+5")}
        text, shortcut = keys.get(title, (title, None))
        self._panel_action(dock, text, shortcut)
        return dock

    def _panel_action(self, dock: QDockWidget, text: str, shortcut: str | None) -> QAction:
        """View → Panels entry of ``dock``: checked while the panel is open. From the
        menu it closes a panel in sight; its key closes it only when the keyboard is in
        it. Otherwise (closed, behind another panel's tab, or the keyboard elsewhere) it
        brings the panel to the front with the keyboard in it."""
        action = QAction(text, self)
        action.setCheckable(True)
        toggle = dock.toggleViewAction()
        action.setChecked(toggle.isChecked())
        toggle.toggled.connect(action.setChecked)
        if shortcut:
            action.setShortcut(QKeySequence(shortcut))
        action.setStatusTip(f"Show or close the {dock.windowTitle()} panel")
        self._panel_keys.watch(action)
        action.triggered.connect(lambda _checked=False: self.show_or_close_panel(
            dock, by_key=self._panel_keys.take(action)))
        self.panels_menu.addAction(action)
        self.addAction(action)
        self.panel_actions[dock.windowTitle()] = action
        return action

    def show_or_close_panel(self, dock: QDockWidget, *, by_key: bool = False) -> None:
        """Close ``dock`` when it is in sight, else show it in front and focus it. By
        its key, a panel in sight closes only when the keyboard is in it: from the
        prompt, Ctrl+1 goes to the Sessions list rather than hiding it."""
        content = dock.widget()
        if dock.isVisible() and content is not None and content.isVisible() and (
                not by_key or dock.isAncestorOf(QApplication.focusWidget())):
            dock.close()
            return
        self._show_panel_focused(dock)

    def _show_panel_focused(self, dock: QDockWidget) -> None:
        """Show ``dock`` in front with the keyboard in its first control."""
        dock.show()
        dock.raise_()
        content = dock.widget()
        if content is None:
            return
        # The panel's first control that Tab would reach takes the keyboard (not the
        # scroll area around the controls).
        widget = content.nextInFocusChain()
        while widget is not content and content.isAncestorOf(widget):
            if widget.focusPolicy() & Qt.FocusPolicy.TabFocus and widget.isVisible() \
                    and widget.isEnabled() and not isinstance(widget, QScrollArea):
                widget.setFocus(Qt.FocusReason.ShortcutFocusReason)
                return
            widget = widget.nextInFocusChain()
        content.setFocus(Qt.FocusReason.ShortcutFocusReason)

    def _add_context_panels(self) -> None:
        """The Context panel and, when the composer is there, the request inspector."""
        from workbench.gui.panels.context_panel import ContextPanel

        self.context_panel = ContextPanel(self.ctx, self)
        self.context_dock = self.add_panel("Context", "ContextDock", self.context_panel)
        self.timeline.model.session_changed.connect(self.context_panel.session_changed)
        self.request_inspector: Any = None
        if self.composer is not None:
            from workbench.gui.panels.request_inspector import RequestInspectorPanel

            self.request_inspector = RequestInspectorPanel(self.ctx, self.composer, self)
            self.request_dock = self.add_panel("Request", "RequestDock",
                                               self.request_inspector)
            self.timeline.model.session_changed.connect(
                self.request_inspector.session_changed)

    def _add_compaction_panel(self) -> None:
        """The Compaction panel, and its actions in Edit (Preview, Undo Last Compaction)."""
        from workbench.gui.panels.compaction import CompactionPanel

        def known_window() -> int | None:
            return self.composer.context_window() if self.composer is not None else None

        self.compaction_panel = CompactionPanel(self.ctx, self.timeline, self,
                                                window_source=known_window)
        self.compaction_dock = self.add_panel("Compaction", "CompactionDock",
                                              self.compaction_panel)
        self.timeline.model.session_changed.connect(self.compaction_panel.session_changed)
        panel = self.compaction_panel
        if self.composer is not None:
            self.composer.gauge_changed.connect(panel.window_changed)
        self.preview_compaction_action = self._action(
            "Preview &Compaction", self.preview_compaction, "Ctrl+Shift+K",
            "Plan a compaction of the open session and show it in the Compaction panel")
        self.undo_compaction_action = panel.undo_compaction_action
        edit_menu = next((a.menu() for a in self.menuBar().actions() if a.text() == "&Edit"),
                         None)
        if edit_menu is not None:
            edit_menu.addSeparator()
            edit_menu.addAction(self.preview_compaction_action)
            edit_menu.addAction(self.undo_compaction_action)
        self.addAction(self.preview_compaction_action)

    def preview_compaction(self) -> None:
        """Show the Compaction panel and preview a compaction of the open session."""
        self._show_panel_focused(self.compaction_dock)
        panel = self.compaction_panel
        if panel.preview_button.isEnabled():  # Tab goes on to the result and Apply
            panel.preview_button.setFocus(Qt.FocusReason.ShortcutFocusReason)
        panel.preview()

    def _build_status_bar(self) -> None:
        bar = self.statusBar()
        self.session_label = QLabel(self)
        self.session_label.setAccessibleName("Open session size")
        self.tokens_label = QLabel(self)
        self.tokens_label.setAccessibleName("Session tokens")
        self.busy_label = QLabel(self)
        self.busy_label.setAccessibleName("Background work")
        self.database_label = QLabel(self)
        self.database_label.setAccessibleName("Database file")
        # Titles, names and paths are data: never markup (nor an image to read).
        for label in (self.session_label, self.tokens_label, self.busy_label,
                      self.database_label):
            label.setTextFormat(Qt.TextFormat.PlainText)
        # The message on a line of its own that elides what does not fit (whole in its
        # tooltip and in View → Status Messages), not cut off at the bar's edge.
        self.status_log = StatusLog(self)
        self.status_line = show_messages_in(bar, self.status_log)
        self.status_line.clicked.connect(self.show_status_messages)
        bar.addPermanentWidget(self.busy_label)
        bar.addPermanentWidget(self.session_label)
        bar.addPermanentWidget(self.tokens_label)
        bar.addPermanentWidget(self.database_label)
        self._show_database()

    def _action(self, text: str, slot: Any, shortcut: Any = None, tip: str = "") -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            if isinstance(shortcut, list):
                action.setShortcuts([QKeySequence(s) for s in shortcut])
            else:
                action.setShortcut(QKeySequence(shortcut))
        if tip:
            action.setStatusTip(tip)
        action.triggered.connect(slot)
        return action

    def _build_menus(self) -> None:
        menu_bar = self.menuBar()
        # File
        file_menu = menu_bar.addMenu("&File")
        self.new_session_action = self.browser.new_action
        self.new_session_action.triggered.connect(self._prompt_when_the_new_session_opens)
        self.addAction(self.new_session_action)
        file_menu.addAction(self.new_session_action)
        self.import_action = self._action("&Import File…", self._import_file_interactively,
                                          "Ctrl+I", "Import conversations from a file")
        self.import_folder_action = self._action("Import Fol&der…",
                                                 self._import_folder_interactively,
                                                 "Ctrl+Shift+I",
                                                 "Import every conversation file in a folder")
        self.export_action = self._action("&Export Sessions…",
                                          lambda: self.export_interactively(
                                              self.browser.selected_ids()
                                              or [self.ctx.current_session_id]),
                                          "Ctrl+E", "Export the selected sessions")
        self.open_database_action = self._action("&Open Database…",
                                                 self._open_database_interactively,
                                                 QKeySequence.StandardKey.Open,
                                                 "Open or create another workbench database")
        self.open_team_database_action = self._action(
            "Open &Team Database…", self._open_team_database_interactively, "Ctrl+Shift+O",
            "Open a workbench database on a PostgreSQL server, shared with others")
        self.quit_action = self._action("&Quit", self.close, "Ctrl+Q")
        self.quit_action.setMenuRole(QAction.MenuRole.QuitRole)
        for action in (self.import_action, self.import_folder_action, self.export_action):
            file_menu.addAction(action)
        file_menu.addSeparator()
        file_menu.addAction(self.open_database_action)
        file_menu.addAction(self.open_team_database_action)
        file_menu.addSeparator()
        file_menu.addAction(self.quit_action)

        # Edit
        edit_menu = menu_bar.addMenu("&Edit")
        self.undo_action = self.ctx.undo_stack.createUndoAction(self, "&Undo")
        self.undo_action.setShortcuts([QKeySequence(QKeySequence.StandardKey.Undo)])
        self.redo_action = self.ctx.undo_stack.createRedoAction(self, "&Redo")
        self.redo_action.setShortcuts([QKeySequence("Ctrl+Shift+Z"), QKeySequence("Ctrl+Y")])
        edit_menu.addAction(self.undo_action)
        edit_menu.addAction(self.redo_action)
        edit_menu.addSeparator()
        self.find_action = self._action("&Find in Session…", lambda: self.find("session"),
                                        QKeySequence.StandardKey.Find,
                                        "Search the open session")
        self.find_all_action = self._action("Find &Everywhere…", lambda: self.find("all"),
                                            "Ctrl+Shift+F", "Search every session")
        edit_menu.addAction(self.find_action)
        edit_menu.addAction(self.find_all_action)
        edit_menu.addSeparator()
        if self.composer is not None:
            c = self.composer
            for action in (c.send_action, c.stop_action, c.regenerate_action):
                edit_menu.addAction(action)
            edit_menu.addAction(c.keep_stopped_action)
            self.addAction(c.stop_action)
            self.addAction(c.regenerate_action)
            edit_menu.addSeparator()
        message_menu = edit_menu.addMenu("&Message")
        t = self.timeline
        for action in (t.edit_action, t.insert_above_action, t.insert_below_action,
                       t.important_action, t.copy_action, t.fork_action):
            message_menu.addAction(action)
        message_menu.addSeparator()
        message_menu.addAction(t.delete_action)
        session_menu = edit_menu.addMenu("&Session")
        b = self.browser
        for action in (b.rename_action, b.pin_action, b.tags_action, b.fork_action,
                       b.archive_action):
            session_menu.addAction(action)
        session_menu.addSeparator()
        session_menu.addAction(b.delete_action)
        edit_menu.aboutToShow.connect(self._refresh_action_states)

        # View
        view_menu = menu_bar.addMenu("&View")
        self.panels_menu = view_menu.addMenu("&Panels")
        self.panel_actions: dict[str, QAction] = {}
        self._panel_action(self.sessions_dock, "&Sessions", "Ctrl+1")
        self._panel_action(self.search_dock, "Sea&rch", "Ctrl+2")
        theme_menu = view_menu.addMenu("T&heme")
        self.theme_group = QActionGroup(self)
        self.theme_actions: dict[str, QAction] = {}
        for theme in THEMES:
            action = QAction(f"&{theme.title()}" if theme != "system" else "&Follow the System",
                             self)
            action.setCheckable(True)
            action.triggered.connect(lambda _c=False, theme=theme: self.set_theme(theme))
            self.theme_group.addAction(action)
            theme_menu.addAction(action)
            self.theme_actions[theme] = action
        view_menu.addSeparator()
        self.focus_sessions_action = self._action("Go to Sess&ions", self._focus_sessions,
                                                  "Ctrl+L")
        self.focus_timeline_action = self._action("Go to &Timeline",
                                                  lambda: self.timeline.view.setFocus(),
                                                  "Ctrl+0")
        for action in (self.focus_sessions_action, self.focus_timeline_action,
                       t.jump_action, t.start_action, t.end_action):
            view_menu.addAction(action)
            self.addAction(action)
        view_menu.addSeparator()
        self.status_messages_action = self._action(
            "Status &Messages…", self.show_status_messages, "Ctrl+Shift+M",
            tip="The status bar's messages of this run, whole")
        view_menu.addAction(self.status_messages_action)
        self.addAction(self.status_messages_action)
        self.browser.focus_filter_action.setShortcut(QKeySequence())

        # Settings
        settings_menu = menu_bar.addMenu("&Settings")
        # Ctrl+, is where other applications keep their settings.
        self.providers_action = self._action("&Providers…", self.show_providers, "Ctrl+,",
                                             tip="Add, change and test model servers")
        self.agents_action = self._action("&Agents…", self.show_agents, "Ctrl+Shift+G",
                                          tip="Agents' instructions, models, memory and tools")
        for action in (self.providers_action, self.agents_action):
            action.setMenuRole(QAction.MenuRole.NoRole)
            settings_menu.addAction(action)

        # Help
        help_menu = menu_bar.addMenu("&Help")
        self.shortcuts_action = self._action("&Keyboard Shortcuts", self.show_shortcuts,
                                             ["F1", "Ctrl+/"])
        self.about_action = self._action("&About", self._show_about)
        self.about_action.setMenuRole(QAction.MenuRole.AboutRole)
        help_menu.addAction(self.shortcuts_action)
        help_menu.addAction(self.about_action)
        # Not in a menu: the key opens the focused widget's own menu (as the Menu key does).
        self.context_menu_action = self._action("Context &Menu", lambda: open_context_menu(),
                                                "Shift+F10")
        for action in (self.import_action, self.import_folder_action, self.export_action,
                       self.open_database_action, self.open_team_database_action,
                       self.quit_action, self.undo_action,
                       self.redo_action, self.find_action, self.find_all_action,
                       self.providers_action, self.agents_action, self.shortcuts_action,
                       self.context_menu_action):
            self.addAction(action)

    def _connect(self) -> None:
        ctx = self.ctx
        self.browser.session_activated.connect(self.open_session)
        self.browser.export_requested.connect(self.export_interactively)
        ctx.session_opened.connect(self.open_session)
        ctx.error_reported.connect(self._show_error)
        ctx.status_reported.connect(lambda text: self.statusBar().showMessage(text, 6000))
        ctx.workers.busy_changed.connect(
            lambda busy: self.busy_label.setText("Working…" if busy else ""))
        ctx.session_updated.connect(self._session_updated)
        for signal in (ctx.message_changed, ctx.message_inserted, ctx.message_removed,
                       ctx.messages_appended):
            signal.connect(lambda *_: self._refresh_status_timer.start())
        ctx.undo_stack.indexChanged.connect(lambda _i: self._refresh_status_timer.start())
        # A status line that points Ctrl+Z at an action goes once Ctrl+Z would do
        # something else (another action was done, or that one was undone).
        self._undo_status: tuple[str, Any] | None = None
        self.statusBar().messageChanged.connect(self._status_changed)
        ctx.undo_stack.indexChanged.connect(self._undo_top_changed)
        ctx.workspace_replaced.connect(self._database_replaced)
        ctx.undo_stack.indexChanged.connect(self._forget_error_boxed)  # the person acted
        QGuiApplication.styleHints().colorSchemeChanged.connect(self._system_scheme_changed)
        self.timeline.summary_changed.connect(self.session_label.setText)
        if self.composer is not None:
            self.composer.attach_timeline(self.timeline)
            self.timeline.model.session_changed.connect(self.composer.session_changed)
            self.composer.gauge_changed.connect(lambda _g: self._refresh_session_status())
            ctx.providers_changed.connect(self.composer.refresh_providers)

    def _undo_top(self) -> Any:
        stack = self.ctx.undo_stack
        return stack.command(stack.index() - 1) if stack.index() > 0 else None

    def _status_changed(self, text: str) -> None:
        self._undo_status = (text, self._undo_top()) if "Ctrl+Z" in text else None

    def _undo_top_changed(self, _index: int) -> None:
        shown = self._undo_status
        if shown is None or self.statusBar().currentMessage() != shown[0]:
            return
        if self._undo_top() is not shown[1]:
            self._undo_status = None
            self.statusBar().clearMessage()

    def _busy_with_own_work(self) -> bool:
        """Whether reading the open session again now would disturb what the person
        is doing (a reply streaming in, a message being edited)."""
        streaming = self.composer is not None and self.composer.streaming
        return bool(streaming or self.timeline.view.editing)

    # -- sessions ----------------------------------------------------------------------

    def open_session(self, session_id: int, message_id: int | None = None) -> None:
        """Show a session in the timeline (scrolled to ``message_id`` when given)."""
        position = None
        if message_id is not None:
            try:
                message = self.ctx.workspace.get_message(message_id)
                position = message.position if message.session_id == session_id else None
            except NotFoundError:
                message_id = None
        if session_id in self.ctx.trash:
            session_id = 0
        if session_id == self.ctx.current_session_id and session_id and message_id is not None:
            self.timeline.jump_to_message(message_id, position)
        else:
            self.timeline.open_session(session_id, message_id, position)
        if session_id:
            self.browser.select_session(session_id)
        if session_id and self._prompt_on_open and self.composer is not None:
            # A new session is for typing a prompt (its empty timeline says so).
            self._prompt_on_open = False
            self.composer.prompt.setFocus(Qt.FocusReason.OtherFocusReason)
        self._refresh_session_status()

    def _prompt_when_the_new_session_opens(self) -> None:
        self._prompt_on_open = True

    def _session_updated(self, info: SessionInfo) -> None:
        if info.id == self.ctx.current_session_id:
            self.timeline.set_title(info.title)
            self._refresh_session_status()

    def _refresh_session_status(self) -> None:
        """Show the open session's title and size as stored now: read at once from a
        file, on a worker from the team store (a server's round trip never holds the
        window up)."""
        session_id = self.ctx.current_session_id
        if not session_id:
            self._show_session_status(None)
            return

        def done(info: SessionInfo | None) -> None:
            if session_id == self.ctx.current_session_id:
                self._show_session_status(info)

        self.ctx.read_shown(stored_session, self.ctx.workspace, session_id,
                            name="read the session's title", key=(self, "status"),
                            on_done=done)

    def _show_session_status(self, info: SessionInfo | None) -> None:
        if info is None:
            self.setWindowTitle(APP_TITLE)
            self.tokens_label.setText("")
            return
        if self.timeline.title_label.full_text() != info.title:
            self.timeline.set_title(info.title)  # renamed elsewhere
        # Capped: a 5,000-character title is no window title (the timeline shows it).
        title = visible_text(info.title)  # a bidi control would reorder the title bar
        if len(title) > TITLE_CHARS:
            title = title[:TITLE_CHARS - 1] + "…"
        self.setWindowTitle(f"{title} — {APP_TITLE}")
        # The session's own size; what the next request carries against the model's
        # window (with the instructions, summary and prompt) is the composer's gauge.
        self.tokens_label.setText(f"{info.token_count:,} tokens in the session")
        self.tokens_label.setToolTip(
            "Tokens of the session's active messages (folded ones not counted). The gauge "
            "by the prompt shows the next request against the model's context window.")

    def _focus_sessions(self) -> None:
        self.sessions_dock.show()
        self.browser.focus_filter()

    def _refresh_action_states(self) -> None:
        self.timeline._update_actions()
        self.browser._update_actions()

    # -- find ----------------------------------------------------------------------------

    def find(self, scope: str) -> None:
        """Show the search panel with the cursor in its query (this session or all)."""
        self.search_dock.show()
        self.search_dock.raise_()
        self.search.focus_query(scope)

    # -- import, export, databases --------------------------------------------------------

    def start_import(self, path: Path | str, *, format: str | None = None
                     ) -> ImportProgressDialog:
        """Import a file or folder with a progress dialog (returned, already running)."""
        dialog = ImportProgressDialog(self.ctx, Path(path), format=format, parent=self)
        dialog.import_finished.connect(self._import_finished)
        dialog.setModal(True)
        dialog.show()
        dialog.start()
        return dialog

    def _import_finished(self, report: Any) -> None:
        created = [info for info, new in report.sessions if new]
        if created:
            self.open_session(created[0].id)

    def _last_folder(self) -> str:
        return str(self.settings.value("paths/last_folder", str(Path.home())))

    def _remember_folder(self, path: str) -> None:
        self.settings.setValue("paths/last_folder", str(Path(path).parent))

    def _import_file_interactively(self) -> None:
        path, _filter = QFileDialog.getOpenFileName(
            self, "Import conversations", self._last_folder(),
            "Conversation files (*.json *.jsonl *.md *.zip *.db);;All files (*)")
        if path:
            self._remember_folder(path)
            self.start_import(path)

    def _import_folder_interactively(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Import a folder of conversations",
                                                self._last_folder())
        if path:
            self.settings.setValue("paths/last_folder", path)
            self.start_import(path)

    def export_sessions(self, session_ids: list[int], format: str,
                        path: Path | str) -> QDialog | None:
        """Export sessions on a worker, with a progress dialog and Cancel; the status
        bar says when the file is written. Returns the dialog."""
        from workbench.gui.dialogs.export_progress import ExportProgressDialog

        ids = [sid for sid in session_ids if sid]
        if not ids:
            return None
        dialog = ExportProgressDialog(self.ctx, ids, format, Path(path), self)

        def done(infos: list[SessionInfo]) -> None:
            if infos:
                noun = "session" if len(infos) == 1 else "sessions"
                self.statusBar().showMessage(f"Exported {len(infos)} {noun} to {path}.", 8000)
                if not dialog.notes:
                    dialog.accept()  # nothing to read there that the status bar does not say
            else:
                self.statusBar().showMessage(f"Export cancelled; {path} not written.", 8000)

        dialog.export_finished.connect(done)
        dialog.show()
        dialog.start()
        return dialog

    def export_interactively(self, session_ids: list[int]) -> None:
        ids = [sid for sid in session_ids if sid]
        if not ids:
            self.statusBar().showMessage("Select the sessions to export first.", 5000)
            return
        names = [n for n in export_format_names() if n in _EXPORT_FILTERS]
        filters = ";;".join(_EXPORT_FILTERS[n] for n in names)
        suggested = str(Path(self._last_folder()) / self._export_name(ids))
        path, chosen = QFileDialog.getSaveFileName(self, "Export sessions", suggested, filters)
        if not path:
            return
        self._remember_folder(path)
        suffixes = {_EXPORT_FILTERS[n].split("*")[1].rstrip(")"): n for n in names}
        format = next((n for n in names if _EXPORT_FILTERS[n] == chosen), names[0])
        typed = Path(path).suffix.lower()
        if typed in suffixes:
            # A name typed with a format's ending gets that format ("notes.md" under the
            # JSON filter is Markdown), as the ending says what the file is.
            format = suffixes[typed]
        elif not typed:
            path += next(s for s, n in suffixes.items() if n == format)
        self.export_sessions(ids, format, path)

    def _export_name(self, ids: list[int]) -> str:
        """The file name an export of ``ids`` suggests, without an ending (the chosen
        format's is added): the session's title, else how many sessions it holds."""
        title = ""
        if len(ids) == 1:
            titles = {info.id: info.title for info in self.browser.selected_sessions()}
            title = titles.get(ids[0], "")
            if not title and ids[0] == self.ctx.current_session_id:
                title = self.timeline.title_label.full_text()
        # Characters no file system takes, and invisible ones, become spaces.
        name = "".join(ch if ch.isprintable() and ch not in '\\/:*?"<>|' else " "
                       for ch in title)
        name = " ".join(name.split())[:80].strip(" .")
        return name or f"{len(ids)} session{'s' if len(ids) != 1 else ''}"

    def open_database(self, path: Path | str, *, password: str | None = None,
                      remember: bool = False) -> OpenDatabaseDialog | None:
        """Switch the window to another database (created when missing, migrated when
        older): a file, or a team store's ``postgresql://`` URL (``password``, when
        given, is used for this open only; ``remember`` hands it to the system keyring
        once the store opened). It is opened on a worker with a progress dialog
        (returned, running): the window switches when it is open; a failure is said in
        the dialog. A message being edited in place is saved first, into the database
        it belongs to. A reply still arriving is stopped first, after asking (None when
        the person cancels)."""
        stopped = self._stop_streaming_for("Stop and Open")
        if stopped is None:
            return None
        self._stopped_note = stopped
        self.timeline.view.commit_edit()
        if self._opening is not None:
            if self._opening.running:
                self._opening.raise_()
                return self._opening
            self._opening.deleteLater()  # the last one's report was read or closed
        dialog = OpenDatabaseDialog(self.ctx.workers, path, password=password,
                                    remember=remember, parent=self)
        dialog.setWindowModality(Qt.WindowModality.WindowModal)
        dialog.opened.connect(self._database_opened)
        dialog.open_failed.connect(
            lambda _e: self.statusBar().showMessage(dialog.label.text(), 15000))
        self._opening = dialog
        dialog.start()
        return dialog

    def _database_opened(self, workspace: Workspace) -> None:
        if self._closing:  # the window closed while it was being opened
            workspace.close()
            return
        old = self.ctx.replace_workspace(workspace)
        old.close()
        self.open_session(0)
        note, self._stopped_note = self._stopped_note, ""
        keyring_note = self._opening.keyring_note if self._opening is not None else ""
        self.statusBar().showMessage(
            " ".join(x for x in (f"Opened {workspace.location}.", keyring_note, note) if x),
            15000 if note or keyring_note else 8000)

    def _open_database_interactively(self) -> None:
        path, _filter = QFileDialog.getSaveFileName(
            self, "Open or create a database", self._last_folder(),
            "Workbench databases (*.db);;All files (*)",
            options=QFileDialog.Option.DontConfirmOverwrite)
        if path:
            self._remember_folder(path)
            self.open_database(path)

    def _open_team_database_interactively(self) -> None:
        """File → Open Team Database: ask for the server's URL (and a password), then
        open it as Open Database does. The address is remembered for next time, without
        any password."""
        address = ""
        if not self.ctx.workspace.is_file:
            # The team store this window is on (opened by WORKBENCH_DB or --db too).
            try:
                address = team_address(self.ctx.workspace.location)
            except WorkbenchError:
                pass
        address = address or str(self.settings.value(TEAM_ADDRESS_KEY, "") or "")
        dialog = TeamDatabaseDialog(self, address=address)
        try:
            if not dialog.exec():
                return
            url, password, remember = dialog.url(), dialog.password(), dialog.remember()
        finally:
            dialog.deleteLater()
        self.settings.setValue(TEAM_ADDRESS_KEY, team_address(url))
        self.open_database(url, password=password, remember=remember)

    def _show_database(self) -> None:
        ws = self.ctx.workspace
        if ws.is_file:
            self.database_label.setText(f"Database: {ws.db_path.name}")
            self.database_label.setAccessibleName("Database file")
        else:
            # user@host:port/database (no scheme, no password), cut short in the middle
            # when long: the status bar must not make the window wider. The tooltip
            # has the whole URL.
            try:
                address = team_address(ws.location).split("://", 1)[-1]
            except WorkbenchError:
                address = ws.location
            shown = self.database_label.fontMetrics().elidedText(
                address, Qt.TextElideMode.ElideMiddle, DATABASE_LABEL_PX)
            if self._not_heard:
                self.database_label.setText(f"Team database: {shown} (not reachable: "
                                            "reconnecting…)")
                self.database_label.setToolTip(
                    f"{ws.location}\nOther desktops' changes are not heard right now "
                    f"({self._not_heard}); the workbench keeps trying and catches up "
                    "once it hears them again.")
            else:
                self.database_label.setText(f"Team database: {shown}")
                self.database_label.setToolTip(ws.location)
            self.database_label.setAccessibleName("Team database")
            return
        self.database_label.setToolTip(ws.location)

    # -- messages to people ----------------------------------------------------------------

    def _hearing_changed(self, problem: str) -> None:
        """Other desktops stopped being heard (the server is likely gone), or are heard
        again: the status bar says so for as long as it lasts, not for a few seconds."""
        self._not_heard = problem
        if not problem:
            self._forget_error_boxed()
        self._show_database()

    def _database_replaced(self) -> None:
        self._not_heard = ""
        self._forget_error_boxed()
        self._outages_boxed.clear()  # another database: its outages are its own
        self._show_database()

    def _forget_error_boxed(self, *_args: object) -> None:
        self._error_boxed = None

    def _show_error(self, text: str, cause: Hashable | None = None) -> None:
        self.statusBar().showMessage(text, 15000)
        # One failure often fails the reads that follow it too (a server gone: the
        # write, then the list and the session read again). A failure that is part of
        # an outage of the team store (``cause``) gets a box once for the whole outage,
        # though a background read said it before the person's own change failed, and
        # though the driver words it differently each time; another sentence the person
        # was just shown in a box is not put up again (the status bar says it) until
        # the person acts again, the window hears the database again or another comes.
        if cause is not None:
            if cause in self._outages_boxed:
                return
        elif text == self._error_boxed:
            return
        if self.isVisible() and error_boxes_shown():
            if cause is not None:
                self._outages_boxed.add(cause)
            else:
                self._error_boxed = text
            message_box(self, QMessageBox.Icon.Warning, APP_TITLE, text)

    def _one_dialog(self, attribute: str, make: Callable[[], _D]) -> _D:
        """The window's one dialog kept in ``attribute``, made anew by ``make`` when it is
        not shown (the closed one is let go), then shown, raised and activated."""
        dialog: _D | None = getattr(self, attribute, None)
        if dialog is None or not dialog.isVisible():
            if dialog is not None:
                dialog.deleteLater()
            dialog = make()
            setattr(self, attribute, dialog)
        dialog.show()
        dialog.raise_()
        dialog.activateWindow()
        return dialog

    def show_shortcuts(self) -> ShortcutsDialog:
        """Help → Keyboard Shortcuts: one window, raised and given the keyboard when it
        is open already, made again (the actions of this moment) when it is not."""
        dialog = self._one_dialog(
            "_shortcuts_dialog", lambda: ShortcutsDialog(list(self.findChildren(QAction)), self))
        dialog.table.setFocus(Qt.FocusReason.OtherFocusReason)
        return dialog

    def show_status_messages(self) -> StatusLogDialog:
        """View → Status Messages: the status bar's messages, whole (one window)."""
        dialog = self._one_dialog("_status_dialog",
                                  lambda: StatusLogDialog(self.status_log, self))
        dialog.text.setFocus(Qt.FocusReason.OtherFocusReason)
        return dialog

    def show_providers(self) -> QDialog:
        """Settings → Providers (one dialog, raised again when already open)."""
        from workbench.gui.dialogs.providers import ProvidersDialog

        return self._settings_dialog("_providers_dialog", ProvidersDialog)

    def show_agents(self) -> QDialog:
        """Settings → Agents (one dialog, raised again when already open)."""
        from workbench.gui.dialogs.agents import AgentsDialog

        return self._settings_dialog("_agents_dialog", AgentsDialog)

    def offer_local_servers(self, servers: Any = None, *, force: bool = False) -> Any:
        """First run: look for local model servers and offer them in a bar above the
        timeline, with a hint on hosted providers (once per database unless ``force``).
        Returns the bar, or None when the offer was made before."""
        from workbench.engine.discovery import KNOWN_LOCAL_SERVERS
        from workbench.gui.panels.first_run import FirstRunBar, offer_local_servers

        bar = FirstRunBar(self.ctx)
        if not offer_local_servers(self.ctx, bar, servers or KNOWN_LOCAL_SERVERS,
                                   force=force):
            bar.deleteLater()
            return None
        toolbar = QToolBar("Welcome", self)
        toolbar.setObjectName("FirstRunToolBar")
        toolbar.setMovable(False)
        toolbar.setFloatable(False)
        toolbar.addWidget(bar)
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, toolbar)

        def dismissed() -> None:
            self.removeToolBar(toolbar)
            toolbar.deleteLater()
            self.first_run_bar = None

        bar.dismissed.connect(dismissed)
        self.first_run_bar = bar
        return bar

    def _settings_dialog(self, attribute: str, cls: Any) -> QDialog:
        dialog = getattr(self, attribute, None)
        if dialog is None:
            dialog = cls(self.ctx, self)
            setattr(self, attribute, dialog)
        elif not dialog.isVisible():
            dialog.reopen()
        dialog.show()
        dialog.raise_()
        dialog.activateWindow()
        return dialog

    def _show_about(self) -> None:
        from workbench import __version__

        QMessageBox.about(
            self, f"About {APP_TITLE}",
            f"<h3>{APP_TITLE} {__version__}</h3>"
            "<p>Browse, edit, compact and continue LLM conversations.</p>"
            f"<p>Database: {html.escape(self.ctx.workspace.location)}</p>")

    # -- theme and layout ----------------------------------------------------------------

    def set_theme(self, theme: str) -> None:
        """Use ``system``, ``light`` or ``dark`` (remembered)."""
        app = QApplication.instance()
        if isinstance(app, QApplication):
            apply_theme(app, theme)
        self.settings.setValue("view/theme", theme)
        if theme in self.theme_actions:
            self.theme_actions[theme].setChecked(True)
        self.timeline.delegate.clear_cache()
        self.timeline.view.forget_heights()
        counts = (self.timeline.model.session_index.role_counts()
                  if self.timeline.model.session_index is not None else None)
        self.timeline.chips.set_counts(counts)

    def _system_scheme_changed(self, _scheme: Any) -> None:
        if str(self.settings.value("view/theme", "system")) == "system":
            self.set_theme("system")

    def _restore_layout(self) -> None:
        s = self.settings
        theme = str(s.value("view/theme", "system"))
        self.set_theme(theme if theme in THEMES else "system")
        geometry = s.value("window/geometry")
        if isinstance(geometry, QByteArray) and not geometry.isEmpty():
            self.restoreGeometry(geometry)
            keep_on_screen(self, title_bar=0, borders=0)  # restored as it was, frame and all
        else:
            self.resize(*FIRST_SIZE)
            keep_on_screen(self)
        state = s.value("window/state")
        if isinstance(state, QByteArray) and not state.isEmpty():
            self.restoreState(state, _SETTINGS_VERSION)
        self.dock_sizer.shares = parse_shares(s.value("window/dock_shares"))
        splitter = s.value("window/centre")
        if isinstance(splitter, QByteArray) and not splitter.isEmpty():
            self.centre.restoreState(splitter)
        elif self.composer is not None:
            self.centre.setSizes([680, 120])

    def save_layout(self) -> None:
        s = self.settings
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/state", self.saveState(_SETTINGS_VERSION))
        s.setValue("window/dock_shares", format_shares(self.dock_sizer.shares))
        s.setValue("window/centre", self.centre.saveState())
        s.sync()

    def showEvent(self, event: Any) -> None:
        super().showEvent(event)
        if not self._opened_once:
            self._opened_once = True
            QTimer.singleShot(0, self._open_first_session)

    def _open_first_session(self) -> None:
        if self.ctx.current_session_id:
            return
        last = self.settings.value("session/last")
        try:
            last_id = int(last) if last is not None else 0
        except (TypeError, ValueError):
            last_id = 0
        if last_id:
            try:
                self.ctx.workspace.get_session(last_id)
            except NotFoundError:
                last_id = 0
        if not last_id and self.browser.model.rowCount():
            last_id = self.browser.model.session_at(0).id
        if last_id:
            self.open_session(last_id)

    def _may_close(self) -> bool:
        """Whether the window may close now: a reply still arriving is stopped first
        (what has arrived is kept, as Stop keeps it), after asking; Cancel keeps the
        window and the reply going."""
        return self._stop_streaming_for("Stop and Quit") is not None

    def _stop_streaming_for(self, stop_text: str) -> str | None:
        """Before quitting or opening another database: a reply still arriving is
        stopped (what has arrived is kept, as Stop keeps it) after asking. Returns what
        the stop kept, as a sentence ("" when nothing was arriving), or None when the
        person cancelled (the reply keeps arriving)."""
        composer = self.composer
        if composer is None or not composer.streaming:
            return ""
        box = QMessageBox(QMessageBox.Icon.Question, APP_TITLE,
                          "A reply is still arriving.", parent=self)
        box.setTextFormat(Qt.TextFormat.PlainText)
        box.setInformativeText(composer.stop_note())
        stop = box.addButton(stop_text, QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(stop)

        def ended(*_args: Any) -> None:
            # The reply ended while the question was open: it no longer says what is.
            box.setText("The reply has arrived; nothing needs stopping now.")
            box.setInformativeText("")
            stop.setText(stop_text.removeprefix("Stop and "))

        composer.turn_finished.connect(ended)
        composer.turn_failed.connect(ended)
        try:
            box.exec()
        finally:
            composer.turn_finished.disconnect(ended)
            composer.turn_failed.disconnect(ended)
        if box.clickedButton() is not stop:
            return None
        if not composer.streaming:
            return ""  # it ended meanwhile: nothing was stopped
        kept = composer.stopped_note()
        composer.stop_and_wait()
        return kept

    def closeEvent(self, event: QCloseEvent) -> None:
        if not self._may_close():
            event.ignore()
            return
        self._closing = True
        # A message being edited in place is saved, as clicking elsewhere saves it.
        self.timeline.view.commit_edit()
        for dialog in self.findChildren(QDialog):
            if dialog.isVisible():
                # A running import is cancelled and waited for below; the settings
                # dialogs close without asking about unsaved edits.
                getattr(dialog, "close_without_asking", dialog.close)()
        self.save_layout()
        if self.ctx.current_session_id:
            self.settings.setValue("session/last", self.ctx.current_session_id)
        if self.composer is not None:
            self.composer.shut_down()
        self.ctx.workers.shutdown()
        # Deletes that can no longer be undone are carried out now.
        self.ctx.trash.purge()
        self.settings.sync()
        # The panels are about to go; the context and its undo stack may outlive them
        # for a moment (clearing a stack signals), and no signal may reach a panel whose
        # widgets are already deleted.
        self.db_watcher.timer.stop()
        self.ctx.undo_stack.blockSignals(True)
        self.ctx.blockSignals(True)
        super().closeEvent(event)
