"""The team store in the window (SPEC §10), driven as a person drives it.

* File → Open Team Database (Ctrl+Shift+O) asks for a ``postgresql://`` URL and an
  optional password; the password is used for the open, kept in the system keyring only
  when asked, and never written to the settings, the status bar or an error.
* Two desktops on one database (two workspaces, two windows): what one does (a message,
  a rename, an import) the other shows once its watch fires, and both editing at once
  lose nothing.

They run on the test session's PostgreSQL server (tests/pg_server.py; skipped, with the
reason, where PostgreSQL is not installed and ``CI`` is not set). Two windows on one
SQLite file are the journey of tests/gui/test_journeys.py (a second process writing).
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QApplication, QFileDialog, QLineEdit, QWidget
from pytestqt.qtbot import QtBot
from sqlalchemy import event

from tests.gui.conftest import settle
from tests.gui.journey import (
    click,
    click_into,
    focus,
    named,
    press,
    replace_text,
    type_text,
    with_modal_dialog,
)
from tests.memory_keyring import MemoryKeyring
from tests.pg_server import PostgresServer, started_for_tests
from workbench.core.conversation import SessionInfo
from workbench.core.provider import ProviderConfig
from workbench.engine import compaction
from workbench.engine.providers import ProviderSettings
from workbench.engine.team import team_address
from workbench.engine.watch import session_mark
from workbench.engine.workspace import Workspace
from workbench.gui.dialogs.open_database import OpenDatabaseDialog, open_at_start
from workbench.gui.dialogs.providers import ProvidersDialog
from workbench.gui.main_window import TEAM_ADDRESS_KEY, MainWindow
from workbench.gui.models.sessions import SessionRole
from workbench.gui.models.timeline import KindRole, StateRole

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "providers"))

from protocol_server import ProtocolServer  # noqa: E402

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier
CHAT = [
    ("user", "Where should we stay in Lisbon?"),
    ("assistant", "Alfama is close to everything."),
    ("user", "Book two nights."),
]
SECRET = "s3cret-Team-pw"
SERVICE = "conversation-workbench-postgresql"
# Another desktop's change shows once its watch fires: well within this on a test box.
SEEN_MS = 10_000


def _shut(window: MainWindow) -> None:
    """Close the window and the database it shows now, and delete it at once: a timer
    it started must not read a database the test is about to drop."""
    shown = window.ctx.workspace
    window.close()
    window.deleteLater()
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    shown.close()


@pytest.fixture
def show_window(qtbot: QtBot) -> Iterator[Callable[..., MainWindow]]:
    """``show_window(ws, x=0)``: a shown main window, shut (with whatever database it
    switched to) after the test, before the databases' own fixtures end."""
    windows: list[MainWindow] = []

    def make(ws: Workspace, x: int = 0) -> MainWindow:
        window = MainWindow(ws)
        windows.append(window)
        window.resize(1200, 800)
        window.move(x, 0)
        window.show()
        qtbot.waitExposed(window)
        settle(window)
        return window

    yield make
    for window in windows:
        _shut(window)


@contextmanager
def _two_desktops(qtbot: QtBot, url: str, make_session: Callable[..., SessionInfo],
                  show_window: Callable[..., MainWindow], title: str,
                  messages: list[tuple[str, str]],
                  prepare: Callable[[Workspace], object] | None = None,
                  ) -> Iterator[tuple[MainWindow, MainWindow, SessionInfo]]:
    """Two windows, each on a workspace of its own over the same team store (as two
    desktops are), both showing a shared session of ``messages``; ``prepare`` sets the
    store up before the windows open."""
    first, second = Workspace.open(url), Workspace.open(url)
    try:
        if prepare is not None:
            prepare(first)
        info = make_session(first, title, messages)
        windows = [show_window(first), show_window(second, 1220)]
        for window in windows:
            window.open_session(info.id)
            settle(window)
            assert window.timeline.model.rowCount() == len(messages)
        for window in windows:
            # Its listener is up and what it heard on connecting is read: a test's own
            # changes are then all that either window reports.
            _wait_caught_up(qtbot, window, info.id)
        yield windows[0], windows[1], info
    finally:
        first.close()
        second.close()


@pytest.fixture
def desktops(qtbot: QtBot, pg_db_url: str, make_session: Callable[..., SessionInfo],
             show_window: Callable[..., MainWindow],
             ) -> Iterator[tuple[MainWindow, MainWindow, SessionInfo]]:
    """Two desktops on one team store, both showing the shared plan (``CHAT``)."""
    with _two_desktops(qtbot, pg_db_url, make_session, show_window, "Shared plan", CHAT) as shown:
        yield shown


def _wait_caught_up(qtbot: QtBot, window: MainWindow, session_id: int) -> None:
    """Wait until ``window`` has compared the open session with what the store holds
    now (its watch read the session's current mark), then let that report land."""
    ws = window.ctx.workspace
    qtbot.waitUntil(lambda: window.db_watcher.seen_mark
                    == (session_id, session_mark(ws, session_id)), timeout=SEEN_MS)
    settle(window)


def _activate(qtbot: QtBot, window: MainWindow) -> None:
    """Bring ``window`` to the front: shortcuts reach only the active window."""
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=SEEN_MS)


def _listed(window: MainWindow) -> list[tuple[str, int]]:
    model = window.browser.model
    infos = [model.index(row, 0).data(SessionRole) for row in range(model.rowCount())]
    return [(info.title, info.message_count) for info in infos]


def _shown(window: MainWindow) -> list[str]:
    model = window.timeline.model
    return [model.message_at(row).content for row in range(model.rowCount())]


