"""Import speed of a ChatGPT data export, against convoviz's loader on the same file.

Run as ``.venv/bin/python bench/bench_chatgpt_import.py [--size-mb 100] [--seed 7]
[--rounds 3] [--code PATH]``.

It writes a deterministic ChatGPT ``conversations.json`` of about ``--size-mb`` MB into
``bench/.data`` (kept for later runs: the same size and seed give the same bytes), then in
the same run times, in alternating rounds (a busy machine slows one round more than
another; the medians are compared):

* the whole ``workbench import`` command, a process of its own (interpreter start,
  imports, the token vocabulary, parsing, walking each message tree, counting every
  message's tokens, writing sessions, messages, counts and the full-text index) into a
  fresh database. When it returns, every message is stored, searchable and counted
  (checked: a phrase search finds the last conversation, and no message lacks a count);
* convoviz's whole process (the ``convoviz`` package: interpreter start, its imports and
  ``load_collection_from_json`` on the same file, which only builds models in memory),
  in a separate Python 3.12 interpreter since convoviz needs 3.12, and the time of the
  load alone as convoviz's script measures it. It is looked up as ``$CONVOVIZ_PYTHON``,
  else ``/tmp/convoviz-venv/bin/python``. To make one::

      python3.12 -m venv /tmp/convoviz-venv && /tmp/convoviz-venv/bin/pip install convoviz

* inside this process: ``Workspace.import_path(path)`` (counting while importing, as the
  command does), and for the breakdown the parse alone (``read_conversations``) and, in
  the last round, the import without counts (``count_tokens=False``) followed by the
  counting pass a database written by an older version gets
  (``Workspace.count_missing_tokens``).

The goal: the whole command faster than convoviz's whole process (ratio above 1), the
database searchable and every count filled when it returns. ``--code PATH`` also runs
``workbench import`` of another checkout (for instance the main branch) in each round,
to compare before and after in the same run. When convoviz cannot run, the script says
why and prints the workbench's figures alone.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    DATA_DIR,
    REPO_DIR,
    header,
    load_note,
    prepare_environment,
    remove_database,
)

DEFAULT_CONVOVIZ = Path("/tmp/convoviz-venv/bin/python")

CONVOVIZ_SCRIPT = """
import json, sys, time
started = time.perf_counter()
from convoviz.io.loaders import load_collection_from_json
imported = time.perf_counter() - started
started = time.perf_counter()
collection = load_collection_from_json(sys.argv[1])
elapsed = time.perf_counter() - started
print(json.dumps({"seconds": elapsed, "import_seconds": imported,
                  "conversations": len(collection.conversations)}))
