"""Running engine calls off the UI thread, with results handed back on it.

Three lanes, chosen by what a call touches:

* ``write``: ONE thread, so changes to the database happen one after another in the
  order they were asked for (an undo never overtakes the edit it undoes);
* ``read``: a few threads for reads that may take long (search, a session's index,
  exports);
* ``network``: threads for provider calls, which spend their time waiting.

Each call returns a :class:`Job`. How it ends is handled in one place, the pool's
delivery on the UI thread: ``on_done`` gets the result, ``on_error`` the exception
(without one, :attr:`WorkerPool.error_reported` says it), so the callbacks may touch
widgets. A job that was **cancelled** delivers nothing: neither its result nor its error
reaches a callback or a signal, however late it comes back (the pattern of Anki's
``QueryOp``: the one who asked no longer wants the answer). A read or network call
cancelled before a thread took it does not run at all.

Stale answers: a job submitted with a ``key`` (any hashable, by convention
``(owner, "what")``, e.g. ``key=(self, "preview")``) cancels the previous job with that
key, so only the newest one's callbacks run. Jobs with one key also run one at a time
on the read and network lanes: a new one waits until the cancelled one has returned,
and one still waiting when a newer one comes is dropped without running. On the write
lane every submitted change runs (a change asked for is never lost); only the callbacks
of a superseded one are dropped. A call that can stop early takes ``on_stop``, which is
called on the UI thread when its job is cancelled, superseded or stopped (a
``CancelToken``'s ``cancel``, an ``Event``'s ``set``).

A generator function can be run with :meth:`WorkerPool.stream`: each yielded value
arrives through ``on_item`` while the generator keeps running. :meth:`Job.stop` asks it
to stop between two items and still reports how it ended (see :meth:`WorkerPool.stream`);
:meth:`Job.cancel` stops it and drops everything it would still deliver.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from PySide6.QtCore import QCoreApplication, QEventLoop, QObject, Signal

Callback = Callable[[Any], None]


def _failure(exc: BaseException) -> Exception:
    """What a job that raised ``exc`` delivers, with its traceback's text attached.

    A failure that is not an ``Exception`` (a native library's panic, such as tiktoken's
    ``PanicException``) is delivered too, as a ``RuntimeError`` naming it: otherwise the
    job would never finish, and its panel would wait for it for ever."""
    text = traceback.format_exc()
    if not isinstance(exc, Exception):
        wrapped = RuntimeError(f"{type(exc).__name__}: {exc}")
        wrapped.__cause__ = exc
        exc = wrapped
    exc.__traceback_text__ = text  # type: ignore[attr-defined]
    return exc


class Job(QObject):
    """One call running (or waiting to run) in a worker thread."""

    finished = Signal(object)  # the function's result, on the UI thread
    failed = Signal(object)  # the exception it raised, on the UI thread
    item_yielded = Signal(object)  # a value a streaming call yielded, on the UI thread

    def __init__(self, name: str, key: Hashable | None = None,
                 on_stop: Callable[[], Any] | None = None) -> None:
        super().__init__()
        self.name = name
        self.key = key
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._cancelled = False
        self._on_stop = on_stop

    def stop(self) -> None:
        """Ask the call to stop (a stream at its next item, a call through ``on_stop``);
        how it ended is still delivered."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._on_stop is not None:
            self._on_stop()

    def cancel(self) -> None:
        """Stop the call and drop whatever it delivers from now on (result, error, items)."""
        self._cancelled = True
        self.stop()

    @property
    def cancelled(self) -> bool:
        """Whether the job was cancelled or superseded: nothing of it is delivered."""
        return self._cancelled

    @property
    def cancel_event(self) -> threading.Event:
        """The event a long call may watch to stop early (set by stop and cancel)."""
        return self._stop


@dataclass
class _Task:
    """What a job runs and who hears of it (kept by the pool until it is delivered)."""

    lane: str
    run: Callable[[], None]
    on_done: Callback | None = None
    on_error: Callback | None = None
    on_item: Callback | None = None


