"""Import speed of a ChatGPT data export, against convoviz's loader on the same file.

Run as ``.venv/bin/python bench/bench_chatgpt_import.py [--size-mb 100] [--seed 7]
[--rounds 3]``.

It writes a deterministic ChatGPT ``conversations.json`` of about ``--size-mb`` MB into
``bench/.data`` (kept for later runs: the same size and seed give the same bytes), then in
the same run times

* the workbench's import: ``Workspace.import_path(path, count_tokens=False)`` into a
  fresh temporary database, as ``workbench import`` and File → Import run it: parsing,
  walking each message tree, writing sessions, messages and the full-text index, whole
  conversations per transaction. When it returns, the messages are stored and
  searchable (checked with a phrase search); token counts are not filled yet;
* the token-counting pass the CLI and the GUI run after the import
  (``Workspace.count_missing_tokens``), timed on its own; and, for the breakdown, the
  parse alone (``read_conversations``);
* convoviz (the ``convoviz`` package): ``load_collection_from_json`` on the same
  file, in a separate Python 3.12 interpreter, since convoviz needs 3.12. It is looked up
  as ``$CONVOVIZ_PYTHON``, else ``/tmp/convoviz-venv/bin/python``. To make one::

      python3.12 -m venv /tmp/convoviz-venv && /tmp/convoviz-venv/bin/pip install convoviz

The import and convoviz run alternately ``--rounds`` times (a busy machine slows one
round more than another); the script prints each round, the medians in MB/s, and the
ratio of the medians (workbench / convoviz; above 1 is faster). The goal is a ratio
above 1 while the workbench also writes the database. convoviz only builds its models in
memory, so the comparison favours it. When convoviz cannot run, the script says why and
prints the workbench's figures alone.
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
    header,
    prepare_environment,
    remove_database,
)

DEFAULT_CONVOVIZ = Path("/tmp/convoviz-venv/bin/python")

CONVOVIZ_SCRIPT = """
import json, sys, time
from convoviz.io.loaders import load_collection_from_json
started = time.perf_counter()
collection = load_collection_from_json(sys.argv[1])
elapsed = time.perf_counter() - started
print(json.dumps({"seconds": elapsed, "conversations": len(collection.conversations)}))
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
    """One import into a fresh database; with ``count``, the counting pass after it."""
    from workbench.engine.workspace import SearchQuery, Workspace

    remove_database(db)
    result: dict[str, Any] = {}
    with Workspace.open(db) as ws:
        started = time.perf_counter()
        report = ws.import_path(path, count_tokens=False)
        result["import_seconds"] = time.perf_counter() - started
        result["sessions"] = len(report.sessions)
        result["skipped"] = len(report.skipped)
        # Searchable at once: the last conversation's first question finds its session.
        query = SearchQuery(f'"{phrase}"', kinds=("message",), limit=1)
        result["searchable"] = bool(ws.search(query))
        if count:
            started = time.perf_counter()
            for _done, _total in ws.count_missing_tokens():
                pass
            result["count_seconds"] = time.perf_counter() - started
            result["uncounted"] = ws.repo.stats()["uncounted_messages"]
    remove_database(db)
    return result


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
    done = subprocess.run(
        [str(python), "-c", CONVOVIZ_SCRIPT, str(path)],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip()[-500:])
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--size-mb", type=float, default=100.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs of each")
    parser.add_argument("--no-convoviz", action="store_true", help="time the workbench only")
    args = parser.parse_args(argv)

    prepare_environment()
    export = DATA_DIR / f"chatgpt-export-{args.size_mb:g}mb-seed{args.seed}.json"
    if not export.exists():
        print(f"writing {export.name} ...", flush=True)
        make_export(export, args.size_mb, args.seed)
    size_mb = export.stat().st_size / 1_000_000

    python, why = (None, "--no-convoviz") if args.no_convoviz else convoviz_python()
    from workbench.core.tokens import get_counter

    get_counter()  # the vocabulary loads once per process: not part of any timing

    header(f"ChatGPT export import: {export.name} ({size_mb:.1f} MB)")
    parse_seconds, conversations, messages, phrase = time_parse(export)
    ours: list[float] = []
    theirs: list[float] = []
    counted: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="wb-bench-", dir=DATA_DIR) as work:
        db = Path(work) / "bench.db"
        for round_no in range(1, max(1, args.rounds) + 1):
            last = round_no == max(1, args.rounds)
            run = time_import(export, db, phrase, count=last)
            if not run["searchable"]:
                print("  the imported text was NOT found by search right after the import")
            ours.append(run["import_seconds"])
            line = f"  round {round_no}: workbench import {run['import_seconds']:6.2f} s"
            if last:
                counted = run
            if python is not None:
                try:
                    theirs.append(time_convoviz(python, export)["seconds"])
                except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
                    python, why = None, f"failed: {exc}"
                else:
                    line += (
                        f", convoviz load {theirs[-1]:6.2f} s,"
                        f" ratio {theirs[-1] / ours[-1]:.2f}"
                    )
            print(line, flush=True)

    import_s = statistics.median(ours)
    print(
        f"  {conversations:,} conversations ({counted['sessions']:,} sessions stored, "
        f"{counted['skipped']} skipped), {messages:,} messages"
    )
    print(f"  workbench parse only : {parse_seconds:7.2f} s  {size_mb / parse_seconds:7.1f} MB/s")
    print(
        f"  workbench import     : {import_s:7.2f} s  {size_mb / import_s:7.1f} MB/s"
        f"  (median of {len(ours)}; stored and searchable when it returns)"
    )
    count_s = counted["count_seconds"]
    print(
        f"  token counting pass  : {count_s:7.2f} s  {size_mb / count_s:7.1f} MB/s"
        f"  (after the import; {counted['uncounted']} messages left uncounted)"
    )
    both = counted["import_seconds"] + count_s
    print(f"  import + counting    : {both:7.2f} s  {size_mb / both:7.1f} MB/s  (last round)")
    if python is None or not theirs:
        print(f"  convoviz             : not run: {why}")
        return 0
    their_s = statistics.median(theirs)
    print(
        f"  convoviz load        : {their_s:7.2f} s  {size_mb / their_s:7.1f} MB/s "
        f"(median of {len(theirs)})"
    )
    ratio = their_s / import_s
    verdict = "met" if ratio > 1 else "MISSED"
    print(f"  ratio import / convoviz load: {ratio:.2f} (medians; goal > 1: {verdict})")
    print(f"  ratio parse  / convoviz load: {their_s / parse_seconds:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
