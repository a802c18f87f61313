"""Exports written by the suite itself, shaped like the real samples of ``../shared``.

The real samples are read when that folder is present; these files stand in for them so
that no test needs it. :func:`tau_like_export` writes an agent benchmark log in the
tau-bench shape (a list of tasks, each with ``traj``: the OpenAI messages, tool calls and
tool results included, assistant calls with ``content: null``). The other writers give
one small export per format with the features the importers must handle (a ChatGPT fork,
a Claude message of ``null``, a ShareGPT log with a missing turn, an Open WebUI chat with a
tool call).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

TAU_TASKS = 20

_POLICY = (
    "# Airline Agent Policy\n\nYou help users book, change and cancel reservations. "
    "A refund goes to the original payment method in 5 to 7 business days."
)

_ASKS = [
    "I want to cancel my reservation {rid} and get a refund.",
    "Can I change the flight of reservation {rid} to a later date?",
    "Please add one checked bag to reservation {rid}.",
    "My flight in {rid} was delayed; what can you offer?",
]


def _tau_task(index: int) -> dict[str, Any]:
    rid = f"R{index:04d}X"
    user_id = f"user_{index:03d}"
    ask = _ASKS[index % len(_ASKS)].format(rid=rid)
    call_id = f"call_{index:03d}_details"
    traj: list[dict[str, Any]] = [
        {"role": "system", "content": _POLICY},
        {"role": "user", "content": f"Hi! {ask}"},
        {"role": "assistant", "content": "Could you give me your user id, please?"},
        {"role": "user", "content": f"Sure, it is {user_id}."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": "get_reservation_details",
                        "arguments": json.dumps({"reservation_id": rid}),
                    },
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": call_id,
            "name": "get_reservation_details",
            "content": json.dumps(
                {"reservation_id": rid, "user_id": user_id, "cabin": "economy",
                 "insurance": "yes" if index % 2 else "no"}
            ),
        },
    ]
    # Some tasks talk about refunds at length, some not at all: a ranking has to differ.
    for turn in range(index % 5):
        traj.append({"role": "assistant", "content": f"Step {turn + 1}: the refund of "
                     f"{rid} is checked against the policy; refund refund." if index % 3
                     else f"Step {turn + 1}: checking {rid}."})
        traj.append({"role": "user", "content": "Yes, please go on."})
    traj.append({"role": "assistant", "content": f"Done: {rid} is updated. Anything else?"})
    return {
        "task_id": index,
        "reward": float(index % 2),
        "info": {"task": {"user_id": user_id, "actions": [{"name": "noop", "kwargs": {}}]},
                 "source": "user", "reward_info": {"reward": float(index % 2)}},
        "traj": traj,
        "trial": 0,
    }


def tau_like_export(path: Path, tasks: int = TAU_TASKS) -> Path:
    """Write a tau-bench shaped log of ``tasks`` tasks to ``path``."""
    path.write_text(json.dumps([_tau_task(i) for i in range(tasks)], indent=1), "utf-8")
    return path


def _chatgpt_node(node_id: str, parent: str | None, children: list[str], role: str | None,
                  text: str, time: float) -> dict[str, Any]:
    message = None if role is None else {
        "id": node_id,
        "author": {"role": role},
        "create_time": time,
        "content": {"content_type": "text", "parts": [text]},
        "metadata": {},
    }
    return {"id": node_id, "parent": parent, "children": children, "message": message}


def chatgpt_fork_export(path: Path) -> Path:
    """One conversation whose answer was regenerated: the session and one branch."""
    nodes = [
        _chatgpt_node("root", None, ["u1"], None, "", 0),
        _chatgpt_node("u1", "root", ["a1"], "user", "hi there", 1_700_000_000.0),
        _chatgpt_node("a1", "u1", ["u2"], "assistant", "Hello!", 1_700_000_001.0),
        _chatgpt_node("u2", "a1", ["a2", "a2b"], "user", "tell me a joke", 1_700_000_002.0),
        _chatgpt_node("a2", "u2", [], "assistant", "Why did the tree log out?",
                      1_700_000_003.0),
        _chatgpt_node("a2b", "u2", [], "assistant", "A short story instead.",
                      1_700_000_004.0),
    ]
    conversation = {
        "id": "conv-fork", "title": "Jokes with a fork", "create_time": 1_700_000_000.0,
        "update_time": 1_700_000_004.0, "current_node": "a2",
        "mapping": {node["id"]: node for node in nodes},
    }
    path.write_text(json.dumps([conversation, {"title": "no mapping here"}]), "utf-8")
    return path


def claude_null_export(path: Path) -> Path:
    """A Claude export whose first message is ``null`` (skipped, the rest kept)."""
    conversation = {
        "uuid": "c0ffee00-0000-4000-8000-000000000001",
        "name": "Scales and legs",
        "created_at": "2025-01-02T10:00:00.000000Z",
        "updated_at": "2025-01-02T10:05:00.000000Z",
        "chat_messages": [
            None,
            {"uuid": "m1", "sender": "human", "text": "Are bathroom scales accurate?",
             "created_at": "2025-01-02T10:00:00.000000Z"},
            {"uuid": "m2", "sender": "assistant", "text": "Roughly, for trends.",
             "created_at": "2025-01-02T10:01:00.000000Z"},
        ],
    }
    path.write_text(json.dumps([conversation]), "utf-8")
    return path


def sharegpt_missing_turn_export(path: Path) -> Path:
    """A ShareGPT log in which a human turn follows another (a reply is missing)."""
    turns = [
        {"from": "system", "value": "You are terse."},
        {"from": "human", "value": "first question"},
        {"from": "human", "value": "second question"},
        {"from": "gpt", "value": "one answer"},
    ]
    path.write_text(json.dumps([{"conversations": turns}]), "utf-8")
    return path


WRITERS: dict[str, Callable[[Path], Path]] = {
    "openai/tau_like_airline.json": tau_like_export,
    "chatgpt/fork.json": chatgpt_fork_export,
    "claude/null_message.json": claude_null_export,
    "sharegpt/missing_turn.json": sharegpt_missing_turn_export,
}


def write_own_sample(folder: Path, name: str) -> Path:
    """Write the own sample ``name`` (a key of :data:`WRITERS`) below ``folder``."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return WRITERS[name](path)
