"""Chatting in a stored session: the model for a session, one streamed turn, the gauge.

What the desktop composer (and any other front end) needs around
:class:`~workbench.engine.model.Model`:

* :func:`session_providers`: the configured providers, the one a session's agent would
  use, the one it names that is not configured any more (chat refuses the session until
  one is chosen), the model each would be asked for and the memory mode, in one call,
  for a front end that reads it off its UI thread;
* :func:`stream_turn`: one turn in a session as a generator of run events (text as it
  arrives, tool activity) that returns the :class:`~workbench.engine.model.Response`
  (:func:`stores_turns`: whether the agent's memory mode keeps a turn);
  the caller's :class:`~workbench.core.provider.CancelToken` stops it at once;
* the model such a turn uses (the agent's instructions, the built-in tools it enables,
  the provider and its options) comes from :func:`workbench.engine.turn.prepare_turn`;
* :func:`context_gauge`: the tokens the next request would carry against the model's
  context window (from preflight; estimated from the session's cached count for very
  long sessions, whose preflight would read every message);
* :func:`regenerate_turn`: ask again for the last reply; the old one is replaced only
  when the new one is complete (a failure or a stop leaves it as it was);
* :func:`last_turn`: the last user message and what followed it;
* :func:`preflight_turn`: the exact request the next :func:`stream_turn` would send with
  the same provider and model (for the request inspector), and :func:`left_out_previews`
  to show the messages it leaves out.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Generator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from workbench.core.assembly import LeftOut, LeftOutRange
from workbench.core.conversation import Agent, Message
from workbench.core.provider import CancelToken, Provider
from workbench.core.tokens import get_counter
from workbench.engine import stored_history
from workbench.engine.memory import Memory
from workbench.engine.model import Response, RunEvent
from workbench.engine.preflight import Preflight
from workbench.engine.providers import ProviderSettings, build_provider
from workbench.engine.turn import model_for, preflight_session, prepare_turn
from workbench.engine.workspace import Workspace
from workbench.errors import NotFoundError, WorkbenchError
from workbench.providers.base import HttpProvider
from workbench.store.history_pages import preview_rows

__all__ = [
    "GAUGE_PREFLIGHT_LIMIT",
    "ContextGauge",
    "context_gauge",
    "last_turn",
    "left_out_previews",
    "newest_left_out",
    "preflight_turn",
    "regenerate_turn",
    "session_providers",
    "SessionProviders",
    "stores_turns",
    "stream_turn",
]

#: Sessions with more messages than this get an estimated gauge (see the module doc).
GAUGE_PREFLIGHT_LIMIT = 5_000


def _agent(ws: Workspace, session_id: int | None) -> Agent | None:
    """The session's agent, if the session and its agent are there."""
    if not session_id:
        return None
    try:
        info = ws.repo.get_session(session_id)
        return ws.repo.get_agent(info.agent_id)
    except NotFoundError:
        return None


def stores_turns(ws: Workspace, session_id: int) -> bool:
    """Whether a turn in the session is stored when it succeeds: the memory mode of the
    session's agent (``auto``; ``manual`` stores nothing), which chat follows unless
    told otherwise. A session or policy that cannot be read counts as ``auto``."""
    try:
        return Memory.open(ws, session_id).policy().auto
    except WorkbenchError:
        return True


@dataclass(frozen=True)
class SessionProviders:
    """What a composer shows for a session: the configured providers (``names``), the
    one chat would use (``chosen``: the agent's, else the only one, else None), the
    agent's that is not configured any more (``missing``), the model each provider
    would be asked for in the session (``models``) and whether a turn is stored
    (``stores_turns``; None without a session)."""

    session_id: int | None
    names: tuple[str, ...]
    chosen: str | None
    missing: str | None
    models: dict[str, str]
    stores_turns: bool | None


def session_providers(ws: Workspace, session_id: int | None) -> SessionProviders:
    """The providers as the session ``session_id`` (None: no session) sees them, read at
    once (the configs listed once: on the team store each read is a round trip).
    ``chosen`` and ``missing`` follow
    :meth:`~workbench.engine.providers.ProviderSettings.choose`: the agent's provider,
    never another in its place, else the only one; the model is the one
    :func:`~workbench.engine.turn.model_for` gives, else the provider's."""
    configs = ProviderSettings(ws.db).list()
    names = tuple(config.name for config in configs)
    agent = _agent(ws, session_id)
    named = agent.provider if agent is not None else None
    if named:
        chosen = named if named in names else None
        missing = named if names and named not in names else None
    else:
        chosen = names[0] if len(names) == 1 else None
        missing = None
    models = {config.name: (model_for(agent, config.name, None) if agent is not None
                            else None) or config.model for config in configs}
    return SessionProviders(
        session_id=session_id, names=names, chosen=chosen, missing=missing, models=models,
        stores_turns=stores_turns(ws, session_id) if session_id else None)