"""


# --------------------------------------------------------------------------- the export


class ExportWriter:
    """Builds ChatGPT export entries shaped like real ones (metadata and all)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        consonants, vowels = "bcdfghjklmnprstvwz", "aeiou"
        words: set[str] = set()
        while len(words) < 3000:
            syllables = self.rng.choice([1, 1, 2, 2, 2, 3, 3, 4])
            words.add(
                "".join(
                    self.rng.choice(consonants) + self.rng.choice(vowels) for _ in range(syllables)
                )
            )
        self.words = sorted(words)
        self.serial = 0
        self.clock = 1_700_000_000.0

    def uuid(self) -> str:
        self.serial += 1
        value = self.rng.getrandbits(128) ^ self.serial
        text = f"{value:032x}"
        return f"{text[:8]}-{text[8:12]}-4{text[13:16]}-8{text[17:20]}-{text[20:32]}"

    def sentence(self, low: int, high: int) -> str:
        words = self.rng.choices(self.words, k=self.rng.randint(low, high))
        return " ".join(words).capitalize() + self.rng.choice([".", ".", ".", "?", "!"])

    def paragraph(self, sentences: int) -> str:
        return " ".join(self.sentence(5, 18) for _ in range(sentences))

    def reply(self) -> str:
        pieces = [self.paragraph(self.rng.randint(2, 6)) for _ in range(self.rng.randint(1, 4))]
        if self.rng.random() < 0.3:
            code = "\n".join(
                f"    {self.rng.choice(self.words)} = {self.rng.choice(self.words)}({i})"
                for i in range(self.rng.randint(3, 12))
            )
            pieces.insert(1, f"```python\ndef {self.rng.choice(self.words)}():\n{code}\n```")
        if self.rng.random() < 0.2:
            pieces.append(
                "\n".join(f"- {self.sentence(3, 9)}" for _ in range(self.rng.randint(2, 6)))
            )
        return "\n\n".join(pieces)

    def node(
        self,
        node_id: str,
        parent: str | None,
        role: str,
        content: dict[str, Any],
        *,
        hidden: bool = False,
        recipient: str = "all",
        author_name: str | None = None,
    ) -> dict[str, Any]:
        self.clock += self.rng.uniform(2, 90)
        metadata: dict[str, Any] = {"request_id": f"{self.rng.getrandbits(64):016x}-IAD"}
        if hidden:
            metadata["is_visually_hidden_from_conversation"] = True
        if role == "assistant":
            metadata.update(
                {
                    "finish_details": {"type": "stop", "stop_tokens": [200002]},
                    "citations": [],
                    "content_references": [],
                    "gizmo_id": None,
                    "message_type": "next",
                    "model_slug": "gpt-4o",
                    "default_model_slug": "gpt-4o",
                    "parent_id": parent,
                    "is_complete": True,
                    "timestamp_": "absolute",
                }
            )
        else:
            metadata.update({"timestamp_": "absolute", "message_type": None})
        return {
            "id": node_id,
            "message": {
                "id": node_id,
                "author": {"role": role, "name": author_name, "metadata": {}},
                "create_time": None if hidden else round(self.clock, 6),
                "update_time": None,
                "content": content,
                "status": "finished_successfully",
                "end_turn": True if role == "assistant" else None,
                "weight": 0.0 if hidden else 1.0,
                "metadata": metadata,
                "recipient": recipient,
                "channel": None,
            },
            "parent": parent,
            "children": [],
        }

    def conversation(self) -> dict[str, Any]:
        conv_id = self.uuid()
        root = self.uuid()
        mapping: dict[str, Any] = {
            root: {"id": root, "message": None, "parent": None, "children": []}
        }
        started = self.clock

        def add(node: dict[str, Any]) -> str:
            mapping[node["id"]] = node
            parent = node["parent"]
            if parent is not None:
                mapping[parent]["children"].append(node["id"])
            return str(node["id"])

        tip = add(
            self.node(
                self.uuid(), root, "system", {"content_type": "text", "parts": [""]}, hidden=True
            )
        )
        turns = max(1, int(self.rng.expovariate(1 / 9)))
        for turn in range(turns):
            question = self.paragraph(self.rng.randint(1, 3))
            tip = add(
                self.node(self.uuid(), tip, "user", {"content_type": "text", "parts": [question]})
            )
            if self.rng.random() < 0.08:
                # The code interpreter: code to python, its output, then the answer.
                code = "\n".join(f"print({self.rng.choice(self.words)!r})" for _ in range(4))
                tip = add(
                    self.node(
                        self.uuid(),
                        tip,
                        "assistant",
                        {"content_type": "code", "language": "unknown", "text": code},
                        recipient="python",
                    )
                )
                tip = add(
                    self.node(
                        self.uuid(),
                        tip,
                        "tool",
                        {"content_type": "execution_output", "text": self.sentence(3, 12)},
                        author_name="python",
                    )
                )
            answer_parent = tip
            tip = add(
                self.node(
                    self.uuid(), tip, "assistant", {"content_type": "text", "parts": [self.reply()]}
                )
            )
            if turn == turns - 1 and self.rng.random() < 0.15:
                # A regenerated answer: the session keeps the later one.
                tip = add(
                    self.node(
                        self.uuid(),
                        answer_parent,
                        "assistant",
                        {"content_type": "text", "parts": [self.reply()]},
                    )
                )
        return {
            "title": self.sentence(2, 6).rstrip(".?!"),
            "create_time": round(started, 6),
            "update_time": round(self.clock, 6),
            "mapping": mapping,
            "moderation_results": [],
            "current_node": tip,
            "plugin_ids": None,
            "conversation_id": conv_id,
            "conversation_template_id": None,
            "gizmo_id": None,
            "is_archived": False,
            "safe_urls": [],
            "default_model_slug": "gpt-4o",
            "id": conv_id,
        }


def make_export(path: Path, size_mb: float, seed: int) -> None:
    """Write a deterministic ``conversations.json`` of about ``size_mb`` MB to ``path``."""
    writer = ExportWriter(seed)
    target = int(size_mb * 1_000_000)
    written = 0
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        handle.write("[")
        first = True
        while written < target:
            text = json.dumps(writer.conversation(), ensure_ascii=False)
            if not first:
                handle.write(",\n")
            handle.write(text)
            written += len(text) + 2
            first = False
        handle.write("]\n")
    os.replace(tmp, path)