def _insert_below(qtbot: QtBot, window: MainWindow, row: int, text: str) -> None:
    """Ctrl+0 to the timeline, down to ``row``, Ins, type ``text``, Ctrl+Enter."""
    _activate(qtbot, window)
    qtbot.keyClick(window, Qt.Key.Key_0, CTRL)
    assert focus() is window.timeline.view
    press(qtbot, Qt.Key.Key_Home, CTRL)
    for _ in range(row):
        press(qtbot, Qt.Key.Key_Down)

    def write(_dialog: QWidget) -> None:
        assert focus().accessibleName() == "Message text"
        type_text(qtbot, text)
        press(qtbot, Qt.Key.Key_Return, CTRL)

    with_modal_dialog(qtbot, lambda: press(qtbot, Qt.Key.Key_Insert), write)


def _rename_open_session(qtbot: QtBot, window: MainWindow, title: str) -> None:
    """Ctrl+L, Down into the list, F2, Ctrl+A, type ``title``, Enter."""
    _activate(qtbot, window)
    qtbot.keyClick(window, Qt.Key.Key_L, CTRL)
    press(qtbot, Qt.Key.Key_Down)
    qtbot.waitUntil(lambda: focus() is window.browser.view, timeout=SEEN_MS)
    press(qtbot, Qt.Key.Key_F2)
    assert focus().accessibleName() == "Session title"
    press(qtbot, Qt.Key.Key_A, CTRL)
    type_text(qtbot, title)
    press(qtbot, Qt.Key.Key_Return)


def _import_file(qtbot: QtBot, window: MainWindow, path: Path) -> None:
    """Ctrl+I, type the file's path into the file dialog, Enter; wait for the report."""
    _activate(qtbot, window)

    def choose(dialog: QWidget) -> None:
        assert isinstance(dialog, QFileDialog)
        type_text(qtbot, str(path))
        press(qtbot, Qt.Key.Key_Return)

    with_modal_dialog(qtbot, lambda: qtbot.keyClick(window, Qt.Key.Key_I, CTRL), choose)
    qtbot.waitUntil(lambda: window.ctx.workers.idle, timeout=20_000)


# -- two desktops ---------------------------------------------------------------------------


def test_another_desktop_shows_a_message_a_rename_and_an_import(
    qtbot: QtBot, desktops: tuple[MainWindow, MainWindow, SessionInfo], tmp_path: Path,
) -> None:
    mine, theirs, info = desktops

    _insert_below(qtbot, mine, 2, "Written on the first desktop")
    qtbot.waitUntil(lambda: _shown(theirs)[-1:] == ["Written on the first desktop"],
                    timeout=SEEN_MS)
    qtbot.waitUntil(lambda: _listed(theirs) == [("Shared plan", 4)], timeout=SEEN_MS)

    _rename_open_session(qtbot, mine, "Lisbon weekend")
    qtbot.waitUntil(lambda: _listed(theirs) == [("Lisbon weekend", 4)], timeout=SEEN_MS)
    # The open session's title follows too: above the timeline and in the title bar.
    qtbot.waitUntil(lambda: theirs.timeline.title_label.full_text() == "Lisbon weekend",
                    timeout=SEEN_MS)
    assert theirs.windowTitle().startswith("Lisbon weekend")

    export = tmp_path / "porto.json"
    export.write_text(json.dumps({"title": "Porto day trip", "messages": [
        {"role": "user", "content": "Is Porto worth a day trip?"},
        {"role": "assistant", "content": "Yes: the Ribeira and a port cellar."}]}),
        encoding="utf-8")
    _import_file(qtbot, mine, export)
    qtbot.waitUntil(lambda: ("Porto day trip", 2) in _listed(theirs), timeout=SEEN_MS)
    # What the other desktop showed all along stays open there.
    assert theirs.ctx.current_session_id == info.id
    assert _shown(theirs)[-1] == "Written on the first desktop"


def test_two_desktops_editing_at_once_lose_nothing(
    qtbot: QtBot, desktops: tuple[MainWindow, MainWindow, SessionInfo],
) -> None:
    mine, theirs, info = desktops
    # Each writes before it has seen the other's change: both are kept, in one order
    # that both windows show.
    mine.db_watcher.timer.stop()
    theirs.db_watcher.timer.stop()
    _insert_below(qtbot, mine, 2, "Mine, below the last")
    _insert_below(qtbot, theirs, 2, "Theirs, below the last")
    _insert_below(qtbot, mine, 0, "Mine, below the first")
    _rename_open_session(qtbot, theirs, "Renamed on the second desktop")
    mine.db_watcher.timer.start()
    theirs.db_watcher.timer.start()
    settle(mine)
    settle(theirs)

    stored = [m.content for m in mine.ctx.workspace.page_messages(info.id, limit=50)]
    assert sorted(stored) == sorted([text for _role, text in CHAT] + [
        "Mine, below the last", "Theirs, below the last", "Mine, below the first"])
    positions = [m.position for m in mine.ctx.workspace.page_messages(info.id, limit=50)]
    assert positions == list(range(len(stored)))
    for window in (mine, theirs):
        qtbot.waitUntil(lambda window=window: _shown(window) == stored, timeout=SEEN_MS)
        qtbot.waitUntil(lambda window=window: _listed(window) == [
            ("Renamed on the second desktop", 6)], timeout=SEEN_MS)
    assert theirs.ctx.workspace.get_session(info.id).message_count == 6


def _painted(window: MainWindow, row: int) -> str:
    """The text the timeline paints for ``row`` now (the window drawn first)."""
    window.grab()
    timeline = window.timeline
    view = timeline.view
    index = timeline.model.index(row, 0)
    delegate = timeline.delegate
    doc, _cut = delegate._document(  # noqa: SLF001 - what the row paints
        index, timeline.model.message_at(row),
        delegate._text_width(view.viewport().width()), view.font(), False)  # noqa: SLF001
    return doc.toPlainText()


