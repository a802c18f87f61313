"""Write PNGs of the desktop window's main states to ``docs/screenshots/``.

Run as ``make screenshots`` (or ``QT_QPA_PLATFORM=offscreen .venv/bin/python
scripts/screenshots.py [--out DIR]``). Everything happens in a temporary workbench home
with a temporary database: the sample session, a few more sessions (pinned, tagged,
one with folded messages, one with tool calls), so the pictures show real widgets over
real data without touching anyone's files.

After the main states (at 1280×800), every panel and dialog is written again at each
size of ``--sizes`` (default 1024×700, the smallest the window is made for), named
``WIDTHxHEIGHT-panel.png``: Search, Compaction, Context, Request, the dialogs, and the
dark theme's controls.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

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


_RENOVATION = [
    ("user", "We want to redo the kitchen of our flat in Porto before the summer. The room is "
             "3.2 by 4.1 metres, the window faces the courtyard, and the budget is 18,000 EUR "
             "including the appliances. Where do we start?"),
    ("assistant", "Start with the fixed points: the water inlet and drain under the window, "
                  "the gas pipe on the left wall and the load-bearing wall you must not "
                  "open. Measure them, then draw two layouts (an L along the window and a "
                  "galley) and price both before you choose cabinets."),
    ("user", "The drain is 40 cm left of the window centre. The gas pipe could be capped: we "
             "would rather cook on induction. Does that change the electrical side?"),
    ("assistant", "Yes: induction needs its own 32 A circuit (a 7.4 kW hob), so the panel "
                  "must have room for a new breaker and the cable run from the board to "
                  "the hob must be 6 mm². Ask the electrician to check the supply contract "
                  "too: 6.9 kVA is tight with an oven and a dishwasher on at once."),
    ("user", "Noted. For the worktop we like oak, but my partner worries about water near "
             "the sink. Alternatives in the same warm tone?"),
    ("assistant", "Three options: oiled oak with a composite insert around the sink, a "
                  "laminate with a real-wood veneer look (cheapest, 60 to 90 EUR a metre), "
                  "or a compact quartz in a sand colour (about 350 EUR a metre, no "
                  "maintenance). Oiled oak needs re-oiling twice a year near the sink."),
]


def _renovation_messages(count: int) -> list:
    from workbench.core.conversation import Message

    t0 = datetime(2025, 3, 10, 19, 0, tzinfo=UTC)
    out = []
    for i in range(count):
        role, text = _RENOVATION[i % len(_RENOVATION)]
        round_ = i // len(_RENOVATION)
        if round_:
            text = f"(Week {round_ + 1}) " + text
        out.append(Message(role=role, content=text, created_at=t0 + timedelta(hours=5 * i)))
    return out


def compaction_preview(window: object, ws: object, shot: object) -> int:
    """Step 11 of :func:`main`: the Compaction panel with a preview showing (returns the
    session's id)."""
    from PySide6.QtCore import Qt

    from workbench.core.conversation import Conversation, Task
    from workbench.core.provider import ProviderConfig
    from workbench.core.tokens import fill_counts
    from workbench.engine import compaction
    from workbench.engine.providers import ProviderSettings

    messages = _renovation_messages(72)
    fill_counts(messages)
    session_id = ws.import_conversation(Conversation(  # type: ignore[attr-defined]
        title="Kitchen renovation", messages=messages, tags=["home"])).id
    important = ws.repo.list_messages(session_id)[45]  # type: ignore[attr-defined]
    ws.repo.set_important(important.id, True)  # type: ignore[attr-defined]
    # An earlier compaction: the timeline shows its marker, the history lists it.
    compaction.compact(ws, session_id, keep=56)
    # Facts said twice and a task finished long ago: the preview cleans them up.
    context = ws.repo.get_context(session_id)  # type: ignore[attr-defined]
    context.facts = ["The kitchen is 3.2 by 4.1 metres.", "Budget: 18,000 EUR.",
                     "the kitchen is 3.2 by 4.1 metres", "They cook on induction."]
    old = datetime(2025, 3, 12, tzinfo=UTC)
    context.tasks = [Task("t1", "Measure the drain and the gas pipe", "completed",
                          created_at=old, updated_at=old),
                     Task("t2", "Get two quotes for the electrics", "running")]
    ws.repo.set_context(session_id, context)  # type: ignore[attr-defined]

    settings = ProviderSettings(ws.db)  # type: ignore[attr-defined]
    names = [c.name for c in settings.list()]
    if names:
        settings.update(names[0], context_window=8192)
    else:
        settings.add(ProviderConfig(name="llama.cpp (local)", kind="openai",
                                    base_url="http://127.0.0.1:8080/v1", model="local-model",
                                    context_window=8192))
    w = window
    w.open_session(session_id)  # type: ignore[attr-defined]
    if w.composer is not None:  # type: ignore[attr-defined]
        w.composer.prompt.clear()  # type: ignore[attr-defined]
        w.composer.refresh_providers()  # type: ignore[attr-defined]
        w.composer.refresh_gauge()  # type: ignore[attr-defined]
    w.compaction_dock.show()  # type: ignore[attr-defined]
    w.compaction_dock.raise_()  # type: ignore[attr-defined]
    w.resizeDocks([w.compaction_dock], [480], Qt.Orientation.Horizontal)  # type: ignore[attr-defined]
    pump(0.3)
    w.ctx.workers.wait_idle(20)  # type: ignore[attr-defined]
    panel = w.compaction_panel  # type: ignore[attr-defined]
    panel.keep_count_spin.setValue(24)
    panel.preview()
    pump(0.3)
    w.ctx.workers.wait_idle(20)  # type: ignore[attr-defined]
    pump(0.2)
    panel.scroll.ensureWidgetVisible(panel.apply_button, 0, 8)
    shot("compaction-preview")  # type: ignore[operator]
    return int(session_id)


def settings_dialogs(window: object, ws: object, shot: object) -> None:
    """Step 12 of :func:`main`: Settings → Providers and Settings → Agents."""
    from workbench.core.provider import ProviderConfig
    from workbench.engine.providers import ProviderSettings

    settings = ProviderSettings(ws.db)  # type: ignore[attr-defined]
    if "OpenAI" not in [c.name for c in settings.list()]:
        settings.add(ProviderConfig(name="OpenAI", kind="openai",
                                    base_url="https://api.openai.com/v1", model="gpt-4o-mini",
                                    api_key_env="OPENAI_API_KEY", max_output_tokens=1024))
    repo = ws.repo  # type: ignore[attr-defined]
    agent = repo.default_agent()
    policy = dict(agent.memory_policy)
    policy.update(max_messages=40, capture="conversation", max_entries=5)
    repo.update_agent(agent.id, provider="llama.cpp (local)", memory_policy=policy,
                      tools=["search_conversations", "recall_memory", "current_time"])
    dialog = window.show_providers()  # type: ignore[attr-defined]
    dialog.select("OpenAI")
    dialog.set_window_note("The server did not say (or could not be reached); "
                           "gpt-4o-mini is known to have 128,000 tokens.")
    pump(0.3)
    shot("providers-dialog", dialog)  # type: ignore[operator]
    dialog.reject()
    dialog = window.show_agents()  # type: ignore[attr-defined]
    pump(0.3)
    shot("agents-dialog", dialog)  # type: ignore[operator]
    dialog.reject()


def first_run_offer(window: object, shot: object, name: str = "first-run-offer") -> None:
    """Step 13 of :func:`main`: the first-run bar offering a local server that answered
    (a small stand-in for llama.cpp's model list on a free port) and the hosted hint."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Models(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            data = json.dumps({"data": [{"id": "gemma-3-270m-it-Q4_K_M.gguf"}]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        bar = window.offer_local_servers(  # type: ignore[attr-defined]
            [("llama.cpp", server.server_address[1])], force=True)
        deadline = time.perf_counter() + 5
        while not bar.servers and time.perf_counter() < deadline:
            pump(0.05)
        shot(name)  # type: ignore[operator]
        bar.dismiss()
    finally:
        server.shutdown()


def _import_files(folder: Path) -> tuple[Path, Path]:
    """A file no importer knows, and a folder with one good and one broken conversation."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    bogus = folder / "meeting-notes-from-the-quarterly-planning-session.txt"
    bogus.write_text("just some notes", encoding="utf-8")
    mixed = folder / "mixed"
    mixed.mkdir(exist_ok=True)
    (mixed / "good.json").write_text(json.dumps({
        "session_id": "conv-1", "title": "Conversation 1",
        "recent_history": [{"timestamp": "2025-01-01T10:00:00Z", "role": "user",
                            "content": "hello"}]}), encoding="utf-8")
    (mixed / "broken.json").write_text('{"session_id": "x", "recent_history": [{"role": 5}]}',
                                       encoding="utf-8")
    return bogus, mixed


def panels_and_dialogs(window: object, ws: object, ids: dict[str, int], shot: object,
                       size: tuple[int, int], home: Path, theme: str = "light") -> None:
    """Step 14 of :func:`main`: each panel and dialog with the window at ``size`` (in
    ``theme``; names of the dark theme's pictures start ``WxH-dark-``)."""
    from workbench.core.provider import ProviderConfig
    from workbench.engine.providers import ProviderSettings
    from workbench.gui.dialogs.message_editor import MessageEditorDialog
    from workbench.gui.dialogs.team_database import TeamDatabaseDialog

    w: Any = window
    prefix = f"{size[0]}x{size[1]}-" + ("dark-" if theme == "dark" else "")
    w.set_theme(theme)
    settings = ProviderSettings(ws.db)  # type: ignore[attr-defined]
    if "Gemma local" not in [c.name for c in settings.list()]:
        settings.add(ProviderConfig(name="Gemma local", kind="openai",
                                    base_url="http://127.0.0.1:8080/v1",
                                    model="gemma-3-270m-it-Q4_K_M.gguf",
                                    context_window=32768))
    w.showNormal()
    w.resize(*size)
    pump(0.3)
    w.open_session(ids["agent"])
    if w.composer is not None:
        w.composer.refresh_providers()
        w.composer.provider_box.setCurrentIndex(w.composer.provider_box.findData("Gemma local"))
        w.composer.prompt.setPlainText("Which tests are still slow?")
    for name, dock in (("search", w.search_dock), ("compaction", w.compaction_dock),
                       ("context", w.context_dock), ("request", w.request_dock)):
        dock.show()
        dock.raise_()
        pump(0.3)
        w.ctx.workers.wait_idle(20)
        if name == "search":
            w.search.query_edit.setText("paging")
            w.search.search()
        if name == "compaction":  # a session with a compaction in its history
            w.open_session(ids["kitchen"])
            pump(0.3)
            w.ctx.workers.wait_idle(20)
            w.compaction_panel.keep_count_spin.setValue(24)
            w.compaction_panel.preview()
        if name == "context":
            w.open_session(ids["sample"])
        shot(prefix + name)
        if name == "compaction":
            scroll = w.compaction_panel.scroll.verticalScrollBar()
            scroll.setValue(scroll.maximum())
            shot(prefix + "compaction-end")
            scroll.setValue(0)
            w.compaction_panel.clear_preview("")
        if name == "context":
            scroll = w.context_panel.scroll.verticalScrollBar()
            scroll.setValue(scroll.maximum())
            shot(prefix + "context-end")
            scroll.setValue(0)

    w.open_session(ids["agent"])
    first_run_offer(w, shot, prefix + "first-run")
    view, model = w.timeline.view, w.timeline.model
    row = model.rowCount() - 2
    view.setCurrentIndex(model.index(row, 0))
    view.edit(model.index(row, 0))
    shot(prefix + "edit-in-place")
    editor = view._editor_widget()
    if editor is not None:
        editor.cancelled.emit()

    for name, open_dialog in (("providers", w.show_providers), ("agents", w.show_agents),
                              ("shortcuts", w.show_shortcuts)):
        dialog = open_dialog()
        if name == "providers":
            dialog.select("Gemma local")
        pump(0.3)
        shot(prefix + name, dialog)
        dialog.reject()
    dialog = MessageEditorDialog(w, role="user", text="Keep the old query for the benchmark.",
                                 title="Insert message")
    dialog.show()
    shot(prefix + "message-editor", dialog)
    dialog.reject()
    team = TeamDatabaseDialog(w, address="postgresql://alice@db.example.org:5432/team")
    team.password_edit.setText("not-a-real-password")
    team.show()
    shot(prefix + "team-database", team)
    team.reject()

    bogus, mixed = _import_files(home / "to-import")
    for name, path, fmt in (("import-failed", bogus, None),
                            ("import-skipped", mixed, "context-json")):
        dialog = w.start_import(path, format=fmt)
        pump(0.5)
        w.ctx.workers.wait_idle(20)
        shot(prefix + name, dialog)
        dialog.reject()

    if theme == "light":  # the dark theme's check boxes and fields, in every run
        w.set_theme("dark")
        dialog = w.show_agents()
        pump(0.3)
        shot(prefix + "dark-agents", dialog)
        dialog.reject()
        w.open_session(ids["kitchen"])
        w.compaction_dock.show()
        w.compaction_dock.raise_()
        shot(prefix + "dark-compaction")
    w.search_dock.raise_()
    w.set_theme("light")


def _size(text: str) -> tuple[int, int]:
    width, _x, height = text.lower().partition("x")
    return int(width), int(height)


def pump(seconds: float = 0.2) -> None:
    from PySide6.QtWidgets import QApplication

    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        QApplication.processEvents()
        time.sleep(0.005)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO_DIR / "docs" / "screenshots")
    parser.add_argument("--theme", choices=("light", "dark"), default="light",
                        help="the theme of the panels and dialogs at those sizes")
    parser.add_argument("--sizes", default="1024x700",
                        help="window sizes for the panels and dialogs, e.g. "
                             "1024x700,1280x800,1920x1080")
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

    # 9. The Context panel on the sample session: facts, summary, tasks, usage, memory.
    from PySide6.QtCore import Qt

    from workbench.engine.session_context import add_memory_entry

    for text, scope in (("The traveller is vegetarian; suggest vegetarian places.", "agent"),
                        ("Prefers window seats on trains.", "agent"),
                        ("Arrives in Lisbon on Friday 17 April by the night train.",
                         "session")):
        add_memory_entry(ws, ids["sample"], text, scope=scope)
    window.open_session(ids["sample"])
    window.context_dock.show()
    window.context_dock.raise_()
    window.resizeDocks([window.context_dock], [430], Qt.Orientation.Horizontal)
    pump(0.3)
    window.context_panel.facts_list.setCurrentRow(1)
    shot("context-panel")
    window.context_panel.scroll.verticalScrollBar().setValue(
        window.context_panel.scroll.verticalScrollBar().maximum())
    shot("context-panel-memory")
    window.context_panel.scroll.verticalScrollBar().setValue(0)

    # 10. The request inspector: a local model with a small window, a prompt being typed.
    if window.request_inspector is not None and window.composer is not None:
        from workbench.core.provider import ProviderConfig
        from workbench.engine.providers import ProviderSettings

        ProviderSettings(ws.db).add(ProviderConfig(  # type: ignore[attr-defined]
            name="llama.cpp (local)", kind="openai", base_url="http://127.0.0.1:8080/v1",
            model="local-model", context_window=480, max_output_tokens=96))
        from workbench.engine.session_context import update_context

        update_context(ws, ids["folded"], summary=(
            "The plan moves the store to keyset paging in three steps; steps 1 and 2 "
            "are done, step 3 (the benchmark) is open."))
        agent = ws.repo.default_agent()  # type: ignore[attr-defined]
        ws.repo.update_agent(agent.id, instructions=(  # type: ignore[attr-defined]
            "You are a careful engineering assistant. Answer briefly."))
        window.composer.refresh_providers()
        window.open_session(ids["folded"])
        window.request_dock.show()
        window.request_dock.raise_()
        window.resizeDocks([window.request_dock], [470], Qt.Orientation.Horizontal)
        window.composer.prompt.setPlainText("Which steps of the migration are still open?")
        pump(0.6)
        window.ctx.workers.wait_idle(20)
        pump(0.2)
        shot("request-inspector")

    # 11. The Compaction panel: a preview of a long session (the folded range tinted in
    #     the timeline, the summary, the token bar against the window) under an earlier
    #     compaction shown in the history and as a marker in the timeline.
    ids["kitchen"] = compaction_preview(window, ws, shot)

    # 12. The Settings dialogs: providers (key kept outside) and agents (policy, tools).
    settings_dialogs(window, ws, shot)

    # 13. First run: a local model server found and offered, with the hosted hint.
    first_run_offer(window, shot)

    # 14. Each panel and dialog at the small size (and any other asked for).
    for size in args.sizes.split(","):
        panels_and_dialogs(window, ws, ids, shot, _size(size), home, args.theme)

    window.close()
    ws.close()  # type: ignore[attr-defined]
    for path in written:
        print(path.relative_to(REPO_DIR) if path.is_relative_to(REPO_DIR) else path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