@dataclass
class _KeyState:
    """The jobs of one key: those in a thread and the one waiting for them to return."""

    running: set[Job] = field(default_factory=set)
    waiting: Job | None = None
    newest: Job | None = None


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
        self._jobs: dict[Job, _Task] = {}  # submitted, not yet delivered
        self._keys: dict[Hashable, _KeyState] = {}
        self._closed = False

    # -- submitting --------------------------------------------------------------------

    def write(self, fn: Callable[..., Any], *args: Any, name: str = "",
              on_done: Callback | None = None, on_error: Callback | None = None,
              key: Hashable | None = None, on_stop: Callable[[], Any] | None = None,
              **kwargs: Any) -> Job:
        """Run a database change on the one writer thread."""
        return self._submit("write", fn, args, kwargs, name, key, on_stop, on_done, on_error)

    def read(self, fn: Callable[..., Any], *args: Any, name: str = "",
             on_done: Callback | None = None, on_error: Callback | None = None,
             key: Hashable | None = None, on_stop: Callable[[], Any] | None = None,
             **kwargs: Any) -> Job:
        """Run a long read (search, index, export) on a reader thread."""
        return self._submit("read", fn, args, kwargs, name, key, on_stop, on_done, on_error)

    def network(self, fn: Callable[..., Any], *args: Any, name: str = "",
                on_done: Callback | None = None, on_error: Callback | None = None,
                key: Hashable | None = None, on_stop: Callable[[], Any] | None = None,
                **kwargs: Any) -> Job:
        """Run a provider call on a network thread."""
        return self._submit("network", fn, args, kwargs, name, key, on_stop, on_done, on_error)

    def stream(self, fn: Callable[[Job], Iterator[Any]], *, lane: str = "network",
               name: str = "", on_item: Callback | None = None,
               on_done: Callback | None = None, on_error: Callback | None = None,
               key: Hashable | None = None, on_stop: Callable[[], Any] | None = None) -> Job:
        """Run a generator ``fn(job)``; each yielded value reaches ``on_item``.

        ``on_done`` gets the generator's return value. After :meth:`Job.stop` the
        generator is closed before its next item and ``on_done`` gets ``None`` (or the
        return value, when it ended first), so the owner learns how the stream ended.
        After :meth:`Job.cancel` (or a newer job with its ``key``) nothing more arrives:
        no item, no ``on_done``, no ``on_error``.
        """
        return self._submit(lane, fn, None, {}, name, key, on_stop, on_done, on_error,
                            on_item)

    def _submit(self, lane: str, fn: Callable[..., Any], args: tuple[Any, ...] | None,
                kwargs: dict[str, Any], name: str, key: Hashable | None,
                on_stop: Callable[[], Any] | None, on_done: Callback | None,
                on_error: Callback | None, on_item: Callback | None = None) -> Job:
        """``args`` None: ``fn`` is a generator function run as a stream."""
        job = Job(name or getattr(fn, "__name__", "job"), key, on_stop)
        if self._closed:
            # A timer that fires while the window closes: the work is no longer wanted.
            job.cancel()
            job.done = True
            return job
        if args is None:
            run = partial(self._run_stream, job, fn)
        else:  # a change asked for always runs, even cancelled (see the module doc)
            run = partial(self._run, job, fn, args, kwargs, skip_if_cancelled=lane != "write")
        was_idle = not self._jobs
        self._jobs[job] = _Task(lane, run, on_done, on_error, on_item)
        if key is None:
            self._start(job)
        else:
            state = self._keys.setdefault(key, _KeyState())
            if state.newest is not None:
                state.newest.cancel()
            state.newest = job
            if lane == "write" or not state.running:
                self._start(job)
            else:  # it waits for the cancelled one to return; an older waiting one goes
                if state.waiting is not None:
                    self._finish(state.waiting)
                state.waiting = job
        if was_idle:
            self.busy_changed.emit(True)
        return job

    def _start(self, job: Job) -> None:
        task = self._jobs[job]
        if job.key is not None:
            self._keys[job.key].running.add(job)
        self._lanes[task.lane].submit(task.run)

    def cancel(self, key: Hashable) -> None:
        """Cancel the newest job with ``key`` (when there is one): nothing of it arrives."""
        state = self._keys.get(key)
        if state is not None and state.newest is not None:
            state.newest.cancel()

    # -- in the worker thread ------------------------------------------------------------

    def _run(self, job: Job, fn: Callable[..., Any], args: tuple[Any, ...],
             kwargs: dict[str, Any], *, skip_if_cancelled: bool) -> None:
        if skip_if_cancelled and job.cancelled:  # cancelled before it started
            self._relay.delivered.emit(job, "done", None)
            return
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - every failure must reach the UI
            self._relay.delivered.emit(job, "error", _failure(exc))
            return
        self._relay.delivered.emit(job, "done", result)

    def _run_stream(self, job: Job, fn: Callable[[Job], Iterator[Any]]) -> None:
        try:
            generator = fn(job)
            result = None
            while True:
                if job.cancel_event.is_set():
                    generator.close()
                    break
                try:
                    item = next(generator)
                except StopIteration as stop:
                    result = stop.value
                    break
                self._relay.delivered.emit(job, "item", item)
        except BaseException as exc:  # noqa: BLE001 - every failure must reach the UI
            self._relay.delivered.emit(job, "error", _failure(exc))
            return
        self._relay.delivered.emit(job, "done", result)

    # -- on the UI thread ----------------------------------------------------------------

    def _deliver(self, job: Job, kind: str, value: Any) -> None:
        """The one place where a job's success or failure reaches its owner."""
        task = self._jobs.get(job)
        if task is None:
            return
        if kind == "item":
            if not job.cancelled:
                if task.on_item is not None:
                    task.on_item(value)
                job.item_yielded.emit(value)
            return
        del self._jobs[job]  # no longer pending: a callback may wait for the others
        try:
            if job.cancelled:
                pass  # cancelled or superseded: nobody wants the answer
            elif kind == "done":
                job.result = value
                if task.on_done is not None:
                    task.on_done(value)
                job.finished.emit(value)
            else:
                job.error = value
                if task.on_error is not None:
                    task.on_error(value)
                else:
                    self.error_reported.emit(job.name, value)
                job.failed.emit(value)
        finally:
            self._finish(job)

    def _finish(self, job: Job) -> None:
        """Forget a delivered (or dropped) job; start the job its key held back."""
        job.done = True
        self._jobs.pop(job, None)
        state = self._keys.get(job.key) if job.key is not None else None
        if state is not None:
            state.running.discard(job)
            if state.newest is job:
                state.newest = None
            if not state.running and state.waiting is not None:
                waiting, state.waiting = state.waiting, None
                if waiting.cancelled:
                    self._finish(waiting)
                else:
                    self._start(waiting)
            if not state.running and state.waiting is None and state.newest is None:
                self._keys.pop(job.key, None)
        if not self._jobs:
            self.busy_changed.emit(False)

    # -- state -------------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Jobs submitted whose result has not yet been delivered (or dropped)."""
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

    def stop_all(self) -> None:
        """Ask every job to stop (how each ended is still delivered)."""
        for job in list(self._jobs):
            job.stop()

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop taking jobs, stop the running ones and wait for them to return."""
        if self._closed:
            return
        self.stop_all()
        self.wait_idle(timeout)
        self._closed = True
        for executor in self._lanes.values():
            executor.shutdown(wait=True, cancel_futures=True)
