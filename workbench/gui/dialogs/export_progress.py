"""File → Export with progress and Cancel.

The export reads the chosen sessions on a reader thread and writes the file in one
atomic step at the end; the dialog reads the count on a timer (no signal per session)
and the progress callback returns False once Cancel was pressed, so a cancelled export
writes nothing: an existing file keeps its old content, a new one is never created.
"""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QProgressBar, QVBoxLayout, QWidget

from workbench.core.conversation import SessionInfo
from workbench.gui.context import AppContext

POLL_MS = 100


class ExportProgressDialog(QDialog):
    """Progress and Cancel for one export (see the module docstring)."""

    export_finished = Signal(object)  # the exported SessionInfos ([] when cancelled)
    export_failed = Signal(object)  # the exception

    def __init__(self, ctx: AppContext, session_ids: list[int], format: str, path: Path,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.session_ids = list(session_ids)
        self.format = format
        self.path = Path(path)
        self.exported: list[SessionInfo] | None = None
        self.error: BaseException | None = None
        self._read = 0
        self._cancel = threading.Event()
        self._running = False

        self.setWindowTitle("Export")
        self.setAccessibleName("Export progress")
        self.setMinimumWidth(440)
        self.label = QLabel(f"Exporting to {self.path.name}…", self)
        self.label.setWordWrap(True)
        self.label.setAccessibleName("Export status")
        self.bar = QProgressBar(self)
        self.bar.setRange(0, len(self.session_ids))
        self.bar.setAccessibleName("Export progress")
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel, self)
        self.buttons.rejected.connect(self.cancel)
        layout = QVBoxLayout(self)
        layout.addWidget(self.label)
        layout.addWidget(self.bar)
        layout.addWidget(self.buttons)
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._show_progress)

    @property
    def running(self) -> bool:
        return self._running

    def start(self) -> None:
        """Begin the export on a reader thread."""
        self._running = True
        self._timer.start()
        workspace, ids, fmt, path = self.ctx.workspace, self.session_ids, self.format, self.path
        self.ctx.workers.read(
            lambda: workspace.export_sessions(ids, fmt, path, progress=self._progress),
            name=f"export {path.name}", on_done=self._done, on_error=self._failed,
        )

    def _progress(self, read: int, _total: int | None) -> bool:
        # Runs on the reader thread: only plain values cross over.
        self._read = read
        return not self._cancel.is_set()

    def cancel(self) -> None:
        """Stop before the file is written; closes the dialog when not running."""
        if not self._running:
            self.reject()
            return
        self._cancel.set()
        self.label.setText("Stopping; nothing will be written…")
        self.buttons.setEnabled(False)

    def _show_progress(self) -> None:
        if self._running and not self._cancel.is_set():
            self.bar.setValue(self._read)
            self.label.setText(f"Exporting to {self.path.name}: "
                               f"{self._read:,} of {len(self.session_ids):,} sessions read…")

    def _finish(self) -> None:
        self._running = False
        self._timer.stop()
        self.buttons.setEnabled(True)
        self.buttons.setStandardButtons(QDialogButtonBox.StandardButton.Close)

    def _done(self, infos: list[SessionInfo]) -> None:
        self.exported = infos
        self._finish()
        if not infos:
            self.label.setText(f"Export cancelled; {self.path.name} was not written.")
        else:
            self.bar.setValue(self.bar.maximum())
            noun = "session" if len(infos) == 1 else "sessions"
            self.label.setText(f"Exported {len(infos):,} {noun} to {self.path}.")
        self.export_finished.emit(infos)

    def _failed(self, error: BaseException) -> None:
        from workbench.gui.errors import describe_error

        self.error = error
        self._finish()
        self.label.setText(describe_error(error, doing=f"export to {self.path.name}"))
        self.export_failed.emit(error)

    def reject(self) -> None:
        # Esc or the window's close button while running means Cancel, not "hide".
        if self._running:
            self.cancel()
            return
        super().reject()
