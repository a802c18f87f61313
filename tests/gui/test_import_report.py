"""The report of File → Import Folder on a folder of broken files: each line names its
file, an empty file is called empty, every entry can be read (Show All), and a re-import
says "it was" for one session."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QFileDialog, QPlainTextEdit, QWidget
from pytestqt.qtbot import QtBot

from tests.gui.journey import click, named, press, type_text, with_modal_dialog
from workbench.engine.workspace import Workspace
from workbench.gui.dialogs.import_progress import ImportProgressDialog
from workbench.gui.main_window import MainWindow

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier
BROKEN = 6


def _hostile_folder(folder: Path) -> Path:
    folder.mkdir()
    # Latin-1 text where UTF-8 belongs: imported, with the bad byte replaced.
    (folder / "latin.json").write_bytes(
        b'{"messages": [{"role": "user", "content": "caf\xe9 au lait"}]}')
    (folder / "empty.json").write_bytes(b"")
    for number in range(BROKEN):
        (folder / f"broken{number}.json").write_text('{"messages": [', encoding="utf-8")
    (folder / "good.json").write_text(json.dumps({"messages": [
        {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"}]}),
        encoding="utf-8")
    return folder


def _import_folder(qtbot: QtBot, window: MainWindow, folder: Path) -> ImportProgressDialog:
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)

    def choose(dialog: QWidget) -> None:
        assert isinstance(dialog, QFileDialog)
        type_text(qtbot, str(folder))
        press(qtbot, Qt.Key.Key_Return)

    with_modal_dialog(qtbot, lambda: qtbot.keyClick(window, Qt.Key.Key_I, CTRL | SHIFT),
                      choose)
    dialogs = [w for w in QApplication.topLevelWidgets()
               if isinstance(w, ImportProgressDialog) and w.isVisible()]
    assert len(dialogs) == 1
    dialog = dialogs[0]
    qtbot.waitUntil(lambda: dialog.label.text().startswith("Imported"), timeout=20_000)
    window.ctx.workers.wait_idle()
    return dialog


def test_the_import_report_names_files_and_lists_every_entry_on_demand(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
    tmp_path: Path,
) -> None:
    folder = _hostile_folder(tmp_path / "hostile")
    window = open_window(workspace)
    dialog = _import_folder(qtbot, window, folder)
    text = dialog.label.text()
    assert "Imported 2 sessions." in text
    # The changed entry names its file, not just "item 0".
    assert "latin.json: item 0: Replaced 1 character" in text, text
    assert "\n  • item" not in text
    # Seven skipped entries: five shown, and a way to see the rest.
    assert f"{BROKEN + 1} entries were skipped" in text
    assert "… and 2 more (Show All lists every one)." in text
    details = dialog.findChild(QPlainTextEdit, options=Qt.FindChildOption.FindDirectChildrenOnly)
    assert details is not None and not details.isVisible()
    click(qtbot, dialog, "Show every entry")
    shown = named(dialog, "Every entry of the import", QPlainTextEdit)
    every = shown.toPlainText()
    for number in range(BROKEN):
        assert f"broken{number}.json: " in every
    assert "empty.json: the file is empty" in every
    assert "known format" not in every
    assert "more" not in every
    assert shown.verticalScrollBar() is not None  # a box that scrolls, not a label
    dialog.reject()

    # Importing the same folder again: the two sessions are known, said in plural…
    again = _import_folder(qtbot, window, folder)
    assert "2 were already in the workspace and left as they were." in again.label.text()
    again.reject()
    # …and one known session in the singular.
    single = tmp_path / "single"
    single.mkdir()
    (single / "good.json").write_bytes((folder / "good.json").read_bytes())
    once = _import_folder(qtbot, window, single)
    assert "1 was already in the workspace and left as it was." in once.label.text()
    assert once.show_all_button is None  # nothing was left out
    once.reject()
