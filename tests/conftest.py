"""Fixtures shared by the whole suite.

Every test runs with its own empty workbench home, so nothing a test does can read or
change the developer's real sessions, settings or window layout.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# The protocol server is a plain module beside the provider tests (imported by path).
sys.path.insert(0, str(Path(__file__).resolve().parent / "providers"))

from protocol_server import ProtocolServer  # noqa: E402

from tests.memory_keyring import MemoryKeyring  # noqa: E402
from tests.pg_server import PostgresServer, started_for_tests  # noqa: E402

# Before anything imports Qt: tests draw on the offscreen platform unless told otherwise.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

# The suite shares two cores with whatever else runs; generation speed is not what the
# property tests are about, so neither slow generation nor per-example time fails them.
settings.register_profile(
    "workbench",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("workbench")

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point WORKBENCH_HOME (and the XDG data/config dirs) at a fresh per-test directory."""
    home = tmp_path / "workbench-home"
    monkeypatch.setenv("WORKBENCH_HOME", str(home))
    monkeypatch.delenv("WORKBENCH_DB", raising=False)
    # Belt and braces for code that asks platformdirs or QSettings directly.
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    yield home


@pytest.fixture(autouse=True)
def no_awaited_thread_left() -> Iterator[None]:
    """A test leaves no thread running that a normal exit would wait for (not a daemon).

    Such a thread outlives the test into the next ones: an idle lexing thread left by a
    GUI test once made ``cli.run`` (which ends an import at once only when no such
    thread is left) behave differently in a later engine test, depending on the order.
    A thread still finishing its work is waited for; one that does not end fails here.
    """
    before = set(threading.enumerate())
    yield
    left = [t for t in threading.enumerate() if t not in before and not t.daemon]
    for thread in left:
        thread.join(timeout=30)
    running = [t.name for t in left if t.is_alive()]
    assert not running, f"threads left running after the test: {running}"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the whole run (tests/pg_server.py), started on first use.

    Under ``CI=true`` a server that will not start fails the tests that need it; elsewhere
    they are skipped with the reason (a developer machine without PostgreSQL installed).
    """
    server = started_for_tests()
    try:
        yield server
    finally:
        server.stop()


_PG_DATABASES = itertools.count(1)


@pytest.fixture
def pg_url(pg_server: PostgresServer) -> Iterator[str]:
    """The SQLAlchemy URL of a new, empty database of its own on the test server."""
    import sqlalchemy as sa

    name = f"test_{os.getpid()}_{next(_PG_DATABASES)}"
    admin = sa.create_engine(pg_server.url(), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        yield pg_server.url(name)
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@pytest.fixture(scope="session")
def pg_template(pg_server: PostgresServer) -> str:
    """A database migrated to the current schema once per run; each test's team-store
    database is a copy of it (``CREATE DATABASE ... TEMPLATE``, a few milliseconds)."""
    import sqlalchemy as sa

    from workbench.store.db_postgresql import PostgresDatabase

    name = f"template_{os.getpid()}"
    admin = sa.create_engine(pg_server.url(), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    PostgresDatabase.open_url(pg_server.url(name)).close()
    return name


@pytest.fixture
def pg_db_url(pg_server: PostgresServer, pg_template: str) -> Iterator[str]:
    """The URL of a fresh, migrated team-store database of the test's own."""
    import sqlalchemy as sa

    name = f"test_{os.getpid()}_{next(_PG_DATABASES)}"
    admin = sa.create_engine(pg_server.url(), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}"'))
        yield pg_server.url(name)
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


# Both by default; WORKBENCH_TEST_BACKENDS=sqlite narrows a developer's run to the file.
BACKENDS = tuple(
    b.strip()
    for b in os.environ.get("WORKBENCH_TEST_BACKENDS", "sqlite,postgresql").split(",")
    if b.strip()
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests on the store (the ``backend`` fixture, through ``db``, ``repo``,
    ``workspace`` or ``cli``) run on both backends: a SQLite file and the team store on
    the run's PostgreSQL server. ``@pytest.mark.sqlite_only("why")`` keeps a test that is
    about the file itself (backups, pragmas, raw sqlite3) on SQLite."""
    if "backend" not in metafunc.fixturenames:
        return
    only = metafunc.definition.get_closest_marker("sqlite_only")
    chosen = [b for b in BACKENDS if b == "sqlite" or not only] or ["sqlite"]
    metafunc.parametrize("backend", chosen, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The backend the test's database is on: ``sqlite`` or ``postgresql``."""
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture
def db_target(backend: str, request: pytest.FixtureRequest) -> Path | str:
    """What the test opens: the ``db_path`` file, or a fresh team-store database URL."""
    if backend == "postgresql":
        return str(request.getfixturevalue("pg_db_url"))
    return Path(request.getfixturevalue("db_path"))


@pytest.fixture
def memory_keyring() -> Iterator[MemoryKeyring]:
    """A keyring in a dict, installed for the test (the previous one put back after)."""
    import keyring

    previous = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    try:
        yield backend
    finally:
        keyring.set_keyring(previous)


@pytest.fixture
def no_keyring() -> Iterator[None]:
    """No usable keyring (keyring's own failing backend), as on a machine without one."""
    import keyring
    from keyring.backends import fail

    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    try:
        yield
    finally:
        keyring.set_keyring(previous)


@pytest.fixture
def server() -> Iterator[ProtocolServer]:
    """A started protocol server on 127.0.0.1 (tests/providers/protocol_server.py);
    stalls are released and the server stopped afterwards."""
    srv = ProtocolServer().start()
    try:
        yield srv
    finally:
        srv.stop()
