"""Throughput of the workbench's message token counting against raw tiktoken.

Run as ``.venv/bin/python bench/bench_tokens.py [--messages N] [--seed S]``. It builds a
deterministic set of chat messages (prose, code, some names and tool calls) from a
generated word list, then in the same run times

* raw tiktoken: ``encoding.encode_ordinary_batch(contents)`` over the message contents;
* raw tiktoken, stricter: a plain ``encode_ordinary`` loop over the same contents;
* the workbench: ``TokenCounter.count_messages(messages)`` on the same messages, with
  nothing cached beforehand (a first counting).

and prints the rates and the ratio of ours to ``encode_ordinary_batch``; the goal is a
ratio of at least 0.8. The vocabulary is loaded (offline) into a scratch
``WORKBENCH_HOME`` unless one is set. The exit status is 2 when the goal is missed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import string
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.core.conversation import Message  # noqa: E402
from workbench.core.tokens import clear_counters, get_counter  # noqa: E402

GOAL = 0.8

CODE_LINES = [
    "def {a}_{b}(self, {c}: int) -> list[str]:",
    "    return [{a}.{b}() for {c} in range({n})]",
    "    if {a} is None or {b} > {n}:",
    '        raise ValueError(f"bad {a}: {{{b}!r}}")',
    "for ({a}, {b}) in zip({c}s, {a}s):",
    '    {a}_{b} = {{"{c}": {n}, "{a}": [{n}, {n}]}}',
    "const {a} = await fetch(`/api/{b}/${{{c}}}`);",
    "SELECT {a}, COUNT(*) FROM {b} WHERE {c} > {n} GROUP BY {a};",
    "    # {a} {b} {c}",
    "class {A}{B}({C}):",
]


def make_words(rng: random.Random, count: int) -> list[str]:
    """Pronounceable pseudo-words with a realistic spread of lengths."""
    consonants = "bcdfghjklmnprstvwz"
    vowels = "aeiou"
    words: set[str] = set()
    while len(words) < count:
        syllables = rng.choice([1, 1, 2, 2, 2, 3, 3, 4])
        words.add(
            "".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(syllables))
            + rng.choice(["", "", "", "s", "n", "r", "ed", "ing"])
        )
    return sorted(words)


def make_prose(rng: random.Random, stream: list[str]) -> str:
    """Sentences cut from a pre-drawn stream of Zipf-distributed words.

    Slicing one long stream at random offsets keeps the word frequencies of natural text
    while costing a couple of random draws per sentence instead of one per word.
    """
    sentences = []
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3, 4, 7])):
        length = rng.randint(3, 18)
        start = rng.randrange(len(stream) - length)
        chosen = stream[start : start + length]
        chosen[0] = chosen[0].capitalize()
        if rng.random() < 0.2:
            chosen.insert(rng.randrange(length), str(rng.randint(0, 99999)))
        sentences.append(" ".join(chosen) + rng.choice([".", ".", ".", "?", "!", ":"]))
    text = " ".join(sentences)
    if rng.random() < 0.15:
        text = "\n\n".join([text, "- " + "\n- ".join(rng.sample(stream[:5000], 4))])
    return text


def make_code(rng: random.Random, words: list[str]) -> str:
    lines = []
    for _ in range(rng.randint(2, 14)):
        a, b, c = rng.sample(words, 3)
        lines.append(
            rng.choice(CODE_LINES).format(
                a=a,
                b=b,
                c=c,
                A=a.capitalize(),
                B=b.capitalize(),
                C=c.capitalize(),
                n=rng.randint(0, 4096),
            )
        )
    return "Here is the code:\n```python\n" + "\n".join(lines) + "\n```"


def make_messages(count: int, seed: int) -> list[Message]:
    """Deterministic chat messages: mostly prose, some code, a few tool exchanges."""
    rng = random.Random(seed)
    words = make_words(rng, 5000)
    # Zipf-like word frequencies, as in natural text.
    cum_weights = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(words))))
    stream = rng.choices(words, cum_weights=cum_weights, k=1_000_000)
    messages: list[Message] = []
    for index in range(count):
        roll = rng.random()
        if index % 400 == 0:
            messages.append(Message(role="system", content=make_prose(rng, stream)))
        elif roll < 0.05:
            call_id = "call_" + "".join(rng.choices(string.ascii_letters + string.digits, k=24))
            arguments = json.dumps({"query": " ".join(rng.sample(words, 3)), "limit": 10})
            messages.append(
                Message(
                    role="assistant",
                    content="",
                    tool_calls=[
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": "search_notes", "arguments": arguments},
                        }
                    ],
                )
            )
            messages.append(
                Message(role="tool", content=make_prose(rng, stream), tool_call_id=call_id)
            )
        elif roll < 0.25:
            messages.append(Message(role="assistant", content=make_code(rng, words)))
        elif roll < 0.6:
            messages.append(
                Message(
                    role="user",
                    content=make_prose(rng, stream),
                    name="ana" if roll < 0.3 else None,
                )
            )
        else:
            messages.append(Message(role="assistant", content=make_prose(rng, stream)))
    return messages[:count]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=150_000)
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--encoding", default="o200k_base")
    args = parser.parse_args(argv)

    scratch = None
    if not os.environ.get("WORKBENCH_HOME"):
        scratch = tempfile.TemporaryDirectory(prefix="bench-tokens-")
        os.environ["WORKBENCH_HOME"] = scratch.name
    clear_counters()

    started = time.perf_counter()
    counter = get_counter(args.encoding)
    load_s = time.perf_counter() - started
    encoding = counter.encoding
    if encoding is None:
        print("the encoding could not be loaded: only estimates are available", file=sys.stderr)
        return 1

    started = time.perf_counter()
    messages = make_messages(args.messages, args.seed)
    contents = [m.content for m in messages]
    gen_s = time.perf_counter() - started
    chars = sum(len(c) for c in contents)
    print(
        f"{len(messages):,} messages, {chars / 1e6:.1f} M characters "
        f"(generated in {gen_s:.1f} s); {counter.encoding_name} loaded in {load_s:.2f} s"
    )

    # Warm the thread machinery and the encoder's caches on a small slice, then time
    # each contender once over the whole set (the set is large enough to be stable).
    encoding.encode_ordinary_batch(contents[:2000])
    counter.count_messages(messages[:2000])

    started = time.perf_counter()
    raw = encoding.encode_ordinary_batch(contents)
    raw_s = time.perf_counter() - started
    raw_tokens = sum(len(tokens) for tokens in raw)
    del raw

    # A stricter baseline: encode_ordinary_batch schedules one future per text, which
    # costs about as much as encoding a short message, so a plain loop is faster.
    encode = encoding.encode_ordinary
    started = time.perf_counter()
    loop = [encode(text) for text in contents]
    loop_s = time.perf_counter() - started
    del loop

    started = time.perf_counter()
    ours = counter.count_messages(messages)
    ours_s = time.perf_counter() - started
    our_tokens = sum(ours)

    raw_rate = len(contents) / raw_s
    our_rate = len(messages) / ours_s
    ratio = our_rate / raw_rate
    print(
        f"raw tiktoken encode_ordinary_batch: {raw_s:.2f} s, {raw_rate:,.0f} msg/s, "
        f"{raw_tokens / raw_s:,.0f} tokens/s ({raw_tokens:,} content tokens)"
    )
    print(
        f"raw tiktoken encode_ordinary loop: {loop_s:.2f} s, {len(contents) / loop_s:,.0f} msg/s "
        f"(count_messages runs at {loop_s / ours_s:.2f}x its speed)"
    )
    print(
        f"count_messages: {ours_s:.2f} s, {our_rate:,.0f} msg/s, "
        f"{our_tokens / ours_s:,.0f} tokens/s ({our_tokens:,} tokens with message overhead)"
    )
    print(
        f"first counting: {our_rate:,.0f} msg/s, raw tiktoken: {raw_rate:,.0f} msg/s, "
        f"ratio {ratio:.2f} (goal ≥ {GOAL})"
    )
    if scratch is not None:
        clear_counters()
        scratch.cleanup()
    return 0 if ratio >= GOAL else 2


if __name__ == "__main__":
    sys.exit(main())