# --------------------------------------------------------------------------- timing


def time_parse(path: Path) -> tuple[float, int, int, str]:
    """Seconds to parse the export alone, conversations, messages, and a phrase to search."""
    from workbench.core.conversation import Conversation
    from workbench.formats import read_conversations

    started = time.perf_counter()
    conversations = messages = 0
    last_text = ""
    for item in read_conversations(path, "chatgpt"):
        if isinstance(item, Conversation):
            conversations += 1
            messages += len(item.messages)
            last_text = next((m.content for m in item.messages if m.role == "user"), last_text)
    seconds = time.perf_counter() - started
    return seconds, conversations, messages, " ".join(last_text.split()[:6])


def time_import(path: Path, db: Path, phrase: str, *, count: bool) -> dict[str, Any]:
    """One import into a fresh database in this process. With ``count`` the messages are
    counted while importing; else they are stored without counts and the counting pass
    follows, timed on its own."""
    from workbench.engine.workspace import SearchQuery, Workspace

    remove_database(db)
    result: dict[str, Any] = {}
    with Workspace.open(db) as ws:
        started = time.perf_counter()
        report = ws.import_path(path, count_tokens=count)
        result["import_seconds"] = time.perf_counter() - started
        result["sessions"] = len(report.sessions)
        result["skipped"] = len(report.skipped)
        # Searchable at once: the last conversation's first question finds its session.
        query = SearchQuery(f'"{phrase}"', kinds=("message",), limit=1)
        result["searchable"] = bool(ws.search(query))
        if not count:
            started = time.perf_counter()
            for _done, _total in ws.count_missing_tokens():
                pass
            result["count_seconds"] = time.perf_counter() - started
        result["uncounted"] = ws.repo.stats()["uncounted_messages"]
    remove_database(db)
    return result


def time_command(code: Path, path: Path, db: Path, phrase: str | None) -> dict[str, Any]:
    """``workbench import`` of the checkout at ``code``, a process of its own, into a
    fresh database; then (not timed, unless ``phrase`` is None) whether it is
    searchable and fully counted."""
    from workbench.engine.workspace import SearchQuery, Workspace

    remove_database(db)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "workbench", "import", "--db", str(db), str(path)],
        cwd=code,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip()[-500:])
    if phrase is None:  # another checkout's database, maybe of another schema
        remove_database(db)
        return {"seconds": seconds}
    with Workspace.open(db) as ws:
        query = SearchQuery(f'"{phrase}"', kinds=("message",), limit=1)
        searchable = bool(ws.search(query))
        uncounted = ws.repo.stats()["uncounted_messages"]
    remove_database(db)
    return {"seconds": seconds, "searchable": searchable, "uncounted": uncounted}


