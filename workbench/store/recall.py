"""Recall of long-term memory entries: relevance to a prompt, then recency (SPEC §3).

Search (:mod:`workbench.store.search`) reads a query the way a person types one: every
word must match. Recall reads a *prompt*, where most words are incidental, so here any
word may match and BM25 ranks the entries by how well they match: rare words count more
than common ones. Common English function words are dropped from the prompt when it has
other words. Entries equally relevant come most recent first.

Filters are exact: agent, scope, namespace and, for ``session`` scope, the session.
"""

from __future__ import annotations

import re
from typing import Any

from workbench.core.conversation import MemoryEntry
from workbench.store.db import Database
from workbench.store.rows import memory_from_row

__all__ = ["STOPWORDS", "prompt_terms", "recall_entries", "words"]

# Letters and digits, as FTS5's unicode61 tokenizer splits words.
_WORD_RE = re.compile(r"[^\W_]+", re.UNICODE)

STOPWORDS = frozenset(
    """
    a about above after again all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers him his how i if in into is it its itself
    just me more most my no nor not now of off on once only or other our ours out over own
    please same she should so some such than that the their theirs them then there these
    they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours
    """.split()
)

#: A prompt's words beyond this many are ignored: recall needs the gist, and a very long
#: OR query costs more than it adds.
MAX_TERMS = 64


def words(text: str) -> list[str]:
    """Every word of ``text`` as the full-text index sees it, lower-cased, repeats kept."""
    return [w.lower() for w in _WORD_RE.findall(text)]


def prompt_terms(text: str) -> list[str]:
    """The distinct words of a prompt that recall looks for, in order of appearance."""
    distinct = list(dict.fromkeys(words(text)))
    content = [w for w in distinct if w not in STOPWORDS]
    return (content or distinct)[:MAX_TERMS]


def recall_entries(
    db: Database,
    text: str,
    *,
    agent_id: int,
    scope: str = "agent",
    namespace: str = "default",
    session_id: int | None = None,
    limit: int = 5,
) -> list[tuple[MemoryEntry, float]]:
    """The entries most relevant to ``text``, best first, with their scores (higher is
    better); ties go to the most recent. An empty list when no word of ``text`` matches.
    """
    terms = prompt_terms(text)
    if not terms or limit <= 0:
        return []
    expression = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    # ``agent`` scope: every entry of the agent, whatever session wrote it.
    where = ["memory_fts MATCH ?", "e.agent_id = ?", "e.namespace = ?"]
    params: list[Any] = [expression, agent_id, namespace]
    if scope == "session":
        where.append("e.session_id = ?")
        params.append(session_id)
    # bm25 is rounded so that entries equally relevant in all but float noise tie, and
    # the tie goes to the newest.
    with db.read() as conn:
        rows = conn.exec_driver_sql(
            "SELECT e.id, e.agent_id, e.session_id, e.scope, e.namespace, e.content,"
            " e.metadata, e.created_at, round(bm25(memory_fts), 6) AS score"
            " FROM memory_fts AS f JOIN memory_entries AS e ON e.id = f.rowid"
            f" WHERE {' AND '.join(where)}"
            " ORDER BY score, e.created_at DESC, e.id DESC LIMIT ?",
            (*params, limit),
        ).all()
    return [(memory_from_row(r[:8]), -float(r[8])) for r in rows]