def _provider(ws: Workspace, name: str, model: str | None, **options: Any) -> HttpProvider:
    config = ProviderSettings(ws.db).get(name)
    if model and model != config.model:
        config = replace(config, model=model)
    return build_provider(config, **options)


def stream_turn(
    ws: Workspace,
    session_id: int,
    prompt: str,
    *,
    provider: str | None = None,
    model: str | None = None,
    auto: bool = True,
    cancel: CancelToken | None = None,
    keep_partial: bool = False,
    client: Provider | None = None,
) -> Generator[RunEvent, None, Response]:
    """One turn in a stored session, as its events; returns the response.

    The request is built from the session's memory with its agent's instructions and
    enabled built-in tools. With ``auto`` the prompt and the reply (and any tool
    messages) are appended when the turn succeeds; without it nothing is stored. A
    cancelled turn raises :class:`~workbench.errors.OperationCancelledError` (or, with
    ``keep_partial``, keeps the partial reply marked as stopped). ``client`` is a ready
    provider to use instead of building one from the config named ``provider`` (it is
    not closed here). Provider, model, tools and options are decided by
    :func:`~workbench.engine.turn.prepare_turn`, as for preflight and
    :func:`regenerate_turn`.
    """
    with prepare_turn(ws, session_id, provider=provider, model=model, auto=auto,
                      client=client) as setup:
        run = setup.model.stream_run(prompt, cancel=cancel, keep_partial=keep_partial)
        yield from run
        assert run.response is not None
        return run.response


def regenerate_turn(
    ws: Workspace,
    session_id: int,
    *,
    provider: str | None = None,
    model: str | None = None,
    auto: bool = True,
    cancel: CancelToken | None = None,
    client: Provider | None = None,
) -> Generator[RunEvent, None, Response]:
    """Ask again for the reply to the session's last user message, as its events;
    returns the response.

    The request is the one the prompt was sent with (the history before it, the same
    agent setup as :func:`stream_turn`); the old reply is not in it. With ``auto`` the
    new reply replaces the old one (every message after the prompt) in one step once it
    is complete, and ``Response.replaced`` holds what it replaced; a failure or a stop
    (:class:`~workbench.errors.OperationCancelledError`) changes nothing, so the old
    reply stays. Without ``auto`` nothing is stored. A session without a user message
    raises :class:`~workbench.errors.RequestError`.
    """
    with prepare_turn(ws, session_id, provider=provider, model=model, auto=auto,
                      client=client) as setup:
        run = setup.model.stream_regenerate(cancel=cancel)
        yield from run
        assert run.response is not None
        return run.response


@dataclass(frozen=True)
class ContextGauge:
    """Tokens the next request would carry and the model's window (None: unknown)."""

    request_tokens: int
    window: int | None
    estimated: bool = False  # True when taken from the session's cached count
    left_out: int = 0  # history messages the request would leave out
    window_source: str = "unknown"  # server, known model, configured (see context_window_info)

    @property
    def fraction(self) -> float | None:
        if not self.window:
            return None
        return self.request_tokens / self.window


def context_gauge(
    ws: Workspace,
    session_id: int,
    *,
    provider: str | None,
    model: str | None = None,
    prompt: str = "",
    window: int | None = None,
    window_source: str = "unknown",
) -> ContextGauge:
    """The request's size against the window.

    The provider is asked for its window (over the network) unless ``window`` (with
    ``window_source``, where it came from) is given.
    """
    info = ws.repo.get_session(session_id)
    client = _provider(ws, provider, model) if provider else None
    try:
        if window is None and client is not None:
            window, window_source = client.context_window_info()
        if info.message_count > GAUGE_PREFLIGHT_LIMIT:
            tokens = info.token_count + (get_counter().count_text(prompt) if prompt else 0)
            return ContextGauge(tokens, window, estimated=True, window_source=window_source)
        result = preflight_session(ws, session_id, prompt, provider=client,
                                   context_window=window)
        # Without a provider the window preflight assumes is not the model's: say none.
        known_window = (window or result.budget.context_window) if client is not None else None
        return ContextGauge(result.tokens.total, known_window,
                            left_out=result.assembled.left_out_count,
                            window_source=window_source if known_window else "unknown")
    finally:
        if client is not None:
            client.close()


def last_turn(ws: Workspace, session_id: int) -> tuple[Message | None, list[Message]]:
    """The session's last user message and the messages after it (oldest first)."""
    after: list[Message] = []
    before = 2**62
    while True:
        page = ws.repo.page_before(session_id, before_position=before, limit=50)
        if not page:
            return None, list(reversed(after))
        for message in reversed(page):
            if message.role == "user":
                return message, list(reversed(after))
            after.append(message)
        before = int(page[0].position or 0)
        if before == 0:
            return None, list(reversed(after))


