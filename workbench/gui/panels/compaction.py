"""The Compaction panel: the open session's policy, a preview, Apply, Undo and the history.

* **Policy** (per-session overrides of the agent's): the message-count trigger and how
  many messages it keeps, the token trigger, auto-compaction before a send, the
  summarizer and, for the model summarizer, its provider, model and prompt. Saved
  through :func:`~workbench.engine.compaction_view.save_policy`.
* **Preview** runs the engine's dry run in a worker (a reader, or a network thread for
  the model summarizer, which can be cancelled): what folds (counts and ranges, tinted
  in the timeline), what stays and why, the summary (editable), the request's tokens
  before and after as a picture against the model's window, facts de-duplicated and
  tasks pruned.
* **Apply** pushes an undo command (Ctrl+Z undoes the compaction); **Undo last
  compaction** undoes the session's newest compaction whoever made it.
* **Past compactions**: when, policy, summarizer, messages folded, tokens saved.

A newer preview, another session or a change to the session's messages makes an older
preview's answer be ignored; the timeline's tint is cleared whenever the preview goes.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import datetime
from functools import partial
from typing import Any

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.core.compaction import (
    EXTRACTIVE,
    MODEL,
    REASON_TURN,
    CompactionPlan,
    CompactionPolicy,
    CompactionRecord,
)
from workbench.core.conversation import Message
from workbench.core.provider import CancelToken
from workbench.engine import compaction
from workbench.engine.compaction_view import (
    PolicyView,
    clear_policy,
    preview_plan,
    read_policy,
    save_agent_policy,
    save_policy,
)
from workbench.errors import CompactionError, NotFoundError
from workbench.gui.context import AppContext
from workbench.gui.delegates.markdown import plain_tooltip
from workbench.gui.delegates.visible import MarkedPlainTextEdit
from workbench.gui.errors import describe_error
from workbench.gui.layout import (
    ElidedLabel,
    FittedComboBox,
    FittingTableWidget,
    FlowLayout,
    VerticalScrollArea,
    named_button,
)
from workbench.gui.panels.compaction_commands import (
    ApplyCompactionCommand,
    CompactionAliases,
    UndoCompactionCommand,
)
from workbench.gui.panels.savings_bar import SavingsBarWidget
from workbench.gui.theme import is_dark, tone_colour
from workbench.gui.workers import Job

log = logging.getLogger(__name__)

MODE_KEEP = "keep"
MODE_POLICY = "policy"
MODE_RANGE = "range"
_MAX_TOKENS_LIMIT = 100_000_000
_HISTORY_COLUMNS = ("#", "When", "Policy", "Summarizer", "Folded", "Saved", "State")
# Hidden in this order when the panel is narrow (each row's tooltip says them all).
_HISTORY_DROP_ORDER = (3, 2, 0, 1)


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def describe_ranges(plan: CompactionPlan) -> str:
    """The folded runs as message numbers (from 1, as the timeline counts) and ids."""
    parts = []
    for r in plan.ranges:
        if r.first_position is None or r.last_position is None:
            continue
        first, last = r.first_position + 1, r.last_position + 1
        where = f"message {first}" if first == last else f"messages {first}–{last}"
        ids = f"id {r.first_id}" if r.first_id == r.last_id else f"ids {r.first_id}–{r.last_id}"
        parts.append(f"{where} ({ids}, {_plural(r.count, 'message')})")
    return "; ".join(parts)


def kept_reasons(plan: CompactionPlan) -> dict[str, int]:
    """How many messages stay for each reason, most common first."""
    return dict(Counter(k.reason for k in plan.kept).most_common())


def kept_words(reason: str, count: int) -> str:
    """A reason's count as the panel says it: "20 recent", "1 question of a kept reply"."""
    if reason == REASON_TURN:
        # The question, and what came after it in its turn (a tool group, a reply) before
        # the first kept reply.
        if count == 1:
            return "1 question of a kept reply"
        return f"{count:,} of a kept reply's turn (its question and what followed it)"
    return f"{count:,} {reason}"



def _spin_box(parent: QWidget, low: int, high: int, suffix: str, name: str,
              tip: str = "") -> QSpinBox:
    spin = QSpinBox(parent)
    spin.setRange(low, high)
    spin.setSuffix(suffix)
    spin.setAccessibleName(name)
    if tip:
        spin.setToolTip(tip)
    return spin


def _wrapped_label(layout: QVBoxLayout, parent: QWidget, name: str, text: str = "",
                   text_format: Qt.TextFormat = Qt.TextFormat.PlainText) -> QLabel:
    """A word-wrapped label with its accessible name, added to ``layout``."""
    label = QLabel(text, parent)
    label.setWordWrap(True)
    label.setTextFormat(text_format)
    label.setAccessibleName(name)
    layout.addWidget(label)
    return label


def _button_row(parent: QWidget, *specs: tuple[str, str, str, Callable[[], object]],
                ) -> tuple[FlowLayout, list[QPushButton]]:
    """Buttons made from ``(text, accessible name, tooltip, slot)``, in a flow."""
    buttons = [named_button(text, name, tip, clicked=slot, parent=parent)
               for text, name, tip, slot in specs]
    return FlowLayout.of(*buttons), buttons


def _trigger(form: QFormLayout, label: str, name: str, spin: QSpinBox) -> QCheckBox:
    """A trigger's row of the form: "above" switches it on, ``spin`` says above what."""
    check = QCheckBox("above", spin.parentWidget())
    check.setAccessibleName(name)
    QWidget.setTabOrder(check, spin)  # made after the spin box, reached before it
    row = QHBoxLayout()
    row.addWidget(check)
    row.addWidget(spin, 1)
    form.addRow(label, row)
    return check


