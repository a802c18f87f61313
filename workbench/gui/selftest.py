"""``workbench --selftest``: proof that an installation works, without a screen.

A packaged build can look complete and still fail at the first click: a Qt plugin, the
token vocabularies or a resource file left out of the bundle. The self-test walks the
path a person takes on first start, inside a temporary folder so that nothing of the
user's (database, token cache, Qt settings) is read or written:

1. the resource files are found (sample session, icon, desktop entry);
2. every known token encoding loads from the packaged vocabularies, not as an estimate;
3. a new database opens and receives the sample session;
4. a small OpenAI-format JSON file written for the purpose is imported, with token counts;
5. the main window opens on Qt's offscreen platform and lists the imported session;
6. the application icon renders (the SVG image plugin is present);
7. a full-text search finds a word that only the imported file contains.

Each check prints one line; the first failure stops the run and the exit status is 1.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from PySide6 import __version__ as PYSIDE_VERSION
from PySide6.QtCore import (
    QMessageLogContext,
    QModelIndex,
    QSettings,
    Qt,
    QtMsgType,
    qInstallMessageHandler,
)
from PySide6.QtGui import QIcon, QImageReader
from PySide6.QtWidgets import QAbstractItemView, QApplication, QWidget

from workbench import __version__
from workbench.core import tokens
from workbench.engine.resources import resource_path
from workbench.engine.workspace import Workspace
from workbench.errors import WorkbenchError
from workbench.gui.main_window import MainWindow

APP_ID = "io.github.conversation_workbench.Workbench"

#: Files of ``resources/`` the application cannot do without, relative to that folder.
REQUIRED_RESOURCES: tuple[str, ...] = (
    "sample_session.json",
    f"icons/{APP_ID}.svg",
    f"icons/{APP_ID}.png",
    f"{APP_ID}.desktop",
)

EXIT_OK = 0
EXIT_FAILED = 1


class SelftestFailure(WorkbenchError):
    """A check found the installation broken; the message says what is wrong."""


@dataclass
class _Context:
    """What the checks share: the temporary folder and what earlier checks opened."""

    folder: Path
    word: str = field(default_factory=lambda: f"selftest{uuid.uuid4().hex[:10]}")
    workspace: Workspace | None = None
    imported_title: str = ""
    imported_session_id: int | None = None
    window: QWidget | None = None

    def open_workspace(self) -> Workspace:
        """The workspace the database check opened."""
        if self.workspace is None:
            raise SelftestFailure("No database is open (the database check did not run).")
        return self.workspace


def _check_resources(ctx: _Context) -> str:

    folders = set()
    for name in REQUIRED_RESOURCES:
        try:
            path = resource_path(name)
        except WorkbenchError as exc:
            raise SelftestFailure(str(exc)) from exc
        if path.stat().st_size == 0:
            raise SelftestFailure(f"The resource file {path} is empty.")
        folders.add(str(path.parents[len(Path(name).parts) - 1]))
    return f"{len(REQUIRED_RESOURCES)} files in {', '.join(sorted(folders))}"


def _check_tokens(ctx: _Context) -> str:

    # Counters are cached per process; a fresh load is what proves the vocabularies ship.
    tokens.clear_counters()
    loaded = []
    for name in tokens.KNOWN_ENCODINGS:
        counter = tokens.get_counter(name)
        if counter.estimated:
            raise SelftestFailure(
                f"The {name} token encoding could not be loaded; counts would be estimates. "
                "Its vocabulary file (package bpe-openai) is missing from this installation."
            )
        if counter.count_text("Hello, world") <= 0:
            raise SelftestFailure(f"The {name} encoding counted no tokens in a short text.")
        loaded.append(name)
    return ", ".join(loaded)


def _check_database(ctx: _Context) -> str:

    workspace = Workspace.open(ctx.folder / "selftest.db")
    ctx.workspace = workspace
    sample = workspace.ensure_sample_session()
    if sample is None or sample.message_count == 0:
        raise SelftestFailure("The sample session was not added to a new database.")
    return f"{workspace.db_path.name} with the sample session ({sample.message_count} messages)"


def _write_conversation(ctx: _Context) -> tuple[Path, int]:
    ctx.imported_title = f"Self-test conversation {ctx.word}"
    messages = [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": f"Please remember the code word {ctx.word}."},
        {"role": "assistant", "content": f"Noted: the code word is {ctx.word}."},
    ]
    path = ctx.folder / "conversation.json"
    path.write_text(
        json.dumps({"title": ctx.imported_title, "messages": messages}), encoding="utf-8"
    )
    return path, len(messages)


def _check_import(ctx: _Context) -> str:

    path, expected = _write_conversation(ctx)
    report = ctx.open_workspace().import_path(path)
    created = [info for info, is_new in report.sessions if is_new]
    if len(created) != 1:
        reasons = "; ".join(s.reason for s in report.skipped) or "no session was created"
        raise SelftestFailure(f"Importing {path.name} failed: {reasons}")
    info = created[0]
    if info.message_count != expected:
        raise SelftestFailure(
            f"{path.name} has {expected} messages but {info.message_count} were imported."
        )
    if info.token_count <= 0:
        raise SelftestFailure("The imported messages have no token counts.")
    ctx.imported_session_id = info.id
    return f"{path.name} (OpenAI JSON): {info.message_count} messages, {info.token_count} tokens"


def _titles_shown(window: QWidget) -> set[str]:
    """Every text the window's item views display in their first rows."""
    shown: set[str] = set()
    for view in window.findChildren(QAbstractItemView):
        model = view.model()
        if model is None:
            continue
        try:
            columns = model.columnCount(QModelIndex())
        except TypeError:  # QAbstractListModel makes columnCount private: one column
            columns = 1
        for row in range(min(model.rowCount(QModelIndex()), 500)):
            for column in range(columns):
                value = model.data(model.index(row, column), Qt.ItemDataRole.DisplayRole)
                if isinstance(value, str):
                    shown.add(value)
    return shown


