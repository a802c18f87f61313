"""Write PNGs of the desktop window's main states to ``docs/screenshots/``.

Run as ``make screenshots`` (or ``QT_QPA_PLATFORM=offscreen .venv/bin/python
scripts/screenshots.py [--out DIR]``). Everything happens in a temporary workbench home
with a temporary database: the sample session, a few more sessions (pinned, tagged,
one with folded messages, one with tool calls), so the pictures show real widgets over
real data without touching anyone's files.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parents[1]
if str(REPO_DIR) not in sys.path:
    sys.path.insert(0, str(REPO_DIR))

SIZE = (1280, 800)


def _messages() -> list:
    from workbench.core.conversation import Message

    t0 = datetime(2025, 6, 3, 14, 0, tzinfo=UTC)
    arguments = '{"path": "tests/store", "k": "paging"}'
    call = {"id": "call_ls", "type": "function",
            "function": {"name": "run_tests", "arguments": arguments}}
    texts = [
        ("system", "You are a coding agent. Run the tests before you claim a fix works."),
        ("user", "Paging through a long session is slow near the end. Can you look?"),
        ("assistant", "Paging used `LIMIT ? OFFSET ?`, which walks every earlier row. "
                      "I will switch to **keyset paging** on `(session_id, position)`:\n\n"
                      "```python\nrows = conn.execute(\n    \"SELECT * FROM messages WHERE "
                      "session_id = ? AND position > ?\"\n    \" ORDER BY position LIMIT ?\",\n"
                      "    (session_id, after, limit),\n)\n```"),
        ("assistant", ""),
        ("tool", "============ test session starts ============\ncollected 14 items\n\n"
                 "tests/store/test_paging.py ..............   [100%]\n\n"
                 "============ 14 passed in 0.61s ============"),
        ("assistant", "All 14 paging tests pass. A page now costs the same at position "
                      "99,800 as at position 0 (about 3 ms)."),
        ("user", "Great. Keep the old query around for the benchmark as a reference."),
        ("assistant", "Done: `bench_paging.py` times both and prints the ratio."),
    ]
    out = []
    for i, (role, text) in enumerate(texts):
        extra = {"tool_calls": [call]} if i == 3 else {}
        if role == "tool":
            extra = {"tool_call_id": "call_ls", "name": "run_tests"}
        out.append(Message(role=role, content=text, created_at=t0 + timedelta(minutes=i),
                           **extra))
    return out


def build_workspace(path: Path) -> tuple[object, dict[str, int]]:
    from workbench.core.conversation import Conversation, Message
    from workbench.core.tokens import fill_counts
    from workbench.engine.workspace import Workspace

    ws = Workspace.open(path)
    sample = ws.ensure_sample_session()
    ids = {"sample": sample.id if sample else 0}
    agent = _messages()
    fill_counts(agent)
    ids["agent"] = ws.import_conversation(Conversation(
        title="Fix slow paging in long sessions", messages=agent, tags=["work", "store"])).id
    long_one = [Message(role=("user", "assistant")[i % 2],
                        content=f"Step {i}: " + ("notes on the migration plan " * (1 + i % 4)),
                        created_at=datetime(2025, 5, 1, tzinfo=UTC) + timedelta(minutes=i))
                for i in range(60)]
    fill_counts(long_one)
    ids["folded"] = ws.import_conversation(Conversation(
        title="Migration planning (compacted)", messages=long_one, tags=["work"])).id
    folded = [m.id for m in ws.repo.list_messages(ids["folded"])[:41]]
    ws.repo.set_state(folded, "folded")
    for title, tags in (("Reading list", ["personal"]), ("Recipe ideas", []),
                        ("Support ticket #4411", ["support"])):
        chat = [Message(role="user", content=f"About {title.lower()}…"),
                Message(role="assistant", content="Here are a few thoughts.")]
        fill_counts(chat)
        ids[title] = ws.import_conversation(Conversation(title=title, messages=chat,
                                                         tags=tags)).id
    ws.repo.set_pinned(ids["agent"], True)
    return ws, ids


def pump(seconds: float = 0.2) -> None:
    from PySide6.QtWidgets import QApplication

    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        QApplication.processEvents()
        time.sleep(0.005)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO_DIR / "docs" / "screenshots")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="workbench-screens-"))
    os.environ["WORKBENCH_HOME"] = str(home)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    from PySide6.QtWidgets import QApplication

    from workbench.core.conversation import Message
    from workbench.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Conversation Workbench")
    ws, ids = build_workspace(home / "workbench.db")
    window = MainWindow(ws)  # type: ignore[arg-type]
    window.resize(*SIZE)
    window.show()
    window.set_theme("light")
    pump(0.4)
    written: list[Path] = []

    def shot(name: str, widget: object = None) -> None:
        if window.composer is not None:
            window.composer.refresh_gauge()
        pump(0.25)
        window.ctx.workers.wait_idle(20)
        pump(0.1)
        target = widget or window
        path = args.out / f"{name}.png"
        target.grab().save(str(path))  # type: ignore[attr-defined]
        written.append(path)

    # 1. The main window on the agent session, a search under way on the right.
    window.open_session(ids["agent"])
    window.search.query_edit.setText("paging")
    window.search.search()
    shot("main-window")

    # 2. A search hit opened in the sample session.
    window.search.query_edit.setText("umbrella")
    window.search.search()
    pump(0.3)
    window.ctx.workers.wait_idle(20)
    hits = window.search.hits()
    if hits:
        window.search.open_hit(hits[0])
    shot("search-hit")

    # 3. Role chips: tool messages hidden.
    window.open_session(ids["agent"])
    window.timeline.chips.chips["tool"].click()
    shot("role-filter")
    window.timeline.chips.chips["tool"].click()

    # 4. Folded messages behind their marker, and expanded.
    window.open_session(ids["folded"])
    window.timeline.view.scroll_to_start()
    shot("folded-marker")
    window.timeline.model.toggle_run(0)
    window.timeline.view.scroll_to_start()
    shot("folded-expanded")

    # 5. Editing a message in place.
    window.open_session(ids["agent"])
    model, view = window.timeline.model, window.timeline.view
    row = model.rowCount() - 2
    view.setCurrentIndex(model.index(row, 0))
    view.edit(model.index(row, 0))
    shot("edit-in-place")
    editor = view._editor_widget()
    if editor is not None:
        editor.cancelled.emit()

    # 6. A reply streaming in (the turn as the composer shows it before it is stored).
    window.open_session(ids["sample"])
    if window.composer is not None:
        window.composer.prompt.setPlainText("And on Sunday, is the LX Factory market open?")
    user = Message(role="user", content="And on Sunday, is the LX Factory market open?",
                   created_at=datetime.now(UTC), metadata={"note": "sending…"})
    reply = Message(role="assistant", content="Yes: the LX Factory has a market on **Sundays** "
                    "from 10:00, with", metadata={"note": "receiving…"})
    model.set_pending([user, reply])
    view.scroll_to_end()
    shot("streaming-reply")
    model.set_pending(None)

    # 7. The dark theme.
    window.set_theme("dark")
    window.open_session(ids["agent"])
    shot("dark-theme")
    window.set_theme("light")

    # 8. An import with its progress dialog (finished: the report).
    export_dir = home / "exports"
    export_dir.mkdir()
    source, _ids = build_workspace(home / "source.db")
    source.export_sessions(  # type: ignore[attr-defined]
        [_ids["agent"]], "openai-jsonl", export_dir / "agent.jsonl")
    source.close()  # type: ignore[attr-defined]
    dialog = window.start_import(export_dir / "agent.jsonl")
    pump(0.5)
    window.ctx.workers.wait_idle(20)
    shot("import-dialog", dialog)
    dialog.reject()

    window.close()
    ws.close()  # type: ignore[attr-defined]
    for path in written:
        print(path.relative_to(REPO_DIR) if path.is_relative_to(REPO_DIR) else path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
