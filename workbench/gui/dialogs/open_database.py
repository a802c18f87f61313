"""Opening a database off the UI thread: File → Open Database and the start-up.

Opening may take a while: an older file is first backed up, then its schema changes are
applied (``Workspace.open(progress=...)``). The open runs on a worker while the window
(or, at start-up, the event loop) goes on. The dialog appears as soon as a backup or a
schema change begins, or once the open has taken ``SHOW_AFTER_MS``, and says which step
it is on; a quick open shows nothing. There is no Cancel: a schema change is never
stopped half-way. A failure is said in a sentence (never a traceback), with Close.

A team store is opened the same way from its ``postgresql://`` URL, with the password a
person typed (held in memory for this open only) and, when asked, that password handed
to the system keyring once the store has opened with it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QEventLoop, QTimer, Signal
from PySide6.QtWidgets import QWidget

from workbench.engine.team import (
    database_to_open,
    is_team_url,
    open_team_store,
    remember_password,
    team_address,
)
from workbench.engine.workspace import Workspace
from workbench.errors import WorkbenchError
from workbench.gui.dialogs.job_progress import JobProgressDialog
from workbench.gui.errors import describe_error
from workbench.gui.workers import Job, WorkerPool

SHOW_AFTER_MS = 400


class OpenDatabaseDialog(JobProgressDialog):
    """Progress of opening one database (see the module docstring)."""

    opened = Signal(object)  # the Workspace, open
    open_failed = Signal(object)  # the exception

    def __init__(self, workers: WorkerPool, path: Path | str | None, *,
                 password: str | None = None, remember: bool = False,
                 prepare: Callable[[Workspace], object] | None = None,
                 parent: QWidget | None = None) -> None:
        self.path: Path | str | None
        if path is None:
            try:
                default = database_to_open(None)
            except WorkbenchError:
                default = None  # a URL of another kind: the open says so
            if default is not None and is_team_url(default):
                path = default  # WORKBENCH_DB names a team store
        if path is not None and is_team_url(path):
            self.path = str(path)
            try:
                self.name = team_address(self.path)
            except WorkbenchError:
                self.name = "the team database"  # the open says what is wrong with it
        else:
            self.path = Path(path).expanduser() if path is not None else None
            self.name = self.path.name if self.path is not None else "the workbench database"
        super().__init__("Open Database", f"Opening {self.name}…", parent)
        self._password = password
        self._remember = remember and bool(password)
        #: What became of "Remember in the system keyring" (a sentence; "" when not asked).
        self.keyring_note = ""
        self.workers = workers
        self.prepare = prepare  # more work on the new workspace, on the worker too
        self.workspace: Workspace | None = None
        self.error: BaseException | None = None
        self._step = ""
        self.buttons.hide()  # nothing to press until it has failed
        self._show_timer = QTimer(self)
        self._show_timer.setSingleShot(True)
        self._show_timer.setInterval(SHOW_AFTER_MS)
        self._show_timer.timeout.connect(self.show)

    def start(self) -> Job:
        """Open on the database writer: after the changes already asked for of the
        database open now, so switching never cuts one off."""
        self._begin()
        self._show_timer.start()
        path, prepare = self.path, self.prepare
        password, remember = self._password, self._remember

        def open_it() -> Workspace:
            if isinstance(path, str):
                workspace = open_team_store(path, password, progress=self._step_reported)
            else:
                workspace = Workspace.open(path, progress=self._step_reported)
            try:
                if prepare is not None:
                    prepare(workspace)
            except BaseException:
                workspace.close()
                raise
            if remember and isinstance(path, str) and password:
                # Only a password the server took is kept.
                try:
                    remember_password(path, password)
                    self.keyring_note = "Its password is remembered in the system keyring."
                except WorkbenchError as exc:
                    self.keyring_note = str(exc)
            return workspace

        return self.workers.write(open_it, name=f"open {self.name}", on_done=self._done,
                                  on_error=self._failed)

    def _step_reported(self, text: str, done: int, total: int) -> None:
        # On the worker thread: plain values only; the dialog's timer shows them.
        self._step = text
        self._progress(done, total)

    def show_progress(self, done: int, total: int | None) -> None:
        if self._step:
            self.label.setText(self._step)
            if not self.isVisible():
                self.show()

    def cancel(self) -> None:
        if not self.running:  # while it runs there is nothing to cancel (see above)
            super().cancel()

    def _done(self, workspace: Workspace) -> None:
        self._show_timer.stop()
        self._finish()
        self.workspace = workspace
        self.opened.emit(workspace)
        self.accept()

    def _failed(self, error: BaseException) -> None:
        self._show_timer.stop()
        self.error = error
        self._finish(failed=True)
        self.label.setText(describe_error(error, doing=f"open {self.name}"))
        self.buttons.show()
        self.show()
        self.open_failed.emit(error)


def open_at_start(path: Path | str | None,
                  prepare: Callable[[Workspace], object] | None = None,
                  ) -> tuple[Workspace | None, OpenDatabaseDialog]:
    """Open the workspace before the window exists, the event loop running meanwhile.

    Returns the workspace (None when it could not be opened: the dialog then shows why
    and is still open) and the dialog.
    """
    pool = WorkerPool()
    dialog = OpenDatabaseDialog(pool, path, prepare=prepare)
    loop = QEventLoop()
    dialog.opened.connect(loop.quit)
    dialog.open_failed.connect(loop.quit)
    dialog.start()
    if not dialog.workspace and dialog.error is None:
        loop.exec()
    pool.shutdown()
    return dialog.workspace, dialog
