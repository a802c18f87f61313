"""A dialog for one long job with progress and Cancel (import, export).

The job runs on a worker and calls a progress callback on that thread; the callback
only stores the count (plain values cross threads) and answers False once Cancel was
pressed. The dialog reads the count on a timer rather than a signal per step. While the
job runs, Esc and the window's close button mean Cancel; afterwards the button reads
Close and has the keyboard (Enter closes the report). The dialog grows to show the whole
of what its label says (a report, an error), and a failed job's bar says so rather than
showing a full bar.
"""

from __future__ import annotations

import threading

from PySide6.QtCore import QEvent, Qt, QTimer
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QDialogButtonBox,
    QLabel,
    QProgressBar,
    QVBoxLayout,
    QWidget,
)

POLL_MS = 100


class JobProgressDialog(QDialog):
    """Label, bar and Cancel/Close around a job that subclasses start."""

    #: What the label says once Cancel was pressed.
    stopping_text = "Stopping…"

    def __init__(self, title: str, status: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._done_count = 0
        self._total: int | None = None
        self._cancel = threading.Event()
        self._running = False
        self.setWindowTitle(title)
        self.setAccessibleName(f"{title} progress")
        self.setMinimumWidth(440)
        self.label = QLabel(status, self)
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.PlainText)  # file names are data
        self.label.setAccessibleName(f"{title} status")
        self.bar = QProgressBar(self)
        self.bar.setRange(0, 0)  # busy until a total is known
        self.bar.setAccessibleName(f"{title} progress")
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel, self)
        self.buttons.rejected.connect(self.cancel)
        layout = QVBoxLayout(self)
        layout.addWidget(self.label)
        layout.addWidget(self.bar)
        layout.addWidget(self.buttons)
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._tick)

    @property
    def running(self) -> bool:
        return self._running

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    def _begin(self) -> None:
        """Call when the job has been handed to a worker."""
        self._running = True
        self._timer.start()

    def _progress(self, done: int, total: int | None) -> bool:
        # Runs on the worker thread: only plain values cross over.
        self._done_count = done
        self._total = total
        return not self._cancel.is_set()

    def _tick(self) -> None:
        if self._running and not self._cancel.is_set():
            if self._total:
                self.bar.setRange(0, self._total)
                self.bar.setValue(self._done_count)
            self.show_progress(self._done_count, self._total)

    def show_progress(self, done: int, total: int | None) -> None:
        """Say how far the job is (on the UI thread, on the timer)."""

    def cancel(self) -> None:
        """Ask the job to stop at its next step; closes the dialog when not running."""
        if not self._running:
            self.reject()
            return
        self._cancel.set()
        self.label.setText(self.stopping_text)
        self.buttons.setEnabled(False)

    def _finish(self, *, failed: bool = False) -> None:
        """Call when the job ended (done, failed or cancelled)."""
        self._running = False
        self._timer.stop()
        if self.bar.maximum() == 0:
            self.bar.setRange(0, 1)
        if failed:
            self.bar.setValue(self.bar.minimum())
            self.bar.setFormat("Failed")
        elif not self._cancel.is_set():
            self.bar.setValue(self.bar.maximum())
        self.buttons.setEnabled(True)
        # Close has the reject role: it reaches cancel(), which closes once not running.
        had_focus = self.isAncestorOf(QApplication.focusWidget()) or self.isActiveWindow()
        self.buttons.setStandardButtons(QDialogButtonBox.StandardButton.Close)
        # The new button takes the place, the default and the keyboard of the old one, so
        # Enter, Space or Esc closes the report (the old button's focus went with it).
        close = self.buttons.button(QDialogButtonBox.StandardButton.Close)
        close.setDefault(True)
        if had_focus:
            close.setFocus(Qt.FocusReason.OtherFocusReason)

    def event(self, event: QEvent) -> bool:
        handled = super().event(event)
        if event.type() == QEvent.Type.LayoutRequest and self.layout() is not None:
            # The label's text changed: as tall as the wrapped text needs, never cut.
            needed = self.layout().totalHeightForWidth(self.width())
            if needed > self.height():
                self.resize(self.width(), needed)
        return handled

    def reject(self) -> None:
        # Esc or the window's close button while running means Cancel, not "hide".
        if self._running:
            self.cancel()
            return
        super().reject()
