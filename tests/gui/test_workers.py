"""The worker pool: results on the UI thread, one writer in order, streaming with stop,
cancelled and superseded jobs delivering nothing.

The jobs block on events the tests set, so what runs when is decided by the test, not
by the clock."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from PySide6.QtCore import QThread
from pytestqt.qtbot import QtBot

from workbench.errors import StorageError
from workbench.gui.errors import describe_error
from workbench.gui.workers import Job, WorkerPool


def test_results_arrive_on_the_ui_thread_and_writes_run_in_order(qtbot: QtBot) -> None:
    pool = WorkerPool()
    ui_thread = QThread.currentThread()
    ran_in: list[str] = []
    order: list[int] = []
    delivered_in: list[bool] = []

    def write(number: int) -> int:
        ran_in.append(threading.current_thread().name)
        time.sleep(0.002 * (5 - number))  # later jobs are quicker: order must still hold
        return number

    for number in range(5):
        pool.write(write, number, on_done=lambda n: (
            order.append(n), delivered_in.append(QThread.currentThread() == ui_thread)))
    assert pool.wait_idle()
    assert order == [0, 1, 2, 3, 4]
    assert all(delivered_in)
    assert len(set(ran_in)) == 1 and ran_in[0].startswith("workbench-write")
    pool.shutdown()


def test_a_failure_reaches_its_handler_or_the_pool_signal(qtbot: QtBot) -> None:
    pool = WorkerPool()
    errors: list[BaseException] = []

    def fail() -> None:
        raise StorageError("The database is read-only.")

    pool.read(fail, on_error=errors.append)
    with qtbot.waitSignal(pool.error_reported, timeout=5_000) as reported:
        pool.read(fail, name="read the thing")
    # Reads run on several threads: the first failure may come back after the second.
    qtbot.waitUntil(lambda: len(errors) == 1, timeout=5_000)
    assert isinstance(errors[0], StorageError)
    assert reported.args[0] == "read the thing"
    assert describe_error(reported.args[1]) == "The database is read-only."
    pool.shutdown()


class NativePanic(BaseException):
    """What a native library raises when it panics (tiktoken's ``PanicException`` is a
    ``BaseException``, so ``except Exception`` lets it through)."""


def test_a_native_panic_in_a_job_is_delivered_and_the_pool_goes_on(qtbot: QtBot) -> None:
    pool = WorkerPool()
    errors: list[BaseException] = []
    done: list[int] = []

    def panic() -> None:
        raise NativePanic("called `Result::unwrap()` on an `Err` value")

    def panic_stream(_job: Job) -> Iterator[int]:
        yield 1
        raise NativePanic("stream")

    pool.read(panic, on_error=errors.append)
    pool.write(panic, on_error=errors.append)
    pool.stream(panic_stream, on_error=errors.append)
    pool.write(lambda: 7, on_done=done.append)
    assert pool.wait_idle(10), "a job that panicked never finished"
    assert done == [7]
    assert len(errors) == 3
    assert all(isinstance(e, RuntimeError) and "NativePanic" in str(e) for e in errors)
    assert describe_error(errors[0]).startswith("Something unexpected went wrong")
    pool.shutdown()


def test_streaming_delivers_items_and_stops_when_asked(qtbot: QtBot) -> None:
    pool = WorkerPool()
    produced: list[int] = []
    items: list[Any] = []
    done: list[Any] = []
    release = threading.Event()

    def generate(job: Job) -> Iterator[int]:
        for number in range(1000):
            produced.append(number)
            yield number
            if number == 2:
                release.wait(5)
        return 1000

    job = pool.stream(generate, on_item=items.append, on_done=done.append)
    qtbot.waitUntil(lambda: items == [0, 1, 2], timeout=5_000)
    job.stop()
    release.set()
    assert pool.wait_idle()
    assert done == [None]  # stopped: no return value, but the owner hears the end
    assert len(produced) <= 4
    assert not job.cancelled and job.cancel_event.is_set()
    pool.shutdown()


def test_a_cancelled_stream_delivers_nothing_more(qtbot: QtBot) -> None:
    pool = WorkerPool()
    items: list[Any] = []
    ended: list[Any] = []
    release = threading.Event()

    def generate(job: Job) -> Iterator[int]:
        for number in range(1000):
            if number == 3:
                release.wait(10)
            yield number
        return 1000

    job = pool.stream(generate, on_item=items.append, on_done=ended.append,
                      on_error=ended.append)
    qtbot.waitUntil(lambda: items == [0, 1, 2], timeout=5_000)
    job.cancel()
    release.set()  # item 3 is yielded after the cancel: it must not arrive
    assert pool.wait_idle()
    assert items == [0, 1, 2] and ended == []
    assert job.cancelled and job.done
    pool.shutdown()


def _blocking(started: threading.Event, release: threading.Event,
              result: Any = None, error: BaseException | None = None) -> Callable[[], Any]:
    def run() -> Any:
        started.set()
        assert release.wait(10), "the test never released the job"
        if error is not None:
            raise error
        return result

    return run


def test_a_cancelled_call_delivers_neither_its_result_nor_its_error(qtbot: QtBot) -> None:
    pool = WorkerPool()
    heard: list[Any] = []
    reported: list[Any] = []
    pool.error_reported.connect(lambda *args: reported.append(args))
    started = [threading.Event(), threading.Event()]
    release = threading.Event()
    ok = pool.read(_blocking(started[0], release, result="late"), on_done=heard.append,
                   on_error=heard.append)
    bad = pool.read(_blocking(started[1], release, error=StorageError("gone")),
                    on_done=heard.append)  # no on_error: it would reach error_reported
    assert started[0].wait(10) and started[1].wait(10)
    ok.cancel()
    bad.cancel()
    release.set()
    assert pool.wait_idle()
    assert heard == [] and reported == []
    assert ok.done and bad.done and ok.result is None and bad.error is None
    pool.shutdown()


def test_a_newer_job_with_the_same_key_supersedes_the_older(qtbot: QtBot) -> None:
    pool = WorkerPool()
    heard: list[Any] = []
    stopped: list[str] = []
    calls: list[str] = []
    started = threading.Event()
    release = threading.Event()
    owner = object()

    def answer(text: str) -> str:
        calls.append(text)
        return text

    first = pool.read(_blocking(started, release, result="first"), key=(owner, "preview"),
                      on_done=heard.append, on_error=heard.append,
                      on_stop=lambda: stopped.append("first"))
    assert started.wait(10)
    second = pool.read(answer, "second", key=(owner, "preview"), on_done=heard.append)
    third = pool.read(answer, "third", key=(owner, "preview"), on_done=heard.append)
    pool.read(answer, "other key", key=(owner, "history"), on_done=heard.append)
    qtbot.waitUntil(lambda: heard == ["other key"], timeout=5_000)
    # One job of a key at a time: the newer ones wait for the cancelled one to return.
    assert calls == ["other key"]
    assert first.cancelled and second.cancelled and not third.cancelled
    assert stopped == ["first"]  # its on_stop was called when it was superseded
    release.set()
    assert pool.wait_idle()
    assert heard == ["other key", "third"]  # the superseded ones delivered nothing
    assert calls == ["other key", "third"]  # and the one that waited never ran
    assert second.done and third.result == "third"
    pool.shutdown()


def test_a_superseded_write_still_runs_without_its_callbacks(qtbot: QtBot) -> None:
    pool = WorkerPool()
    written: list[str] = []
    heard: list[Any] = []
    started = threading.Event()
    release = threading.Event()
    pool.write(_blocking(started, release), name="hold the writer")
    assert started.wait(10)
    pool.write(written.append, "kept edit", key="policy", on_done=heard.append)
    pool.write(written.append, "newer edit", key="policy", on_done=heard.append)
    release.set()
    assert pool.wait_idle()
    assert written == ["kept edit", "newer edit"]  # a change asked for is never lost
    assert heard == [None]  # only the newest one's callback ran
    pool.shutdown()


def test_cancelling_a_key_and_a_read_that_has_not_started(qtbot: QtBot) -> None:
    pool = WorkerPool(read_threads=1)
    calls: list[str] = []
    heard: list[Any] = []
    started = threading.Event()
    release = threading.Event()
    pool.read(_blocking(started, release), name="hold the reader")
    assert started.wait(10)
    queued = pool.read(calls.append, "queued", on_done=heard.append)
    pool.read(calls.append, "keyed", key="index", on_done=heard.append)
    queued.cancel()
    pool.cancel("index")
    pool.cancel("no such key")  # nothing to cancel: nothing happens
    release.set()
    assert pool.wait_idle()
    assert calls == [] and heard == []  # cancelled before a thread took them: never run
    pool.shutdown()


def test_describe_error_words_unexpected_failures() -> None:
    text = describe_error(KeyError("x"), doing="open the session")
    assert text.startswith("Something unexpected went wrong while trying to open the session")