class CompactionPanel(QWidget):
    """Policy, preview, apply and undo of compactions for the open session."""

    policy_loaded = Signal(object)  # a PolicyView, when the fields were filled
    policy_saved = Signal(object)  # a PolicyView, after Save or Use Agent Defaults
    preview_shown = Signal(object)  # the CompactionPlan now shown
    preview_cleared = Signal()
    history_loaded = Signal(list)  # the session's CompactionRecords, oldest first

    def __init__(self, ctx: AppContext, timeline: Any = None, parent: QWidget | None = None,
                 *, window_source: Callable[[], int | None] | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.timeline = timeline  # a TimelinePanel (tint, scroll), or None
        self.window_source = window_source  # the composer's known window, when there is one
        self.setObjectName("CompactionPanel")
        self.setAccessibleName("Compaction panel")
        self.aliases = CompactionAliases()
        self.session_id = 0
        self.policy_view: PolicyView | None = None
        self.plan: CompactionPlan | None = None
        self.history: list[CompactionRecord] = []
        self._filling = False
        self._dirty = False
        # The worker jobs have keys (see gui.workers): a newer preview, policy or history
        # read supersedes the older one, and a session change cancels them.
        self._job: Job | None = None  # the preview running
        self._history_job: Job | None = None  # reading the history: Undo waits for it
        self._applying = 0

        self._build()
        self.undo_compaction_action = QAction("U&ndo Last Compaction", self)
        self.undo_compaction_action.setStatusTip(
            "Bring back the messages the session's last compaction folded")
        self.undo_compaction_action.triggered.connect(self.undo_last)

        ctx.session_reloaded.connect(self._session_reloaded)
        ctx.workspace_replaced.connect(lambda: self.session_changed(0))
        for signal in (ctx.message_changed, ctx.message_inserted, ctx.message_removed):
            signal.connect(self._message_touched)
        ctx.messages_appended.connect(self._messages_appended)
        ctx.undo_stack.indexChanged.connect(lambda _i: self._update_buttons())
        self.session_changed(ctx.current_session_id)

    # -- building ----------------------------------------------------------------------

    def _build(self) -> None:
        # A title is data, not markup; a long one is elided (the tooltip holds it whole).
        self.title_label = ElidedLabel("No session is open.", self, lines=2)
        self.title_label.setAccessibleName("Session being compacted")

        content = QWidget(self)
        column = QVBoxLayout(content)
        column.setContentsMargins(6, 6, 6, 6)
        column.setSpacing(8)
        column.addWidget(self.title_label)
        column.addWidget(self._build_policy(content))
        column.addWidget(self._build_preview(content))
        column.addWidget(self._build_history(content))
        column.addStretch(1)

        self.scroll = VerticalScrollArea.filling(self, content,
                                                 "Compaction settings and preview")

    def _build_policy(self, parent: QWidget) -> QGroupBox:
        box = QGroupBox("Policy for this session", parent)
        # The button row and the status wrap (their height follows their width): they go
        # below the form, not in it. QFormLayout keeps one list of row heights for every
        # width it is asked about and, laid out at its size hint's width, may use the
        # list of another width: after a preview the scroll area asked about a wider
        # content, and the buttons' second line lay under the status.
        column = QVBoxLayout(box)
        form = QFormLayout()
        column.addLayout(form)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)

        self.max_messages_spin = _spin_box(box, 1, 10_000_000, " messages",
                                           "Compact above this many active messages")
        self.messages_trigger_check = _trigger(form, "Message trigger",
                                               "Message-count trigger on",
                                               self.max_messages_spin)
        self.keep_spin = _spin_box(box, 0, 10_000_000, " newest", "Messages the trigger keeps",
                                   "When the message trigger fires, fold the oldest until "
                                   "this many active messages remain")
        form.addRow("Keep", self.keep_spin)
        self.max_tokens_spin = _spin_box(box, 1, _MAX_TOKENS_LIMIT, " tokens",
                                         "Compact when the request has more tokens than",
                                         "A request over this many tokens folds the oldest "
                                         "half")
        self.max_tokens_spin.setSingleStep(1000)
        self.max_tokens_spin.setGroupSeparatorShown(True)
        self.tokens_trigger_check = _trigger(form, "Token trigger", "Token trigger on",
                                             self.max_tokens_spin)

        self.auto_check = QCheckBox("Compact automatically before a send", box)
        self.auto_check.setAccessibleName("Auto-compaction for this session")
        self.auto_check.setToolTip("When a trigger fires, compact before the next request")
        form.addRow("", self.auto_check)

        self.summarizer_combo = QComboBox(box)
        self.summarizer_combo.setAccessibleName("Summarizer")
        self.summarizer_combo.addItem("Extractive (no model)", EXTRACTIVE)
        self.summarizer_combo.addItem("Model", MODEL)
        form.addRow("Summarizer", self.summarizer_combo)

        self.provider_combo = FittedComboBox(box)
        self.provider_combo.setAccessibleName("Summarizer provider")
        form.addRow("Provider", self.provider_combo)
        self.model_edit = QLineEdit(box)
        self.model_edit.setAccessibleName("Summarizer model")
        self.model_edit.setPlaceholderText("the provider's model")
        form.addRow("Model", self.model_edit)
        self.prompt_edit = QPlainTextEdit(box)
        self.prompt_edit.setAccessibleName("Summarizer prompt")
        self.prompt_edit.setTabChangesFocus(True)
        self.prompt_edit.setFixedHeight(self.fontMetrics().height() * 5 + 12)
        form.addRow("Prompt", self.prompt_edit)

        row, (self.save_button, self.save_agent_button, self.reset_button) = _button_row(
            box,
            ("&Save for This Session", "Save the policy for this session", "",
             self.save_policy),
            ("Save for the A&gent",
             "Save the policy as the default of every session of this agent", "",
             self.save_agent_policy),
            ("Use Agent &Defaults", "Drop this session's policy overrides", "",
             self.reset_policy))
        column.addLayout(row)
        self.policy_status = QLabel("", box)
        self.policy_status.setWordWrap(True)
        self.policy_status.setTextFormat(Qt.TextFormat.RichText)
        self.policy_status.setAccessibleName("Policy status")
        column.addWidget(self.policy_status)

        for check in (self.messages_trigger_check, self.tokens_trigger_check, self.auto_check):
            check.toggled.connect(self._field_edited)
        for spin in (self.max_messages_spin, self.keep_spin, self.max_tokens_spin):
            spin.valueChanged.connect(self._field_edited)
        self.summarizer_combo.currentIndexChanged.connect(self._field_edited)
        self.provider_combo.currentIndexChanged.connect(self._field_edited)
        self.model_edit.textEdited.connect(self._field_edited)
        self.prompt_edit.textChanged.connect(self._field_edited)
        return box

    def _build_preview(self, parent: QWidget) -> QGroupBox:
        box = QGroupBox("Preview", parent)
        layout = QVBoxLayout(box)

        self.mode_combo = QComboBox(box)
        self.mode_combo.setAccessibleName("What to fold")
        self.mode_combo.addItem("All but the newest", MODE_KEEP)
        self.mode_combo.addItem("As the policy's triggers decide", MODE_POLICY)
        self.mode_combo.addItem("Messages numbered", MODE_RANGE)
        self.keep_count_spin = QSpinBox(box)
        self.keep_count_spin.setRange(0, 10_000_000)
        self.keep_count_spin.setAccessibleName("Newest messages to keep")
        self.range_from_spin = QSpinBox(box)
        self.range_from_spin.setRange(1, 10_000_000)
        self.range_from_spin.setAccessibleName("First message to fold")
        self.range_to_spin = QSpinBox(box)
        self.range_to_spin.setRange(1, 10_000_000)
        self.range_to_spin.setAccessibleName("Last message to fold")
        self.range_to_label = QLabel("to", box)
        self.mode_combo.setSizePolicy(QSizePolicy.Policy.Expanding,
                                      QSizePolicy.Policy.Fixed)
        numbers = QHBoxLayout()
        numbers.setContentsMargins(0, 0, 0, 0)
        numbers.addWidget(self.keep_count_spin)
        numbers.addWidget(self.range_from_spin)
        numbers.addWidget(self.range_to_label)
        numbers.addWidget(self.range_to_spin)
        layout.addLayout(FlowLayout.of(self.mode_combo, numbers))
        self.mode_combo.currentIndexChanged.connect(self._mode_changed)

        row, (self.preview_button, self.show_button) = _button_row(
            box,
            ("&Preview", "Preview the compaction",
             "Plan the compaction without changing anything (Ctrl+Shift+K)", self.preview),
            ("S&how in Timeline", "Scroll the timeline to the first message to fold", "",
             self.show_first_folded))
        layout.addLayout(row)

        self.busy_bar = QProgressBar(box)
        self.busy_bar.setRange(0, 0)
        self.busy_bar.setTextVisible(False)
        self.busy_bar.setMaximumHeight(self.fontMetrics().height())
        self.busy_bar.setAccessibleName("Compaction in progress")
        self.busy_label = QLabel("", box)
        self.busy_label.setTextFormat(Qt.TextFormat.PlainText)
        self.cancel_button = named_button("&Cancel", "Cancel the preview", clicked=self.cancel,
                                          parent=box)
        self.busy_row = QWidget(box)
        busy = QHBoxLayout(self.busy_row)
        busy.setContentsMargins(0, 0, 0, 0)
        busy.addWidget(self.busy_label)
        busy.addWidget(self.busy_bar, 1)
        busy.addWidget(self.cancel_button)
        self.busy_row.hide()
        layout.addWidget(self.busy_row)

        self.result_label = _wrapped_label(layout, box, "Preview result",
                                           "Preview to see what would fold.",
                                           Qt.TextFormat.RichText)
        self.result_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.ranges_label = _wrapped_label(layout, box, "Folded ranges")
        self.kept_label = _wrapped_label(layout, box, "Kept messages and why")

        self.token_bar = SavingsBarWidget(box)
        layout.addWidget(self.token_bar)

        self.summary_heading = QLabel("&Summary (edit before applying)", box)
        self.summary_edit = MarkedPlainTextEdit(box)  # names bidi controls
        self.summary_edit.setAccessibleName("Summary to apply")
        self.summary_edit.setPlaceholderText("The summary the folded messages become.")
        self.summary_edit.setMinimumHeight(self.fontMetrics().height() * 7)
        self.summary_edit.setTabChangesFocus(True)
        self.summary_heading.setBuddy(self.summary_edit)
        self.summary_edit.textChanged.connect(self._summary_edited)
        self.summary_note = QLabel("", box)
        self.summary_note.setWordWrap(True)
        self.summary_note.setTextFormat(Qt.TextFormat.PlainText)
        layout.addWidget(self.summary_heading)
        layout.addWidget(self.summary_edit)
        layout.addWidget(self.summary_note)

        self.context_label = _wrapped_label(layout, box,
                                            "Facts and tasks the compaction changes")

        row, (self.apply_button, self.discard_button) = _button_row(
            box,
            ("&Apply", "Apply the compaction",
             "Fold the messages into the summary (Ctrl+Z undoes it)", self.apply),
            ("&Discard Preview", "Discard the preview", "",
             lambda: self.clear_preview("Preview discarded.")))
        layout.addLayout(row)
        self._mode_changed()
        return box

    def _build_history(self, parent: QWidget) -> QGroupBox:
        box = QGroupBox("Past compactions", parent)
        layout = QVBoxLayout(box)
        self.history_table = FittingTableWidget(0, len(_HISTORY_COLUMNS), box,
                                                drop_order=_HISTORY_DROP_ORDER)
        self.history_table.setAccessibleName("Past compactions")
        self.history_table.setHorizontalHeaderLabels(list(_HISTORY_COLUMNS))
        self.history_table.verticalHeader().setVisible(False)
        self.history_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.history_table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.history_table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.history_table.setWordWrap(False)
        self.history_table.horizontalHeaderItem(5).setToolTip("Tokens saved")
        self.history_table.setMinimumHeight(self.fontMetrics().height() * 7)
        self.history_table.cellDoubleClicked.connect(self._history_activated)
        self.history_table.setToolTip("Double-click a compaction to show its messages in the "
                                      "timeline")
        layout.addWidget(self.history_table)
        self.history_empty = QLabel("No compaction yet.", box)
        layout.addWidget(self.history_empty)
        self.undo_button = named_button("&Undo Last Compaction", "Undo the last compaction",
                                        clicked=self.undo_last, parent=box)
        row = QHBoxLayout()
        row.addWidget(self.undo_button)
        row.addStretch(1)
        layout.addLayout(row)
        return box

    # -- the open session ------------------------------------------------------------------

    def session_changed(self, session_id: int) -> None:
        """Show ``session_id`` (0: none): its policy and history; any preview goes."""
        self._cancel_job()
        self.ctx.workers.cancel((self, "policy"))  # what the last session's jobs read goes
        self.ctx.workers.cancel((self, "history"))
        self._history_job = None
        self.clear_preview("Preview to see what would fold.")
        self.session_id = session_id
        self.policy_view = None
        self.history = []
        self._dirty = False
        self._show_history([])
        self.policy_status.setText("")
        if not session_id:
            self.title_label.setText("No session is open.")
            font = self.title_label.font()
            font.setBold(False)
            self.title_label.setFont(font)
            self._update_buttons()
            return
        try:
            title = self.ctx.workspace.get_session(session_id).title
        except NotFoundError:  # the session went away under us: nothing to show
            title = ""
        self.title_label.setText(title)
        font = self.title_label.font()
        font.setBold(bool(title))
        self.title_label.setFont(font)
        # Its summary lines first, when a database written before they were kept is
        # still getting them: it is the session a preview is asked for next.
        self.ctx.workspace.prefer_summary_lines(session_id)
        self.load_policy()
        self.load_history()
        self._update_buttons()

    def _session_reloaded(self, session_id: int) -> None:
        if session_id != self.session_id or not session_id:
            return
        self.load_history()

    def _message_touched(self, message: Message) -> None:
        if message.session_id == self.session_id:
            self._preview_outdated()

    def _messages_appended(self, messages: Any) -> None:
        if any(getattr(m, "session_id", None) == self.session_id for m in messages or ()):
            self._preview_outdated()

    def _preview_outdated(self) -> None:
        if self.plan is not None or self._job is not None:
            self._cancel_job()
            self.clear_preview("The session changed since the preview; preview again.")

    # -- policy --------------------------------------------------------------------------

    def load_policy(self) -> None:
        """Read the session's policy into the fields (on a reader thread)."""
        session_id = self.session_id
        if not session_id:
            return

        def failed(error: BaseException) -> None:
            self.policy_status.setText(describe_error(error, doing="read the policy"))

        self.ctx.workers.read(read_policy, self.ctx.workspace, session_id,
                              name="read the compaction policy", key=(self, "policy"),
                              on_done=self._fill_policy, on_error=failed)

    def _fill_policy(self, view: PolicyView) -> None:
        self.policy_view = view
        policy = view.policy
        self._filling = True
        try:
            self.messages_trigger_check.setChecked(policy.max_messages is not None)
            self.max_messages_spin.setValue(policy.max_messages or view.agent_policy.max_messages
                                            or 50)
            self.keep_spin.setValue(policy.keep_messages)
            self.tokens_trigger_check.setChecked(policy.max_tokens is not None)
            self.max_tokens_spin.setValue(min(_MAX_TOKENS_LIMIT, policy.max_tokens
                                              or view.agent_policy.max_tokens or 100_000))
            self.auto_check.setChecked(policy.auto)
            self.summarizer_combo.setCurrentIndex(
                max(0, self.summarizer_combo.findData(policy.summarizer)))
            self.provider_combo.clear()
            agent = view.agent_provider
            self.provider_combo.addItem(
                f"The agent's ({agent})" if agent else "The agent's or the only one", None)
            for name in view.providers:
                self.provider_combo.addItem(name, name)
            if policy.provider and self.provider_combo.findData(policy.provider) < 0:
                self.provider_combo.addItem(f"{policy.provider} (not configured)",
                                            policy.provider)
            self.provider_combo.setCurrentIndex(
                max(0, self.provider_combo.findData(policy.provider))
                if policy.provider else 0)
            self.model_edit.setText(policy.model or "")
            self.prompt_edit.setPlainText(policy.prompt or view.default_prompt)
            self.keep_count_spin.setValue(policy.keep_messages)
        finally:
            self._filling = False
        self._dirty = False
        overridden = sorted(view.overrides)
        self.policy_status.setText(
            "This session overrides: " + ", ".join(overridden) + "." if overridden
            else "The agent's policy applies to this session.")
        self._sync_policy_enabled()
        self._update_buttons()
        self.policy_loaded.emit(view)

    def _field_edited(self, *_args: Any) -> None:
        self._sync_policy_enabled()
        if self._filling:
            return
        self._dirty = True
        self.policy_status.setText("Changed: Save keeps it for this session; Preview uses it "
                                   "as it is.")
        self._update_buttons()

    def _sync_policy_enabled(self) -> None:
        self.max_messages_spin.setEnabled(self.messages_trigger_check.isChecked())
        self.max_tokens_spin.setEnabled(self.tokens_trigger_check.isChecked())
        model = self.summarizer_combo.currentData() == MODEL
        for widget in (self.provider_combo, self.model_edit, self.prompt_edit):
            widget.setEnabled(model)

    def settings(self) -> dict[str, Any]:
        """The policy fields as the engine's settings (what Save stores, Preview uses)."""
        prompt = self.prompt_edit.toPlainText().strip()
        default = self.policy_view.default_prompt if self.policy_view else compaction.DEFAULT_PROMPT
        return {
            "max_messages": (self.max_messages_spin.value()
                             if self.messages_trigger_check.isChecked() else None),
            "keep_messages": self.keep_spin.value(),
            "max_tokens": (self.max_tokens_spin.value()
                           if self.tokens_trigger_check.isChecked() else None),
            "auto": self.auto_check.isChecked(),
            "summarizer": self.summarizer_combo.currentData() or EXTRACTIVE,
            "provider": self.provider_combo.currentData() or None,
            "model": self.model_edit.text().strip() or None,
            "prompt": prompt if prompt and prompt != default.strip() else None,
        }

    def save_policy(self) -> None:
        """Store the fields as this session's policy (a writer job)."""
        self._save_fields(save_policy, "save the compaction policy")

    def save_agent_policy(self) -> None:
        """Store the fields as the policy of the session's agent (a writer job)."""
        self._save_fields(save_agent_policy, "save the agent's compaction policy", agent=True)

    def _save_fields(self, fn: Callable[..., PolicyView], doing: str, *,
                     agent: bool = False) -> None:
        session_id = self.session_id
        if not session_id:
            return
        settings = self.settings()
        try:
            CompactionPolicy.from_dict(settings)
        except CompactionError as exc:  # the same check the engine makes, said at once
            self._policy_failed(exc)
            return
        self._write_policy(fn, session_id, settings, doing, agent=agent)

    def reset_policy(self) -> None:
        """Drop this session's overrides: the agent's policy applies again."""
        if self.session_id:
            self._write_policy(clear_policy, self.session_id, None,
                               "reset the compaction policy")

    def _write_policy(self, fn: Callable[..., PolicyView], session_id: int,
                      settings: Mapping[str, Any] | None, doing: str,
                      *, agent: bool = False) -> None:
        args: tuple[Any, ...] = (self.ctx.workspace, session_id)
        if settings is not None:
            args += (settings,)

        def done(view: PolicyView) -> None:
            self._fill_policy(view)
            if agent:
                self.policy_status.setText("Saved for the agent. " + self.policy_status.text())
            elif view.overrides:
                self.policy_status.setText("Saved for this session. "
                                           + self.policy_status.text())
            else:
                self.policy_status.setText("The agent's policy applies to this session.")
            self.policy_saved.emit(view)

        # The write always runs; a session change drops only what it would show.
        self.ctx.workers.write(fn, *args, name=doing, key=(self, "policy"), on_done=done,
                               on_error=self._policy_failed)

    def _policy_failed(self, error: BaseException) -> None:
        text = describe_error(error, doing="save the compaction policy")
        colour = tone_colour("bad", is_dark(self.palette())).name()
        self.policy_status.setText(f"<span style='color:{colour}'>{_escape(text)}</span>")

    # -- preview -------------------------------------------------------------------------

    def _mode_changed(self, *_args: Any) -> None:
        mode = self.mode_combo.currentData()
        self.keep_count_spin.setVisible(mode == MODE_KEEP)
        for widget in (self.range_from_spin, self.range_to_label, self.range_to_spin):
            widget.setVisible(mode == MODE_RANGE)
        if mode == MODE_RANGE and self.timeline is not None:
            self._range_from_selection()

    def _range_from_selection(self) -> None:
        """Start the range at the timeline's selected messages, when there are some."""
        messages = [m for m in self.timeline.selected_messages() if m.position is not None]
        if messages:
            positions = [int(m.position) for m in messages]
            self.range_from_spin.setValue(min(positions) + 1)
            self.range_to_spin.setValue(max(positions) + 1)

    @property
    def busy(self) -> bool:
        """Whether a preview or an apply is running."""
        return self._job is not None or self._applying > 0

    def preview(self) -> Job | None:
        """Plan a compaction of the open session with the fields as they are (a worker)."""
        session_id = self.session_id
        if not session_id:
            self.result_label.setText("Open a session to compact it.")
            return None
        self._cancel_job()
        self.clear_preview("")
        settings = self.settings()
        mode = self.mode_combo.currentData()
        keep = self.keep_count_spin.value() if mode == MODE_KEEP else None
        fold_range = None
        if mode == MODE_RANGE:
            fold_range = (self.range_from_spin.value() - 1, self.range_to_spin.value() - 1)
        cancel = CancelToken()
        model = settings["summarizer"] == MODEL
        submit = self.ctx.workers.network if model else self.ctx.workers.read
        self._show_busy("Writing the summary with the model…" if model else "Planning…",
                        cancellable=True)
        # Preview is off while it runs, and Qt moves the keyboard off a control that
        # goes off: it comes back to Preview when the plan arrives (unless the person
        # took it somewhere else meanwhile).
        keyboard_here = self.preview_button.hasFocus()

        def keyboard_back() -> None:
            now = QApplication.focusWidget()
            if keyboard_here and (now is None or now is self.scroll
                                  or now is self.cancel_button):
                self.preview_button.setFocus(Qt.FocusReason.OtherFocusReason)

        def done(plan: CompactionPlan) -> None:
            self._job = None
            self._hide_busy()
            self.show_plan(plan)
            keyboard_back()
            if plan.unkept_lines:
                self._keep_summary_lines(session_id)

        def failed(error: BaseException) -> None:
            self._job = None
            self._hide_busy()
            self.result_label.setText(
                _escape(describe_error(error, doing="preview the compaction")))
            self._update_buttons()
            keyboard_back()

        # Cancelling the job (Cancel, a new preview, a session change) hangs up on the
        # model through the token and drops whatever the job still returns.
        self._job = submit(partial(preview_plan, self.ctx.workspace, session_id, settings,
                                   keep=keep, fold_range=fold_range, cancel=cancel),
                           name="preview the compaction", key=(self, "preview"),
                           on_stop=cancel.cancel, on_done=done, on_error=failed)
        self._update_buttons()
        return self._job

    def _keep_summary_lines(self, session_id: int) -> None:
        """Have the store keep the summary lines the session's messages lack (a database
        written before they were kept), once, on the writer thread: the next previews
        read them instead of writing and counting every line. Nothing is shown; a
        failure only means the next preview writes the lines again."""

        def failed(error: BaseException) -> None:
            log.info("The summary lines of session %s were not kept: %s", session_id, error)

        self.ctx.workers.write(compaction.keep_summary_lines, self.ctx.workspace, session_id,
                               name="keep the summary lines", key=(self, "summary lines"),
                               on_error=failed)

    def cancel(self) -> None:
        """Stop a running preview (a model's call is hung up on); nothing was changed."""
        if self._job is None:
            return
        self._cancel_job()
        self.result_label.setText("Preview cancelled; nothing was changed.")
        self.ctx.status_reported.emit("Compaction preview cancelled.")
        self._update_buttons()

    def _cancel_job(self) -> None:
        if self._job is not None:
            self._job.cancel()
        self._job = None
        self._hide_busy()

    def _show_busy(self, text: str, *, cancellable: bool) -> None:
        self.busy_label.setText(text)
        self.cancel_button.setVisible(cancellable)
        self.busy_row.show()

    def _hide_busy(self) -> None:
        if self._applying == 0:
            self.busy_row.hide()

    def _window(self) -> int | None:
        if self.window_source is not None:
            known = self.window_source()
            if known:
                return known
        return self.policy_view.window if self.policy_view is not None else None

    def window_changed(self, *_args: Any) -> None:
        """The model's window became known or changed: redraw the bar against it."""
        if self.plan is not None:
            self.token_bar.set_values(self.plan.tokens_before, self.plan.tokens_after,
                                      self._window())

    def show_plan(self, plan: CompactionPlan) -> None:
        """Show a plan: counts, ranges, reasons, tokens, summary, and tint the timeline;
        the panel scrolls to the result (below the policy in a low window)."""
        self._show_plan(plan)
        for label in (self.ranges_label, self.kept_label, self.context_label):
            label.setVisible(bool(label.text()))  # an empty one leaves no gap
        # Once the scroll area has laid the grown content out (a posted layout request).
        QTimer.singleShot(0, self._reveal_result)

    def _reveal_result(self) -> None:
        if self.plan is None:
            return
        self.scroll.ensureWidgetVisible(self.apply_button, 0, 8)
        self.scroll.ensureWidgetVisible(self.result_label, 0, 8)

    def _show_plan(self, plan: CompactionPlan) -> None:
        self.plan = plan
        self.token_bar.set_values(plan.tokens_before, plan.tokens_after, self._window())
        if not plan.changed:
            self.result_label.setText(_escape(plan.reason or "Nothing to compact."))
            self.ranges_label.setText("")
            self.kept_label.setText("")
            self.context_label.setText("")
            self._set_summary("")
            self._tint(None)
            self._update_buttons()
            self.preview_shown.emit(plan)
            return
        if not plan.folded_ids:
            # No message folds, yet applying changes the context (the engine tidies the
            # facts and prunes completed tasks with every compaction): say that, not
            # "folds 0 messages" over an empty range.
            self.result_label.setText(
                _escape(plan.reason or "No message folds.")
                + " Applying only tidies the session's context:")
            self.ranges_label.setText("")
            self.kept_label.setText("")
            self.context_label.setText(_context_changes(plan))
            self._set_summary("")
            self._tint(None)
            self._update_buttons()
            self.preview_shown.emit(plan)
            return
        kept = len(plan.kept)
        self.result_label.setText(
            f"Folds <b>{_plural(plan.folded_count, 'message')}</b> into the summary and keeps "
            f"{_plural(kept, 'message')} ({_escape(plan.policy)}, {plan.summarizer} summary)."
            + (f"<br><b>Saves nothing:</b> {_escape(plan.warning)} Apply is off: keep "
               "fewer messages and preview again." if plan.warning else ""))
        self.ranges_label.setText("Folded: " + describe_ranges(plan) + ".")
        reasons = kept_reasons(plan)
        self.kept_label.setText(
            "Kept: " + ", ".join(kept_words(reason, count) for reason, count in reasons.items())
            + "." if reasons else "Kept: none.")
        self.context_label.setText(_context_changes(plan))
        self._set_summary(plan.summary)
        self._tint(plan.folded_ids)
        self.show_first_folded()
        self._update_buttons()
        self.preview_shown.emit(plan)

    def _set_summary(self, text: str) -> None:
        self.summary_edit.blockSignals(True)
        self.summary_edit.set_text(text)
        self.summary_edit.blockSignals(False)
        self.summary_note.setText("")
        self.summary_note.hide()  # an empty line would leave a gap under the summary

    def _summary_edited(self) -> None:
        if self.plan is not None and self.plan.changed:
            edited = self.summary_edit.text() != self.plan.summary
            self.summary_note.setText("Edited: the tokens after are counted again for your "
                                      "text when it is applied." if edited else "")
            self.summary_note.setVisible(edited and self.summary_edit.isVisible())

    def _tint(self, ids: Any) -> None:
        if self.timeline is not None:
            self.timeline.model.set_fold_preview(ids)

    def show_first_folded(self) -> bool:
        """Scroll the timeline to the first message the preview folds."""
        if self.timeline is None or self.plan is None or not self.plan.folded_ids:
            return False
        first = int(self.plan.ranges[0].first_id or 0) if self.plan.ranges else 0
        first = first or int(self.plan.folded_ids[0])
        model, view = self.timeline.model, self.timeline.view
        row = model.row_for_message(first)
        if row is None:  # hidden by a role filter: the timeline shows its role again
            return bool(self.timeline.jump_to_message(first))
        # Scrolled to, not made the timeline's jump target: once applied, the folded run
        # should collapse behind its marker rather than stay open at that message.
        # The row above stays in sight: what the folded range follows (often a marker).
        view.scrollTo(model.index(max(0, row - 1), 0),
                      QAbstractItemView.ScrollHint.PositionAtTop)
        return True

    def clear_preview(self, note: str = "") -> None:
        """Drop the shown preview and the timeline's tint."""
        had = self.plan is not None
        self.plan = None
        self.token_bar.clear()
        self.result_label.setText(note)
        for label in (self.ranges_label, self.kept_label, self.context_label):
            label.setText("")
        self._set_summary("")
        self._tint(None)
        self._update_buttons()
        if had:
            self.preview_cleared.emit()

    # -- apply and undo ------------------------------------------------------------------

    def apply(self) -> ApplyCompactionCommand | None:
        """Apply the shown plan with the summary as edited (an undoable command)."""
        plan = self.plan
        if plan is None or not plan.changed or self._job is not None:
            return None
        first = [True]

        def changed() -> None:
            if first[0]:  # the first apply: the busy row and the sentence are for it
                first[0] = False
                self._applying -= 1
                if self._applying == 0:
                    self.busy_row.hide()
                if command.applied and session_id == self.session_id:
                    self.result_label.setText(
                        f"Applied: {_plural(plan.folded_count, 'message')} folded. Ctrl+Z or "
                        "Undo Last Compaction brings them back.")
                elif session_id == self.session_id:
                    self.result_label.setText("Nothing was applied; preview again.")
            elif session_id == self.session_id and self.plan is None:
                # Undone or redone from Edit → Undo/Redo: the sentence follows the store.
                self.result_label.setText(
                    f"Applied again: {_plural(plan.folded_count, 'message')} folded."
                    if command.applied else
                    f"Undone: {_plural(plan.folded_count, 'message')} active again. "
                    "Preview to plan another compaction.")
            self._command_done()

        session_id = self.session_id
        command = ApplyCompactionCommand(self.ctx, plan, self.summary_edit.text(),
                                         self.aliases, on_changed=changed)
        if self.apply_button.hasFocus():
            # Apply goes grey at once: the keys stay on a control of the panel (Preview,
            # for the next plan) instead of falling onto its scroll area.
            self.preview_button.setFocus(Qt.FocusReason.OtherFocusReason)
        self.clear_preview(f"Applying: folding {_plural(plan.folded_count, 'message')}…")
        self._applying += 1
        self._show_busy("Applying…", cancellable=False)
        self.ctx.undo_stack.push(command)
        return command

    def _command_done(self) -> None:
        self.load_history()
        self._update_buttons()

    def undo_last(self) -> None:
        """Undo the session's newest compaction still applied."""
        session_id = self.session_id
        if not session_id:
            return
        applied = [r for r in self.history if not r.undone]
        if not applied:
            self.ctx.status_reported.emit("This session has no compaction to undo.")
            return
        latest = applied[-1]
        stack = self.ctx.undo_stack
        top = stack.command(stack.index() - 1) if stack.index() > 0 else None
        self._cancel_job()
        self.clear_preview("")
        if (isinstance(top, ApplyCompactionCommand) and top.session_id == session_id
                and top.current_id() == latest.id):
            stack.undo()  # the apply this panel made: Redo can bring it back
        else:
            stack.push(UndoCompactionCommand(self.ctx, session_id, self.aliases,
                                             on_changed=self._command_done))

    # -- history ---------------------------------------------------------------------------

    def load_history(self) -> None:
        """Read the session's compactions (on a reader thread)."""
        session_id = self.session_id
        if not session_id:
            return

        def done(records: list[CompactionRecord]) -> None:
            self._history_job = None
            self.history = records
            self._show_history(records)
            self._update_buttons()
            self.history_loaded.emit(records)

        def failed(_error: BaseException) -> None:
            self._history_job = None
            self._update_buttons()

        self._history_job = self.ctx.workers.read(
            compaction.history, self.ctx.workspace, session_id,
            name="read the compaction history", key=(self, "history"), on_done=done,
            on_error=failed)
        self._update_buttons()

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt's name
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self.history:
            self._show_history(self.history)  # the undone rows' grey is the palette's

    def _show_history(self, records: list[CompactionRecord]) -> None:
        table = self.history_table
        table.setRowCount(len(records))
        this_year = datetime.now().astimezone().year
        for row, record in enumerate(reversed(records)):  # newest first
            local = record.created_at.astimezone()
            # Short, so that the column fits a narrow dock (the tooltip has it whole).
            when = local.strftime("%b %d %H:%M" if local.year == this_year else "%Y-%m-%d")
            state = "undone" if record.undone_at is not None else "applied"
            values = (str(record.id), when, record.policy, record.summarizer,
                      f"{record.folded_count:,}", _saved_text(record.tokens_saved), state)
            tip = _history_tooltip(record)
            for column, value in enumerate(values):
                item = QTableWidgetItem(value)
                item.setData(Qt.ItemDataRole.UserRole, record.id)
                if column in (0, 4, 5):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight
                                          | Qt.AlignmentFlag.AlignVCenter)
                if record.undone:
                    item.setForeground(self.palette().placeholderText())
                item.setToolTip(plain_tooltip(tip))
                table.setItem(row, column, item)
        self.history_empty.setVisible(not records)
        table.setVisible(bool(records))
        table.fit_columns()

    def history_rows(self) -> list[dict[str, str]]:
        """The history table as shown (newest first), by column name."""
        out = []
        for row in range(self.history_table.rowCount()):
            out.append({name: self.history_table.item(row, column).text()
                        for column, name in enumerate(_HISTORY_COLUMNS)})
        return out

    def _history_activated(self, row: int, _column: int) -> None:
        item = self.history_table.item(row, 0)
        if item is None or self.timeline is None:
            return
        ident = item.data(Qt.ItemDataRole.UserRole)
        record = next((r for r in self.history if r.id == ident), None)
        if record is not None and record.folded_ids:
            self.timeline.jump_to_message(record.folded_ids[0])

    # -- state -------------------------------------------------------------------------

    def _update_buttons(self) -> None:
        has_session = bool(self.session_id)
        running = self._job is not None
        for widget in (self.preview_button, self.mode_combo, self.keep_count_spin,
                       self.range_from_spin, self.range_to_spin):
            widget.setEnabled(has_session and not running)
        # A plan that folds messages without lowering the request's tokens is not
        # applied: it would "save" a negative number of tokens.
        can_apply = (self.plan is not None and self.plan.changed and not running
                     and self._applying == 0
                     and (self.plan.lowers_tokens or not self.plan.folded_ids))
        self.apply_button.setEnabled(can_apply)
        self.discard_button.setEnabled(self.plan is not None)
        folds = self.plan is not None and bool(self.plan.folded_ids)
        self.show_button.setEnabled(folds)
        self.summary_edit.setReadOnly(not can_apply)
        for widget in (self.summary_heading, self.summary_edit):
            widget.setVisible(folds)
        self.summary_note.setVisible(folds and bool(self.summary_note.text()))
        # Undo picks the newest compaction from the history: not while it is being read.
        has_applied = self._history_job is None and any(not r.undone for r in self.history)
        self.undo_button.setEnabled(has_session and has_applied and self._applying == 0)
        self.undo_compaction_action.setEnabled(has_session and has_applied)
        self.save_button.setEnabled(has_session and self.policy_view is not None)
        self.reset_button.setEnabled(has_session and bool(self.policy_view
                                                          and self.policy_view.overrides))


