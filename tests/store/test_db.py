"""Opening the database file: pragmas, migrations, backups, refusals, transactions."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa

from workbench.core.conversation import Message
from workbench.errors import DatabaseVersionError, StorageError
from workbench.store import Database, Repository, default_db_path
from workbench.store import db as db_module
from workbench.store.migrations import MIGRATIONS, Migration
from workbench.store.opening import open_database


def _sibling_files(path: Path) -> set[str]:
    """Files beside the database other than the database and its WAL companions."""
    own = {path.name, path.name + "-wal", path.name + "-shm", path.name + "-journal"}
    return {p.name for p in path.parent.iterdir() if p.name not in own}


def _tables(path: Path) -> set[str]:
    conn = sqlite3.connect(str(path))
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        conn.close()


def _migration_names(path: Path) -> list[str]:
    conn = sqlite3.connect(str(path))
    try:
        return sorted(r[0] for r in conn.execute("SELECT name FROM schema_migrations"))
    finally:
        conn.close()


def _with_extra_migration(
    monkeypatch: pytest.MonkeyPatch, *extra: Migration
) -> tuple[Migration, ...]:
    migrations = (*MIGRATIONS, *extra)
    monkeypatch.setattr("workbench.store.migrations.MIGRATIONS", migrations)
    monkeypatch.setattr(db_module, "MIGRATIONS", migrations)
    return migrations


# -- a new file ---------------------------------------------------------------------------


def test_new_file_is_created_with_its_folder(db_path: Path) -> None:
    assert not db_path.parent.exists()
    database = Database.open(db_path)
    try:
        assert db_path.is_file()
        with db_path.open("rb") as fh:
            assert fh.read(16) == b"SQLite format 3\x00"
    finally:
        database.close()


@pytest.mark.sqlite_only("pragmas of the SQLite file")
def test_new_file_uses_wal_foreign_keys_and_busy_timeout(db: Database) -> None:
    with db.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() > 0
    # WAL is a property of the file: a plain connection sees it too.
    conn2 = sqlite3.connect(str(db.path))
    try:
        assert conn2.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn2.close()


def test_foreign_keys_are_enforced(db: Database) -> None:
    with pytest.raises(Exception), db.write() as conn:  # noqa: B017 - any driver error
        conn.exec_driver_sql(
            "INSERT INTO sessions (agent_id, title, created_at, updated_at)"
            " VALUES (999, 'orphan', '2024', '2024')"
        )
    with db.read() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM sessions").scalar() == 0


def test_every_migration_is_recorded(db: Database) -> None:
    applied = db.applied_migrations()
    assert [name for name, _ in applied] == [m.name for m in MIGRATIONS]
    assert all(when.tzinfo is not None for _, when in applied)


@pytest.mark.sqlite_only("backup copies beside the SQLite file")
def test_new_file_gets_no_backup(db: Database) -> None:
    assert _sibling_files(db.path) == set()


def test_reopening_applies_nothing_and_makes_no_backup(db_path: Path) -> None:
    first = Database.open(db_path)
    before = first.applied_migrations()
    first.close()
    second = Database.open(db_path)
    try:
        assert second.applied_migrations() == before
        assert _sibling_files(db_path) == set()
    finally:
        second.close()


def test_reopening_keeps_the_data(db_path: Path) -> None:
    first = Database.open(db_path)
    session = Repository(first).create_session("kept")
    first.close()
    second = Database.open(db_path)
    try:
        assert Repository(second).get_session(session.id).title == "kept"
    finally:
        second.close()


def test_empty_file_is_treated_as_new(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(b"")
    database = Database.open(db_path)
    try:
        assert [n for n, _ in database.applied_migrations()] == [m.name for m in MIGRATIONS]
    finally:
        database.close()


# -- migrating an existing file ---------------------------------------------------------


def test_pending_migration_backs_up_first_then_applies(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = Database.open(db_path)
    Repository(first).create_session("before the upgrade")
    first.close()

    extra = Migration(
        "0999_extra_things",
        ("CREATE TABLE extra_things (id INTEGER PRIMARY KEY, label TEXT NOT NULL)",),
    )
    _with_extra_migration(monkeypatch, extra)
    heard: list[tuple[str, int, int]] = []
    upgraded = Database.open(db_path, progress=lambda *step: heard.append(step))
    try:
        assert heard == [
            (f"Backing up {db_path.name} before updating it…", 0, 2),
            (f"Updating {db_path.name} to this version of the workbench (1 of 1)…", 1, 2),
        ]
        names = [n for n, _ in upgraded.applied_migrations()]
        assert names == [*(m.name for m in MIGRATIONS), extra.name]
        with upgraded.write() as conn:
            conn.exec_driver_sql("INSERT INTO extra_things (label) VALUES ('works')")
        assert Repository(upgraded).list_sessions()[0].title == "before the upgrade"
    finally:
        upgraded.close()

    backups = sorted(_sibling_files(db_path))
    assert len(backups) == 1, backups
    backup = db_path.parent / backups[0]
    assert "extra_things" not in _tables(backup)
    assert _migration_names(backup) == sorted(m.name for m in MIGRATIONS)
    conn = sqlite3.connect(str(backup))
    try:
        assert conn.execute("SELECT title FROM sessions").fetchall() == [("before the upgrade",)]
    finally:
        conn.close()


def test_failing_migration_leaves_nothing_of_itself(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Database.open(db_path).close()
    broken = Migration(
        "0999_broken",
        (
            "CREATE TABLE half_done (x INTEGER)",
            "INSERT INTO half_done VALUES (1)",
            "ALTER TABLE no_such_table ADD COLUMN y TEXT",
        ),
    )
    _with_extra_migration(monkeypatch, broken)
    with pytest.raises(StorageError) as info:
        Database.open(db_path)
    assert "0999_broken" in str(info.value)
    assert "half_done" not in _tables(db_path)
    assert _migration_names(db_path) == sorted(m.name for m in MIGRATIONS)

    # Without the broken change the file opens as before.
    monkeypatch.undo()
    Database.open(db_path).close()


def test_failing_first_migration_on_new_file_raises_storage_error(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = (Migration("0001_broken", ("CREATE TABLE a (x)", "NOT SQL AT ALL")),)
    monkeypatch.setattr(db_module, "MIGRATIONS", broken)
    with pytest.raises(StorageError, match="0001_broken"):
        Database.open(db_path)
    assert "a" not in _tables(db_path)


def test_unknown_applied_migration_is_refused_untouched(
    db_path: Path, digest: Callable[[Path], str]
) -> None:
    database = Database.open(db_path)
    Repository(database).create_session("from the future")
    with database.write() as conn:
        conn.exec_driver_sql(
            "INSERT INTO schema_migrations (name, applied_at)"
            " VALUES ('2042_hover_cars', '2042-01-01T00:00:00.000000Z')"
        )
    database.close()
    before = digest(db_path)

    with pytest.raises(DatabaseVersionError) as info:
        Database.open(db_path)
    text = str(info.value)
    assert str(db_path) in text
    assert "newer" in text
    assert "2042_hover_cars" in text
    assert text.rstrip().endswith(".")
    assert digest(db_path) == before
    assert _sibling_files(db_path) == set()


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(os.urandom(4096), id="random-bytes"),
        pytest.param(b"just some notes\nnot a database at all\n" * 20, id="text"),
        pytest.param(b"SQLite format 3\x00" + b"\xff" * 4000, id="damaged-sqlite"),
    ],
)
def test_file_that_is_not_a_database_is_refused_untouched(
    db_path: Path, content: bytes, digest: Callable[[Path], str]
) -> None:
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(content)
    before = digest(db_path)
    with pytest.raises(StorageError) as info:
        Database.open(db_path)
    assert str(db_path) in str(info.value)
    assert digest(db_path) == before
    assert _sibling_files(db_path) == set()


def test_sqlite_file_of_another_app_is_refused_untouched(
    db_path: Path, digest: Callable[[Path], str]
) -> None:
    db_path.parent.mkdir(parents=True)
    other = sqlite3.connect(str(db_path))
    other.execute("CREATE TABLE recipes (id INTEGER PRIMARY KEY, name TEXT)")
    other.execute("INSERT INTO recipes (name) VALUES ('soup')")
    other.commit()
    other.close()
    before = digest(db_path)

    with pytest.raises(StorageError) as info:
        Database.open(db_path)
    assert not isinstance(info.value, DatabaseVersionError)
    assert "recipes" in str(info.value)
    assert digest(db_path) == before
    assert _tables(db_path) == {"recipes"}


def test_path_that_is_a_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "a-folder.db"
    folder.mkdir()
    with pytest.raises(StorageError, match="folder"):
        Database.open(folder)
    assert list(folder.iterdir()) == []


def test_migrate_false_refuses_a_file_that_needs_changes(db_path: Path) -> None:
    with pytest.raises(StorageError):
        Database.open(db_path, migrate=False)


# -- where the file lives ----------------------------------------------------------------


def test_default_path_is_inside_workbench_home(isolated_home: Path) -> None:
    assert default_db_path().parent == isolated_home


def test_workbench_db_wins_over_workbench_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    explicit = tmp_path / "elsewhere" / "mine.sqlite"
    monkeypatch.setenv("WORKBENCH_DB", str(explicit))
    assert default_db_path() == explicit


def test_without_either_variable_uses_the_user_data_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WORKBENCH_HOME")
    path = default_db_path()
    # The autouse fixture points XDG_DATA_HOME into tmp_path, so the platform folder is there.
    assert tmp_path in path.parents


def test_open_without_path_uses_workbench_home(isolated_home: Path) -> None:
    database = Database.open()
    try:
        assert database.path.parent == isolated_home
        assert database.path.is_file()
    finally:
        database.close()


def test_open_without_path_uses_workbench_db(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path
) -> None:
    explicit = tmp_path / "explicit" / "chosen.db"
    monkeypatch.setenv("WORKBENCH_DB", str(explicit))
    database = Database.open()
    try:
        assert database.path == explicit
        assert explicit.is_file()
        assert not isolated_home.exists() or not any(isolated_home.iterdir())
    finally:
        database.close()


# -- transactions ---------------------------------------------------------------------------


def test_write_that_raises_rolls_back_every_row(db: Database) -> None:
    class Boom(Exception):
        pass

    with pytest.raises(Boom), db.write() as conn:
        conn.execute(sa.text(
            "INSERT INTO agents (name, created_at, updated_at) VALUES ('a', 't', 't')"
        ))
        agent_id = conn.execute(sa.text("SELECT id FROM agents")).scalar()
        conn.execute(
            sa.text("INSERT INTO sessions (agent_id, title, created_at, updated_at)"
                    " VALUES (:agent, 's', 't', 't')"),
            {"agent": agent_id},
        )
        conn.execute(sa.text("INSERT INTO settings (key, value) VALUES ('k', '1')"))
        raise Boom()
    tables = ["agents", "sessions", "settings"] + (["sessions_fts"] if db.is_file else [])
    with db.read() as conn:
        for table in tables:
            assert conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar() == 0
    # The database is still usable after the rollback.
    with db.write() as conn:
        conn.execute(sa.text("INSERT INTO settings (key, value) VALUES ('k', '2')"))
    with db.read() as conn:
        assert conn.execute(sa.text("SELECT value FROM settings")).scalar() == "2"


def test_write_that_succeeds_is_visible_to_another_connection(
    db: Database, db_target: Path | str
) -> None:
    with db.write() as conn:
        conn.execute(sa.text("INSERT INTO settings (key, value) VALUES ('seen', '1')"))
    if db.is_file:
        other = sqlite3.connect(str(db.path))
        try:
            assert other.execute("SELECT value FROM settings WHERE key='seen'").fetchone() == ("1",)
        finally:
            other.close()
        return
    engine = sa.create_engine(db.engine.url)  # a connection of its own, not the store's
    try:
        with engine.connect() as conn:
            assert conn.execute(
                sa.text("SELECT value FROM settings WHERE key = 'seen'")
            ).scalar() == "1"
    finally:
        engine.dispose()


def _append_from_threads(repos: list[Repository], session_id: int, per_thread: int) -> None:
    barrier = threading.Barrier(len(repos))
    errors: list[BaseException] = []

    def work(index: int, repo: Repository) -> None:
        try:
            barrier.wait()
            for i in range(per_thread):
                repo.append_message(session_id, Message(role="user", content=f"t{index}-{i}"))
        except BaseException as exc:  # reported below, in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i, r)) for i, r in enumerate(repos)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_two_threads_sharing_a_database_both_write(
    repo: Repository, check_counts: Callable[[int], None]
) -> None:
    session = repo.create_session("busy")
    _append_from_threads([repo, repo], session.id, 40)
    contents = {m.content for m in repo.list_messages(session.id)}
    assert contents == {f"t{t}-{i}" for t in range(2) for i in range(40)}
    check_counts(session.id)


def test_two_connections_to_one_database_both_write(
    db_target: Path | str, repo: Repository, check_counts: Callable[[int], None]
) -> None:
    """Two databases opened on one file (or one team-store database, as two desktops)
    append at once: every message is kept once, positions and counts stay whole."""
    session = repo.create_session("two writers")
    second_db = open_database(db_target)
    try:
        _append_from_threads([repo, Repository(second_db)], session.id, 40)
    finally:
        second_db.close()
    messages = repo.list_messages(session.id)
    assert len(messages) == 80
    assert len({m.content for m in messages}) == 80
    check_counts(session.id)


def test_each_connection_gets_the_page_cache_sized_for_the_machine(tmp_path: Path) -> None:
    from workbench.store.db import PAGE_CACHE_KIB, POOL_SIZE, page_cache_kib

    db = Database.open(tmp_path / "cache.db")
    try:
        with db.query() as conn:
            assert conn.exec_driver_sql("PRAGMA cache_size").scalar_one() == -PAGE_CACHE_KIB
    finally:
        db.close()
    # The pool's connections share 1/64 of the memory, 64 MiB at most, 2 MiB each at least.
    assert page_cache_kib(64 << 30) * POOL_SIZE == 64 << 10
    assert page_cache_kib(1 << 30) * POOL_SIZE == 16 << 10
    assert page_cache_kib(128 << 20) == 2048


def test_the_changes_of_this_process_are_told_by_session_and_position(db_path: Path) -> None:
    db = Database.open(db_path)
    try:
        repo = Repository(db)
        first = repo.create_session(title="first")
        second = repo.create_session(title="second")
        repo.append_messages(first.id, [Message(role="user", content=f"m{i}")
                                        for i in range(5)])
        start = db.change_mark()
        assert start is not None
        assert db.message_changes(start, start, first.id) == db_module.UNCHANGED
        # A change that is not to messages, then a turn appended to the second session.
        repo.rename_session(first.id, "renamed")
        assert db.message_changes(start, db.change_mark(), first.id) == db_module.UNCHANGED
        repo.append_messages(second.id, [Message(role="user", content="hello")])
        now = db.change_mark()
        assert db.message_changes(start, now, first.id) == db_module.UNCHANGED
        assert db.message_changes(start, now, second.id) == 0
        # An edit in the middle: its position is the lowest changed.
        third = repo.list_messages(first.id)[3]
        repo.update_message(int(third.id or 0), content="edited")
        assert db.message_changes(now, db.change_mark(), first.id) == 3
        # A change rolled back is no change.
        before = db.change_mark()
        with pytest.raises(RuntimeError), db.write() as conn:
            conn.exec_driver_sql("DELETE FROM messages WHERE session_id = ?", (first.id,))
            raise RuntimeError("changed my mind")
        assert db.message_changes(before, db.change_mark(), first.id) == db_module.UNCHANGED
        assert len(repo.list_messages(first.id)) == 5
        # Another connection's commit: nothing can be told.
        mark = db.change_mark()
        with sqlite3.connect(db_path) as other:
            other.execute("UPDATE sessions SET title = 'elsewhere' WHERE id = ?", (second.id,))
        assert db.message_changes(mark, db.change_mark(), first.id) is None
    finally:
        db.close()


# -- a file another program holds, a file that cannot be written ----------------------------


@pytest.mark.sqlite_only("SQLite's file lock")
def test_a_database_another_program_keeps_locked_says_so(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = Database.open(db_path)
    repo = Repository(database)
    session = repo.create_session("kept")
    # The wait for the lock is SQLite's busy timeout; shortened, the refusal is the same.
    monkeypatch.setattr(db_module, "BUSY_TIMEOUT_MS", 50)
    other = sqlite3.connect(str(db_path), isolation_level=None)
    try:
        other.execute("BEGIN EXCLUSIVE")
        fresh = Database.open(db_path)
        try:
            with pytest.raises(StorageError) as caught:
                Repository(fresh).rename_session(session.id, "changed")
        finally:
            fresh.close()
    finally:
        other.execute("ROLLBACK")
        other.close()
    message = str(caught.value)
    assert "is busy: another program kept it locked" in message
    assert "nothing was changed" in message and "\n" not in message
    assert repo.get_session(session.id).title == "kept"
    database.close()


_READ_ONLY_CHILD = """
import sys
from workbench.errors import StorageError
from workbench.store import Database, Repository
try:
    database = Database.open(sys.argv[1])
    try:
        Repository(database).create_session("new")
    finally:
        database.close()
