"""Settings → Providers: add a provider (its key goes to the keyring, never the database),
test its connection against the protocol server and a dead port, detect its window,
remove it."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from keyring.backend import KeyringBackend
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QLineEdit,
    QListWidget,
    QMessageBox,
    QPlainTextEdit,
    QWidget,
)
from pytestqt.qtbot import QtBot

import workbench.gui.dialogs.settings_form as settings_form
from tests.gui.conftest import settle
from tests.memory_keyring import MemoryKeyring
from workbench.core.provider import ProviderConfig
from workbench.engine.providers import ProviderSettings
from workbench.engine.workspace import Workspace
from workbench.gui.dialogs.providers import KEY_ENV, KEY_KEYRING, ProvidersDialog
from workbench.gui.main_window import MainWindow

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "providers"))

from protocol_server import Fault, ProtocolServer, free_port  # noqa: E402

from tests.gui.journey import (  # noqa: E402
    click,
    click_into,
    focus,
    named,
    replace_text,
    type_text,
    with_modal_dialog,
)

SECRET = "sk-test-GUI-SENTINEL-93c1f0aa55e2"


def _open(window: MainWindow, qtbot: QtBot) -> ProvidersDialog:
    window.providers_action.trigger()
    dialog = window._providers_dialog
    assert isinstance(dialog, ProvidersDialog)
    qtbot.waitExposed(dialog)
    qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog, timeout=5_000)
    return dialog


def _fill(qtbot: QtBot, dialog: ProvidersDialog, name: str, url: str, model: str) -> None:
    dialog.add_button.click()
    assert dialog.name_edit.text() == ""
    qtbot.keyClicks(dialog.name_edit, name)
    dialog.kind_box.setCurrentIndex(dialog.kind_box.findData("openai"))
    qtbot.keyClicks(dialog.base_url_edit, url)
    qtbot.keyClicks(dialog.model_edit, model)


def _save(qtbot: QtBot, dialog: ProvidersDialog) -> ProviderConfig:
    with qtbot.waitSignal(dialog.provider_saved, timeout=10_000) as saved:
        dialog.save_button.click()
    return saved.args[0]


def test_a_provider_added_in_the_dialog_is_stored_without_its_key(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    memory_keyring: MemoryKeyring, open_window: Callable[..., MainWindow],
) -> None:
    server.api_key = SECRET  # the server refuses requests without it
    window = open_window(workspace)
    dialog = _open(window, qtbot)
    assert dialog.keyring_usable
    _fill(qtbot, dialog, "local", server.url, server.model)
    dialog.key_source_box.setCurrentIndex(dialog.key_source_box.findData(KEY_KEYRING))
    assert dialog.key_edit.isVisibleTo(dialog) and dialog.key_edit.isEnabled()
    assert not dialog.key_env_edit.isVisibleTo(dialog)
    qtbot.keyClicks(dialog.keyring_entry_edit, "local-server")
    qtbot.keyClicks(dialog.key_edit, SECRET)
    dialog.max_output_spin.setValue(512)
    stored = _save(qtbot, dialog)
    window.ctx.workers.wait_idle()

    assert dialog.key_edit.text() == ""  # the typed key does not linger in the form
    assert dialog.names() == ["local"]
    assert "Saved provider 'local'" in dialog.status_label.text()
    again = ProviderSettings(workspace.db).get("local")
    assert stored.to_json() == again.to_json()
    assert (again.api_key_keyring, again.api_key_env, again.max_output_tokens) == (
        "local-server", None, 512)
    assert SECRET not in repr(again.to_json())
    # The key is in the keyring, and in no byte of the database files.
    assert SECRET in memory_keyring.passwords.values()
    for suffix in ("", "-wal", "-shm"):
        file = Path(str(workspace.db_path) + suffix)
        if file.exists():
            assert SECRET.encode() not in file.read_bytes()
    # The composer's provider selector caught up.
    assert window.composer is not None
    assert window.composer.provider_box.findData("local") >= 0

    # And the key works: the connection test finds it in the keyring.
    with qtbot.waitSignal(dialog.connection_tested, timeout=15_000) as tested:
        dialog.test_button.click()
    assert tested.args[0].ok
    assert server.requests[-1].headers["authorization"] == f"Bearer {SECRET}"


def test_test_connection_reports_success_in_words(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    open_window: Callable[..., MainWindow],
) -> None:
    window, dialog = _local_provider_dialog(qtbot, workspace, server, open_window)
    assert dialog.names() == ["local"] and dialog.name_edit.text() == "local"
    assert not dialog.dirty()
    with qtbot.waitSignal(dialog.connection_tested, timeout=15_000) as tested:
        dialog.test_button.click()
        # The test runs on a worker; meanwhile its button cancels it.
        assert dialog.test_button.accessibleName() == "Cancel the connection test"
    report = tested.args[0]
    assert report.ok
    text = dialog.status_label.text()
    assert text.startswith("Connected to 'local'")
    assert f"{server.model} answered" in text and "4,096 tokens" in text
    assert dialog.test_button.accessibleName() == "Test the connection"
    assert any(r.path == "/v1/chat/completions" for r in server.requests)


def test_a_connection_test_of_a_server_that_never_answers_can_be_cancelled(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    open_window: Callable[..., MainWindow],
) -> None:
    window, dialog = _local_provider_dialog(qtbot, workspace, server, open_window)
    server.script(Fault("stall_headers"))  # the server takes the request, says nothing
    click(qtbot, dialog, "Test the connection")
    assert server.stalling.wait(5)
    assert "Testing the connection to 'local'" in dialog.status_label.text()
    tested: list[object] = []
    dialog.connection_tested.connect(tested.append)
    click(qtbot, dialog, "Cancel the connection test")
    assert dialog.status_label.text() == "Stopped waiting: 'local' had not answered."
    assert named(dialog, "Test the connection", QAbstractButton).isEnabled()
    # The connection it waited on is shut (nothing holds a thread, or the window's
    # close, for the five-minute read time-out).
    assert server.hung_up.wait(5)
    settle(window)
    # A test after it runs and says so.
    with qtbot.waitSignal(dialog.connection_tested, timeout=15_000) as again:
        click(qtbot, dialog, "Test the connection")
    assert again.args[0].ok and tested == [again.args[0]]
    assert dialog.status_label.text().startswith("Connected to 'local'")


def test_quitting_while_a_connection_test_waits_says_nothing_and_ends_it(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    open_window: Callable[..., MainWindow],
) -> None:
    window, dialog = _local_provider_dialog(qtbot, workspace, server, open_window)
    server.script(Fault("stall_headers"))
    click(qtbot, dialog, "Test the connection")
    assert server.stalling.wait(5)
    said: list[str] = []
    window.ctx.error_reported.connect(lambda text, _cause: said.append(text))
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5_000)
    qtbot.keyClick(focus(), Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier)
    assert not window.isVisible()
    assert server.hung_up.wait(5)  # the test's connection was shut, not waited out
    QApplication.processEvents()
    assert said == []  # no "Stopped." box on the way out


def test_test_connection_to_a_dead_port_names_the_problem(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    port = free_port()  # bound, then closed: nothing listens there
    window = open_window(workspace)
    dialog = _open(window, qtbot)
    _fill(qtbot, dialog, "gone", f"http://127.0.0.1:{port}/v1", "some-model")
    assert dialog.dirty()
    # Testing an unsaved form saves it first, then tests the stored config.
    with qtbot.waitSignal(dialog.connection_tested, timeout=30_000) as tested:
        dialog.test_button.click()
    report = tested.args[0]
    assert not report.ok
    text = dialog.status_label.text()
    assert text.startswith(f"Cannot use 'gone' (127.0.0.1:{port})")
    assert "connect" in text.lower() or "reach" in text.lower()
    # The provider is named once, not again by the error's own sentence.
    assert text.count("'gone'") == 1 and text.count(f"127.0.0.1:{port}") == 1, text
    assert "Check that it is running" in text
    assert ProviderSettings(workspace.db).get("gone").base_url.endswith(f":{port}/v1")


def test_detect_shows_the_servers_window_as_the_servers(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    dialog = _open(window, qtbot)
    _fill(qtbot, dialog, "local", server.url, server.model)
    field = named(dialog, "Context window", QAbstractSpinBox)
    assert field.text() == "Not set"
    with qtbot.waitSignal(dialog.window_detected, timeout=15_000):
        click(qtbot, dialog, "Detect the context window")
    assert field.text() == "4,096 tokens (from the server)"
    assert "The server says" in named(dialog, "Context window detection").text()
    stored = _save(qtbot, dialog)
    assert stored.context_window is None  # the server's, not the user's

    # The walk: Detect on a stored provider filled in the server's 4,096 as if typed,
    # so Esc asked "Discard the unsaved changes?" about a form nobody had changed.
    with qtbot.waitSignal(dialog.window_detected, timeout=15_000):
        click(qtbot, dialog, "Detect the context window")
    assert field.text() == "4,096 tokens (from the server)"
    assert not dialog.edited()
    dialog.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog, timeout=5_000)
    qtbot.keyClick(focus(), Qt.Key.Key_Escape)  # closes: nothing to ask about
    assert not dialog.isVisible()
    assert ProviderSettings(workspace.db).get("local").context_window is None


def test_a_number_typed_after_detect_is_the_one_saved(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    dialog = _open(window, qtbot)
    _fill(qtbot, dialog, "local", server.url, server.model)
    with qtbot.waitSignal(dialog.window_detected, timeout=15_000):
        click(qtbot, dialog, "Detect the context window")
    replace_text(qtbot, dialog, "Context window", "3000")
    assert _save(qtbot, dialog).context_window == 3000
    # A changed server address makes what was found about the old one go.
    replace_text(qtbot, dialog, "Context window", "0")
    with qtbot.waitSignal(dialog.window_detected, timeout=15_000):
        click(qtbot, dialog, "Detect the context window")
    field = named(dialog, "Context window", QAbstractSpinBox)
    assert field.text() == "4,096 tokens (from the server)"
    replace_text(qtbot, dialog, "Base URL", "http://127.0.0.1:9/v1")
    assert field.text() == "Not set"


def test_without_a_keyring_the_form_says_so_and_offers_a_variable(
    qtbot: QtBot, workspace: Workspace, no_keyring: KeyringBackend,
    open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    dialog = _open(window, qtbot)
    _fill(qtbot, dialog, "hosted", "https://api.example.com/v1", "gpt-4o")
    dialog.key_source_box.setCurrentIndex(dialog.key_source_box.findData(KEY_KEYRING))
    assert not dialog.key_edit.isEnabled()
    note = dialog.keyring_note.text()
    assert "no OS keyring" in note and "environment variable" in note
    assert dialog.use_env_button.isVisibleTo(dialog)
    dialog.use_env_button.click()
    assert dialog.key_source_box.currentData() == KEY_ENV
    assert dialog.key_env_edit.isVisibleTo(dialog)
    assert dialog.focusWidget() is dialog.key_env_edit
    qtbot.keyClicks(dialog.key_env_edit, "EXAMPLE_API_KEY")
    stored = _save(qtbot, dialog)
    assert (stored.api_key_env, stored.api_key_keyring) == ("EXAMPLE_API_KEY", None)


def test_a_refused_config_is_told_and_nothing_is_stored(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    dialog = _open(window, qtbot)
    _fill(qtbot, dialog, "bad", "localhost:8080", "m")
    dialog.save_button.click()
    qtbot.waitUntil(lambda: "base URL" in dialog.status_label.text(), timeout=10_000)
    assert ProviderSettings(workspace.db).list() == []


def test_remove_asks_first_and_then_removes(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    open_window: Callable[..., MainWindow], monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = ProviderSettings(workspace.db)
    for name in ("first", "second"):
        settings.add(ProviderConfig(name=name, kind="openai", base_url=server.url,
                                    model=server.model))
    window = open_window(workspace)
    assert window.composer is not None
    dialog = _open(window, qtbot)
    assert dialog.select("second")
    asked: list[str] = []
    answer = [QMessageBox.StandardButton.No]

    def question(_parent: object, _title: str, text: str, *_args: object) -> object:
        asked.append(text)
        return answer[0]

    monkeypatch.setattr(settings_form, "message_box",
                        lambda parent, _icon, title, text, *a: question(parent, title, text))
    dialog.remove_button.click()
    window.ctx.workers.wait_idle()
    assert len(asked) == 1 and "'second'" in asked[0]
    assert [c.name for c in settings.list()] == ["first", "second"]

    answer[0] = QMessageBox.StandardButton.Yes
    with qtbot.waitSignal(dialog.provider_removed, timeout=10_000) as removed:
        dialog.remove_button.click()
    assert removed.args == ["second"]
    assert [c.name for c in settings.list()] == ["first"]
    assert dialog.names() == ["first"]
    assert "Removed provider 'second'" in dialog.status_label.text()
    assert window.composer.provider_box.findData("second") < 0


def inputs_without_names(dialog: QWidget) -> list[str]:
    """Input widgets of ``dialog`` that a screen reader could not name."""
    kinds = (QAbstractButton, QAbstractSpinBox, QComboBox, QLineEdit, QListWidget,
             QPlainTextEdit)
    missing = []
    for widget in dialog.findChildren(QWidget):
        if not isinstance(widget, kinds) or isinstance(widget.parent(), QAbstractSpinBox
                                                       | QComboBox):
            continue  # a spin box's or combo box's own editor is named through its owner
        if not widget.accessibleName() and not (
                isinstance(widget, QAbstractButton) and widget.text()):
            missing.append(f"{type(widget).__name__} {widget.objectName()!r}")
    return missing


def test_every_input_has_an_accessible_name(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    assert inputs_without_names(_open(window, qtbot)) == []
    window.agents_action.trigger()
    assert inputs_without_names(window._agents_dialog) == []


def test_switching_providers_with_unsaved_edits_asks_first(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = ProviderSettings(workspace.db)
    for name in ("alpha", "beta"):
        settings.add(ProviderConfig(name=name, kind="openai",
                                    base_url=f"http://127.0.0.1:9/{name}", model="m"))
    answers = iter([QMessageBox.StandardButton.Cancel, QMessageBox.StandardButton.Discard])
    asked: list[str] = []

    def question(_parent: object, _title: str, text: str, *_a: object) -> object:
        asked.append(text)
        return next(answers)

    monkeypatch.setattr(settings_form, "message_box",
                        lambda parent, _icon, title, text, *a: question(parent, title, text))
    window = open_window(workspace)
    dialog = _open(window, qtbot)
    assert dialog.select("alpha") and dialog.select("beta") and asked == []
    dialog.model_edit.setText("edited-model")
    dialog.select("alpha")  # Cancel: still on beta, the edit kept
    assert len(asked) == 1 and "'beta'" in asked[0]
    assert dialog.name_edit.text() == "beta" and dialog.model_edit.text() == "edited-model"
    dialog.select("alpha")  # Discard
    assert dialog.name_edit.text() == "alpha"
    assert settings.get("beta").model == "m"  # nothing was stored


def test_editing_every_field_of_a_saved_provider_saves_it(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    open_window: Callable[..., MainWindow],
) -> None:
    """A person selects a stored provider, changes its base URL, model and name with the
    keyboard, presses Save, then Test Connection: both work (they failed with
    "got multiple values for argument 'name'")."""
    settings = ProviderSettings(workspace.db)
    settings.add(ProviderConfig(name="old", kind="openai",
                                base_url="http://127.0.0.1:9/v1", model="first-model"))
    window = open_window(workspace)
    dialog = _open(window, qtbot)
    stored_list = named(dialog, "Stored providers", QListWidget)
    item = stored_list.item(0)
    qtbot.mouseClick(stored_list.viewport(), Qt.MouseButton.LeftButton,
                     pos=stored_list.visualItemRect(item).center())
    assert named(dialog, "Base URL", QLineEdit).text() == "http://127.0.0.1:9/v1"

    replace_text(qtbot, dialog, "Base URL", server.url)
    replace_text(qtbot, dialog, "Model", server.model)
    replace_text(qtbot, dialog, "Provider name", "renamed")
    with qtbot.waitSignal(dialog.provider_saved, timeout=10_000):
        click(qtbot, dialog, "Save the provider")
    window.ctx.workers.wait_idle()
    assert [c.name for c in settings.list()] == ["renamed"]
    again = settings.get("renamed")
    assert (again.base_url, again.model) == (server.url, server.model)
    assert "Saved provider 'renamed'" in named(dialog, "Provider status").text()
    assert dialog.names() == ["renamed"]

    # Test Connection on the saved provider: it answers, and the window the server
    # reports is shown as the server's, not kept as the user's own value.
    replace_text(qtbot, dialog, "Model", "second-model")
    with qtbot.waitSignal(dialog.connection_tested, timeout=15_000) as tested:
        click(qtbot, dialog, "Test the connection")
    assert tested.args[0].ok, tested.args[0].sentence
    window.ctx.workers.wait_idle()
    stored = settings.get("renamed")
    assert stored.model == "second-model"
    assert stored.context_window is None
    assert named(dialog, "Context window", QAbstractSpinBox).text() == \
        f"{server.n_ctx:,} tokens (from the server)"
    assert "Connected to 'renamed'" in named(dialog, "Provider status").text()


def test_detect_after_a_failure_clears_the_old_error(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    dialog = _open(window, qtbot)
    _fill(qtbot, dialog, "bad", "localhost:8080", "m")
    click(qtbot, dialog, "Save the provider")
    status = named(dialog, "Provider status")
    qtbot.waitUntil(lambda: "base URL" in status.text(), timeout=10_000)
    replace_text(qtbot, dialog, "Base URL", server.url)
    with qtbot.waitSignal(dialog.window_detected, timeout=15_000):
        click(qtbot, dialog, "Detect the context window")
    assert named(dialog, "Context window", QAbstractSpinBox).text() == \
        f"{server.n_ctx:,} tokens (from the server)"
    assert "base URL" not in status.text()


def test_the_remove_question_shows_a_name_that_looks_like_html_as_typed(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    ProviderSettings(workspace.db).add(ProviderConfig(
        name="<i>Local</i>", kind="openai", base_url="http://127.0.0.1:9/v1", model="m"))
    window = open_window(workspace)
    dialog = _open(window, qtbot)
    assert dialog.select("<i>Local</i>")
    seen: list[tuple[Qt.TextFormat, str]] = []

    def answer_no(box: QWidget) -> None:
        assert isinstance(box, QMessageBox)
        seen.append((box.textFormat(), box.text()))
        click(qtbot, box, "No")

    with_modal_dialog(qtbot, lambda: click(qtbot, dialog, "Remove the selected provider"),
                      answer_no)
    assert seen and seen[0][0] == Qt.TextFormat.PlainText
    assert "'<i>Local</i>'" in seen[0][1]
    assert [c.name for c in ProviderSettings(workspace.db).list()] == ["<i>Local</i>"]


def test_an_error_box_shows_a_title_that_looks_like_html_as_typed(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import workbench.gui.main_window as main_window_module

    monkeypatch.setattr(main_window_module, "error_boxes_shown", lambda: True)
    window = open_window(workspace)
    seen: list[tuple[Qt.TextFormat, str]] = []

    def close(box: QWidget) -> None:
        assert isinstance(box, QMessageBox)
        seen.append((box.textFormat(), box.text()))
        click(qtbot, box, "OK")

    said = "The title of the session “Porto <i>weekend</i>” was changed elsewhere."
    with_modal_dialog(qtbot, lambda: window.ctx.report_error(said), close)
    assert seen == [(Qt.TextFormat.PlainText, said)]


def test_closing_the_dialog_while_its_save_runs_asks_nothing_and_saves(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The walk: Save, then Esc before the save had come back asked to discard
    # "unsaved changes" (on the team store a save takes a round trip or more).
    import threading

    asked: list[str] = []
    monkeypatch.setattr(settings_form, "message_box",
                        lambda _p, _i, _t, text, *a: asked.append(text)
                        or QMessageBox.StandardButton.Cancel)
    window = open_window(workspace)
    dialog = _open(window, qtbot)
    held = threading.Event()
    window.ctx.workers.write(held.wait, name="another write first")  # the save waits
    try:
        replace_text(qtbot, dialog, "Provider name", "local")
        replace_text(qtbot, dialog, "Base URL", "http://127.0.0.1:9/v1")
        replace_text(qtbot, dialog, "Model", "m")
        click(qtbot, dialog, "Save the provider")
        assert ProviderSettings(workspace.db).list() == []  # still waiting
        named(dialog, "Model").setFocus()
        qtbot.keyClick(dialog, Qt.Key.Key_Escape)
        assert asked == [] and not dialog.isVisible()
    finally:
        held.set()
    qtbot.waitUntil(lambda: [c.name for c in ProviderSettings(workspace.db).list()]
                    == ["local"], timeout=10_000)
    # An edit typed after Save is still asked about.
    window.ctx.workers.wait_idle()
    dialog = _open(window, qtbot)
    assert dialog.select("local")
    replace_text(qtbot, dialog, "Model", "other")
    qtbot.keyClick(dialog, Qt.Key.Key_Escape)
    assert len(asked) == 1 and "'local'" in asked[0] and dialog.isVisible()


def _gauge_and_dialog(qtbot: QtBot, workspace: Workspace, window: MainWindow,
                      session_id: int) -> tuple[str, str, str, str]:
    """The gauge's text and tooltip, then the dialog's window field and note as shown."""
    window.open_session(session_id)
    composer = window.composer
    assert composer is not None
    with qtbot.waitSignal(composer.gauge_changed, timeout=15_000):
        composer.refresh_gauge()
    dialog = _open(window, qtbot)
    note = dialog.window_label
    qtbot.waitUntil(lambda: note.isVisibleTo(dialog) and "tokens" in note.text(),
                    timeout=15_000)
    field = named(dialog, "Context window", QAbstractSpinBox)
    return composer.gauge.format(), composer.gauge.toolTip(), field.text(), note.text()


def test_the_dialog_shows_the_window_detected_from_the_server_that_the_gauge_uses(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., object],
    open_window: Callable[..., MainWindow],
) -> None:
    # The walk: "Context window: Not set" in the dialog while the gauge read "/ 8,192".
    server = ProtocolServer(n_ctx=8192).start()
    try:
        ProviderSettings(workspace.db).add(ProviderConfig(
            name="local", kind="openai", base_url=server.url, model=server.model))
        info = make_session(workspace, "Chat", [("user", "Hi"), ("assistant", "Hello")])
        window = open_window(workspace)
        gauge, tip, field, note = _gauge_and_dialog(qtbot, workspace, window, info.id)
    finally:
        server.stop()
    assert gauge.endswith("/ 8,192 tokens")
    assert "The window, 8,192 tokens, is detected from the server." in tip
    assert "Not set" not in field and "8,192" in field and "server" in field
    assert note == "Requests are measured against 8,192 tokens, detected from the server."
    # Showing it stored nothing: the server's figure stays the server's.
    assert ProviderSettings(workspace.db).get("local").context_window is None


def test_the_dialog_says_a_window_set_by_the_user_is_the_one_the_gauge_uses(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., object],
    open_window: Callable[..., MainWindow],
) -> None:
    server = ProtocolServer(n_ctx=None).start()  # a server that does not say
    try:
        ProviderSettings(workspace.db).add(ProviderConfig(
            name="local", kind="openai", base_url=server.url, model=server.model,
            context_window=6000))
        info = make_session(workspace, "Chat", [("user", "Hi"), ("assistant", "Hello")])
        window = open_window(workspace)
        gauge, tip, field, note = _gauge_and_dialog(qtbot, workspace, window, info.id)
    finally:
        server.stop()
    assert gauge.endswith("/ 6,000 tokens")
    assert "The window, 6,000 tokens, is set by you." in tip
    assert field == "6,000 tokens"
    assert note == "Requests are measured against 6,000 tokens, set by you."


def test_the_dialog_opened_again_does_not_repeat_the_last_visits_sentence(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    # The walk: closed after a save and opened again later, it still said "Saved
    # provider 'local'." as if something had just been saved.
    window = open_window(workspace)
    dialog = _open(window, qtbot)
    replace_text(qtbot, dialog, "Provider name", "local")
    replace_text(qtbot, dialog, "Base URL", "http://127.0.0.1:9/v1")
    replace_text(qtbot, dialog, "Model", "m")
    with qtbot.waitSignal(dialog.provider_saved, timeout=10_000):
        click(qtbot, dialog, "Save the provider")
    assert "Saved provider 'local'" in named(dialog, "Provider status").text()
    qtbot.keyClick(focus(), Qt.Key.Key_Escape)
    assert not dialog.isVisible()
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5_000)
    again = _open(window, qtbot)
    assert again.names() == ["local"]
    assert again.status_label.text() == ""


def test_keys_on_test_connection_wait_for_it_and_do_not_fall_on_close(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    open_window: Callable[..., MainWindow],
) -> None:
    # The walk: Space on Test Connection greyed it out and the keys fell on Close, so a
    # second Space closed the dialog; Space on Detect sent the digits typed next into
    # Max output.
    window, dialog = _local_provider_dialog(qtbot, workspace, server, open_window)
    # (Enter is Save anywhere in the form, as before; it is no longer Close.) While the
    # test runs its button cancels it (a second Space there would), so the keys stay on it.
    for name, signal, keys, running in (
            ("Test the connection", dialog.connection_tested, (Qt.Key.Key_4,),
             "Cancel the connection test"),
            ("Detect the context window", dialog.window_detected,
             (Qt.Key.Key_Space, Qt.Key.Key_4), None)):
        button = named(dialog, name, QAbstractButton)
        button.setFocus()
        with qtbot.waitSignal(signal, timeout=15_000):
            qtbot.keyClick(focus(), Qt.Key.Key_Space)
            if running is None:
                assert not button.isEnabled()  # it runs on a worker
            else:
                assert button.isEnabled() and button.accessibleName() == running
                assert focus() is button
            for key in keys:
                qtbot.keyClick(focus(), key)
            assert dialog.isVisible()
        assert focus() is button and button.isEnabled()
        assert button.accessibleName() == name
    assert dialog.max_output_spin.value() == 0
    assert len([r for r in server.requests if r.path == "/v1/chat/completions"]) == 1


def test_a_click_on_an_unset_window_and_digits_typed_set_it(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    # The walk: a click into "Not set" put the caret inside the words and every digit
    # typed after it was refused; only Tab into the field selected it.
    ProviderSettings(workspace.db).add(ProviderConfig(
        name="local", kind="openai", base_url=f"http://127.0.0.1:{free_port()}/v1",
        model="some-model"))
    window = open_window(workspace)
    dialog = _open(window, qtbot)
    for name, typed in (("Context window", "6000"), ("Max output tokens", "512")):
        field = named(dialog, name, QAbstractSpinBox)
        assert field.text() == "Not set"
        click_into(qtbot, field.lineEdit(), QPoint(12, field.height() // 2))  # the words
        qtbot.waitUntil(lambda field=field: field.lineEdit().hasSelectedText())
        type_text(qtbot, typed)
    stored = _save(qtbot, dialog)
    assert (stored.context_window, stored.max_output_tokens) == (6000, 512)


def _local_provider_dialog(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    open_window: Callable[..., MainWindow],
) -> tuple[MainWindow, ProvidersDialog]:
    """The window, and its Providers dialog opened on "local": a provider of the protocol
    server with no window of its own."""
    ProviderSettings(workspace.db).add(ProviderConfig(
        name="local", kind="openai", base_url=server.url, model=server.model))
    window = open_window(workspace)
    return window, _open(window, qtbot)


def _reopen(qtbot: QtBot, window: MainWindow, dialog: ProvidersDialog) -> ProvidersDialog:
    """Close the dialog with Esc and open it again from the menu, as a person would."""
    dialog.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog, timeout=5_000)
    qtbot.keyClick(focus(), Qt.Key.Key_Escape)
    assert not dialog.isVisible()
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5_000)
    return _open(window, qtbot)


def _field_when_shown(qtbot: QtBot, dialog: ProvidersDialog, wanted: str) -> str:
    field = named(dialog, "Context window", QAbstractSpinBox)
    qtbot.waitUntil(lambda: wanted in field.text(), timeout=15_000)
    return field.text()


def test_test_connection_shows_the_servers_window_without_saving_it_as_yours(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    open_window: Callable[..., MainWindow],
) -> None:
    # The walk: Test Connection on a provider with no window of its own saved the
    # server's 4,096 as the user's value ("set by you"), unasked.
    window, dialog = _local_provider_dialog(qtbot, workspace, server, open_window)
    _field_when_shown(qtbot, dialog, "from the server")
    with qtbot.waitSignal(dialog.connection_tested, timeout=15_000) as tested:
        click(qtbot, dialog, "Test the connection")
    assert tested.args[0].ok and tested.args[0].context_window == server.n_ctx
    window.ctx.workers.wait_idle()
    QApplication.processEvents()
    assert "4,096 tokens" in named(dialog, "Provider status").text()
    assert _field_when_shown(qtbot, dialog, "4,096") == "4,096 tokens (from the server)"
    assert "detected from the server" in named(dialog, "Context window detection").text()
    assert ProviderSettings(workspace.db).get("local").context_window is None
    assert not dialog.edited()  # nothing to save, nothing to ask about on close

    # Save writes what the form holds as the user's: no window of theirs.
    with qtbot.waitSignal(dialog.provider_saved, timeout=10_000):
        click(qtbot, dialog, "Save the provider")
    assert ProviderSettings(workspace.db).get("local").context_window is None

    # Opened again, it says the same: the window is the server's.
    dialog = _reopen(qtbot, window, dialog)
    assert _field_when_shown(qtbot, dialog, "from the server") == \
        "4,096 tokens (from the server)"
    assert ProviderSettings(workspace.db).get("local").context_window is None


def test_a_window_typed_before_test_connection_is_the_one_saved(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    open_window: Callable[..., MainWindow],
) -> None:
    window, dialog = _local_provider_dialog(qtbot, workspace, server, open_window)
    _field_when_shown(qtbot, dialog, "from the server")
    replace_text(qtbot, dialog, "Context window", "6000")
    with qtbot.waitSignal(dialog.connection_tested, timeout=15_000) as tested:
        click(qtbot, dialog, "Test the connection")  # saves the edited form first
    assert tested.args[0].ok
    window.ctx.workers.wait_idle()
    QApplication.processEvents()
    assert ProviderSettings(workspace.db).get("local").context_window == 6000
    assert named(dialog, "Context window", QAbstractSpinBox).text() == "6,000 tokens"
    dialog = _reopen(qtbot, window, dialog)
    assert named(dialog, "Context window", QAbstractSpinBox).text() == "6,000 tokens"
    assert ProviderSettings(workspace.db).get("local").context_window == 6000
