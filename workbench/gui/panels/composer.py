"""The composer: write a prompt, send it to a model, watch the reply stream in.

Ctrl+Enter sends, Esc stops. The provider and model selectors pick the client (the
session's agent's provider by default); the memory switch chooses between automatic
memory (the prompt and the reply are stored when the turn succeeds) and manual memory
(nothing is stored; the reply stays on screen until the next turn). The gauge shows the
tokens the next request would carry against the model's context window.

While a turn runs, the prompt and the growing reply are shown after the session's last
message as rows that are not stored yet; when the engine has stored the turn they are
replaced by the stored messages. Stop keeps the prompt and the reply so far, marked as
stopped (Edit → Keep Stopped Replies, on by default; off, a stopped turn stores nothing).
A failed turn stores nothing (the engine's rule) and is told as a sentence with the next
step; a prompt that was not stored stays in the box.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from PySide6.QtCore import QEvent, QObject, QSize, Qt, Signal
from PySide6.QtGui import QAction, QKeyEvent, QKeySequence, QResizeEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from workbench.core.conversation import Message, SessionInfo, utcnow
from workbench.core.provider import CancelToken, TextDelta
from workbench.core.titles import FALLBACK_TITLE, title_from_prompt
from workbench.engine.chat import (
    ContextGauge,
    SessionProviders,
    context_gauge,
    last_turn,
    regenerate_turn,
    session_providers,
    stream_turn,
)
from workbench.engine.model import Response, ToolFinished, ToolStarted
from workbench.engine.providers import window_source_phrase
from workbench.errors import ChangedElsewhereError, OperationCancelledError
from workbench.gui.commands import NewSessionCommand, RegenerateReplyCommand
from workbench.gui.context import AppContext
from workbench.gui.controls import named, note_label, single_shot
from workbench.gui.delegates.markdown import plain_tooltip
from workbench.gui.drafts import load_draft, save_draft
from workbench.gui.errors import describe_error
from workbench.gui.layout import FittedComboBox, FittedProgressBar, FlowLayout
from workbench.gui.settings import gui_settings
from workbench.gui.theme import set_tone

REPAINT_MS = 40
DRAFT_SAVE_MS = 400
KEEP_STOPPED_KEY = "chat/keep_stopped_replies"
GAUGE_DELAY_MS = 500
_GAUGE_JOB = "gauge"  # with the panel, the key of the measurement under way
NO_PROVIDER = ("No model server is set up yet: add one in Settings → Providers… (a local "
               "llama.cpp, Ollama or LM Studio server, or a hosted API).")


def _without_sent(held: str, sent: str) -> str:
    """``held`` (a prompt box's text) without the prompt ``sent`` at its start: what was
    typed after it stays; a text that does not start with it stays whole."""
    stripped = held.lstrip()
    if not stripped.startswith(sent):
        return held
    return stripped[len(sent):].lstrip()


def missing_provider_sentence(name: str) -> str:
    """Why nothing is sent for a session whose agent's provider is gone, and what to do."""
    return (f"The agent's provider {name!r} is not configured any more: give the agent "
            "one in Settings → Agents…, or pick a provider in the selector to send to it.")


class ComposerPanel(QWidget):
    """Prompt, selectors, memory switch, gauge, Send / Stop / Regenerate."""

    turn_started = Signal()
    reply_grew = Signal(str)  # the reply's text so far, after each piece that arrived
    turn_finished = Signal(object)  # the engine's Response
    turn_failed = Signal(str)  # the sentence shown (also for a stop)
    gauge_changed = Signal(object)  # ContextGauge

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.setObjectName("ComposerPanel")
        self.timeline: Any = None  # the TimelinePanel whose model shows the pending turn
        self._token: CancelToken | None = None
        self._job: Any = None
        self._reply: Message | None = None
        self._keep_partial = False  # whether the turn under way keeps a stopped reply
        self._regenerating = False  # whether the turn under way regenerates the last reply
        self._reply_note = "receiving…"  # what the arriving reply's header says
        self._draft_session = 0  # the session whose draft the prompt box holds
        # ...and its database: another database's session of the same id is another.
        self._draft_database = ctx.workspace.location
        self._carried_prompt: str | None = None  # a prompt moving into a new session
        # The prompt of the turn under way: (database, session, text). Once stored it
        # leaves the box, or that session's draft when another session is open now.
        self._sent: tuple[str, int, str] | None = None
        # The session created for the turn under way (undone if the turn stores nothing).
        self._new_session: NewSessionCommand | None = None
        self._turn_new_session: NewSessionCommand | None = None
        self._retitled: list[SessionInfo] = []  # a New Session named after its first prompt
        self._gauge: ContextGauge | None = None
        # Learned context windows and where they came from, per (provider, model).
        self._windows: dict[tuple[str, str | None], tuple[int, str]] = {}
        # The provider the open session's agent names that is not configured any more:
        # the selector shows it as missing rather than another server in its place.
        self._missing: str | None = None
        # The open session agent's memory mode as last applied to the Auto memory box
        # (a person's toggle stands until the session or the agent's mode changes).
        self._agent_auto: bool | None = None
        # The provider the engine chose for the open session when last applied (the
        # agent's, else the only one): a change of it is followed, a person's pick stays.
        self._agent_choice: str | None = None
        # The model each provider would be asked for in the open session (as last read).
        self._models: dict[str, str] = {}
        # The open session's providers are being read (Send waits); another session was
        # opened since the last answer was applied (its agent's provider is selected).
        self._providers_pending = False
        self._switch_pending = False

        self.provider_box = FittedComboBox(self)
        self.provider_box.setAccessibleName("Provider")
        self.provider_box.setToolTip("Provider: the model server to send to")
        self.model_box = FittedComboBox(self)
        self.model_box.setEditable(True)
        self.model_box.setAccessibleName("Model")
        self.model_box.setToolTip("Model: the model to ask (type another name to override)")
        self.auto_box = QCheckBox("Auto memory", self)
        self.auto_box.setChecked(True)
        self.auto_box.setAccessibleName("Automatic memory")
        self.auto_box.setToolTip("On: the prompt and the reply are added to the session.\n"
                                 "Off (manual): nothing is added.\n"
                                 "Opening a session sets it to its agent's memory mode.")
        self.gauge = FittedProgressBar(self)
        self.gauge.setAccessibleName("Context gauge")
        self.gauge.setTextVisible(True)
        self.gauge.setRange(0, 1)
        self.gauge.setValue(0)
        self.gauge.setFormat("context: …")

        self.prompt = named(QPlainTextEdit(self), "Prompt",
                            placeholder="Write a prompt… Ctrl+Enter sends, Esc stops.")
        self.prompt.setTabChangesFocus(True)
        self.prompt.installEventFilter(self)
        self.send_button = named(QPushButton("Send", self), "Send prompt",
                                 tip="Send the prompt (Ctrl+Enter)")
        self.stop_button = named(QPushButton("Stop", self), "Stop reply",
                                 tip="Stop the reply (Esc)")
        self.regenerate_button = named(QPushButton("Regenerate", self), "Regenerate last reply",
                                       tip="Ask again for the last reply (Ctrl+Shift+R)")
        self.error_label = note_label(self, "Chat error", selectable=True)
        set_tone(self.error_label, "bad")
        self.error_label.hide()

        # The names are shown whole; a row too narrow for all of them wraps.
        selectors = FlowLayout.of(self.provider_box, self.model_box, self.auto_box, self.gauge)
        buttons = QVBoxLayout()
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(self.regenerate_button)
        buttons.addStretch(1)
        body = QHBoxLayout()
        body.addWidget(self.prompt, 1)
        body.addLayout(buttons)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 2, 4, 4)
        layout.setSpacing(4)
        layout.addLayout(selectors)
        layout.addWidget(self.error_label)
        layout.addLayout(body, 1)
        self._selectors, self._body = selectors, body

        self.send_action = QAction("Send &Prompt", self)
        self.send_action.setShortcuts([QKeySequence("Ctrl+Return"), QKeySequence("Ctrl+Enter")])
        self.send_action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self.send_action.triggered.connect(lambda: self.send())
        self.addAction(self.send_action)
        self.stop_action = QAction("S&top Reply", self)
        self.stop_action.setShortcut(QKeySequence(Qt.Key.Key_Escape))
        self.stop_action.triggered.connect(lambda: self.stop())
        self.regenerate_action = QAction("Re&generate Last Reply", self)
        self.regenerate_action.setShortcut(QKeySequence("Ctrl+Shift+R"))
        self.regenerate_action.triggered.connect(self.regenerate)
        self.keep_stopped_action = QAction("&Keep Stopped Replies", self)
        self.keep_stopped_action.setCheckable(True)
        self.keep_stopped_action.setToolTip(
            "On: Stop keeps the prompt and the reply so far, marked as stopped.\n"
            "Off: a stopped turn adds nothing to the session.")
        self.keep_stopped_action.setChecked(
            str(gui_settings().value(KEEP_STOPPED_KEY, "true")).lower() != "false")
        self.keep_stopped_action.toggled.connect(
            lambda on: gui_settings().setValue(KEEP_STOPPED_KEY, "true" if on else "false"))

        self._repaint_timer = single_shot(self, REPAINT_MS, self._repaint_reply)
        self._gauge_timer = single_shot(self, GAUGE_DELAY_MS, self.refresh_gauge)

        self.send_button.clicked.connect(lambda: self.send())
        self.stop_button.clicked.connect(lambda: self.stop())
        self.regenerate_button.clicked.connect(self.regenerate)
        self.provider_box.currentIndexChanged.connect(self._provider_changed)
        self.model_box.currentTextChanged.connect(lambda _t: self._gauge_timer.start())
        self.auto_box.toggled.connect(lambda _c: self._gauge_timer.start())
        self.prompt.textChanged.connect(self._gauge_timer.start)
        self._draft_timer = single_shot(self, DRAFT_SAVE_MS, self.save_draft)
        self.prompt.textChanged.connect(self._draft_timer.start)
        ctx.workspace_replaced.connect(lambda: self._switch_draft(0, save=False))
        # A compaction, an undo or a context edit changes the request as much as an edit.
        for signal in (ctx.message_changed, ctx.message_inserted, ctx.message_removed,
                       ctx.messages_appended, ctx.session_reloaded, ctx.context_changed):
            signal.connect(lambda *_: self._gauge_timer.start())
        ctx.workspace_replaced.connect(self.refresh_providers)
        self.refresh_providers()
        self._set_streaming(False)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        """At least the height the wrapped lines (the selectors, an error sentence) take
        at the width the panel has, above the prompt and the buttons at their minimum.

        Qt's own minimum counts a wrapped label at its narrowest, and the splitter over
        the panel asks for no more: a three-line error took its room from the buttons.
        """
        hint = super().minimumSizeHint()
        layout = self.layout()
        if layout is None or self.width() <= 0:
            return hint
        m = layout.contentsMargins()
        inner = max(1, self.width() - m.left() - m.right())
        gap = max(0, layout.spacing())
        needed = (m.top() + m.bottom() + self._selectors.heightForWidth(inner) + gap
                  + self._body.minimumSize().height())
        if self.error_label.isVisibleTo(self):
            needed += self.error_label.heightForWidth(inner) + gap
        return QSize(hint.width(), max(hint.height(), needed))

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self.updateGeometry()  # the wrapped lines' height follows the width

    # -- providers -----------------------------------------------------------------------

    def refresh_providers(self) -> None:
        """Read the configured providers again and pick the session's."""
        self._windows.clear()
        self._read_providers(switched=False)

    def _read_providers(self, *, switched: bool) -> None:
        """Read what the selectors show for the open session (the providers, the one
        its agent uses, the models, the memory mode) on a worker from the team store,
        where each is a round trip; meanwhile Send waits, and an answer about a session
        left since is dropped (a newer read supersedes it). ``switched``: another
        session was opened, so its agent's provider is selected."""
        self._switch_pending = self._switch_pending or switched
        self._providers_pending = True
        session_id = self.ctx.current_session_id or None

        def failed(error: BaseException) -> None:
            # The selectors stay as they were (a store out of reach has not lost its
            # providers); Send no longer waits.
            self._providers_pending = self._switch_pending = False
            self._set_streaming(self.streaming)
            self.ctx.report_error(error, doing="read the providers")

        self.ctx.read_shown(session_providers, self.ctx.workspace, session_id,
                            name="read the providers", key=(self, "providers"),
                            on_done=self._apply_providers, on_error=failed)
        if self._providers_pending:  # the answer comes later (from a server): Send waits
            self._set_streaming(self.streaming)

    def _apply_providers(self, seen: SessionProviders) -> None:
        if seen.session_id != (self.ctx.current_session_id or None):
            # Another session is open now: what its selectors show is read for it.
            self._read_providers(switched=True)
            return
        switched, self._switch_pending = self._switch_pending, False
        self._providers_pending = False
        self._models = dict(seen.models)
        names = list(seen.names)
        current = self.provider_box.currentData()
        self.provider_box.blockSignals(True)
        self.provider_box.clear()
        for name in names:
            self.provider_box.addItem(name, name)
        if not names:
            self.provider_box.addItem("(no provider)", None)
        self.provider_box.setEnabled(bool(names))
        if names and self.error_label.text() == NO_PROVIDER:
            self.error_label.hide()  # no longer true
        if switched:
            # Another session: its agent's provider; with several providers and an
            # agent that names none, the one selected stays (the selector is the
            # choice); an agent's provider gone is shown as missing.
            chosen = seen.chosen if seen.chosen is not None or seen.missing else current
        elif seen.chosen in names and seen.chosen != self._agent_choice:
            chosen = seen.chosen  # the agent was given another provider: chat's now
        else:
            chosen = current if current in names else seen.chosen
        self._agent_choice = seen.chosen
        self._missing = None
        if chosen in names:
            self.provider_box.setCurrentIndex(names.index(chosen))
        elif names:
            self._show_missing(seen.missing)
        self.provider_box.blockSignals(False)
        self._provider_changed()
        self._follow_memory_mode(seen.stores_turns, force=switched)
        self._set_streaming(self.streaming)

    def _follow_memory_mode(self, auto: bool | None, *, force: bool) -> None:
        """Set Auto memory to the open session agent's memory mode (``auto``; None
        without a session), as chat follows it (``manual`` stores nothing); unless
        ``force``, only when that mode changed."""
        if auto is None:
            self._agent_auto = None
            return
        if force or auto != self._agent_auto:
            self.auto_box.setChecked(auto)
        self._agent_auto = auto

    def _show_missing(self, missing: str | None) -> None:
        """When the session's agent names a provider that is gone (``missing``), select
        it, marked missing, instead of whichever provider comes first: chat never sends
        the agent's turns to another server unasked (the person picks one)."""
        self._missing = missing
        if missing is None:
            return
        self.provider_box.addItem(f"{missing} (missing)", None)
        self.provider_box.setCurrentIndex(self.provider_box.count() - 1)

    def missing_sentence(self) -> str:
        """Why nothing can be sent with the selection (empty when something can)."""
        if self.provider() is None and self._missing:
            return missing_provider_sentence(self._missing)
        return ""

    @property
    def providers_pending(self) -> bool:
        """Whether the open session's providers are being read (Send waits for them)."""
        return self._providers_pending

    def _provider_changed(self, *_args: Any) -> None:
        name = self.provider_box.currentData()
        self.model_box.blockSignals(True)
        self.model_box.clear()
        # The model chat would ask for: the agent's, when it has one for this provider,
        # else the provider's (typing another overrides it).
        model = self._models.get(name) if name else None
        if model:
            self.model_box.addItem(model)
        self.model_box.blockSignals(False)
        self._gauge_timer.start()

    def provider(self) -> str | None:
        return self.provider_box.currentData()

    def model_name(self) -> str | None:
        return self.model_box.currentText().strip() or None

    # -- drafts --------------------------------------------------------------------------

    def _database(self) -> str:
        return self.ctx.workspace.location

    def save_draft(self) -> None:
        """Keep what the prompt box holds as the draft of its session."""
        self._draft_timer.stop()
        save_draft(self._draft_database, self._draft_session, self.prompt.toPlainText())

    def _holds_draft_of(self, session_id: int) -> bool:
        return (self._draft_database, self._draft_session) == (self._database(), session_id)

    def _switch_draft(self, session_id: int, *, save: bool = True) -> None:
        if save and not self._holds_draft_of(session_id):
            self.save_draft()  # into the database it was typed in
        self._draft_session = session_id
        self._draft_database = self._database()
        carried, self._carried_prompt = self._carried_prompt, None
        self.prompt.blockSignals(True)
        self.prompt.setPlainText(carried if carried is not None
                                 else load_draft(self._database(), session_id))
        self.prompt.moveCursor(self.prompt.textCursor().MoveOperation.End)
        self.prompt.blockSignals(False)

    def session_changed(self, session_id: int) -> None:
        """A session was opened: show its draft, pick its agent's provider, measure its
        request."""
        if self.streaming:
            self.stop()
        if not self._holds_draft_of(session_id):
            self._switch_draft(session_id)
        self.error_label.hide()
        # The figure shown was the session before's: say "counting" at once, until this
        # session's is measured (an answer about the one before is dropped).
        if session_id:
            self._show_counting()
        else:
            self.ctx.workers.cancel((self, _GAUGE_JOB))
            self._show_gauge(None)
        self._read_providers(switched=True)
        self._gauge_timer.start()

    # -- keys ----------------------------------------------------------------------------

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.prompt and event.type() == QEvent.Type.KeyPress \
                and isinstance(event, QKeyEvent):
            if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and (
                event.modifiers() & Qt.KeyboardModifier.ControlModifier
            ):
                self.send()
                return True
            if event.key() == Qt.Key.Key_Escape and self.streaming:
                self.stop()
                return True
        return super().eventFilter(watched, event)

    # -- a turn ----------------------------------------------------------------------------

    @property
    def streaming(self) -> bool:
        return self._token is not None

    def attach_timeline(self, timeline: Any) -> None:
        """Show turns in ``timeline`` (a TimelinePanel) and follow its session's rows."""
        self.timeline = timeline
        timeline.prompt_below = True
        timeline.view.empty_text = timeline.empty_text(bool(self.ctx.current_session_id))
        model = timeline.model
        for signal in (model.modelReset, model.rowsInserted, model.rowsRemoved,
                       model.layoutChanged):
            signal.connect(lambda *_: self._update_regenerate())
        self._update_regenerate()

    def _can_regenerate(self) -> bool:
        """A session is open and holds a prompt to ask again."""
        if self.streaming or not self.ctx.current_session_id:
            return False
        model = self.timeline.model if self.timeline is not None else None
        if model is None or model.session_id != self.ctx.current_session_id:
            return True  # nothing to tell from; regenerate() itself says when there is none
        index = model.session_index
        if index is not None:
            return index.role_counts().get("user", 0) > 0
        return model.message_count > 0

    def _update_regenerate(self) -> None:
        enabled = self._can_regenerate()
        self.regenerate_button.setEnabled(enabled)
        self.regenerate_action.setEnabled(enabled)

    def _set_streaming(self, streaming: bool) -> None:
        # Nothing is sent with the session before's provider while the open session's
        # are read.
        sendable = not streaming and not self._providers_pending
        self.send_button.setEnabled(sendable)
        self.send_action.setEnabled(sendable)
        self.stop_button.setEnabled(streaming)
        self.stop_action.setEnabled(streaming)
        self._update_regenerate()

    def _fail(self, text: str) -> None:
        self.error_label.setText(text)
        self.error_label.show()
        self.turn_failed.emit(text)

    def send(self, prompt: str | None = None) -> bool:
        """Send ``prompt`` (default: the prompt box) in the open session."""
        if self.streaming or self._providers_pending:
            return False
        text = (prompt if prompt is not None else self.prompt.toPlainText()).strip()
        if not text:
            return False
        provider = self.provider()
        if not provider:
            self._fail(self.missing_sentence() or NO_PROVIDER)
            return False
        session_id = self.ctx.current_session_id
        if not session_id:
            self._send_in_new_session(text)
            return True
        self._start(session_id, text, provider)
        return True

    def _send_in_new_session(self, text: str) -> None:
        # An undoable new session, titled from the prompt's plain text (it opens when
        # created, and the prompt moves with it); after it, on the same writer, a no-op
        # whose completion sends the prompt there.
        command = NewSessionCommand(self.ctx, title_from_prompt(text))
        self._carried_prompt = text
        save_draft(self._database(), 0, "")
        self.ctx.undo_stack.push(command)

        def created(_result: Any) -> None:
            if command.session_id is not None and \
                    self.ctx.current_session_id == command.session_id:
                self._new_session = command
                self.send(text)
            else:
                self._carried_prompt = None

        self.ctx.workers.write(lambda: None, name="create a session", on_done=created)

    def _drop_new_session(self) -> None:
        """A turn in the session made for it stored nothing: take the session back (the
        prompt stays in the box, now the draft of no session)."""
        command, self._turn_new_session = self._turn_new_session, None
        stack = self.ctx.undo_stack
        if command is None or stack.index() == 0 or stack.command(stack.index() - 1) \
                is not command:
            return
        text = self.prompt.toPlainText()
        self._carried_prompt = text
        stack.undo()

    def _start(self, session_id: int, text: str, provider: str) -> None:
        self._turn_new_session, self._new_session = self._new_session, None
        self._sent = (self._database(), session_id, text)
        user = Message(role="user", content=text, session_id=session_id,
                       created_at=utcnow(), metadata={"note": "sending…"})
        workspace, model, auto = self.ctx.workspace, self.model_name(), self.auto_box.isChecked()
        keep = self.keep_stopped_action.isChecked()
        retitled: list[SessionInfo] = []
        self._retitled = retitled

        def run(token: CancelToken) -> Generator[Any, None, Response]:
            # A session made by New Session and still called so takes the title of its
            # first prompt once it is stored, as a session a send creates does.
            before = workspace.get_session(session_id)
            response = yield from stream_turn(workspace, session_id, text, provider=provider,
                                              model=model, auto=auto, cancel=token,
                                              keep_partial=keep)
            if response.appended and before.message_count == 0 \
                    and before.title == FALLBACK_TITLE:
                try:
                    retitled.append(workspace.editing().rename_session(
                        session_id, title_from_prompt(text), expected=FALLBACK_TITLE).after)
                except ChangedElsewhereError:
                    pass  # renamed meanwhile, by the person or another window: theirs
            return response

        self._run(session_id, [user], run, keep=keep, name="send the prompt")

    def _run(self, session_id: int, shown: list[Message], turn: Any, *, keep: bool,
             name: str, regenerating: bool = False, note: str = "receiving…") -> None:
        """Start the turn ``turn(token)`` (an engine generator of run events), showing
        the rows ``shown`` and then the reply as it arrives after the session's last."""
        self.error_label.hide()
        token = CancelToken()
        self._token = token
        self._regenerating = regenerating
        self._set_streaming(True)
        reply = Message(role="assistant", content="", session_id=session_id,
                        metadata={"note": note})
        self._reply = reply
        self._reply_note = note
        if self.timeline is not None:
            self.timeline.model.set_pending([*shown, reply])
            self.timeline.view.scroll_to_end()
        self._keep_partial = keep

        def run(job: Any) -> Any:
            return (yield from turn(token))

        self._job = self.ctx.workers.stream(
            run, name=name, on_item=self._event, on_done=self._done, on_error=self._failed)
        self.turn_started.emit()

    def _event(self, event: Any) -> None:
        reply = self._reply
        if reply is None:
            return
        if isinstance(event, TextDelta):
            reply.content += event.text
            self.reply_grew.emit(reply.content)
        elif isinstance(event, ToolStarted):
            reply.metadata["note"] = f"running {event.name}…"
        elif isinstance(event, ToolFinished):
            reply.metadata["note"] = self._reply_note
        else:
            return
        if not self._repaint_timer.isActive():
            self._repaint_timer.start()

    def _repaint_reply(self) -> None:
        if self.timeline is not None:
            self.timeline.model.pending_changed()

    def _finish(self) -> bool:
        """The turn under way ended; returns whether it was a regenerate."""
        regenerating = self._regenerating
        self._token = None
        self._job = None
        self._reply = None
        self._regenerating = False
        self._repaint_timer.stop()
        self._set_streaming(False)
        return regenerating

    def _done(self, response: Response | None) -> None:
        reply = self._reply
        if self._finish():
            self._regenerated(response, reply)
            return
        model = self.timeline.model if self.timeline is not None else None
        if response is None:  # stopped between two events
            if model is not None:
                model.set_pending(None)
            self._fail("Stopped; nothing was added to the session. The prompt is still "
                       "in the box.")
            self._drop_new_session()
            return
        self._turn_new_session = None
        if response.appended or not response.stopped:
            self._take_sent_prompt()
        if response.stopped and response.appended:
            self.ctx.status_reported.emit(
                "Stopped; the prompt and the reply so far were kept, marked as stopped.")
        if response.appended:
            if model is not None:
                model.set_pending(None)
            self.ctx.messages_appended.emit(list(response.messages))
            for info in self._retitled:
                self.ctx.announce_session(info)
            self.ctx.sessions_changed.emit()
        self._retitled = []
        if response.compaction_id is not None and response.messages:
            # An auto-compaction folded messages before the send: the timeline (its
            # marker), the compaction history and the context are read again.
            session_id = response.messages[0].session_id
            if session_id is not None:
                self.ctx.session_reloaded.emit(session_id)
                self.ctx.context_changed.emit(session_id)
        elif model is not None and reply is not None:
            # Manual memory: nothing was stored; the turn stays on screen, marked so.
            for message in model.pending:
                message.metadata["note"] = "not saved (manual memory)"
            reply.content = response.text
            model.pending_changed()
        usage = response.usage
        if usage is not None or response.compaction_note:
            reply_line = (f"Reply: {usage.input_tokens:,} tokens in, "
                          f"{usage.output_tokens:,} out." if usage is not None else "")
            self.ctx.status_reported.emit(
                " ".join(x for x in (response.compaction_note, reply_line) if x))
        self._gauge_timer.start()
        self.turn_finished.emit(response)

    def _take_sent_prompt(self) -> None:
        """The prompt of the turn is stored: take it out of the box, keeping what was
        typed after it while the reply arrived; when another session is open now, take
        it out of the turn's session's draft instead (the box holds another draft)."""
        sent, self._sent = self._sent, None
        if sent is None:
            return
        database, session_id, text = sent
        if (self._draft_database, self._draft_session) == (database, session_id):
            held = self.prompt.toPlainText()
            rest = _without_sent(held, text)
            if rest != held:
                self.prompt.setPlainText(rest)
                self.prompt.moveCursor(self.prompt.textCursor().MoveOperation.End)
            return
        held = load_draft(database, session_id)
        rest = _without_sent(held, text)
        if rest != held:
            save_draft(database, session_id, rest)

    def _failed(self, error: BaseException) -> None:
        regenerating = self._finish()
        if self.timeline is not None:
            self.timeline.model.set_pending(None)
        if regenerating:
            if isinstance(error, OperationCancelledError):
                self._fail("Stopped; the earlier reply was kept as it was.")
            else:
                self._fail(describe_error(error, doing="regenerate the reply")
                           + " The earlier reply was kept as it was.")
            return
        if isinstance(error, OperationCancelledError):
            self._fail("Stopped before any reply arrived; nothing was added to the session. "
                       "The prompt is still in the box.")
        else:
            self._fail(describe_error(error, doing="send the prompt"))
        self._drop_new_session()

    def shut_down(self) -> None:
        """The window closes: keep the draft, stop the turn and every pending timer."""
        self.save_draft()
        self._gauge_timer.stop()
        self._repaint_timer.stop()
        self.stop(keep=False)

    def stop_note(self) -> str:
        """What stopping the turn under way keeps, in a sentence (for a question)."""
        if self._regenerating:
            return "Stopping keeps the earlier reply as it was."
        if self._keep_partial:
            return "Stopping keeps the prompt and the reply so far, marked as stopped."
        return "Stopping adds nothing to the session (Edit → Keep Stopped Replies is off)."

    def stopped_note(self) -> str:
        """What stopping the turn under way kept, in a sentence (said after it)."""
        if self._regenerating:
            return "The reply being regenerated was stopped; the earlier reply was kept."
        if self._keep_partial:
            return ("The reply that was arriving was stopped; the prompt and the partial "
                    "reply were kept, marked as stopped.")
        return "The reply that was arriving was stopped; nothing was added to the session."

    def stop_and_wait(self, timeout: float = 10.0) -> None:
        """Stop the turn under way (as Stop does) and wait until the engine has ended
        it, so that what it keeps is stored before the window goes."""
        if not self.streaming:
            return
        self.stop()
        self.ctx.workers.wait_idle(timeout)

    def stop(self, keep: bool | None = None) -> None:
        """Stop the turn under way. With ``keep`` (default: the turn's own setting,
        Keep Stopped Replies) the engine stores the prompt and the reply so far, marked
        as stopped; without it nothing is stored."""
        if keep is None:
            keep = self._keep_partial
        if self._token is not None:
            self._token.cancel()
        # Stopping the job closes the engine's generator between two events, before it
        # can store anything (``_done`` then gets None); a kept reply needs the engine to
        # end the turn itself.
        if self._job is not None and not keep:
            self._job.stop()

    def regenerate(self) -> None:
        """Ask again for the last reply. The earlier reply stays until the new one has
        arrived whole; then the engine puts the new one in its place (undoable). A
        failure or a stop leaves the earlier reply as it was."""
        if self.streaming or not self.ctx.current_session_id:
            return
        provider = self.provider()
        if not provider:
            self._fail(self.missing_sentence() or NO_PROVIDER)
            return
        session_id = self.ctx.current_session_id
        user, _after = last_turn(self.ctx.workspace, session_id)
        if user is None:
            self._fail("There is no prompt in this session to ask again.")
            return
        workspace, model, auto = self.ctx.workspace, self.model_name(), self.auto_box.isChecked()

        def run(token: CancelToken) -> Any:
            return regenerate_turn(workspace, session_id, provider=provider, model=model,
                                   auto=auto, cancel=token)

        # The new reply shows below the earlier one while it arrives.
        self._run(session_id, [], run, keep=False, name="regenerate the reply",
                  regenerating=True, note="new reply arriving… (replaces the one above)")

    def _regenerated(self, response: Response | None, reply: Message | None) -> None:
        model = self.timeline.model if self.timeline is not None else None
        if response is None or not response.appended:
            if response is not None and model is not None and reply is not None:
                # Manual memory: nothing was stored; the new reply stays on screen.
                reply.metadata["note"] = "not saved (manual memory)"
                reply.content = response.text
                model.pending_changed()
                self.turn_finished.emit(response)
                return
            if model is not None:
                model.set_pending(None)
            self._fail("Stopped; the earlier reply was kept as it was.")
            return
        if model is not None:
            model.set_pending(None)
        command = RegenerateReplyCommand(self.ctx, response.replaced, response.messages)
        self.ctx.undo_stack.push(command)  # stored already: this shows it
        for message in sorted(response.replaced, key=lambda m: int(m.position or 0),
                              reverse=True):
            self.ctx.announce_message("removed", message)
        self.ctx.messages_appended.emit(list(response.messages))
        self.ctx.sessions_changed.emit()
        self.ctx.status_reported.emit(
            "Regenerated the reply; Edit → Undo (Ctrl+Z) brings the earlier one back.")
        self._gauge_timer.start()
        self.turn_finished.emit(response)

    # -- the gauge -------------------------------------------------------------------------

    def context_window(self) -> int | None:
        """The selected model's context window, when known."""
        return self._gauge.window if self._gauge is not None else None

    def refresh_gauge(self) -> None:
        """Measure the next request (on a worker; the network may be asked the window)."""
        if self._providers_pending:
            return  # measured once the open session's provider and model are known
        session_id = self.ctx.current_session_id
        provider = self.provider()
        job_key = _GAUGE_JOB  # a newer measurement supersedes the one under way
        if not session_id:
            self.ctx.workers.cancel((self, job_key))
            self._show_gauge(None)
            return
        refused = self.missing_sentence()
        if refused:  # no request goes out until a provider is picked
            self.ctx.workers.cancel((self, job_key))
            self._show_gauge(None)
            self.gauge.setFormat("context: pick a provider")
            self.gauge.setToolTip(plain_tooltip(refused))
            return
        workspace, model, prompt = self.ctx.workspace, self.model_name(), \
            self.prompt.toPlainText()
        key = (provider or "", model)
        known = self._windows.get(key) if provider else None
        windows = self._windows

        def measure() -> ContextGauge:
            gauge = context_gauge(workspace, session_id, provider=provider, model=model,
                                  prompt=prompt, window=known[0] if known else None,
                                  window_source=known[1] if known else "unknown")
            if provider and gauge.window:
                # Ask the server once per model, even when this measurement is superseded.
                windows[key] = (gauge.window, gauge.window_source)
            return gauge

        def failed(error: BaseException) -> None:
            if session_id != self.ctx.current_session_id:
                return
            self.gauge.setFormat("context: unknown")
            self.gauge.setToolTip(plain_tooltip(describe_error(error,
                                                               doing="measure the request")))

        def done(gauge: ContextGauge) -> None:
            if session_id == self.ctx.current_session_id:  # never another session's figure
                self._show_gauge(gauge)

        self.ctx.workers.network(measure, name="measure the request", key=(self, job_key),
                                 on_done=done, on_error=failed)

    def _show_counting(self) -> None:
        """A neutral gauge while the open session's request is being measured."""
        self.ctx.workers.cancel((self, _GAUGE_JOB))
        self.gauge.setRange(0, 1)
        self.gauge.setValue(0)
        self.gauge.setFormat("context: …")
        self.gauge.setToolTip("Counting the tokens of the next request…")
        self.gauge.setStyleSheet("")

    def _show_gauge(self, gauge: ContextGauge | None) -> None:
        self._gauge = gauge
        if gauge is None:
            self.gauge.setRange(0, 1)
            self.gauge.setValue(0)
            self.gauge.setFormat("context: no session")
            self.gauge.setToolTip("")
        else:
            approx = "≈ " if gauge.estimated else ""
            if gauge.window:
                self.gauge.setRange(0, max(gauge.window, 1))
                self.gauge.setValue(min(gauge.request_tokens, gauge.window))
                self.gauge.setFormat(f"next request: {approx}{gauge.request_tokens:,} / "
                                     f"{gauge.window:,} tokens")
            else:
                self.gauge.setRange(0, 1)
                self.gauge.setValue(0)
                self.gauge.setFormat(f"next request: {approx}{gauge.request_tokens:,} tokens")
            # Not the status bar's figure: the request also carries the instructions, the
            # summary, the context and the prompt, and may leave old messages out.
            tip = ("Tokens the next request would carry against the model's context window: "
                   "the instructions, the summary and context, the messages that fit and "
                   "the prompt. The status bar counts the session's active messages only.")
            where = window_source_phrase(gauge.window_source, self.model_name() or "")
            if gauge.window and where:
                tip += f" The window, {gauge.window:,} tokens, is {where}."
            if gauge.estimated:
                tip += " Estimated from the session's token count (a long session)."
            if gauge.left_out:
                tip += f" {gauge.left_out:,} older messages would be left out to fit."
            self.gauge.setToolTip(plain_tooltip(tip))  # rich text wraps; a plain line ran off
            full = gauge.fraction is not None and gauge.fraction > 0.9
            self.gauge.setStyleSheet("QProgressBar::chunk { background: #c62828; }" if full
                                     else "")
        self.gauge_changed.emit(gauge)
