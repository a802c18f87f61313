"""The worker pool: results on the UI thread, one writer in order, streaming with cancel."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
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


def test_streaming_delivers_items_and_stops_when_cancelled(qtbot: QtBot) -> None:
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
    job.cancel()
    release.set()
    assert pool.wait_idle()
    assert done == [None]  # stopped: no return value
    assert len(produced) <= 4
    pool.shutdown()


def test_describe_error_words_unexpected_failures() -> None:
    text = describe_error(KeyError("x"), doing="open the session")
    assert text.startswith("Something unexpected went wrong while trying to open the session")