def _edit_last(qtbot: QtBot, window: MainWindow, text: str, *, save: bool = True) -> None:
    """Ctrl+0, Ctrl+End, F2, Ctrl+End, type ``text`` (then Ctrl+Enter when ``save``)."""
    _activate(qtbot, window)
    qtbot.keyClick(window, Qt.Key.Key_0, CTRL)
    assert focus() is window.timeline.view
    press(qtbot, Qt.Key.Key_End, CTRL)
    press(qtbot, Qt.Key.Key_F2)
    assert focus().accessibleName() == "Message text"
    press(qtbot, Qt.Key.Key_End, CTRL)
    type_text(qtbot, text)
    if save:
        press(qtbot, Qt.Key.Key_Return, CTRL)


def test_an_edit_on_one_desktop_is_painted_on_the_other(
    qtbot: QtBot, desktops: tuple[MainWindow, MainWindow, SessionInfo],
) -> None:
    """The other desktop paints the new text, not the rendering it drew before: its
    model held the new message while its timeline still drew the old one."""
    mine, theirs, info = desktops
    assert _painted(theirs, 2) == "Book two nights."

    _edit_last(qtbot, mine, " And a third.")
    qtbot.waitUntil(lambda: [m.content for m in mine.ctx.workspace.page_messages(
        info.id, limit=10)][-1] == "Book two nights. And a third.", timeout=SEEN_MS)

    qtbot.waitUntil(lambda: _shown(theirs)[-1] == "Book two nights. And a third.",
                    timeout=SEEN_MS)
    settle(theirs)
    assert _painted(theirs, 2) == "Book two nights. And a third."
    assert _painted(mine, 2) == "Book two nights. And a third."


def test_an_edit_saved_over_another_desktops_edit_is_refused_and_kept(
    qtbot: QtBot, desktops: tuple[MainWindow, MainWindow, SessionInfo],
) -> None:
    """Both desktops edit the same message; the second to save does not write over the
    first: it is told, its text waits on the clipboard, and Ctrl+Z changes nothing."""
    mine, theirs, info = desktops

    def stored() -> str:
        return [m.content for m in mine.ctx.workspace.page_messages(info.id, limit=10)][-1]

    said: list[str] = []
    theirs.ctx.error_reported.connect(lambda text, _cause: said.append(text))
    _edit_last(qtbot, theirs, " Theirs.", save=False)
    _edit_last(qtbot, mine, " Mine.")
    qtbot.waitUntil(lambda: stored() == "Book two nights. Mine.", timeout=SEEN_MS)

    _activate(qtbot, theirs)
    assert focus().accessibleName() == "Message text"
    press(qtbot, Qt.Key.Key_Return, CTRL)
    qtbot.waitUntil(lambda: bool(said), timeout=SEEN_MS)
    assert "changed in another window or on another desktop" in said[0]
    assert QApplication.clipboard().text() == "Book two nights. Theirs."
    assert stored() == "Book two nights. Mine."
    qtbot.waitUntil(lambda: _shown(theirs)[-1] == "Book two nights. Mine.", timeout=SEEN_MS)

    qtbot.keyClick(theirs, Qt.Key.Key_0, CTRL)
    press(qtbot, Qt.Key.Key_Z, CTRL)
    theirs.ctx.workers.wait_idle()
    assert stored() == "Book two nights. Mine."


def test_an_undo_does_not_put_the_old_text_over_another_desktops_edit(
    qtbot: QtBot, desktops: tuple[MainWindow, MainWindow, SessionInfo],
) -> None:
    mine, theirs, info = desktops

    def stored() -> str:
        return [m.content for m in mine.ctx.workspace.page_messages(info.id, limit=10)][-1]

    said: list[str] = []
    mine.ctx.error_reported.connect(lambda text, _cause: said.append(text))
    _edit_last(qtbot, mine, " Mine.")
    qtbot.waitUntil(lambda: stored() == "Book two nights. Mine.", timeout=SEEN_MS)
    qtbot.waitUntil(lambda: _shown(theirs)[-1] == "Book two nights. Mine.", timeout=SEEN_MS)
    _edit_last(qtbot, theirs, " Theirs.")
    qtbot.waitUntil(lambda: stored() == "Book two nights. Mine. Theirs.", timeout=SEEN_MS)

    # Ctrl+Z on the first desktop: its edit is under the other's, so nothing is undone.
    _activate(qtbot, mine)
    qtbot.keyClick(mine, Qt.Key.Key_0, CTRL)
    press(qtbot, Qt.Key.Key_Z, CTRL)
    qtbot.waitUntil(lambda: bool(said), timeout=SEEN_MS)
    assert "after your edit" in said[0]
    assert stored() == "Book two nights. Mine. Theirs."
    qtbot.waitUntil(lambda: _shown(mine)[-1] == "Book two nights. Mine. Theirs.",
                    timeout=SEEN_MS)


def test_a_provider_added_on_one_desktop_is_offered_on_the_other(
    qtbot: QtBot, desktops: tuple[MainWindow, MainWindow, SessionInfo],
    server: ProtocolServer,
) -> None:
    """Providers live in the store: one added in Settings → Providers on one desktop is
    in the other's provider list without a restart."""
    mine, theirs, _info = desktops
    assert named(theirs, "Provider").currentText() == "(no provider)"

    # Ctrl+, opens Settings → Providers; fill the form, click Save, close.
    _activate(qtbot, mine)
    qtbot.keyClick(mine, Qt.Key.Key_Comma, CTRL)
    qtbot.waitUntil(lambda: isinstance(QApplication.activeWindow(), ProvidersDialog),
                    timeout=SEEN_MS)
    dialog = QApplication.activeWindow()
    replace_text(qtbot, dialog, "Provider name", "Team server")
    replace_text(qtbot, dialog, "Base URL", server.url + "/v1")
    replace_text(qtbot, dialog, "Model", server.model)
    with qtbot.waitSignal(dialog.provider_saved, timeout=SEEN_MS):
        click(qtbot, dialog, "Save the provider")
    dialog.close()
    qtbot.waitUntil(lambda: named(mine, "Provider").currentText() == "Team server",
                    timeout=SEEN_MS)

    box = named(theirs, "Provider")
    qtbot.waitUntil(lambda: box.currentText() == "Team server", timeout=SEEN_MS)
    assert box.isEnabled()
    assert named(theirs, "Model").currentText() == server.model


