"""File → Export with progress and Cancel.

The export reads the chosen sessions on a reader thread and writes the file in one
atomic step at the end; the dialog reads the count on a timer (no signal per session)
and the progress callback returns False once Cancel was pressed, so a cancelled export
writes nothing: an existing file keeps its old content, a new one is never created.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QWidget

from workbench.core.conversation import SessionInfo
from workbench.gui.context import AppContext
from workbench.gui.dialogs.job_progress import JobProgressDialog


class ExportProgressDialog(JobProgressDialog):
    """Progress and Cancel for one export (see the module docstring)."""

    export_finished = Signal(object)  # the exported SessionInfos ([] when cancelled)
    export_failed = Signal(object)  # the exception
    stopping_text = "Stopping; nothing will be written…"

    def __init__(self, ctx: AppContext, session_ids: list[int], format: str, path: Path,
                 parent: QWidget | None = None) -> None:
        self.path = Path(path)
        super().__init__("Export", f"Exporting to {self.path.name}…", parent)
        self.ctx = ctx
        self.session_ids = list(session_ids)
        self.format = format
        self.exported: list[SessionInfo] | None = None
        self.error: BaseException | None = None
        self.notes: list[str] = []  # what the format could not hold, filled by the export
        self.bar.setRange(0, len(self.session_ids))

    def start(self) -> None:
        """Begin the export on a reader thread."""
        self._begin()
        workspace, ids, fmt, path = self.ctx.workspace, self.session_ids, self.format, self.path
        self.ctx.workers.read(
            lambda: workspace.export_sessions(ids, fmt, path, progress=self._progress,
                                              notes=self.notes),
            name=f"export {path.name}", on_done=self._done, on_error=self._failed,
        )

    def show_progress(self, done: int, total: int | None) -> None:
        total = len(self.session_ids)
        noun = "session" if total == 1 else "sessions"
        self.label.setText(f"Exporting to {self.path.name}: {done:,} of {total:,} {noun} read…")

    def _done(self, infos: list[SessionInfo]) -> None:
        self.exported = infos
        self._finish()
        if not infos:
            self.label.setText(f"Export cancelled; {self.path.name} was not written.")
        else:
            noun = "session" if len(infos) == 1 else "sessions"
            lines = [f"Exported {len(infos):,} {noun} to {self.path}."]
            if self.notes:
                lines.append(f"{self.format} could not hold:")
                lines.extend(f"  • {note}" for note in self.notes)
            self.label.setText("\n".join(lines))
        self.export_finished.emit(infos)

    def _failed(self, error: BaseException) -> None:
        from workbench.gui.errors import describe_error

        self.error = error
        self._finish(failed=True)
        self.label.setText(describe_error(error, doing=f"export to {self.path.name}"))
        self.export_failed.emit(error)
