"""Fixtures for the GUI tests: workspaces, sessions, big sessions and windows.

Everything runs on the offscreen platform with the per-test ``WORKBENCH_HOME`` of the
root conftest, so window layouts and settings written here never touch real ones. The
100,000-message session is built once per test run through the store's fast path and
copied for each test that needs it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from workbench.core.conversation import Conversation, Message, SessionInfo
from workbench.engine.workspace import Workspace
from workbench.gui.main_window import MainWindow

BIG_SIZE = 100_000
T0 = datetime(2025, 5, 1, 9, 0, tzinfo=UTC)
BIG_ROLES = ("user", "assistant", "tool", "assistant")


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    ws = Workspace.open(tmp_path / "workbench.db")
    yield ws
    ws.close()


def _message(role: str, content: str, index: int, **fields: Any) -> Message:
    return Message(role=role, content=content, created_at=T0 + timedelta(minutes=index),
                   token_count=max(1, len(content) // 4), token_encoding="o200k_base", **fields)


@pytest.fixture
def make_session() -> Callable[..., SessionInfo]:
    """``make_session(ws, title, [(role, text) | Message, ...])``: a stored session."""

    def make(ws: Workspace, title: str,
             messages: Sequence[tuple[str, str] | Message] = ()) -> SessionInfo:
        built = [m if isinstance(m, Message) else _message(m[0], m[1], i)
                 for i, m in enumerate(messages)]
        return ws.repo.import_many([Conversation(title=title, messages=built)])[0].session

    return make


@pytest.fixture(scope="session")
def big_session_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A database holding one session of 100,000 messages (built once), and its id."""
    path = tmp_path_factory.mktemp("big") / "big.db"
    ws = Workspace.open(path)
    messages = []
    for i in range(BIG_SIZE):
        role = BIG_ROLES[i % len(BIG_ROLES)]
        text = f"Message {i} of the long session."
        if i % 1000 == 0:
            text += f" Milestone marker zebra{i}."
        messages.append(_message(role, text, i, tool_call_id=f"c{i}" if role == "tool" else None))
    info = ws.repo.import_many([Conversation(title="Long session", messages=messages)])[0].session
    ws.repo.create_session(title="Short one")
    ws.close()
    return path, info.id


@pytest.fixture
def big_workspace(big_session_file: tuple[Path, int], tmp_path: Path
                  ) -> Iterator[tuple[Workspace, int]]:
    """A private copy of the 100,000-message database, open, with the long session's id."""
    source, session_id = big_session_file
    target = tmp_path / "big.db"
    for suffix in ("", "-wal", "-shm"):
        extra = Path(str(source) + suffix)
        if extra.exists():
            shutil.copy(extra, Path(str(target) + suffix))
    ws = Workspace.open(target)
    yield ws, session_id
    ws.close()


@pytest.fixture
def open_window(qtbot: QtBot) -> Iterator[Callable[[Workspace], MainWindow]]:
    """``open_window(ws)``: a shown main window; closed (trash purged) after the test."""
    windows: list[MainWindow] = []

    def make(ws: Workspace, *, size: tuple[int, int] = (1200, 800)) -> MainWindow:
        window = MainWindow(ws)
        window.resize(*size)
        window.show()
        qtbot.waitExposed(window)
        # Shortcuts only reach the active window; earlier tests' windows may have been.
        window.activateWindow()
        qtbot.waitActive(window)
        settle(window)
        windows.append(window)
        return window

    yield make
    for window in windows:
        if window.isVisible():
            # A reply still finishing (its end not yet heard on the UI thread) would
            # have the close ask "A reply is still arriving" in a box nobody answers.
            if window.composer is not None:
                window.composer.stop_and_wait()
            window.close()


def settle(window: MainWindow, timeout: float = 10.0) -> None:
    """Let queued events run and every worker job deliver its result."""
    QApplication.processEvents()
    assert window.ctx.workers.wait_idle(timeout), "workers did not finish"
    QApplication.processEvents()


@pytest.fixture
def wait_settled() -> Callable[..., None]:
    return settle
