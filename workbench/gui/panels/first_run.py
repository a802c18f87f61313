"""The first-run banner: local model servers found on this machine, and how to add a
hosted one (SPEC §9).

On the first start with a database, :func:`offer_local_servers` asks the usual local
ports (Ollama, llama.cpp, LM Studio) on a network worker, never on the UI thread, and
shows a bar above the timeline: one "Add as Provider" button per server that answered,
and a sentence on hosted providers. Nothing is stored until a button is pressed; the
offer is recorded so it is made once per database.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from workbench.core.provider import ProviderConfig
from workbench.engine.discovery import (
    KNOWN_LOCAL_SERVERS,
    LocalServer,
    add_local_server,
    discover_local_servers,
)
from workbench.gui.context import AppContext
from workbench.gui.errors import describe_error

HOSTED_HINT = (
    "To use a hosted model (OpenAI, Anthropic, OpenRouter…), open Settings → Providers… "
    "and add its base URL and model; the API key is read from an environment variable or "
    "the OS keyring, never stored in the database."
)


class FirstRunBar(QFrame):
    """The banner: a row per local server found, the hosted-provider hint, Dismiss."""

    provider_added = Signal(object)  # the stored ProviderConfig
    dismissed = Signal()

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.setObjectName("FirstRunBar")
        self.setAccessibleName("First-run suggestions")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        self.title = QLabel("<b>Welcome.</b> Looking for model servers on this machine…", self)
        self.title.setTextFormat(Qt.TextFormat.RichText)
        layout.addWidget(self.title)
        self.rows = QVBoxLayout()
        layout.addLayout(self.rows)
        bottom = QHBoxLayout()
        self.hint = QLabel(HOSTED_HINT, self)
        self.hint.setWordWrap(True)
        bottom.addWidget(self.hint, 1)
        self.dismiss_button = QPushButton("Dismiss", self)
        self.dismiss_button.setAccessibleName("Dismiss the first-run suggestions")
        self.dismiss_button.clicked.connect(self.dismiss)
        bottom.addWidget(self.dismiss_button, 0, Qt.AlignmentFlag.AlignTop)
        layout.addLayout(bottom)
        self.add_buttons: dict[str, QPushButton] = {}
        self.servers: list[LocalServer] = []
        self._answered: bool | None = None  # whether a local server answered (None: asking)
        ctx.providers_changed.connect(self._providers_changed)

    def show_servers(self, servers: Sequence[LocalServer]) -> None:
        """List what answered (or say that nothing did)."""
        self.servers = list(servers)
        self._answered = bool(servers)
        if not servers:
            self._say_nothing_answered()
            return
        self.title.setText("<b>Welcome.</b> Model servers are running on this machine:")
        for server in servers:
            row = QHBoxLayout()
            label = QLabel(server.sentence(), self)
            label.setTextFormat(Qt.TextFormat.PlainText)  # the server names its models: data
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            row.addWidget(label, 1)
            button = QPushButton("Add as Provider", self)
            button.setAccessibleName(f"Add {server.label} as a provider")
            button.clicked.connect(lambda _c=False, s=server: self.add(s))
            row.addWidget(button)
            self.rows.addLayout(row)
            self.add_buttons[server.base_url] = button

    def _say_nothing_answered(self) -> None:
        if self._configured():
            self.title.setText("<b>Welcome.</b> A model server is set up: write a prompt "
                               "below, or add more in Settings → Providers…")
            return
        self.title.setText(
            "<b>Welcome.</b> No local model server answered (Ollama on port 11434, "
            "llama.cpp on 8080, LM Studio on 1234); start one and add it in "
            "Settings → Providers…"
        )

    def _configured(self) -> bool:
        try:
            return bool(self.ctx.workspace.provider_settings().list())
        except Exception:  # noqa: BLE001 - a banner never fails the window
            return False

    def _providers_changed(self) -> None:
        """A provider was added or removed elsewhere (Settings → Providers…): the
        sentence follows."""
        if self._answered is False:
            self._say_nothing_answered()

    def add(self, server: LocalServer) -> None:
        """Store ``server`` as a provider (on the database writer)."""
        button = self.add_buttons.get(server.base_url)
        if button is not None:
            button.setEnabled(False)
        settings = self.ctx.workspace.provider_settings()
        self.ctx.workers.write(
            add_local_server, settings, server, name=f"add {server.label}",
            on_done=lambda config: self._added(server, config),
            on_error=lambda exc: self._failed(server, exc),
        )

    def _added(self, server: LocalServer, config: ProviderConfig | None) -> None:
        button = self.add_buttons.get(server.base_url)
        if config is None:
            text = f"{server.base_url} is a provider already."
        else:
            text = f"Added provider {config.name!r} ({config.model})."
            self.ctx.providers_changed.emit()
            self.provider_added.emit(config)
        if button is not None:
            button.setText("Added")
        self.ctx.status_reported.emit(text)

    def _failed(self, server: LocalServer, error: BaseException) -> None:
        button = self.add_buttons.get(server.base_url)
        if button is not None:
            button.setEnabled(True)
        self.ctx.report_error(f"{server.label} could not be added: {describe_error(error)}")

    def dismiss(self) -> None:
        self.hide()
        self.dismissed.emit()


def offer_local_servers(
    ctx: AppContext,
    bar: FirstRunBar,
    servers: Sequence[tuple[str, int]] = KNOWN_LOCAL_SERVERS,
    *,
    force: bool = False,
) -> bool:
    """Start the first-run offer in ``bar`` unless this database made it already
    (``force`` makes it anyway). Returns whether it started."""
    workspace = ctx.workspace
    if not force and not workspace.first_run_offer_due():
        return False
    ctx.workers.network(
        discover_local_servers, list(servers), name="look for local model servers",
        on_done=bar.show_servers, on_error=lambda _e: bar.show_servers([]),
    )
    ctx.workers.write(workspace.mark_first_run_offered, name="remember the first-run offer")
    return True