def _folded_states(window: MainWindow) -> list[str]:
    model = window.timeline.model
    return [model.index(row, 0).data(StateRole) for row in range(model.rowCount())]


def test_a_compaction_and_its_undo_on_one_desktop_show_on_the_other(
    qtbot: QtBot, pg_db_url: str, make_session: Callable[..., SessionInfo],
    show_window: Callable[..., MainWindow],
) -> None:
    long = [(("user", "assistant")[i % 2],
             f"Message {i}: " + "notes on the cabinets, the worktop and the hob " * 6)
            for i in range(40)]
    with _two_desktops(qtbot, pg_db_url, make_session, show_window, "Kitchen", long) as (
            mine, theirs, info):
        # Ctrl+3 to the Compaction panel, keep the newest 10, Preview, Apply.
        panel = mine.compaction_panel
        _activate(qtbot, mine)
        press(qtbot, Qt.Key.Key_3, CTRL)
        qtbot.waitUntil(lambda: panel.session_id == info.id and mine.ctx.workers.idle,
                        timeout=SEEN_MS)
        replace_text(qtbot, mine, "Newest messages to keep", "10")
        with qtbot.waitSignal(panel.preview_shown, timeout=SEEN_MS) as shown:
            click(qtbot, mine, "Preview the compaction")
        folded = list(shown.args[0].folded_ids)
        assert len(folded) == 30
        with qtbot.waitSignal(panel.history_loaded, timeout=SEEN_MS):
            click(qtbot, mine, "Apply the compaction")

        # The other desktop shows one marker for the 30 folded messages, then the 10
        # kept, and the marker carries the summary the first desktop stored.
        model = theirs.timeline.model
        qtbot.waitUntil(lambda: model.rowCount() == 11, timeout=SEEN_MS)
        assert model.index(0, 0).data(KindRole) == "marker"
        assert "30 messages folded into the summary" in model.index(0, 0).data(
            Qt.ItemDataRole.DisplayRole)
        ws = theirs.ctx.workspace
        records = compaction.history(ws, info.id)
        assert [(r.folded_ids, r.undone) for r in records] == [(folded, False)]
        summary = ws.repo.get_context(info.id).summary
        assert summary == records[0].summary and "Message 0" in summary
        tip = model.index(0, 0).data(Qt.ItemDataRole.ToolTipRole)
        assert f"Compaction #{records[0].id} " in tip
        assert summary.splitlines()[1][:40] in tip  # its summary's first line, cut
        states = {m.id: m.state for m in ws.repo.list_messages(info.id)}
        assert [mid for mid, state in states.items() if state != "active"] == folded
        assert [m.content for m in (model.message_at(model.position_at(row))
                                    for row in range(1, 11))] == [t for _r, t in long[30:]]

        # Ctrl+0 to the first desktop's timeline, Ctrl+Z: the other shows all 40 again.
        _activate(qtbot, mine)
        qtbot.keyClick(mine, Qt.Key.Key_0, CTRL)
        assert focus() is mine.timeline.view
        press(qtbot, Qt.Key.Key_Z, CTRL)
        qtbot.waitUntil(lambda: model.rowCount() == 40, timeout=SEEN_MS)
        qtbot.waitUntil(lambda: _folded_states(theirs) == ["active"] * 40, timeout=SEEN_MS)
        assert _shown(theirs) == [text for _role, text in long]
        assert all(m.state == "active" for m in ws.repo.list_messages(info.id))
        assert [r.undone for r in compaction.history(ws, info.id)] == [True]
        assert ws.repo.get_context(info.id).summary == ""


def test_a_chat_on_one_desktop_shows_on_the_other_while_that_one_writes_too(
    qtbot: QtBot, pg_db_url: str, make_session: Callable[..., SessionInfo],
    show_window: Callable[..., MainWindow], server: ProtocolServer,
) -> None:
    def provider(ws: Workspace) -> None:
        ProviderSettings(ws.db).add(ProviderConfig(
            name="local", kind="openai", base_url=server.url, model=server.model))

    reply = "".join(server.reply_words)
    prompt = "Which tram goes up to the castle?"
    with _two_desktops(qtbot, pg_db_url, make_session, show_window, "Shared plan", CHAT,
                       prepare=provider) as (mine, theirs, info):
        # Neither hears the other until both are done: each writes over what it showed.
        mine.db_watcher.timer.stop()
        theirs.db_watcher.timer.stop()
        _activate(qtbot, mine)
        assert named(mine, "Provider").currentText() == "local"
        click_into(qtbot, named(mine, "Prompt"))
        type_text(qtbot, prompt)
        finished: list[object] = []
        mine.composer.turn_finished.connect(finished.append)
        press(qtbot, Qt.Key.Key_Return, CTRL)
        # While the reply streams in, the second desktop adds a message and renames.
        _insert_below(qtbot, theirs, 2, "Added on the second desktop")
        _rename_open_session(qtbot, theirs, "Lisbon, final")
        qtbot.waitUntil(lambda: bool(finished), timeout=SEEN_MS)
        # Both hear each other again: whichever order the two desktops' writes landed in
        # (the other's insert before the prompt, between prompt and reply, or after
        # both), each window ends up showing the stored session.
        mine.db_watcher.timer.start()
        theirs.db_watcher.timer.start()
        qtbot.waitUntil(lambda: _shown(mine)[-2:] == [prompt, reply], timeout=SEEN_MS)
        settle(mine)
        settle(theirs)

        stored = [m.content for m in mine.ctx.workspace.page_messages(info.id, limit=50)]
        assert sorted(stored) == sorted([text for _role, text in CHAT] + [
            "Added on the second desktop", prompt, reply])
        assert stored.index(prompt) + 1 == stored.index(reply)
        for window in (mine, theirs):
            qtbot.waitUntil(lambda window=window: _shown(window) == stored,
                            timeout=SEEN_MS)
            qtbot.waitUntil(lambda window=window: _listed(window) == [
                ("Lisbon, final", 6)], timeout=SEEN_MS)
        # The title over the timeline is read on a worker of its own after the list.
        qtbot.waitUntil(lambda: mine.timeline.title_label.full_text() == "Lisbon, final",
                        timeout=SEEN_MS)
        assert mine.windowTitle().startswith("Lisbon, final")
        assert len(server.chat_requests()) == 1