def _history_tooltip(record: CompactionRecord) -> str:
    """Everything a row of the history says, for when its narrow columns are hidden."""
    when = record.created_at.astimezone().strftime("%Y-%m-%d %H:%M")
    lines = [f"Compaction #{record.id}, applied {when}",
             f"Policy: {record.policy}; summarizer: {record.summarizer}",
             f"{_plural(record.folded_count, 'message')} folded, "
             f"{_saved_text(record.tokens_saved, long=True)}"]
    if record.undone_at is not None:
        lines.append("Undone " + record.undone_at.astimezone().strftime("%Y-%m-%d %H:%M"))
    if record.summary:
        lines += ["", "Summary:", record.summary[:600]]
    lines += ["", "Double-click to show its messages in the timeline."]
    return "\n".join(lines)


def _saved_text(saved: int, *, long: bool = False) -> str:
    """Tokens a compaction saved, never as a negative number."""
    if saved > 0:
        return f"{_plural(saved, 'token')} saved" if long else f"{saved:,}"
    return "no tokens saved" if long else "none"


def _context_changes(plan: CompactionPlan) -> str:
    facts = plan.facts_removed
    tasks = [t.description for t in plan.tasks_pruned]
    return " ".join((
        _changed("Facts", facts, f"{_plural(len(facts), 'repeat')} removed", "no repeats"),
        _changed("Tasks", tasks, f"{_plural(len(tasks), 'completed task')} pruned",
                 "none pruned"),
    ))


def _changed(what: str, items: list[str], done: str, nothing: str) -> str:
    """``what: done ("a"; "b"; "c" and 2 more).``, or ``what: nothing.``"""
    if not items:
        return f"{what}: {nothing}."
    shown = "; ".join(f"“{item}”" for item in items[:3])
    more = f" and {len(items) - 3} more" if len(items) > 3 else ""
    return f"{what}: {done} ({shown}{more})."


def _escape(text: str) -> str:
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))
