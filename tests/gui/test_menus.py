"""The menus as a keyboard user meets them: every entry has an access key of its own in
its menu, every shortcut is listed under Help → Keyboard Shortcuts (F1), no shortcut
means two things at once, and the panels and dialogs that had none can be reached."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QApplication, QMenu, QScrollArea, QWidget
from pytestqt.qtbot import QtBot

from tests.gui.conftest import settle
from tests.gui.journey import focus, press
from workbench.engine.workspace import Workspace
from workbench.gui.dialogs.shortcuts import ShortcutsDialog
from workbench.gui.main_window import MainWindow

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier
ALT = Qt.KeyboardModifier.AltModifier
NATIVE = QKeySequence.SequenceFormat.NativeText


def _mnemonic(text: str) -> str | None:
    """The access key of a menu text (``&x``; ``&&`` is a literal ampersand)."""
    i = 0
    while i < len(text) - 1:
        if text[i] == "&":
            if text[i + 1] != "&":
                return text[i + 1].lower()
            i += 1
        i += 1
    return None


def _menus(window: MainWindow) -> list[tuple[str, QMenu]]:
    """Every menu of the menu bar and their submenus, with a path for messages."""
    found: list[tuple[str, QMenu]] = []

    def walk(path: str, menu: QMenu) -> None:
        found.append((path, menu))
        for action in menu.actions():
            if action.menu() is not None:
                walk(f"{path} → {action.text()}", action.menu())

    for action in window.menuBar().actions():
        walk(action.text(), action.menu())
    return found


def test_every_menu_entry_has_an_access_key_of_its_own(
    workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    bar_keys = [_mnemonic(a.text()) for a in window.menuBar().actions()]
    assert None not in bar_keys and len(set(bar_keys)) == len(bar_keys), bar_keys
    menus = _menus(window)
    assert len(menus) >= 8  # File, Edit, Message, Session, View, Panels, Theme, Settings…
    for path, menu in menus:
        menu.aboutToShow.emit()  # menus that update their entries when opened
        entries = [a for a in menu.actions() if not a.isSeparator() and a.isVisible()]
        keys: dict[str, str] = {}
        for action in entries:
            key = _mnemonic(action.text())
            assert key is not None, f"{path}: {action.text()!r} has no access key"
            assert key not in keys, \
                f"{path}: {action.text()!r} and {keys[key]!r} share the access key {key!r}"
            keys[key] = action.text()


def test_every_shortcut_is_in_the_f1_list_and_none_means_two_things(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    press(qtbot, Qt.Key.Key_F1)
    dialogs = [w for w in QApplication.topLevelWidgets()
               if isinstance(w, ShortcutsDialog) and w.isVisible()]
    assert len(dialogs) == 1
    rows = set(dialogs[0].rows())
    dialogs[0].close()
    window_wide: dict[str, str] = {}
    local: dict[str, set[str]] = {}
    for path, menu in _menus(window):
        for action in menu.actions():
            if action.isSeparator() or not action.shortcuts():
                continue
            name = action.text().replace("&", "").rstrip("…").strip()
            keys = ", ".join(s.toString(NATIVE) for s in action.shortcuts())
            assert (name, keys) in rows, f"{path}: {name} ({keys}) is not in the F1 list"
            for sequence in action.shortcuts():
                key = sequence.toString()
                if action.shortcutContext() == Qt.ShortcutContext.WindowShortcut:
                    assert key not in window_wide, \
                        f"{key} is both {window_wide[key]!r} and {name!r}"
                    window_wide[key] = name
                else:
                    local.setdefault(key, set()).add(name)
    clashes = {key: names for key, names in local.items() if key in window_wide}
    assert not clashes, f"shortcuts of a panel that the whole window also uses: {clashes}"
    # What had none before has a shortcut now, and none takes a key every platform keeps
    # for something else.
    named_keys = {name: keys for name, keys in rows}
    for name in ("Compaction", "Context", "Request", "Fork", "Fork From Here", "Providers",
                 "Agents"):
        assert named_keys.get(name), f"{name} has no shortcut"
    reserved = {QKeySequence(k).toString(NATIVE) for k in (
        "Ctrl+S", "Ctrl+W", "Ctrl+P", "Ctrl+A", "Ctrl+X", "Ctrl+V", "Ctrl+H", "Ctrl+M",
        "Alt+F4", "Alt+Tab", "Ctrl+Tab", "F10", "Ctrl+Shift+Esc")}
    taken = {k.strip() for keys in named_keys.values() for k in keys.split(",")}
    assert not taken & reserved


def _first_control_of(panel: QWidget) -> bool:
    return panel.isAncestorOf(focus())


def test_a_panel_key_goes_to_a_panel_in_sight_and_closes_it_only_from_inside(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    window.composer.prompt.setFocus()
    qtbot.waitUntil(lambda: focus() is window.composer.prompt)
    # The Sessions and Search panels are in sight: their keys take the keyboard there.
    for key, dock in ((Qt.Key.Key_1, window.sessions_dock), (Qt.Key.Key_2, window.search_dock)):
        assert dock.widget().isVisible()
        press(qtbot, key, CTRL)
        assert dock.widget().isVisible(), f"Ctrl+{key.name} hid a panel the keys were not in"
        assert dock.isAncestorOf(focus()), f"Ctrl+{key.name} left the keyboard elsewhere"
    # Pressed again from inside the panel, the key closes it; once more brings it back.
    press(qtbot, Qt.Key.Key_2, CTRL)
    assert not window.search_dock.isVisible()
    press(qtbot, Qt.Key.Key_2, CTRL)
    assert window.search.isVisible() and window.search_dock.isAncestorOf(focus())
    # From the menu (no key), a ticked panel in sight closes wherever the keyboard is.
    window.composer.prompt.setFocus()
    qtbot.waitUntil(lambda: focus() is window.composer.prompt)
    window.panel_actions["Sessions"].trigger()
    assert not window.sessions_dock.isVisible()
    assert not window.panel_actions["Sessions"].isChecked()


def test_panel_and_settings_shortcuts_act(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    window.composer.prompt.setFocus()
    for key, panel in ((Qt.Key.Key_3, window.compaction_panel),
                       (Qt.Key.Key_4, window.context_panel),
                       (Qt.Key.Key_5, window.request_inspector),
                       (Qt.Key.Key_2, window.search)):
        press(qtbot, key, CTRL)
        assert panel.isVisible(), f"Ctrl+{key.name} did not show its panel"
        assert _first_control_of(panel), f"Ctrl+{key.name} left the keyboard elsewhere"
        assert not isinstance(focus(), QScrollArea)  # a control, not the box around them
    # Pressed again on the panel in front, it closes the panel (View → Panels unticks).
    press(qtbot, Qt.Key.Key_2, CTRL)
    assert not window.search_dock.isVisible()
    assert not window.panel_actions["Search"].isChecked()
    press(qtbot, Qt.Key.Key_2, CTRL)
    assert window.search_dock.isVisible() and window.search.isVisible()
    assert window.panel_actions["Search"].isChecked()
    press(qtbot, Qt.Key.Key_Comma, CTRL)
    settle(window)
    assert window._providers_dialog.isVisible()
    window._providers_dialog.close()
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    press(qtbot, Qt.Key.Key_G, CTRL | SHIFT)
    settle(window)
    assert window._agents_dialog.isVisible()
    window._agents_dialog.close()


def test_alt_e_then_s_opens_the_session_menu(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    edit = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Edit")
    session = next(a.menu() for a in edit.actions() if a.text() == "&Session")
    edit.popup(window.mapToGlobal(window.rect().center()))
    qtbot.waitUntil(edit.isVisible)
    qtbot.keyClick(edit, Qt.Key.Key_S)
    qtbot.waitUntil(session.isVisible)
    session.close()
    edit.close()
