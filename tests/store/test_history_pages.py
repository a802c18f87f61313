"""store.history_pages reads the same pages as Repository.page_state_before."""

from __future__ import annotations

from workbench.core.conversation import Conversation, Message
from workbench.store import Repository
from workbench.store.history_pages import page_before


def test_history_pages_are_the_repository_s_pages(repo: Repository) -> None:
    info = repo.create_session("pages")
    stored = repo.append_messages(info.id, [
        Message("system", "Be brief."),
        Message("user", "Hi", metadata={"note": "x"}, important=True),
        Message("assistant", "", tool_calls=[{"id": "c1", "type": "function",
                                              "function": {"name": "f", "arguments": "{}"}}]),
        Message("tool", "done", tool_call_id="c1", name="f",
                parts=[{"type": "text", "text": "done"}]),
        Message("assistant", "Done.", token_count=3, token_encoding="o200k_base"),
    ])
    repo.set_state([stored[0].id], "folded")  # type: ignore[list-item]
    (imported,) = repo.import_many([Conversation(title="no times", messages=[
        Message("user", "When?"), Message("assistant", "Unknown.", metadata={"k": 1})])])
    sessions = [(info.id, "active"), (info.id, "folded"), (imported.session.id, "active")]
    for session_id, state in sessions:
        for before in (None, 4, 2, 1, 0):
            for limit in (1, 2, 10):
                assert page_before(repo.db, session_id, state=state, before_position=before,
                                   limit=limit) == repo.page_state_before(
                    session_id, state=state, before_position=before, limit=limit)
    newest = page_before(repo.db, imported.session.id, state="active")
    assert [m.created_at for m in newest] == [None, None]
    assert newest[0].metadata == {"k": 1}


def test_what_fits_is_counted_as_the_repository_counts_it(repo: Repository) -> None:
    from workbench.store.history_pages import count_fitting

    info = repo.create_session("fitting")
    counts = [5, None, 7, 1, 300, 2, 2, None, 9] * 70
    stored = repo.append_messages(info.id, [
        Message("user", f"m{i}", token_count=c, token_encoding="o200k_base" if c else None)
        for i, c in enumerate(counts)])
    repo.set_state([m.id for m in stored[::5]], "folded")  # type: ignore[misc]
    for state in ("active", "folded", "evicted"):
        for room in (-1, 0, 1, 4, 5, 6, 12, 13, 100, 299, 300, 301, 5_000, 30_000, 10**9):
            assert count_fitting(repo.db, info.id, state=state, room=room) == (
                repo.count_fitting(info.id, state=state, room=room)), (state, room)


def test_what_fits_is_counted_across_pages_of_costs(repo: Repository) -> None:
    """More messages than a team store's first page of costs: the walk goes on into the
    next page, past positions left by folded messages, and stops where the room ends."""
    from workbench.store.history_pages import count_fitting

    info = repo.create_session("long")
    stored = repo.append_messages(info.id, [
        Message("user", f"m{i}", token_count=1 + i % 3, token_encoding="o200k_base")
        for i in range(3000)])
    repo.set_state([m.id for m in stored[2000:2100]], "folded")  # type: ignore[misc]
    active = [1 + i % 3 for i in range(3000) if not 2000 <= i < 2100]
    for room in (0, 1000, 1800, 2500, 4000, 5700, sum(active) - 1, sum(active), 10**9):
        used, expected = 0, None
        for n, cost in enumerate(reversed(active)):
            used += cost
            if used > room:
                expected = n
                break
        assert count_fitting(repo.db, info.id, state="active", room=room) == expected, room
        assert repo.count_fitting(info.id, state="active", room=room) == expected, room
