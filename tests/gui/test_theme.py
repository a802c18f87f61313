"""The dark theme's controls can be seen: the edge of an unchecked check box, of a text
field, a spin box and a progress bar stands out from the field and from the window
around it; the ✗ on Close and Cancel is as legible as a button's text in either theme."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtGui import QColor, QIcon, QImage, QPalette
from PySide6.QtWidgets import (
    QAbstractButton,
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

from tests.gui.journey import click, named, replace_text
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


def _luminance(colour: QColor) -> float:
    """WCAG 2 relative luminance."""
    def channel(value: int) -> float:
        v = value / 255
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
    return (0.2126 * channel(colour.red()) + 0.7152 * channel(colour.green())
            + 0.0722 * channel(colour.blue()))


def contrast(a: QColor, b: QColor) -> float:
    """The WCAG contrast ratio of two colours (1 to 21)."""
    light, dark = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def _ink_contrast(icon: QIcon, background: QColor) -> float:
    """The contrast of the icon's ink (its opaque pixels; the median one) against
    ``background``."""
    image = icon.pixmap(16, 16).toImage()
    ratios = sorted(contrast(QColor.fromRgba(image.pixel(x, y)), background)
                    for x in range(image.width()) for y in range(image.height())
                    if QColor.fromRgba(image.pixel(x, y)).alpha() >= 200)
    assert ratios, "the icon draws nothing"
    return ratios[len(ratios) // 2]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_cross_on_close_and_cancel_is_as_legible_as_button_text(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow], theme: str,
) -> None:
    # The walk: in the dark theme the ✗ on Close (Fusion draws it black) vanished into
    # the dark button. Dialog buttons carry these icons where the platform asks for them
    # (Linux desktops); the test asks the style for the icon the button box would use.
    window = open_window(workspace)
    window.theme_actions[theme].trigger()
    try:
        window.providers_action.trigger()
        dialog = window._providers_dialog
        assert dialog is not None
        qtbot.waitExposed(dialog)
        close = named(dialog, "Close", QAbstractButton)
        background = close.palette().color(QPalette.ColorRole.Button)
        assert contrast(close.palette().color(QPalette.ColorRole.ButtonText), background) >= 4.5
        style = close.style()
        for kind in (QStyle.StandardPixmap.SP_DialogCloseButton,
                     QStyle.StandardPixmap.SP_DialogCancelButton):
            assert _ink_contrast(style.standardIcon(kind, None, close), background) >= 4.5
        # An icon made before the theme changed is painted in the new theme's colour.
        made_before = style.standardIcon(QStyle.StandardPixmap.SP_DialogCloseButton)
        other = "light" if theme == "dark" else "dark"
        window.theme_actions[other].trigger()
        assert _ink_contrast(made_before, QApplication.palette().color(
            QPalette.ColorRole.Button)) >= 4.5
        dialog.reject()
    finally:
        window.set_theme("light")


def _text_contrast(label: QWidget) -> float:
    """The contrast of ``label``'s text colour against the window behind it."""
    QApplication.processEvents()  # a change of palette reaches the widgets by events
    label.ensurePolished()
    palette = label.palette()
    return contrast(palette.color(QPalette.ColorRole.WindowText),
                    label.window().palette().color(QPalette.ColorRole.Window))


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_a_saved_or_refused_provider_is_said_in_a_colour_that_can_be_read(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow], theme: str,
) -> None:
    # The walk: in the dark theme "Saved provider 'x'." (green) and a refusal (red) in
    # the Providers dialog were 3:1 against the dark window, the red 2.9:1.
    window = open_window(workspace)
    window.theme_actions[theme].trigger()
    try:
        window.providers_action.trigger()
        dialog = window._providers_dialog
        assert dialog is not None
        qtbot.waitExposed(dialog)
        qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog, timeout=5_000)
        status = named(dialog, "Provider status")
        for said, url in (("base URL", "localhost:8080"), ("Saved provider", "http://h/v1")):
            replace_text(qtbot, dialog, "Provider name", "local")
            replace_text(qtbot, dialog, "Base URL", url)
            replace_text(qtbot, dialog, "Model", "m")
            click(qtbot, dialog, "Save the provider")
            qtbot.waitUntil(lambda said=said: said in status.text(), timeout=10_000)
            assert _text_contrast(status) >= 4.5, status.text()
            # A change of theme with the sentence showing keeps it legible.
            other = "light" if theme == "dark" else "dark"
            window.theme_actions[other].trigger()
            assert _text_contrast(status) >= 4.5, status.text()
            window.theme_actions[theme].trigger()
        dialog.close_without_asking()
    finally:
        window.set_theme("light")
