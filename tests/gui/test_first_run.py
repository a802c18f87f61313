"""First run: the sample session in every panel, and local model servers offered."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pytestqt.qtbot import QtBot

from workbench.engine.providers import ProviderSettings
from workbench.engine.workspace import Workspace
from workbench.gui.main_window import MainWindow


@pytest.fixture
def models_server() -> Iterator[int]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            data = json.dumps({"data": [{"id": "gemma-3-270m"}]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_first_run_on_an_empty_database_shows_the_sample_session(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    sample = workspace.ensure_sample_session()
    assert sample is not None and sample.message_count > 0
    assert workspace.ensure_sample_session() is None  # once per database
    window = open_window(workspace)
    # The window opens the only session: the sample, in the browser and the timeline.
    qtbot.waitUntil(lambda: window.ctx.current_session_id == sample.id, timeout=5_000)
    browser_model = window.browser.view.model()
    titles = [browser_model.index(r, 0).data() for r in range(browser_model.rowCount())]
    assert any(sample.title in str(t) for t in titles)
    qtbot.waitUntil(lambda: window.timeline.model.rowCount() == sample.message_count,
                    timeout=5_000)
    # Its context (facts, summary, tasks) is there for the Context panel to show.
    context = workspace.repo.get_context(sample.id)
    assert context.facts and context.summary and context.tasks


def test_local_servers_are_offered_once_and_add_stores_the_provider(
    qtbot: QtBot, workspace: Workspace, models_server: int,
    open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    bar = window.offer_local_servers([("llama.cpp", models_server), ("LM Studio", closed_port())])
    assert bar is not None
    qtbot.waitUntil(bar.isVisible, timeout=5_000)
    url = f"http://127.0.0.1:{models_server}/v1"
    qtbot.waitUntil(lambda: url in bar.add_buttons, timeout=5_000)
    assert [s.label for s in bar.servers] == ["llama.cpp"]  # the closed port: nothing
    assert "Settings → Providers" in bar.hint.text()  # how to add a hosted provider
    with qtbot.waitSignal(bar.provider_added, timeout=5_000) as added:
        bar.add_buttons[url].click()
    config = added.args[0]
    stored = ProviderSettings(workspace.db).get(config.name)
    assert (stored.base_url, stored.model, stored.kind) == (url, "gemma-3-270m", "openai")
    assert bar.add_buttons[url].text() == "Added"
    # The composer offers the new provider at once.
    composer = window.composer
    assert composer is not None
    qtbot.waitUntil(lambda: config.name in [composer.provider_box.itemText(i)
                                            for i in range(composer.provider_box.count())],
                    timeout=5_000)
    window.ctx.workers.wait_idle()
    # The offer is made once per database; Dismiss takes the bar away.
    assert window.offer_local_servers([("llama.cpp", models_server)]) is None
    bar.dismiss_button.click()
    assert window.first_run_bar is None and not bar.isVisible()


def test_when_nothing_answers_the_bar_says_so(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    bar = window.offer_local_servers([("Ollama", closed_port())])
    assert bar is not None
    qtbot.waitUntil(lambda: "No local model server answered" in bar.title.text(),
                    timeout=5_000)
    assert bar.add_buttons == {}


def test_the_bar_follows_a_provider_added_in_the_settings(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
    models_server: int,
) -> None:
    window = open_window(workspace)
    bar = window.offer_local_servers([("Ollama", closed_port())])
    assert bar is not None
    qtbot.waitUntil(lambda: "No local model server answered" in bar.title.text(),
                    timeout=5_000)
    # Settings → Providers…: add one, as a person does, and save.
    from PySide6.QtWidgets import QApplication

    from tests.gui.journey import click, click_into, named, type_text

    window.providers_action.trigger()
    dialog = window._providers_dialog
    qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog)
    click(qtbot, dialog, "Add a provider")
    for field, text in (("Provider name", "local"),
                        ("Base URL", f"http://127.0.0.1:{models_server}/v1"),
                        ("Model", "gemma-3-270m")):
        click_into(qtbot, named(dialog, field))
        type_text(qtbot, text)
    with qtbot.waitSignal(dialog.provider_saved, timeout=10_000):
        click(qtbot, dialog, "Save the provider")
    qtbot.waitUntil(lambda: "No local model server answered" not in bar.title.text())
    assert "set up" in bar.title.text()
    assert [c.name for c in ProviderSettings(workspace.db).list()] == ["local"]
