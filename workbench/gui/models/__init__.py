"""Qt item models: sessions, the timeline, search results."""
