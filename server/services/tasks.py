"""TaskService: the one place that reads and writes task journals for every tool.

plan, observe, precheck and handoff all go through it, so they see one state
per task. It keeps each task's folded state warm in memory, catches up from the
journal on every read (another process may share the database), and serialises
writers per task with a lock; the store's gap-free seq check is the final word
on concurrency, so a stale ``expected_version`` is a ``VersionConflict`` even
across processes.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from bosun.core.errors import Conflict, InvalidInput, NotFound, StorageError
from bosun.core.redact import Redactor, redact_value
from bosun.core.task.manifest import build_manifest
from bosun.core.task.replay import apply_event, rebuild
from bosun.core.task.seal import SEAL_PREFIX, norm, parse_seal, text_sha, verdict
from bosun.core.task.state import Event, TaskState
from bosun.core.task.volatile import find_volatile
from bosun.core.tokens import estimate_tokens
from bosun.server.services.changes import ChangeListeners
from bosun.store.idempotency import CALL_KEY
from bosun.store.tasks import NewEvent, TaskStore

if TYPE_CHECKING:
    from bosun.server.services.ports import OpenStores

HEAD_KINDS = {"head": "head_recorded", "contract": "contract_recorded", "rules": "rules_recorded"}
UNVERSIONED_RETRIES = 64  # an unversioned write catches up and retries this often before it gives up
MAX_TEXT = 4000  # characters in one constraint / decision / step / objective


class VersionConflict(Conflict):
    """A write based on a stale version: nothing was applied; carries the current version and seal."""

    def __init__(self, task_id: str, expected: int, current: int, seal: str) -> None:
        self.task_id = task_id
        self.expected = expected
        self.current = current
        self.seal = seal
        super().__init__(
            f"conflict: task {task_id} is at version {current} but this update was based on version {expected}; "
            f"nothing was applied. current_version={current} seal={SEAL_PREFIX}{seal}. Re-read the task "
            f"(plan mode='resume' or 'status') and retry with based_on_version={current}"
        )


def check_text(field: str, value: Any, allow_empty: bool = False) -> str:
    """A caller text, normalised as the seal hashes it; InvalidInput naming ``field`` otherwise."""
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a string, got {type(value).__name__}")
    text = norm(value)
    if not text and not allow_empty:
        raise InvalidInput(field, "must not be empty")
    if len(text) > MAX_TEXT:
        raise InvalidInput(field, f"is {len(text)} characters; at most {MAX_TEXT}",
                           "a short statement; store long text with observe and refer to its ref")
    return text


def check_task_id(task_id: Any) -> str:
    if not isinstance(task_id, str) or not task_id.strip():
        raise InvalidInput("task_id", "must be a non-empty string", "the task= value of the manifest")
    return task_id.strip()


class TaskService:
    """Task journals for the whole process (``engine.tasks``)."""

    def __init__(self, stores: OpenStores, redactor: Redactor, store: TaskStore | None = None) -> None:
        self.stores = stores
        self._store = store
        self._states: dict[str, TaskState] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._setup_lock = asyncio.Lock()
        self._ready = False
        # secrets are scrubbed before anything is hashed or journaled: a token pasted into a
        # constraint or a handoff result must not land in the store or the seal
        self.redactor = redactor
        # told the task id after every committed write (start, append): subscriptions, the dashboard
        self.changes = ChangeListeners("task")

    async def store(self) -> TaskStore:
        if not self._ready:
            async with self._setup_lock:
                if not self._ready:
                    if self._store is None:
                        self._store = self.stores.store_set.tasks  # SQLite or PostgreSQL (store/backend.py)
                    await self._store.setup()
                    self._ready = True
        assert self._store is not None
        return self._store

    def _lock(self, task_id: str) -> asyncio.Lock:
        lock = self._locks.get(task_id)
        if lock is None:
            lock = self._locks[task_id] = asyncio.Lock()
        return lock

    async def aclose(self) -> None:
        self._states.clear()
        closer = getattr(self._store, "aclose", None)
        if closer is not None:
            await closer()

    # -- reading ---------------------------------------------------------------------------
    async def _fresh(self, task_id: str) -> TaskState:
        """The cached state, caught up with the journal if another process appended to it."""
        store = await self.store()
        state = self._states.get(task_id)
        if state is not None:
            if await store.version(task_id) == state.version:  # the hot path: no thread hop
                return state
            new = await store.events(task_id, state.version)
            for ev in new:
                state = apply_event(state, ev)
        else:
            new = await store.events(task_id, 0)
            if not new:
                raise NotFound("task", task_id, "start one with plan(mode='start') or check the task= value")
            state = rebuild(new, task_id)
        cached = self._states.get(task_id)
        if cached is None or cached.version <= state.version:  # a slow reader never rolls the cache back
            self._states[task_id] = state
        return state

    async def get(self, task_id: str) -> TaskState:
        return await self._fresh(check_task_id(task_id))

    async def events(self, task_id: str, since_seq: int = 0) -> list[Event]:
        task_id = check_task_id(task_id)
        store = await self.store()
        out = await store.events(task_id, max(0, int(since_seq)))
        if not out and since_seq <= 0:
            raise NotFound("task", task_id, "start one with plan(mode='start')")
        return out

    async def check_seal(self, task_id: str, seal: str | None, state: TaskState | None = None) -> dict[str, Any]:
        """The drift verdict block: ``{verdict, seal, version, semantic_break?, cause?, ...}``.

        Pass ``state`` when you already hold a fresh one (saves the version check).
        """
        if seal is not None:
            parse_seal(seal)  # a malformed seal is the caller's error, even for an unknown task
        return verdict(state if state is not None else await self.get(task_id), seal)

    async def manifest(self, task_id: str) -> str:
        state = await self.get(task_id)
        if state.closed:
            raise InvalidInput("task_id", f"task {task_id} is closed ({state.status}); a closed task has no "
                               "manifest to carry", "plan(mode='status') for its final state, or start a new task")
        return build_manifest(state)

    # -- writing ---------------------------------------------------------------------------
    async def start(
        self,
        objective: str,
        constraints: Sequence[str] = (),
        decisions: Sequence[str] = (),
        plan: Sequence[str] = (),
        budget: Mapping[str, Any] | None = None,
        agent: str | None = None,
        task_id: str | None = None,
        extra: Sequence[tuple[str, Mapping[str, Any]]] = (),
    ) -> TaskState:
        """Create a task; ``extra`` events (lessons, memory, rules ...) land in the same statement."""
        payload: dict[str, Any] = {
            "objective": check_text("objective", objective),
            "constraints": [check_text(f"constraints[{i}]", c) for i, c in enumerate(constraints)],
            "decisions": [check_text(f"decisions[{i}]", d) for i, d in enumerate(decisions)],
            "plan": [check_text(f"plan[{i}]", s) for i, s in enumerate(plan)],
            "budget": dict(budget or {}),
        }
        payload = self._scrub(payload)
        extra = [(k, self._scrub(p)) for k, p in extra]
        agent = self._scrub_agent(agent)
        tid = check_task_id(task_id) if task_id is not None else "t_" + secrets.token_hex(6)
        store = await self.store()
        async with self._lock(tid):
            try:
                events = await store.append(
                    tid, [NewEvent("task_started", payload, agent)] + [NewEvent(k, dict(p), agent) for k, p in extra], 0,
                    _call_key(),
                )
            except Conflict as exc:
                raise InvalidInput("task_id", f"task {tid} already exists", "omit task_id to get a fresh one") from exc
            state = rebuild(events, tid)
            self._states[tid] = state
            _note_call(tid, state.version)
        self.changes.notify(tid)
        return state

    async def append(
        self,
        task_id: str,
        kind: str,
        payload: Mapping[str, Any],
        agent: str | None = None,
        expected_version: int | None = None,
    ) -> TaskState:
        """Append one event; with ``expected_version``, a stale version raises VersionConflict."""
        return await self.append_many(task_id, [(kind, payload)], agent=agent, expected_version=expected_version)

    async def append_many(
        self,
        task_id: str,
        items: Iterable[tuple[str, Mapping[str, Any]]],
        agent: str | None = None,
        expected_version: int | None = None,
        scrubbed: bool = False,
    ) -> TaskState:
        """Append several events in one statement (all or nothing).

        ``scrubbed``: the caller built every payload from values it already redacted (observe
        does, for its per-result event): the journal then skips its own pass over them.
        """
        task_id = check_task_id(task_id)
        agent = self._scrub_agent(agent)
        batch = []
        for kind, payload in items:
            if not isinstance(kind, str) or not kind:
                raise InvalidInput("kind", "must be a non-empty event kind")
            if kind == "task_started":
                raise InvalidInput("objective", "is immutable once the task started", "start a new task instead")
            if not isinstance(payload, Mapping):
                raise InvalidInput("payload", f"must be an object, got {type(payload).__name__}")
            batch.append(NewEvent(kind, dict(payload) if scrubbed else self._scrub(payload), agent))
        if expected_version is not None and (not isinstance(expected_version, int) or expected_version < 1):
            raise InvalidInput("based_on_version", f"must be a version >= 1, got {expected_version!r}",
                               "the v= value of your manifest")
        store = await self.store()
        async with self._lock(task_id):
            # the cache is authoritative for this process's writes; a write from another process makes the
            # insert below fail (gap-free seq), and then we catch up
            state = self._states.get(task_id) or await self._fresh(task_id)
            if state.closed:
                raise InvalidInput("task_id", f"task {task_id} is closed ({state.status}); it takes no more updates",
                                   "start a new task")
            if expected_version is not None and expected_version != state.version:
                state = await self._fresh(task_id)  # another daemon may have written: judge on the journal
                if expected_version != state.version:
                    raise VersionConflict(task_id, expected_version, state.version, state.seal)
            if not batch:
                return state
            key = _call_key()
            attempts = 0
            while True:
                try:
                    events = await store.append(task_id, batch, state.version, key)
                    break
                except Conflict as exc:
                    # another process appended in between: catch up and report the real version
                    state = await self._fresh(task_id)
                    attempts += 1
                    if expected_version is not None:
                        raise VersionConflict(task_id, expected_version, state.version, state.seal) from exc
                    if state.closed:
                        raise InvalidInput("task_id", f"task {task_id} is closed ({state.status}); "
                                           "it takes no more updates", "start a new task") from exc
                    if attempts >= UNVERSIONED_RETRIES:  # a task written this fast by others: say so, lose nothing
                        raise StorageError(f"append to task {task_id}",
                                           f"{attempts} writes by other daemons landed first", True,
                                           "call again") from exc
            for ev in events:
                state = apply_event(state, ev)
            self._states[task_id] = state
            _note_call(task_id, state.version)
        self.changes.notify(task_id)
        return state

    def _scrub_agent(self, agent: str | None) -> str | None:
        """The agent name is caller text like any other: it lands in task_events.agent and in snapshots."""
        return self.redactor.scrub(agent) if isinstance(agent, str) else agent

    def _scrub(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        scrubbed = redact_value(dict(payload), self.redactor)
        assert isinstance(scrubbed, dict)
        return scrubbed

    async def head_event(
        self, state: TaskState, kind: str, text: str
    ) -> tuple[tuple[str, dict[str, Any]] | None, dict[str, Any]]:
        """Store a head/rules/contract text as a ref and prepare its journal event (None when unchanged).

        Split from ``record_head`` so a caller can journal it atomically with other events.
        """
        if kind not in HEAD_KINDS:
            raise InvalidInput("kind", f"unknown head kind {kind!r}", ", ".join(HEAD_KINDS))
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput("text", "must be the non-empty text of the " + kind)
        text = self.redactor.scrub(text)
        canonical = norm(text)
        digest = text_sha(text)
        tokens = estimate_tokens(canonical)
        found = find_volatile(text)
        current = {"head": state.head, "contract": state.contract, "rules": state.rules}[kind]
        changed = not current or current.get("sha256") != digest
        ref = await self.stores.refs.put(canonical.encode("utf-8"), "text/plain; charset=utf-8")
        event = (HEAD_KINDS[kind], {"sha256": digest, "tokens": tokens, "ref": ref,
                                    "volatile_count": len(found)}) if changed else None
        report = {"kind": kind, "ref": ref, "sha256": digest, "tokens": tokens, "changed": changed,
                  "volatile": [v.to_dict() for v in found], "volatile_count": len(found)}
        return event, report

    async def record_head(self, task_id: str, kind: str, text: str, agent: str | None = None) -> dict[str, Any]:
        """Record the system head, rules or tool contract: store it as a ref, journal it, report volatile tokens.

        Returns ``{kind, ref, sha256, tokens, changed, volatile: [{kind, text, start, end, line, column}],
        volatile_count, seal, version}``. Recording the same text again appends nothing.
        """
        state = await self.get(task_id)
        event, report = await self.head_event(state, kind, text)
        if event is not None:
            state = await self.append(task_id, event[0], event[1], agent=agent)
        report.update(seal=SEAL_PREFIX + state.seal, version=state.version)
        return report

    async def list_tasks(self, status: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        store = await self.store()
        return [{"task_id": r.task_id, "objective": r.objective, "status": r.status, "version": r.version}
                for r in await store.list_tasks(status, limit)]


def _call_key() -> str | None:
    """The idempotency key to journal with this write: the call's key, on its first journal write only.

    A call that writes twice (a head recorded, then the update) records its key with the first
    write; the key then answers for the call as a whole."""
    current = CALL_KEY.get()
    return current.key if current is not None and not current.used else None


def _note_call(task_id: str, version: int) -> None:
    current = CALL_KEY.get()
    if current is not None and not current.used:
        current.task_id, current.version = task_id, version
