"""Conversation Workbench: browse, edit, compact and continue LLM conversations.

Importing the package stays cheap: the engine, the store and Qt load only when used.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__: str = version("conversation-workbench")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.1.0"

__all__ = ["__version__"]
