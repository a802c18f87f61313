"""API keys from the environment or the OS keyring; context windows by name and from
server replies."""

from __future__ import annotations

import pytest

from tests.memory_keyring import MemoryKeyring
from workbench.providers.context import (
    choose_context_window,
    context_window_from_models,
    context_window_from_props,
    known_context_window,
)
from workbench.providers.keys import (
    KEYRING_SERVICE,
    keyring_status,
    resolve_api_key,
    split_entry,
    store_in_keyring,
)


def test_key_from_the_named_environment_variable(sentinel_key: str) -> None:
    found = resolve_api_key("MY_KEY", None, environ={"MY_KEY": sentinel_key})
    assert found.key == sentinel_key
    assert found.source == "the environment variable MY_KEY"
    assert sentinel_key not in repr(found)


def test_missing_variable_says_where_it_looked() -> None:
    found = resolve_api_key("MY_KEY", None, environ={})
    assert found.key is None and not found.found
    assert "MY_KEY (not set)" in found.source


def test_no_reference_means_no_key() -> None:
    found = resolve_api_key(None, None, environ={"OPENAI_API_KEY": "sk-should-not-be-taken"})
    assert found.key is None  # never guess a variable: a key could go to the wrong server


def test_keyring_entry_wins_over_the_environment(
    memory_keyring: MemoryKeyring, sentinel_key: str
) -> None:
    store_in_keyring("work", sentinel_key)
    assert memory_keyring.passwords[(KEYRING_SERVICE, "work")] == sentinel_key
    found = resolve_api_key("MY_KEY", "work", environ={"MY_KEY": "from-env"})
    assert found.key == sentinel_key
    assert found.source == "the keyring entry 'work'"
    assert found.notice is None


def test_service_and_user_form_of_an_entry(memory_keyring: MemoryKeyring) -> None:
    memory_keyring.set_password("other-app", "alice", "k-123")
    assert split_entry("other-app:alice") == ("other-app", "alice")
    assert resolve_api_key(None, "other-app:alice").key == "k-123"


def test_without_a_keyring_backend_it_says_so_and_uses_the_environment(no_keyring: None) -> None:
    usable, why = keyring_status()
    assert not usable and "no OS keyring backend" in why
    found = resolve_api_key("MY_KEY", "work", environ={"MY_KEY": "from-env"})
    assert found.key == "from-env"
    assert found.notice is not None
    assert "no OS keyring backend" in found.notice and "MY_KEY" in found.notice


def test_without_a_keyring_and_no_variable_the_notice_asks_for_one(no_keyring: None) -> None:
    found = resolve_api_key(None, "work", environ={})
    assert found.key is None
    assert found.notice is not None and "environment variable" in found.notice


# -- context windows ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("gpt-4o-mini", 128_000),
        ("gpt-4o-2024-08-06", 128_000),
        ("gpt-4", 8_192),
        ("gpt-4-turbo-preview", 128_000),
        ("openai/gpt-4.1-mini", 1_047_576),
        ("claude-3-5-sonnet-20241022", 200_000),
        ("claude-sonnet-4-5", 200_000),
        ("llama3.1:8b", 131_072),
        ("Meta-Llama/Llama-3.1-8B-Instruct", 131_072),
        ("gemma-3-270m", 32_768),
        ("my-private-model", None),
    ],
)
def test_known_models_by_longest_prefix(model: str, window: int | None) -> None:
    assert known_context_window(model) == window


def test_props_reply_in_both_shapes() -> None:
    assert context_window_from_props({"default_generation_settings": {"n_ctx": 4096}}) == 4096
    assert context_window_from_props({"n_ctx": 2048}) == 2048
    assert context_window_from_props({"default_generation_settings": {}}) is None
    assert context_window_from_props(["not", "a", "dict"]) is None


def test_models_reply_picks_the_model_and_ignores_training_context() -> None:
    data = {"data": [
        {"id": "a", "meta": {"n_ctx": 1000, "n_ctx_train": 9000}},
        {"id": "b", "meta": {"n_ctx_train": 9000}},
    ]}
    assert context_window_from_models(data, "a") == 1000
    assert context_window_from_models(data, "b") is None
    lone = {"data": [{"id": "served-name", "meta": {"n_ctx": 512}}]}
    assert context_window_from_models(lone, "any-name") == 512


def test_choice_order_is_server_then_table_then_user() -> None:
    assert choose_context_window(1024, "gpt-4o", 9) == (1024, "server")
    assert choose_context_window(None, "gpt-4o", 9) == (128_000, "known model")
    assert choose_context_window(None, "mine", 9) == (9, "configured")
    assert choose_context_window(None, "mine", None) == (None, "unknown")
