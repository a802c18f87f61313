"""Settings → Providers: the model servers the workbench talks to.

The stored provider configs are listed on the left; the form on the right edits one:
name, kind, base URL, model, where its API key lives, context window and max output
tokens. The database never holds a key: the form names an environment variable or an
OS keyring entry. With the keyring chosen, a key typed into the form is put *into* the
keyring on Save and the field is cleared; where no keyring backend exists the form says
so and offers an environment variable instead.

"Detect" asks the server for its context window, "Test connection" sends a one-token
request; both run on network workers and answer with a sentence. A window the server
(or the known-model table) gives is shown in the unset field with where it came from,
never filled in as the user's value: only a number typed there is saved as theirs.
Saving and removing run on the database writer; afterwards
:attr:`AppContext.providers_changed` tells the composer to read the providers again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from workbench.core.provider import PROVIDER_KINDS, CancelToken, ProviderConfig
from workbench.engine.providers import (
    ConnectionReport,
    ProviderSettings,
    WindowDetection,
    keyring_state,
    save_key_in_keyring,
)
from workbench.errors import OperationCancelledError, WorkbenchError
from workbench.gui.context import AppContext
from workbench.gui.controls import add_rows, named, note_label, set_busy
from workbench.gui.dialogs.settings_form import SettingsFormDialog
from workbench.gui.errors import describe_error
from workbench.gui.workers import Job

KEY_NONE, KEY_ENV, KEY_KEYRING = "none", "env", "keyring"
_KEY_SOURCES = ((KEY_NONE, "No key (a local server)"),
                (KEY_ENV, "Environment variable"),
                (KEY_KEYRING, "OS keyring entry"))
_KIND_LABELS = {"openai": "OpenAI-compatible", "anthropic": "Anthropic"}
MAX_TOKENS = 100_000_000
NOT_SET = "Not set"
_IN_USE_JOB = "window in use"


class TokenSpinBox(QSpinBox):
    """A count of tokens that may be unset. A click on "Not set" (or on the detected
    window shown in its place) selects it, so the digits typed next replace it: Qt put
    the caret inside the words, where it refused every digit."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.lineEdit().installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
        if (watched is self.lineEdit() and event.type() == QEvent.Type.MouseButtonRelease
                and self.value() == self.minimum() and self.specialValueText()):
            QTimer.singleShot(0, self, self.selectAll)  # after the line edit placed its caret
        return super().eventFilter(watched, event)


def _token_spin(parent: QWidget, name: str) -> QSpinBox:
    spin = TokenSpinBox(parent)
    spin.setRange(0, MAX_TOKENS)
    spin.setSingleStep(1024)
    spin.setSpecialValueText(NOT_SET)
    spin.setSuffix(" tokens")
    spin.setGroupSeparatorShown(True)
    spin.setAccessibleName(name)
    return spin


