"""What the list-and-form settings dialogs (Providers, Agents) share: the stored entries
listed on the left with Add and Remove under them, a form on the right with the entry's
name, Save and a status line, Close at the bottom; unsaved edits are never dropped
unasked, whether the person closes the dialog or picks another entry."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLayout,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from workbench.gui.controls import message_box, named, note_label
from workbench.gui.delegates.markdown import plain_tooltip
from workbench.gui.errors import describe_error
from workbench.gui.theme import set_tone


class SettingsFormDialog(QDialog):
    """A dialog editing one named entry at a time (see the module docstring).

    A subclass sets :attr:`entry_kind` and :attr:`accessible_names`, fills the form in
    :meth:`_load` (ending with :meth:`_mark_unedited`), says what the form holds in
    :meth:`form_state` and asks about removing in :meth:`remove_question`.
    """

    failed_while_closed = Signal(str)  # what went wrong, when nobody sees the dialog

    entry_kind = "entry"  # "provider", "agent": how questions name what is edited
    # Accessible names of the shared controls: list, add, remove, name, save, status.
    accessible_names: dict[str, str] = {}

    def __init__(self, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._ask_before_closing = True
        self._baseline: Any = None
        # The form's state a save on the writer is storing: closing the dialog then is
        # not "dropping unsaved edits" (a failure is still said, see _failed).
        self._saving: Any = None
        self.setObjectName(f"{title}Dialog")
        self.setWindowTitle(title)
        self.setAccessibleName(title)
        names = self.accessible_names

        self.list = named(QListWidget(self), names["list"])
        self.list.setMinimumWidth(170)
        self.add_button = named(QPushButton("&Add", self), names["add"])
        self.remove_button = named(QPushButton("&Remove…", self), names["remove"])
        self.name_edit = named(QLineEdit(self), names["name"])
        self.save_button = named(QPushButton("&Save", self), names["save"])
        self.save_button.setDefault(True)
        self.status_label = note_label(self, names["status"], selectable=True)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        self.buttons.rejected.connect(self.reject)
        self.list.currentItemChanged.connect(self._selection_changed)
        self.add_button.clicked.connect(self.new_entry)
        self.remove_button.clicked.connect(self.remove)

    def _lay_out_around(self, form: QLayout, tab_chain: list[QWidget]) -> None:
        """Put the list on the left, ``form`` on the right and Close below; Tab goes
        through the list, Add, Remove, ``tab_chain`` and Close."""
        left = QVBoxLayout()
        left.addWidget(self.list, 1)
        row = QHBoxLayout()
        row.addWidget(self.add_button)
        row.addWidget(self.remove_button)
        left.addLayout(row)
        body = QHBoxLayout()
        body.addLayout(left, 2)
        body.addLayout(form, 5)
        layout = QVBoxLayout(self)
        layout.addLayout(body, 1)
        layout.addWidget(self.buttons)
        chain = [self.list, self.add_button, self.remove_button, *tab_chain, self.buttons]
        for first, second in zip(chain, chain[1:], strict=False):
            QWidget.setTabOrder(first, second)

    # -- to be given by the subclass ---------------------------------------------------

    def reload(self) -> None:
        """Read the stored entries again and fill the form."""
        raise NotImplementedError

    def _load(self, entry: Any) -> None:
        """Fill the form with ``entry`` (None: a blank form for a new one)."""
        raise NotImplementedError

    def form_state(self) -> Any:
        """What the form holds, to tell whether it was edited since it was filled."""
        raise NotImplementedError

    def remove(self) -> None:
        """Remove the entry in the form, after asking."""
        raise NotImplementedError

    def remove_question(self, name: str) -> str:
        """The question asked before the entry ``name`` is removed."""
        raise NotImplementedError

    # -- the list ----------------------------------------------------------------------

    def _show_entries(self, entries: list[Any], chosen: Callable[[Any], bool],
                      tooltip: Callable[[Any], str] | None = None) -> None:
        """List ``entries`` (by name) and fill the form with the first that ``chosen``
        accepts, else the first one, else a blank form."""
        self.list.blockSignals(True)
        self.list.clear()
        found: QListWidgetItem | None = None
        for entry in entries:
            item = QListWidgetItem(entry.name, self.list)
            item.setData(Qt.ItemDataRole.UserRole, entry)
            if tooltip is not None:
                # A model's or server's name is data: shown, never read as markup.
                item.setToolTip(plain_tooltip(tooltip(entry)))
            if found is None and chosen(entry):
                found = item
        if found is None and self.list.count():
            found = self.list.item(0)
        if found is not None:
            # Read again from the store: the form is refilled below, whatever it held.
            self.list.setCurrentItem(found)
        self.list.blockSignals(False)
        self._load(found.data(Qt.ItemDataRole.UserRole) if found is not None else None)

    def reopen(self) -> None:
        """Shown again after it was closed: read the entries again (another database may
        be open, or the CLI changed things) and drop the last visit's status sentence."""
        self._say("")
        self.reload()

    def names(self) -> list[str]:
        """The names the list shows, in order."""
        return [self.list.item(i).text() for i in range(self.list.count())]

    def select(self, name: str) -> bool:
        """Show the stored entry called ``name`` in the form."""
        for i in range(self.list.count()):
            if self.list.item(i).text() == name:
                self.list.setCurrentRow(i)
                return True
        return False

    def _selection_changed(self, current: QListWidgetItem | None,
                           previous: QListWidgetItem | None) -> None:
        if current is None:
            return
        if self.edited() and not self.confirm_discard(self.edited_name()):
            self.list.blockSignals(True)
            self.list.setCurrentItem(previous)  # stay on the edited form
            self.list.blockSignals(False)
            return
        self._load(current.data(Qt.ItemDataRole.UserRole))

    def new_entry(self) -> None:
        """Clear the form for an entry that is not stored yet (Add): unsaved edits are
        not dropped unasked, as when another entry is picked."""
        if self.isVisible() and self.edited() \
                and not self.confirm_discard(self.edited_name()):
            return  # Cancel: the edited form stays, Save is still there
        self.list.blockSignals(True)
        self.list.setCurrentRow(-1)
        self.list.clearSelection()
        self.list.blockSignals(False)
        self._load(None)
        self.name_edit.setFocus()

    # -- the form ----------------------------------------------------------------------

    def _mark_unedited(self) -> None:
        """Take what the form holds now as unedited (it was just filled)."""
        self._baseline = self.form_state()

    def edited(self) -> bool:
        """Whether the form was changed since it was filled (from the store or blank)."""
        state = self.form_state()
        return state != self._baseline and state != self._saving

    def _saving_started(self) -> None:
        self._saving = self.form_state()

    def _saving_ended(self) -> None:
        self._saving = None

    def edited_name(self) -> str:
        """How the question names the entry being edited."""
        return self.name_edit.text() or "the new one"

    def _say(self, text: str, *, ok: bool | None = None) -> None:
        """Show ``text`` in the status line: green when ``ok``, red when not ok."""
        self.status_label.setText(text)
        set_tone(self.status_label, None if ok is None else "good" if ok else "bad")

    def _failed(self, doing: str) -> Callable[[BaseException], None]:
        """A worker's error callback saying in the status line what went wrong."""
        def show(error: BaseException) -> None:
            self._saving = None
            text = describe_error(error, doing=doing)
            self._say(text, ok=False)
            if not self.isVisible():  # closed while saving: said in the window instead
                self.failed_while_closed.emit(text)
        return show

    # -- asking ------------------------------------------------------------------------

    def reject(self) -> None:
        # Esc, Close and the window's close button: unsaved edits are not dropped unasked
        # (Cancel in the question goes back to the form, where Save is).
        if self.isVisible() and self._ask_before_closing and self.edited() \
                and not self.confirm_discard(self.edited_name()):
            return
        super().reject()

    def close_without_asking(self) -> None:
        """Close, dropping unsaved edits (the main window is quitting)."""
        self._ask_before_closing = False
        try:
            self.close()
        finally:
            self._ask_before_closing = True

    def confirm_discard(self, name: str) -> bool:
        """Ask whether the unsaved edits to the entry ``name`` may be dropped."""
        answer = message_box(
            self, QMessageBox.Icon.Question, "Unsaved changes",
            f"Discard the unsaved changes to {self.entry_kind} {name!r}?",
            QMessageBox.StandardButton.Discard | QMessageBox.StandardButton.Cancel,
            QMessageBox.StandardButton.Cancel)
        return answer == QMessageBox.StandardButton.Discard

    def confirm_remove(self, name: str) -> bool:
        """Ask whether to remove the entry ``name``."""
        answer = message_box(
            self, QMessageBox.Icon.Question, f"Remove {self.entry_kind}",
            self.remove_question(name),
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.No)
        return answer == QMessageBox.StandardButton.Yes