except StorageError as exc:
    print(exc)
else:
    print("NO ERROR")
"""


@pytest.mark.sqlite_only("file permissions")
@pytest.mark.skipif(os.name != "posix", reason="POSIX file permissions")
def test_a_database_in_a_read_only_folder_is_named_as_such(tmp_path: Path) -> None:
    """As root (CI) the open runs in a child process as ``nobody``, whom the
    permissions stop, in a folder that user may enter."""
    as_root = os.geteuid() == 0
    if as_root and shutil.which("setpriv") is None:
        pytest.fail("setpriv is needed to run this test as root")
    folder = Path(tempfile.mkdtemp(prefix="workbench-read-only-")) if as_root else tmp_path
    db_path = folder / "workbench.db"
    Database.open(db_path).close()
    os.chmod(db_path, 0o444)
    os.chmod(folder, 0o555)
    try:
        if as_root:
            root = Path(__file__).resolve().parents[2]
            done = subprocess.run(
                ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                 sys.executable, "-c", _READ_ONLY_CHILD, str(db_path)],
                capture_output=True, text=True, timeout=120, check=False,
                cwd=str(root), env={**os.environ, "PYTHONPATH": str(root),
                                    "HOME": str(folder)},
            )
            assert done.returncode == 0, done.stderr
            message = done.stdout.strip()
        else:
            with pytest.raises(StorageError) as caught:
                database = Database.open(db_path)
                try:
                    Repository(database).create_session("new")
                finally:
                    database.close()
            message = str(caught.value)
    finally:
        os.chmod(folder, 0o755)
        os.chmod(db_path, 0o644)
        if as_root:
            shutil.rmtree(folder, ignore_errors=True)
    assert "read-only" in message and "damaged" not in message, message


@pytest.mark.sqlite_only("a path that is not a file")
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_pipe_is_refused_as_a_database_and_nothing_is_written_beside_it(
    tmp_path: Path,
) -> None:
    """Like /dev/null: not a file. It was opened (waiting for a writer for ever, for a
    pipe) and SQLite wrote its journal beside it (/dev/null-journal). Run in a child
    process so that a wait cannot hold the test run."""
    import subprocess
    import sys

    pipe = tmp_path / "looks.db"
    os.mkfifo(pipe)
    code = ("import sys\nfrom workbench.store import Database\n"
            "from workbench.errors import StorageError\n"
            "try:\n    Database.open(sys.argv[1])\n"
            "except StorageError as exc:\n    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code, str(pipe)], capture_output=True,
                          text=True, timeout=60, check=False,
                          cwd=Path(__file__).resolve().parents[2])
    assert "is not a file" in done.stdout, done.stdout + done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["looks.db"]
