"""PlanService: start, update, resume or inspect a task; every answer carries the sealed manifest.

Every call may carry the agent's last ``seal``; the answer always holds the drift verdict for
it and the current seal. Updates may carry ``based_on_version``: a stale one is rejected whole
(nothing applied) with the current version and seal.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bosun.core.actions import shell_command
from bosun.core.errors import InvalidInput, NotFound
from bosun.core.guard.shell_effects import analyse
from bosun.core.offload.offload import MODES as PRUNE_MODES
from bosun.core.offload.offload import worth_it
from bosun.core.task.flags import flag_events, flag_view
from bosun.core.task.manifest import budget_status, build_manifest
from bosun.core.task.memory import (
    DEFAULT_PROJECT,
    SHARED_SCOPES,
    check_project,
    is_scope_id,
    scope_id,
    select_shared,
    visible_scopes,
)
from bosun.core.task.overhead import (
    AUTO,
    DEFAULT_MODE,
    MODES,
    Costs,
    add_call,
    add_manifest,
    check_mode,
    choose,
    mode_events,
)
from bosun.core.task.pressure import DECLARABLE, pressure
from bosun.core.task.seal import SEAL_PREFIX, hashes
from bosun.core.task.state import MEMORY_SCOPES, TaskState
from bosun.core.tokens import estimate_tokens
from bosun.server.services.ledger import LedgerService
from bosun.server.services.tasks import TaskService, check_text

if TYPE_CHECKING:
    from bosun.server.config import Config

log = logging.getLogger("bosun.plan")
CLOSE_STATUSES = ("done", "failed", "abandoned")
RESUME_RECENT = 12  # recent journal entries shown by resume


@dataclass
class PlanRequest:
    """The fields of one plan call; None (or empty) = the caller did not send that field."""

    task_id: str | None = None
    seal: str | None = None
    based_on_version: int | None = None
    objective: str | None = None
    steps: list[str] | None = None
    constraints: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    start_step: str | None = None
    complete: list[str] = field(default_factory=list)
    lessons: list[str] = field(default_factory=list)
    memory: list[dict[str, str]] = field(default_factory=list)
    revise: list[dict[str, Any]] = field(default_factory=list)
    rules: str | None = None
    declare: dict[str, int] | None = None
    budget_tokens: int | None = None
    close: str | None = None
    agent: str | None = None
    flags: dict[str, Any] | None = None
    why: str | None = None
    project: str | None = None
    overhead: str | None = None


# the rarer plan fields travel in one object: every listed parameter costs tokens on every agent turn
MORE_FIELDS = {
    "complete": "steps done", "lessons": "texts", "memory": "[{scope: task|project|agent|global, key, text}]",
    "flags": "{name: value|null}", "why": "reason for flags", "revise": "[{collection, index, text, reason}]",
    "rules": "text", "declare": "{window, history, ...}", "close": "done|failed|abandoned",
    "project": "project id (start)", "overhead": "auto|bystander|light|standard|full (start)",
}
MORE_HELP = "complete,lessons,memory,flags+why,revise,rules,declare,close,project,overhead"


def apply_more(req: PlanRequest, more: Any) -> None:
    """Copy the ``more`` object's fields onto ``req``; an unknown key is an error naming the closest one."""
    if more is None:
        return
    if not isinstance(more, dict):
        raise InvalidInput("more", f"must be an object, got {type(more).__name__}", ", ".join(MORE_FIELDS))
    for key, value in more.items():
        if key not in MORE_FIELDS:
            close = difflib.get_close_matches(str(key), list(MORE_FIELDS), n=1)
            raise InvalidInput(f"more.{key}", "unknown field" + (f"; did you mean {close[0]!r}?" if close else ""),
                               ", ".join(MORE_FIELDS))
        if value is None:
            continue
        if key in ("complete", "lessons", "memory", "revise"):
            if not isinstance(value, list):
                raise InvalidInput(f"more.{key}", f"must be a list, got {type(value).__name__}", MORE_FIELDS[key])
            setattr(req, key, list(value))
        elif key in ("declare", "flags"):
            if not isinstance(value, dict):
                raise InvalidInput(f"more.{key}", f"must be an object, got {type(value).__name__}", MORE_FIELDS[key])
            setattr(req, key, dict(value))
        else:
            if not isinstance(value, str):
                raise InvalidInput(f"more.{key}", f"must be a string, got {type(value).__name__}", MORE_FIELDS[key])
            setattr(req, key, value)


