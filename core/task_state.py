"""The typed task state and the pure reducer that folds the event journal into it.

Every change to a task is an event in an append-only journal; ``rebuild(events)``
replays it into a ``TaskState``. The reducer is pure (it copies what it changes
and never mutates its input) so the same journal always gives the same state,
which is what makes the seal recomputable after a crash.

Unknown event kinds are ignored (they stay in the journal), so features added
later never break replay of an older bosun's journal or the other way round.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

MEMORY_SCOPES = ("task", "project", "agent", "global")
OPEN = "open"

# event kinds whose effect changes the seal (head, zone B or tail)
SEAL_KINDS = frozenset(
    {
        "task_started",
        "constraint_added",
        "decision_added",
        "constraint_revised",
        "decision_revised",
        "plan_set",
        "head_recorded",
        "rules_recorded",
        "contract_recorded",
    }
)


@dataclass(frozen=True)
class Event:
    """One journal entry. ``seq`` is 1-based and gap-free per task; the task's version is its last seq."""

    task_id: str
    seq: int
    kind: str
    payload: Mapping[str, Any]
    agent: str | None = None
    created_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "seq": self.seq,
            "kind": self.kind,
            "payload": dict(self.payload),
            "agent": self.agent,
            "created_at": self.created_at,
        }


@dataclass(frozen=True)
class SealRecord:
    """The seal and its three zone hashes as of one version; kept so an old seal can be judged."""

    version: int
    seal: str
    head_hash: str
    zoneB_hash: str
    tail_hash: str
    n_constraints: int
    n_decisions: int


