"""The workbench's exception tree: every exception class of the workbench is in it.

Every error the workbench raises derives from :class:`WorkbenchError` and carries a
sentence a person can act on (the file, the entry, the field, the status)::

    WorkbenchError
    ├── StorageError            the database file or a row in it
    │   ├── DatabaseVersionError    the file was written by a newer workbench
    │   ├── NotFoundError           a session, message or entry that does not exist
    │   │   └── NoProviderError         no provider is configured at all
    │   ├── ChangedElsewhereError   a message changed by another window since it was read
    │   ├── DatabaseUnavailableError  no write can succeed now (read-only, locked, full)
    │   └── StoreUnreachableError   the team database's server cannot be reached now
    ├── FormatError             a file being imported or exported
    │   ├── UnknownFormatError      no importer recognises the file
    │   └── InvalidEntryError       one entry of a file cannot be read (it is skipped)
    ├── TokenizerError          token counting could not load an encoding
    ├── RequestError            a request cannot be built (too big for the window, bad tool)
    │   └── ContextBudgetError      even the essential parts exceed the budget
    ├── StructuredOutputError   no reply matched the schema (``execute_with_schema``)
    ├── CompactionError         a compaction could not be planned, applied or undone
    ├── OperationCancelledError the user stopped a request or a tool run
    └── ProviderError           talking to a model server; ``retryable`` says if a retry may help
        ├── AuthenticationError     401/403: the key is missing, wrong or lacks permission
        ├── UnknownModelError       404 for the model: the server does not serve it
        ├── RateLimitError          429: too many requests (``retry_after`` seconds)
        ├── ContextTooLongError     the prompt exceeds the model's context window (sizes)
        ├── ServerError             5xx, or a reply the protocol does not allow
        ├── UnreachableError        no connection could be made
        ├── ProviderTimeoutError    connect, read or total time limit passed
        └── StreamInterruptedError  the connection dropped after the reply began

The classes are defined here, and the layers import them from here. A few modules keep
a private subclass for their own control flow (a JSON scanner's cut, a retry signal, a
tool's time limit); it never leaves the module, and it is in the tree all the same.
``tests/test_architecture.py`` checks that every exception class of the workbench is.
"""
from __future__ import annotations


class WorkbenchError(Exception):
    """Root of every deliberate workbench error; ``str(err)`` is a full sentence."""


class StorageError(WorkbenchError):
    """The database could not be opened, migrated, read or written."""


class DatabaseVersionError(StorageError):
    """The database was written by a newer version of the workbench."""


class NotFoundError(StorageError):
    """A session, message, agent or memory entry that does not exist was asked for."""


class NoProviderError(NotFoundError):
    """No provider config exists at all (not one missing among others): chat cannot
    send, while preflight may still show the request an assumed provider would get."""


class ChangedElsewhereError(StorageError):
    """A message being edited was changed by another window or desktop meanwhile: the
    edit is not written over that change."""


class DatabaseUnavailableError(StorageError):
    """The database as a whole refuses writes for now: the file or its folder is
    read-only, another program keeps it locked, the disk is full or failing. Nothing
    about one row: work that goes on row by row stops at the first."""


class StoreUnreachableError(StorageError):
    """The team database's server cannot be reached right now (not that it refused a
    change). ``outage`` names the outage the failure belongs to: every failure from the
    first one until a statement succeeds again shares it, whatever the driver said
    each time (a dropped connection, a refused connect, a time-out)."""

    def __init__(self, message: str, *, outage: tuple[str, int] | None = None):
        super().__init__(message)
        self.outage = outage


class FormatError(WorkbenchError):
    """A file (or one entry of it) could not be read or written in its format.

    ``path`` names the file and ``entry`` the position inside it (a line number for
    JSONL, an index for JSON arrays) when they are known.
    """

    def __init__(self, message: str, *, path: str | None = None, entry: str | None = None):
        super().__init__(message)
        self.path = path
        self.entry = entry


class UnknownFormatError(FormatError):
    """No importer recognises the file; the message lists the known formats."""


class InvalidEntryError(FormatError):
    """One entry of a file (a message, a turn, a session) cannot be read; the importer
    skips it with the message as the reason and reads on."""


class TokenizerError(WorkbenchError):
    """No token encoding could be loaded from local files."""


class RequestError(WorkbenchError):
    """A request to a model could not be built (bad tool, bad schema, bad role)."""


class ContextBudgetError(RequestError):
    """The system message, summary and prompt alone exceed the model's budget."""

    def __init__(self, message: str, *, needed: int, budget: int):
        super().__init__(message)
        self.needed = needed
        self.budget = budget


class StructuredOutputError(WorkbenchError):
    """Every attempt of ``execute_with_schema`` failed validation; memory is unchanged.

    ``errors`` holds the validation error of each attempt and ``replies`` their texts.
    """

    def __init__(self, message: str, *, errors: list[str], replies: list[str]):
        super().__init__(message)
        self.errors = errors
        self.replies = replies


class CompactionError(WorkbenchError):
    """A compaction could not be planned, applied or undone; the session is unchanged."""


class OperationCancelledError(WorkbenchError):
    """The user stopped the operation: a model request, or a tool the model called."""


class ProviderError(WorkbenchError):
    """A model server could not be reached or answered with an error.

    ``status`` is the HTTP status when there was one; ``retryable`` says whether the
    same request may succeed later (rate limits, server errors, lost connections).
    """

    retryable = False

    def __init__(self, message: str, *, status: int | None = None, provider: str | None = None):
        super().__init__(message)
        self.status = status
        self.provider = provider


class AuthenticationError(ProviderError):
    """The server refused the API key (or none was given)."""


class UnknownModelError(ProviderError):
    """The server does not know the model that was asked for."""


class RateLimitError(ProviderError):
    """Too many requests; ``retry_after`` is the server's hint in seconds, if any."""

    retryable = True

    def __init__(self, message: str, *, retry_after: float | None = None, **kw: object):
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.retry_after = retry_after


class ContextTooLongError(ProviderError):
    """The request is larger than the model's context window.

    ``prompt_tokens`` and ``context_window`` hold the sizes when the server told them.
    """

    def __init__(
        self,
        message: str,
        *,
        prompt_tokens: int | None = None,
        context_window: int | None = None,
        **kw: object,
    ):
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.prompt_tokens = prompt_tokens
        self.context_window = context_window


class ServerError(ProviderError):
    """The server failed (5xx) or answered in a way the protocol does not allow."""

    retryable = True


class UnreachableError(ProviderError):
    """No connection to the server could be made."""

    retryable = True


class ProviderTimeoutError(ProviderError):
    """The server took longer than the connect, read or total time limit."""

    retryable = True


class StreamInterruptedError(ProviderError):
    """The connection broke after part of the reply had arrived (never retried)."""