def _check_window(ctx: _Context) -> str:


    window = MainWindow(ctx.open_workspace())
    ctx.window = window
    window.show()
    QApplication.processEvents()
    if not window.isVisible():
        raise SelftestFailure("The main window did not open.")
    if ctx.imported_title not in _titles_shown(window):
        raise SelftestFailure("The main window does not list the imported session.")
    return f"{window.windowTitle()!r} on the {QApplication.platformName()} platform"


def _check_icon(ctx: _Context) -> str:


    formats = {bytes(f.data()).decode() for f in QImageReader.supportedImageFormats()}
    if "svg" not in formats:
        raise SelftestFailure("Qt cannot read SVG images: its svg image plugin is missing.")
    icon = QIcon(str(resource_path(f"icons/{APP_ID}.svg")))
    pixmap = icon.pixmap(64, 64)
    if pixmap.isNull() or pixmap.width() != 64:
        raise SelftestFailure("The application icon does not render.")
    return "SVG icon rendered at 64x64"


def _check_search(ctx: _Context) -> str:

    hits = ctx.open_workspace().search(ctx.word)
    found = [h for h in hits if h.session_id == ctx.imported_session_id]
    if not found:
        raise SelftestFailure(f"Searching for {ctx.word!r} found nothing in the imported session.")
    return f"{len(found)} hit(s) for the imported code word"


CHECKS: tuple[tuple[str, Callable[[_Context], str]], ...] = (
    ("resources", _check_resources),
    ("token encodings", _check_tokens),
    ("database", _check_database),
    ("import", _check_import),
    ("main window", _check_window),
    ("icon", _check_icon),
    ("search", _check_search),
)


@contextmanager
def _isolated_environment(folder: Path) -> Iterator[None]:
    """Point the workbench's data and cache folders at ``folder`` while the checks run."""
    saved = {key: os.environ.get(key) for key in ("WORKBENCH_HOME", "WORKBENCH_DB")}
    os.environ["WORKBENCH_HOME"] = str(folder)
    os.environ.pop("WORKBENCH_DB", None)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# Qt warnings that say nothing about the installation: the offscreen platform cannot pass
# size hints to a window manager it does not have.
_IRRELEVANT_QT_WARNINGS = ("propagateSizeHints",)


@contextmanager
def _quiet_qt_warnings() -> Iterator[None]:
    """Drop the Qt warnings in :data:`_IRRELEVANT_QT_WARNINGS`; pass on every other."""
    previous: Callable[[QtMsgType, QMessageLogContext, str], None] | None = None

    def handler(mode: QtMsgType, context: QMessageLogContext, message: str) -> None:
        if any(text in message for text in _IRRELEVANT_QT_WARNINGS):
            return
        if previous is not None:
            previous(mode, context, message)
        else:
            print(message, file=sys.stderr)

    previous = qInstallMessageHandler(handler)
    try:
        yield
    finally:
        qInstallMessageHandler(previous)


def _application(folder: Path) -> QApplication:
    """The running QApplication, or a new one on the offscreen platform."""

    existing = QApplication.instance()
    if isinstance(existing, QApplication):
        return existing
    # Set before Qt starts: the self-test must run on machines without a display and
    # must not flash a window on those with one.
    os.environ["QT_QPA_PLATFORM"] = "offscreen"
    app = QApplication(sys.argv[:1])
    app.setApplicationName("Conversation Workbench")
    for fmt in (QSettings.Format.NativeFormat, QSettings.Format.IniFormat):
        QSettings.setPath(fmt, QSettings.Scope.UserScope, str(folder / "settings"))
    return app


def _describe_runtime() -> str:


    kind = "frozen bundle" if getattr(sys, "frozen", False) else "Python installation"
    return (
        f"workbench {__version__} selftest: {kind}, Python {platform.python_version()}, "
        f"PySide6 {PYSIDE_VERSION}"
    )


def run_selftest(out: TextIO | None = None) -> int:
    """Run every check in a temporary folder; 0 when all pass, 1 at the first failure."""
    out = sys.stdout if out is None else out
    print(_describe_runtime(), file=out)
    with tempfile.TemporaryDirectory(prefix="workbench-selftest-") as tmp:
        folder = Path(tmp)
        ctx = _Context(folder)
        with _isolated_environment(folder), _quiet_qt_warnings():
            _application(folder)
            try:
                return _run_checks(ctx, out)
            finally:
                _close(ctx)


def _run_checks(ctx: _Context, out: TextIO) -> int:
    for name, check in CHECKS:
        try:
            detail = check(ctx)
        except SelftestFailure as exc:
            print(f"FAIL  {name}: {exc}", file=out)
            return EXIT_FAILED
        except Exception as exc:  # noqa: BLE001 - any crash is a failed check, reported
            print(f"FAIL  {name}: {type(exc).__name__}: {exc}", file=out)
            traceback.print_exc(file=out)
            return EXIT_FAILED
        print(f"ok    {name}: {detail}", file=out)
        out.flush()
    print(f"selftest passed: {len(CHECKS)} checks", file=out)
    return EXIT_OK


def _close(ctx: _Context) -> None:


    if ctx.window is not None:
        ctx.window.close()
        ctx.window.deleteLater()
        QApplication.processEvents()
    if ctx.workspace is not None:
        ctx.workspace.close()
