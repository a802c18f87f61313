"""Finding local model servers: real HTTP servers on 127.0.0.1, and closed ports."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from workbench.core.provider import ProviderConfig
from workbench.engine.discovery import (
    add_local_server,
    discover_local_servers,
    mark_offered,
    offer_due,
    probe,
)
from workbench.engine.providers import ProviderSettings
from workbench.engine.workspace import Workspace


def _server(routes: dict[str, object]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            body = routes.get(self.path)
            if body is None:
                self.send_response(404)
                self.end_headers()
                return
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.fixture
def openai_like() -> Iterator[int]:
    srv = _server({"/v1/models": {"object": "list", "data": [{"id": "gemma-3-270m"}]}})
    yield srv.server_address[1]
    srv.shutdown()


@pytest.fixture
def ollama_tags_only() -> Iterator[int]:
    srv = _server({"/api/tags": {"models": [{"name": "llama3.2:1b"}, {"name": "qwen3:4b"}]}})
    yield srv.server_address[1]
    srv.shutdown()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_servers_that_answer_are_found_with_their_models(
    openai_like: int, ollama_tags_only: int
) -> None:
    dead = closed_port()
    found = discover_local_servers(
        [("Ollama", ollama_tags_only), ("llama.cpp", openai_like), ("LM Studio", dead)]
    )
    assert [(s.label, s.base_url, s.models) for s in found] == [
        ("Ollama", f"http://127.0.0.1:{ollama_tags_only}/v1", ("llama3.2:1b", "qwen3:4b")),
        ("llama.cpp", f"http://127.0.0.1:{openai_like}/v1", ("gemma-3-270m",)),
    ]
    assert found[1].sentence() == (
        f"Found llama.cpp at http://127.0.0.1:{openai_like}/v1 (model gemma-3-270m)."
    )
    assert "2 models" in found[0].sentence()


def test_a_closed_port_or_another_kind_of_server_is_nothing_found() -> None:
    assert probe("LM Studio", closed_port()) is None
    web = _server({"/v1/models": "<html>not an API</html>", "/api/tags": {"ok": True}})
    try:
        assert probe("llama.cpp", web.server_address[1]) is None
    finally:
        web.shutdown()


def test_adding_a_found_server_stores_it_once(workspace: Workspace, openai_like: int) -> None:
    settings = ProviderSettings(workspace.db)
    settings.add(ProviderConfig(name="llama.cpp (local)", kind="openai",
                                base_url="http://127.0.0.1:1/v1", model="x"))
    (server,) = discover_local_servers([("llama.cpp", openai_like)])
    config = add_local_server(settings, server)
    assert config is not None
    # The suggested name was taken by another server: numbered, not overwritten.
    assert config.name == "llama.cpp (local) 2"
    stored = settings.get(config.name)
    assert (stored.kind, stored.base_url, stored.model) == (
        "openai", server.base_url, "gemma-3-270m")
    assert stored.api_key_env is None and stored.api_key_keyring is None
    # The same base URL again: nothing new.
    assert add_local_server(settings, server) is None
    assert len(settings.list()) == 2


def test_the_offer_is_made_once_per_database(workspace: Workspace) -> None:
    assert offer_due(workspace.repo)
    mark_offered(workspace.repo)
    assert not offer_due(workspace.repo)
