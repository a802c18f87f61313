"""The team store's address and password as the front ends hand them to the engine
(engine/team.py): the URL kept and shown never holds the password, a password typed is
used in memory for one open, "remember" puts it in the keyring entry the store reads,
and no failure sentence repeats it."""

from __future__ import annotations

import socket

import pytest

from tests.memory_keyring import MemoryKeyring
from workbench.engine.team import (
    is_team_url,
    open_team_store,
    remember_password,
    team_address,
)
from workbench.errors import StorageError, WorkbenchError

SECRET = "pa:ss@w/rd-7781"
SERVICE = "conversation-workbench-postgresql"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_address_kept_and_shown_has_no_password() -> None:
    assert team_address("postgresql://alice:hunter2@db.example.org:5433/team") \
        == "postgresql://alice@db.example.org:5433/team"
    assert team_address("  postgres://alice@db.example.org/team?sslmode=require ") \
        == "postgresql://alice@db.example.org/team?sslmode=require"
    assert is_team_url("postgresql://alice@host/team")
    assert not is_team_url("/home/alice/workbench.db")


@pytest.mark.parametrize("url", [
    "db.example.org/team",
    "postgresql://alice:hunter2@db.example.org:notaport/team",
    "postgresql://alice:hunter2@db.example.org",
    "mysql://alice:hunter2@db.example.org/team",
])
def test_an_address_that_is_not_a_team_store_is_said_without_its_password(url: str) -> None:
    with pytest.raises(StorageError) as caught:
        team_address(url)
    text = str(caught.value)
    assert "hunter2" not in text
    assert text.endswith(".") and "\n" not in text


def test_remember_puts_the_password_where_opening_looks(memory_keyring: MemoryKeyring) -> None:
    remember_password("postgresql://alice@db.example.org/team", SECRET)
    assert memory_keyring.passwords == {
        (SERVICE, "alice@db.example.org:5432/team"): SECRET}


def test_without_a_keyring_remembering_is_refused_in_a_sentence(no_keyring: None) -> None:
    with pytest.raises(WorkbenchError) as caught:
        remember_password("postgresql://alice@db.example.org/team", SECRET)
    assert "keyring" in str(caught.value) and SECRET not in str(caught.value)
    assert "PGPASSWORD" in str(caught.value)


def test_a_server_that_cannot_be_reached_is_said_without_the_password() -> None:
    url = f"postgresql://alice@127.0.0.1:{_closed_port()}/team"
    with pytest.raises(StorageError) as caught:
        open_team_store(url, SECRET)
    text = str(caught.value)
    assert SECRET not in text and "pa:ss" not in text
    assert "127.0.0.1" in text and "\n" not in text
    with pytest.raises(StorageError) as caught:
        open_team_store(url.replace("alice@", f"alice:{SECRET.replace('@', '%40')}@"))
    assert "pa:ss" not in str(caught.value)


def test_a_typed_password_opens_the_store_and_is_never_shown(pg_db_url: str) -> None:
    # The test server trusts local connections: the password is carried, not checked.
    ws = open_team_store(pg_db_url, SECRET)
    try:
        assert not ws.is_file
        assert SECRET not in ws.location and "pa:ss" not in ws.location
        assert ws.location.startswith("postgresql://") and ws.location.endswith(
            pg_db_url.rsplit("/", 1)[1])
    finally:
        ws.close()
