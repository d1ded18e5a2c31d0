"""HandoffService: delegation contracts journaled on the parent task.

create -> accept (once, by the named agent if the contract names one) -> complete (only by
the agent that accepted). Every transition is one journal append made against the version
it was validated on, so two racing accepts cannot both succeed: the loser re-reads and
gets a clear error, and nothing is stored half-way. Completion stores the child's result
as a ref, runs the contract's checks, and folds the outcome into the parent (a
``handoff_completed`` event plus a pinned decision, so the seal moves with it).
"""

from __future__ import annotations

import json
import secrets
from typing import TYPE_CHECKING, Any

from bosun.core.errors import InvalidInput, NotFound
from bosun.core.guard.handoff import Contract, build_contract, check_result, contract_from_payload
from bosun.core.redact import redact_value
from bosun.core.task.budget import BUDGET_KEYS, parse_budget, remaining
from bosun.core.task.seal import verdict as seal_verdict
from bosun.core.task.state import TaskState
from bosun.server.services.tasks import TaskService, VersionConflict
from bosun.store.refs import make_ref

if TYPE_CHECKING:
    from bosun.server.services.ports import OpenStores
    from bosun.server.services.recall import RefResolver

INLINE_RESULT_BYTES = 2048  # results up to this size are journaled inline; larger ones by ref only
_RETRIES = 5


