"""Full-text search on PostgreSQL (the team store): the query language of SQLite's search.

The same typed queries as :mod:`workbench.store.search` (words, ``"phrases"``, ``prefix*``,
``OR``, ``NOT``/``-word``, role, state, session, agent and date filters), parsed by the
same :func:`~workbench.store.search.parse_query`, over the stored ``search`` tsvector
columns of migration ``0006_search_postgresql``. Every word of a query goes through the
database's own ``workbench_words`` before it becomes a lexeme, so a query and the text it
looks for are split, lower-cased and stripped of diacritics by one function.

The plan follows how common the words are: when fewer than
:data:`~workbench.store.search.RANK_WINDOW` rows match, every match is ranked (the GIN
index finds them; PostgreSQL's own plan may otherwise walk the table); when more match,
only the newest :data:`RANK_WINDOW` matches are ranked, as on SQLite. Snippets are made with
``ts_headline`` for the hits returned only. Text without an indexable word (``->``,
``__init__``) is found by substring (``ILIKE``, served by the trigram index).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from workbench.core.conversation import SearchHit
from workbench.errors import StorageError
from workbench.store.db import Database
from workbench.store.migrations import PG_SEARCH_CHARS
from workbench.store.search import (
    _TOO_COMPLEX_PG,
    ELLIPSIS,
    MAX_TERMS_POSTGRESQL,
    RANK_WINDOW,
    SNIPPET_TOKENS,
    SearchQuery,
    _groups,
    _like_pattern,
    _Term,
    _too_long,
    _words,
    best_hits,
    combine_terms,
    parse_query,
    substring_hits,
    title_or_memory_hit,
)
from workbench.store.types import time_to_text

# The most text ts_headline reads for one snippet (it parses all it is given).
_HEADLINE_CHARS = 20_000


class _Params:
    """Named bind parameters collected while SQL text is built."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def add(self, value: Any) -> str:
        name = f"p{len(self.values)}"
        self.values[name] = value
        return f":{name}"


def _term_query(term: _Term, params: _Params) -> str | None:
    """The tsquery SQL of one term, or None when it has no indexable word."""
    words = _words(term.text)
    if not words:
        return None
    if not term.prefix:
        return f"phraseto_tsquery('simple', workbench_words({params.add(' '.join(words))}))"
    last = (
        "to_tsquery('simple', quote_literal(trim(workbench_words("
        f"{params.add(words[-1])}))) || ':*')"
    )
    if len(words) == 1:
        return last
    head = f"phraseto_tsquery('simple', workbench_words({params.add(' '.join(words[:-1]))}))"
    return f"tsquery_phrase({head}, {last})"


def _tsquery(terms: Sequence[_Term], params: _Params) -> str | None:
    """The whole query as tsquery SQL, or None when no positive term has a word."""
    positive, negative = combine_terms(terms, lambda term: _term_query(term, params), "||")
    if not positive:
        return None
    return " && ".join(positive + [f"!!{n}" for n in negative])


def _substring_conditions(
    terms: Sequence[_Term], params: _Params, column: str, *, only_symbolic: bool = True
) -> list[str]:
    """Exact-substring conditions (see :func:`workbench.store.search._substring_conditions`)."""
    clauses: list[str] = []
    for group in _groups(terms):
        if only_symbolic and not any(t.symbolic for t in group):
            continue
        clauses.append("(" + " OR ".join(
            f"{column} ILIKE {params.add(_like_pattern(t.text))}" for t in group) + ")")
    for term in terms:
        if term.negated and (term.symbolic or not only_symbolic):
            clauses.append(f"{column} NOT ILIKE {params.add(_like_pattern(term.text))}")
    return clauses


def _message_filters(query: SearchQuery, params: _Params) -> list[str]:
    clauses: list[str] = []
    if query.roles:
        clauses.append(f"m.role = ANY({params.add(list(query.roles))})")
    if query.states:
        clauses.append(f"m.state = ANY({params.add(list(query.states))})")
    if query.session_id is not None:
        clauses.append(f"m.session_id = {params.add(query.session_id)}")
    if query.date_from is not None:
        clauses.append(f"m.created_at >= {params.add(time_to_text(query.date_from))}")
    if query.date_to is not None:
        clauses.append(f"m.created_at < {params.add(time_to_text(query.date_to))}")
    if query.agent_id is not None or not query.include_archived:
        sub = []
        if query.agent_id is not None:
            sub.append(f"s.agent_id = {params.add(query.agent_id)}")
        if not query.include_archived:
            sub.append("NOT s.archived")
        clauses.append(f"m.session_id IN (SELECT s.id FROM sessions s WHERE {' AND '.join(sub)})")
    return clauses


def _headline_options(marks: tuple[str, str], *, whole: bool = False) -> str:
    def quoted(mark: str) -> str:
        return '"' + mark.replace('"', "").replace(",", "") + '"'

    base = f"StartSel={quoted(marks[0])}, StopSel={quoted(marks[1])}"
    if whole:
        return base + ", HighlightAll=true"
    return (
        f"{base}, MaxWords={SNIPPET_TOKENS}, MinWords={SNIPPET_TOKENS // 2}, ShortWord=1, "
        f'MaxFragments=1, FragmentDelimiter="{ELLIPSIS}"'
    )


def search_postgresql(conn: Connection, query: SearchQuery) -> list[SearchHit]:
    """Run a search on a PostgreSQL connection; hits of every requested kind, best first."""

    def find(terms: Sequence[_Term]) -> list[SearchHit]:
        hits: list[SearchHit] = []
        for kind, search_kind in (("message", _search_messages), ("session", _search_titles),
                                  ("memory", _search_memory)):
            if query.wants(kind):
                hits += search_kind(conn, query, terms)
        return hits

    return best_hits(query, find)


