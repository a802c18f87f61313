"""The dark theme's controls can be seen: the edge of an unchecked check box, of a text
field, a spin box and a progress bar stands out from the field and from the window
around it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QLineEdit,
    QProgressBar,
    QSpinBox,
    QStyle,
    QStyleOptionButton,
    QWidget,
)
from pytestqt.qtbot import QtBot

from workbench.engine.workspace import Workspace
from workbench.gui.main_window import MainWindow

# Lightness steps (0-255) between an edge and what lies on either side of it; the edge
# Fusion draws on the dark palette differs from both by less than 10.
VISIBLE = 35


def _lightness(image: QImage, x: int, y: int) -> int:
    return QColor(image.pixel(x, y)).lightness()


def _edge_contrast(image: QImage, left: int, y: int) -> int:
    """How much the darkest-or-lightest column of the edge near ``left`` stands out from
    the pixels just outside it and just inside it, along row ``y``."""
    outside = _lightness(image, max(0, left - 2), y)
    inside = _lightness(image, left + 4, y)
    edge = max((_lightness(image, x, y) for x in range(left, left + 2)),
               key=lambda v: min(abs(v - outside), abs(v - inside)))
    return min(abs(edge - outside), abs(edge - inside))


@pytest.fixture
def dark_window(workspace: Workspace, open_window: Callable[..., MainWindow]
                ) -> Iterator[MainWindow]:
    window = open_window(workspace)
    window.set_theme("dark")
    yield window
    window.set_theme("light")


def test_an_unchecked_check_box_is_visible_in_the_agents_dialog(
    qtbot: QtBot, dark_window: MainWindow,
) -> None:
    dialog = dark_window.show_agents()
    qtbot.waitExposed(dialog)
    boxes = [b for b in dialog.findChildren(QCheckBox) if b.accessibleName().startswith("Tool:")]
    box = next(b for b in boxes if not b.isChecked())
    option = QStyleOptionButton()
    option.initFrom(box)
    indicator = box.style().subElementRect(QStyle.SubElement.SE_CheckBoxIndicator, option, box)
    corner = box.mapTo(dialog, indicator.topLeft())
    image = dialog.grab().toImage()  # the window drawn around it too
    assert _edge_contrast(image, corner.x(), corner.y() + indicator.height() // 2) >= VISIBLE
    dialog.reject()


@pytest.mark.parametrize("kind", [QLineEdit, QSpinBox, QProgressBar])
def test_fields_and_bars_have_a_visible_edge(
    qtbot: QtBot, dark_window: MainWindow, kind: type[QWidget],
) -> None:
    holder = QWidget()  # a window of its own: its background is drawn in the grab
    qtbot.addWidget(holder)
    field = kind(holder)
    field.move(QPoint(10, 10))
    field.resize(160, field.sizeHint().height())
    holder.resize(200, 60)
    holder.show()
    qtbot.waitExposed(holder)
    QApplication.processEvents()
    image = holder.grab().toImage()
    assert _edge_contrast(image, 10, 10 + field.height() // 2) >= VISIBLE
