"""HTTP clients for model servers: OpenAI-compatible and Anthropic (see issue 4).

- :mod:`~workbench.providers.openai`: :class:`OpenAICompatible` (chat completions);
- :mod:`~workbench.providers.anthropic`: :class:`Anthropic` (messages API);
- :mod:`~workbench.providers.base`: what both share (preflight description, ``complete``,
  context window lookup);
- :mod:`~workbench.providers.http`: timeouts, retries with backoff, prompt stopping;
- :mod:`~workbench.providers.failures`: error replies turned into typed sentences;
- :mod:`~workbench.providers.sse`: the WHATWG server-sent events decoder;
- :mod:`~workbench.providers.keys`: API keys from the environment or the OS keyring;
- :mod:`~workbench.providers.context`: context windows from the server or by model name.
"""