def _search_messages(
    conn: Connection, query: SearchQuery, terms: Sequence[_Term]
) -> list[SearchHit]:
    params = _Params()
    tsq = _tsquery(terms, params)
    if tsq is None:
        return _substring_messages(conn, query, terms)
    where = [f"m.search @@ ({tsq})", *_message_filters(query, params),
             *_substring_conditions(terms, params, "m.content")]
    matches = f"SELECT m.id, m.search FROM messages m WHERE {' AND '.join(where)}"
    size = max(RANK_WINDOW, query.limit)
    window = params.add(size)
    limit = params.add(query.limit)
    common = conn.execute(text(
        f"SELECT count(*) FROM ({matches} LIMIT {window}) AS w"), params.values).scalar_one()
    if common >= size:  # rank the newest matches only
        matches = f"{matches} ORDER BY m.id DESC LIMIT {window}"
    ranked = conn.execute(text(
        f"SELECT w.id, ts_rank(w.search, ({tsq})) AS score FROM ({matches}) AS w"
        f" ORDER BY score DESC, w.id DESC LIMIT {limit}"), params.values).all()
    if not ranked:
        return []
    ids = [int(r[0]) for r in ranked]
    snippet_params = _Params()
    snippet_tsq = _tsquery(terms, snippet_params)
    rows = conn.execute(text(
        "SELECT id, session_id, role, position, ts_headline('simple', "
        f"left(content, {_HEADLINE_CHARS}), ({snippet_tsq}), "
        f"{snippet_params.add(_headline_options(query.highlight))})"
        f" FROM messages WHERE id = ANY({snippet_params.add(ids)})"),
        snippet_params.values).all()
    details = {int(r[0]): r for r in rows}
    return [
        SearchHit(kind="message", session_id=details[mid][1], message_id=mid,
                  role=details[mid][2], snippet=str(details[mid][4]),
                  score=round(float(score), 6), position=details[mid][3])
        for mid, score in ((int(r[0]), r[1]) for r in ranked) if mid in details
    ]


def _substring_messages(
    conn: Connection, query: SearchQuery, terms: Sequence[_Term]
) -> list[SearchHit]:
    """Substring scan for text with no indexable word (newest first)."""
    if all(t.negated for t in terms):
        return []
    params = _Params()
    where = [*_message_filters(query, params),
             *_substring_conditions(terms, params, "m.content", only_symbolic=False)]
    rows = conn.execute(text(
        "SELECT m.id, m.session_id, m.role, m.position, m.content FROM messages AS m"
        f" WHERE {' AND '.join(where)} ORDER BY m.id DESC LIMIT {params.add(query.limit)}"),
        params.values).all()
    return substring_hits(rows, query, terms)


def _ranked_rows(conn: Connection, query: SearchQuery, terms: Sequence[_Term], *,
                 table: str, shown: str, columns: str, equal: list[tuple[str, Any]],
                 whole: bool, more: Sequence[str] = ()) -> list[Any]:
    """The best rows of a title or memory search: ``(id, <columns>, headline, score)``.

    ``table`` is "<name> <alias>", ``shown`` the SQL of the text the headline is cut
    from, ``equal`` the ``column = value`` filters (those with a value apply).
    """
    params = _Params()
    tsq = _tsquery(terms, params)
    if tsq is None:
        return []
    alias = table.split()[1]
    where = [f"{alias}.search @@ ({tsq})", *more]
    where += [f"{column} = {params.add(value)}" for column, value in equal if value is not None]
    return list(conn.execute(text(
        f"SELECT {alias}.id, {columns}, ts_headline('simple', {shown}, ({tsq}),"
        f" {params.add(_headline_options(query.highlight, whole=whole))}),"
        f" ts_rank({alias}.search, ({tsq})) AS score FROM {table}"
        f" WHERE {' AND '.join(where)} ORDER BY score DESC, {alias}.id DESC"
        f" LIMIT {params.add(query.limit)}"), params.values).all())


def _search_titles(
    conn: Connection, query: SearchQuery, terms: Sequence[_Term]
) -> list[SearchHit]:
    rows = _ranked_rows(conn, query, terms, table="sessions s", shown="s.title",
                        columns="s.title", equal=[("s.agent_id", query.agent_id)], whole=True,
                        more=[] if query.include_archived else ["NOT s.archived"])
    return [title_or_memory_hit("session", r[0], r[2], float(r[3]), title=r[1])
            for r in rows]


def _search_memory(
    conn: Connection, query: SearchQuery, terms: Sequence[_Term]
) -> list[SearchHit]:
    rows = _ranked_rows(conn, query, terms, table="memory_entries e",
                        shown=f"left(e.content, {PG_SEARCH_CHARS})", columns="e.session_id",
                        equal=[("e.agent_id", query.agent_id),
                               ("e.session_id", query.session_id)], whole=False)
    return [title_or_memory_hit("memory", r[1], r[2], float(r[3]), memory_id=r[0])
            for r in rows]


def search_team_store(db: Database, query: SearchQuery) -> list[SearchHit]:
    """Run a search on a team-store database (its ``search`` tsvector columns): the same
    query language and hits as SQLite's; a query with more terms than the server plans
    is refused with the sentence SQLite's FTS5 gives."""
    terms = parse_query(query.text)
    if len(terms) > MAX_TERMS_POSTGRESQL:
        raise _too_long(query, terms)
    try:
        with db.read() as conn:
            return search_postgresql(conn, query)
    except StorageError as exc:
        if _TOO_COMPLEX_PG.search(str(exc)):
            raise _too_long(query, terms) from exc
        raise
