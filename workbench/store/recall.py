"""Recall of long-term memory entries: relevance to a prompt, then recency (SPEC §3).

Search (:mod:`workbench.store.search`) reads a query the way a person types one: every
word must match. Recall reads a *prompt*, where most words are incidental, so here any
word may match and BM25 ranks the entries by how well they match: rare words count more
than common ones. Common English function words are dropped from the prompt when it has
other words. Entries equally relevant come most recent first.

Filters are exact: agent, scope, namespace and, for ``session`` scope, the session.

SQLite ranks with FTS5's own ``bm25()`` over ``memory_fts``. PostgreSQL has no BM25: it
finds the entries with the stored ``search`` tsvector (GIN index) and reads the figures
BM25 needs from it (how many entries, their average length, in how many entries each
word occurs, how often in each found one); :func:`bm25` scores them with FTS5's formula.
There an entry's length is its number of distinct words (what a tsvector holds at hand);
FTS5 counts every occurrence.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

from sqlalchemy import ColumnElement, Float, bindparam, column, func, literal_column, select, table
from sqlalchemy.engine import Connection

from workbench.core.conversation import MemoryEntry
from workbench.store.db import Database
from workbench.store.rows import MEMORY_ROW, memory_from_row
from workbench.store.schema import MEMORY_ENTRIES

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
    # ``agent`` scope: every entry of the agent, whatever session wrote it.
    where = [MEMORY_ENTRIES.c.agent_id == agent_id, MEMORY_ENTRIES.c.namespace == namespace]
    if scope == "session":
        where.append(MEMORY_ENTRIES.c.session_id == session_id)
    with db.read() as conn:
        if db.dialect.is_postgresql:
            return _recall_postgresql(conn, terms, where, limit)
        return _recall_sqlite(conn, terms, where, limit)


# == SQLite: FTS5 and its bm25() ===========================================================

_MEMORY_FTS = table("memory_fts", column("rowid"), column("memory_fts"))


def _recall_sqlite(
    conn: Connection, terms: Sequence[str], where: Sequence[ColumnElement[bool]], limit: int
) -> list[tuple[MemoryEntry, float]]:
    """FTS5 (SQLite only): ``memory_fts MATCH`` any term, ranked by ``bm25()``."""
    expression = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    # bm25 is rounded so that entries equally relevant in all but float noise tie, and
    # the tie goes to the newest.
    score = func.round(func.bm25(literal_column("memory_fts")), 6).label("score")
    query = (
        select(*MEMORY_ROW, score)
        .select_from(_MEMORY_FTS.join(MEMORY_ENTRIES,
                                      MEMORY_ENTRIES.c.id == _MEMORY_FTS.c.rowid))
        .where(literal_column("memory_fts").op("MATCH")(expression), *where)
        .order_by(score, MEMORY_ENTRIES.c.created_at.desc(), MEMORY_ENTRIES.c.id.desc())
        .limit(limit)
    )
    rows = conn.execute(query).all()
    return [(memory_from_row(r[:8]), -float(r[8])) for r in rows]


# == PostgreSQL: the search tsvector, BM25 computed here ===================================

# BM25's usual constants, as SQLite's FTS5 uses them.
_K1 = 1.2
_B = 0.75


def bm25(tf: Mapping[str, int], length: int, df: Mapping[str, int], total: int,
         average: float) -> float:
    """The BM25 score of an entry of ``length`` words where each word of the query occurs
    ``tf[word]`` times, among ``total`` entries of ``average`` length of which ``df[word]``
    hold the word (FTS5's formula; higher is better)."""
    score = 0.0
    for word, count in tf.items():
        if not count:
            continue
        n = df.get(word, 0)
        idf = max(math.log((total - n + 0.5) / (n + 0.5) + 1.0), 1e-6)
        score += idf * count * (_K1 + 1) / (count + _K1 * (1 - _B + _B * length / average))
    return score


# The words of the prompt as the search column holds them (workbench_words, then the
# 'simple' configuration).
_PG_LEXEMES = select(func.tsvector_to_array(func.to_tsvector(
    literal_column("'simple'::regconfig"), func.workbench_words(bindparam("text")))))
# The tsvector column of migration 0006_search_postgresql (not in the SQLModel tables).
_SEARCH: ColumnElement[str] = literal_column("memory_entries.search")
# The entry's tsvector cut down to the query's words (marked with weight A, then kept:
# much cheaper than spreading every word of every entry).
_QUERY_WORDS = func.ts_filter(
    func.setweight(_SEARCH, literal_column("'A'"), bindparam("lexemes")), literal_column("'{a}'")
)
_WORDS = func.unnest(_QUERY_WORDS).table_valued("lexeme", "positions").render_derived()
# The length of an entry in words: its distinct words, which the tsvector knows without
# being spread out (FTS5 counts every occurrence; the ratio to the average is what BM25
# reads, and it moves alike).
_LENGTH = func.length(_SEARCH)
# How often each word of the query occurs in an entry, as JSON {word: count}.
_FREQUENCIES = select(func.json_object_agg(
    _WORDS.c.lexeme, func.coalesce(func.array_length(_WORDS.c.positions, 1), 0)
)).scalar_subquery()
_MATCHES = _SEARCH.op("@@")(func.to_tsquery(literal_column("'simple'::regconfig"),
                                            bindparam("tsquery")))
_PG_TOTALS = select(func.count(), func.coalesce(func.sum(_LENGTH), 0).cast(Float)).select_from(
    MEMORY_ENTRIES)
_PG_DOCUMENT_FREQUENCIES = (
    select(_WORDS.c.lexeme, func.count())
    .select_from(MEMORY_ENTRIES)
    .join(_WORDS, literal_column("true"))
    .where(_MATCHES)
    .group_by(_WORDS.c.lexeme)
)


def _recall_postgresql(
    conn: Connection, terms: Sequence[str], where: Sequence[ColumnElement[bool]], limit: int
) -> list[tuple[MemoryEntry, float]]:
    """The entries matching any word (GIN index on ``search``), scored by :func:`bm25`
    with the statistics of every entry, as FTS5 keeps them."""
    lexemes = list(conn.execute(_PG_LEXEMES, {"text": " ".join(terms)}).scalar_one() or [])
    if not lexemes:
        return []
    quoted = ("'" + w.replace("\\", "\\\\").replace("'", "''") + "'" for w in lexemes)
    params = {"lexemes": lexemes, "tsquery": " | ".join(quoted)}
    rows = conn.execute(
        select(*MEMORY_ROW, _LENGTH, _FREQUENCIES).where(_MATCHES, *where), params
    ).all()
    if not rows:
        return []
    total, words_in_all = conn.execute(_PG_TOTALS).one()
    df: dict[str, int] = {
        str(r[0]): int(r[1]) for r in conn.execute(_PG_DOCUMENT_FREQUENCIES, params)
    }
    average = float(words_in_all) / max(int(total), 1) or 1.0
    scored = [
        (round(bm25(r[9] or {}, int(r[8]), df, int(total), average), 6), memory_from_row(r[:8]))
        for r in rows
    ]
    scored = [pair for pair in scored if pair[0] > 0]
    scored.sort(key=lambda pair: (-pair[0], _newest_first(pair[1])))
    return [(entry, score) for score, entry in scored[:limit]]


def _newest_first(entry: MemoryEntry) -> tuple[float, int]:
    stamp = entry.created_at.timestamp() if entry.created_at is not None else 0.0
    return (-stamp, -(entry.id or 0))
