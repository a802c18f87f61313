"""Live changes between desktops: what one process commits, another hears (SPEC §10).

A real PostgreSQL server (tests/pg_server.py); the writer is a plain SQLAlchemy
connection, the listener the one a window runs. Waits are on the listener's condition
with a generous bound: a failure, not a timing, is what they can report.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from workbench.store.notify_postgresql import (
    CHANNEL,
    MAX_PAYLOAD,
    ChangeListener,
    change_payload,
    notify,
)

BOUND = 30.0  # seconds a wait may take before the test fails (never reached when it works)


@pytest.fixture
def engine(pg_url: str) -> Iterator[Any]:
    engine = sa.create_engine(pg_url)
    yield engine
    engine.dispose()


@pytest.fixture
def listener(pg_url: str) -> Iterator[ChangeListener]:
    conninfo = pg_url.replace("postgresql+psycopg://", "postgresql://")
    listening = ChangeListener(conninfo, origin="window-a", retry_seconds=0.05).start()
    assert listening.wait_for(lambda li: li.connections == 1, BOUND), listening.last_error
    yield listening
    listening.stop()


def _commit_change(engine: Any, origin: str, sessions: list[int]) -> None:
    with engine.begin() as conn:
        notify(conn, origin, sessions)


def test_a_commit_elsewhere_is_heard_with_its_sessions(engine: Any, listener: Any) -> None:
    _commit_change(engine, "window-b", [3, 1, 3])
    assert listener.wait_for(lambda li: li.version >= 1, BOUND)
    changes = listener.take()
    assert changes.sessions == {1, 3} and not changes.everything
    assert not listener.take().any  # taken once


def test_own_writes_and_rolled_back_ones_are_not_reported(
    engine: Any, listener: Any
) -> None:
    _commit_change(engine, "window-a", [7])  # this window's own write
    with engine.connect() as conn:  # another's write that never commits
        notify(conn, "window-b", [8])
        conn.rollback()
    _commit_change(engine, "window-b", [9])  # the marker that all of the above arrived
    assert listener.wait_for(lambda li: li.version >= 1, BOUND)
    assert listener.take().sessions == {9}
    assert listener.version == 1


def test_too_many_sessions_for_one_notification_say_everything(
    engine: Any, listener: Any
) -> None:
    many = list(range(1, MAX_PAYLOAD))
    assert '"all":true' in change_payload("window-b", many)
    _commit_change(engine, "window-b", many)
    assert listener.wait_for(lambda li: li.version >= 1, BOUND)
    assert listener.take().everything


def test_a_payload_that_is_not_ours_makes_the_window_refresh(engine: Any, listener: Any) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text("SELECT pg_notify(:c, 'not json')"), {"c": CHANNEL})
    assert listener.wait_for(lambda li: li.version >= 1, BOUND)
    assert listener.take().everything


def test_after_a_lost_connection_it_reconnects_and_asks_for_a_full_catch_up(
    engine: Any, listener: Any
) -> None:
    with engine.begin() as conn:
        killed = conn.execute(sa.text(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = :name"), {"name": listener.application_name}).all()
    assert killed == [(True,)]
    assert listener.wait_for(lambda li: li.connections == 2, BOUND), listener.last_error
    assert listener.wait_for(lambda li: li.version >= 1, BOUND)
    assert listener.take().everything  # what was committed meanwhile was not heard
    seen = listener.version
    _commit_change(engine, "window-b", [42])
    assert listener.wait_for(lambda li: li.version > seen, BOUND)
    assert listener.take().sessions == {42}
