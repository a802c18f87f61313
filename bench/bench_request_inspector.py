"""The request inspector on long sessions: preflight time, show time, stalls while typing.

Run as ``QT_QPA_PLATFORM=offscreen .venv/bin/python bench/bench_request_inspector.py
[--runs 5]``. Sessions of 1,000, 10,000 and 100,000 short messages are built in a
temporary database (the store's fast path); no provider is configured, so preflight
assumes the offline OpenAI stand-in with its 128,000-token window, which leaves most of
a long session out.

Figures:

- **preflight**: :func:`~workbench.gui.panels.request_inspector.inspect_request` on a
  worker thread (the engine's preflight, the JSON text, the previews of the listed
  left-out messages), median of the runs: a refresh as the panel makes them while a
  prompt is typed (the prompt one character longer each time, the database unchanged),
  the first one after a commit that leaves the session's messages alone, and the first
  one after a message is appended to the session;
- **show**: putting one result on screen on the UI thread (payload text and colours,
  token bar, left-out list) up to the end of the next repaint (goal ≤ 50 ms);
- **longest UI-thread stall** while typing a prompt at 8 keys a second in the 100,000-message
  session with the inspector visible (goal ≤ 50 ms), with the machine's own noise beside it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import _common
from bench_gui import StallProbe, machine_noise, pump

SIZES = (1_000, 10_000, 100_000)
T0 = datetime(2025, 5, 1, tzinfo=UTC)


def build(ws: object, size: int) -> int:
    from workbench.core.conversation import Conversation, Message

    text = "Message {i} of a long session, with a few more words to count and to show."
    messages = [Message(role=("user", "assistant")[i % 2], content=text.format(i=i),
                        created_at=T0 + timedelta(seconds=i), token_count=20,
                        token_encoding="o200k_base") for i in range(size)]
    outcome = ws.repo.import_many(  # type: ignore[attr-defined]
        [Conversation(title=f"{size:,} messages", messages=messages)])
    return int(outcome[0].session.id)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    home = Path(tempfile.mkdtemp(prefix="workbench-bench-inspector-"))
    os.environ["WORKBENCH_HOME"] = str(home)

    from PySide6.QtWidgets import QApplication

    from workbench.core.conversation import Message
    from workbench.engine.workspace import Workspace
    from workbench.gui.main_window import MainWindow
    from workbench.gui.panels.request_inspector import inspect_request

    app = QApplication.instance() or QApplication(sys.argv[:1])
    ws = Workspace.open(home / "bench.db")
    sessions = {size: build(ws, size) for size in SIZES}
    print(f"load average {os.getloadavg()[0]:.2f}; {args.runs} runs each")

    window = MainWindow(ws)
    window.resize(1280, 800)
    window.show()
    inspector = window.request_inspector
    assert inspector is not None and window.composer is not None
    window.request_dock.raise_()
    pump(app, 0.3)

    for size, session_id in sessions.items():
        times, shows, cpus, firsts, first_cpus = [], [], [], [], []
        turns, turn_cpus = [], []
        result = None
        for run in range(3 * args.runs):
            change = ("elsewhere", "turn", None)[run % 3]
            if change == "elsewhere":  # a commit that leaves the session's messages alone
                with ws.db.write() as conn:
                    conn.exec_driver_sql("UPDATE sessions SET title = title WHERE id = ?",
                                         (session_id,))
            elif change == "turn":  # a message appended to the session
                ws.repo.append_messages(session_id, [Message(
                    role="user", content=f"One more message, number {run}.", token_count=20,
                    token_encoding="o200k_base")])
            started = time.perf_counter()
            cpu_started = time.thread_time()
            result = inspect_request(ws, session_id, "What is left to do?"[: 12 + run % 8],
                                     provider=None, model=None, window=None)
            wall = (time.perf_counter() - started) * 1000
            cpu = (time.thread_time() - cpu_started) * 1000
            {"elsewhere": firsts, "turn": turns, None: times}[change].append(wall)
            {"elsewhere": first_cpus, "turn": turn_cpus, None: cpus}[change].append(cpu)
            if change is not None:
                continue
            inspector._show(None)
            app.processEvents()
            started = time.perf_counter()
            inspector._show(result)
            inspector.repaint()
            shows.append((time.perf_counter() - started) * 1000)
        assert result is not None
        print(f"{size:>7,} messages: preflight {statistics.median(times):7.0f} ms (worker;"
              f" CPU {statistics.median(cpus):.0f} ms; the first after a change"
              f" {statistics.median(firsts):.0f} ms, CPU {statistics.median(first_cpus):.0f};"
              f" after a message appended {statistics.median(turns):.0f} ms,"
              f" CPU {statistics.median(turn_cpus):.0f})"
              f" · show {statistics.median(shows):5.1f} ms (UI thread, goal ≤ 50)"
              f" · payload {len(result.payload_text) / 1e6:.2f} MB,"
              f" {result.left_out_count:,} left out")

    window.open_session(sessions[SIZES[-1]])
    pump(app, 0.5)
    window.ctx.workers.wait_idle(60)
    probe = StallProbe()
    probe.start()
    prompt = window.composer.prompt
    for ch in "Which of these steps are still open?":
        prompt.insertPlainText(ch)
        pump(app, 0.125)
    deadline = time.perf_counter() + 60
    while time.perf_counter() < deadline and (
            inspector.busy or inspector.shown is None
            or inspector.shown.prompt != prompt.toPlainText().strip()):
        pump(app, 0.02)
    pump(app, 0.3)
    stall = probe.stop()
    print(f"typing in the {SIZES[-1]:,}-message session with the inspector shown: longest "
          f"UI-thread stall {stall:.0f} ms (goal ≤ 50; this machine's noise "
          f"{machine_noise(50):.0f} ms)")
    window.close()
    ws.close()
    return 0


if __name__ == "__main__":
    _common  # noqa: B018 - imported for its sys.path set-up
    sys.exit(main())
