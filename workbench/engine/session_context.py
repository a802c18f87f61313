"""A session's context and its agent's long-term memory, read and edited as a whole.

What the desktop's Context panel (and any other front end) needs beyond
:class:`~workbench.engine.memory.Memory`:

* :func:`read_session_context`: one :class:`ContextOverview` with the session's context
  (facts, long-term summary, tasks, tool stats, provider-billed usage), the local token
  count of its active messages, and the memory entries its agent can recall here;
* :func:`update_context`: replace some fields (``facts``, ``summary``, ``tasks``,
  ``system_state``, ``environment``) and leave the others alone, so an edit never undoes
  usage or tool stats a chat turn wrote meanwhile; it returns the context before and
  after, which is what an undo needs;
* :func:`add_facts`, :func:`remove_fact`, :func:`add_task`, :func:`remove_task`: one
  fact or task added or taken out as one step in the store (read, change and write in
  one transaction), so two adds made in quick succession both stay, whatever either
  caller had read before; :func:`change_context` does the same for any change of the
  editable fields;
* :func:`dedupe_session_facts`: drop repeated facts the way compaction does (normalized
  text, first spelling kept, order stable);
* :func:`load_context`: a session's context by id, source id or title, the way seed
  002's ``ContextManager.load`` works: with ``create=True`` a missing session is created
  (titled by the name asked for) and its empty context returned;
* :func:`add_memory_entry`, :func:`delete_memory_entry`, :func:`restore_memory_entry`:
  the agent's long-term memory entries, one at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from workbench.core.compaction import dedupe_facts
from workbench.core.conversation import MemoryEntry, SessionContext, Task, utcnow
from workbench.core.policy import MemoryPolicy
from workbench.engine.workspace import Workspace
from workbench.errors import NotFoundError, RequestError, WorkbenchError

__all__ = [
    "EDITABLE_FIELDS",
    "ContextChange",
    "ContextOverview",
    "add_facts",
    "add_memory_entry",
    "add_task",
    "change_context",
    "dedupe_session_facts",
    "delete_memory_entry",
    "load_context",
    "memory_entries_for",
    "new_task",
    "read_session_context",
    "remove_fact",
    "remove_task",
    "restore_memory_entry",
    "update_context",
]

#: The context fields :func:`update_context` replaces; usage and tool stats are the
#: engine's own bookkeeping and change only through chat turns.
EDITABLE_FIELDS = ("facts", "summary", "tasks", "system_state", "environment")


@dataclass
class ContextOverview:
    """Everything a viewer shows about one session's memory beyond its messages."""

    session_id: int
    title: str
    agent_id: int
    agent_name: str
    context: SessionContext
    local_tokens: int  # cached token counts of the active messages, summed
    active_messages: int
    namespace: str  # the namespace recall uses in this session (the policy's)
    entries: list[MemoryEntry] = field(default_factory=list)


@dataclass
class ContextChange:
    """A context as it was before a change and as it is after; ``removed`` lists the
    facts a de-duplication dropped."""

    session_id: int
    before: SessionContext
    after: SessionContext
    removed: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.before.to_json() != self.after.to_json()


def load_context(ws: Workspace, session: str | int, *, create: bool = False) -> SessionContext:
    """The context of ``session`` (an id, source id or title).

    A missing session raises :class:`~workbench.errors.NotFoundError`, unless ``create``
    is true: then a session titled ``session`` is created and its (empty) context
    returned, as seed 002's ``load`` "creates new if not exists".
    """
    try:
        info = ws.repo.find_session(session)
    except NotFoundError:
        if not create:
            raise
        info = ws.repo.create_session(str(session))
    return ws.repo.get_context(info.id)


def _namespace_name(policy: MemoryPolicy) -> str:
    """The policy's namespace as stored (a callable, from the Python API, shows as
    ``default``)."""
    return policy.namespace if isinstance(policy.namespace, str) else "default"


def _policy(ws: Workspace, session_id: int) -> MemoryPolicy:
    info = ws.repo.get_session(session_id)
    agent = ws.repo.get_agent(info.agent_id)
    overrides = info.overrides.get("memory_policy") if info.overrides else None
    try:
        return MemoryPolicy.from_dict(agent.memory_policy, overrides)
    except WorkbenchError:
        return MemoryPolicy()


def memory_entries_for(ws: Workspace, session_id: int) -> list[MemoryEntry]:
    """The entries recall may use in a session: its agent's ``agent``-scope entries and
    the ``session``-scope entries of this session, newest first."""
    repo = ws.repo
    info = repo.get_session(session_id)
    entries = repo.list_memory_entries(agent_id=info.agent_id, scope="agent")
    entries += repo.list_memory_entries(
        agent_id=info.agent_id, scope="session", session_id=session_id
    )
    entries.sort(key=lambda e: (e.created_at is not None, e.created_at, e.id), reverse=True)
    return entries


