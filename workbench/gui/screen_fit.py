"""Windows and dialogs kept inside the screen's free area.

A size chosen for a 1080p screen at 100 % (the main window's 1280×800, the Agents
dialog's 780×620) is more than a small screen or a large text scale offers: 1920×1080 at
200 % is 960×540. A window past the screen's edge hides what is at its bottom and right,
often the buttons that save or close it, and without a window manager to move it there
is no way to reach them. :func:`keep_on_screen` shrinks such a window to the free area
(never below its minimum size) and moves it inside.
"""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

# What a window manager's title bar takes above a window, and its borders left and right
# together (the frame is not known before the window is first shown).
TITLE_BAR_ROOM = 32
BORDERS_ROOM = 8


def keep_on_screen(window: QWidget, *, title_bar: int = TITLE_BAR_ROOM,
                   borders: int = BORDERS_ROOM) -> None:
    """Shrink ``window`` (a top-level) to its screen's free area, less its frame (once
    shown: the frame it has; before: ``title_bar`` above it and ``borders`` beside it),
    and move it inside when it reaches past an edge."""
    screen = window.screen()
    if screen is None:
        return
    room = screen.availableGeometry()
    frame, inner = window.frameGeometry(), window.geometry()
    if window.isVisible() and frame != inner:
        borders = frame.width() - inner.width()
        title_bar = frame.height() - inner.height()
    width = max(min(window.width(), room.width() - borders), window.minimumWidth(), 1)
    height = max(min(window.height(), room.height() - title_bar), window.minimumHeight(), 1)
    if (width, height) != (window.width(), window.height()):
        window.resize(width, height)
    pos = window.pos()  # the frame's top left corner
    x = min(max(pos.x(), room.left()), max(room.left(), room.right() + 1 - borders - width))
    y = min(max(pos.y(), room.top()), max(room.top(), room.bottom() + 1 - title_bar - height))
    if (x, y) != (pos.x(), pos.y()):
        window.move(x, y)
