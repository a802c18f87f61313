"""File → Import: the import runs on the database writer while this dialog shows progress.

The engine calls the progress callback after each conversation it has read; the dialog
reads the count on a timer (no signal per conversation) and the callback returns False
once Cancel was pressed, so the import stops after the conversation in hand. Only whole
conversations are ever stored, so a cancelled import leaves no half session behind.
Token counts are filled after the import, in the background.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QDialogButtonBox, QPlainTextEdit, QPushButton, QWidget

from workbench.engine.workspace import ImportReport
from workbench.gui.context import AppContext
from workbench.gui.dialogs.job_progress import JobProgressDialog

SKIPPED_SHOWN = 5


def report_truncated(report: ImportReport) -> bool:
    """Whether :func:`report_text` leaves entries out (then "Show All" lists them)."""
    return len(report.notes) > SKIPPED_SHOWN or len(report.skipped) > SKIPPED_SHOWN


def report_text(report: ImportReport, *, limit: int | None = SKIPPED_SHOWN) -> str:
    """What an import did, in sentences; at most ``limit`` entries of each list (None:
    every one)."""
    counts = report.counts()
    created, known = counts["created"], counts["unchanged"]
    noun = "session" if created == 1 else "sessions"
    lines = [f"Imported {created:,} {noun}."]
    if counts["updated"]:
        lines.append(f"{counts['updated']:,} imported before got the turns added since.")
    if known:
        lines.append(f"{known:,} {'was' if known == 1 else 'were'} already in the workspace "
                     f"and left as {'it was' if known == 1 else 'they were'}.")
    if report.reused_ids:
        lines.append(f"{len(report.reused_ids):,} reuse the id of a different conversation "
                     "imported before and were imported as new sessions.")
    if report.cancelled:
        lines.append("The import was cancelled: the conversations read until then are stored "
                     "whole, nothing after them.")
    lines += _entry_lines("imported with changes",
                          [(note.entry, note.note) for note in report.notes], limit)
    lines += _entry_lines("skipped",
                          [(entry.entry, entry.reason) for entry in report.skipped], limit)
    return "\n".join(lines)


def _entry_lines(what: str, entries: list[tuple[str, str]], limit: int | None) -> list[str]:
    """"N entries were <what>:" and a bullet per entry (the first ``limit`` of them)."""
    if not entries:
        return []
    count = len(entries)
    lines = [f"{count:,} {'entry was' if count == 1 else 'entries were'} {what}:"]
    lines += [f"  • {entry}: {text}" for entry, text in entries[:limit]]
    if limit is not None and count > limit:
        lines.append(f"  … and {count - limit:,} more (Show All lists every one).")
    return lines


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


class ImportProgressDialog(JobProgressDialog):
    """Progress and Cancel for one import (see the module docstring)."""

    import_finished = Signal(object)  # the ImportReport (also when cancelled)
    import_failed = Signal(object)  # the exception
    stopping_text = "Stopping after the conversation in hand…"

    def __init__(self, ctx: AppContext, path: Path, *, format: str | None = None,
                 parent: QWidget | None = None) -> None:
        self.path = Path(path)
        super().__init__("Import", f"Reading {self.path.name}…", parent)
        self.ctx = ctx
        self.format = format
        self.report: ImportReport | None = None
        self.error: BaseException | None = None
        # The whole report, every entry, when the label had to leave some out.
        self.details = QPlainTextEdit(self)
        self.details.setReadOnly(True)
        self.details.setAccessibleName("Every entry of the import")
        self.details.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.details.setMinimumHeight(160)
        self.details.hide()
        self.layout().insertWidget(1, self.details, 1)
        self.show_all_button: QPushButton | None = None

    @property
    def conversations_read(self) -> int:
        return self._done_count

    def start(self) -> None:
        """Begin the import on the database writer."""
        self._begin()
        workspace, path, fmt = self.ctx.workspace, self.path, self.format
        self.ctx.workers.write(
            lambda: workspace.import_path(
                path, format=fmt, progress=self._progress, count_tokens=False
            ),
            name=f"import {path.name}", on_done=self._done, on_error=self._failed,
        )

    def show_progress(self, done: int, total: int | None) -> None:
        noun = "conversation" if done == 1 else "conversations"
        self.label.setText(f"Importing {self.path.name}: {done:,} {noun} read…")

    def _done(self, report: ImportReport) -> None:
        self.report = report
        self._finish()
        self.label.setText(report_text(report))
        if report_truncated(report):
            button = self.buttons.addButton("Show &All",
                                            QDialogButtonBox.ButtonRole.ActionRole)
            button.setAccessibleName("Show every entry")
            button.setToolTip("List every entry of the report, in a box that scrolls")
            button.clicked.connect(self.show_all_entries)
            self.show_all_button = button
        self.ctx.sessions_changed.emit()
        count_tokens_in_background(self.ctx)
        self.import_finished.emit(report)

    def show_all_entries(self) -> None:
        """Show the whole report (every entry) in a scrolling box instead of the label."""
        if self.report is None:
            return
        self.details.setPlainText(report_text(self.report, limit=None))
        self.label.hide()
        self.details.show()
        self.details.setFocus()
        if self.show_all_button is not None:
            self.show_all_button.hide()
        self.resize(max(self.width(), 560), max(self.height(), 420))

    def _failed(self, error: BaseException) -> None:
        from workbench.gui.errors import describe_error

        self.error = error
        self._finish(failed=True)
        self.label.setText(describe_error(error, doing=f"import {self.path.name}"))
        self.ctx.sessions_changed.emit()
        self.import_failed.emit(error)
