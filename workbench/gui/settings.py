"""Where the GUI keeps its own settings (window layout, theme, last folders).

The file sits in ``$WORKBENCH_HOME`` when that is set (tests point it at a temporary
folder, so they never read or change a person's real settings), else in the platform's
user configuration folder. It is an INI file on every platform, so it can be read and
removed by hand.
"""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QSettings

APP_DIR_NAME = "conversation-workbench"
SETTINGS_FILENAME = "gui.ini"


def settings_path() -> Path:
    """The INI file holding the GUI's settings."""
    home = os.environ.get("WORKBENCH_HOME")
    if home:
        return Path(home).expanduser() / SETTINGS_FILENAME
    from platformdirs import user_config_dir

    return Path(user_config_dir(APP_DIR_NAME, appauthor=False)) / SETTINGS_FILENAME


def gui_settings() -> QSettings:
    """A QSettings over :func:`settings_path` (created on first write)."""
    return QSettings(str(settings_path()), QSettings.Format.IniFormat)
