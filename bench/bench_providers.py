"""Provider speed: our HTTP client against the official ``openai`` SDK, and stream throughput.

1. **Latency against a real server.** A llama.cpp server (installed and started the way
   the end-to-end tests do it, from ``tests/e2e/realllm.py``) answers the same streamed
   chat request, greedy and with a fixed ``max_tokens``, alternately to our
   ``OpenAICompatible`` (in this process) and to the official SDK (in a separate virtual
   environment under the e2e cache, outside the project, driven over a pipe so that its
   timings are taken inside its own process). Printed: median time to first token and
   total time of each, the ratios ours / SDK, and the CPU time each client spent.
2. **Events per second.** The protocol server of the provider tests runs in a child
   process and streams a long reply (``--events`` deltas); our client reads it as OpenAI
   chunks and as Anthropic events, the SDK as OpenAI chunks. The bare SSE decoder on the
   same bytes in memory is printed for reference.

Goal: our overhead at most 1.1x the SDK's (time to first token and total time, as the
median of each round's ratio; the machine's load moves the server's speed between rounds).
Nothing here fails on time; the figures are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from _common import REPO_DIR, header, load_note, ms, verdict

sys.path.insert(0, str(REPO_DIR / "tests" / "e2e"))
sys.path.insert(0, str(REPO_DIR / "tests" / "providers"))

import realllm  # noqa: E402

from workbench.core.conversation import Message  # noqa: E402
from workbench.core.provider import ChatRequest, TextDelta  # noqa: E402
from workbench.providers.anthropic import Anthropic  # noqa: E402
from workbench.providers.openai import OpenAICompatible  # noqa: E402
from workbench.providers.sse import SSEDecoder  # noqa: E402

GOAL = 1.1
SDK_PACKAGE = "openai"

# Runs in the SDK's environment: one JSON command per line in, one JSON result per line out.
SDK_WORKER = textwrap.dedent("""
    import json, sys, time
    import openai
    clients = {}
    print(json.dumps({"version": openai.__version__}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        url = command["base_url"]
        if url not in clients:
            clients[url] = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
        client = clients[url]
        cpu = time.thread_time()
        started = time.perf_counter()
        first = None
        pieces = []
        for chunk in client.chat.completions.create(**command["body"]):
            if chunk.choices and chunk.choices[0].delta.content:
                if first is None:
                    first = time.perf_counter()
                pieces.append(chunk.choices[0].delta.content)
        ended = time.perf_counter()
        print(json.dumps({
            "ttft": (first or ended) - started, "total": ended - started,
            "cpu": time.thread_time() - cpu, "events": len(pieces), "text": "".join(pieces),
        }), flush=True)
""")

# Runs the protocol server in its own process, so that it does not share our GIL.
SERVER_WORKER = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    from protocol_server import ProtocolServer
    server = ProtocolServer(model="bench")
    server.reply_words = [f" w{i}" for i in range(int(sys.argv[2]))]
    server.batch = 64
    server.start()
    print(server.url, flush=True)
    sys.stdin.read()
    server.stop()
""")


def sdk_python(home: Path) -> Path:
    """A virtual environment holding the official SDK (created on first use)."""
    venv = home / "openai-sdk"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    probe = subprocess.run([str(python), "-c", "import openai"], capture_output=True)
    if probe.returncode != 0:
        print(f"installing the {SDK_PACKAGE} SDK into {venv} …", flush=True)
        done = subprocess.run([str(python), "-m", "pip", "install", "-q",
                               "--disable-pip-version-check", SDK_PACKAGE],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"pip install {SDK_PACKAGE} failed:\n{done.stderr}")
    return python


class SdkWorker:
    """The SDK in its own process, answering one timed request per command."""

    def __init__(self, python: Path) -> None:
        self.process = subprocess.Popen([str(python), "-c", SDK_WORKER], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        self.version = self._read()["version"]

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the SDK worker stopped")
        return dict(json.loads(line))

    def run(self, base_url: str, body: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"base_url": base_url, "body": body}) + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=30)


def ours(provider: Any, request: ChatRequest) -> dict[str, Any]:
    """One streamed request through our client, timed like the SDK worker times its own."""
    cpu = time.thread_time()
    started = time.perf_counter()
    first = None
    pieces: list[str] = []
    for event in provider.stream(request):
        if isinstance(event, TextDelta):
            if first is None:
                first = time.perf_counter()
            pieces.append(event.text)
    ended = time.perf_counter()
    return {"ttft": (first or ended) - started, "total": ended - started,
            "cpu": time.thread_time() - cpu, "events": len(pieces), "text": "".join(pieces)}


def median_of(results: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in results)


