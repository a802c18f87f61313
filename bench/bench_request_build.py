"""Request assembly for a 100,000-message session against LangChain's ``trim_messages``.

Run as ``.venv/bin/python bench/bench_request_build.py [--messages N] [--window N]``. It
builds a deterministic agent session (a system prompt, user and assistant turns,
assistant tool calls with their results, code and prose of log-normal lengths), caches
every message's token count (o200k_base, the way the store keeps them), then in the same
run times

* ours: ``workbench.core.assembly.assemble`` fitting the session, the instructions and a
  new prompt to a context window (default 128,000 tokens minus 4,096 for the reply),
  with the cached counts;
* the peer: ``langchain_core.messages.trim_messages`` on the same messages (converted to
  LangChain messages beforehand, untimed), the same budget, ``strategy="last"``,
  ``include_system=True``, with a token counter over the same tiktoken encoding and the
  same per-message rule (3 tokens per message plus its values);
* for reference, the peer again with a counter that looks up the cached counts, so the
  difference of algorithm shows apart from the cost of counting.

Goals: ours ≤ 50 ms and ≥ 20× faster than the peer with its tiktoken counter. LangChain
is no dependency of the workbench: the script installs ``langchain-core`` with pip
``--target`` into a folder of the system's temporary directory (outside the repository)
unless ``--langchain-dir`` names one that has it, and imports it from there. The exit
status is 2 when a goal is missed.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import header, load_note, ms, prepare_environment, time_calls, verdict  # noqa: E402

prepare_environment()

from workbench.core.assembly import Budget, RequestParts, assemble  # noqa: E402
from workbench.core.conversation import Message  # noqa: E402
from workbench.core.tokens import REPLY_PRIMING_TOKENS, TOKENS_PER_MESSAGE, get_counter  # noqa: E402

GOAL_MS = 50.0
GOAL_RATIO = 20.0
LANGCHAIN_DIR = Path(tempfile.gettempdir()) / "workbench-bench-langchain-core"

WORDS = [
    "request", "memory", "budget", "window", "message", "session", "summary", "token",
    "assistant", "result", "server", "client", "porto", "lisbon", "train", "ticket",
    "refund", "booking", "invoice", "customer", "order", "shipping", "address", "weather",
    "forecast", "python", "function", "return", "value", "error", "retry", "timeout",
    "database", "index", "query", "search", "folder", "file", "report", "chart",
]
CODE = [
    "def handle(request):\n    return {'status': 200, 'items': items[:10]}",
    "for row in rows:\n    total += row.amount * rate",
    "SELECT id, name FROM customers WHERE region = 'north' ORDER BY name;",
    "if error is not None:\n    raise RuntimeError(f'failed: {error}')",
]


def _text(rng: random.Random, mean_words: float) -> str:
    count = max(1, int(rng.lognormvariate(math.log(mean_words), 0.8)))
    words = [rng.choice(WORDS) for _ in range(count)]
    text = " ".join(words).capitalize() + "."
    if rng.random() < 0.1:
        text += "\n\n```python\n" + rng.choice(CODE) + "\n```"
    return text


def build_history(count: int, seed: int) -> list[Message]:
    """A deterministic agent session of ``count`` messages with ids and positions."""
    rng = random.Random(seed)
    messages = [Message(role="system", content="You are a careful support agent. " * 3)]
    serial = 0
    while len(messages) < count:
        messages.append(Message(role="user", content=_text(rng, 18)))
        if rng.random() < 0.3:
            calls = []
            for _ in range(rng.choice([1, 1, 2])):
                serial += 1
                arguments = json.dumps({"query": rng.choice(WORDS), "limit": rng.randint(1, 9)})
                calls.append(
                    {
                        "id": f"call_{serial}",
                        "type": "function",
                        "function": {"name": "search_orders", "arguments": arguments},
                    }
                )
            messages.append(Message(role="assistant", content="", tool_calls=calls))
            for c in calls:
                messages.append(
                    Message(role="tool", content=_text(rng, 40), tool_call_id=c["id"],
                            name="search_orders")
                )
        messages.append(Message(role="assistant", content=_text(rng, 45)))
    messages = messages[:count]
    for i, m in enumerate(messages):
        m.id = i + 1
        m.position = i
    return messages


def ensure_langchain(folder: Path, install: bool) -> Any:
    """``langchain_core.messages``, installed into ``folder`` with pip if needed."""
    if not (folder / "langchain_core").is_dir():
        if not install:
            raise SystemExit(f"langchain-core is not in {folder}; run without --no-install")
        print(f"Installing langchain-core into {folder} (outside the repository)...")
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "-q",
             "--target", str(folder), "langchain-core"],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            sys.stderr.write(done.stdout + done.stderr)
            raise SystemExit("pip could not install langchain-core for the comparison")
    # Appended, not prepended: the workbench's own packages (pydantic…) keep precedence.
    sys.path.append(str(folder))
    messages = importlib.import_module("langchain_core.messages")
    version = importlib.import_module("langchain_core").__version__
    return messages, version


def to_langchain(lc: Any, messages: list[Message]) -> list[Any]:
    out = []
    for m in messages:
        if m.role == "system":
            out.append(lc.SystemMessage(content=m.content))
        elif m.role == "user":
            out.append(lc.HumanMessage(content=m.content))
        elif m.role == "assistant":
            calls = [
                {"name": c["function"]["name"], "args": json.loads(c["function"]["arguments"]),
                 "id": c["id"]}
                for c in m.tool_calls or []
            ]
            out.append(lc.AIMessage(content=m.content, tool_calls=calls))
        else:
            out.append(lc.ToolMessage(content=m.content, tool_call_id=m.tool_call_id or "",
                                      name=m.name))
    return out


def tiktoken_counter(lc: Any, encoding: Any) -> Callable[..., int]:
    """Per-message tokens with the workbench's rule, on the same tiktoken encoding."""
    encode = encoding.encode_ordinary
    roles = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}
    role_tokens = {t: len(encode(r)) for t, r in roles.items()}

    def count(message: lc.BaseMessage) -> int:  # type: ignore[name-defined]
        total = TOKENS_PER_MESSAGE + role_tokens.get(message.type, 1)
        total += len(encode(message.content if isinstance(message.content, str) else ""))
        for c in getattr(message, "tool_calls", None) or ():
            total += len(encode(c["name"])) + len(encode(json.dumps(c["args"])))
        tool_call_id = getattr(message, "tool_call_id", None)
        if tool_call_id:
            total += len(encode(tool_call_id))
        name = getattr(message, "name", None)
        if name:
            total += 1 + len(encode(name))
        return total

    # trim_messages calls a counter per message when its parameter is annotated so.
    count.__annotations__["message"] = lc.BaseMessage
    return count


