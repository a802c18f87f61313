"""Light and dark themes, and the colours that mean a role.

The window uses Qt's Fusion style everywhere, so it looks the same on every platform
and both palettes below are complete. ``system`` follows the platform's colour scheme
when the platform reports one, and is light otherwise.

Fusion draws the edges of check boxes, radio buttons, text fields, lists and progress
bars a shade darker than the window; on a dark window that edge vanishes into the dark
field (an unchecked check box could not be seen). :class:`WorkbenchStyle` draws those
edges again in a colour that stands out from a dark background. Its ✗ on Close (drawn
black) and on Cancel (a dark red) vanished into a dark button too: the style draws those
crosses itself, in the button's text colour and a red of the same contrast, in either
theme (on platforms whose dialog buttons carry icons, such as Linux desktops).
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, QRect, QRectF, QSize, Qt
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QGuiApplication,
    QIcon,
    QIconEngine,
    QPainter,
    QPalette,
    QPen,
    QPixmap,
)
from PySide6.QtWidgets import QApplication, QProxyStyle, QStyle, QStyleOption, QWidget

THEMES = ("system", "light", "dark")

# Role colours (light, dark): distinct in hue and readable on either background.
_ROLE_COLOURS: dict[str, tuple[str, str]] = {
    "system": ("#7a5c00", "#e0b84c"),
    "user": ("#1f5fbf", "#6fa8ff"),
    "assistant": ("#1d7a46", "#5fcf8c"),
    "tool": ("#8a3ea8", "#cf8ae8"),
}
ROLE_GLYPHS = {"system": "S", "user": "U", "assistant": "A", "tool": "T"}
ROLE_LABELS = {"system": "System", "user": "User", "assistant": "Assistant", "tool": "Tool"}


def is_dark(palette: QPalette | None = None) -> bool:
    """Whether the palette (default: the application's) has a dark background."""
    if palette is None:
        palette = QGuiApplication.palette()
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


def role_color(role: str, dark: bool | None = None) -> QColor:
    """The colour that stands for ``role`` on the current (or given) background."""
    if dark is None:
        dark = is_dark()
    light_hex, dark_hex = _ROLE_COLOURS.get(role, ("#555555", "#bbbbbb"))
    return QColor(dark_hex if dark else light_hex)


# Text that says a thing went well or wrong (light, dark): 4.5:1 or more against the
# window and the fields of its theme. The dark theme's were the light ones, 3:1 at best.
_TONES: dict[str, tuple[str, str]] = {
    "good": ("#1b5e20", "#81c784"),
    "bad": ("#c62828", "#ff8a80"),
}
TONE_PROPERTY = "workbenchTone"


def tone_colour(tone: str, dark: bool | None = None) -> QColor:
    """The colour of ``good`` or ``bad`` text on the current (or given) background."""
    if dark is None:
        dark = is_dark()
    light_hex, dark_hex = _TONES[tone]
    return QColor(dark_hex if dark else light_hex)


def set_tone(widget: QWidget, tone: str | None) -> None:
    """Colour ``widget``'s text ``good`` or ``bad`` (None: the theme's own), in the
    theme in effect now and after a change of theme (:func:`apply_theme`)."""
    widget.setProperty(TONE_PROPERTY, tone or "")
    widget.setStyleSheet(f"color: {tone_colour(tone).name()};" if tone else "")


def _retone(app: QApplication) -> None:
    for widget in app.allWidgets():
        tone = widget.property(TONE_PROPERTY)
        if tone:
            set_tone(widget, str(tone))


def monospace_font(base: QFont | None = None) -> QFont:
    """The platform's fixed-pitch font at the size of ``base`` (default: the app font)."""
    font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    size = (base or QGuiApplication.font()).pointSizeF()
    if size > 0:
        font.setPointSizeF(size * 0.95)
    return font


def _dark_palette() -> QPalette:
    p = QPalette()
    window, base, text = QColor("#202124"), QColor("#17181a"), QColor("#e8e8e8")
    disabled = QColor("#7d7f83")
    roles = {
        QPalette.ColorRole.Window: window,
        QPalette.ColorRole.WindowText: text,
        QPalette.ColorRole.Base: base,
        QPalette.ColorRole.AlternateBase: QColor("#25272a"),
        QPalette.ColorRole.ToolTipBase: QColor("#2d2f33"),
        QPalette.ColorRole.ToolTipText: text,
        QPalette.ColorRole.PlaceholderText: disabled,
        QPalette.ColorRole.Text: text,
        QPalette.ColorRole.Button: QColor("#2b2d31"),
        QPalette.ColorRole.ButtonText: text,
        QPalette.ColorRole.BrightText: QColor("#ff6b6b"),
        QPalette.ColorRole.Light: QColor("#3a3c40"),
        QPalette.ColorRole.Midlight: QColor("#323438"),
        QPalette.ColorRole.Mid: QColor("#45474c"),
        QPalette.ColorRole.Dark: QColor("#111214"),
        QPalette.ColorRole.Shadow: QColor("#000000"),
        QPalette.ColorRole.Highlight: QColor("#3d6fb6"),
        QPalette.ColorRole.HighlightedText: QColor("#ffffff"),
        QPalette.ColorRole.Link: QColor("#7fb0ff"),
        QPalette.ColorRole.LinkVisited: QColor("#b59cff"),
    }
    for role, colour in roles.items():
        p.setColor(role, colour)
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text,
                 QPalette.ColorRole.ButtonText):
        p.setColor(QPalette.ColorGroup.Disabled, role, disabled)
    return p


