"""The window and its dialogs at 200 % text scale on a 1920×1080 screen (960×540 for
Qt): each fits the screen with its buttons in reach. Run in a process of its own, whose
offscreen screen is given that size and scale (the test process's screen is fixed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PROGRAM = """
import json, sys
from pathlib import Path
from PySide6.QtWidgets import QAbstractButton, QApplication
from workbench.engine.workspace import Workspace
from workbench.gui.main_window import MainWindow

app = QApplication(sys.argv[:1])
room = app.primaryScreen().availableGeometry()
workspace = Workspace.open(Path(sys.argv[1]))
window = MainWindow(workspace)
window.show()
app.processEvents()

def inside(widget):
    top_left = widget.mapToGlobal(widget.rect().topLeft())
    bottom_right = widget.mapToGlobal(widget.rect().bottomRight())
    return room.contains(top_left) and room.contains(bottom_right)

found = {"room": [room.width(), room.height()], "window": inside(window), "out": []}
for action in (window.providers_action, window.agents_action, window.shortcuts_action):
    action.trigger()
    app.processEvents()
    dialog = app.activeWindow() if app.activeWindow() is not window else None
    dialog = dialog or [w for w in app.topLevelWidgets()
                        if w.isVisible() and w is not window and w.isWindow()][0]
    for button in dialog.findChildren(QAbstractButton):
        if button.isVisible() and not inside(button):
            found["out"].append(f"{dialog.windowTitle()}: {button.text()}")
    dialog.close()
    app.processEvents()
print(json.dumps(found))
window.close()
workspace.close()
"""


def test_the_window_and_its_dialogs_keep_their_buttons_on_a_200_percent_screen(
    tmp_path: Path,
) -> None:
    screen = tmp_path / "screen.json"
    screen.write_text(json.dumps({"screens": [{
        "name": "1080p", "x": 0, "y": 0, "width": 1920, "height": 1080,
        "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}]}))
    env = dict(os.environ, QT_QPA_PLATFORM=f"offscreen:configfile={screen}",
               QT_SCALE_FACTOR="2", WORKBENCH_HOME=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", PROGRAM, str(tmp_path / "wb.db")],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["room"] == [960, 540]
    assert found["window"], "the main window reaches past the screen"
    assert found["out"] == []
