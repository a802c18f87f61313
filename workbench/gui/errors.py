"""Errors worded for people: what went wrong, and what to do next."""

from __future__ import annotations

from collections.abc import Hashable

from workbench.errors import (
    AuthenticationError,
    ContextBudgetError,
    ContextTooLongError,
    OperationCancelledError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    StoreUnreachableError,
    StreamInterruptedError,
    UnknownModelError,
    UnreachableError,
    WorkbenchError,
)

_NEXT_STEPS: list[tuple[type[BaseException], str]] = [
    (AuthenticationError, "Check the provider's API key (the environment variable or keyring "
                          "entry its settings name)."),
    (UnknownModelError, "Pick a model the server serves in the model selector."),
    (RateLimitError, "Wait a moment and send again."),
    (ContextTooLongError, "Compact the session or shorten the prompt, then send again."),
    (ContextBudgetError, "Compact the session or shorten the prompt, then send again."),
    (UnreachableError, "Check that the server is running and its address in Settings → "
                       "Providers…"),
    (ProviderTimeoutError, "The server may be busy: send again, or raise the provider's "
                           "time limit."),
    (ServerError, "The server failed; sending again may work."),
    (StreamInterruptedError, "The reply was cut off; regenerate it to try again."),
]


def _gives_advice(text: str) -> bool:
    """Whether a message already tells what to do (a sentence starting "Check…")."""
    return any(sentence.strip().startswith(("Check ", "Set ", "Add ", "Choose "))
               for sentence in text.split(". "))


def next_step(error: BaseException) -> str:
    """What the person can do about ``error`` (empty when there is no useful advice)."""
    for kind, advice in _NEXT_STEPS:
        if isinstance(error, kind):
            return advice
    return ""


def describe_error(error: BaseException, *, doing: str = "") -> str:
    """A sentence for a dialog or the status bar.

    Workbench errors already are sentences; anything else is an unexpected failure and
    says so, naming what was being done.
    """
    if isinstance(error, OperationCancelledError):
        return "Stopped."
    if isinstance(error, WorkbenchError):
        text = str(error).strip() or type(error).__name__
        advice = next_step(error)
        if advice and _gives_advice(text):
            advice = ""  # the error names the next step itself: say it once
        return f"{text} {advice}".strip()
    what = f" while trying to {doing}" if doing else ""
    detail = str(error).strip() or type(error).__name__
    return f"Something unexpected went wrong{what}: {detail}."


def error_cause(error: BaseException) -> Hashable | None:
    """What ``error`` shares with the failures that come with it, for saying them once:
    the outage of the team store it is part of (whatever the driver said each time),
    or None when it stands alone."""
    if isinstance(error, StoreUnreachableError) and error.outage is not None:
        return ("outage", *error.outage)
    return None
