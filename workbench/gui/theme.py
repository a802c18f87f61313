"""Light and dark themes, and the colours that mean a role.

The window uses Qt's Fusion style everywhere, so it looks the same on every platform
and both palettes below are complete. ``system`` follows the platform's colour scheme
when the platform reports one, and is light otherwise.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QFontDatabase, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

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


def system_prefers_dark() -> bool:
    """Whether the platform reports a dark colour scheme."""
    hints = QGuiApplication.styleHints()
    return hints.colorScheme() == Qt.ColorScheme.Dark


def apply_theme(app: QApplication, theme: str) -> str:
    """Apply ``system``, ``light`` or ``dark``; returns the scheme in effect (light/dark)."""
    if theme not in THEMES:
        theme = "system"
    if app.style().name().lower() != "fusion":
        app.setStyle("Fusion")
    dark = theme == "dark" or (theme == "system" and system_prefers_dark())
    app.setPalette(_dark_palette() if dark else app.style().standardPalette())
    return "dark" if dark else "light"
