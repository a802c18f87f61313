"""The main window shows the workspace's sessions and where they are stored."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from workbench.core.conversation import Message
from workbench.engine.workspace import Workspace
from workbench.gui.app import display_problem, run_gui
from workbench.gui.main_window import MainWindow, SessionTableModel


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    ws = Workspace.open(tmp_path / "workbench.db")
    yield ws
    ws.close()


def _add_session(ws: Workspace, title: str, contents: list[str], tokens_each: int = 0) -> None:
    session = ws.repo.create_session(title=title)
    messages = [Message(role="user", content=c, token_count=tokens_each) for c in contents]
    ws.repo.append_messages(session.id, messages)


def _shown(window: MainWindow) -> dict[str, tuple[str, str]]:
    """Title -> (messages, tokens) as the table displays them."""
    model = window.session_view.model()
    rows = {}
    for row in range(model.rowCount()):
        cells = [
            model.index(row, column).data(Qt.ItemDataRole.DisplayRole)
            for column in range(model.columnCount())
        ]
        rows[cells[SessionTableModel.TITLE]] = (
            cells[SessionTableModel.MESSAGES],
            cells[SessionTableModel.TOKENS],
        )
    return rows


def test_lists_sessions_with_their_counts(
    qtbot: QtBot, workspace: Workspace, tmp_path: Path
) -> None:
    _add_session(workspace, "Trip planning", ["hi"], tokens_each=7)
    _add_session(workspace, "Bug triage", ["first", "second", "third"], tokens_each=1200)

    window = MainWindow(workspace)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)

    # Session totals of the cached per-message counts, with thousands grouped.
    assert _shown(window) == {"Trip planning": ("1", "7"), "Bug triage": ("3", "3,600")}
    model = window.session_view.model()
    headers = [
        model.headerData(column, Qt.Orientation.Horizontal) for column in range(model.columnCount())
    ]
    assert headers == ["Title", "Messages", "Tokens", "Updated"]
    assert all(model.index(row, SessionTableModel.UPDATED).data() for row in range(2))

    assert str(workspace.db_path) in window.database_label.text()
    assert "2 sessions" in window.statusBar().currentMessage()

    image = window.grab()
    assert not image.isNull()
    screenshot = tmp_path / "mainwindow.png"
    assert image.save(str(screenshot))
    assert screenshot.stat().st_size > 0


def test_reload_picks_up_new_sessions(qtbot: QtBot, workspace: Workspace) -> None:
    window = MainWindow(workspace)
    qtbot.addWidget(window)
    assert window.session_view.model().rowCount() == 0
    assert "0 sessions" in window.statusBar().currentMessage()

    _add_session(workspace, "Later", ["hello"])
    window.reload_action.trigger()

    assert list(_shown(window)) == ["Later"]
    assert "1 session" in window.statusBar().currentMessage()


def test_model_fetches_sessions_in_pages(qtbot: QtBot, workspace: Workspace) -> None:
    for number in range(5):
        _add_session(workspace, f"Session {number}", ["hi"])

    model = SessionTableModel(workspace, page_size=2)
    assert model.rowCount() == 2
    assert model.canFetchMore(model.index(-1, -1))
    while model.canFetchMore(model.index(-1, -1)):
        model.fetchMore(model.index(-1, -1))
    titles = {model.session_at(row).title for row in range(model.rowCount())}
    assert titles == {f"Session {number}" for number in range(5)}


def test_quit_closes_the_window(qtbot: QtBot, workspace: Workspace) -> None:
    window = MainWindow(workspace)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    window.quit_action.trigger()
    assert not window.isVisible()


@pytest.mark.parametrize(
    ("env", "platform", "has_problem"),
    [
        ({}, "linux", True),
        ({"DISPLAY": ":0"}, "linux", False),
        ({"WAYLAND_DISPLAY": "wayland-0"}, "linux", False),
        ({"QT_QPA_PLATFORM": "offscreen"}, "linux", False),
        ({"QT_QPA_PLATFORM": "xcb"}, "linux", True),
        ({}, "darwin", False),
        ({}, "win32", False),
    ],
)
def test_display_problem(env: dict[str, str], platform: str, has_problem: bool) -> None:
    problem = display_problem(env, platform)
    assert (problem is not None) == has_problem
    if problem:
        assert "QT_QPA_PLATFORM=offscreen" in problem


def test_run_gui_without_a_display_explains_instead_of_aborting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("sys.platform", "linux")

    assert run_gui(tmp_path / "never-created.db") == 2
    assert "no display" in capsys.readouterr().err
    assert not (tmp_path / "never-created.db").exists()