def convoviz_python() -> tuple[Path | None, str]:
    """The interpreter that has convoviz, or why there is none."""
    candidate = Path(os.environ.get("CONVOVIZ_PYTHON", str(DEFAULT_CONVOVIZ)))
    if not candidate.exists():
        return None, (
            f"no convoviz interpreter at {candidate} (convoviz needs Python 3.12: "
            "python3.12 -m venv /tmp/convoviz-venv && /tmp/convoviz-venv/bin/pip install "
            "convoviz, or set CONVOVIZ_PYTHON)"
        )
    probe = subprocess.run(
        [str(candidate), "-c", "import convoviz.io.loaders"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if probe.returncode != 0:
        return None, f"{candidate} cannot import convoviz: {probe.stderr.strip()[-300:]}"
    return candidate, ""


def time_convoviz(python: Path, path: Path) -> dict[str, Any]:
    """convoviz's whole process (``process_seconds``) and its load alone (``seconds``)."""
    started = time.perf_counter()
    done = subprocess.run(
        [str(python), "-c", CONVOVIZ_SCRIPT, str(path)],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    process_seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip()[-500:])
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_seconds"] = process_seconds
    return result


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--size-mb", type=float, default=100.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs of each")
    parser.add_argument("--no-convoviz", action="store_true", help="time the workbench only")
    parser.add_argument("--code", type=Path, default=None,
                        help="also time `workbench import` of this checkout")
    args = parser.parse_args(argv)

    prepare_environment()
    export = DATA_DIR / f"chatgpt-export-{args.size_mb:g}mb-seed{args.seed}.json"
    if not export.exists():
        print(f"writing {export.name} ...", flush=True)
        make_export(export, args.size_mb, args.seed)
    size_mb = export.stat().st_size / 1_000_000

    python, why = (None, "--no-convoviz") if args.no_convoviz else convoviz_python()
    from workbench.core.tokens import get_counter

    get_counter()  # the vocabulary loads once per process: not part of the in-process times

    header(f"ChatGPT export import: {export.name} ({size_mb:.1f} MB)")
    print(f"  {load_note()}")
    parse_seconds, conversations, messages, phrase = time_parse(export)
    rounds = max(1, args.rounds)
    command: list[float] = []
    other: list[float] = []
    inside: list[float] = []
    their_process: list[float] = []
    their_load: list[float] = []
    loads: list[float] = []
    last: dict[str, Any] = {}
    split: dict[str, Any] = {}
    problems: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="wb-bench-", dir=DATA_DIR) as work:
        db = Path(work) / "bench.db"
        for round_no in range(1, rounds + 1):
            loads.append(os.getloadavg()[0])
            run = time_command(REPO_DIR, export, db, phrase)
            command.append(run["seconds"])
            if not run["searchable"]:
                problems.add("the imported text was NOT found by search after the command")
            if run["uncounted"]:
                problems.add(f"{run['uncounted']} messages had NO count after the command")
            line = f"  round {round_no}: workbench import command {run['seconds']:6.2f} s"
            if args.code is not None:
                other.append(time_command(args.code.resolve(), export, db, None)["seconds"])
                line += f" (--code: {other[-1]:.2f} s)"
            if python is not None:
                try:
                    theirs = time_convoviz(python, export)
                except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
                    python, why = None, f"failed: {exc}"
                else:
                    their_process.append(theirs["process_seconds"])
                    their_load.append(theirs["seconds"])
                    line += (
                        f", convoviz process {their_process[-1]:6.2f} s"
                        f" (load {their_load[-1]:.2f} s), ratio "
                        f"{their_process[-1] / command[-1]:.2f}"
                    )
            last = time_import(export, db, phrase, count=True)
            inside.append(last["import_seconds"])
            line += f"; in-process import {inside[-1]:.2f} s"
            print(line + f"  [load {loads[-1]:.1f}]", flush=True)
        split = time_import(export, db, phrase, count=False)

    for problem in sorted(problems):
        print(f"  {problem}")
    print(
        f"  {conversations:,} conversations ({last['sessions']:,} sessions stored, "
        f"{last['skipped']} skipped), {messages:,} messages"
    )
    median_note = f"median of {rounds}; load {min(loads):.1f}-{max(loads):.1f}"
    cmd_s = _median(command)
    print(
        f"  workbench import command: {cmd_s:7.2f} s  {size_mb / cmd_s:6.1f} MB/s"
        f"  (whole process, every message counted; {median_note})"
    )
    if other:
        print(f"  --code {args.code}: {_median(other):7.2f} s  (whole process)")
    in_s = _median(inside)
    print(
        f"  in-process import       : {in_s:7.2f} s  {size_mb / in_s:6.1f} MB/s"
        f"  (counting while importing; {last['uncounted']} messages left uncounted)"
    )
    print(
        f"  parse only              : {parse_seconds:7.2f} s"
        f"  {size_mb / parse_seconds:6.1f} MB/s"
    )
    both = split["import_seconds"] + split["count_seconds"]
    print(
        f"  without counts, then the counting pass: {split['import_seconds']:.2f} s +"
        f" {split['count_seconds']:.2f} s = {both:.2f} s (last round; the pass is what a"
        " database written before gets)"
    )
    if python is None or not their_process:
        print(f"  convoviz                : not run: {why}")
        return 0
    their_s = _median(their_process)
    print(
        f"  convoviz process        : {their_s:7.2f} s  {size_mb / their_s:6.1f} MB/s"
        f"  (load alone {_median(their_load):.2f} s, {size_mb / _median(their_load):.1f} MB/s)"
    )
    ratio = their_s / cmd_s
    verdict = "met" if ratio > 1 else "MISSED"
    print(f"  ratio command / convoviz process: {ratio:.2f} (medians; goal > 1: {verdict})")
    print(
        f"  ratio in-process import / convoviz load: {_median(their_load) / in_s:.2f};"
        f" parse / convoviz load: {_median(their_load) / parse_seconds:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