def cached_counter(lc: Any, counts: dict[int, int]) -> Callable[..., int]:
    def count(message: lc.BaseMessage) -> int:  # type: ignore[name-defined]
        return counts[id(message)]

    count.__annotations__["message"] = lc.BaseMessage
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--window", type=int, default=128_000)
    parser.add_argument("--reserve", type=int, default=4_096)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--peer-runs", type=int, default=3)
    parser.add_argument("--langchain-dir", type=Path, default=LANGCHAIN_DIR)
    parser.add_argument("--no-install", action="store_true", help="never run pip")
    args = parser.parse_args(argv)

    print(f"Request assembly bench ({load_note()})")
    lc, lc_version = ensure_langchain(args.langchain_dir, not args.no_install)
    counter = get_counter()
    if counter.encoding is None:
        raise SystemExit("the o200k_base vocabulary could not be loaded; install bpe-openai")

    started = time.perf_counter()
    history = build_history(args.messages, args.seed)
    counts = counter.count_messages(history)
    for m, n in zip(history, counts, strict=True):
        m.token_count, m.token_encoding = n, counter.encoding_name
    total_tokens = sum(counts)
    print(f"Session: {len(history):,} messages, {total_tokens:,} tokens "
          f"(built and counted in {time.perf_counter() - started:.1f} s, untimed)")

    instructions = "You are a careful support agent. Answer briefly and cite order numbers."
    prompt_text = "Which of my orders from last week have not shipped yet?"
    budget = Budget(context_window=args.window, reserved_output=args.reserve)

    def ours() -> Any:
        parts = RequestParts(
            instructions=instructions,
            history=history,
            turn=[Message(role="user", content=prompt_text)],
        )
        return assemble(parts, counter=counter, budget=budget)

    result = ours()
    assert budget.available is not None
    print(f"Budget: {budget.available:,} tokens ({budget.describe()})")
    print(f"Ours keeps {len(result.history):,} history messages, {result.tokens.total:,} tokens; "
          f"{result.left_out_count:,} left out")

    # The peer gets the same messages: the system prompt, the session, the prompt.
    lc_messages = to_langchain(
        lc,
        [Message(role="system", content=instructions), *history[1:],
         Message(role="user", content=prompt_text)],
    )
    assert counter.encoding is not None
    exact = tiktoken_counter(lc, counter.encoding)
    max_tokens = budget.available - REPLY_PRIMING_TOKENS

    def peer() -> list[Any]:
        return lc.trim_messages(
            lc_messages,
            max_tokens=max_tokens,
            token_counter=exact,
            strategy="last",
            include_system=True,
            allow_partial=False,
        )

    lookup = {id(m): exact(m) for m in lc_messages}
    by_cache = cached_counter(lc, lookup)

    def peer_cached() -> list[Any]:
        return lc.trim_messages(
            lc_messages,
            max_tokens=max_tokens,
            token_counter=by_cache,
            strategy="last",
            include_system=True,
            allow_partial=False,
        )

    kept = peer()
    print(f"trim_messages (langchain-core {lc_version}) keeps {len(kept) - 2:,} history messages")

    header(f"Fitting a {len(history):,}-message session")
    mine = time_calls(ours, runs=args.runs)
    theirs = time_calls(peer, runs=args.peer_runs, warmup=0)
    theirs_cached = time_calls(peer_cached, runs=args.runs, warmup=1)

    def no_limit() -> Any:
        parts = RequestParts(instructions=instructions, history=history,
                             turn=[Message(role="user", content=prompt_text)])
        return assemble(parts, counter=counter, budget=Budget())

    everything = time_calls(no_limit, runs=args.runs)
    ratio = theirs.median / mine.median
    ratio_cached = theirs_cached.median / mine.median
    print(f"  ours (cached counts)            median {ms(mine.median):>10}  p95 {ms(mine.p95):>10}"
          f"  cpu {ms(mine.cpu)}")
    print(f"  trim_messages, tiktoken counter median {ms(theirs.median):>10}"
          f"  ({args.peer_runs} runs)  ratio {ratio:,.0f}x")
    print(f"  trim_messages, cached counts    median {ms(theirs_cached.median):>10}"
          f"  ratio {ratio_cached:,.1f}x  (reference)")
    print(f"  ours, whole session (no limit)  median {ms(everything.median):>10}  (reference)")
    time_ok = verdict(mine.median * 1000, GOAL_MS, at_most=True)
    ratio_ok = verdict(ratio, GOAL_RATIO, at_most=False)
    print(f"Goal ≤ {GOAL_MS:.0f} ms: {time_ok}. Goal ≥ {GOAL_RATIO:.0f}x faster than "
          f"trim_messages: {ratio_ok}.")
    return 0 if time_ok == "met" and ratio_ok == "met" else 2


if __name__ == "__main__":
    raise SystemExit(main())
