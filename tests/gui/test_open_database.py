"""Opening a database runs on a worker with progress: File → Open Database and the
start-up. A migration is held on an event the test releases, so what is seen while it
runs does not depend on the clock."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QDialogButtonBox
from pytestqt.qtbot import QtBot

from workbench.core.conversation import SessionInfo
from workbench.engine.workspace import Workspace
from workbench.gui.dialogs.open_database import OpenDatabaseDialog, open_at_start
from workbench.gui.main_window import MainWindow
from workbench.gui.models.sessions import SessionRole
from workbench.store import db as db_module
from workbench.store.migrations import MIGRATIONS, Migration

EXTRA = Migration("0999_extra_things",
                  ("CREATE TABLE extra_things (id INTEGER PRIMARY KEY, label TEXT)",))


def _titles(window: MainWindow) -> list[str]:
    model = window.browser.model
    return [model.index(row, 0).data(SessionRole).title for row in range(model.rowCount())]


@pytest.fixture
def older_database(tmp_path: Path, make_session: Callable[..., SessionInfo]) -> Path:
    """A database written by the workbench before the schema change EXTRA."""
    path = tmp_path / "older.db"
    ws = Workspace.open(path)
    make_session(ws, "From the older version", [("user", "hello")])
    ws.close()
    return path


@pytest.fixture
def held_migration(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[threading.Event,
                                                                      threading.Event]]:
    """EXTRA becomes a pending schema change that waits for ``release`` once ``entered``."""
    migrations = (*MIGRATIONS, EXTRA)
    monkeypatch.setattr("workbench.store.migrations.MIGRATIONS", migrations)
    monkeypatch.setattr(db_module, "MIGRATIONS", migrations)
    entered, release = threading.Event(), threading.Event()
    real_apply = db_module.Database._apply

    def held_apply(self: db_module.Database, migration: Migration) -> None:
        if migration is EXTRA:
            entered.set()
            assert release.wait(10), "the test never released the migration"
        real_apply(self, migration)

    monkeypatch.setattr(db_module.Database, "_apply", held_apply)
    yield entered, release
    release.set()


def _backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f"{path.stem}.backup-*"))


def test_opening_a_database_that_needs_a_migration_shows_progress_then_switches(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow], older_database: Path,
    held_migration: tuple[threading.Event, threading.Event],
) -> None:
    entered, release = held_migration
    make_session(workspace, "In the first", [("user", "hi")])
    window = open_window(workspace)

    dialog = window.open_database(older_database)
    assert entered.wait(10)
    # While the schema change runs the window goes on: the dialog says which step it is.
    qtbot.waitUntil(lambda: dialog.isVisible() and "Updating older.db" in dialog.label.text(),
                    timeout=10_000)
    assert "(1 of 1)" in dialog.label.text()
    assert dialog.running and not dialog.buttons.isVisible()  # no Cancel half-way
    ticked: list[int] = []
    QTimer.singleShot(0, lambda: ticked.append(1))
    qtbot.waitUntil(lambda: ticked == [1], timeout=5_000)  # the UI thread is free
    assert "workbench.db" in window.database_label.text()
    assert _titles(window) == ["In the first"]
    assert len(_backups(older_database)) == 1  # the backup came first

    release.set()
    qtbot.waitUntil(lambda: "older.db" in window.database_label.text(), timeout=10_000)
    assert _titles(window) == ["From the older version"]
    assert not dialog.isVisible()
    names = [name for name, _ in window.ctx.workspace.db.applied_migrations()]
    assert names[-1] == EXTRA.name
    window.ctx.workspace.close()


def test_a_database_that_cannot_be_opened_is_said_in_a_sentence(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
    tmp_path: Path,
) -> None:
    not_a_database = tmp_path / "notes.db"
    not_a_database.write_text("these are notes, not a database\n")
    window = open_window(workspace)

    dialog = window.open_database(not_a_database)
    qtbot.waitUntil(lambda: dialog.error is not None and dialog.isVisible(), timeout=10_000)
    text = dialog.label.text()
    assert "is not a SQLite database" in text and "Traceback" not in text
    assert dialog.buttons.standardButtons() == QDialogButtonBox.StandardButton.Close
    assert window.statusBar().currentMessage() == text
    assert "workbench.db" in window.database_label.text()  # still on the first one
    assert not_a_database.read_text() == "these are notes, not a database\n"
    dialog.cancel()  # Close, now that it is not running
    assert not dialog.isVisible()


def test_the_start_up_open_migrates_on_a_worker_with_progress(
    qtbot: QtBot, older_database: Path,
    held_migration: tuple[threading.Event, threading.Event],
) -> None:
    entered, release = held_migration
    seen: list[str] = []

    def release_once_shown() -> None:
        # Runs on the UI thread while the start-up open waits in its event loop.
        shown = [w for w in QApplication.topLevelWidgets()
                 if isinstance(w, OpenDatabaseDialog) and w.isVisible()]
        if entered.is_set() and shown and "Updating" in shown[0].label.text():
            seen.append(shown[0].label.text())
            release.set()
        else:
            QTimer.singleShot(20, release_once_shown)

    QTimer.singleShot(0, release_once_shown)
    prepared: list[Workspace] = []
    workspace, dialog = open_at_start(older_database, prepare=prepared.append)
    assert workspace is not None and prepared == [workspace]
    try:
        assert seen and "older.db" in seen[0]
        assert not dialog.isVisible() and dialog.error is None
        assert len(_backups(older_database)) == 1
        assert [n for n, _ in workspace.db.applied_migrations()][-1] == EXTRA.name
    finally:
        workspace.close()


def test_the_start_up_open_of_a_bad_file_returns_the_sentence(
    qtbot: QtBot, tmp_path: Path,
) -> None:
    folder = tmp_path / "a-folder.db"
    folder.mkdir()
    workspace, dialog = open_at_start(folder)
    assert workspace is None
    assert dialog.label.text() == f"{folder} is a folder, not a database file."
    assert dialog.isVisible()
    dialog.cancel()
