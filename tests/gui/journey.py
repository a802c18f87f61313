"""Acting as a person in GUI tests: find controls by their accessible names, click them,
type into whatever has the keyboard focus.

A journey test uses these instead of calling slots, so a button that is not wired, a
field that does not take the focus or a dialog that cannot save fails the test.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from PySide6.QtCore import QPoint, Qt, QTimer
from PySide6.QtWidgets import QAbstractButton, QApplication, QDialog, QWidget
from pytestqt.qtbot import QtBot

W = TypeVar("W", bound=QWidget)


def _name_of(widget: QWidget) -> str:
    """What a screen reader calls ``widget``: its accessible name, else a button's text."""
    if widget.accessibleName():
        return widget.accessibleName()
    if isinstance(widget, QAbstractButton):
        return widget.text().replace("&", "")
    return ""


def named(root: QWidget, name: str, kind: type[W] = QWidget) -> W:  # type: ignore[assignment]
    """The one visible widget of ``kind`` under ``root`` whose accessible name is ``name``."""
    found = [w for w in root.findChildren(kind) if _name_of(w) == name
             and w.isVisibleTo(root)]
    if root.accessibleName() == name and isinstance(root, kind):
        found.append(root)
    assert found, f"no visible {kind.__name__} named {name!r}"
    assert len(found) == 1, f"{len(found)} widgets named {name!r}"
    return found[0]


def click(qtbot: QtBot, root: QWidget, name: str) -> QAbstractButton:
    """Click the enabled button named ``name`` with the mouse, as a person would."""
    button = named(root, name, QAbstractButton)
    assert button.isEnabled(), f"{name!r} is disabled"
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton, pos=button.rect().center())
    return button


def focus() -> QWidget:
    """The widget that has the keyboard focus now (it must exist)."""
    widget = QApplication.focusWidget()
    assert widget is not None, "nothing has the keyboard focus"
    return widget


def click_into(qtbot: QtBot, widget: QWidget, pos: QPoint | None = None) -> QWidget:
    """Click into ``widget`` (a field) and return what then has the focus."""
    qtbot.mouseClick(widget, Qt.MouseButton.LeftButton,
                     pos=pos if pos is not None else widget.rect().center())
    return focus()


def type_text(qtbot: QtBot, text: str) -> None:
    """Type ``text`` into the focused widget."""
    qtbot.keyClicks(focus(), text)


def press(qtbot: QtBot, key: Qt.Key,
          modifiers: Qt.KeyboardModifier = Qt.KeyboardModifier.NoModifier) -> None:
    """Press ``key`` (with ``modifiers``) in the focused widget."""
    qtbot.keyClick(focus(), key, modifiers)


def replace_text(qtbot: QtBot, root: QWidget, name: str, text: str) -> None:
    """Click into the field named ``name``, select everything, type ``text``."""
    field = named(root, name)
    click_into(qtbot, field)
    assert focus() is field or field.isAncestorOf(focus()), f"{name!r} took no focus"
    press(qtbot, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    type_text(qtbot, text)


def with_modal_dialog(qtbot: QtBot, open_it: Callable[[], object],
                      act: Callable[[QWidget], None], timeout_ms: int = 5_000) -> None:
    """Run ``open_it`` (which shows a modal dialog and waits in its event loop) and act on
    the dialog once it is up; a dialog still open after ``act`` (or after a failure in
    it) is rejected, so a broken journey fails instead of hanging."""
    failures: list[BaseException] = []
    tries = [timeout_ms // 20]
    acted: list[bool] = []

    def poll() -> None:
        if tries[0] <= 0:
            return  # given up: a later test's dialog is not this one's
        dialog = QApplication.activeModalWidget()
        if dialog is None or QApplication.activeWindow() is not dialog:
            tries[0] -= 1
            if tries[0] > 0:
                QTimer.singleShot(20, poll)
            return
        acted.append(True)
        try:
            act(dialog)
        except BaseException as exc:  # reported after the dialog's loop ends
            failures.append(exc)
        finally:
            if dialog.isVisible() and isinstance(dialog, QDialog):
                dialog.reject()

    QTimer.singleShot(0, poll)
    open_it()
    if failures:
        raise failures[0]
    if not acted:
        tries[0] = 0  # open_it returned without a dialog: stop looking for one
    assert acted, "no modal dialog was shown"
