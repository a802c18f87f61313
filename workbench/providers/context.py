"""How many tokens a model can take: asked from the server, else known, else the user's.

Servers that say it:

- llama.cpp ``GET /props``: ``default_generation_settings.n_ctx`` (per slot), older
  builds a top-level ``n_ctx``;
- llama.cpp (and some others) ``GET /v1/models``: ``data[i].meta.n_ctx`` for the model.

The training context (``n_ctx_train``) is deliberately not used: a server is often run
with a smaller window than the model was trained for, and the server's is the one that
bounds a request.

For hosted APIs that do not say, :data:`KNOWN_CONTEXT_WINDOWS` maps model name prefixes
to published sizes; :func:`known_context_window` picks the longest matching prefix.
"""

from __future__ import annotations

import re
from typing import Any

# Published context windows (tokens) by model-name prefix; the longest prefix wins.
KNOWN_CONTEXT_WINDOWS: dict[str, int] = {
    # OpenAI
    "gpt-3.5-turbo": 16_385,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-4-turbo": 128_000,
    "gpt-4-1106": 128_000,
    "gpt-4-0125": 128_000,
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.5": 128_000,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    # Anthropic
    "claude-2": 100_000,
    "claude-3": 200_000,
    "claude-opus-4": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-haiku-4": 200_000,
    # Open models under their usual server names
    "llama3": 8_192,
    "llama-3": 8_192,
    "llama3.1": 131_072,
    "llama-3.1": 131_072,
    "llama3.2": 131_072,
    "llama-3.2": 131_072,
    "llama3.3": 131_072,
    "llama-3.3": 131_072,
    "mistral": 32_768,
    "mixtral": 32_768,
    "qwen2.5": 32_768,
    "qwen3": 32_768,
    "gemma2": 8_192,
    "gemma-2": 8_192,
    "gemma3": 131_072,
    "gemma-3": 131_072,
    "gemma-3-270m": 32_768,
    "gemma3:270m": 32_768,
    "phi3": 4_096,
    "phi-3": 4_096,
    "phi4": 16_384,
    "deepseek-chat": 65_536,
    "deepseek-reasoner": 65_536,
}

_VENDOR_PREFIX = re.compile(r"^(?:[\w.-]+/)+")  # "openai/gpt-4o", "meta-llama/Llama-3.1-8B"


def known_context_window(model: str) -> int | None:
    """The published window of ``model`` by name, or ``None`` when it is not known."""
    name = _VENDOR_PREFIX.sub("", model.strip().lower())
    best: str | None = None
    for prefix in KNOWN_CONTEXT_WINDOWS:
        if name.startswith(prefix) and (best is None or len(prefix) > len(best)):
            best = prefix
    return KNOWN_CONTEXT_WINDOWS[best] if best is not None else None


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value > 0:
        return value
    if isinstance(value, float) and value.is_integer() and value > 0:
        return int(value)
    return None


def context_window_from_props(data: Any) -> int | None:
    """``n_ctx`` from a llama.cpp ``/props`` reply, or ``None``."""
    if not isinstance(data, dict):
        return None
    settings = data.get("default_generation_settings")
    if isinstance(settings, dict):
        found = _positive_int(settings.get("n_ctx"))
        if found:
            return found
    return _positive_int(data.get("n_ctx"))


def context_window_from_models(data: Any, model: str) -> int | None:
    """``meta.n_ctx`` of ``model`` in a ``/v1/models`` reply, or ``None``.

    A server that lists exactly one model serves it whatever name is asked for (llama.cpp
    does), so a lone entry counts even when its id differs.
    """
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        return None
    entries = [e for e in data["data"] if isinstance(e, dict)]
    chosen = [e for e in entries if e.get("id") == model or model in (e.get("aliases") or [])]
    if not chosen and len(entries) == 1:
        chosen = entries
    for entry in chosen:
        meta = entry.get("meta")
        if isinstance(meta, dict):
            found = _positive_int(meta.get("n_ctx"))
            if found:
                return found
        found = _positive_int(entry.get("context_window") or entry.get("context_length"))
        if found:
            return found
    return None


def choose_context_window(
    from_server: int | None, model: str, user_value: int | None
) -> tuple[int | None, str]:
    """The window to use and where it came from: the server, the table, the user's value."""
    if from_server:
        return from_server, "server"
    known = known_context_window(model)
    if known:
        return known, "known model"
    if user_value:
        return user_value, "configured"
    return None, "unknown"
