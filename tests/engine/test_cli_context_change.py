"""``workbench context`` changes the context as stored, in one step: a refused change
writes nothing, and a fact another writer added meanwhile stays."""

from __future__ import annotations

from typing import Any

from workbench.engine.session_context import add_facts
from workbench.engine.workspace import Workspace

CliRunner = Any


def test_a_refused_change_writes_nothing_and_others_adds_stay(
    cli: CliRunner, workspace: Workspace,
) -> None:
    sid = workspace.repo.create_session("Trip").id
    assert cli("context", "Trip", "--add-fact", "Likes trains.").code == 0
    add_facts(workspace, sid, ["Added by the window."])
    refused = cli("context", "Trip", "--add-fact", "Vegan.", "--remove-fact", "Never said.")
    assert refused.code != 0 and "no fact 'Never said.'" in refused.err
    assert workspace.repo.get_context(sid).facts == ["Likes trains.", "Added by the window."]
    assert cli("context", "Trip", "--add-fact", "Vegan.").code == 0
    assert workspace.repo.get_context(sid).facts == [
        "Likes trains.", "Added by the window.", "Vegan."]