def preflight_turn(
    ws: Workspace,
    session_id: int,
    prompt: str,
    *,
    provider: str | None,
    model: str | None = None,
    window: int | None = None,
) -> Preflight:
    """The request :func:`stream_turn` would send first for ``prompt``, without sending.

    The client is built exactly as :func:`stream_turn` builds it (same provider, same
    model override), so the payload is the one that would go out; the HTTP description
    has its secrets redacted. ``window`` (a context window learned earlier) spares
    asking the server again. Without ``provider`` the agent's configuration, else an
    offline stand-in, is assumed (see
    :func:`~workbench.engine.turn.preflight_session`).
    """
    return preflight_session(ws, session_id, prompt, provider=provider, model=model,
                             context_window=window)


def newest_left_out(
    ws: Workspace, session_id: int, ranges: Sequence[LeftOutRange], *, limit: int = 500,
) -> list[LeftOut]:
    """The newest ``limit`` messages the runs ``ranges`` stand for, one entry each, in
    order: a run is expanded by reading the ids and positions of its active messages
    (never their text), newest runs first, until ``limit`` are found."""
    out: list[LeftOut] = []
    for run in reversed(ranges):
        room = limit - len(out)
        if room <= 0:
            break
        if run.count == 1 or run.first_position is None or run.last_position is None:
            out.append(LeftOut(run.last_id, run.last_position, run.reason))
            continue
        found = ws.repo.active_places(session_id, first_position=run.first_position,
                                      last_position=run.last_position, limit=room)
        out.extend(LeftOut(mid, pos, run.reason) for mid, pos in found)
    out.reverse()
    return out


def left_out_previews(
    ws: Workspace, session_id: int, left_out: Sequence[LeftOut], *, limit: int = 500,
    width: int = 160,
) -> dict[int, tuple[str, str]]:
    """``{position: (role, first words)}`` of the first ``limit`` left-out messages.

    Budget cuts leave out a run of consecutive messages, so this reads a few pages, and
    only those it did not read for the session's last call while the database has not
    changed since (the Request panel asks again at every refresh while a prompt is typed).
    """
    wanted = sorted({int(item.position) for item in left_out[:limit]
                     if item.position is not None})
    db = ws.repo.db
    found: dict[int, tuple[str, str]] = {}
    # Before reading: a commit meanwhile is seen (a team store's is not kept, see there).
    mark = stored_history.change_mark(db)
    if mark is None:
        _read_previews(ws, session_id, wanted, width, found)
        return {p: found[p] for p in wanted if p in found}
    by_session = _PREVIEWS.get(db)
    if by_session is None:
        by_session = OrderedDict()
        _PREVIEWS[db] = by_session
    kept = by_session.pop(session_id, None)
    if kept is not None and kept[1] == width:
        # What changed since is read again: the previews from its lowest position on.
        lowest = db.message_changes(kept[0], mark, session_id)
        if lowest == stored_history.UNCHANGED:
            found = kept[2]
        elif lowest is not None:
            found = {p: preview for p, preview in kept[2].items() if p < lowest}
    by_session[session_id] = (mark, width, found)
    while len(by_session) > 2:  # the last sessions only: memory stays flat
        by_session.popitem(last=False)
    missing = [p for p in wanted if p not in found]
    if missing:
        _read_previews(ws, session_id, missing, width, found)
    return {p: found[p] for p in wanted if p in found}


# The previews read last for each session per open database: (its version then, width,
# {position: preview}).
_Previews = OrderedDict[int, tuple[Any, int, dict[int, tuple[str, str]]]]
_PREVIEWS: weakref.WeakKeyDictionary[Any, _Previews] = weakref.WeakKeyDictionary()


def _read_previews(ws: Workspace, session_id: int, wanted: list[int], width: int,
                   found: dict[int, tuple[str, str]]) -> None:
    """Read the previews of the messages at positions ``wanted`` (ascending) into
    ``found``."""
    index = 0
    while index < len(wanted):
        start = wanted[index]
        page = preview_rows(ws.repo.db, session_id, after_position=start - 1,
                            limit=min(200, len(wanted) - index))
        if not page:
            break
        for position, role, content, calls in page:
            text = " ".join(content.split())
            if not text and calls:
                names = [str((c.get("function") or {}).get("name") or "?") for c in calls]
                text = "calls " + ", ".join(names)
            found[int(position or 0)] = (role, text[:width])
        last = int(page[-1][0] or 0)
        while index < len(wanted) and wanted[index] <= last:
            index += 1