def latency(sdk: SdkWorker, rounds: int, max_tokens: int) -> None:
    header(f"Time to first token and total time against llama.cpp "
           f"({rounds} rounds, {max_tokens} tokens, greedy)")
    install = realllm.ensure_installed()
    # One server thread leaves the other core to the clients, so they do not slow it.
    server = realllm.start_server(install, ctx=2048, threads=1, n_predict=max_tokens)
    try:
        provider = OpenAICompatible(server.url, server.alias)
        request = ChatRequest(
            [Message("system", "You are a helpful assistant."),
             Message("user", "Write a short poem about the sea.")],
            max_tokens=max_tokens, temperature=0.0,
        )
        body = provider.build_payload(request)
        base_url = provider.base_url
        ours(provider, request)  # warm both clients and the server's prompt cache
        sdk.run(base_url, body)
        mine: list[dict[str, Any]] = []
        theirs: list[dict[str, Any]] = []
        for index in range(rounds):
            # Alternate who goes first, so drift in the server's speed hits both alike.
            if index % 2 == 0:
                mine.append(ours(provider, request))
                theirs.append(sdk.run(base_url, body))
            else:
                theirs.append(sdk.run(base_url, body))
                mine.append(ours(provider, request))
        provider.close()
    finally:
        server.stop()
    same = {r["text"] for r in mine} == {r["text"] for r in theirs}
    print(f"  same reply text from both clients: {same}")
    print(f"  {'':24}{'ours':>12}{'SDK':>12}{'ours/SDK':>10}{'paired':>9}")
    for key, label in (("ttft", "time to first token"), ("total", "total time"),
                       ("cpu", "client CPU time")):
        a, b = median_of(mine, key), median_of(theirs, key)
        ratio = a / b if b else float("inf")
        # Each round's two requests ran back to back: the median of their ratios is less
        # sensitive to the server slowing down over the run than the ratio of medians.
        paired = statistics.median(m[key] / t[key] for m, t in zip(mine, theirs, strict=True)
                                   if t[key])
        note = f"  goal ≤ {GOAL}x: {verdict(paired, GOAL, at_most=True)}" if key != "cpu" else ""
        print(f"  {label:<24}{ms(a):>12}{ms(b):>12}{ratio:>9.2f}x{paired:>8.2f}x{note}")


def throughput(sdk: SdkWorker, events: int) -> None:
    header(f"Events per second on a long stream ({events:,} deltas from the protocol server)")
    worker = subprocess.Popen(
        [sys.executable, "-c", SERVER_WORKER, str(REPO_DIR / "tests" / "providers"),
         str(events)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert worker.stdout is not None
        url = worker.stdout.readline().strip()
        # max_tokens past the reply's length: the Anthropic API requires a value.
        request = ChatRequest([Message("user", "Go on.")], max_tokens=events + 1)
        rows = []
        openai_provider = OpenAICompatible(url, "bench")
        anthropic_provider = Anthropic(url, "bench")
        body = openai_provider.build_payload(request)
        for label, run in (
            ("ours, OpenAI chunks", lambda: ours(openai_provider, request)),
            ("ours, Anthropic events", lambda: ours(anthropic_provider, request)),
            (f"openai SDK {sdk.version}", lambda: sdk.run(openai_provider.base_url, body)),
        ):
            run()
            results = [run() for _ in range(3)]
            best = min(results, key=lambda r: r["total"])
            assert best["events"] == events, (label, best["events"])
            rows.append((label, best["events"] / best["total"], best["total"]))
        for label, rate, seconds in rows:
            print(f"  {label:<28}{rate:>12,.0f} events/s  ({ms(seconds)})")
        print(f"  ours / SDK (OpenAI chunks): {rows[0][1] / rows[2][1]:.2f}x the SDK's rate")
        # The decoder alone, on the bytes of an equivalent stream held in memory.
        chunk = b'data: {"choices":[{"index":0,"delta":{"content":" w1"}}]}\n\n'
        blob = chunk * events
        decoder = SSEDecoder()
        started = time.perf_counter()
        count = 0
        for offset in range(0, len(blob), 16384):
            count += len(decoder.feed(blob[offset : offset + 16384]))
        elapsed = time.perf_counter() - started
        print(f"  SSE decoder alone (in memory){count / elapsed:>10,.0f} events/s")
        openai_provider.close()
        anthropic_provider.close()
    finally:
        if worker.stdin is not None:
            worker.stdin.close()
        worker.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="timed requests per client")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--events", type=int, default=50_000, help="deltas in the long stream")
    args = parser.parse_args()
    print(f"bench_providers: {load_note()}; Python {sys.version.split()[0]}, "
          f"pid {os.getpid()}")
    sdk = SdkWorker(sdk_python(realllm.cache_home()))
    try:
        latency(sdk, args.rounds, args.max_tokens)
        throughput(sdk, args.events)
    finally:
        sdk.close()


if __name__ == "__main__":
    main()
