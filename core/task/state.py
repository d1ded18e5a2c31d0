"""The task's record types: the journal event, the seal record and the typed task state.

This module owns the types; ``replay`` folds a journal into them and ``seal`` hashes
them, so neither of those imports the other through here.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
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
        "state_flag",  # flags are covered by the seal (tail zone), except the settings below
    }
)
# flags that tune bosun itself for the task (not facts about the work): not sealed, so changing them
# never moves an agent's seal
SETTING_FLAGS = frozenset({"prune_mode", "overhead_mode"})


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
    flags: tuple[tuple[str, str], ...] = ()  # sealed flags as (name, JSON value), sorted


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
    flags: dict[str, Any] = field(default_factory=dict)  # state_flag, e.g. tests_passed, review_approved
    flag_meta: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {by, why, source, seq}
    project: str = ""  # the project id its project-scoped memory is shared under
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
            "flag_meta": copy.deepcopy(self.flag_meta),
            "project": self.project,
            "head": dict(self.head) if self.head else None,
            "rules": dict(self.rules) if self.rules else None,
            "contract": dict(self.contract) if self.contract else None,
            "declared": dict(self.declared),
            "revisions": copy.deepcopy(self.revisions),
            "seal": self.seal,
            "agents": list(self.agents),
        }