# -- File → Open Team Database ----------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _fill_team_dialog(qtbot: QtBot, url: str, password: str, *,
                      remember: bool) -> Callable[[QWidget], None]:
    """Type the URL (the field has the keyboard), Tab, the password, tick Remember
    with Space when asked, Enter."""

    def act(dialog: QWidget) -> None:
        assert dialog.accessibleName() == "Open Team Database"
        assert focus().accessibleName() == "Team database URL"
        press(qtbot, Qt.Key.Key_A, CTRL)
        type_text(qtbot, "db.example.org/team")  # not a URL: said under the field
        press(qtbot, Qt.Key.Key_Return)
        assert dialog.isVisible()
        problem = named(dialog, "Address problem")
        assert "postgresql://user@host:5432/database" in problem.text()
        assert focus().accessibleName() == "Team database URL"
        press(qtbot, Qt.Key.Key_A, CTRL)
        type_text(qtbot, url)
        press(qtbot, Qt.Key.Key_Tab)
        assert focus().accessibleName() == "Password"
        box = named(dialog, "Remember in the system keyring")
        assert not box.isEnabled()  # nothing to remember yet
        type_text(qtbot, password)
        assert box.isEnabled()
        if remember:
            press(qtbot, Qt.Key.Key_Tab)
            assert focus() is box
            press(qtbot, Qt.Key.Key_Space)
            assert box.isChecked()
        press(qtbot, Qt.Key.Key_Return)

    return act


def _opening(window: MainWindow) -> OpenDatabaseDialog:
    dialogs = [d for d in window.findChildren(OpenDatabaseDialog)]
    assert len(dialogs) == 1
    return dialogs[0]


def _settings_text(window: MainWindow) -> str:
    window.settings.sync()
    return Path(window.settings.fileName()).read_text(encoding="utf-8", errors="replace")


def test_a_team_database_that_cannot_be_reached_is_said_without_the_password(
    qtbot: QtBot, workspace: Workspace, show_window: Callable[..., MainWindow],
    memory_keyring: MemoryKeyring,
) -> None:
    window = show_window(workspace)
    _activate(qtbot, window)
    url = f"postgresql://alice@127.0.0.1:{_closed_port()}/team"
    with_modal_dialog(qtbot, lambda: qtbot.keyClick(window, Qt.Key.Key_O, CTRL | SHIFT),
                      _fill_team_dialog(qtbot, url, SECRET, remember=True))
    dialog = _opening(window)
    qtbot.waitUntil(lambda: dialog.error is not None, timeout=20_000)
    said = dialog.label.text()
    assert "127.0.0.1" in said and SECRET not in said
    assert SECRET not in window.statusBar().currentMessage()
    # The window stays on its database; a password the server never took is not kept.
    assert window.ctx.workspace is workspace
    assert "workbench.db" in window.database_label.text()
    assert memory_keyring.passwords == {}
    # The address is offered next time, without any password.
    settings = _settings_text(window)
    assert SECRET not in settings and "alice@127.0.0.1" in settings
    dialog.reject()

    offered: list[tuple[str, str]] = []

    def look(team: QWidget) -> None:
        offered.append((named(team, "Team database URL", QLineEdit).text(),
                        named(team, "Password", QLineEdit).text()))

    _activate(qtbot, window)
    with_modal_dialog(qtbot, lambda: qtbot.keyClick(window, Qt.Key.Key_O, CTRL | SHIFT), look)
    assert offered == [(url, "")]


def test_open_team_database_switches_the_window_and_remembers_the_password_when_asked(
    qtbot: QtBot, pg_db_url: str, workspace: Workspace,
    show_window: Callable[..., MainWindow], memory_keyring: MemoryKeyring,
) -> None:
    window = show_window(workspace)
    _activate(qtbot, window)
    address = pg_db_url.replace("postgresql+psycopg://", "postgresql://")
    with_modal_dialog(qtbot, lambda: qtbot.keyClick(window, Qt.Key.Key_O, CTRL | SHIFT),
                      _fill_team_dialog(qtbot, address, SECRET, remember=True))
    opening = _opening(window)
    qtbot.waitUntil(lambda: not window.ctx.workspace.is_file or opening.error is not None,
                    timeout=20_000)
    assert opening.error is None, opening.label.text()
    settle(window)
    database = address.rsplit("/", 1)[1]
    shown = window.database_label.text()
    assert shown.startswith("Team database: workbench@") and database in \
        window.database_label.toolTip()
    assert window.database_label.accessibleName() == "Team database"
    for text in (shown, window.database_label.toolTip(), window.windowTitle(),
                 window.statusBar().currentMessage(), _settings_text(window)):
        assert SECRET not in text
    assert "remembered in the system keyring" in window.statusBar().currentMessage()
    host_port = address.split("@", 1)[1].rsplit("/", 1)[0]
    assert memory_keyring.passwords == {
        (SERVICE, f"workbench@{host_port}/{database}"): SECRET}


def test_open_team_database_offers_the_team_store_the_window_is_on(
    qtbot: QtBot, desktops: tuple[MainWindow, MainWindow, SessionInfo],
) -> None:
    """Opened by WORKBENCH_DB (nothing remembered yet): its address is offered, without
    a password."""
    mine, _theirs, _info = desktops
    mine.settings.remove(TEAM_ADDRESS_KEY)
    offered: list[str] = []

    def look(team: QWidget) -> None:
        offered.append(named(team, "Team database URL", QLineEdit).text())
        team.reject()

    _activate(qtbot, mine)
    with_modal_dialog(qtbot, lambda: qtbot.keyClick(mine, Qt.Key.Key_O, CTRL | SHIFT), look)
    location = mine.ctx.workspace.location
    assert offered == [team_address(location)]
    assert offered[0].startswith("postgresql://") and location.rsplit("/", 1)[1] in offered[0]


