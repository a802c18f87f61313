"""Import and export formats (SPEC §7).

Importers turn files into :class:`~workbench.core.conversation.Conversation` objects and
exporters write stored sessions back out. The built-in formats are registered here;
later formats register themselves with :func:`register_importer` and
:func:`register_exporter`.
"""

from __future__ import annotations

from workbench.formats.base import (
    Exporter,
    ExportSession,
    Importer,
    ImportItem,
    exporters,
    get_exporter,
    get_importer,
    importers,
    register_exporter,
    register_importer,
)
from workbench.formats.chatgpt import ChatGPTImporter
from workbench.formats.claude import ClaudeImporter
from workbench.formats.context_file import ContextFileExporter, ContextFileImporter
from workbench.formats.detect import detect_format, read_conversations
from workbench.formats.llm_logs import LlmLogsImporter
from workbench.formats.markdown import MarkdownExporter, MarkdownImporter
from workbench.formats.openai_messages import OpenAIJsonlExporter, OpenAIMessagesImporter
from workbench.formats.openwebui import OpenWebUIImporter
from workbench.formats.sharegpt import ShareGPTImporter

register_importer(ContextFileImporter())
register_importer(OpenAIMessagesImporter())
# Each of these recognises its own shape only (ChatGPT's "mapping", Claude's
# "chat_messages", Open WebUI's "chat", llm's SQLite tables, ShareGPT's "conversations"),
# so the order among them does not decide anything.
register_importer(ChatGPTImporter())
register_importer(ClaudeImporter())
register_importer(OpenWebUIImporter())
register_importer(LlmLogsImporter())
register_importer(ShareGPTImporter())
# Not JSON at all: a transcript the Markdown export wrote.
register_importer(MarkdownImporter())
register_exporter(ContextFileExporter())
register_exporter(OpenAIJsonlExporter())
register_exporter(MarkdownExporter())

__all__ = [
    "ExportSession",
    "Exporter",
    "ImportItem",
    "Importer",
    "detect_format",
    "exporters",
    "get_exporter",
    "get_importer",
    "importers",
    "read_conversations",
    "register_exporter",
    "register_importer",
]
