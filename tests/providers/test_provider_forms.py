"""What settings forms need from the engine's providers module: saving a typed key into
the OS keyring (never the database) and detecting a config's context window."""

from __future__ import annotations

from pathlib import Path

import pytest
from protocol_server import ProtocolServer, free_port

from tests.memory_keyring import MemoryKeyring
from workbench.core.provider import ProviderConfig
from workbench.engine.providers import (
    ProviderSettings,
    detect_context_window,
    keyring_state,
    save_key_in_keyring,
)
from workbench.engine.workspace import Workspace
from workbench.errors import StorageError, WorkbenchError
from workbench.providers.keys import KEYRING_SERVICE


def test_a_typed_key_goes_into_the_keyring_and_never_into_the_database(
    memory_keyring: MemoryKeyring, server: ProtocolServer, sentinel_key: str, db_path: Path,
) -> None:
    usable, why = keyring_state()
    assert usable and "MemoryKeyring" in why
    server.api_key = sentinel_key
    save_key_in_keyring(" local-server ", f"  {sentinel_key}\n")
    assert memory_keyring.passwords == {(KEYRING_SERVICE, "local-server"): sentinel_key}
    with Workspace.open(db_path) as ws:
        settings = ProviderSettings(ws.db)
        settings.add(ProviderConfig(name="local", kind="openai", base_url=server.url,
                                    model=server.model, api_key_keyring="local-server"))
        report = settings.test("local")
        assert report.ok, report.sentence
    # The server saw the key; the database file never held it.
    assert server.requests[-1].headers["authorization"] == f"Bearer {sentinel_key}"
    for suffix in ("", "-wal"):
        file = Path(str(db_path) + suffix)
        if file.exists():
            assert sentinel_key.encode() not in file.read_bytes()


def test_without_a_keyring_saving_says_so_and_offers_an_environment_variable(
    no_keyring: None, sentinel_key: str,
) -> None:
    usable, why = keyring_state()
    assert not usable and "no OS keyring" in why
    with pytest.raises(WorkbenchError) as caught:
        save_key_in_keyring("local", sentinel_key)
    sentence = str(caught.value)
    assert "no OS keyring" in sentence and "environment variable" in sentence
    assert sentinel_key not in sentence


def test_saving_needs_an_entry_and_a_key(memory_keyring: MemoryKeyring) -> None:
    with pytest.raises(WorkbenchError, match="Name the keyring entry"):
        save_key_in_keyring("  ", "sk-something-long-enough")
    with pytest.raises(WorkbenchError, match="no key to save"):
        save_key_in_keyring("local", "   ")
    assert memory_keyring.passwords == {}


def test_detect_asks_the_server_first(server: ProtocolServer) -> None:
    config = ProviderConfig(name="local", kind="openai", base_url=server.url,
                            model=server.model, context_window=999)
    found = detect_context_window(config)
    # The server's window wins over the user's own value (which is what is being set).
    assert (found.window, found.source) == (server.n_ctx, "server")
    assert f"{server.n_ctx:,} tokens" in found.sentence
    assert any(r.path == "/props" for r in server.requests)


def test_detect_goes_without_a_key_it_cannot_find(server: ProtocolServer) -> None:
    config = ProviderConfig(name="local", kind="openai", base_url=server.url,
                            model=server.model, api_key_env="WORKBENCH_TEST_MISSING_KEY")
    found = detect_context_window(config, environ={})
    assert (found.window, found.source) == (server.n_ctx, "server")


def test_detect_falls_back_to_the_known_model_table_then_says_it_does_not_know() -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    known = detect_context_window(ProviderConfig(name="gpt", kind="openai", base_url=dead,
                                                 model="gpt-4o-mini"))
    assert (known.window, known.source) == (128_000, "known model")
    assert "known to have 128,000 tokens" in known.sentence
    unknown = detect_context_window(ProviderConfig(name="mine", kind="openai", base_url=dead,
                                                   model="my-private-finetune"))
    assert (unknown.window, unknown.source) == (None, "unknown")
    assert "set the window yourself" in unknown.sentence
    # The server's absence is said as such, in words.
    assert "could not be reached (connection refused" in unknown.sentence
    assert "Errno" not in unknown.sentence and "Neither" not in unknown.sentence


def test_detect_checks_the_config_like_the_store_does() -> None:
    with pytest.raises(StorageError, match="base URL"):
        detect_context_window(ProviderConfig(name="x", kind="openai", base_url="localhost",
                                             model="m"))