def read_session_context(ws: Workspace, session_id: int) -> ContextOverview:
    """The session's context, its local token count and its agent's memory entries.

    ``ws`` is an open :class:`~workbench.engine.workspace.Workspace`; an unknown
    session raises :class:`~workbench.errors.NotFoundError`.
    """
    repo = ws.repo
    info = repo.get_session(session_id)
    agent = repo.get_agent(info.agent_id)
    return ContextOverview(
        session_id=session_id,
        title=info.title,
        agent_id=info.agent_id,
        agent_name=agent.name,
        context=repo.get_context(session_id),
        local_tokens=repo.token_total(session_id, states=("active",)),
        active_messages=repo.message_count(session_id, states=("active",)),
        namespace=_namespace_name(_policy(ws, session_id)),
        entries=memory_entries_for(ws, session_id),
    )


def _check_fields(fields: dict[str, Any]) -> None:
    unknown = sorted(set(fields) - set(EDITABLE_FIELDS))
    if unknown:
        raise RequestError(
            f"The session context has no editable field {unknown[0]!r} "
            f"(editable: {', '.join(EDITABLE_FIELDS)})."
        )
    if "facts" in fields:
        facts = fields["facts"]
        if isinstance(facts, str) or not all(isinstance(f, str) for f in facts):
            raise RequestError("Facts must be a list of texts.")
        fields["facts"] = list(facts)
    if "summary" in fields and not isinstance(fields["summary"], str):
        raise RequestError("The long-term summary must be text.")
    if "tasks" in fields:
        tasks = list(fields["tasks"])
        for task in tasks:
            if not isinstance(task, Task):
                raise RequestError(f"A task must be a Task, not {type(task).__name__}.")
            if task.progress is not None and not 0.0 <= task.progress <= 1.0:
                raise RequestError(
                    f"Task {task.id!r} has progress {task.progress}, outside 0 to 1."
                )
        fields["tasks"] = [replace(t) for t in tasks]
    for name in ("system_state", "environment"):
        if name in fields and not isinstance(fields[name], dict):
            raise RequestError(f"The context's {name} must be a JSON object.")


def update_context(ws: Workspace, session_id: int, **fields: Any) -> ContextChange:
    """Replace the given fields of a session's context; the others stay as stored.

    Fields: ``facts`` (list of str), ``summary`` (str), ``tasks`` (list of
    :class:`~workbench.core.conversation.Task`), ``system_state`` and ``environment``
    (dicts). Returns the context before and after the change.
    """
    _check_fields(fields)
    repo = ws.repo
    before = repo.get_context(session_id)
    after = before.copy()
    for name, value in fields.items():
        setattr(after, name, value)
    if after.to_json() != before.to_json():
        repo.set_context(session_id, after)
    return ContextChange(session_id, before, repo.get_context(session_id))


def change_context(ws: Workspace, session_id: int,
                   change: Callable[[SessionContext], None]) -> ContextChange:
    """Let ``change`` modify the session's context as it is stored now, and write it
    back, as one step (one transaction): a change computed here never undoes one made
    since the caller last read the context (an edit or a delete of a fact or a task
    made right after an add). Only the fields :func:`update_context` replaces may
    change; changing others (usage, tool stats) raises :class:`RequestError` and writes
    nothing."""

    def checked(context: SessionContext) -> None:
        before = context.copy()
        change(context)
        editable = {name: getattr(context, name) for name in EDITABLE_FIELDS}
        _check_fields(editable)
        for name, value in editable.items():
            setattr(context, name, value)
        for name in ("token_usage", "tool_stats"):
            if getattr(context, name) != getattr(before, name):
                raise RequestError(f"The context's {name} is the engine's own bookkeeping "
                                   "and cannot be edited; nothing was changed.")

    before, after = ws.repo.change_context(session_id, checked)
    return ContextChange(session_id, before, after)



def add_facts(ws: Workspace, session_id: int, facts: Sequence[str]) -> ContextChange:
    """Append ``facts`` (texts, spaces folded) to the session's facts in one step: the
    facts stored at that moment stay, even ones added since the caller last read them.
    Empty texts are skipped."""
    if isinstance(facts, str) or not all(isinstance(f, str) for f in facts):
        raise RequestError("Facts must be a list of texts.")
    adding = [" ".join(f.split()) for f in facts]
    adding = [f for f in adding if f]

    def change(context: SessionContext) -> None:
        context.facts = [*context.facts, *adding]

    return change_context(ws, session_id, change)


