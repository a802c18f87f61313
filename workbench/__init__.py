"""Conversation Workbench: browse, edit, compact and continue LLM conversations.

Importing the package stays cheap: the engine, the store and Qt load only when used.
``from workbench import Memory, Model, Tool, tool`` loads the memory engine on first use.
"""

from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__: str = version("conversation-workbench")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.1.0"

# Names served lazily by __getattr__, with the module each lives in.
_LAZY = {
    "Memory": "workbench.engine.memory",
    "Model": "workbench.engine.model",
    "MemoryPolicy": "workbench.core.policy",
    "Tool": "workbench.core.tools",
    "tool": "workbench.core.tools",
}

__all__ = ["Memory", "MemoryPolicy", "Model", "Tool", "__version__", "tool"]


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'workbench' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
