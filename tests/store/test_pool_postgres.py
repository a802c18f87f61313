"""The team store's connection pool (store/db_postgresql.py): a pooled connection is
asked whether it still works only after it sat idle (each question is a round trip, as
long as the statement it would precede), a dead one is then replaced without a word, and
one that died between two close uses costs one failed read, said in a sentence, after
which the pool is new. Failures to reach the server name the outage they belong to, so a
window can say one outage once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from workbench.errors import StorageError, StoreUnreachableError
from workbench.store import Repository, db_postgresql
from workbench.store.opening import open_database


@pytest.fixture
def team(pg_db_url: str) -> Iterator[tuple[Repository, sa.Engine]]:
    db = open_database(pg_db_url)
    admin = sa.create_engine(pg_db_url, isolation_level="AUTOCOMMIT")
    try:
        yield Repository(db), admin
    finally:
        admin.dispose()
        db.close()


def _drop_the_workbench_connections(admin: sa.Engine) -> int:
    """What a server restart or a firewall does to the pooled connections."""
    with admin.connect() as conn:
        return int(conn.execute(sa.text(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = 'conversation-workbench'")).scalar_one())


def _count_pings(repo: Repository, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    asked: list[int] = []
    dialect = repo.db.engine.dialect
    ping = dialect.do_ping

    def counted(dbapi_conn: object) -> bool:
        asked.append(1)
        return bool(ping(dbapi_conn))

    monkeypatch.setattr(dialect, "do_ping", counted)
    return asked


def test_a_connection_in_use_is_not_asked_before_each_statement(
    team: tuple[Repository, sa.Engine], monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo, _admin = team
    info = repo.create_session("Busy")
    asked = _count_pings(repo, monkeypatch)
    for _ in range(20):
        assert repo.get_session(info.id).title == "Busy"
        assert repo.page_messages(info.id) == []
    assert asked == []


def test_an_idle_connection_the_server_dropped_is_replaced_before_use(
    team: tuple[Repository, sa.Engine], monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo, admin = team
    info = repo.create_session("Kept")
    monkeypatch.setattr(db_postgresql, "PING_AFTER_IDLE_S", 0.0)  # every use comes idle
    asked = _count_pings(repo, monkeypatch)
    assert _drop_the_workbench_connections(admin) >= 1
    assert repo.get_session(info.id).title == "Kept"
    repo.rename_session(info.id, "Kept and renamed")
    assert repo.get_session(info.id).title == "Kept and renamed"
    assert asked  # the dead connection was found by asking, not by a failed read


def test_a_connection_dropped_between_close_uses_fails_one_read_then_the_pool_is_new(
    team: tuple[Repository, sa.Engine],
) -> None:
    repo, admin = team
    info = repo.create_session("Shared")
    assert repo.get_session(info.id).title == "Shared"
    assert _drop_the_workbench_connections(admin) >= 1
    with pytest.raises(StorageError) as caught:
        repo.get_session(info.id)
    assert str(caught.value).endswith(".") and "Traceback" not in str(caught.value)
    assert repo.get_session(info.id).title == "Shared"


def test_when_the_listener_loses_the_server_the_next_read_connects_afresh(
    team: tuple[Repository, sa.Engine], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server restart drops every connection: the listener (it hears other desktops)
    notices first, and the pool is renewed, so no read fails on a dead connection."""
    repo, admin = team
    info = repo.create_session("Restarted")
    listener = repo.db.listener()
    assert listener.wait_for(lambda li: li.connections >= 1, 10), listener.last_error
    assert repo.get_session(info.id).title == "Restarted"
    with admin.connect() as conn:
        conn.execute(sa.text(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name "
            "IN ('conversation-workbench', :listener)"),
            {"listener": listener.application_name})
    assert listener.wait_for(lambda li: li.connections >= 2, 10), listener.last_error
    assert repo.get_session(info.id).title == "Restarted"
    # The new pool still asks an idle connection first.
    monkeypatch.setattr(db_postgresql, "PING_AFTER_IDLE_S", 0.0)
    asked = _count_pings(repo, monkeypatch)
    repo.get_session(info.id)
    assert asked


def _let_in(server_admin: sa.Engine, name: str, allowed: bool) -> None:
    with server_admin.connect() as conn:
        conn.execute(sa.text(
            f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {"true" if allowed else "false"}'))


def test_the_failures_of_one_outage_name_it_whatever_the_driver_said(
    team: tuple[Repository, sa.Engine], pg_server: object, pg_db_url: str,
) -> None:
    """A pooled connection dropped, then connects refused: two reasons, one outage.
    Once a statement gets an answer again, the next failure is another outage."""
    repo, admin = team
    info = repo.create_session("Shared")
    name = pg_db_url.rsplit("/", 1)[1]
    server_admin = sa.create_engine(pg_server.url(), isolation_level="AUTOCOMMIT")  # type: ignore[attr-defined]
    try:
        assert repo.get_session(info.id).title == "Shared"
        assert _drop_the_workbench_connections(admin) >= 1
        _let_in(server_admin, name, False)
        failures: list[StoreUnreachableError] = []
        for _ in range(2):  # the dropped connection, then a new one refused
            with pytest.raises(StoreUnreachableError) as caught:
                repo.get_session(info.id)
            failures.append(caught.value)
        with pytest.raises(StoreUnreachableError) as caught:
            repo.rename_session(info.id, "Renamed while away")
        failures.append(caught.value)
        assert len({str(f) for f in failures}) >= 2, failures  # the driver's words differ
        outages = {f.outage for f in failures}
        assert len(outages) == 1 and None not in outages
        assert all("cannot be reached" in str(f) for f in failures)

        _let_in(server_admin, name, True)
        assert repo.get_session(info.id).title == "Shared"  # answered: that outage is over
        _let_in(server_admin, name, False)
        repo.db.engine.dispose()
        with pytest.raises(StoreUnreachableError) as caught:
            repo.get_session(info.id)
        assert caught.value.outage not in outages
    finally:
        _let_in(server_admin, name, True)
        server_admin.dispose()
