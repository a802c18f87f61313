"""Settings → Agents: each agent's instructions, provider and model, memory policy and
built-in tools.

The agents are listed on the left; the form on the right edits one. The memory policy
fields are those of SPEC §3 (:class:`~workbench.core.policy.MemoryPolicy`): automatic
or manual memory, the sliding window, how turns are captured into long-term memory,
where recalled entries go, how many are recalled, and the scope and namespace of the
entries. Settings the form does not show (the compaction policy, token budgets) are
kept as they are. The tools are the engine's built-in ones
(:mod:`workbench.engine.builtin_tools`); other tool names an agent lists are kept too.

Saving runs on the database writer; afterwards :attr:`AppContext.providers_changed`
and :attr:`AppContext.sessions_changed` let the composer and the session list catch up.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLineEdit,
    QPlainTextEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from workbench.core.conversation import Agent
from workbench.core.policy import CAPTURES, INJECTS, MODES, SCOPES, MemoryPolicy
from workbench.engine.builtin_tools import BUILTIN_TOOLS
from workbench.errors import WorkbenchError
from workbench.gui.context import AppContext
from workbench.gui.controls import add_rows, named
from workbench.gui.dialogs.settings_form import SettingsFormDialog
from workbench.gui.errors import describe_error

_MODE_LABELS = {"auto": "Automatic: store each turn", "manual": "Manual: store nothing"}
_CAPTURE_LABELS = {"manual": "Only what is remembered on purpose",
                   "conversation": "Every turn, as one entry", "off": "Nothing"}
_INJECT_LABELS = {"instructions": "Into the instructions", "context": "As a context message"}
_SCOPE_LABELS = {"agent": "The agent's (all its sessions)", "session": "Each session's own"}


def _choices(parent: QWidget, name: str, values: tuple[str, ...],
             labels: dict[str, str]) -> QComboBox:
    box = named(QComboBox(parent), name)
    for value in values:
        box.addItem(labels.get(value, value), value)
    return box


def _no_provider_label(names: list[str]) -> str:
    """What an agent that names no provider uses (as the composer chooses), so the form
    never says "(none)" while a provider answers its sessions."""
    if not names:
        return "(none: add one in Settings → Providers)"
    if len(names) == 1:
        return f"(none: the only provider, {names[0]})"
    return "(none: the one chosen in the composer)"


class AgentsDialog(SettingsFormDialog):
    """Add and edit agents (see the module docstring)."""

    entry_kind = "agent"
    accessible_names = {"list": "Agents", "add": "Add an agent", "remove": "Remove the agent",
                        "name": "Agent name", "save": "Save the agent",
                        "status": "Agent status"}

    agent_saved = Signal(object)  # the stored Agent

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__("Agents", parent)
        self.ctx = ctx
        self.failed_while_closed.connect(ctx.report_error)
        self._stored: Agent | None = None  # the agent in the form (None: a new one)
        self._shown_policy: MemoryPolicy | None = None  # its policy as the form shows it
        self._provider_models: dict[str, str] = {}  # provider name -> its model

        self.instructions_edit = named(
            QPlainTextEdit(self), "Instructions",
            placeholder="The system prompt: who the agent is and how it should answer.")
        self.instructions_edit.setTabChangesFocus(True)
        self.provider_box = named(QComboBox(self), "Provider")
        self.model_edit = named(QLineEdit(self), "Model")

        self.mode_box = _choices(self, "Memory mode", MODES, _MODE_LABELS)
        self.window_spin = named(QSpinBox(self), "Window size in messages",
                                 tip="Keep only this many recent messages in the model's view;"
                                 " older ones are evicted (never deleted).")
        self.window_spin.setRange(0, 1_000_000)
        self.window_spin.setSpecialValueText("No window")
        self.window_spin.setSuffix(" messages")
        self.capture_box = _choices(self, "Memory capture", CAPTURES, _CAPTURE_LABELS)
        self.inject_box = _choices(self, "Where recalled memory goes", INJECTS, _INJECT_LABELS)
        self.max_entries_spin = named(QSpinBox(self), "Entries recalled per turn")
        self.max_entries_spin.setRange(0, 100)
        self.max_entries_spin.setSpecialValueText("None (no recall)")
        self.scope_box = _choices(self, "Memory scope", SCOPES, _SCOPE_LABELS)
        self.namespace_edit = named(QLineEdit(self), "Memory namespace", placeholder="default")

        self.tool_boxes: dict[str, QCheckBox] = {}
        for name, label in BUILTIN_TOOLS.items():
            self.tool_boxes[name] = named(QCheckBox(label, self), f"Tool: {label}",
                                          tip=f"Let the model call {name}")

        self._lay_out()
        self.save_button.clicked.connect(self.save)
        self.provider_box.currentIndexChanged.connect(self._provider_changed)
        self.reload()
        self.resize(780, 620)

    def _lay_out(self) -> None:
        form = add_rows(QFormLayout(), [
            ("&Name:", self.name_edit), ("&Instructions:", self.instructions_edit),
            ("&Provider:", self.provider_box), ("&Model:", self.model_edit)])

        memory = QGroupBox("Memory", self)
        add_rows(QFormLayout(memory), [
            ("Mo&de:", self.mode_box), ("&Window:", self.window_spin),
            ("&Capture:", self.capture_box), ("Recalled &entries go:", self.inject_box),
            ("Recall &at most:", self.max_entries_spin), ("Sc&ope:", self.scope_box),
            ("Names&pace:", self.namespace_edit)])

        tools = QGroupBox("Built-in tools", self)
        tools_layout = QVBoxLayout(tools)
        for box in self.tool_boxes.values():
            tools_layout.addWidget(box)

        groups = QHBoxLayout()
        groups.addWidget(memory, 3)
        groups.addWidget(tools, 2, Qt.AlignmentFlag.AlignTop)
        actions = QHBoxLayout()
        actions.addWidget(self.save_button)
        actions.addWidget(self.status_label, 1)
        right = QVBoxLayout()
        right.addLayout(form)
        right.addLayout(groups)
        right.addLayout(actions)
        self._lay_out_around(right, [
            self.name_edit, self.instructions_edit, self.provider_box, self.model_edit,
            self.mode_box, self.window_spin, self.capture_box, self.inject_box,
            self.max_entries_spin, self.scope_box, self.namespace_edit,
            *self.tool_boxes.values(), self.save_button])

    # -- the list ----------------------------------------------------------------------

    def reload(self, select: int | None = None) -> None:
        """Read agents and providers again and show agent ``select`` (else the first)."""
        ws = self.ctx.workspace
        try:
            agents = ws.list_agents()
            providers = self.ctx.workspace.provider_settings().list()
        except WorkbenchError as exc:
            agents, providers = [], []
            self._say(describe_error(exc), ok=False)
        if not agents:
            # A fresh database: the default agent is made on first use (a write).
            self.ctx.workers.write(ws.default_agent, name="create the default agent",
                                   on_done=lambda agent: self.reload(agent.id))
        self.provider_box.blockSignals(True)
        self.provider_box.clear()
        self.provider_box.addItem(_no_provider_label([c.name for c in providers]), None)
        self._provider_models = {c.name: c.model for c in providers}
        for config in providers:
            self.provider_box.addItem(config.name, config.name)
        self.provider_box.blockSignals(False)
        self._show_entries(agents, lambda agent: agent.id == select)

    # -- the form ----------------------------------------------------------------------

    def remove(self) -> None:
        """Delete the agent in the form after asking (on the writer). The store refuses
        the default agent and agents that still have sessions, in a sentence."""
        stored = self._stored
        if stored is None:
            return
        if not self.confirm_remove(stored.name):
            return
        ws = self.ctx.workspace

        def done(entries: int) -> None:
            self.reload()
            gone = f" and its {entries} memory entries" if entries else ""
            self._say(f"Removed agent {stored.name!r}{gone}.", ok=True)
            self.ctx.providers_changed.emit()

        self.ctx.workers.write(ws.delete_agent, stored.id, name="remove the agent",
                               on_done=done, on_error=self._failed("remove the agent"))

    def remove_question(self, name: str) -> str:
        return (f"Remove the agent {name!r} and its long-term memory entries? An agent that "
                "still has sessions cannot be removed.")

    def _load(self, agent: Agent | None) -> None:
        self._stored = agent
        self.remove_button.setEnabled(agent is not None)
        shown = agent or Agent(id=0, name="")
        self.name_edit.setText(shown.name)
        self.instructions_edit.setPlainText(shown.instructions)
        index = self.provider_box.findData(shown.provider) if shown.provider else 0
        if index < 0:  # a provider that was removed: keep the name visible
            self.provider_box.addItem(f"{shown.provider} (missing)", shown.provider)
            index = self.provider_box.count() - 1
        self.provider_box.setCurrentIndex(index)
        self.model_edit.setText(shown.model or "")
        self._provider_changed()
        try:
            policy = MemoryPolicy.from_dict(shown.memory_policy)
            self._shown_policy = policy
        except WorkbenchError as exc:
            policy = MemoryPolicy()
            self._shown_policy = None  # Save writes every field shown, mending the policy
            self._say(f"The stored memory policy cannot be read ({exc}); the form shows "
                      "the defaults.", ok=False)
        for box, value in ((self.mode_box, policy.mode), (self.capture_box, policy.capture),
                           (self.inject_box, policy.inject), (self.scope_box, policy.scope)):
            box.setCurrentIndex(max(0, box.findData(value)))
        self.window_spin.setValue(policy.max_messages or 0)
        self.max_entries_spin.setValue(policy.max_entries)
        self.namespace_edit.setText(policy.namespace)
        for name, box in self.tool_boxes.items():
            box.setChecked(name in shown.tools)
        self._mark_unedited()

    def _provider_changed(self, *_args: Any) -> None:
        name = self.provider_box.currentData()
        model = self._provider_models.get(name) if name else None
        self.model_edit.setPlaceholderText(
            f"the provider's model ({model})" if model else "the provider's model")

    def form_state(self) -> dict[str, Any]:
        """The agent's fields as the form has them (the policy merged into the stored
        one, so settings the form does not show are kept). A policy setting is written
        only when the form changed it: one left as shown (a default the agent never
        set) is not stored as if the user had chosen it."""
        stored = self._stored
        policy = dict(stored.memory_policy) if stored else {}
        shown = {
            "mode": self.mode_box.currentData(),
            "max_messages": self.window_spin.value() or None,
            "capture": self.capture_box.currentData(),
            "inject": self.inject_box.currentData(),
            "max_entries": self.max_entries_spin.value(),
            "scope": self.scope_box.currentData(),
            "namespace": self.namespace_edit.text().strip() or "default",
        }
        before = self._shown_policy
        policy.update({key: value for key, value in shown.items()
                       if before is None or value != getattr(before, key)})
        others = [t for t in (stored.tools if stored else []) if t not in BUILTIN_TOOLS]
        enabled = [name for name, box in self.tool_boxes.items() if box.isChecked()]
        return {
            "name": self.name_edit.text().strip(),
            "instructions": self.instructions_edit.toPlainText(),
            "provider": self.provider_box.currentData(),
            "model": self.model_edit.text().strip() or None,
            "memory_policy": policy,
            "tools": others + enabled,
        }

    def save(self) -> bool:
        """Store the form (on the writer); False when the form itself is not valid."""
        fields = self.form_state()
        if not fields["name"]:
            self._say("An agent needs a name.", ok=False)
            return False
        try:
            MemoryPolicy.from_dict(fields["memory_policy"])
        except WorkbenchError as exc:
            self._say(str(exc), ok=False)
            return False
        ws, stored = self.ctx.workspace, self._stored

        def run() -> Agent:
            if stored is None:
                name = fields.pop("name")
                return ws.create_agent(name, **fields)
            return ws.update_agent(stored.id, **fields)

        def done(agent: Agent) -> None:
            self._saving_ended()
            self.reload(agent.id)
            self._say(f"Saved agent {agent.name!r}.", ok=True)
            self.agent_saved.emit(agent)
            self.ctx.providers_changed.emit()
            self.ctx.sessions_changed.emit()

        self._say("Saving…")
        self._saving_started()
        self.ctx.workers.write(run, name="save the agent", on_done=done,
                               on_error=self._failed("save the agent"))
        return True
