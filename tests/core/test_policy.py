"""The memory policy (SPEC §3): defaults, merging of agent and session settings, checks."""

from __future__ import annotations

import pytest

from workbench.core.policy import MemoryPolicy
from workbench.errors import RequestError


def test_defaults_follow_the_specification() -> None:
    policy = MemoryPolicy.from_dict(None)
    assert policy.mode == "auto" and policy.auto
    assert (policy.scope, policy.namespace) == ("agent", "default")
    assert policy.inject == "instructions"
    assert policy.max_entries == 5
    assert policy.max_messages is None and policy.token_budget is None


def test_session_overrides_win_over_the_agent() -> None:
    agent = {"mode": "manual", "max_messages": 20, "capture": "conversation"}
    session = {"mode": "auto", "max_messages": None, "namespace": "trips"}
    policy = MemoryPolicy.from_dict(agent, session)
    assert policy.mode == "auto"
    assert policy.capture == "conversation"
    assert policy.namespace == "trips"
    assert policy.max_messages is None  # null clears an optional number
    assert MemoryPolicy.from_dict(agent, {"mode": None}).mode == "manual"


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"mode": "sometimes"}, "'mode'"),
        ({"scope": "world"}, "'scope'"),
        ({"capture": "all"}, "'capture'"),
        ({"inject": "prompt"}, "'inject'"),
        ({"max_entries": -1}, "'max_entries'"),
        ({"max_messages": 0}, "'max_messages'"),
        ({"max_messages": True}, "'max_messages'"),
        ({"namespace": " "}, "'namespace'"),
        ({"windw": 3}, "no setting 'windw'"),
    ],
)
def test_bad_settings_are_named(data: dict[str, object], fragment: str) -> None:
    with pytest.raises(RequestError) as err:
        MemoryPolicy.from_dict(data)
    assert fragment in str(err.value)


def test_a_policy_round_trips_through_json() -> None:
    policy = MemoryPolicy(mode="manual", scope="session", max_entries=2, token_budget=900)
    assert MemoryPolicy.from_dict(policy.to_dict()) == policy
    assert policy.replace(mode="auto").auto
    with pytest.raises(RequestError):
        MemoryPolicy.from_dict([1])  # type: ignore[arg-type]


def test_compaction_section_of_the_agent_policy_is_left_to_compaction() -> None:
    from workbench.core.compaction import CompactionPolicy
    from workbench.core.policy import MemoryPolicy

    stored = {"max_entries": 3, "compaction": {"keep_messages": 10}}

    assert MemoryPolicy.from_dict(stored).max_entries == 3
    assert CompactionPolicy.from_dict(stored["compaction"]).keep_messages == 10
