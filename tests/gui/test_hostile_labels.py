"""Names, titles and servers' words in labels and tooltips are shown as text, never read
as Qt rich text: a model named ``<img src=/dev/zero>`` made the Providers dialog's window
note read that file as an image until memory ran out, and the provider list's tooltip
would have on hover."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from PySide6.QtCore import Qt
from PySide6.QtGui import Qt as GuiQt
from PySide6.QtWidgets import QAbstractItemView, QApplication, QLabel, QWidget
from pytestqt.qtbot import QtBot

from tests.gui.conftest import settle
from workbench.core.conversation import Conversation, Message, Task
from workbench.core.provider import ProviderConfig
from workbench.engine.session_context import add_memory_entry, update_context
from workbench.engine.workspace import Workspace
from workbench.gui.main_window import MainWindow

MARKUP = '<b>B</b><font size=100>F</font><img src="/nonexistent/hostile.png">&lt;'


def _rich(text: object) -> bool:
    return isinstance(text, str) and "<b>B" in text and GuiQt.mightBeRichText(text)


def _obeyed(widgets: list[QWidget]) -> list[str]:
    """Where ``MARKUP`` would be rendered as rich text: labels, tooltips, item tooltips."""
    found: list[str] = []
    for widget in widgets:
        name = f"{type(widget).__name__} {widget.accessibleName()!r}"
        if isinstance(widget, QLabel) and widget.textFormat() != Qt.TextFormat.PlainText \
                and _rich(widget.text()):
            found.append(f"label {name}: {widget.text()[:60]}")
        if _rich(widget.toolTip()):
            found.append(f"tooltip {name}")
        if isinstance(widget, QAbstractItemView) and widget.model() is not None:
            model = widget.model()
            for row in range(min(model.rowCount(), 20)):
                for column in range(4):
                    index = model.index(row, column)
                    if index.isValid() and _rich(index.data(Qt.ItemDataRole.ToolTipRole)):
                        found.append(f"item tooltip {name} row {row}")
    return found


def test_names_and_titles_in_labels_and_tooltips_are_never_markup(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    when = datetime(2025, 5, 1, 9, tzinfo=UTC)
    info = workspace.repo.import_many([Conversation(
        title="T" + MARKUP, tags=["tag" + MARKUP], metadata={"model": "meta" + MARKUP},
        messages=[Message(role="user", content="needle" + MARKUP, created_at=when),
                  Message(role="assistant", content="reply" + MARKUP, created_at=when,
                          metadata={"model": "model" + MARKUP})])])[0].session
    update_context(workspace, info.id, facts=["fact" + MARKUP], summary="sum" + MARKUP,
                   tasks=[Task(id="t1", description="task" + MARKUP, status="pending")])
    add_memory_entry(workspace, info.id, "memory" + MARKUP, scope="session")
    # Nothing listens on port 9: the window note says so, quoting the model's name.
    workspace.provider_settings().add(ProviderConfig(
        name="provider" + MARKUP, kind="openai", base_url="http://127.0.0.1:9/v1",
        model="model" + MARKUP))
    workspace.create_agent("agent" + MARKUP, provider="provider" + MARKUP,
                           model="model" + MARKUP, instructions="ins" + MARKUP)

    window = open_window(workspace)
    window.open_session(info.id)
    settle(window)
    for dock in (window.context_dock, window.compaction_dock, window.request_dock):
        dock.show()
    window.preview_compaction()
    window.search.query_edit.setText("needle")
    window.search.search()
    settle(window, 30)
    providers = window.show_providers()
    settle(window, 30)
    note = providers.window_label
    qtbot.waitUntil(lambda: "model<b>B" in note.text(), timeout=15_000)
    assert note.textFormat() == Qt.TextFormat.PlainText
    agents = window.show_agents()
    settle(window, 30)
    window.grab()
    assert _obeyed(QApplication.allWidgets()) == []
    providers.close()
    agents.close()
