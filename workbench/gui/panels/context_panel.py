"""The Context panel: what the agent remembers about the open session beyond its messages.

Facts (add, edit in place, delete, remove repeats), the long-term summary (edited, then
saved), tasks (description, status, progress), tool statistics, token usage (the local
count of the active messages beside what the provider billed), and the agent's long-term
memory entries that recall can use here (add, delete).

Everything is read on a reader thread (:func:`~workbench.engine.session_context.
read_session_context`) and every change is an undo command
(:mod:`workbench.gui.panels.context_commands`) written by the one database writer; the
panel reads the context again when a write lands, when a turn adds messages, and when
another session is opened. A newer read makes the answer of an older one be ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from PySide6.QtCore import (
    QAbstractItemModel,
    QRectF,
    QSize,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QFont, QKeySequence, QPainter, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSpinBox,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.core.compaction import dedupe_facts
from workbench.core.conversation import MemoryEntry, SessionContext, Task, TaskStatus, utcnow
from workbench.engine.session_context import ContextOverview, read_session_context
from workbench.gui.context import AppContext
from workbench.gui.controls import add_rows, named, note_label, single_shot
from workbench.gui.delegates.markdown import plain_tooltip, visible_text
from workbench.gui.delegates.visible import MarkedPlainTextEdit, VisibleTextDelegate
from workbench.gui.layout import ElidedLabel, FlowLayout, VerticalScrollArea, named_button
from workbench.gui.models import ModelIndex
from workbench.gui.panels.context_commands import (
    AddFactCommand,
    AddMemoryEntryCommand,
    AddTaskCommand,
    ChangeContextCommand,
    DedupeFactsCommand,
    DeleteMemoryEntryCommand,
    EditContextCommand,
)

RELOAD_DELAY_MS = 150
TaskRole = Qt.ItemDataRole.UserRole + 1
EntryRole = Qt.ItemDataRole.UserRole + 2
STATUSES = [s.value for s in TaskStatus]


class TaskStatusDelegate(QStyledItemDelegate):
    """Edits a task's status with a combo box (committed as soon as one is picked)."""

    def createEditor(self, parent: QWidget, option: QStyleOptionViewItem,
                     index: ModelIndex) -> QWidget:
        box = QComboBox(parent)
        box.setAccessibleName("Task status")
        box.addItems(STATUSES)
        box.activated.connect(lambda _i, box=box: self._picked(box))
        return box

    def _picked(self, box: QComboBox) -> None:
        self.commitData.emit(box)
        self.closeEditor.emit(box, QStyledItemDelegate.EndEditHint.NoHint)

    def setEditorData(self, editor: QWidget, index: ModelIndex) -> None:
        assert isinstance(editor, QComboBox)
        status = str(index.data(Qt.ItemDataRole.EditRole) or "")
        if editor.findText(status) < 0:
            editor.addItem(status)
        editor.setCurrentText(status)

    def setModelData(self, editor: QWidget, model: QAbstractItemModel, index: ModelIndex) -> None:
        assert isinstance(editor, QComboBox)
        model.setData(index, editor.currentText(), Qt.ItemDataRole.EditRole)


