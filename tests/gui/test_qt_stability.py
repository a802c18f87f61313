"""Guards against the PySide6 build that crashes CPython 3.11 in long GUI sessions.

PySide6 6.12.0 on Python 3.11 mis-counts references to None: after roughly 5,000 Qt calls
that return nothing the interpreter aborts with ``Fatal Python error: none_dealloc``. A
workbench session makes that many calls within minutes, so the dependency pin keeps 6.12
off 3.11 and these tests fail loudly if it ever comes back.
"""

from __future__ import annotations

import sys

import PySide6
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot

# Four times the count that was enough to crash the affected build.
CALLS = 20_000


def test_many_qt_calls_returning_none_do_not_crash(qtbot: QtBot) -> None:
    label = QLabel()
    qtbot.addWidget(label)
    refs_to_none = sys.getrefcount(None)
    for i in range(CALLS):
        # Both setters return None: the path where the affected build loses a reference.
        label.setText(f"call {i}")
        label.setToolTip(f"tip {i}")
    assert label.text() == f"call {CALLS - 1}"
    assert label.toolTip() == f"tip {CALLS - 1}"
    # None is immortal only from 3.12; before that a leak of references shows up here.
    if sys.version_info < (3, 12):
        assert sys.getrefcount(None) >= refs_to_none - 100


def test_installed_pyside6_is_not_the_crashing_build() -> None:
    major, minor = PySide6.__version_info__[:2]
    affected = sys.version_info < (3, 12) and (major, minor) == (6, 12)
    assert not affected, (
        f"PySide6 {PySide6.__version__} crashes Python "
        f"{sys.version_info.major}.{sys.version_info.minor} (none_dealloc); "
        "reinstall with the pin in pyproject.toml"
    )
