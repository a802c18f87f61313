"""File → Import: the import runs on the database writer while this dialog shows progress.

The engine calls the progress callback after each conversation it has read; the dialog
reads the count on a timer (no signal per conversation) and the callback returns False
once Cancel was pressed, so the import stops after the conversation in hand. Only whole
conversations are ever stored, so a cancelled import leaves no half session behind.
Token counts are filled after the import, in the background.
"""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QProgressBar,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.workspace import ImportReport
from workbench.gui.context import AppContext

POLL_MS = 100
SKIPPED_SHOWN = 5


def report_text(report: ImportReport) -> str:
    """What an import did, in sentences."""
    created = sum(1 for _info, new in report.sessions if new)
    known = len(report.sessions) - created
    noun = "session" if created == 1 else "sessions"
    lines = [f"Imported {created:,} {noun}."]
    if known:
        lines.append(f"{known:,} {'was' if known == 1 else 'were'} already in the workspace "
                     "and left as they were.")
    if report.cancelled:
        lines.append("The import was cancelled: the conversations read until then are stored "
                     "whole, nothing after them.")
    if report.skipped:
        lines.append(f"{len(report.skipped):,} entries were skipped:")
        for entry in report.skipped[:SKIPPED_SHOWN]:
            lines.append(f"  • {entry.entry}: {entry.reason}")
        if len(report.skipped) > SKIPPED_SHOWN:
            lines.append(f"  … and {len(report.skipped) - SKIPPED_SHOWN:,} more.")
    return "\n".join(lines)


def count_tokens_in_background(ctx: AppContext) -> None:
    """Fill the token counts an import left out (the import stores messages first, so
    they can be read and searched at once; see ``workbench.engine.importing``).

    One short job per transaction on a reader thread, each starting the next, so that
    the window never waits long for the pass (closing, switching databases). The
    session list is read again when the counts are complete.
    """
    workspace = ctx.workspace
    steps = workspace.count_missing_tokens()

    def step() -> tuple[int, int] | None:
        return next(steps, None)

    def stepped(result: tuple[int, int] | None) -> None:
        if ctx.workspace is not workspace:
            return  # another database was opened; the next import counts the rest
        if result is None:
            ctx.sessions_changed.emit()
            return
        ctx.workers.read(step, name="count tokens", on_done=stepped)

    ctx.workers.read(step, name="count tokens", on_done=stepped)


class ImportProgressDialog(QDialog):
    """Progress and Cancel for one import (see the module docstring)."""

    import_finished = Signal(object)  # the ImportReport (also when cancelled)
    import_failed = Signal(object)  # the exception

    def __init__(self, ctx: AppContext, path: Path, *, format: str | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.path = Path(path)
        self.format = format
        self.report: ImportReport | None = None
        self.error: BaseException | None = None
        self._read = 0
        self._cancel = threading.Event()
        self._running = False

        self.setWindowTitle("Import")
        self.setAccessibleName("Import progress")
        self.setMinimumWidth(440)
        self.label = QLabel(f"Reading {self.path.name}…", self)
        self.label.setWordWrap(True)
        self.label.setAccessibleName("Import status")
        self.bar = QProgressBar(self)
        self.bar.setRange(0, 0)  # the total is not known while reading
        self.bar.setAccessibleName("Import progress")
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

    @property
    def conversations_read(self) -> int:
        return self._read

    def start(self) -> None:
        """Begin the import on the database writer."""
        self._running = True
        self._timer.start()
        workspace, path, fmt = self.ctx.workspace, self.path, self.format
        self.ctx.workers.write(
            lambda: workspace.import_path(
                path, format=fmt, progress=self._progress, count_tokens=False
            ),
            name=f"import {path.name}", on_done=self._done, on_error=self._failed,
        )

    def _progress(self, read: int, _total: int | None) -> bool:
        # Runs on the writer thread: only plain values cross over.
        self._read = read
        return not self._cancel.is_set()

    def cancel(self) -> None:
        """Stop after the conversation being read; closes the dialog when done."""
        if not self._running:
            self.reject()
            return
        self._cancel.set()
        self.label.setText("Stopping after the conversation in hand…")
        self.buttons.setEnabled(False)

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    def _show_progress(self) -> None:
        if self._running and not self._cancel.is_set():
            noun = "conversation" if self._read == 1 else "conversations"
            self.label.setText(f"Importing {self.path.name}: {self._read:,} {noun} read…")

    def _finish(self) -> None:
        self._running = False
        self._timer.stop()
        self.bar.setRange(0, 1)
        self.bar.setValue(1)
        self.buttons.setEnabled(True)
        # Close has the reject role: it reaches cancel(), which closes once not running.
        self.buttons.setStandardButtons(QDialogButtonBox.StandardButton.Close)

    def _done(self, report: ImportReport) -> None:
        self.report = report
        self._finish()
        self.label.setText(report_text(report))
        self.ctx.sessions_changed.emit()
        count_tokens_in_background(self.ctx)
        self.import_finished.emit(report)

    def _failed(self, error: BaseException) -> None:
        from workbench.gui.errors import describe_error

        self.error = error
        self._finish()
        self.label.setText(describe_error(error, doing=f"import {self.path.name}"))
        self.ctx.sessions_changed.emit()
        self.import_failed.emit(error)

    def reject(self) -> None:
        # Esc or the window's close button while running means Cancel, not "hide".
        if self._running:
            self.cancel()
            return
        super().reject()
