"""Opens the main window on sessions holding hostile payloads, under a memory cap.

Run by ``test_message_rendering.py`` in a child process (``python hostile_window.py DB
LIMIT_MB``): the child caps its address space, builds the sessions, opens each one,
paints the window, hovers the session list and prints what the title label and each
message's rendered document show, one JSON object per line. A window that tried to read
``/dev/zero`` as an image would run into the cap and die instead.
"""

from __future__ import annotations

import json
import resource
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

TAIL = "TAIL-VISIBLE"
TITLE = '<img src="/dev/zero"> <span style="font-size:40px;color:red">Red</span> title'
PAYLOADS = {
    "markdown image": f"look ![x](/dev/zero) {TAIL}",
    "html image": f'before <img src="/dev/zero"> {TAIL}',
    "script": f"<script>alert('hidden')</script> {TAIL}",
    "style": f"<style>p {{ display: none }}</style> {TAIL}",
    "iframe": f'<iframe src="file:///dev/zero"></iframe> {TAIL}',
    "red span": f'<span style="font-size:40px;color:red">shout</span> {TAIL}',
    "reference": f'[r]: file:///dev/zero "hidden words"\n\n{TAIL}',
    "huge": "word " * 400_000 + TAIL,
    "bidi override": f"RLO:\u202eevil \u2067isolate\u2069 {TAIL}",
    "zero width": f"zero\u200bwidth\u2060joined\ufeffmark\u00adsoft {TAIL}",
    "tag characters": "hi" + "".join(chr(0xE0000 + ord(c)) for c in "run rm") + f" {TAIL}",
    "entities": f"&amp; &lt;tag&gt; &#x202E;x `&amp;` {TAIL}",
}

# Stored text the other panels show: search hits, the request payload, facts, tasks,
# memory entries, tags (checked by ``test_message_rendering.py`` in the test process).
RLO = "\u202e"
PANEL_TITLE = f"RLO {RLO}evil title here"
PANEL_MESSAGE = f"bidi {RLO}evil\u202c text, zero\u200bwidth"
PANEL_FACTS = [f"fact {RLO}gnp.exe end", "zero\u200bwidth\u2060fact"]
PANEL_TASK = f"task {RLO}evil task"
PANEL_TAG = f"x{RLO}evil"
PANEL_MEMORY = f"memory {RLO}evil entry"
PANEL_SUMMARY = f"summary {RLO}evil"


def build_panels(ws: Any) -> int:
    """A session whose title, message, facts, task, tag and memory entry are hostile;
    its id."""
    from workbench.core.conversation import Conversation, Message, Task
    from workbench.engine.session_context import add_memory_entry, update_context

    when = datetime(2025, 5, 1, 9, tzinfo=UTC)
    info = ws.repo.import_many([Conversation(
        title=PANEL_TITLE, messages=[Message(role="user", content=PANEL_MESSAGE,
                                             created_at=when)])])[0].session
    update_context(ws, info.id, facts=list(PANEL_FACTS), summary=PANEL_SUMMARY,
                   tasks=[Task(id="t1", description=PANEL_TASK, status="pending")])
    ws.editing().set_tags(info.id, [PANEL_TAG])
    add_memory_entry(ws, info.id, PANEL_MEMORY, scope="session")
    return info.id


def build(path: Path) -> list[int]:
    from workbench.core.conversation import Conversation, Message
    from workbench.engine.workspace import Workspace

    when = datetime(2025, 5, 1, 9, tzinfo=UTC)
    ws = Workspace.open(path)
    conversations = [
        Conversation(title=TITLE if name == "markdown image" else f"{TITLE} {name}",
                     messages=[Message(role="user", content=text, created_at=when),
                               Message(role="assistant", content=text, created_at=when)])
        for name, text in PAYLOADS.items()
    ]
    ids = [o.session.id for o in ws.repo.import_many(conversations)]
    ws.close()
    return ids


def main() -> int:
    path, limit_mb = Path(sys.argv[1]), int(sys.argv[2])
    limit = limit_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    ids = build(path)

    from PySide6.QtWidgets import QApplication

    from workbench.engine.workspace import Workspace
    from workbench.gui.main_window import MainWindow
    from workbench.gui.models.timeline import MessageRole

    app = QApplication.instance() or QApplication(sys.argv[:1])
    ws = Workspace.open(path)
    window = MainWindow(ws)
    window.resize(1024, 700)
    window.show()
    app.processEvents()
    for session_id in ids:
        window.open_session(session_id)
        window.ctx.workers.wait_idle(30)
        app.processEvents()
        window.grab()  # paints every visible widget: title label, list, timeline
        timeline = window.timeline
        view = timeline.view
        texts = []
        for row in range(timeline.model.rowCount()):
            index = timeline.model.index(row, 0)
            message = index.data(MessageRole)
            if message is None:
                continue
            view.scrollTo(index)
            app.processEvents()
            doc, _cut = timeline.delegate._document(  # noqa: SLF001 - what the row paints
                index, message, timeline.delegate._text_width(view.viewport().width()),  # noqa: SLF001
                view.font(), False)
            texts.append(doc.toPlainText()[-200:])
        window.grab()
        print(json.dumps({
            "session": session_id,
            "title_label": timeline.title_label.full_text(),
            "title_shown": timeline.title_label.text(),
            "title_format": timeline.title_label.textFormat().name,
            "window_title": window.windowTitle(),
            "texts": texts,
            "visible": window.isVisible(),
        }), flush=True)
    window.close()
    ws.close()
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
