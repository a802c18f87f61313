"""What the panels of one window share: the workspace, workers, undo stack and news.

Panels never talk to each other directly. They change things through undo commands
(:mod:`workbench.gui.commands`) or engine calls on :attr:`AppContext.workers`, and learn
about changes from the signals here.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QUndoStack

from workbench.core.conversation import Message, SessionInfo
from workbench.engine.workspace import Workspace
from workbench.errors import WorkbenchError
from workbench.gui.errors import describe_error, error_cause
from workbench.gui.workers import WorkerPool


class AppContext(QObject):
    """The shared state of one main window."""

    sessions_changed = Signal()  # the session list should be read again
    session_updated = Signal(object)  # a SessionInfo whose row changed
    session_opened = Signal(int, object)  # session id, message id to show (or None)
    session_hidden = Signal(int)  # a session went to the trash
    message_changed = Signal(object)  # a stored Message whose text, role or flag changed
    message_inserted = Signal(object)  # a Message stored at its position
    message_removed = Signal(object)  # a Message deleted from its position
    messages_appended = Signal(object)  # a list of Messages stored at a session's end
    session_reloaded = Signal(int)  # a session changed in many ways: read it again
    context_changed = Signal(int)  # a session's context (facts, summary, tasks) was written
    # A sentence for the person at the keyboard, and what caused it: None, or the outage
    # of the team store it is part of (the failures of one outage are said once).
    error_reported = Signal(str, object)
    status_reported = Signal(str)  # a passing note for the status bar
    workspace_replaced = Signal()  # another database was opened
    providers_changed = Signal()  # provider configs or agents were saved: re-read them

    def __init__(self, workspace: Workspace, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.workspace = workspace
        self.workers = WorkerPool(self)
        self.undo_stack = QUndoStack(self)
        self.undo_stack.setUndoLimit(500)
        self.editing = workspace.editing()
        self.trash = workspace.session_trash()
        self.current_session_id = 0
        self.workers.error_reported.connect(self._job_failed)
        # A database written before summary lines were kept gets them on the engine's
        # own thread, so compaction previews read them (stopped when it is closed).
        workspace.keep_summary_lines()

    def _job_failed(self, name: str, error: BaseException) -> None:
        self.report_error(error, doing=name)

    def report_error(self, error: BaseException | str, *, doing: str = "") -> None:
        """Tell the person what went wrong, as a sentence."""
        if isinstance(error, str):
            self.error_reported.emit(error, None)
            return
        self.error_reported.emit(describe_error(error, doing=doing), error_cause(error))

    def replace_workspace(self, workspace: Workspace) -> Workspace:
        """Switch to another database; returns the old workspace (the caller closes it).

        Deletes waiting in the trash are carried out first, and the undo history is
        cleared: it speaks of sessions of the old database.
        """
        self.workers.wait_idle()
        self.trash.purge()
        old = self.workspace
        self.undo_stack.clear()
        self.workspace = workspace
        self.editing = workspace.editing()
        self.trash = workspace.session_trash()
        self.current_session_id = 0
        workspace.keep_summary_lines()
        self.workspace_replaced.emit()
        return old

    def read_shown(self, fn: Callable[..., Any], *args: Any, name: str, key: Hashable,
                   on_done: Callable[[Any], Any],
                   on_error: Callable[[BaseException], Any] | None = None) -> None:
        """Read something the window shows and hand it to ``on_done``: at once from a
        file (a local read costs less than a worker's round trip), on a worker from the
        team store (a server's round trips never hold the window up). A newer read
        with the same ``key`` supersedes one under way. ``on_error`` gets a failure
        (without it, a file's is raised and a worker's is reported)."""
        if self.workspace.is_file:
            self.workers.cancel(key)  # one asked of the team store before it was left
            if on_error is None:
                on_done(fn(*args))
                return
            try:
                result = fn(*args)
            except WorkbenchError as error:
                on_error(error)
                return
            on_done(result)
            return
        self.workers.read(fn, *args, name=name, key=key, on_done=on_done, on_error=on_error)

    def open_session(self, session_id: int, message_id: int | None = None) -> None:
        """Ask the window to show a session (scrolled to ``message_id`` when given)."""
        self.session_opened.emit(session_id, message_id)

    def announce_session(self, info: SessionInfo) -> None:
        self.session_updated.emit(info)

    def announce_message(self, kind: str, message: Message) -> None:
        signal: Any = {
            "changed": self.message_changed,
            "inserted": self.message_inserted,
            "removed": self.message_removed,
        }[kind]
        signal.emit(message)