def _texts(field: str, values: list[str] | None) -> list[str]:
    if values is None:
        return []
    if not isinstance(values, list):
        raise InvalidInput(field, "must be a list of strings")
    return [check_text(f"{field}[{i}]", v) for i, v in enumerate(values)]


def _update_events(state: TaskState, args: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Validate an update against the current state and turn it into journal events (in a fixed order)."""
    if args.get("objective") is not None:
        raise InvalidInput("objective", "is immutable once the task started",
                           "add a constraint or decision, or start a new task")
    if args.get("budget_tokens") is not None:
        raise InvalidInput("budget_tokens", "is set at start only")
    out: list[tuple[str, dict[str, Any]]] = []
    if args.get("steps") is not None:
        steps = _texts("steps", args["steps"])
        if not steps:
            raise InvalidInput("steps", "must not be empty when replacing the plan")
        out.append(("plan_set", {"steps": steps}))
    out += [("constraint_added", {"text": t}) for t in _texts("constraints", args.get("constraints"))]
    out += [("decision_added", {"text": t}) for t in _texts("decisions", args.get("decisions"))]
    for i, rev in enumerate(args.get("revise") or []):
        field = f"revise[{i}]"
        if not isinstance(rev, dict):
            raise InvalidInput(field, "must be an object {collection, index, text, reason}")
        coll = rev.get("collection")
        if coll not in ("constraints", "decisions"):
            raise InvalidInput(f"{field}.collection", f"unknown collection {coll!r}", "constraints, decisions")
        items = state.constraints if coll == "constraints" else state.decisions
        index = rev.get("index")
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(items):
            raise InvalidInput(f"{field}.index", f"no {coll} item at {index!r}", f"0..{len(items) - 1}")
        text = check_text(f"{field}.text", rev.get("text"))
        if text == items[index]:
            raise InvalidInput(f"{field}.text", "is identical to the pinned text; nothing to revise")
        reason = check_text(f"{field}.reason", rev.get("reason") or "", allow_empty=True)
        if not reason:
            raise InvalidInput(f"{field}.reason", "a pinned item is only rewritten with a stated reason")
        out.append((f"{coll[:-1]}_revised", {"index": index, "text": text, "reason": reason}))
    if args.get("start_step") is not None:
        out.append(("step_started", {"step": check_text("start_step", args["start_step"])}))
    for i, step in enumerate(args.get("complete") or []):
        out.append(("step_completed", {"step": check_text(f"complete[{i}]", step)}))
    out += [("lesson_added", {"text": t}) for t in _texts("lessons", args.get("lessons"))]
    for i, item in enumerate(args.get("memory") or []):
        field = f"memory[{i}]"
        if not isinstance(item, dict):
            raise InvalidInput(field, "must be an object {scope, key, text}")
        scope = item.get("scope", "task")
        if scope not in MEMORY_SCOPES:
            raise InvalidInput(f"{field}.scope", f"unknown scope {scope!r}", ", ".join(MEMORY_SCOPES))
        out.append(("memory_added", {"scope": scope, "key": check_text(f"{field}.key", item.get("key")),
                                     "text": check_text(f"{field}.text", item.get("text"))}))
    if args.get("flags") is not None:
        out += flag_events(args["flags"], args.get("why"), state)
    elif args.get("why") is not None:
        raise InvalidInput("why", "goes with flags", '{"flags": {"review_approved": true}, "why": "..."}')
    declare = args.get("declare")
    if declare:
        parts = {}
        for name, tokens in declare.items():
            if name not in DECLARABLE:
                raise InvalidInput(f"declare.{name}", "unknown context part", ", ".join(DECLARABLE))
            if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
                raise InvalidInput(f"declare.{name}", f"must be a token count >= 0, got {tokens!r}")
            parts[name] = tokens
        out.append(("context_declared", {"parts": parts}))
    if args.get("close") is not None:
        if args["close"] not in CLOSE_STATUSES:
            raise InvalidInput("close", f"unknown status {args['close']!r}", ", ".join(CLOSE_STATUSES))
        out.append(("task_closed", {"status": args["close"]}))
    return out


def _check_shareable(events: list[tuple[str, dict[str, Any]]], agent: str | None) -> None:
    """Agent-scoped memory names its agent: refused before anything is journaled."""
    for i, (kind, payload) in enumerate(e for e in events if e[0] == "memory_added"):
        if kind == "memory_added" and payload.get("scope") == "agent" and not agent:
            raise InvalidInput("agent", f"is required for memory[{i}] (scope 'agent')", "your agent name")


def _head_summary(report: dict[str, Any]) -> dict[str, Any]:
    return {k: report[k] for k in ("ref", "tokens", "changed", "volatile", "volatile_count")}


def _summary(payload: Any, limit: int = 120) -> str:
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _base(state: TaskState, drift: dict[str, Any], carry: bool = True) -> dict[str, Any]:
    """The common answer; ``carry=False`` (a bystander task) leaves the manifest out (resume still shows it)."""
    lean = {k: v for k, v in drift.items() if k not in ("seal", "version")}  # both are top-level already
    out: dict[str, Any] = {"task_id": state.task_id, "version": state.version, "status": state.status,
                           "seal": SEAL_PREFIX + state.seal, "drift": lean}
    if not state.closed and (carry or state.flags.get("overhead_mode") not in MODES
                             or MODES[str(state.flags["overhead_mode"])].manifest):
        out["manifest"] = build_manifest(state)
    return out


def resume_view(state: TaskState) -> dict[str, Any]:
    """What an agent needs to continue after a crash or a context reset (bounded)."""
    open_failures = [{"signature": sig, "tool": f.get("tool"), "attempts": f.get("attempts"),
                      "error": f.get("error"), "lesson": f.get("lesson")}
                     for sig, f in list(state.failures.items())[-10:]]
    return {
        "objective": state.objective,
        "constraints": state.constraints,
        "decisions": state.decisions,
        "plan": {"completed": state.completed, "active": state.active, "remaining": state.remaining},
        "lessons": state.lessons[-20:],
        "memory": list(state.memory.values())[-20:],
        "failures": open_failures,
        "files": sorted(state.files)[-30:],
        "handoffs": {k: v for k, v in state.handoffs.items() if v.get("status") != "completed"},
        "flags": flag_view(state),
        "project": state.project or None,
        "agents": state.agents,
    }


def prune_view(known: int, threshold: int, idle_s: float, ttl_s: float) -> dict[str, Any]:
    """The OSIRIS settings at work: is the context over the prune threshold, is the prompt cache alive?

    Past the TTL the provider's prefix cache is gone, so a compaction that reaches into history costs
    no re-fill; while it lives, trim the working zone only.
    """
    alive = idle_s <= ttl_s
    out: dict[str, Any] = {"threshold_tokens": threshold, "known_tokens": known,
                           "over_by": max(0, known - threshold),
                           "cache": {"ttl_s": ttl_s, "idle_s": round(idle_s, 1), "alive": alive}}
    if known > threshold:
        out["action"] = (f"checkpoint(mode='trim', target_tokens={known - threshold})"
                         + ("" if alive else " (cache expired: history may go too, at no re-fill cost)"))
    return out


async def status_view(ledger: LedgerService, state: TaskState, threshold: int = 40_000,
                      ttl_s: float = 300.0) -> dict[str, Any]:
    manifest = build_manifest(state)
    press = pressure(state, estimate_tokens(manifest))
    out = {
        "pressure": press,
        "prune": prune_view(press["total"]["known"], threshold, max(0.0, time.time() - state.updated_at), ttl_s),
        "budget": {"declared": state.budget, "consumed_tokens": state.consumed_tokens,
                   "status": budget_status(state)},
        "plan": {"completed": len(state.completed), "active": state.active, "remaining": len(state.remaining),
                 "total": len(state.plan)},
        "hashes": hashes(state),
        "flags": flag_view(state),
        "events": dict(sorted(state.event_counts.items())),
        "ledger": await ledger.summary(state.task_id),
    }
    return out


def resume_prompt(state: TaskState) -> str:
    """The task-resume recovery template, filled from the task."""
    view = resume_view(state)
    lines = [
        f"You are resuming task {state.task_id} after a crash or a context reset. Its state is authoritative;",
        "do not redo completed steps, and keep every constraint and decision below verbatim.",
        "",
        "Carry this manifest at a fixed place in your context and pass its SEAL to every task-scoped tool:",
        build_manifest(state) if not state.closed else f"(task closed: {state.status})",
        "",
        f"Objective: {state.objective}",
        "Constraints:", *[f"  {i}. {c}" for i, c in enumerate(state.constraints)],
        "Decisions (pinned):", *[f"  {i}. {d}" for i, d in enumerate(state.decisions)],
        "Completed: " + ("; ".join(state.completed) or "none"),
        "Active: " + ("; ".join(state.active) or "none"),
        "Remaining: " + ("; ".join(state.remaining) or "none"),
    ]
    if view["lessons"]:
        lines += ["Lessons:", *[f"  - {t}" for t in view["lessons"]]]
    if view["flags"]:
        lines += ["Flags (invariants test these):",
                  *[f"  - {name}={json.dumps(f['value'])} (by {f['by'] or f['source']}: {f['why'] or 'evidence'})"
                    for name, f in view["flags"].items()]]
    if view["failures"]:
        lines += ["Failures seen (do not repeat blindly):",
                  *[f"  - {f['tool']}: {f['error']} (x{f['attempts']})" for f in view["failures"]]]
    lines += ["", f"Next: update the plan with plan(mode='update', task_id='{state.task_id}', "
                  f"based_on_version={state.version}, seal=<SEAL>, ...)."]
    return "\n".join(lines)


STUB_FRAME = 59  # tokens of an offload stub without its outline (measured with build_stub on an empty outline)
PRECHECK_TOKENS = 90  # a precheck the agent makes: request (task id, tool, args, seal) + an allow answer
AUTO_TASKS = 256  # tasks whose running costs are kept (LRU); an evicted one is re-folded from its journal


def offload_saving(payload: Mapping[str, Any]) -> dict[str, int]:
    """Per overhead mode, what offloading this result would save in each later prompt (0: kept whole).

    The stub of the mode the result was observed under is known (``stub_tokens``); for the others
    it is estimated as the stub frame plus that prune mode's outline budget, and, as observe does,
    a result is only offloaded when its stub costs at most half of it.
    """
    tokens = int(payload.get("tokens") or 0)
    out: dict[str, int] = {}
    for name, mode in MODES.items():
        prune = PRUNE_MODES[mode.prune_mode]
        if tokens < prune.offload_min_tokens:
            out[name] = 0
            continue
        known = payload.get("offloaded") and payload.get("mode") == prune.name and payload.get("stub_tokens")
        stub = int(known) if known else STUB_FRAME + prune.outline_budget(tokens)
        out[name] = tokens - stub if worth_it(tokens, stub) else 0
    return out


class AutoOverhead:
    """``overhead = auto`` at work: after each committed write of an auto task, fold its new results into
    every mode's running account (``core/task/overhead.py``) and move the task's prune mode to the mode
    ``choose`` picks (one ``state_flag`` event, journaled with the reason). Tasks in any other mode are
    left alone."""

    def __init__(self, tasks: TaskService) -> None:
        self.tasks = tasks
        self._costs: OrderedDict[str, tuple[int, Costs, str]] = OrderedDict()  # task -> (cursor, costs, mode)
        self._tracked: OrderedDict[str, None] = OrderedDict()  # auto tasks seen by plan (start, or any call)
        self._pending: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()  # one fold at a time: a task's account is never folded twice at once

    def track(self, state: TaskState) -> None:
        """Remember an auto task (plan sees every task it starts, and any task after a restart)."""
        if state.flags.get("overhead_mode") == AUTO and not state.closed:
            self._tracked[state.task_id] = None
            self._tracked.move_to_end(state.task_id)
            while len(self._tracked) > AUTO_TASKS:
                self._tracked.popitem(last=False)

    def on_change(self, task_id: str) -> None:
        """Change listener (synchronous, O(1) for tasks that are not auto): schedule the fold."""
        if task_id not in self._tracked:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        job = loop.create_task(self._adapt(task_id))
        self._pending.add(job)
        job.add_done_callback(self._pending.discard)

    async def settled(self) -> None:
        """Wait for the folds scheduled so far (tests, shutdown)."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    async def _adapt(self, task_id: str) -> None:
        async with self._lock:
            await self._fold(task_id)

    async def _fold(self, task_id: str) -> None:
        try:
            state = await self.tasks.get(task_id)
            if state.flags.get("overhead_mode") != AUTO or state.closed:
                self._tracked.pop(task_id, None)
                return
            known = self._costs.pop(task_id) if task_id in self._costs else None
            cursor, costs, current = known or (0, Costs.empty(), "bystander")
            if cursor == 0:
                add_manifest(costs, estimate_tokens(build_manifest(state)))
            for ev in await self.tasks.events(task_id, cursor):
                cursor = ev.seq
                if ev.kind not in ("tool_result", "tool_failure"):
                    continue
                costs.next_prompt()
                command = shell_command(str(ev.payload.get("tool") or ""), ev.payload.get("args"))
                effect = analyse(command) if command else None
                runs = effect is not None and (effect.writes or effect.reads is None)
                add_call(costs, offload_saving(ev.payload), PRECHECK_TOKENS, runs)
            mode = choose(costs, current)
            self._costs[task_id] = (cursor, costs, mode)
            while len(self._costs) > AUTO_TASKS:
                self._costs.popitem(last=False)
            target = MODES[mode].prune_mode
            if state.flags.get("prune_mode") != target:
                why = (f"auto: {mode} would have carried {costs.net(mode) - costs.net(current):,} fewer tokens "
                       f"than {current} so far" if mode != current else f"auto: {mode}")
                await self.tasks.append(task_id, "state_flag", {"name": "prune_mode", "value": target, "why": why,
                                                                "source": "bosun"})
        except (NotFound, InvalidInput):  # the task went away or closed meanwhile: nothing to adapt
            return
        except Exception:
            log.exception("auto overhead mode: task %s (ignored)", task_id)


class PlanService:
    """The plan tool's logic, and the views the task resources and the resume prompt show."""

    def __init__(self, tasks: TaskService, ledger: LedgerService, config: Config | None = None,
                 project: str | None = None, overhead: str | None = None) -> None:
        self.tasks = tasks
        self.ledger = ledger
        self.project = check_project(project or getattr(config, "project", None) or DEFAULT_PROJECT,
                                     "BOSUN_PROJECT")
        self.overhead = check_mode(overhead or getattr(config, "overhead_mode", None) or DEFAULT_MODE,
                                   "BOSUN_OVERHEAD_MODE")
        self.cache_ttl_s = float(getattr(config, "cache_ttl_s", 300.0))
        self.prune_threshold = int(getattr(config, "prune_threshold_tokens", 40_000))
        self.auto = AutoOverhead(tasks)
        changes = getattr(tasks, "changes", None)
        if changes is not None:
            changes.add(self.auto.on_change)

    async def _share(self, state: TaskState, events: list[tuple[str, dict[str, Any]]], agent: str | None) -> None:
        """Copy project / agent / global memory the task just recorded into that scope's journal.

        The task's own journal keeps the record (it is the provenance); the scope journal is what
        other tasks read. Written after the task's event committed, so a rejected update shares nothing.
        """
        by_scope: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for kind, payload in events:
            if kind == "memory_added" and payload.get("scope") in SHARED_SCOPES:
                sid = scope_id(str(payload["scope"]), self._clean(state.project or self.project),
                               self._clean(agent) if agent else None)
                by_scope.setdefault(sid, []).append(("memory_added", {**payload, "task_id": state.task_id}))
        for sid, items in by_scope.items():
            try:
                await self.tasks.append_many(sid, items, agent=agent)
            except NotFound:
                try:
                    await self.tasks.start(f"shared memory {sid}", task_id=sid, agent=agent, extra=items)
                except InvalidInput:  # another writer created it in between
                    await self.tasks.append_many(sid, items, agent=agent)

    def _clean(self, name: str) -> str:
        """A project or agent name as it may appear in a journal id: secrets scrubbed like every stored text."""
        return self.tasks.redactor.scrub(name)

    async def shared_memory(self, state: TaskState, agent: str | None = None) -> dict[str, Any]:
        """The project / agent / global memory this task sees (bounded; see core/task/memory.py)."""
        agents = [agent] if agent else list(state.agents)
        by_scope = []
        for _scope, sid in visible_scopes(self._clean(state.project or self.project),
                                          [self._clean(a) for a in agents if a]):
            try:
                scoped = await self.tasks.get(sid)
            except NotFound:
                continue
            by_scope.append(list(scoped.memory.values()))
        return select_shared(by_scope)

    async def run(self, mode: str, req: PlanRequest) -> dict[str, Any]:
        """One plan call: start, update, resume or status."""
        if req.based_on_version is not None and req.based_on_version < 1:
            raise InvalidInput("based_on_version", "must be >= 1 (or 0 for none)", "the v= value of your manifest")
        if req.budget_tokens is not None and req.budget_tokens <= 0:
            raise InvalidInput("budget_tokens", "must be > 0")
        svc = self.tasks
        task_id, seal, objective, steps, rules = req.task_id, req.seal, req.objective, req.steps, req.rules
        constraints, decisions, lessons, memory = req.constraints, req.decisions, req.lessons, req.memory
        revise, start_step, complete, declare = req.revise, req.start_step, req.complete, req.declare
        budget_tokens, close, agent, based_on_version = req.budget_tokens, req.close, req.agent, req.based_on_version
        if mode == "start":
            if objective is None:
                raise InvalidInput("objective", "is required to start a task")
            if task_id is not None:
                raise InvalidInput("task_id", "is assigned by start; omit it")
            if budget_tokens is not None and budget_tokens <= 0:
                raise InvalidInput("budget_tokens", "must be > 0")
            if close is not None or revise or complete:
                field = "close" if close is not None else ("revise" if revise else "complete")
                raise InvalidInput(f"more.{field}", "applies to a started task", "send it with mode='update'")
            project = check_project(req.project, "more.project") if req.project is not None else self.project
            overhead = check_mode(req.overhead, "more.overhead") if req.overhead is not None else self.overhead
            blank = TaskState(task_id="")
            extra = [("task_scoped", {"project": project})] if project != DEFAULT_PROJECT else []
            if req.overhead is not None or overhead != DEFAULT_MODE:
                extra += mode_events(overhead, "set at start" if req.overhead else "BOSUN_OVERHEAD_MODE")
            extra += _update_events(blank, {"lessons": lessons, "memory": memory, "declare": declare,
                                            "flags": req.flags, "why": req.why})
            report = None
            if rules is not None:
                event, report = await svc.head_event(blank, "rules", check_text("rules", rules))
                extra = ([event] if event else []) + extra
            _check_shareable(extra, agent)
            state = await svc.start(objective, constraints=constraints or [], decisions=decisions or [],
                                    plan=steps or [], budget={"tokens": budget_tokens} if budget_tokens else {},
                                    agent=agent, extra=extra)  # one statement: the task never exists half-made
            await self._share(state, extra, agent)
            self.auto.track(state)
            out = _base(state, await svc.check_seal(state.task_id, None, state), carry=False)
            if report is not None:
                out["rules"] = _head_summary(report)
            shared = await self.shared_memory(state, agent)
            if shared["items"] or shared["omitted"]:
                out["shared_memory"] = shared
            return out
        if task_id is None:
            raise InvalidInput("task_id", f"is required for mode={mode}", "the task= value of the manifest")
        if is_scope_id(task_id) and mode == "update":
            raise InvalidInput("task_id", f"{task_id} is a shared-memory journal, written through a task",
                               "plan(mode='update', task_id=<your task>, more={'memory': [{scope, key, text}]})")
        before = await svc.get(task_id)
        self.auto.track(before)
        drift = await svc.check_seal(task_id, seal, before)  # against the state the agent has not seen yet
        if mode == "update":
            if req.project is not None or req.overhead is not None:
                raise InvalidInput("more.project" if req.project is not None else "more.overhead",
                                   "is set at start", "start a new task; or set flags (more.flags) meanwhile")
            events = _update_events(before, {
                "objective": objective, "budget_tokens": budget_tokens, "steps": steps,
                "constraints": constraints, "decisions": decisions, "revise": revise, "start_step": start_step,
                "complete": complete, "lessons": lessons, "memory": memory, "declare": declare, "close": close,
                "flags": req.flags, "why": req.why})
            if not events and rules is None and req.flags is None:  # a flag set to its value again: a no-op
                raise InvalidInput("mode", "update carries nothing to change",
                                   "constraints, decisions, steps, start_step, or in more: complete, lessons, "
                                   "memory, flags, revise, rules, declare, close")
            report = None
            if rules is not None:
                event, report = await svc.head_event(before, "rules", check_text("rules", rules))
                events = ([event] if event else []) + events
            _check_shareable(events, agent)
            state = await svc.append_many(task_id, events, agent=agent, expected_version=based_on_version)
            await self._share(state, events, agent)
            out = _base(state, drift, carry=False)
            out["applied"] = len(events)
            if report is not None:
                out["rules"] = _head_summary(report)
            return out
        if mode == "resume":
            out = _base(before, drift)
            out["resume"] = resume_view(before)
            recent = await svc.events(task_id, max(0, before.version - RESUME_RECENT))
            out["resume"]["recent"] = [{"seq": e.seq, "kind": e.kind, "agent": e.agent,
                                        "summary": _summary(e.payload)} for e in recent]
            if not is_scope_id(task_id):
                out["resume"]["shared_memory"] = await self.shared_memory(before, agent)
            return out
        out = _base(before, drift)
        out.update(await status_view(self.ledger, before, self.prune_threshold, self.cache_ttl_s))
        return out

    async def status(self, task_id: str) -> dict[str, Any]:
        """The status resource: pressure by zone, budget, plan progress, the zone hashes, the ledger."""
        state = await self.tasks.get(task_id)
        body = {"task_id": state.task_id, "version": state.version, "status": state.status, "seal": state.seal}
        body.update(await status_view(self.ledger, state, self.prune_threshold, self.cache_ttl_s))
        return body

    async def resume_prompt(self, task_id: str) -> str:
        return resume_prompt(await self.tasks.get(task_id))