# Edges drawn over Fusion's in the dark theme: indicators stand out more than fields.
DARK_INDICATOR_EDGE = QColor("#8c9097")
DARK_FIELD_EDGE = QColor("#55585e")
_INDICATORS = (QStyle.PrimitiveElement.PE_IndicatorCheckBox,
               QStyle.PrimitiveElement.PE_IndicatorRadioButton)


# The ✗ of Cancel: red, as legible on its button as the button's text (WCAG 4.5:1 or more).
CANCEL_CROSS = ("#c62828", "#ff8a80")  # light, dark


class CrossIconEngine(QIconEngine):
    """A ✗ drawn in the colour the application's palette gives it when painted, so it
    follows a change of theme (``cancel``: red, else the buttons' text colour)."""

    def __init__(self, cancel: bool = False) -> None:
        super().__init__()
        self.cancel = cancel

    def colour(self, mode: QIcon.Mode = QIcon.Mode.Normal) -> QColor:
        """The colour the cross is painted in for ``mode``."""
        palette = QGuiApplication.palette()
        if mode == QIcon.Mode.Disabled:
            return palette.color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.ButtonText)
        if self.cancel:
            return QColor(CANCEL_CROSS[1 if is_dark(palette) else 0])
        return palette.color(QPalette.ColorRole.ButtonText)

    def paint(self, painter: QPainter, rect: QRect, mode: QIcon.Mode,  # noqa: D102
              state: QIcon.State) -> None:
        side = min(rect.width(), rect.height())
        inset = side * 0.22
        box = QRectF(rect.x() + (rect.width() - side) / 2, rect.y() + (rect.height() - side) / 2,
                     side, side).adjusted(inset, inset, -inset, -inset)
        pen = QPen(self.colour(mode), max(1.6, side / 7))
        pen.setCapStyle(Qt.PenCapStyle.RoundCap)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        painter.setPen(pen)
        painter.drawLine(box.topLeft(), box.bottomRight())
        painter.drawLine(QPointF(box.right(), box.top()), QPointF(box.left(), box.bottom()))
        painter.restore()

    def pixmap(self, size: QSize, mode: QIcon.Mode, state: QIcon.State) -> QPixmap:  # noqa: D102
        # Qt's default leaves the pixmap's pixels as they were: start from transparent.
        pixmap = QPixmap(size)
        pixmap.fill(Qt.GlobalColor.transparent)
        painter = QPainter(pixmap)
        self.paint(painter, QRect(QPoint(0, 0), size), mode, state)
        painter.end()
        return pixmap

    def clone(self) -> QIconEngine:  # noqa: D102
        return CrossIconEngine(self.cancel)