def remove_fact(ws: Workspace, session_id: int, fact: str) -> ContextChange:
    """Take the last fact reading ``fact`` out of the session's facts in one step (the
    inverse of :func:`add_facts` for one fact); nothing changes when there is none."""

    def change(context: SessionContext) -> None:
        facts = list(context.facts)
        for index in range(len(facts) - 1, -1, -1):
            if facts[index] == fact:
                del facts[index]
                context.facts = facts
                return

    return change_context(ws, session_id, change)


def add_task(ws: Workspace, session_id: int, task: str | Task) -> tuple[ContextChange, Task]:
    """Append a task in one step: a description becomes a new pending task, a
    :class:`~workbench.core.conversation.Task` is put back as it was (with a new id if
    its id is taken meanwhile). Returns the change and the task as stored."""
    if isinstance(task, str):
        description = " ".join(task.split())
        if not description:
            raise RequestError("A task needs a description.")
    elif not isinstance(task, Task):
        raise RequestError(f"A task must be text or a Task, not {type(task).__name__}.")
    added: list[Task] = []

    def change(context: SessionContext) -> None:
        tasks = list(context.tasks)
        if isinstance(task, str):
            made = new_task(description, existing=tasks)
        elif any(t.id == task.id for t in tasks):
            made = replace(new_task(task.description, existing=tasks), status=task.status,
                           progress=task.progress)
        else:
            made = replace(task)
        added.append(made)
        context.tasks = [*tasks, made]

    result = change_context(ws, session_id, change)
    return result, added[-1]


def remove_task(ws: Workspace, session_id: int, task_id: str) -> ContextChange:
    """Take the task with id ``task_id`` out of the session's tasks in one step (the
    inverse of :func:`add_task`); nothing changes when there is none."""

    def change(context: SessionContext) -> None:
        context.tasks = [t for t in context.tasks if t.id != task_id]

    return change_context(ws, session_id, change)


def dedupe_session_facts(ws: Workspace, session_id: int) -> ContextChange:
    """Drop repeated (and empty) facts: the first spelling of each stays, in order."""
    repo = ws.repo
    before = repo.get_context(session_id)
    kept, removed = dedupe_facts(before.facts)
    if not removed:
        return ContextChange(session_id, before, before.copy())
    change = update_context(ws, session_id, facts=kept)
    change.removed = removed
    return change


def add_memory_entry(
    ws: Workspace,
    session_id: int,
    content: str,
    *,
    scope: str | None = None,
    namespace: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> tuple[MemoryEntry, bool]:
    """Add a long-term memory entry for the session's agent; returns it and whether it
    is new (the same text in the same scope and namespace is stored once).

    ``scope="session"`` ties it to this session; ``scope`` and ``namespace`` default to
    the ones the session's memory policy recalls with, and the policy's ``metadata``
    goes into the entry's.
    """
    text = content.strip()
    if not text:
        raise RequestError("A memory entry needs some text.")
    info = ws.repo.get_session(session_id)
    policy = _policy(ws, session_id)
    scope = scope or policy.scope
    metadata = {**policy.metadata, **(metadata or {})}
    space = (namespace or "").strip() or _namespace_name(policy)
    return ws.repo.add_memory_entry(
        info.agent_id,
        text,
        scope=scope,
        namespace=space,
        session_id=session_id if scope == "session" else None,
        metadata=metadata,
    )


def delete_memory_entry(ws: Workspace, entry_id: int) -> MemoryEntry:
    """Delete a memory entry; returns it as it was (for :func:`restore_memory_entry`)."""
    entry = ws.repo.get_memory_entry(entry_id)
    ws.repo.delete_memory_entry(entry_id)
    return entry


def restore_memory_entry(ws: Workspace, entry: MemoryEntry) -> MemoryEntry:
    """Store a deleted entry again (same agent, scope, namespace, session, text and
    metadata; it gets a new id)."""
    restored, _new = ws.repo.add_memory_entry(
        entry.agent_id,
        entry.content,
        scope=entry.scope,
        namespace=entry.namespace,
        session_id=entry.session_id,
        metadata=dict(entry.metadata),
    )
    return restored


def new_task(description: str, *, status: str = "pending", progress: float | None = None,
             existing: Sequence[Task] = ()) -> Task:
    """A task with an id not used by ``existing``, stamped now."""
    taken = {t.id for t in existing}
    base = "-".join(description.lower().split()[:4]) or "task"
    ident, n = base, 1
    while ident in taken:
        n += 1
        ident = f"{base}-{n}"
    now = utcnow()
    return Task(id=ident, description=description, status=status, progress=progress,
                created_at=now, updated_at=now)