def _agent(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 128:
        raise InvalidInput("agent", "is required: your agent name (1-128 characters)")
    return value.strip()


class HandoffService:
    """Creates, accepts, completes and reports delegation contracts."""

    def __init__(self, stores: OpenStores, tasks: TaskService, resolver: RefResolver) -> None:
        self.stores = stores
        self.resolver = resolver
        self.tasks = tasks
        self._contracts: dict[tuple[str, str], Contract] = {}

    async def _contract(self, state: TaskState, hid: str) -> Contract:
        cached = self._contracts.get((state.task_id, hid))
        if cached is not None:
            return cached
        info = state.handoffs.get(hid)
        if info is None:
            raise NotFound("handoff", hid, f"task {state.task_id} has {len(state.handoffs)} handoffs; "
                           "handoff(mode='status') lists them")
        seq = int(info.get("seq") or 1)
        for ev in await self.tasks.events(state.task_id, seq - 1):
            if ev.kind == "handoff_created" and ev.payload.get("handoff_id") == hid:
                contract = contract_from_payload(ev.payload)
                self._contracts[(state.task_id, hid)] = contract
                return contract
        raise NotFound("handoff", hid, "its handoff_created event is missing from the journal")

    async def create(self, task_id: str, objective: Any, inputs: Any = None, constraints: Any = None,
                     checks: Any = None, budget: Any = None, to_agent: Any = None,
                     agent: str | None = None) -> dict[str, Any]:
        state = await self.tasks.get(task_id)
        inputs = await self._full_refs(inputs)
        contract = build_contract(objective, inputs, state.constraints, constraints, checks, budget, to_agent)
        parent = parse_budget({k: v for k, v in state.budget.items() if k in BUDGET_KEYS})
        left = remaining(parent, state.consumed_tokens)
        child_tokens = contract.budget.get("tokens")
        if left is not None and child_tokens is not None and child_tokens > left:
            raise InvalidInput("budget.tokens", f"{child_tokens:,} is more than the parent task has left ({left:,} of "
                               f"{parent.tokens:,})", f"at most {left}")
        if left is not None and child_tokens is None:
            contract = Contract(contract.objective, contract.inputs, contract.constraints, contract.checks,
                                {**contract.budget, "tokens": left}, contract.to_agent)
        hid = "h_" + secrets.token_hex(4)
        # redact before journaling AND before caching: the child agent must see what the journal holds,
        # the same before and after a restart
        payload = redact_value(contract.payload(hid), self.tasks.redactor)
        assert isinstance(payload, dict)
        contract = contract_from_payload(payload)
        state = await self.tasks.append(task_id, "handoff_created", payload, agent=agent)
        self._contracts[(state.task_id, hid)] = contract
        return {"handoff_id": hid, "status": "created", "contract": contract.payload(hid), "version": state.version}

    async def _full_refs(self, inputs: Any) -> Any:
        """Input refs in any accepted spelling (short or full, as observe shows them) -> full stored refs."""
        if not isinstance(inputs, list):
            return inputs  # build_contract names the problem
        full = []
        for i, ref in enumerate(inputs):
            if not isinstance(ref, str):
                full.append(ref)
                continue
            digest = await self.resolver.resolve(ref, f"inputs[{i}]")
            if not await self.stores.refs.exists(digest):
                raise NotFound("ref", make_ref(digest), "store it first (observe returns refs)", field=f"inputs[{i}]")
            full.append(make_ref(digest))
        return full

    async def accept(self, task_id: str, handoff_id: Any, agent: Any) -> dict[str, Any]:
        hid = self._hid(handoff_id)
        await self._contract(await self.tasks.get(task_id), hid)  # a wrong id is named before a missing agent
        who = self.tasks.redactor.scrub(_agent(agent))
        for _ in range(_RETRIES):
            state = await self.tasks.get(task_id)
            contract = await self._contract(state, hid)
            info = state.handoffs[hid]
            if info.get("status") != "created":
                by = info.get("agent")
                raise InvalidInput("handoff_id", f"handoff {hid} is already {info.get('status')}"
                                   + (f" by {by}" if by else "") + "; a contract is accepted once",
                                   "handoff(mode='status') to see who holds it")
            if contract.to_agent and contract.to_agent != who:
                raise InvalidInput("agent", f"handoff {hid} is addressed to {contract.to_agent!r}, not {who!r}")
            try:
                state = await self.tasks.append(task_id, "handoff_accepted", {"handoff_id": hid, "agent": who},
                                                agent=who, expected_version=state.version)
            except VersionConflict:
                continue  # someone else wrote in between: re-validate against the new state
            return {"handoff_id": hid, "status": "accepted", "agent": who, "contract": contract.payload(hid),
                    "version": state.version}
        raise InvalidInput("handoff_id", f"task {task_id} is changing too fast to accept {hid}; retry")

    async def complete(self, task_id: str, handoff_id: Any, agent: Any, result: Any) -> dict[str, Any]:
        hid = self._hid(handoff_id)
        state = await self.tasks.get(task_id)
        contract = await self._contract(state, hid)  # the task and the id exist before the arguments are read
        who = self.tasks.redactor.scrub(_agent(agent))
        if result is None:
            raise InvalidInput("result", "is required to complete a handoff", "a JSON object the checks run on")
        passed, failures = check_result(contract, result)  # validates result before anything is stored
        result = redact_value(result, self.tasks.redactor)  # checked as sent, stored (ref and journal) scrubbed
        assert isinstance(result, dict)
        body = json.dumps(result, sort_keys=True, ensure_ascii=False).encode("utf-8")
        inline = result if len(body) <= INLINE_RESULT_BYTES else {"keys": sorted(result)[:50]}
        ref: str | None = None
        for _ in range(_RETRIES):
            info = state.handoffs[hid]
            status = info.get("status")
            if status == "created":
                raise InvalidInput("handoff_id", f"handoff {hid} has not been accepted; accept it first")
            if status == "completed":
                raise InvalidInput("handoff_id", f"handoff {hid} is already completed by {info.get('agent')}")
            if info.get("agent") != who:
                raise InvalidInput("agent", f"handoff {hid} was accepted by {info.get('agent')!r}; only that agent "
                                   f"can complete it, not {who!r}")
            if ref is None:  # only once the transition is known to be valid
                ref = await self.stores.refs.put(body, "application/json")
            outcome = "passed" if passed else "FAILED: " + "; ".join(f["reason"] for f in failures)[:300]
            decision = (f"handoff {hid} ({contract.objective[:100]}) completed by {who}: {outcome} "
                        f"[{len(contract.checks)} checks]; result {ref}")
            events: list[tuple[str, dict[str, Any]]] = [
                ("handoff_completed", {"handoff_id": hid, "agent": who, "result": inline, "result_ref": ref,
                                       "passed": passed, "failures": failures}),
                ("decision_added", {"text": decision}),
            ]
            try:
                state = await self.tasks.append_many(task_id, events, agent=who, expected_version=state.version)
            except VersionConflict:
                state = await self.tasks.get(task_id)
                continue
            return {"handoff_id": hid, "status": "completed", "passed": passed, "failures": failures,
                    "result_ref": ref, "version": state.version, "seal": seal_verdict(state, None)["seal"]}
        raise InvalidInput("handoff_id", f"task {task_id} is changing too fast to complete {hid}; retry")

    async def status(self, task_id: str, handoff_id: Any = None) -> dict[str, Any]:
        state = await self.tasks.get(task_id)
        if handoff_id is None:
            return {"handoffs": [{"handoff_id": h, "objective": i.get("objective"), "status": i.get("status"),
                                  "agent": i.get("agent"), "passed": i.get("passed")}
                                 for h, i in state.handoffs.items()]}
        hid = self._hid(handoff_id)
        contract = await self._contract(state, hid)
        info = state.handoffs[hid]
        return {"handoff_id": hid, "status": info.get("status"), "agent": info.get("agent"),
                "passed": info.get("passed"), "contract": contract.payload(hid)}

    @staticmethod
    def _hid(value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise InvalidInput("handoff_id", "is required", "the handoff_id returned by mode='create'")
        return value.strip()

    async def run(self, task_id: str, mode: str, handoff_id: Any = None, objective: Any = None, inputs: Any = None,
                  constraints: Any = None, checks: Any = None, budget: Any = None, to_agent: Any = None,
                  agent: Any = None, result: Any = None, seal: str | None = None) -> dict[str, Any]:
        """One handoff call (create | accept | complete | status); the parent's drift joins the answer.

        The task is checked first, then the handoff id, then the other arguments: the error names the
        likeliest mistake (a wrong id), not the argument a call with that id would also need."""
        await self.tasks.get(task_id)
        if mode == "create":
            if objective is None:
                raise InvalidInput("objective", "is required to create a handoff")
            out = await self.create(task_id, objective, inputs, constraints, checks, budget, to_agent, agent)
        elif mode == "accept":
            out = await self.accept(task_id, handoff_id, agent)
        elif mode == "complete":
            out = await self.complete(task_id, handoff_id, agent, result)
        else:
            out = await self.status(task_id, handoff_id)
        state = await self.tasks.get(task_id)
        drift = seal_verdict(state, seal)
        out["drift"] = drift if seal is not None else {"seal": drift["seal"], "version": drift["version"]}
        return out
