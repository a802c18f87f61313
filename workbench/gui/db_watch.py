"""Following changes other processes make to the open database (SPEC §9: every view
follows the database, also after a change made by the CLI or another window; SPEC §10:
on the team store, another desktop's change shows within a second).

A timer asks the engine's :class:`~workbench.engine.watch.ChangeWatch` about once a
second on a SQLite file (the question is one ``PRAGMA`` on a kept connection, cheap
enough for the UI thread) and every ``TEAM_POLL_MS`` on the team store, where it reads
a counter the listener thread keeps: nothing on the UI thread waits on the network for
it. When another writer changed the database, the session list is read again, and the
open session (timeline, context, compaction history) when its mark (message count, last
change) moved; on the team store only when the other desktop named it, the mark then
read on a worker.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal

from workbench.engine.watch import (
    ChangeWatch,
    OutsideChange,
    SessionMark,
    provider_setup,
    session_mark,
)
from workbench.errors import WorkbenchError
from workbench.gui.context import AppContext

POLL_MS = 1000
TEAM_POLL_MS = 250  # the team store: a change shows in the other windows within 1 s


class DatabaseWatcher(QObject):
    """Polls for outside changes while the window is open."""

    outside_change_seen = Signal(bool)  # True when the open session was read again
    # Why other desktops are not heard right now ("" once they are heard again)
    hearing_changed = Signal(str)

    def __init__(self, ctx: AppContext, busy: Callable[[], bool],
                 parent: QObject | None = None, interval_ms: int | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self._busy = busy  # the window's own work that a reload would disturb
        self._interval_ms = interval_ms  # None: chosen by the kind of database
        self._watch: ChangeWatch | None = None
        self._mark: tuple[int, SessionMark | None] | None = None
        self._problem: str | None = None  # the listener's last trouble, said once
        # The providers and agents as last read: another writer's change that names no
        # session may have changed them (the composer's list then follows).
        self._setup: object = None
        self.timer = QTimer(self)
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
        self._problem = None
        self._setup = None
        self._read_setup(announce=False)
        default = POLL_MS if self.ctx.workspace.is_file else TEAM_POLL_MS
        self.timer.setInterval(self._interval_ms or default)

    @property
    def seen_mark(self) -> tuple[int, SessionMark | None] | None:
        """The open session and its mark as this window last read them (None before the
        first look): what an outside change is compared with."""
        return self._mark

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
            if watch.others_only:
                self._say_problem(watch.listen_problem)
                if changed:
                    self._heard(watch.change)
                return
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
        self._read_setup()
        self._report(reread)

    def _heard(self, change: OutsideChange) -> None:
        """Another desktop changed the team store (it never reports this window's own
        writes): the list is read again, and the open session when the change named it
        and its mark moved. The mark is read on a worker, not on the UI thread. A write
        that leaves the mark as it was (token counts kept by a window that measured
        the request in another encoding) does not reread the session: the windows
        would otherwise set each other measuring and writing in turn."""
        if change.everything or not change.sessions:
            self._read_setup()
        session_id = self.ctx.current_session_id
        if not session_id or not change.touches(session_id):
            self._report(False)
            return

        def compared(mark: SessionMark | None) -> None:
            if self.ctx.current_session_id != session_id:
                self._report(False)  # another session is open now: it was read whole
                return
            seen = (session_id, mark)
            reread, self._mark = seen != self._mark, seen
            self._report(reread)

        self.ctx.workers.read(session_mark, self.ctx.workspace, session_id,
                              name="compare the open session", key=(self, "mark"),
                              on_done=compared, on_error=lambda _error: self._report(False))

    def _read_setup(self, *, announce: bool = True) -> None:
        """Read the providers and agents on a worker; when they differ from what was
        read before, tell the window (``providers_changed``): its provider list follows
        a provider another desktop added, changed or removed."""
        workspace = self.ctx.workspace

        def compared(setup: object) -> None:
            if workspace is not self.ctx.workspace:
                return  # another database is open now: it was read whole
            changed, self._setup = setup != self._setup, setup
            if changed and announce:
                self.ctx.providers_changed.emit()

        self.ctx.workers.read(provider_setup, workspace, name="compare the providers",
                              key=(self, "providers"), on_done=compared,
                              on_error=lambda _error: None)

    def _say_problem(self, problem: str | None) -> None:
        """Tell once when other desktops' changes stop being heard, and when they are
        heard again."""
        if problem == self._problem:
            return
        if problem:
            self.ctx.status_reported.emit(
                f"Changes from other desktops are not heard right now ({problem}); "
                "the workbench keeps trying and catches up once it hears them again.")
        elif self._problem:
            self.ctx.status_reported.emit("Changes from other desktops are heard again.")
        self._problem = problem
        self.hearing_changed.emit(problem or "")

    def _report(self, reread: bool) -> None:
        session_id = self.ctx.current_session_id
        reread = reread and bool(session_id)
        self.ctx.sessions_changed.emit()
        if reread:
            self.ctx.session_reloaded.emit(session_id)
            self.ctx.context_changed.emit(session_id)
        self.outside_change_seen.emit(reread)