# -- the start-up (make run with WORKBENCH_DB, workbench --db URL) -----------------------------


def test_the_start_up_on_an_unreachable_team_store_names_it_without_the_password(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = _closed_port()
    monkeypatch.setenv("WORKBENCH_DB", f"postgresql://alice:{SECRET}@127.0.0.1:{port}/team")
    workspace, dialog = open_at_start(None)
    assert workspace is None
    said = dialog.label.text()
    assert f"127.0.0.1:{port}/team" in said and SECRET not in said
    assert dialog.isVisible()
    dialog.cancel()


def test_the_start_up_opens_the_team_store_named_by_workbench_db(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch, pg_db_url: str,
) -> None:
    monkeypatch.setenv("WORKBENCH_DB", pg_db_url)
    workspace, dialog = open_at_start(None, prepare=Workspace.ensure_sample_session)
    assert workspace is not None, dialog.label.text()
    try:
        assert not workspace.is_file and pg_db_url.rsplit("/", 1)[1] in workspace.location
        assert workspace.count_sessions() == 1  # the sample, as on a first file
    finally:
        workspace.close()


def test_a_window_says_when_it_stops_hearing_other_desktops_then_catches_up(
    qtbot: QtBot, desktops: tuple[MainWindow, MainWindow, SessionInfo], pg_db_url: str,
    pg_server: Any,
) -> None:
    import sqlalchemy as sa

    mine, theirs, info = desktops
    name = pg_db_url.rsplit("/", 1)[1]
    listener = theirs.ctx.workspace.db.listener()  # type: ignore[attr-defined]
    admin = sa.create_engine(pg_server.url(), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            # The listener's connection is cut and no new one is let in for a while.
            conn.execute(sa.text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false'))
            conn.execute(sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                 "WHERE application_name = :name"),
                         {"name": listener.application_name})
            qtbot.waitUntil(lambda: "not heard right now" in
                            theirs.statusBar().currentMessage(), timeout=SEEN_MS)
            _insert_below(qtbot, mine, 2, "Written while the other was deaf")
            settle(mine)
            conn.execute(sa.text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true'))
        qtbot.waitUntil(lambda: "heard again" in theirs.statusBar().currentMessage(),
                        timeout=SEEN_MS)
        # What was written meanwhile was never announced to it: it reads everything again.
        qtbot.waitUntil(lambda: _shown(theirs)[-1:] == ["Written while the other was deaf"],
                        timeout=SEEN_MS)
        qtbot.waitUntil(lambda: _listed(theirs) == [("Shared plan", 4)], timeout=SEEN_MS)
    finally:
        admin.dispose()


@contextmanager
def _refused(pg_server: Any, pg_db_url: str, *windows: MainWindow) -> Iterator[None]:
    """The team store lets no connection in (what a server gone or a cut network does
    to the workbench): its connections are dropped until the block ends."""
    import sqlalchemy as sa

    name = pg_db_url.rsplit("/", 1)[1]
    admin = sa.create_engine(pg_server.url(), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false'))
            conn.execute(sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                 "WHERE datname = :name"), {"name": name})
            for window in windows:
                window.ctx.workspace.db.engine.dispose()  # type: ignore[attr-defined]
            try:
                yield
            finally:
                conn.execute(sa.text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true'))
    finally:
        admin.dispose()


def _boxes_of(window: MainWindow, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch,
              ) -> list[str]:
    """The sentences ``window`` puts up in boxes from now on (a box waits for the
    person: what fails meanwhile arrives while it is open)."""
    import workbench.gui.main_window as main_window_module

    boxes: list[str] = []

    def box(parent: QWidget, _icon: Any, _title: str, text: str, *_args: Any) -> None:
        if parent is window:
            boxes.append(text)
            qtbot.waitUntil(lambda: window.ctx.workers.idle, timeout=SEEN_MS)

    monkeypatch.setattr(main_window_module, "error_boxes_shown", lambda: True)
    monkeypatch.setattr(main_window_module, "message_box", box)
    return boxes


def _said_after(qtbot: QtBot, window: MainWindow, act: Callable[[], object]) -> list[str]:
    """Do ``act`` and return the sentences the window reported until its work ended
    (waiting for at least one)."""
    said: list[str] = []

    def heard(text: str, _cause: object) -> None:
        said.append(text)

    window.ctx.error_reported.connect(heard)
    try:
        act()
        qtbot.waitUntil(lambda: bool(said), timeout=SEEN_MS)
        settle(window)
    finally:
        window.ctx.error_reported.disconnect(heard)
    return said


def test_a_change_while_the_server_is_unreachable_says_so_once(
    qtbot: QtBot, desktops: tuple[MainWindow, MainWindow, SessionInfo], pg_db_url: str,
    pg_server: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No connection is let in. A background read of the window fails first (the list
    read again, as after another desktop's change), then the person renames the
    session: one outage, so one box, which says the server cannot be reached (not that
    it refused the change); the status bar says it for as long as it lasts. Once the
    server answered again, a new outage gets a box of its own."""
    mine, theirs, info = desktops
    boxes = _boxes_of(mine, qtbot, monkeypatch)
    with _refused(pg_server, pg_db_url, mine, theirs):
        # The window says it no longer hears the others, and keeps saying it.
        qtbot.waitUntil(lambda: "not reachable" in named(mine, "Team database").text(),
                        timeout=SEEN_MS)
        settle(mine)
        # The background refresh, then the person's change: both fail, in this order.
        _said_after(qtbot, mine, mine.ctx.sessions_changed.emit)
        assert len(boxes) == 1, boxes
        said = _said_after(qtbot, mine,
                           lambda: _rename_open_session(qtbot, mine, "Renamed while away"))
        assert any("cannot be reached" in text for text in said), said
    assert len(boxes) == 1, boxes
    assert "cannot be reached" in boxes[0] and "refused" not in boxes[0]
    assert "connects again by itself" in boxes[0]
    # The server lets it in again: the status bar says the address alone again.
    label = named(mine, "Team database")
    qtbot.waitUntil(lambda: "not reachable" not in label.text(), timeout=SEEN_MS)
    assert label.text().startswith("Team database: workbench@")
    assert mine.ctx.workspace.get_session(info.id).title == "Shared plan"

    # Another outage later is not hidden behind the first.
    with _refused(pg_server, pg_db_url, mine, theirs):
        _said_after(qtbot, mine, mine.ctx.sessions_changed.emit)
    assert len(boxes) == 2, boxes
    assert "cannot be reached" in boxes[1]


def test_a_write_that_leaves_the_open_session_as_shown_does_not_reread_it(
    qtbot: QtBot, desktops: tuple[MainWindow, MainWindow, SessionInfo],
) -> None:
    """Token counts kept by another desktop (it measured the request in another
    encoding) leave the session's mark as it was: the other window does not read the
    session again (nor measure and write in turn, which would set the two going)."""
    mine, theirs, info = desktops
    rereads: list[bool] = []
    theirs.db_watcher.outside_change_seen.connect(rereads.append)
    _insert_below(qtbot, mine, 2, "A real change")
    qtbot.waitUntil(lambda: True in rereads, timeout=SEEN_MS)
    qtbot.waitUntil(lambda: _shown(theirs)[-1:] == ["A real change"], timeout=SEEN_MS)
    settle(mine)
    _wait_caught_up(qtbot, theirs, info.id)

    rereads.clear()
    ids = [m.id for m in mine.ctx.workspace.page_messages(info.id, limit=10)]
    mine.ctx.workspace.repo.set_token_counts(
        [(mid, 7, "another-encoding") for mid in ids if mid is not None])
    qtbot.waitUntil(lambda: bool(rereads), timeout=SEEN_MS)
    settle(theirs)
    assert True not in rereads


def test_another_desktops_change_is_read_off_the_window_thread(
    qtbot: QtBot, desktops: tuple[MainWindow, MainWindow, SessionInfo],
) -> None:
    """On a server every read is a round trip: the other window reads the list, the
    session and its title on its workers, and shows them without a statement of its
    own thread reaching the server."""
    mine, theirs, info = desktops
    on_window_thread: list[str] = []
    engine = theirs.ctx.workspace.db.engine

    def executed(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        if threading.current_thread() is threading.main_thread():
            on_window_thread.append(statement)

    event.listen(engine, "before_cursor_execute", executed)
    try:
        _insert_below(qtbot, mine, 2, "A real change")
        _rename_open_session(qtbot, mine, "Lisbon, three nights")
        qtbot.waitUntil(lambda: _shown(theirs)[-1:] == ["A real change"], timeout=SEEN_MS)
        qtbot.waitUntil(lambda: _listed(theirs) == [("Lisbon, three nights", 4)],
                        timeout=SEEN_MS)
        qtbot.waitUntil(lambda: theirs.windowTitle().startswith("Lisbon, three nights"),
                        timeout=SEEN_MS)
        settle(theirs)
    finally:
        event.remove(engine, "before_cursor_execute", executed)
    assert theirs.timeline.title_label.full_text() == "Lisbon, three nights"
    assert on_window_thread == []


def _move_in_the_list(qtbot: QtBot, window: MainWindow, session_id: int) -> None:
    """Ctrl+L, Down into the list, then Up or Down until ``session_id``'s row is the
    current one (moving in the list opens the session there)."""
    _activate(qtbot, window)
    qtbot.keyClick(window, Qt.Key.Key_L, CTRL)
    press(qtbot, Qt.Key.Key_Down)
    view = window.browser.view
    qtbot.waitUntil(lambda: focus() is view, timeout=SEEN_MS)
    target = window.browser.model.row_of(session_id)
    assert target is not None
    while view.currentIndex().row() != target:
        press(qtbot, Qt.Key.Key_Down if view.currentIndex().row() < target else Qt.Key.Key_Up)


def test_opening_another_session_reads_the_composers_choices_off_the_window_thread(
    qtbot: QtBot, pg_db_url: str, show_window: Callable[..., MainWindow],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a server each of the composer's questions (the providers, the agent's, its
    model, its memory mode) is a round trip: a session opened asks them on a worker.
    Until the answer comes Send waits; an answer about a session left meanwhile is
    dropped (the selectors never show that session's choices)."""
    import workbench.gui.panels.composer as composer_module

    ws = Workspace.open(pg_db_url)
    try:
        settings = ProviderSettings(ws.db)
        for name, model in (("local", "small-local"), ("hosted", "big-hosted")):
            settings.add(ProviderConfig(name=name, kind="openai", model=model,
                                        base_url="http://127.0.0.1:9/v1", context_window=8192))
        quiet = ws.repo.create_agent("Quiet", provider="local",
                                     memory_policy={"mode": "manual"})
        chatty = ws.repo.create_agent("Chatty", provider="hosted")
        notes = ws.repo.create_session("Quiet notes", agent_id=quiet.id)
        plans = ws.repo.create_session("Chatty plans", agent_id=chatty.id)
        window = show_window(ws)
        window.open_session(plans.id)
        settle(window)
        provider, model = named(window, "Provider"), named(window, "Model")
        auto, send = named(window, "Automatic memory"), named(window, "Send prompt")
        assert (provider.currentText(), model.currentText()) == ("hosted", "big-hosted")
        assert auto.isChecked() and send.isEnabled()

        gate, entered = threading.Event(), threading.Event()
        asked: list[tuple[int | None, bool]] = []
        read = composer_module.session_providers

        def held(workspace: Workspace, session_id: int | None) -> Any:
            asked.append((session_id, threading.current_thread() is threading.main_thread()))
            entered.set()
            gate.wait(SEEN_MS / 1000)  # the server is slow to answer
            return read(workspace, session_id)

        monkeypatch.setattr(composer_module, "session_providers", held)
        toggled: list[bool] = []
        auto.toggled.connect(toggled.append)
        on_window_thread: list[str] = []

        def executed(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
            if threading.current_thread() is threading.main_thread() and \
                    ("FROM provider_configs" in statement or "FROM agents" in statement):
                on_window_thread.append(statement)

        event.listen(ws.db.engine, "before_cursor_execute", executed)
        try:
            _move_in_the_list(qtbot, window, notes.id)
            qtbot.waitUntil(entered.is_set, timeout=SEEN_MS)
            assert not send.isEnabled()  # nothing goes out with the session before's choice
            _move_in_the_list(qtbot, window, plans.id)  # and back, before the answer
            gate.set()
            qtbot.waitUntil(send.isEnabled, timeout=SEEN_MS)
            settle(window)
        finally:
            gate.set()
            event.remove(ws.db.engine, "before_cursor_execute", executed)
        assert window.ctx.current_session_id == plans.id
        assert (provider.currentText(), model.currentText()) == ("hosted", "big-hosted")
        assert auto.isChecked() and False not in toggled  # the quiet session's never shown
        assert asked == [(notes.id, False), (plans.id, False)]
        assert on_window_thread == []
    finally:
        ws.close()


@pytest.fixture(scope="module")
def password_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server of its own that asks for the password (``SECRET``) and holds
    a database ``team`` (the session's server trusts every connection)."""
    server = started_for_tests({})
    try:
        import sqlalchemy as sa

        admin = sa.create_engine(server.url(), isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(sa.text("CREATE DATABASE team"))
        admin.dispose()
        server.require_password(SECRET)
        yield server
    finally:
        server.stop()


def test_a_refused_or_missing_password_and_a_missing_database_are_said_in_words(
    qtbot: QtBot, workspace: Workspace, show_window: Callable[..., MainWindow],
    memory_keyring: MemoryKeyring, password_server: PostgresServer,
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    # The walk: a wrong password was said in libpq's words ("connection failed:
    # connection to server at "127.0.0.1", port 5432 failed: FATAL:  password
    # authentication failed…"), no password as "fe_sendauth: no password supplied".
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "no.pgpass"))
    window = show_window(workspace)
    address = f"postgresql://workbench@127.0.0.1:{password_server.port}"

    def open_team(url: str, password: str) -> str:
        _activate(qtbot, window)

        def fill(dialog: QWidget) -> None:
            replace_text(qtbot, dialog, "Team database URL", url)
            replace_text(qtbot, dialog, "Password", password)
            press(qtbot, Qt.Key.Key_Return)

        with_modal_dialog(qtbot, lambda: qtbot.keyClick(window, Qt.Key.Key_O, CTRL | SHIFT),
                          fill)
        opening = window._opening
        assert opening is not None
        qtbot.waitUntil(lambda: not opening.running, timeout=20_000)
        said = opening.label.text()
        opening.reject()
        return said

    wrong = "not-the-Pw-0451"
    said = open_team(f"{address}/team", wrong)
    assert 'the server refused the password for user "workbench"' in said, said
    assert "FATAL" not in said and wrong not in said
    said = open_team(f"{address}/team", "")
    assert "the server asks for a password and none was given" in said, said
    said = open_team(f"{address}/nosuch", SECRET)
    assert f'127.0.0.1 port {password_server.port} has no database "nosuch"' in said, said
    assert "createdb nosuch" in said and SECRET not in said
    said = open_team(f"postgresql://workbench@127.0.0.1:{_closed_port()}/team", SECRET)
    assert "nothing answers at 127.0.0.1 port" in said, said
    assert window.ctx.workspace is workspace  # the window stayed on its database
    for text in (_settings_text(window), window.statusBar().currentMessage()):
        assert SECRET not in text and wrong not in text
    # The right password opens it.
    said = open_team(f"{address}/team", SECRET)
    assert not window.ctx.workspace.is_file, said


def test_a_password_written_into_the_address_moves_where_it_is_not_shown(
    qtbot: QtBot, workspace: Workspace, show_window: Callable[..., MainWindow],
    memory_keyring: MemoryKeyring,
) -> None:
    # The walk: "postgresql://alice:pw@host/team" typed into the address stayed on the
    # screen in clear beside a Password field that hides what is typed in it.
    window = show_window(workspace)
    _activate(qtbot, window)
    port = _closed_port()
    seen: list[tuple[str, str, QLineEdit.EchoMode, bool]] = []

    def act(dialog: QWidget) -> None:
        assert focus().accessibleName() == "Team database URL"
        press(qtbot, Qt.Key.Key_A, CTRL)
        type_text(qtbot, f"postgresql://alice:{SECRET}@127.0.0.1:{port}/team")
        press(qtbot, Qt.Key.Key_Tab)
        assert focus().accessibleName() == "Password"
        password = named(dialog, "Password", QLineEdit)
        seen.append((named(dialog, "Team database URL", QLineEdit).text(), password.text(),
                     password.echoMode(),
                     named(dialog, "Remember in the system keyring").isEnabled()))
        press(qtbot, Qt.Key.Key_Return)

    with_modal_dialog(qtbot, lambda: qtbot.keyClick(window, Qt.Key.Key_O, CTRL | SHIFT), act)
    assert seen == [(f"postgresql://alice@127.0.0.1:{port}/team", SECRET,
                     QLineEdit.EchoMode.Password, True)]
    # The open uses it, and says nothing of it.
    dialog = _opening(window)
    qtbot.waitUntil(lambda: dialog.error is not None, timeout=20_000)
    assert "alice:***@127.0.0.1" in dialog.label.text() and SECRET not in dialog.label.text()
    assert SECRET not in _settings_text(window)
    dialog.reject()
