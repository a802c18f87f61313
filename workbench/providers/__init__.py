"""HTTP clients for model servers: OpenAI-compatible and Anthropic (see issue 4)."""
