"""Starting the desktop application: display check, QApplication, workspace, main window."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from PySide6.QtWidgets import QApplication

from workbench.engine.workspace import Workspace
from workbench.errors import WorkbenchError
from workbench.gui.dialogs.open_database import open_at_start
from workbench.gui.main_window import MainWindow

APP_NAME = "Conversation Workbench"

# Platforms that draw without any window system, so they need no display server.
_HEADLESS_PLATFORMS = frozenset({"offscreen", "minimal", "vnc", "eglfs", "linuxfb", "vkkhrdisplay"})

NO_DISPLAY_MESSAGE = """\
workbench: no display is available (neither DISPLAY nor WAYLAND_DISPLAY is set), so the
window cannot be shown. Either
  - run it inside a desktop session or a virtual X server:  xvfb-run -a workbench
  - or render without a screen:  QT_QPA_PLATFORM=offscreen workbench
The command line works without a display: workbench --help"""


def display_problem(
    env: Mapping[str, str] | None = None, platform: str | None = None
) -> str | None:
    """Say why Qt could not open a window here, or return None when it can.

    Qt aborts the whole process when its platform plugin finds no display, so this is
    checked before a QApplication exists. Only Linux and the other X11/Wayland systems
    need a display server; macOS and Windows always have their own.
    """
    env = os.environ if env is None else env
    platform = sys.platform if platform is None else platform
    if platform in ("darwin", "win32", "cygwin"):
        return None
    requested = env.get("QT_QPA_PLATFORM", "").split(":", 1)[0].strip().lower()
    has_x = bool(env.get("DISPLAY"))
    has_wayland = bool(env.get("WAYLAND_DISPLAY"))
    if requested in _HEADLESS_PLATFORMS:
        return None
    if requested == "xcb" and not has_x:
        return NO_DISPLAY_MESSAGE
    if requested.startswith("wayland") and not has_wayland:
        return NO_DISPLAY_MESSAGE
    if has_x or has_wayland:
        return None
    return NO_DISPLAY_MESSAGE


# How long a thread may hold the GIL while another waits for it (Python's default: 5 ms).
UI_SWITCH_INTERVAL = 0.001


def prefer_responsiveness() -> None:
    """Let the UI thread take the GIL back sooner from busy workers.

    Workers that turn many rows into Python objects (a long session's shape, search
    results) hold the GIL in slices of the switch interval; the UI thread waits up to one
    slice each time it needs it, several times a frame. A shorter slice trades a little
    worker throughput for scrolling without stalls.
    """
    sys.setswitchinterval(UI_SWITCH_INTERVAL)


def settle_after_start() -> None:
    """Keep what the start made out of the cyclic collector's full passes.

    Once the window is up, about 100,000 objects are alive that live as long as the
    process (modules, classes, functions, the window's widgets and their wrappers). A full
    pass of the collector walks every one of them: 100-190 ms on the UI thread of a busy
    two-core machine, the longest stall while scrolling a long session. Collected once
    and then frozen (``gc.freeze``), they are left out of every later pass, which then
    walks only what was made since; reference counting still frees them.
    """
    gc.collect()
    gc.freeze()


def run_gui(db_path: Path | str | None = None) -> int:
    """Open the workspace at ``db_path`` (a file, a team store's ``postgresql://`` URL,
    or None: the default location, ``WORKBENCH_DB`` included) in the main window.

    Returns the process exit status: the event loop's, 1 when the workspace cannot be
    opened, 2 when there is no display to show a window on.
    """
    problem = display_problem()
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2

    prefer_responsiveness()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName(APP_NAME)
    app.setOrganizationName("Conversation Workbench")

    _set_icon(app)
    # Off the UI thread, with progress when it takes a while (a backup, schema changes).
    workspace, dialog = open_at_start(db_path, prepare=Workspace.ensure_sample_session)
    if workspace is None:
        print(f"workbench: {dialog.label.text()}", file=sys.stderr)
        dialog.exec()  # the sentence, until Close
        return 1

    window: MainWindow | None = None
    try:
        window = MainWindow(workspace)
        window.show()
        window.offer_local_servers()  # first run only: local model servers, hosted hint
        settle_after_start()
        return app.exec()
    finally:
        if window is not None:
            # The window may have switched to another database (File → Open Database).
            window.ctx.workspace.close()
        workspace.close()


def _set_icon(app: QApplication) -> None:
    from PySide6.QtGui import QIcon

    from workbench.engine.resources import resource_path

    try:
        icon = resource_path("icons/io.github.conversation_workbench.Workbench.png")
    except WorkbenchError:
        return  # an installation without icons still runs
    app.setWindowIcon(QIcon(str(icon)))
