"""Settings → Providers speaking plainly: Detect against a server that is not there says
it could not be reached (in words, no errno), and a quick connection test gives its
time in milliseconds rather than "0.00 s"."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QApplication, QLabel
from pytestqt.qtbot import QtBot

from tests.gui.journey import click, named, replace_text
from workbench.core.provider import ProviderConfig
from workbench.engine.providers import ProviderSettings
from workbench.engine.workspace import Workspace
from workbench.gui.dialogs.providers import ProvidersDialog
from workbench.gui.main_window import MainWindow

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "providers"))

from protocol_server import ProtocolServer, free_port  # noqa: E402


def _open(qtbot: QtBot, window: MainWindow) -> ProvidersDialog:
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    window.providers_action.trigger()
    dialog = window._providers_dialog
    assert isinstance(dialog, ProvidersDialog)
    qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog, timeout=5_000)
    return dialog


def _new_provider(qtbot: QtBot, dialog: ProvidersDialog, url: str, model: str) -> None:
    click(qtbot, dialog, "Add a provider")
    replace_text(qtbot, dialog, "Provider name", "local")
    replace_text(qtbot, dialog, "Base URL", url)
    replace_text(qtbot, dialog, "Model", model)


def test_detect_against_a_dead_port_says_the_server_cannot_be_reached(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    port = free_port()  # bound, then closed: nothing listens there
    window = open_window(workspace)
    dialog = _open(qtbot, window)
    for model, known in (("some-model", False), ("gpt-4o", True)):
        _new_provider(qtbot, dialog, f"http://127.0.0.1:{port}/v1", model)
        with qtbot.waitSignal(dialog.window_detected, timeout=30_000) as detected:
            click(qtbot, dialog, "Detect the context window")
        note = dialog.window_label.text()
        assert f"127.0.0.1:{port}" in note and "could not be reached" in note, note
        assert "connection refused" in note and "nothing is listening" in note, note
        assert "Errno" not in note and "[" not in note, note
        assert "Neither the server" not in note
        found = detected.args[0]
        assert (found.window is not None) == known
        if known:
            assert f"gpt-4o is known to have {found.window:,} tokens" in note
            # Shown as the table's, not filled in as the user's own value.
            assert dialog.window_spin.value() == 0
            assert dialog.window_spin.text() == f"{found.window:,} tokens (known model)"
        else:
            assert "set the window yourself" in note
        dialog.close_without_asking()
        dialog = _open(qtbot, window)


def test_a_connection_test_to_a_dead_port_says_refused_in_words(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    port = free_port()
    ProviderSettings(workspace.db).add(ProviderConfig(
        name="gone", kind="openai", base_url=f"http://127.0.0.1:{port}/v1", model="m"))
    window = open_window(workspace)
    dialog = _open(qtbot, window)
    with qtbot.waitSignal(dialog.connection_tested, timeout=30_000):
        click(qtbot, dialog, "Test the connection")
    status = named(dialog, "Provider status", QLabel).text()
    assert "connection refused" in status and "Errno" not in status, status


def test_a_quick_answer_is_timed_in_milliseconds(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    open_window: Callable[..., MainWindow],
) -> None:
    ProviderSettings(workspace.db).add(ProviderConfig(
        name="local", kind="openai", base_url=server.url, model=server.model))
    window = open_window(workspace)
    dialog = _open(qtbot, window)
    with qtbot.waitSignal(dialog.connection_tested, timeout=15_000) as tested:
        click(qtbot, dialog, "Test the connection")
    report = tested.args[0]
    assert report.ok
    status = named(dialog, "Provider status", QLabel).text()
    took = re.search(r"answered in (.+?);", status)
    assert took is not None, status
    if report.seconds < 1:
        assert re.fullmatch(r"\d+ ms|under 1 ms", took.group(1)), took.group(1)
    assert "0.00 s" not in status
    assert "context window 4,096 tokens" in status