class ProvidersDialog(SettingsFormDialog):
    """Add, change, remove and test provider configs (see the module docstring)."""

    entry_kind = "provider"
    accessible_names = {"list": "Stored providers", "add": "Add a provider",
                        "remove": "Remove the selected provider", "name": "Provider name",
                        "save": "Save the provider", "status": "Provider status"}

    provider_saved = Signal(object)  # the stored ProviderConfig
    provider_removed = Signal(str)  # its name
    connection_tested = Signal(object)  # the ConnectionReport
    window_detected = Signal(object)  # the WindowDetection
    window_in_use_shown = Signal(object)  # the WindowDetection the gauge also uses

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__("Providers", parent)
        self.ctx = ctx
        self.failed_while_closed.connect(ctx.report_error)
        self._stored: ProviderConfig | None = None  # the config in the form (None: new)
        self._testing: str | None = None  # the provider being tested ("": saved first)
        self._test_job: Job | None = None
        self.keyring_usable, self.keyring_why = keyring_state()

        self.name_edit.setPlaceholderText("e.g. llama.cpp (local)")
        self.kind_box = named(QComboBox(self), "Provider kind")
        for kind in PROVIDER_KINDS:
            self.kind_box.addItem(_KIND_LABELS.get(kind, kind), kind)
        self.base_url_edit = named(QLineEdit(self), "Base URL",
                                   placeholder="http://127.0.0.1:8080/v1")
        self.model_edit = named(QLineEdit(self), "Model",
                                placeholder="the model's name on the server")
        self.key_source_box = named(QComboBox(self), "API key source")
        for value, label in _KEY_SOURCES:
            self.key_source_box.addItem(label, value)
        self.key_env_edit = named(QLineEdit(self), "Environment variable name",
                                  placeholder="e.g. OPENAI_API_KEY")
        self.keyring_entry_edit = named(QLineEdit(self), "Keyring entry name",
                                        placeholder="default: the provider's name")
        self.key_edit = named(QLineEdit(self), "API key to save in the keyring",
                              placeholder="type a key to put it in the keyring on Save")
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.keyring_note = note_label(self, "Keyring availability")
        self.use_env_button = named(QPushButton("Use an &Environment Variable", self),
                                    "Use an environment variable instead")
        self.window_spin = _token_spin(self, "Context window")
        self.detect_button = named(QPushButton("&Detect", self), "Detect the context window",
                                   tip="Ask the server for its context window")
        self.window_label = note_label(self, "Context window detection")
        self.max_output_spin = _token_spin(self, "Max output tokens")

        self.test_button = named(QPushButton("&Test Connection", self), "Test the connection")

        self._lay_out()
        self._connect()
        self.reload()
        self.resize(760, 520)

    # -- building ----------------------------------------------------------------------

    def _lay_out(self) -> None:
        self.form = add_rows(QFormLayout(), [
            ("&Name:", self.name_edit), ("&Kind:", self.kind_box),
            ("Base &URL:", self.base_url_edit), ("&Model:", self.model_edit),
            ("API &key:", self.key_source_box), ("&Variable:", self.key_env_edit),
            ("Keyring &entry:", self.keyring_entry_edit), ("Key to sa&ve:", self.key_edit)])
        note = QVBoxLayout()
        note.addWidget(self.keyring_note)
        note.addWidget(self.use_env_button, 0, Qt.AlignmentFlag.AlignLeft)
        self.keyring_note_box = QWidget(self)
        self.keyring_note_box.setLayout(note)
        note.setContentsMargins(0, 0, 0, 0)
        self.form.addRow("", self.keyring_note_box)
        window_row = QHBoxLayout()
        window_row.addWidget(self.window_spin, 1)
        window_row.addWidget(self.detect_button)
        window_label = QLabel("Context &window:", self)
        window_label.setBuddy(self.window_spin)  # a row of two widgets has no buddy itself
        self.form.addRow(window_label, window_row)
        self.form.addRow("", self.window_label)
        self.form.addRow("Max &output:", self.max_output_spin)
        actions = QHBoxLayout()
        actions.addWidget(self.save_button)
        actions.addWidget(self.test_button)
        actions.addStretch(1)
        right = QVBoxLayout()
        right.addLayout(self.form)
        right.addLayout(actions)
        right.addWidget(self.status_label)
        right.addStretch(1)
        self._lay_out_around(right, [
            self.name_edit, self.kind_box, self.base_url_edit, self.model_edit,
            self.key_source_box, self.key_env_edit, self.keyring_entry_edit, self.key_edit,
            self.use_env_button, self.window_spin, self.detect_button, self.max_output_spin,
            self.save_button, self.test_button])

    def _connect(self) -> None:
        self.key_source_box.currentIndexChanged.connect(self._show_key_fields)
        self.kind_box.currentIndexChanged.connect(self._forget_found_window)
        self.base_url_edit.textEdited.connect(self._forget_found_window)
        self.model_edit.textEdited.connect(self._forget_found_window)
        self.use_env_button.clicked.connect(self._use_environment_variable)
        self.detect_button.clicked.connect(self.detect_window)
        self.save_button.clicked.connect(lambda: self.save())
        self.test_button.clicked.connect(self.test_connection)

    def _settings(self) -> ProviderSettings:
        return self.ctx.workspace.provider_settings()

    # -- the list ----------------------------------------------------------------------

    def reload(self, select: str | None = None) -> None:
        """Read the stored configs again and show ``select`` (else the first, else a new
        form)."""
        try:
            configs = self._settings().list()
        except WorkbenchError as exc:
            configs = []
            self._say(describe_error(exc), ok=False)
        self._show_entries(
            configs, lambda config: config.name == select,
            lambda config: f"{_KIND_LABELS.get(config.kind, config.kind)} · {config.model}"
                           f" · {config.base_url}")
        if not configs:
            self.name_edit.setFocus()

    # -- the form ----------------------------------------------------------------------

    def _load(self, config: ProviderConfig | None) -> None:
        self._stored = config
        shown = config or ProviderConfig(name="", kind="openai", base_url="", model="")
        self.name_edit.setText(shown.name)
        self.kind_box.setCurrentIndex(max(0, self.kind_box.findData(shown.kind)))
        self.base_url_edit.setText(shown.base_url)
        self.model_edit.setText(shown.model)
        source = (KEY_KEYRING if shown.api_key_keyring else KEY_ENV if shown.api_key_env
                  else KEY_NONE)
        self.key_source_box.setCurrentIndex(self.key_source_box.findData(source))
        self.key_env_edit.setText(shown.api_key_env or "")
        self.keyring_entry_edit.setText(shown.api_key_keyring or "")
        self.key_edit.clear()
        self.window_spin.setValue(shown.context_window or 0)
        self.window_spin.setSpecialValueText(NOT_SET)
        self.max_output_spin.setValue(shown.max_output_tokens or 0)
        self.set_window_note("")
        self._ask_window_in_use(config)
        self.remove_button.setEnabled(config is not None)
        self._show_key_fields()
        self._mark_unedited()

    def form_state(self) -> Any:
        return (self.form_config().to_json(), self.key_edit.text())

    def _show_key_fields(self, *_args: Any) -> None:
        source = self.key_source_box.currentData()
        self.form.setRowVisible(self.key_env_edit, source == KEY_ENV)
        for widget in (self.keyring_entry_edit, self.key_edit, self.keyring_note_box):
            self.form.setRowVisible(widget, source == KEY_KEYRING)
        self.key_edit.setEnabled(self.keyring_usable)
        self.use_env_button.setVisible(not self.keyring_usable)
        if self.keyring_usable:
            self.keyring_note.setText(
                f"A key typed here is saved in {self.keyring_why} under the entry's name, "
                "never in the workbench's database.")
        else:
            self.keyring_note.setText(
                f"A key cannot be saved here: {self.keyring_why}. Put the key in an "
                "environment variable and name that variable instead.")

    def _ask_window_in_use(self, config: ProviderConfig | None) -> None:
        """Find the window the gauge and preflight use with the stored ``config`` (the
        server's, else the known model's, else the user's value) and show it with where
        it came from, so the form never says "Not set" while a detected window is used."""
        self.ctx.workers.cancel((self, _IN_USE_JOB))
        if config is None:
            return

        def done(found: WindowDetection) -> None:
            if self._stored is None or self._stored.name != config.name or self.edited():
                return  # the form shows something else now
            self.show_window_in_use(found)

        self.ctx.workers.network(self._settings().window_in_use, config.name,
                                 name="find the context window in use",
                                 key=(self, _IN_USE_JOB), on_done=done,
                                 on_error=lambda _error: None)  # the gauge says why

    def show_window_in_use(self, found: WindowDetection) -> None:
        """Say which window requests with the stored config are measured against."""
        self._show_found_window(found)
        self.set_window_note(found.sentence)
        self.window_in_use_shown.emit(found)

    def _show_found_window(self, found: WindowDetection) -> None:
        """Show a window the server (or the known-model table) gave in the unset field,
        saying where it came from: it is never the user's value, so Save does not
        store it as theirs (a number typed there still is)."""
        if found.window and found.source in ("server", "known model"):
            where = "from the server" if found.source == "server" else "known model"
            self.window_spin.setSpecialValueText(f"{found.window:,} tokens ({where})")

    def _forget_found_window(self, *_args: Any) -> None:
        # The server or model changed in the form: what was found was about the old one.
        self.window_spin.setSpecialValueText(NOT_SET)

    def set_window_note(self, text: str) -> None:
        """Show a sentence about the context window under its field (empty: hide it)."""
        self.window_label.setText(text)
        self.form.setRowVisible(self.window_label, bool(text))

    def _use_environment_variable(self) -> None:
        self.key_source_box.setCurrentIndex(self.key_source_box.findData(KEY_ENV))
        self.key_env_edit.setFocus()

    def form_config(self) -> ProviderConfig:
        """The config the form describes (not checked; storing it checks it)."""
        base = self._stored
        source = self.key_source_box.currentData()
        name = self.name_edit.text().strip()
        return ProviderConfig(
            name=name,
            kind=str(self.kind_box.currentData()),
            base_url=self.base_url_edit.text().strip(),
            model=self.model_edit.text().strip(),
            api_key_env=(self.key_env_edit.text().strip() or None) if source == KEY_ENV
            else None,
            api_key_keyring=(self.keyring_entry_edit.text().strip() or name or None)
            if source == KEY_KEYRING else None,
            context_window=self.window_spin.value() or None,
            max_output_tokens=self.max_output_spin.value() or None,
            temperature=base.temperature if base else None,
            timeouts=dict(base.timeouts) if base else {},
            extra_headers=dict(base.extra_headers) if base else {},
        )

    def dirty(self) -> bool:
        """Whether the form differs from the stored config (a new one always does)."""
        if self._stored is None or self.key_edit.text():
            return True
        return self.form_config().to_json() != self._stored.to_json()

    # -- saving and removing -------------------------------------------------------------

    def save(self, then: Callable[[ProviderConfig], None] | None = None) -> bool:
        """Store the form (on the writer); a typed key goes into the keyring first.

        ``then`` runs with the stored config once it is saved. Returns False when there
        was nothing to start (a keyring key without a keyring).
        """
        config = self.form_config()
        key = self.key_edit.text() if self.key_source_box.currentData() == KEY_KEYRING else ""
        if key and not self.keyring_usable:
            self._say(f"The key cannot be saved: {self.keyring_why}. Use an environment "
                      "variable instead.", ok=False)
            return False
        settings, original = self._settings(), self._stored

        def run() -> ProviderConfig:
            if key and config.api_key_keyring:
                save_key_in_keyring(config.api_key_keyring, key)
            if original is None:
                return settings.add(config)
            return settings.update(original.name, **config.to_json())

        def done(stored: ProviderConfig) -> None:
            self._saving_ended()
            self.key_edit.clear()
            self.reload(select=stored.name)
            self._say(f"Saved provider {stored.name!r}.", ok=True)
            self.provider_saved.emit(stored)
            self.ctx.providers_changed.emit()
            if then is not None:
                then(stored)

        self._say("Saving…")
        self._saving_started()
        self.ctx.workers.write(run, name="save the provider", on_done=done,
                               on_error=self._failed("save the provider"))
        return True

    def _failed(self, doing: str) -> Callable[[BaseException], None]:
        say = super()._failed(doing)

        def show(error: BaseException) -> None:
            say(error)  # first: the keys come back from the sentence it replaces
            self._set_testing(None)
            set_busy(self.detect_button, False, self.window_label)
        return show

    def remove(self) -> None:
        """Remove the selected config after asking."""
        if self._stored is None:
            return
        name = self._stored.name
        if not self.confirm_remove(name):
            return
        settings = self._settings()

        def done(_result: Any) -> None:
            self.reload()
            self._say(f"Removed provider {name!r}.", ok=True)
            self.provider_removed.emit(name)
            self.ctx.providers_changed.emit()

        self.ctx.workers.write(settings.remove, name, name="remove the provider",
                               on_done=done, on_error=self._failed("remove the provider"))

    def remove_question(self, name: str) -> str:
        # Its keyring entry, if any, is left alone.
        return (f"Remove the provider {name!r}? Agents that use it will need another one. "
                "A key kept in the OS keyring stays there.")

    # -- asking the server ---------------------------------------------------------------

    def test_connection(self) -> None:
        """Save the form if it changed, then send a one-token request (on a worker).
        While it runs the button cancels it: a server that never answers would keep
        the test waiting for minutes."""
        if self._testing is not None:
            self.cancel_test()
            return
        self._say("Testing the connection…")
        self._set_testing("")
        if self.dirty():
            if not self.save(then=lambda stored: self._start_test(stored.name)):
                self._set_testing(None)
        elif self._stored is not None:
            self._start_test(self._stored.name)
        else:
            self._set_testing(None)
            self._say("There is nothing to test yet: fill in the provider's name, base URL "
                      "and model.", ok=False)

    def _start_test(self, name: str) -> None:
        if self._testing is None:
            return  # cancelled while the form was being saved
        self._say(f"Testing the connection to {name!r}…")
        self._set_testing(name)
        # Cancel (or the window closing) shuts the connection the test waits on.
        token = CancelToken()
        self._test_job = self.ctx.workers.network(
            self._settings().test, name, cancel=token, name="test the connection",
            on_stop=token.cancel, on_done=lambda report: self._tested(name, report),
            on_error=self._test_failed)

    def _test_failed(self, error: BaseException) -> None:
        if isinstance(error, OperationCancelledError):
            # Stopped as the window closed (Cancel Test drops the answer and says so):
            # nothing went wrong that a person needs to read about.
            self._set_testing(None)
            return
        self._failed("test the connection")(error)

    def cancel_test(self) -> None:
        """Stop waiting for the connection test under way (its answer is dropped)."""
        name, self._testing = self._testing, None
        job, self._test_job = self._test_job, None
        if job is not None:
            job.cancel()
        self._set_testing(None)
        self._say(f"Stopped waiting: {name!r} had not answered." if name
                  else "Connection test cancelled.")

    def _set_testing(self, name: str | None) -> None:
        """The test under way, of ``name`` ("" while the form is saved first), or None;
        the button says whether it starts a test or cancels the one running."""
        self._testing = name
        if name is None:
            self._test_job = None
            self.test_button.setText("&Test Connection")
            self.test_button.setAccessibleName("Test the connection")
        else:
            self.test_button.setText("Cancel &Test")
            self.test_button.setAccessibleName("Cancel the connection test")

    def _tested(self, name: str, report: ConnectionReport) -> None:
        text = report.sentence
        if report.notices:
            text += "\n" + "\n".join(report.notices)
        self._say(text, ok=report.ok)
        self._set_testing(None)
        if (report.window_in_use is not None and self._stored is not None
                and self._stored.name == name and not self.edited()):
            # The window the server reported is shown as the server's, never filled in
            # as the user's own value: only a value typed here is saved as theirs.
            self.show_window_in_use(report.window_in_use)
        self.connection_tested.emit(report)

    def detect_window(self) -> None:
        """Ask the server of the form's config for its context window (on a worker)."""
        self.ctx.workers.cancel((self, _IN_USE_JOB))
        self.set_window_note("Asking the server…")
        set_busy(self.detect_button, True, self.window_label)
        self.ctx.workers.network(self._settings().detect_window, self.form_config(),
                                 name="detect the context window", on_done=self._detected,
                                 on_error=self._detect_failed)

    def _detected(self, found: WindowDetection) -> None:
        set_busy(self.detect_button, False, self.window_label)
        if found.window:
            self._show_found_window(found)
            self._say("")  # an earlier failure no longer describes this form
        self.set_window_note(found.sentence)
        self.window_detected.emit(found)

    def _detect_failed(self, error: BaseException) -> None:
        set_busy(self.detect_button, False, self.window_label)
        self.set_window_note(describe_error(error, doing="detect the context window"))
