"""The pure reducer that folds a task's event journal into its ``TaskState``.

Every change to a task is an event in an append-only journal; ``rebuild(events)``
replays it into a ``TaskState``. The reducer is pure (it copies what it changes
and never mutates its input) so the same journal always gives the same state,
which is what makes the seal recomputable after a crash.

Unknown event kinds are ignored (they stay in the journal), so features added
later never break replay of an older bosun's journal or the other way round.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from bosun.core.task.seal import seal_record
from bosun.core.task.state import SEAL_KINDS, Event, TaskState


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
        flags=dict(state.flags), flag_meta=dict(state.flag_meta), project=state.project, head=state.head,
        rules=state.rules, contract=state.contract,
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
        item: dict[str, Any] = {"scope": scope, "key": key, "text": _text(p.get("text"))}
        if p.get("task_id"):  # provenance, journaled with shared (project / agent / global) memory
            item.update(task_id=_text(p.get("task_id")), agent=event.agent, seq=event.seq, at=event.created_at)
        s.memory.pop(f"{scope}:{key}", None)  # a rewrite moves the key to the newest position
        s.memory[f"{scope}:{key}"] = item
    elif k == "task_scoped":
        s.project = _text(p.get("project"))
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
        name = _text(p.get("name"))
        if p.get("cleared"):
            s.flags.pop(name, None)
        else:
            s.flags[name] = p.get("value")
        s.flag_meta[name] = {"value": p.get("value"), "cleared": bool(p.get("cleared")), "by": event.agent,
                             "why": p.get("why"), "source": p.get("source") or "agent", "seq": event.seq}
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
