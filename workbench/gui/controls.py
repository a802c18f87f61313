"""Small factories for the controls every panel and dialog builds the same way: each
control carries an accessible name (the journey tests and screen readers find it by
that), a view's actions are local to it, timers that coalesce bursts fire once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QFormLayout, QLabel, QLineEdit, QMessageBox, QWidget

W = TypeVar("W", bound=QWidget)


def named(widget: W, name: str, *, tip: str = "", placeholder: str = "") -> W:
    """``widget`` with its accessible name, and a tooltip or placeholder text if given."""
    widget.setAccessibleName(name)
    if tip:
        widget.setToolTip(tip)
    if placeholder:
        widget.setPlaceholderText(placeholder)  # type: ignore[attr-defined]
    return widget


def filter_field(parent: QWidget, name: str, placeholder: str) -> QLineEdit:
    """A line edit for filter or search text, with a button that clears it."""
    edit = named(QLineEdit(parent), name, placeholder=placeholder)
    edit.setClearButtonEnabled(True)
    return edit


def note_label(parent: QWidget, name: str, *, selectable: bool = False) -> QLabel:
    """An empty word-wrapped label for sentences the code sets later: plain text, since
    they quote names, titles and servers' words (a model named ``<img src=/dev/zero>``
    made Qt read that file as an image until memory ran out)."""
    label = named(QLabel(parent), name)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    if selectable:
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


_KEYS_BACK = "workbenchKeysBack"


def set_busy(button: QWidget, busy: bool, holder: QWidget) -> None:
    """Grey ``button`` out while its job runs (``busy``), and enable it again after.

    Keys that were on it wait on ``holder`` (the sentence saying what runs, which a
    screen reader then reads) and come back to it once it is enabled again. Left to Qt
    they fall on the next control: Close, where a second Space closes the dialog, or a
    field that takes the digits typed next."""
    if busy:
        if button.hasFocus() and holder.isVisible():
            button.setProperty(_KEYS_BACK, True)
            holder.setFocus(Qt.FocusReason.OtherFocusReason)
        button.setEnabled(False)
        return
    button.setEnabled(True)
    if button.property(_KEYS_BACK):
        button.setProperty(_KEYS_BACK, False)
        if holder.hasFocus():
            button.setFocus(Qt.FocusReason.OtherFocusReason)


def single_shot(parent: QObject, interval_ms: int, slot: Callable[[], Any]) -> QTimer:
    """A single-shot timer calling ``slot``: each ``start()`` pushes the call back."""
    timer = QTimer(parent)
    timer.setSingleShot(True)
    timer.setInterval(interval_ms)
    timer.timeout.connect(slot)
    return timer


def view_action(owner: QObject, view: QWidget, text: str, slot: Callable[..., Any],
                shortcut: str | QKeySequence | None = None, *, local: bool = True,
                tip: str = "") -> QAction:
    """An action of ``view`` (its context menu and keys), kept by ``owner``:
    ``shortcut`` works while the view has focus (anywhere in the window when not
    ``local``)."""
    action = QAction(text, owner)
    if shortcut is not None:
        action.setShortcut(QKeySequence(shortcut))
        if local:
            action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
    if tip:
        action.setToolTip(tip)
        action.setStatusTip(tip)
    action.triggered.connect(slot)
    view.addAction(action)
    return action


def add_rows(form: QFormLayout, rows: list[tuple[str, QWidget]]) -> QFormLayout:
    """``form`` with a row for each (label, field) of ``rows``."""
    for label, widget in rows:
        form.addRow(label, widget)
    return form


def message_box(parent: QWidget | None, icon: QMessageBox.Icon, title: str, text: str,
                buttons: QMessageBox.StandardButton = QMessageBox.StandardButton.Ok,
                default: QMessageBox.StandardButton = QMessageBox.StandardButton.NoButton,
                ) -> QMessageBox.StandardButton:
    """Show a message box and return the button pressed. Its text is plain text: a
    sentence naming a title, a file or a provider shows them as typed, where
    ``QMessageBox.warning`` would render one that looks like HTML as markup."""
    box = QMessageBox(icon, title, text, buttons, parent)
    box.setTextFormat(Qt.TextFormat.PlainText)
    if default != QMessageBox.StandardButton.NoButton:
        box.setDefaultButton(default)
    return QMessageBox.StandardButton(box.exec())
