"""Running engine calls off the UI thread, with results handed back by signal.

Three lanes, chosen by what a call touches:

* ``write``: ONE thread, so changes to the database happen one after another in the
  order they were asked for (an undo never overtakes the edit it undoes);
* ``read``: a few threads for reads that may take long (search, a session's index,
  exports);
* ``network``: threads for provider calls, which spend their time waiting.

Each call returns a :class:`Job`. Its callbacks (``on_done``, ``on_error``) and signals
run on the UI thread: the worker thread only emits a queued signal, so the callbacks
may touch widgets. A generator function can be run with :meth:`WorkerPool.stream`: each
yielded value arrives through ``on_item`` while the generator keeps running, and
:meth:`Job.cancel` asks it to stop (it sees ``job.cancelled`` and should return).
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from PySide6.QtCore import QCoreApplication, QEventLoop, QObject, Signal

Callback = Callable[[Any], None]


class Job(QObject):
    """One call running (or waiting to run) in a worker thread."""

    finished = Signal(object)  # the function's result, on the UI thread
    failed = Signal(object)  # the exception it raised, on the UI thread
    item_yielded = Signal(object)  # a value a streaming call yielded, on the UI thread

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None
        self._cancel = threading.Event()

    def cancel(self) -> None:
        """Ask the call to stop; a streaming call stops at its next item."""
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @property
    def cancel_event(self) -> threading.Event:
        """The event a long call may watch to stop early."""
        return self._cancel


class _Relay(QObject):
    """Carries results from worker threads to the UI thread (queued connection)."""

    delivered = Signal(object, str, object)  # job, "done" | "error" | "item", value


class WorkerPool(QObject):
    """The application's worker threads (see the module docstring for the lanes)."""

    error_reported = Signal(str, object)  # job name, exception: for jobs without on_error
    busy_changed = Signal(bool)

    def __init__(self, parent: QObject | None = None, *, read_threads: int = 2,
                 network_threads: int = 4) -> None:
        super().__init__(parent)
        self._lanes = {
            "write": ThreadPoolExecutor(1, thread_name_prefix="workbench-write"),
            "read": ThreadPoolExecutor(read_threads, thread_name_prefix="workbench-read"),
            "network": ThreadPoolExecutor(network_threads, thread_name_prefix="workbench-net"),
        }
        self._relay = _Relay()
        self._relay.delivered.connect(self._deliver)
        self._jobs: set[Job] = set()
        self._callbacks: dict[Job, tuple[Callback | None, Callback | None, Callback | None]] = {}
        self._closed = False

    # -- submitting --------------------------------------------------------------------

    def write(self, fn: Callable[..., Any], *args: Any, name: str = "",
              on_done: Callback | None = None, on_error: Callback | None = None,
              **kwargs: Any) -> Job:
        """Run a database change on the one writer thread."""
        return self._submit("write", fn, args, kwargs, name, on_done, on_error, None)

    def read(self, fn: Callable[..., Any], *args: Any, name: str = "",
             on_done: Callback | None = None, on_error: Callback | None = None,
             **kwargs: Any) -> Job:
        """Run a long read (search, index, export) on a reader thread."""
        return self._submit("read", fn, args, kwargs, name, on_done, on_error, None)

    def network(self, fn: Callable[..., Any], *args: Any, name: str = "",
                on_done: Callback | None = None, on_error: Callback | None = None,
                **kwargs: Any) -> Job:
        """Run a provider call on a network thread."""
        return self._submit("network", fn, args, kwargs, name, on_done, on_error, None)

    def stream(self, fn: Callable[[Job], Iterator[Any]], *, lane: str = "network",
               name: str = "", on_item: Callback | None = None,
               on_done: Callback | None = None, on_error: Callback | None = None) -> Job:
        """Run a generator ``fn(job)``; each yielded value reaches ``on_item``.

        The generator's return value reaches ``on_done``. It is stopped between items
        once :meth:`Job.cancel` is called (``on_done`` then gets ``None``).
        """
        return self._submit(lane, fn, (), {}, name, on_done, on_error, on_item, streaming=True)

    def _submit(self, lane: str, fn: Callable[..., Any], args: tuple[Any, ...],
                kwargs: dict[str, Any], name: str, on_done: Callback | None,
                on_error: Callback | None, on_item: Callback | None,
                streaming: bool = False) -> Job:
        job = Job(name or getattr(fn, "__name__", "job"))
        if self._closed:
            # A timer that fires while the window closes: the work is no longer wanted.
            job.cancel()
            job.done = True
            return job
        was_idle = not self._jobs
        self._jobs.add(job)
        self._callbacks[job] = (on_done, on_error, on_item)
        if streaming:
            self._lanes[lane].submit(self._run_stream, job, fn)
        else:
            self._lanes[lane].submit(self._run, job, fn, args, kwargs)
        if was_idle:
            self.busy_changed.emit(True)
        return job

    # -- in the worker thread ------------------------------------------------------------

    def _run(self, job: Job, fn: Callable[..., Any], args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> None:
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:  # every failure must reach the UI as a sentence
            exc.__traceback_text__ = traceback.format_exc()  # type: ignore[attr-defined]
            self._relay.delivered.emit(job, "error", exc)
            return
        self._relay.delivered.emit(job, "done", result)

    def _run_stream(self, job: Job, fn: Callable[[Job], Iterator[Any]]) -> None:
        try:
            generator = fn(job)
            result = None
            while True:
                if job.cancelled:
                    generator.close()
                    break
                try:
                    item = next(generator)
                except StopIteration as stop:
                    result = stop.value
                    break
                self._relay.delivered.emit(job, "item", item)
        except Exception as exc:  # every failure must reach the UI as a sentence
            exc.__traceback_text__ = traceback.format_exc()  # type: ignore[attr-defined]
            self._relay.delivered.emit(job, "error", exc)
            return
        self._relay.delivered.emit(job, "done", result)

    # -- on the UI thread ----------------------------------------------------------------

    def _deliver(self, job: Job, kind: str, value: Any) -> None:
        on_done, on_error, on_item = self._callbacks.get(job, (None, None, None))
        if kind == "item":
            if on_item is not None:
                on_item(value)
            job.item_yielded.emit(value)
            return
        job.done = True
        try:
            if kind == "done":
                job.result = value
                if on_done is not None:
                    on_done(value)
                job.finished.emit(value)
            else:
                job.error = value
                if on_error is not None:
                    on_error(value)
                else:
                    self.error_reported.emit(job.name, value)
                job.failed.emit(value)
        finally:
            self._jobs.discard(job)
            self._callbacks.pop(job, None)
            if not self._jobs:
                self.busy_changed.emit(False)

    # -- state -------------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Jobs submitted whose result has not yet been delivered."""
        return len(self._jobs)

    @property
    def idle(self) -> bool:
        return not self._jobs

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Process events until every job is delivered (for shutdown and tests)."""
        deadline = time.monotonic() + timeout
        app = QCoreApplication.instance()
        while self._jobs and time.monotonic() < deadline:
            if app is not None:
                app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 20)
            time.sleep(0.002)
        return not self._jobs

    def cancel_all(self) -> None:
        """Ask every running job to stop."""
        for job in list(self._jobs):
            job.cancel()

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop taking jobs, cancel streaming ones and wait for the rest to finish."""
        if self._closed:
            return
        self.cancel_all()
        self.wait_idle(timeout)
        self._closed = True
        for executor in self._lanes.values():
            executor.shutdown(wait=True, cancel_futures=True)
