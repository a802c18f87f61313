"""Side docks that keep their share of the window's width.

Qt gives every pixel a window gains to its central widget, so a dock squeezed in a
small window stays squeezed after the window grows (and a 1600 px window keeps a 310 px
panel). :class:`DockSharesSizer` keeps each side area (left, right) at a share of the
window's width instead: on show, on every resize (maximise and restore included) and
when a dock is shown, floated or docked again, it resizes the docks to that share, never
below the docks' minimum widths (which Qt honours). When the person drags the separator
between a dock and the centre, the width it is dropped at becomes the area's share, kept
with the window's layout between runs.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QGuiApplication, QMouseEvent
from PySide6.QtWidgets import QDockWidget, QMainWindow

from workbench.gui.controls import single_shot

Area = Qt.DockWidgetArea
DEFAULT_SHARES: dict[Area, float] = {Area.LeftDockWidgetArea: 0.2,
                                     Area.RightDockWidgetArea: 0.3}
MIN_SHARE = 0.1
MAX_SHARE = 0.45


def parse_shares(text: object) -> dict[Area, float]:
    """The shares kept in the settings (``"left,right"``); defaults for anything else."""
    shares = dict(DEFAULT_SHARES)
    try:
        left, right = (float(part) for part in str(text).split(","))
    except (TypeError, ValueError):
        return shares
    for area, value in ((Area.LeftDockWidgetArea, left), (Area.RightDockWidgetArea, right)):
        if MIN_SHARE <= value <= MAX_SHARE:
            shares[area] = value
    return shares


def format_shares(shares: dict[Area, float]) -> str:
    """The shares as the settings keep them (see :func:`parse_shares`)."""
    return ",".join(f"{shares[area]:.4f}" for area in DEFAULT_SHARES)


class DockSharesSizer(QObject):
    """Sizes the docks of ``window``'s left and right areas to shares of its width."""

    def __init__(self, window: QMainWindow, shares: dict[Area, float] | None = None) -> None:
        super().__init__(window)
        self.window = window
        self.shares = dict(shares or DEFAULT_SHARES)
        self._docks: list[QDockWidget] = []
        self._pressed: dict[Area, int] | None = None  # dock widths when a drag began
        self._timer = single_shot(self, 0, self.apply)
        window.installEventFilter(self)

    def watch(self, dock: QDockWidget) -> None:
        """Keep ``dock`` at its area's share."""
        self._docks.append(dock)
        dock.visibilityChanged.connect(lambda _visible: self._timer.start())
        dock.topLevelChanged.connect(lambda _floating: self._timer.start())

    def docks_in(self, area: Area) -> list[QDockWidget]:
        """The docks of ``area`` that are shown in the window, not floating (tabbed ones
        count: their area is as wide as the widest minimum among them)."""
        return [d for d in self._docks if self.window.dockWidgetArea(d) == area
                and d.isVisible() and not d.isFloating()]

    def apply(self) -> None:
        """Resize each side area's docks to their share of the window's width."""
        width = self.window.width()
        if width <= 0 or not self.window.isVisible():
            return
        if self._pressed is not None and QGuiApplication.mouseButtons():
            return  # a separator being dragged: the person decides
        for area, share in self.shares.items():
            docks = self.docks_in(area)
            if not docks:
                continue
            floor = max(d.minimumSizeHint().width() for d in docks)
            wanted = max(floor, round(width * share))
            self.window.resizeDocks(docks, [wanted] * len(docks), Qt.Orientation.Horizontal)

    def _widths(self) -> dict[Area, int]:
        out = {}
        for area in self.shares:
            docks = self.docks_in(area)
            if docks:
                out[area] = docks[0].width()
        return out

    def _learn(self) -> None:
        """The separator was dropped: each area's width is its share from now on."""
        before, self._pressed = self._pressed, None
        width = self.window.width()
        if before is None or width <= 0:
            return
        for area, now in self._widths().items():
            if now != before.get(area, now):
                self.shares[area] = min(MAX_SHARE, max(MIN_SHARE, now / width))

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        kind = event.type()
        if kind in (QEvent.Type.Resize, QEvent.Type.Show, QEvent.Type.WindowStateChange):
            self._timer.start()
        elif kind == QEvent.Type.MouseButtonPress and isinstance(event, QMouseEvent) \
                and event.button() == Qt.MouseButton.LeftButton:
            # A press on the window itself (no child under it) is on a dock separator.
            self._pressed = self._widths()
        elif kind == QEvent.Type.MouseButtonRelease and self._pressed is not None:
            # Qt lays the separator's last move out on a timer: read the widths after it.
            self._timer.stop()
            QTimer.singleShot(0, self._learn)
        return False
