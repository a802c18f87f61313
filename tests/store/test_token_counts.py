"""Messages stored without token counts: paging over them, filling them, totals meanwhile.

A large import stores messages first and counts their tokens afterwards
(``workbench.engine.importing``); these are the store's parts of that.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from workbench.core.conversation import Conversation, Message
from workbench.core.tokens import get_counter
from workbench.errors import StorageError
from workbench.store import Repository

CountCheck = Callable[[int], None]


def _length_counts(messages: Sequence[Message]) -> list[int]:
    """A stand-in counter: the length of the text, so expected values are obvious."""
    return [len(m.content) for m in messages]


def _uncounted_session(repo: Repository, title: str, *contents: str) -> int:
    (outcome,) = repo.import_many(
        [Conversation(title=title, messages=[Message(role="user", content=c) for c in contents])]
    )
    return outcome.session.id


def test_uncounted_messages_pages_in_id_order_from_after_id(repo: Repository) -> None:
    first = _uncounted_session(repo, "a", *(f"a{i}" for i in range(7)))
    repo.append_message(
        first, Message(role="user", content="counted", token_count=3, token_encoding="e")
    )
    repo.append_message(
        first, Message(role="user", content="other encoding", token_count=3, token_encoding="x")
    )
    second = _uncounted_session(repo, "b", *(f"b{i}" for i in range(5)))

    pages: list[list[Message]] = []
    after = 0
    while page := repo.uncounted_messages(None, after_id=after, limit=3):
        pages.append(page)
        after = page[-1].id or 0
    seen = [m for page in pages for m in page]
    assert [len(p) for p in pages] == [3, 3, 3, 3]
    assert [m.content for m in seen] == [f"a{i}" for i in range(7)] + [f"b{i}" for i in range(5)]
    ids = [m.id for m in seen]
    assert ids == sorted(ids)
    # With an encoding, a count made with another one is due again.
    wanted = repo.uncounted_messages("e", session_id=first, after_id=0, limit=100)
    assert [m.content for m in wanted][-1] == "other encoding"
    assert repo.uncounted_messages(None, session_id=second, after_id=ids[-2]) == [seen[-1]]


def test_fill_token_counts_stores_counts_and_session_totals(
    repo: Repository, check_counts: CountCheck
) -> None:
    sid = _uncounted_session(repo, "s", "one", "three", "fifteen letters")
    other = _uncounted_session(repo, "t", "x" * 40)
    assert repo.missing_token_counts()[0] == 4
    assert repo.get_session(sid).token_count == 0

    counted, last = repo.fill_token_counts(_length_counts, "length", after_id=0, limit=2)
    assert counted == 2
    assert repo.missing_token_counts()[0] == 2
    assert repo.get_session(sid).token_count == 3 + 5
    check_counts(sid)

    counted, last = repo.fill_token_counts(_length_counts, "length", after_id=last, limit=10)
    assert counted == 2
    assert repo.fill_token_counts(_length_counts, "length", after_id=last) == (0, last)
    assert repo.missing_token_counts() == (0, 0)
    assert repo.get_session(sid).token_count == 3 + 5 + 15
    assert repo.get_session(other).token_count == 40
    assert {m.token_encoding for m in repo.list_messages(sid)} == {"length"}
    check_counts(sid)
    check_counts(other)


def test_fill_token_counts_adds_only_active_messages_to_the_session_total(
    repo: Repository, check_counts: CountCheck
) -> None:
    sid = _uncounted_session(repo, "s", "folded away", "still here")
    folded, active = repo.list_messages(sid)
    repo.set_state([folded.id or 0], "folded")
    repo.fill_token_counts(_length_counts, "length")
    assert repo.get_message(folded.id or 0).token_count == len("folded away")
    assert repo.get_session(sid).token_count == len("still here")
    check_counts(sid)


def test_a_counter_that_miscounts_changes_nothing(repo: Repository) -> None:
    sid = _uncounted_session(repo, "s", "a", "b")
    with pytest.raises(StorageError, match="1 counts for 2 messages"):
        repo.fill_token_counts(lambda ms: [1], "bad")
    assert repo.missing_token_counts()[0] == 2
    assert repo.get_session(sid).token_count == 0


def test_missing_token_counts_gives_the_first_id(repo: Repository) -> None:
    assert repo.missing_token_counts() == (0, 0)
    counted = repo.create_session("counted")
    repo.append_message(
        counted.id, Message(role="user", content="c", token_count=1, token_encoding="e")
    )
    sid = _uncounted_session(repo, "s", "p", "q")
    first = repo.list_messages(sid)[0].id
    assert repo.missing_token_counts() == (2, first)


def test_token_totals_count_missing_messages_on_demand(repo: Repository) -> None:
    counter = get_counter()
    texts = ["How long is a piece of string?", "Twice half its length."]
    sid = _uncounted_session(repo, "s", *texts)
    repo.append_message(
        sid, Message(role="user", content="cached", token_count=100, token_encoding="e")
    )
    evicted = repo.append_message(sid, Message(role="assistant", content="gone for good"))
    repo.set_state([evicted.id or 0], "evicted")
    expected = 100 + sum(counter.count_message(Message(role="user", content=t)) for t in texts)

    assert repo.token_total(sid) == expected
    assert repo.token_totals([sid]) == {sid: expected}
    assert repo.token_totals()[sid] == expected
    evicted_cost = counter.count_message(Message(role="assistant", content="gone for good"))
    assert repo.token_total(sid, states=("evicted",)) == evicted_cost
    # Nothing was written: the counts are still missing until a pass fills them.
    assert repo.missing_token_counts()[0] == 3

    repo.fill_token_counts(counter.count_messages, counter.encoding_name)
    assert repo.token_total(sid) == expected == repo.get_session(sid).token_count
