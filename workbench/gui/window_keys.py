"""Window commands whose keys a text field claims for moving its cursor.

Under the X11 key scheme (X11, KDE and GNOME desktops) a line edit takes Ctrl+E as "end
of line" (``QKeySequence.MoveToEndOfLine``): it accepts the shortcut-override event, so
the window's Export shortcut never fired while the session filter, the search box or
any other field had the keyboard, and the key did what End does. The keys the window
documents win there: the field still receives the key press it claimed, and
:class:`WindowKeysFilter`, installed on the fields, turns it into the window's command.
Editing keys (copy, paste, undo, select all…) are not given to it: in a field they act
on the field's text, as people expect.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QAction, QKeyEvent, QKeySequence
from PySide6.QtWidgets import QLineEdit, QWidget


class WindowKeysFilter(QObject):
    """Triggers ``actions`` on the key presses of their shortcuts that reach a field."""

    def __init__(self, actions: Sequence[QAction], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._actions = list(actions)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if event.type() != QEvent.Type.KeyPress or not isinstance(event, QKeyEvent):
            return False
        pressed = QKeySequence(event.keyCombination())
        for action in self._actions:
            if action.isEnabled() and any(
                key.matches(pressed) == QKeySequence.SequenceMatch.ExactMatch
                for key in action.shortcuts()
            ):
                action.trigger()
                return True
        return False


class ShortcutNotice(QObject):
    """Tells whether an action's last trigger came from its shortcut key (Qt sends the
    action a Shortcut event just before it triggers) rather than from a menu."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._by_key: set[QObject] = set()

    def watch(self, action: QAction) -> None:
        action.installEventFilter(self)

    def take(self, action: QAction) -> bool:
        """Whether ``action`` is being triggered by its key (asked once per trigger)."""
        if action in self._by_key:
            self._by_key.discard(action)
            return True
        return False

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if event.type() == QEvent.Type.Shortcut:
            self._by_key.add(watched)
        return False


def give_window_keys(window: QWidget, actions: Sequence[QAction]) -> WindowKeysFilter:
    """Have the keys of ``actions`` reach them from every line edit in ``window`` now
    (spin boxes' and editable combo boxes' fields included)."""
    keys = WindowKeysFilter(actions, window)
    for edit in window.findChildren(QLineEdit):
        edit.installEventFilter(keys)
    return keys
