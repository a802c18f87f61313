"""Following changes other processes make to the open database (SPEC §9: every view
follows the database, also after a change made by the CLI or another window).

A timer asks the engine's :class:`~workbench.engine.watch.ChangeWatch` about once a
second; the question is one ``PRAGMA`` on a kept connection, cheap enough for the UI
thread. When another writer changed the database, the session list is read again, and
the open session (timeline, context, compaction history) when its mark changed.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal

from workbench.engine.watch import ChangeWatch, SessionMark, session_mark
from workbench.errors import WorkbenchError
from workbench.gui.context import AppContext

POLL_MS = 1000


class DatabaseWatcher(QObject):
    """Polls for outside changes while the window is open."""

    outside_change_seen = Signal(bool)  # True when the open session was read again

    def __init__(self, ctx: AppContext, busy: Callable[[], bool],
                 parent: QObject | None = None, interval_ms: int = POLL_MS) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self._busy = busy  # the window's own work that a reload would disturb
        self._watch: ChangeWatch | None = None
        self._mark: tuple[int, SessionMark | None] | None = None
        self.timer = QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.poll)
        ctx.workspace_replaced.connect(self._restart)
        self._restart()
        self.timer.start()

    def _restart(self) -> None:
        try:
            self._watch = ChangeWatch(self.ctx.workspace)
        except WorkbenchError:
            self._watch = None
        self._mark = None

    def _open_mark(self) -> tuple[int, SessionMark | None]:
        session_id = self.ctx.current_session_id
        return session_id, (session_mark(self.ctx.workspace, session_id) if session_id
                            else None)

    def poll(self) -> None:
        """One look at the database (the timer's tick)."""
        watch = self._watch
        if watch is None:
            return
        quiet = self.ctx.workers.idle and not self._busy()
        try:
            changed = watch.poll(quiet=quiet)
            if not changed:
                if watch.wrote or self._mark is None or \
                        self._mark[0] != self.ctx.current_session_id:
                    # What the database holds now is the window's own doing (or what
                    # it opened): the state to compare outside changes with.
                    self._mark = self._open_mark()
                return
            mark = self._open_mark()
        except WorkbenchError:
            return  # the database is busy or gone for a moment: ask again next tick
        # Read the open session again unless it is known to be as the window shows it.
        reread = bool(mark[0]) and mark != self._mark
        self._mark = mark
        self.ctx.sessions_changed.emit()
        if reread:
            self.ctx.session_reloaded.emit(mark[0])
            self.ctx.context_changed.emit(mark[0])
        self.outside_change_seen.emit(reread)