@dataclass
class TaskState:
    """Everything known about one task (OSIRIS section 5), as of ``version``."""

    task_id: str
    objective: str = ""
    status: str = OPEN  # open | done | failed | abandoned | ...
    version: int = 0
    constraints: list[str] = field(default_factory=list)  # append-only (revisions are journaled)
    decisions: list[str] = field(default_factory=list)  # append-only, pinned verbatim
    plan: list[str] = field(default_factory=list)  # the global plan: ordered step texts
    completed: list[str] = field(default_factory=list)
    active: list[str] = field(default_factory=list)
    files: dict[str, dict[str, Any]] = field(default_factory=dict)  # path -> {sha256, mtime, size, ref, reads}
    tool_results: dict[str, dict[str, Any]] = field(default_factory=dict)  # "tool:args_hash" -> last result
    failures: dict[str, dict[str, Any]] = field(default_factory=dict)  # error_signature -> {.., attempts}
    lessons: list[str] = field(default_factory=list)
    handoffs: dict[str, dict[str, Any]] = field(default_factory=dict)
    budget: dict[str, Any] = field(default_factory=dict)  # declared limits: tokens, cost_usd
    consumed_tokens: int = 0  # tokens of tool output that entered the agent's context
    offloaded_tokens: int = 0  # tokens moved to refs instead of the context
    dropped_tokens: int = 0  # tokens the agent confirmed it evicted (drop receipts)
    memory: dict[str, dict[str, Any]] = field(default_factory=dict)  # "scope:key" -> {scope, key, text}
    flags: dict[str, Any] = field(default_factory=dict)  # state_flag, e.g. tests_passed
    head: dict[str, Any] | None = None  # {sha256, tokens, ref} of the system prompt head
    rules: dict[str, Any] | None = None  # {sha256, tokens, ref} of the rules carried with the head
    contract: dict[str, Any] | None = None  # {sha256, tokens, ref} of the client's tool contract
    declared: dict[str, int] = field(default_factory=dict)  # agent-declared token counts by part
    revisions: list[dict[str, Any]] = field(default_factory=list)  # {collection, index, version, reason}
    seals: list[SealRecord] = field(default_factory=list)  # one per version that changed the seal
    agents: list[str] = field(default_factory=list)  # agents seen, in first-seen order
    event_counts: dict[str, int] = field(default_factory=dict)
    created_at: float = 0.0
    updated_at: float = 0.0

    @property
    def remaining(self) -> list[str]:
        done = set(self.completed) | set(self.active)
        return [s for s in self.plan if s not in done]

    @property
    def closed(self) -> bool:
        return self.status != OPEN

    @property
    def seal(self) -> str:
        return self.seals[-1].seal if self.seals else ""

    def refs(self) -> list[str]:
        """Every content address this task's state points at (sorted, unique)."""
        out: set[str] = set()
        for group in (self.files.values(), self.tool_results.values(), self.failures.values()):
            for item in group:
                ref = item.get("ref")
                if isinstance(ref, str) and ref:
                    out.add(ref)
        for part in (self.head, self.rules, self.contract):
            if part and part.get("ref"):
                out.add(str(part["ref"]))
        return sorted(out)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (used by resume, tests and the replay check)."""
        return {
            "task_id": self.task_id,
            "objective": self.objective,
            "status": self.status,
            "version": self.version,
            "constraints": list(self.constraints),
            "decisions": list(self.decisions),
            "plan": {"steps": list(self.plan), "completed": list(self.completed),
                     "active": list(self.active), "remaining": self.remaining},
            "files": copy.deepcopy(self.files),
            "tool_results": copy.deepcopy(self.tool_results),
            "failures": copy.deepcopy(self.failures),
            "lessons": list(self.lessons),
            "handoffs": copy.deepcopy(self.handoffs),
            "budget": dict(self.budget),
            "consumed_tokens": self.consumed_tokens,
            "offloaded_tokens": self.offloaded_tokens,
            "dropped_tokens": self.dropped_tokens,
            "memory": copy.deepcopy(self.memory),
            "flags": dict(self.flags),
            "head": dict(self.head) if self.head else None,
            "rules": dict(self.rules) if self.rules else None,
            "contract": dict(self.contract) if self.contract else None,
            "declared": dict(self.declared),
            "revisions": copy.deepcopy(self.revisions),
            "seal": self.seal,
            "agents": list(self.agents),
        }


def _clone(state: TaskState) -> TaskState:
    """Shallow-copy every container so the reducer can change the copy only.

    Values inside the containers (dicts of files, results ...) are replaced, never
    mutated in place, so a shallow copy is enough to keep the input untouched.
    """
    return TaskState(
        task_id=state.task_id, objective=state.objective, status=state.status, version=state.version,
        constraints=list(state.constraints), decisions=list(state.decisions), plan=list(state.plan),
        completed=list(state.completed), active=list(state.active), files=dict(state.files),
        tool_results=dict(state.tool_results), failures=dict(state.failures), lessons=list(state.lessons),
        handoffs=dict(state.handoffs), budget=dict(state.budget), consumed_tokens=state.consumed_tokens,
        offloaded_tokens=state.offloaded_tokens, dropped_tokens=state.dropped_tokens, memory=dict(state.memory),
        flags=dict(state.flags), head=state.head, rules=state.rules, contract=state.contract,
        declared=dict(state.declared), revisions=list(state.revisions), seals=list(state.seals),
        agents=list(state.agents), event_counts=dict(state.event_counts), created_at=state.created_at,
        updated_at=state.updated_at,
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


def _texts(value: Any) -> list[str]:
    if not isinstance(value, list | tuple):
        return []
    return [_text(v) for v in value if _text(v).strip()]


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _part(payload: Mapping[str, Any]) -> dict[str, Any]:
    return {"sha256": _text(payload.get("sha256")), "tokens": _int(payload.get("tokens")),
            "ref": payload.get("ref")}


def apply_event(state: TaskState, event: Event) -> TaskState:
    """The state after ``event``; ``state`` itself is left unchanged."""
    s = _clone(state)
    _apply(s, event)
    return s


def _apply(s: TaskState, event: Event) -> None:
    """Fold ``event`` into ``s`` in place (``s`` must be a private copy: see ``_clone``)."""
    p = event.payload
    k = event.kind
    s.version = event.seq
    s.updated_at = event.created_at
    s.event_counts[k] = s.event_counts.get(k, 0) + 1
    if event.agent and event.agent not in s.agents:
        s.agents.append(event.agent)

    if k == "task_started":
        s.objective = _text(p.get("objective"))
        s.constraints = _texts(p.get("constraints"))
        s.decisions = _texts(p.get("decisions"))
        s.plan = list(dict.fromkeys(_texts(p.get("plan"))))
        budget = p.get("budget")
        s.budget = dict(budget) if isinstance(budget, Mapping) else {}
        s.created_at = event.created_at
    elif k == "constraint_added":
        s.constraints.append(_text(p.get("text")))
    elif k == "decision_added":
        s.decisions.append(_text(p.get("text")))
    elif k in ("constraint_revised", "decision_revised"):
        items = s.constraints if k == "constraint_revised" else s.decisions
        index = _int(p.get("index"))
        if 0 <= index < len(items):
            items[index] = _text(p.get("text"))
            s.revisions.append({"collection": "constraints" if k == "constraint_revised" else "decisions",
                                "index": index, "version": event.seq, "reason": _text(p.get("reason"))})
    elif k == "plan_set":
        s.plan = list(dict.fromkeys(_texts(p.get("steps"))))
        s.active = [a for a in s.active if a in s.plan]
    elif k == "step_started":  # a step outside the global plan is tracked, but never changes zone B
        step = _text(p.get("step"))
        if step not in s.active:
            s.active.append(step)
        if step in s.completed:
            s.completed.remove(step)
    elif k == "step_completed":
        step = _text(p.get("step"))
        if step in s.active:
            s.active.remove(step)
        if step not in s.completed:
            s.completed.append(step)
    elif k == "head_recorded":
        s.head = _part(p)
    elif k == "rules_recorded":
        s.rules = _part(p)
    elif k == "contract_recorded":
        s.contract = _part(p)
    elif k == "memory_added":
        scope = _text(p.get("scope")) or "task"
        key = _text(p.get("key"))
        s.memory[f"{scope}:{key}"] = {"scope": scope, "key": key, "text": _text(p.get("text"))}
    elif k == "lesson_added":
        s.lessons.append(_text(p.get("text")))
    elif k == "task_closed":
        s.status = _text(p.get("status")) or "done"
    elif k == "context_declared":
        for name, tokens in dict(p.get("parts") or {}).items():
            s.declared[_text(name)] = max(0, _int(tokens))
    elif k == "tool_result":
        key = f"{_text(p.get('tool'))}:{_text(p.get('args_hash'))}"
        tokens = _int(p.get("tokens"))
        s.tool_results[key] = {name: p.get(name) for name in
                               ("tool", "args_hash", "args", "sha256", "bytes", "tokens", "ref", "offloaded",
                                "result_signature")} | {"seq": event.seq}
        if p.get("offloaded"):
            s.offloaded_tokens += tokens
            s.consumed_tokens += _int(p.get("stub_tokens"))  # only the stub entered the context
        else:
            s.consumed_tokens += tokens
    elif k == "tool_failure":
        sig = _text(p.get("error_signature"))
        prev = s.failures.get(sig, {})
        s.failures[sig] = {"tool": p.get("tool"), "args_hash": p.get("args_hash"), "error": p.get("error"),
                           "ref": p.get("ref"), "attempts": _int(prev.get("attempts")) + 1,
                           "lesson": prev.get("lesson"), "seq": event.seq}
    elif k == "dropped":
        tokens = _int(p.get("tokens"))
        s.dropped_tokens += tokens
        s.consumed_tokens = max(0, s.consumed_tokens - tokens)
    elif k == "file_read":
        path = _text(p.get("path"))
        prev = s.files.get(path, {})
        s.files[path] = {"sha256": p.get("sha256"), "mtime": p.get("mtime"), "size": p.get("size"),
                         "ref": p.get("ref"), "reads": _int(prev.get("reads")) + 1, "seq": event.seq}
    elif k == "state_flag":
        s.flags[_text(p.get("name"))] = p.get("value")
    elif k == "handoff_created":
        hid = _text(p.get("handoff_id"))
        s.handoffs[hid] = {"objective": p.get("objective"), "status": "created", "agent": None,
                           "passed": None, "seq": event.seq}
    elif k in ("handoff_accepted", "handoff_completed"):
        hid = _text(p.get("handoff_id"))
        prev = dict(s.handoffs.get(hid, {"objective": None}))
        prev["agent"] = p.get("agent")
        if k == "handoff_accepted":
            prev["status"] = "accepted"
        else:
            prev["status"] = "completed"
            prev["passed"] = bool(p.get("passed"))
        s.handoffs[hid] = prev
    # any other kind (precheck_verdict, future kinds) is journaled and ignored here

    if k in SEAL_KINDS:
        from bosun.core.seal import seal_record  # local: seal.py imports this module's types

        record = seal_record(s)
        if not s.seals or s.seals[-1].seal != record.seal:
            s.seals.append(record)


def rebuild(events: Iterable[Event], task_id: str | None = None) -> TaskState:
    """Replay a journal (in seq order) into the task's state."""
    state: TaskState | None = None
    for event in events:
        if state is None:
            state = TaskState(task_id=task_id or event.task_id)
        _apply(state, event)  # the intermediate states are never seen: fold in place
    if state is None:
        if task_id is None:
            raise ValueError("rebuild needs at least one event or a task_id")
        state = TaskState(task_id=task_id)
    return state
