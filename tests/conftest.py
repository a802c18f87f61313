"""Fixtures shared by the whole suite.

Every test runs with its own empty workbench home, so nothing a test does can read or
change the developer's real sessions, settings or window layout.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# The protocol server is a plain module beside the provider tests (imported by path).
sys.path.insert(0, str(Path(__file__).resolve().parent / "providers"))

from protocol_server import ProtocolServer  # noqa: E402

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
# The shared folder (sample exports from real tools) sits beside the clone; it may be absent.
SHARED_DIR = REPO_ROOT.parent / "shared"


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


@pytest.fixture
def shared_dir() -> Path:
    """The ``../shared`` folder beside the repository; skips the test when it is absent."""
    if not SHARED_DIR.is_dir():
        pytest.skip(f"shared folder not found at {SHARED_DIR}")
    return SHARED_DIR


@pytest.fixture
def server() -> Iterator[ProtocolServer]:
    """A started protocol server on 127.0.0.1 (tests/providers/protocol_server.py);
    stalls are released and the server stopped afterwards."""
    srv = ProtocolServer().start()
    try:
        yield srv
    finally:
        srv.stop()
