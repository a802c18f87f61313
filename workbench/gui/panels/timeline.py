"""The centre of the window: role chips over the message timeline, and the edits on it."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QItemSelectionModel, QModelIndex, QPoint, Qt, Signal
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QMenu,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from workbench.core.conversation import ROLES, Message
from workbench.errors import NotFoundError
from workbench.gui.commands import (
    DeleteMessagesCommand,
    EditMessageCommand,
    ForkSessionCommand,
    InsertMessageCommand,
    SetImportantCommand,
)
from workbench.gui.context import AppContext
from workbench.gui.controls import view_action
from workbench.gui.delegates.markdown import CodeBlock
from workbench.gui.delegates.message import MessageDelegate
from workbench.gui.dialogs.ask_text import ask_text
from workbench.gui.layout import ElidedLabel
from workbench.gui.models.timeline import KindRole, MessageRole, TimelineModel
from workbench.gui.panels.timeline_view import TimelineView
from workbench.gui.theme import ROLE_LABELS, is_dark, role_color


def _next_role(message: Message) -> str:
    """The role of the message that usually follows ``message`` in a conversation."""
    if message.role == "assistant":
        return "tool" if message.tool_calls else "user"
    return {"user": "assistant", "tool": "assistant"}.get(message.role, "user")


class RoleFilterBar(QWidget):
    """A checkable chip per role with its message count; unchecking hides the role."""

    role_toggled = Signal(str, bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("Role filters")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        self.chips: dict[str, QToolButton] = {}
        for role in ROLES:
            chip = QToolButton(self)
            chip.setCheckable(True)
            chip.setChecked(True)
            chip.setAutoRaise(False)
            chip.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
            chip.setAccessibleName(f"Show {role} messages")
            chip.setToolTip(f"Show or hide {role} messages")
            chip.toggled.connect(lambda checked, role=role: self.role_toggled.emit(role, checked))
            layout.addWidget(chip)
            self.chips[role] = chip
        layout.addStretch(1)
        self.set_counts(None)

    def set_counts(self, counts: dict[str, int] | None) -> None:
        """Show counts (None: not known yet, the chips wait)."""
        for role, chip in self.chips.items():
            label = ROLE_LABELS[role]
            count = None if counts is None else counts.get(role, 0)
            chip.setText(f"{label}  …" if count is None else f"{label}  {count:,}")
            chip.setEnabled(counts is not None)
            colour = role_color(role).name()
            on_colour = "#111111" if is_dark() else "#ffffff"
            chip.setStyleSheet(
                f"QToolButton {{ border: 1px solid {colour}; border-radius: 10px;"
                " padding: 2px 10px; }"
                f"QToolButton:checked {{ background: {colour}; color: {on_colour}; }}"
                "QToolButton:disabled { border-color: palette(mid); }"
            )

    def set_checked(self, role: str, checked: bool) -> None:
        self.chips[role].setChecked(checked)


class TimelinePanel(QWidget):
    """Role chips and the timeline of the open session, with its editing actions."""

    summary_changed = Signal(str)  # a line about the open session for the status bar

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.setObjectName("TimelinePanel")
        self.prompt_below = False  # a composer under the timeline (set when attached)
        # A long title takes a second line, then is elided (the tooltip holds it whole).
        self.title_label = ElidedLabel("", self, lines=2)
        self.title_label.setAccessibleName("Session title")
        font = self.title_label.font()
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.15)
        self.title_label.setFont(font)
        self.title_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.chips = RoleFilterBar(self)

        self.model = TimelineModel(ctx.workspace, ctx.workers, self)
        self.view = TimelineView(self)
        self.view.empty_text = self.empty_text(False)
        self.delegate = MessageDelegate(self.view)
        self.view.setItemDelegate(self.delegate)
        self.view.setModel(self.model)
        self.view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 0)
        layout.setSpacing(4)
        header = QHBoxLayout()
        header.addWidget(self.title_label, 1)
        layout.addLayout(header)
        layout.addWidget(self.chips)
        layout.addWidget(self.view, 1)

        self._target_message: int | None = None
        self._build_actions()
        self.chips.role_toggled.connect(self._role_toggled)
        self.model.role_counts_changed.connect(self.chips.set_counts)
        self.model.index_loaded.connect(self._index_loaded)
        self.model.edit_requested.connect(self._edit_requested)
        self.model.modelReset.connect(self._update_summary)
        self.model.rowsInserted.connect(lambda *_: self._update_summary())
        self.delegate.importance_toggled.connect(self._toggle_importance_of)
        self.delegate.marker_toggled.connect(self.model.toggle_run)
        self.delegate.copied.connect(self._report_copied)
        self.view.toggle_requested.connect(self._toggle_row)
        self.view.customContextMenuRequested.connect(self._context_menu)
        self.view.selectionModel().selectionChanged.connect(lambda *_: self._update_actions())
        ctx.message_changed.connect(self.model.message_changed)
        ctx.message_inserted.connect(self._message_inserted)
        ctx.message_removed.connect(self.model.message_removed)
        ctx.messages_appended.connect(self.model.messages_appended)
        ctx.session_reloaded.connect(self._session_reloaded)
        ctx.session_hidden.connect(self._session_hidden)
        ctx.workspace_replaced.connect(lambda: self.model.set_workspace(ctx.workspace))
        self._update_actions()
        self._update_summary()

    # -- actions -----------------------------------------------------------------------

    def _action(self, text: str, slot: object, shortcut: str | QKeySequence | None = None,
                tip: str = "") -> QAction:
        return view_action(self, self.view, text, slot, shortcut, tip=tip)

    def _build_actions(self) -> None:
        self.edit_action = self._action("&Edit Message", self.edit_current, "F2",
                                        "Edit the message's text and role in place")
        self.insert_above_action = self._action("Insert Message &Above…",
                                                lambda: self._insert_interactively(0),
                                                "Shift+Ins")
        self.insert_below_action = self._action("Insert Message &Below…",
                                                lambda: self._insert_interactively(1), "Ins")
        self.delete_action = self._action("&Delete Messages", self.delete_selected,
                                          QKeySequence.StandardKey.Delete,
                                          "Delete the selected messages (undoable)")
        self.important_action = self._action("Mark &Important", self.toggle_important,
                                             "Ctrl+B",
                                             "Important messages are never folded")
        self.copy_action = self._action("&Copy Text", self.copy_selected,
                                        QKeySequence.StandardKey.Copy)
        self.copy_code_action = self._action("Copy C&ode", self.copy_code, "Ctrl+Shift+C",
                                             "Copy the code blocks of the message")
        self.fork_action = self._action("&Fork From Here", self.fork_at_current,
                                        "Ctrl+Shift+D",
                                        tip="A new session with the messages up to this one")
        self.jump_action = QAction("&Jump to Message…", self)
        self.jump_action.setShortcut(QKeySequence("Ctrl+G"))
        self.jump_action.triggered.connect(self._jump_interactively)
        self.end_action = QAction("Go to &End", self)
        self.end_action.setShortcut(QKeySequence("Ctrl+End"))
        self.end_action.triggered.connect(self.go_to_end)
        self.start_action = QAction("Go to &Start", self)
        self.start_action.setShortcut(QKeySequence("Ctrl+Home"))
        self.start_action.triggered.connect(self.go_to_start)

    def go_to_start(self) -> None:
        """Show the first rows and make the first message the current one."""
        self.view.scroll_to_start()
        if self.model.rowCount():
            self.view.setCurrentIndex(self.model.index(0, 0))

    def go_to_end(self) -> None:
        """Make the last message the current one and keep to the end."""
        if self.model.rowCount():
            self.view.setCurrentIndex(self.model.index(self.model.rowCount() - 1, 0))
        self.view.scroll_to_end()

    def _update_actions(self) -> None:
        messages = self.selected_messages()
        has_session = bool(self.model.session_id)
        for action in (self.delete_action, self.important_action, self.copy_action):
            action.setEnabled(bool(messages))
        self.edit_action.setEnabled(len(messages) == 1)
        self.copy_code_action.setEnabled(len(messages) == 1)
        self.fork_action.setEnabled(len(messages) == 1)
        self.insert_above_action.setEnabled(has_session)
        self.insert_below_action.setEnabled(has_session)
        self.jump_action.setEnabled(has_session)
        all_important = bool(messages) and all(m.important for m in messages)
        self.important_action.setText("Unmark &Important" if all_important
                                      else "Mark &Important")

    def _context_menu(self, point: QPoint) -> None:
        index = self.view.indexAt(point)
        if index.isValid() and not self.view.selectionModel().isSelected(index):
            self.view.setCurrentIndex(index)
        self._update_actions()
        menu = QMenu(self)
        for action in (self.edit_action, self.insert_above_action, self.insert_below_action,
                       self.important_action, self.copy_action):
            menu.addAction(action)
        self._add_code_and_link_entries(menu)
        menu.addAction(self.fork_action)
        menu.addSeparator()
        menu.addAction(self.delete_action)
        menu.exec(self.view.viewport().mapToGlobal(point))

    def _add_code_and_link_entries(self, menu: QMenu) -> None:
        """Copy Code (a submenu when the message has several blocks) and Open Link, so
        what the mouse reaches on a message the keyboard reaches through this menu."""
        message = self.current_message() if len(self.selected_messages()) == 1 else None
        if message is None:
            return
        blocks = self.delegate.code_blocks(message)
        if len(blocks) == 1:
            menu.addAction(self.copy_code_action)
        elif blocks:
            sub = menu.addMenu("Copy C&ode Block")
            for number, code in enumerate(blocks, 1):
                first = code.text.split("\n", 1)[0]
                label = f"&{number} {code.language or 'code'}: {first}" if number < 10 \
                    else f"{number} {code.language or 'code'}: {first}"
                action = sub.addAction(_elide(label, 60))
                action.triggered.connect(lambda _=False, code=code: self._copy_block(code))
        links = self.delegate.links(message)
        if links:
            sub = menu.addMenu("Open &Link")
            for href in links[:20]:
                action = sub.addAction(_elide(href, 70).replace("&", "&&"))
                action.setToolTip(href)
                action.triggered.connect(
                    lambda _=False, href=href: self.delegate.link_activated.emit(href))

    # -- the open session ----------------------------------------------------------------

    def open_session(self, session_id: int, message_id: int | None = None,
                     position: int | None = None) -> None:
        """Show a session, at its end or at ``message_id``. A message being edited in
        place is saved first, as clicking elsewhere saves it."""
        self.view.commit_edit()
        if session_id:
            try:
                info = self.ctx.workspace.get_session(session_id)
            except NotFoundError:
                session_id, info = 0, None
        else:
            info = None
        self._target_message = None
        self.ctx.current_session_id = session_id
        self.model.set_session(session_id, info.message_count if info else 0)
        self.title_label.setText(info.title if info else "")
        self.view.empty_text = self.empty_text(info is not None)
        if message_id is not None:
            self.jump_to_message(message_id, position)
        else:
            self.view.scroll_to_end()
        self._update_actions()
        self._update_summary()

    def set_title(self, title: str) -> None:
        self.title_label.setText(title)

    def jump_to_message(self, message_id: int, position: int | None = None) -> bool:
        """Select and centre a message of the open session (showing its role and run)."""
        if position is None:
            position = self.model.position_of_message(message_id)
        if position is None:
            return False
        message = self.model.message_at(position)
        if message is None or message.id != message_id:
            position = self.model.position_of_message(message_id)
            message = self.model.message_at(position) if position is not None else None
            if message is None:
                return False
        if message.role not in self.model.allowed_roles:
            self.chips.set_checked(message.role, True)
        self.model.expand_run_holding(position)
        self._target_message = message_id
        self._select_position(position)
        return True

    def _select_position(self, position: int) -> None:
        row = self.model.row_for_position(position)
        index = self.model.index(row, 0)
        self.view.selectionModel().setCurrentIndex(
            index, QItemSelectionModel.SelectionFlag.ClearAndSelect)
        self.view.scrollTo(index, QAbstractItemView.ScrollHint.PositionAtCenter)

    def _index_loaded(self) -> None:
        # A long session's shape arrived and the rows were rebuilt: keep the jump target.
        if self._target_message is not None:
            position = self.model.position_of_message(self._target_message)
            if position is not None:
                self.model.expand_run_holding(position)
                self._select_position(position)

    def _session_reloaded(self, session_id: int) -> None:
        if session_id == self.model.session_id:
            self.model.reload()

    def _session_hidden(self, session_id: int) -> None:
        if session_id == self.model.session_id:
            self.open_session(0)

    def _role_toggled(self, role: str, shown: bool) -> None:
        self.model.set_role_shown(role, shown)

    def empty_text(self, session_open: bool) -> str:
        """What the empty timeline says, with the next steps a person can take."""
        if session_open:
            steps = ["insert a message with Ins"]
            if self.prompt_below:
                steps.insert(0, "type a prompt below (Ctrl+Enter sends)")
            return "This session has no messages yet.\n\n" + _sentence(steps)
        steps = ["open a session on the left", "import conversations with Ctrl+I",
                 "start a new session with Ctrl+N"]
        if self.prompt_below:
            steps.append("type a prompt below")
        return "No session is open.\n\n" + _sentence(steps)

    def _update_summary(self) -> None:
        if not self.model.session_id:
            self.summary_changed.emit("")
            return
        count = self.model.message_count
        shown = self.model.shown_messages()
        noun = "message" if count == 1 else "messages"
        text = f"{count:,} {noun}"
        if shown != count:
            text += f" ({shown:,} shown)"
        self.summary_changed.emit(text)

    # -- selection ---------------------------------------------------------------------

    def selected_messages(self) -> list[Message]:
        rows = sorted(index.row() for index in self.view.selectionModel().selectedRows())
        if not rows and self.view.currentIndex().isValid():
            rows = [self.view.currentIndex().row()]
        out: list[Message] = []
        for row in rows:
            index = self.model.index(row, 0)
            if index.data(KindRole) == "message":
                message = index.data(MessageRole)
                if message is not None:
                    out.append(message)
        return out

    def current_message(self) -> Message | None:
        index = self.view.currentIndex()
        if index.isValid() and index.data(KindRole) == "message":
            return index.data(MessageRole)
        return None

    # -- edits -------------------------------------------------------------------------

    def edit_current(self) -> None:
        index = self.view.currentIndex()
        if index.isValid() and index.data(KindRole) == "message":
            self.view.edit(index)

    def _edit_requested(self, message: Message, role: str, content: str) -> None:
        self.edit_message(message, role, content)

    def edit_message(self, message: Message, role: str, content: str) -> None:
        self.ctx.undo_stack.push(EditMessageCommand(self.ctx, message, role, content))

    def insert_message(self, position: int, role: str, content: str) -> InsertMessageCommand:
        command = InsertMessageCommand(self.ctx, self.model.session_id, position, role, content)
        self.ctx.undo_stack.push(command)
        return command

    def _message_inserted(self, message: Message) -> None:
        self.model.message_inserted(message)
        if message.session_id == self.model.session_id and message.position is not None:
            self._select_position(int(message.position))

    def _insert_interactively(self, below: int) -> None:
        from workbench.gui.dialogs.message_editor import MessageEditorDialog

        if not self.model.session_id:
            return
        current = self.current_message()
        if current is not None and current.position is not None:
            position = int(current.position) + below
        else:
            position = self.model.message_count if below else 0
        role = "user"
        if current is not None:
            # Below a message, the role that answers it (a reply's question comes next,
            # not a second reply); above, the message's own role.
            role = _next_role(current) if below else current.role
        dialog = MessageEditorDialog(self, role=role, title="Insert message")
        if dialog.exec():
            self.insert_message(position, dialog.role(), dialog.text())

    def delete_messages(self, messages: Sequence[Message]) -> None:
        ids = [int(m.id) for m in messages if m.id is not None]
        if ids:
            self.ctx.undo_stack.push(DeleteMessagesCommand(self.ctx, ids))

    def delete_selected(self) -> None:
        self.delete_messages(self.selected_messages())

    def set_important(self, messages: Sequence[Message], important: bool) -> None:
        ids = [int(m.id) for m in messages if m.id is not None]
        if ids:
            self.ctx.undo_stack.push(SetImportantCommand(self.ctx, ids, important))

    def toggle_important(self) -> None:
        messages = self.selected_messages()
        if messages:
            self.set_important(messages, not all(m.important for m in messages))

    def _toggle_importance_of(self, message: Message) -> None:
        self.set_important([message], not message.important)

    def copy_selected(self) -> str:
        """Copy the selected messages' text to the clipboard; returns what was copied."""
        messages = self.selected_messages()
        if not messages:
            return ""
        if len(messages) == 1:
            text = messages[0].content or ""
        else:
            text = "\n\n".join(f"{m.role}: {m.content or ''}" for m in messages)
        QGuiApplication.clipboard().setText(text)
        return text

    def copy_code(self) -> str:
        """Copy the current message's code blocks (one after another); what was copied."""
        message = self.current_message()
        blocks = self.delegate.code_blocks(message) if message is not None else []
        if not blocks:
            self.ctx.status_reported.emit("The message has no code block to copy.")
            return ""
        if len(blocks) == 1:
            return self._copy_block(blocks[0])
        text = "\n\n".join(code.text for code in blocks)
        self.delegate.copy_to_clipboard(self.view.currentIndex(), text, None)
        return text

    def _copy_block(self, code: CodeBlock) -> str:
        self.delegate.copy_to_clipboard(self.view.currentIndex(), code.text, code.first)
        return code.text

    def _toggle_row(self, index: QModelIndex) -> None:
        """Space or Enter on a row: open or close a folded run, show all of a long message."""
        kind = index.data(KindRole)
        if kind == "marker":
            row = index.row()
            self.model.toggle_run(row)
            # The rows above are unchanged: the marker keeps its row, and the keys on it.
            marker = self.model.index(row, 0)
            if marker.data(KindRole) == "marker":
                self.view.selectionModel().setCurrentIndex(
                    marker, QItemSelectionModel.SelectionFlag.ClearAndSelect)
        elif kind == "message" and not self.delegate.toggle_expanded(index):
            self.ctx.status_reported.emit("The message is shown whole (F2 edits it).")

    def _report_copied(self, text: str) -> None:
        lines = text.count("\n") + 1
        what = f"{lines:,} lines" if lines > 1 else f"{len(text):,} characters"
        if len(text) == 1:
            what = "1 character"
        self.ctx.status_reported.emit(f"Copied {what} to the clipboard.")

    def fork_at_current(self) -> None:
        message = self.current_message()
        if message is not None and message.id is not None:
            self.ctx.undo_stack.push(
                ForkSessionCommand(self.ctx, self.model.session_id, int(message.id)))

    def _jump_interactively(self) -> None:
        if not self.model.session_id:
            return
        text, ok = ask_text(
            self, "Jump to message",
            f"Message number (1 to {self.model.message_count:,}) or id (#12345):",
            name="Message number or id")
        if not ok:
            return
        if self.jump_to(text):
            # The keys go to the message jumped to (F2 edits it, Del deletes it).
            self.view.setFocus(Qt.FocusReason.ShortcutFocusReason)
        else:
            self.ctx.status_reported.emit(f"There is no message {text.strip()} here.")

    def jump_to(self, text: str) -> bool:
        """Jump to ``#id`` (a message id) or ``n`` (the n-th message, from 1)."""
        text = text.strip().replace(",", "")
        if text.startswith("#") and text[1:].isdigit():
            return self.jump_to_message(int(text[1:]))
        if text.isdigit() and 1 <= int(text) <= self.model.message_count:
            position = int(text) - 1
            message = self.model.message_at(position)
            if message is not None and message.id is not None:
                return self.jump_to_message(int(message.id), position)
        return False


def _elide(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _sentence(steps: list[str]) -> str:
    """``["a", "b", "c"]`` as "A, b or c." """
    text = steps[0] if len(steps) == 1 else ", ".join(steps[:-1]) + " or " + steps[-1]
    return text[:1].upper() + text[1:] + "."
