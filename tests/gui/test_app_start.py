"""What the application's start does to the process once the window is up."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from workbench.gui.app import settle_after_start


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


@pytest.fixture()
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()  # the other tests run as they would without it


def test_what_the_start_made_is_left_out_of_later_full_collections(unfrozen: None) -> None:
    garbage = _Node()
    gone = weakref.ref(garbage)
    del garbage
    kept = [_Node() for _ in range(100)]
    settle_after_start()
    # Garbage of the start is collected first, not frozen with the rest.
    assert gone() is None
    # What lives on is frozen: a full pass no longer walks it.
    assert gc.get_freeze_count() >= len(kept)
    tracked = set(map(id, gc.get_objects(generation=2)))
    assert not tracked & set(map(id, kept))
    assert kept[0].me is kept[0]