class TaskProgressDelegate(QStyledItemDelegate):
    """Paints a task's progress as a bar and edits it as a percentage."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: ModelIndex) -> None:
        value = index.data(Qt.ItemDataRole.EditRole)
        super().paint(painter, option, index)  # background and selection
        if value is None or value == "":
            return
        fraction = max(0, min(100, int(value))) / 100
        palette = option.palette
        fm = option.fontMetrics
        height = min(option.rect.height() - 6, fm.height() + 4)
        rect = QRectF(option.rect.left() + 4.5,
                      option.rect.center().y() - height / 2 + 0.5,
                      option.rect.width() - 9.0, height)
        painter.save()
        painter.fillRect(rect, palette.base())
        done = QRectF(rect.left(), rect.top(), rect.width() * fraction, rect.height())
        painter.fillRect(done, palette.highlight())
        painter.setPen(palette.mid().color())
        painter.drawRect(rect)
        text = f"{int(value)} %"
        painter.setPen(palette.text().color())
        painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, text)
        if fraction > 0:
            # The part of the text over the filled bar in the highlight's text colour.
            painter.setClipRect(done)
            painter.setPen(palette.highlightedText().color())
            painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, text)
        painter.restore()

    def createEditor(self, parent: QWidget, option: QStyleOptionViewItem,
                     index: ModelIndex) -> QWidget:
        spin = QSpinBox(parent)
        spin.setAccessibleName("Task progress")
        spin.setRange(-1, 100)
        spin.setSpecialValueText("none")
        spin.setSuffix(" %")
        return spin

    def setEditorData(self, editor: QWidget, index: ModelIndex) -> None:
        assert isinstance(editor, QSpinBox)
        value = index.data(Qt.ItemDataRole.EditRole)
        editor.setValue(-1 if value is None or value == "" else int(value))

    def setModelData(self, editor: QWidget, model: QAbstractItemModel, index: ModelIndex) -> None:
        assert isinstance(editor, QSpinBox)
        editor.interpretText()
        value = editor.value()
        model.setData(index, None if value < 0 else value, Qt.ItemDataRole.EditRole)


def _rows_table(name: str, headers: list[str], last: QHeaderView.ResizeMode) -> QTableWidget:
    """A table selected by rows, its text in the stretching first column, one line a row
    (elided when narrow, the tooltip has it whole: a wrapped second line would be cut by
    the row's height)."""
    table = named(QTableWidget(0, len(headers)), name)
    table.setTabKeyNavigation(False)  # Tab leaves the table; the arrows move inside
    table.setHorizontalHeaderLabels(headers)
    table.verticalHeader().hide()
    header = table.horizontalHeader()
    header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
    header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
    header.setSectionResizeMode(2, last)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setWordWrap(False)
    table.setMinimumHeight(80)
    return table


def _section(title: str, name: str) -> tuple[QGroupBox, QVBoxLayout]:
    box = QGroupBox(title)
    box.setAccessibleName(name)
    layout = QVBoxLayout(box)
    layout.setContentsMargins(6, 6, 6, 6)
    layout.setSpacing(4)
    return box, layout


def _add_and_delete(
    field: tuple[str, str], add_button: tuple[str, str], add: Callable[[], None],
    delete_button: tuple[str, str], delete: Callable[[], None],
) -> tuple[QLineEdit, QPushButton, QPushButton]:
    """A field to type a new item into (accessible name, placeholder), its Add button and
    a Delete button for the selected items (accessible name, tooltip each); Enter in the
    field adds too."""
    edit = named(QLineEdit(), field[0], placeholder=field[1])
    edit.returnPressed.connect(add)
    return (edit, named_button("Add", *add_button, clicked=add),
            named_button("Delete", *delete_button, clicked=delete))


class ContextPanel(QWidget):
    """Facts, summary, tasks, tool stats, token usage and memory entries of a session."""

    context_loaded = Signal(object)  # the ContextOverview now shown (None: no session)

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.setObjectName("ContextPanel")
        self.overview: ContextOverview | None = None
        self._session_id = 0
        self._loaded_summary = ""
        self._filling = False
        self._stale_while_editing = False

        # A title is data, not markup; a long one is elided (the tooltip holds it whole).
        self.title_label = ElidedLabel("No session is open.", lines=2)
        self.title_label.setAccessibleName("Context of")
        font = QFont(self.title_label.font())
        font.setBold(True)
        self.title_label.setFont(font)

        self._build_facts()
        self._build_summary()
        self._build_tasks()
        self._build_usage()
        self._build_memory()

        body = QWidget()
        column = QVBoxLayout(body)
        column.setContentsMargins(4, 4, 4, 4)
        column.setSpacing(6)
        column.addWidget(self.title_label)
        for box in (self.facts_box, self.summary_box, self.tasks_box, self.usage_box,
                    self.memory_box):
            column.addWidget(box)
        column.addStretch(1)
        self.scroll = VerticalScrollArea.filling(self, body, "Session context")

        self._reload_timer = single_shot(self, RELOAD_DELAY_MS, self.reload)
        ctx.context_changed.connect(self._session_touched)
        ctx.session_reloaded.connect(self._session_touched)
        ctx.session_updated.connect(lambda info: self._session_touched(info.id))  # renamed
        ctx.messages_appended.connect(lambda messages: self._messages_touched(messages))
        for signal in (ctx.message_changed, ctx.message_inserted, ctx.message_removed):
            signal.connect(lambda message: self._messages_touched([message]))
        ctx.workspace_replaced.connect(lambda: self.session_changed(0))
        self._show(None)

    # -- building ---------------------------------------------------------------------

    def _build_facts(self) -> None:
        self.facts_box, layout = _section("Facts", "Facts")
        self.facts_list = QListWidget()
        self.facts_list.setAccessibleName("Facts")
        self.facts_list.setToolTip("Double-click or press F2 to edit a fact; Del deletes.")
        self.facts_list.setWordWrap(True)
        self.facts_list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.facts_list.setEditTriggers(QAbstractItemView.EditTrigger.DoubleClicked
                                        | QAbstractItemView.EditTrigger.EditKeyPressed)
        self.facts_list.setMinimumHeight(80)
        self.facts_list.setMaximumHeight(130)
        # A bidi control in a fact (one a model's reply gave) would reorder it: named.
        self.facts_list.setItemDelegate(VisibleTextDelegate(self.facts_list))
        self._edited_in_place(self.facts_list, self._fact_edited)
        self.fact_edit, self.add_fact_button, self.delete_fact_button = _add_and_delete(
            ("New fact", "Add a fact…"), ("Add fact", "Add the fact typed on the left"),
            self.add_fact, ("Delete facts", "Delete the selected facts (Del)"),
            self.delete_selected_facts)
        self.dedupe_button = named_button("Remove Repeats", "Remove repeated facts",
                                          "Remove facts that repeat an earlier one (case, "
                                          "spacing and final punctuation aside)",
                                          clicked=self.dedupe_facts)
        delete_key = QShortcut(QKeySequence(QKeySequence.StandardKey.Delete), self.facts_list)
        delete_key.setContext(Qt.ShortcutContext.WidgetShortcut)
        delete_key.activated.connect(self.delete_selected_facts)
        # An empty list would take the keyboard (Ctrl+4) where typing does nothing: it
        # gives its place to a line that says so, and the field below takes the keys.
        self.no_facts_label = note_label(self, "No facts")
        self.no_facts_label.setText("No facts yet. Type one below and press Enter to add "
                                    "it; the model is given the facts with every request.")
        self.no_facts_label.hide()
        add_row = QHBoxLayout()
        add_row.addWidget(self.fact_edit, 1)
        add_row.addWidget(self.add_fact_button)
        buttons = FlowLayout()
        buttons.addWidget(self.delete_fact_button)
        buttons.addWidget(self.dedupe_button)
        layout.addWidget(self.no_facts_label)
        layout.addWidget(self.facts_list)
        layout.addLayout(add_row)
        layout.addLayout(buttons)

    def _build_summary(self) -> None:
        self.summary_box, layout = _section("Long-term summary", "Long-term summary")
        self.summary_edit = MarkedPlainTextEdit()  # names bidi controls
        self.summary_edit.setAccessibleName("Long-term summary")
        self.summary_edit.setPlaceholderText("No summary yet. What is written here goes into "
                                             "every request, before the history.")
        self.summary_edit.setTabChangesFocus(True)
        self.summary_edit.setMinimumHeight(70)
        self.summary_edit.setMaximumHeight(120)
        self.summary_edit.textChanged.connect(self._summary_edited)
        self.save_summary_button = named_button("Save", "Save summary",
                                                "Store the edited summary",
                                                clicked=self.save_summary)
        self.revert_summary_button = named_button(
            "Revert", "Revert summary", "Throw the edit away and show the stored summary",
            clicked=self.revert_summary)
        save_key = QShortcut(QKeySequence("Ctrl+Return"), self.summary_edit)
        save_key.setContext(Qt.ShortcutContext.WidgetShortcut)
        save_key.activated.connect(self.save_summary)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.revert_summary_button)
        buttons.addWidget(self.save_summary_button)
        layout.addWidget(self.summary_edit)
        layout.addLayout(buttons)

    def _build_tasks(self) -> None:
        self.tasks_box, layout = _section("Tasks", "Tasks")
        table = _rows_table("Tasks", ["Task", "Status", "Progress"],
                            QHeaderView.ResizeMode.Fixed)
        table.horizontalHeader().resizeSection(2, 80)
        table.setEditTriggers(QAbstractItemView.EditTrigger.DoubleClicked
                              | QAbstractItemView.EditTrigger.EditKeyPressed
                              | QAbstractItemView.EditTrigger.SelectedClicked)
        table.setItemDelegate(VisibleTextDelegate(table))
        table.setItemDelegateForColumn(1, TaskStatusDelegate(table))
        table.setItemDelegateForColumn(2, TaskProgressDelegate(table))
        table.setMaximumHeight(130)
        self._edited_in_place(table, self._task_edited)
        self.tasks_table = table
        self.task_edit, self.add_task_button, self.delete_task_button = _add_and_delete(
            ("New task", "Add a task…"), ("Add task", "Add the task typed on the left"),
            self.add_task, ("Delete tasks", "Delete the selected tasks"),
            self.delete_selected_tasks)
        row = QHBoxLayout()
        row.addWidget(self.task_edit, 1)
        row.addWidget(self.add_task_button)
        row.addWidget(self.delete_task_button)
        layout.addWidget(table)
        layout.addLayout(row)

    def _build_usage(self) -> None:
        self.usage_box = QGroupBox("Usage")
        self.usage_box.setAccessibleName("Usage")
        form = QFormLayout(self.usage_box)
        form.setContentsMargins(6, 6, 6, 6)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        self.local_tokens_label = named(
            QLabel(), "Local token count",
            tip="The session's active messages, counted here with the tokenizer (cached per "
            "message)")
        self.billed_label = named(
            QLabel(), "Provider-billed tokens",
            tip="Input and output tokens the providers reported for this session's calls, "
            "summed")
        self.tools_label = named(QLabel(), "Tool calls")
        self.tools_label.setWordWrap(True)
        for label in (self.local_tokens_label, self.billed_label, self.tools_label):
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            label.setTextFormat(Qt.TextFormat.PlainText)  # tool names are data
        add_rows(form, [("Local count:", self.local_tokens_label),
                        ("Provider billed:", self.billed_label),
                        ("Tool calls:", self.tools_label)])

    def _build_memory(self) -> None:
        self.memory_box, layout = _section("Memory entries", "Memory entries")
        self.memory_note = named(QLabel(), "Memory entries note")
        self.memory_note.setWordWrap(True)
        self.memory_note.setTextFormat(Qt.TextFormat.PlainText)
        table = _rows_table("Memory entries", ["Entry", "Scope", "Namespace"],
                            QHeaderView.ResizeMode.ResizeToContents)
        table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        table.setMaximumHeight(170)
        table.setItemDelegate(VisibleTextDelegate(table))
        self.memory_table = table
        self.memory_edit, self.add_memory_button, self.delete_memory_button = _add_and_delete(
            ("New memory entry", "Remember…"), ("Add memory entry", "Store the entry"),
            self.add_memory_entry, ("Delete memory entries", "Delete the selected entries"),
            self.delete_selected_entries)
        self.memory_scope_box = named(
            QComboBox(), "Memory entry scope",
            tip="agent: recalled in every session of the agent; session: only in this one")
        self.memory_scope_box.addItem("agent", "agent")
        self.memory_scope_box.addItem("session", "session")
        self.memory_namespace_edit = named(
            QLineEdit(), "Memory entry namespace",
            tip="The namespace to store the entry in (empty: the one this session recalls "
            "from)")
        self.memory_namespace_edit.setMaximumWidth(110)
        # The entry gets a line of its own; its scope, namespace and the buttons follow,
        # wrapping in a narrow panel.
        row = FlowLayout()
        row.addWidget(self.memory_scope_box)
        row.addWidget(self.memory_namespace_edit)
        row.addWidget(self.add_memory_button)
        row.addWidget(self.delete_memory_button)
        layout.addWidget(self.memory_note)
        layout.addWidget(table)
        layout.addWidget(self.memory_edit)
        layout.addLayout(row)

    def sizeHint(self) -> QSize:
        return QSize(340, 600)

    # -- reading ------------------------------------------------------------------------

    def session_changed(self, session_id: int) -> None:
        """Another session is open (0: none): show its context."""
        if session_id != self._session_id:
            if self.overview is not None and self.summary_dirty:
                self.save_summary()  # an unsaved summary edit is kept, not dropped
            self._session_id = session_id
            self._loaded_summary = ""
            self.overview = None
            self._show(None)
        self.reload()

    def _session_touched(self, session_id: int) -> None:
        if session_id and session_id == self._session_id:
            self._reload_timer.start()

    def _messages_touched(self, messages: Any) -> None:
        if any(getattr(m, "session_id", None) == self._session_id for m in messages or ()):
            self._reload_timer.start()

    def reload(self) -> None:
        """Read the open session's context again (on a reader thread)."""
        self._reload_timer.stop()
        key = (self, "context")  # a newer read (another session too) supersedes it
        if not self._session_id:
            self.ctx.workers.cancel(key)
            self._show(None)
            return

        def failed(error: BaseException) -> None:
            self.ctx.report_error(error, doing="read the session's context")

        self.ctx.workers.read(read_session_context, self.ctx.workspace, self._session_id,
                              name="read the session's context", key=key, on_done=self._show,
                              on_error=failed)

    def _editing(self) -> bool:
        return (self.facts_list.state() == QAbstractItemView.State.EditingState
                or self.tasks_table.state() == QAbstractItemView.State.EditingState)

    def _editor_closed(self) -> None:
        if self._stale_while_editing:
            self._stale_while_editing = False
            QTimer.singleShot(0, self.reload)

    def _show(self, overview: ContextOverview | None) -> None:
        if overview is not None and self._editing():
            # Never pull an open editor from under the person typing: read again later.
            self._stale_while_editing = True
            return
        self.overview = overview
        enabled = overview is not None
        for box in (self.facts_box, self.summary_box, self.tasks_box, self.usage_box,
                    self.memory_box):
            box.setEnabled(enabled)
        if overview is None:
            self.title_label.setText("No session is open.")
            self._fill_facts([])
            self._fill_summary("", force=True)
            self._fill_tasks([])
            self.local_tokens_label.setText("—")
            self.billed_label.setText("—")
            self.tools_label.setText("—")
            self._fill_entries([])
            self.memory_note.setText("")
            self.context_loaded.emit(None)
            return
        self.title_label.setText(f"{overview.title} · agent {overview.agent_name}")
        context = overview.context
        self._fill_facts(context.facts)
        self._fill_summary(context.summary)
        self._fill_tasks(context.tasks)
        noun = "message" if overview.active_messages == 1 else "messages"
        self.local_tokens_label.setText(
            f"{overview.local_tokens:,} tokens in {overview.active_messages:,} active {noun}")
        usage = context.token_usage
        self.billed_label.setText(f"{usage.input_tokens:,} in · {usage.output_tokens:,} out · "
                                  f"{usage.total:,} total")
        stats = context.tool_stats
        text = f"{stats.total_calls:,} ({stats.failures:,} failed)"
        if stats.by_tool:
            text += "\n" + "\n".join(f"{name}: {count:,}" for name, count
                                     in sorted(stats.by_tool.items(), key=lambda kv: -kv[1]))
        self.tools_label.setText(text)
        self._fill_entries(overview.entries)
        self.memory_note.setText(visible_text(
            f"What agent {overview.agent_name} can recall here "
            f"(recall reads namespace “{overview.namespace}”)."))
        self.memory_namespace_edit.setPlaceholderText(overview.namespace)
        self.context_loaded.emit(overview)

    def _fill_facts(self, facts: list[str]) -> None:
        if [self.facts_list.item(i).text() for i in range(self.facts_list.count())] != facts:
            self._filling = True
            try:
                self.facts_list.clear()
                for fact in facts:
                    item = QListWidgetItem(fact)
                    item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
                    self.facts_list.addItem(item)
            finally:
                self._filling = False
        had_keys = self.facts_list.hasFocus()
        self.facts_list.setHidden(not facts)
        self.no_facts_label.setHidden(bool(facts))
        for button in (self.delete_fact_button, self.dedupe_button):
            button.setEnabled(bool(facts))  # nothing to delete or compare
        if had_keys and not facts:
            self.fact_edit.setFocus(Qt.FocusReason.OtherFocusReason)  # the last one deleted

    def _fill_summary(self, summary: str, *, force: bool = False) -> None:
        # An edit not saved yet stays on screen when the stored summary changes meanwhile.
        dirty = self.summary_edit.text() != self._loaded_summary
        self._loaded_summary = summary
        if force or not dirty or self.summary_edit.text() == summary:
            self._filling = True
            try:
                if self.summary_edit.text() != summary:
                    self.summary_edit.set_text(summary)
            finally:
                self._filling = False
        self._summary_edited()

    def _fill_tasks(self, tasks: list[Task]) -> None:
        table = self.tasks_table
        self._filling = True
        try:
            table.setRowCount(len(tasks))
            for row, task in enumerate(tasks):
                item = QTableWidgetItem(task.description)
                item.setData(TaskRole, task)
                item.setToolTip(plain_tooltip(f"{task.description}\nid: {task.id}"))
                table.setItem(row, 0, item)
                status = QTableWidgetItem(task.status)
                table.setItem(row, 1, status)
                progress = QTableWidgetItem()
                progress.setData(Qt.ItemDataRole.EditRole,
                                 None if task.progress is None else round(task.progress * 100))
                table.setItem(row, 2, progress)
        finally:
            self._filling = False

    def _fill_entries(self, entries: list[MemoryEntry]) -> None:
        table = self.memory_table
        table.setRowCount(len(entries))
        for row, entry in enumerate(entries):
            content = QTableWidgetItem(" ".join(entry.content.split()))
            content.setData(EntryRole, entry)
            when = entry.created_at.strftime("%Y-%m-%d %H:%M") if entry.created_at else "?"
            content.setToolTip(plain_tooltip(f"{entry.content}\n\nstored {when} UTC"))
            table.setItem(row, 0, content)
            scope = "session" if entry.scope == "session" else "agent"
            table.setItem(row, 1, QTableWidgetItem(scope))
            table.setItem(row, 2, QTableWidgetItem(entry.namespace))

    # -- facts ----------------------------------------------------------------------------

    def facts(self) -> list[str]:
        """The facts as shown."""
        return [self.facts_list.item(i).text() for i in range(self.facts_list.count())]

    def _stored_facts(self) -> list[str]:
        return list(self.overview.context.facts) if self.overview is not None else []

    def _edited_in_place(self, view: QListWidget | QTableWidget,
                         edited: Callable[[Any], None]) -> None:
        """Items of ``view`` are edited in place: ``edited`` gets each changed item."""
        view.itemChanged.connect(edited)
        view.itemDelegate().closeEditor.connect(lambda *_: self._editor_closed())

    def _take_typed(self, edit: QLineEdit, *, fold: bool = True) -> str:
        """What was typed into ``edit`` (its white space folded, or only trimmed), taken out
        of it; empty when there is nothing, or no session is shown."""
        text = " ".join(edit.text().split()) if fold else edit.text().strip()
        if not text or self.overview is None:
            return ""
        edit.clear()
        return text

    def add_fact(self) -> None:
        text = self._take_typed(self.fact_edit)
        if not text:
            return
        # The engine appends to the facts stored when the write runs: an add typed
        # before the previous one has landed does not replace it.
        self.ctx.undo_stack.push(AddFactCommand(self.ctx, self._session_id, text))

    def _change_facts(self, text: str, change: Callable[[list[str]], list[str]]) -> None:
        """Push a change of the facts, made by the engine on the facts as stored when
        it runs (an add still on its way is not undone by it)."""

        def run(context: SessionContext) -> None:
            context.facts = change(list(context.facts))

        self.ctx.undo_stack.push(ChangeContextCommand(self.ctx, self._session_id, text, run,
                                                      ("facts",)))

    def _fact_edited(self, item: QListWidgetItem) -> None:
        if self._filling or self.overview is None:
            return
        facts = self._stored_facts()
        row = self.facts_list.row(item)
        if not 0 <= row < len(facts):
            return
        old = facts[row]
        text = " ".join(item.text().split())
        if text == old:
            return

        def edit(current: list[str]) -> list[str]:
            if old in current:  # the fact as shown; others may have come meanwhile
                index = current.index(old)
                return current[:index] + ([text] if text else []) + current[index + 1:]
            return current + [text] if text else current

        # Emptied, the fact goes.
        self._change_facts("Edit fact" if text else "Delete fact", edit)

    def delete_selected_facts(self) -> None:
        rows = sorted({self.facts_list.row(i) for i in self.facts_list.selectedItems()})
        if not rows or self.overview is None:
            return
        shown = self._stored_facts()
        gone = [shown[i] for i in rows if 0 <= i < len(shown)]

        def delete(current: list[str]) -> list[str]:
            for fact in gone:
                if fact in current:
                    current.remove(fact)
            return current

        self._change_facts("Delete fact" if len(rows) == 1 else "Delete facts", delete)

    def dedupe_facts(self) -> None:
        if self.overview is None:
            return
        _kept, removed = dedupe_facts(self._stored_facts())
        if not removed:
            self.ctx.status_reported.emit("No fact repeats another.")
            return
        self.ctx.undo_stack.push(DedupeFactsCommand(self.ctx, self._session_id))

    # -- summary --------------------------------------------------------------------------

    @property
    def summary_dirty(self) -> bool:
        return self.summary_edit.text() != self._loaded_summary

    def _summary_edited(self) -> None:
        dirty = self.overview is not None and self.summary_dirty
        self.save_summary_button.setEnabled(dirty)
        self.revert_summary_button.setEnabled(dirty)
        self.summary_box.setTitle("Long-term summary (edited)" if dirty
                                  else "Long-term summary")

    def save_summary(self) -> None:
        if self.overview is None or not self.summary_dirty:
            return
        text = self.summary_edit.text()
        self.ctx.undo_stack.push(EditContextCommand(self.ctx, self._session_id,
                                                    "Edit long-term summary", summary=text))

    def revert_summary(self) -> None:
        self._filling = True
        try:
            self.summary_edit.set_text(self._loaded_summary)
        finally:
            self._filling = False
        self._summary_edited()

    # -- tasks ----------------------------------------------------------------------------

    def _stored_tasks(self) -> list[Task]:
        return [replace(t) for t in self.overview.context.tasks] if self.overview else []

    def _task_edited(self, item: QTableWidgetItem) -> None:
        if self._filling or self.overview is None:
            return
        row = item.row()
        tasks = self._stored_tasks()
        if not 0 <= row < len(tasks):
            return
        task = tasks[row]
        table = self.tasks_table
        description = " ".join((table.item(row, 0).text() if table.item(row, 0) else "").split())
        status = table.item(row, 1).text() if table.item(row, 1) else task.status
        value = table.item(row, 2).data(Qt.ItemDataRole.EditRole) if table.item(row, 2) \
            else None
        progress = None if value is None or value == "" else max(0, min(100, int(value))) / 100
        changed = replace(task, description=description or task.description, status=status,
                          progress=progress)
        if changed == task:
            return
        edited = replace(changed, updated_at=utcnow())
        self._change_tasks("Edit task", lambda current: [
            replace(edited) if t.id == edited.id else t for t in current])

    def add_task(self) -> None:
        text = self._take_typed(self.task_edit)
        if not text:
            return
        self.ctx.undo_stack.push(AddTaskCommand(self.ctx, self._session_id, text))

    def delete_selected_tasks(self) -> None:
        rows = {index.row() for index in self.tasks_table.selectionModel().selectedRows()}
        if not rows or self.overview is None:
            return
        gone = {t.id for i, t in enumerate(self._stored_tasks()) if i in rows}
        self._change_tasks("Delete task" if len(rows) == 1 else "Delete tasks",
                           lambda current: [t for t in current if t.id not in gone])

    def _change_tasks(self, text: str, change: Callable[[list[Task]], list[Task]]) -> None:
        """Push a change of the tasks, made by the engine on the tasks as stored when it
        runs (like :meth:`_change_facts`)."""

        def run(context: SessionContext) -> None:
            context.tasks = change(list(context.tasks))

        self.ctx.undo_stack.push(ChangeContextCommand(self.ctx, self._session_id, text, run,
                                                      ("tasks",)))

    # -- memory entries -------------------------------------------------------------------

    def entries(self) -> list[MemoryEntry]:
        """The memory entries as shown."""
        return [self.memory_table.item(r, 0).data(EntryRole)
                for r in range(self.memory_table.rowCount())]

    def add_memory_entry(self) -> None:
        text = self._take_typed(self.memory_edit, fold=False)
        if not text:
            return
        self.ctx.undo_stack.push(AddMemoryEntryCommand(
            self.ctx, self._session_id, text, scope=str(self.memory_scope_box.currentData()),
            namespace=self.memory_namespace_edit.text().strip() or None))

    def delete_selected_entries(self) -> None:
        if self.overview is None:
            return
        rows = sorted({index.row() for index in self.memory_table.selectionModel().selectedRows()})
        entries = [self.memory_table.item(r, 0).data(EntryRole) for r in rows]
        if not entries:
            return
        stack = self.ctx.undo_stack
        if len(entries) > 1:
            stack.beginMacro(f"Delete {len(entries)} memory entries")
        for entry in entries:
            stack.push(DeleteMemoryEntryCommand(self.ctx, self._session_id, entry))
        if len(entries) > 1:
            stack.endMacro()