class WorkbenchStyle(QProxyStyle):
    """Fusion, with edges that can be seen on a dark palette (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__("Fusion")

    def drawPrimitive(self, element: QStyle.PrimitiveElement, option: QStyleOption,  # noqa: N802
                      painter: QPainter, widget: QWidget | None = None) -> None:
        super().drawPrimitive(element, option, painter, widget)
        if not is_dark(option.palette):
            return
        if element in _INDICATORS:
            self._edge(painter, option, DARK_INDICATOR_EDGE,
                       round_=element == QStyle.PrimitiveElement.PE_IndicatorRadioButton)
        elif element == QStyle.PrimitiveElement.PE_FrameLineEdit:
            self._edge(painter, option, DARK_FIELD_EDGE, radius=2.0)
        elif element == QStyle.PrimitiveElement.PE_Frame:  # lists, tables, text boxes
            self._edge(painter, option, DARK_FIELD_EDGE)

    def standardIcon(self, standard_icon: QStyle.StandardPixmap,  # noqa: N802 - Qt's name
                     option: QStyleOption | None = None,
                     widget: QWidget | None = None) -> QIcon:
        if standard_icon == QStyle.StandardPixmap.SP_DialogCloseButton:
            return QIcon(CrossIconEngine())
        if standard_icon == QStyle.StandardPixmap.SP_DialogCancelButton:
            return QIcon(CrossIconEngine(cancel=True))
        return super().standardIcon(standard_icon, option, widget)

    def drawControl(self, element: QStyle.ControlElement, option: QStyleOption,  # noqa: N802
                    painter: QPainter, widget: QWidget | None = None) -> None:
        super().drawControl(element, option, painter, widget)
        if element == QStyle.ControlElement.CE_ProgressBarGroove and is_dark(option.palette):
            self._edge(painter, option, DARK_FIELD_EDGE, radius=2.0)

    def drawComplexControl(self, control: QStyle.ComplexControl,  # noqa: N802 - Qt's name
                           option: QStyleOption, painter: QPainter,
                           widget: QWidget | None = None) -> None:
        super().drawComplexControl(control, option, painter, widget)
        if control == QStyle.ComplexControl.CC_SpinBox and is_dark(option.palette) \
                and getattr(option, "frame", True):
            self._edge(painter, option, DARK_FIELD_EDGE, radius=2.0)

    @staticmethod
    def _edge(painter: QPainter, option: QStyleOption, colour: QColor, *,
              round_: bool = False, radius: float = 0.0) -> None:
        if not option.state & QStyle.StateFlag.State_Enabled:
            colour = QColor(colour)
            colour.setAlpha(120)
        if option.state & QStyle.StateFlag.State_HasFocus:
            colour = option.palette.color(QPalette.ColorRole.Highlight)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.setPen(QPen(colour, 1.0))
        rect = QRectF(option.rect).adjusted(0.5, 0.5, -0.5, -0.5)
        if round_:
            painter.drawEllipse(rect)
        elif radius:
            painter.drawRoundedRect(rect, radius, radius)
        else:
            painter.drawRect(rect)
        painter.restore()


def system_prefers_dark() -> bool:
    """Whether the platform reports a dark colour scheme."""
    hints = QGuiApplication.styleHints()
    return hints.colorScheme() == Qt.ColorScheme.Dark


def apply_theme(app: QApplication, theme: str) -> str:
    """Apply ``system``, ``light`` or ``dark``; returns the scheme in effect (light/dark)."""
    if theme not in THEMES:
        theme = "system"
    if not isinstance(app.style(), WorkbenchStyle):
        app.setStyle(WorkbenchStyle())
    dark = theme == "dark" or (theme == "system" and system_prefers_dark())
    app.setPalette(_dark_palette() if dark else app.style().standardPalette())
    _retone(app)
    return "dark" if dark else "light"
