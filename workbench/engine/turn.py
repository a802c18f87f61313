"""The one place that decides how a turn in a stored session is sent (SPEC §3, §8).

Chat (the command line and the desktop composer), preflight (``workbench preflight`` and
the Request panel) and regenerate all set up their turn with :func:`prepare_turn`, so
what preflight shows is what chat sends: the same provider, the same model, the same
tools, the same ``max_tokens``, the same streaming choice and so the same options.

The decisions, in order:

* **provider**: the one named, else the session agent's, else the only one configured
  (:meth:`~workbench.engine.providers.ProviderSettings.choose`); when none is configured
  at all, chat fails with a sentence while preflight assumes an offline
  OpenAI-compatible stand-in (:class:`~workbench.engine.preflight.OfflineProvider`) and
  says so; every other refusal (several configured and none chosen, the agent's provider
  gone, a config that cannot be used) is preflight's as much as chat's;
* **model**: the one named, else the agent's model when the agent names no provider or
  names the chosen one, else the provider config's;
* **tools**: the built-in tools the agent enables, bound to the session;
* **limits and options**: ``max_tokens`` and ``stream`` as given (the provider config's
  own ``max_output_tokens`` and temperature apply in both cases alike), the context
  window as given or as the provider reports it.

Preflight builds its client without reading the API key (``keyless``), which changes
nothing in the payload and keeps any secret out of its output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from workbench.core.conversation import Agent, SessionInfo
from workbench.core.provider import Provider
from workbench.engine.builtin_tools import tools_for_agent
from workbench.engine.memory import Memory
from workbench.engine.model import Model
from workbench.engine.preflight import (
    DEFAULT_CONTEXT_WINDOW,
    OfflineProvider,
    Preflight,
    provider_note,
)
from workbench.engine.providers import ProviderSettings, build_provider
from workbench.engine.workspace import Workspace
from workbench.errors import NoProviderError
from workbench.providers.http import RetryNotice

__all__ = ["TurnSetup", "model_for", "preflight_session", "prepare_turn"]


@dataclass
class TurnSetup:
    """A turn ready to run or to preflight: close it when done (closes the client it
    built, never one it was given)."""

    info: SessionInfo
    agent: Agent
    memory: Memory
    client: Provider
    model: Model
    provider_name: str | None = None
    assumed: bool = False
    note: str = ""
    owned: bool = True

    def close(self) -> None:
        """Close the client this setup built."""
        if self.owned:
            close = getattr(self.client, "close", None)
            if callable(close):
                close()

    def __enter__(self) -> TurnSetup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def model_for(agent: Agent, name: str, explicit: str | None) -> str | None:
    """The model a turn with ``agent`` asks the provider ``name`` for, when it is not the
    provider config's own: ``explicit``, else the agent's model when the agent names no
    provider or names this one; None leaves the config's."""
    if explicit:
        return explicit
    if agent.model and (not agent.provider or agent.provider == name):
        return agent.model
    return None


def prepare_turn(
    ws: Workspace,
    session: str | int,
    *,
    provider: str | None = None,
    model: str | None = None,
    max_tokens: int | None = None,
    stream: bool = True,
    context_window: int | None = None,
    auto: bool | None = True,
    client: Provider | None = None,
    for_preflight: bool = False,
    on_retry: Callable[[RetryNotice], None] | None = None,
) -> TurnSetup:
    """Decide provider, model, tools, limits and options of a turn in ``session``.

    ``session`` is an id, source id or title. ``client`` is a ready provider to use as
    it is (not closed here). ``for_preflight`` builds the client without its key and,
    when no provider is configured at all, assumes the offline stand-in instead of
    failing; any other refusal is chat's and preflight's alike. The returned model has
    the session's memory attached (``auto`` as in
    :meth:`~workbench.engine.model.Model.with_memory`).
    """
    info = ws.repo.find_session(session)
    memory = Memory.open(ws, info.id)
    agent = memory.agent() or ws.repo.default_agent()
    name: str | None = None
    assumed = False
    note = ""
    owned = client is None
    active: Provider
    if client is not None:
        active = client
    else:
        settings = ProviderSettings(ws.db)
        try:
            name = settings.choose(provider, agent.provider)
        except NoProviderError:
            # Chat refuses; preflight shows what an assumed provider would get. Any
            # other refusal (several and none chosen, the agent's gone) is chat's too.
            if not for_preflight:
                raise
            active = OfflineProvider(model or agent.model)
            assumed = True
            note = (
                "no provider is configured; assumed an OpenAI-compatible provider for "
                f"model {active.model!r} with a context window of "
                f"{DEFAULT_CONTEXT_WINDOW} tokens"
            )
        else:
            config = settings.get(name)
            chosen_model = model_for(agent, name, model)
            if chosen_model and chosen_model != config.model:
                config = replace(config, model=chosen_model)
            active = build_provider(config, on_retry=on_retry, without_key=for_preflight)
    tools = tools_for_agent(agent, ws.repo, session_id=info.id, policy=memory.policy())
    built = Model(
        active,
        instructions=agent.instructions or None,
        tools=tools,
        max_tokens=max_tokens,
        stream=stream,
        context_window=context_window,
    ).with_memory(memory, auto=auto)
    return TurnSetup(
        info=info,
        agent=agent,
        memory=memory,
        client=active,
        model=built,
        provider_name=name or getattr(active, "name", None),
        assumed=assumed,
        note=note,
        owned=owned,
    )


def preflight_session(
    ws: Workspace,
    session: str | int,
    prompt: str,
    *,
    provider: Provider | str | None = None,
    model: str | None = None,
    max_tokens: int | None = None,
    stream: bool = True,
    context_window: int | None = None,
) -> Preflight:
    """Preflight ``prompt`` in a stored session exactly as a chat turn would send it.

    ``provider`` is a provider config's name or a ready client; ``model``,
    ``max_tokens``, ``stream`` and ``context_window`` are the chat's. The turn is set up
    by :func:`prepare_turn`, the function chat uses; without any usable provider
    :class:`~workbench.engine.preflight.OfflineProvider` is assumed and the result says so.
    A blank ``prompt`` is left out of the request: it shows the request around a prompt
    not typed yet, not an empty user message.
    """
    name = provider if isinstance(provider, str) else None
    client = None if isinstance(provider, str) else provider
    with prepare_turn(
        ws,
        session,
        provider=name,
        model=model,
        max_tokens=max_tokens,
        stream=stream,
        context_window=context_window,
        client=client,
        for_preflight=True,
    ) as setup:
        result = setup.model.preflight(prompt, with_prompt=bool(prompt.strip()))
        result.provider = provider_note(setup.client, assumed=setup.assumed, why=setup.note)
    return result
