"""Executable delegation contracts between agents (OSIRIS ``handoff``).

A parent task delegates a piece of work with a contract: objective, inputs (refs),
the parent's constraints (inherited, plus any extra ones), acceptance checks and a
budget. The child accepts it, works, and completes it with a *structured* result (a
JSON object); the checks run against that result, so "done" means "the contract's
checks passed", not "the child says so". The outcome is folded back into the
parent's journal (and, through a pinned decision, its seal).

Checks (each an object; ``field`` is a dotted path into the result):

============  =====================================================
op            passes when
============  =====================================================
present       the field exists and is not null
equals        field == value          (also ``not_equals``)
min / max     field (a number) >= / <= value
matches       field (a string) matches the regex ``value``
nonempty      field is a non-empty string, list or object
contains      field (a list or string) contains ``value``
is_ref        field is a ``mem://sha256:<hex>`` ref, full or short (12+ hex, as observe shows it), or a list
============  =====================================================

A budget ``{"tokens": N}`` adds an implicit check: ``result.tokens_used <= N`` when the
child reports ``tokens_used``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bosun.core.errors import InvalidInput
from bosun.core.task.budget import parse_budget

OPS = ("present", "equals", "not_equals", "min", "max", "matches", "nonempty", "contains", "is_ref")
_NEEDS_VALUE = {"equals", "not_equals", "min", "max", "matches", "contains"}
_REF = re.compile(r"^mem://sha256:[0-9a-f]{64}$")  # contract inputs: stored as full refs
_ANY_REF = re.compile(r"^mem://sha256:[0-9a-f]{12,64}$")  # a child's result may carry the short form
_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*$")
MAX_CHECKS = 50
MAX_INPUTS = 100
MAX_RESULT_BYTES = 256_000
MAX_TEXT = 4000


@dataclass(frozen=True)
class Check:
    """One acceptance check."""

    field: str
    op: str
    value: Any = None
    id: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "field": self.field, "op": self.op}
        if self.op in _NEEDS_VALUE:
            out["value"] = self.value
        return out


@dataclass(frozen=True)
class Contract:
    """A validated delegation contract."""

    objective: str
    inputs: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    checks: tuple[Check, ...] = ()
    budget: Mapping[str, Any] = field(default_factory=dict)
    to_agent: str | None = None

    def payload(self, handoff_id: str) -> dict[str, Any]:
        """The ``handoff_created`` event payload."""
        out: dict[str, Any] = {
            "handoff_id": handoff_id, "objective": self.objective, "inputs": list(self.inputs),
            "constraints": list(self.constraints), "checks": [c.to_dict() for c in self.checks],
            "budget": dict(self.budget),
        }
        if self.to_agent:
            out["to_agent"] = self.to_agent
        return out


def _text(field_name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(field_name, "must be a non-empty string")
    if len(value) > MAX_TEXT:
        raise InvalidInput(field_name, f"is {len(value)} characters; at most {MAX_TEXT}", "put long text in a ref")
    return value.strip()


def parse_check(index: int, raw: Any) -> Check:
    """Validate one check; InvalidInput names ``checks[i].<field>``."""
    where = f"checks[{index}]"
    if not isinstance(raw, Mapping):
        raise InvalidInput(where, "must be an object like {\"field\": \"tests_passed\", \"op\": \"equals\", \"value\": true}")
    unknown = sorted(set(raw) - {"id", "field", "op", "value"})
    if unknown:
        raise InvalidInput(f"{where}.{unknown[0]}", "unknown key", "id, field, op, value")
    fld = raw.get("field")
    if not isinstance(fld, str) or not _FIELD.match(fld):
        raise InvalidInput(f"{where}.field", f"must be a dotted field name of the result, got {fld!r}")
    op = raw.get("op", "present")
    if op not in OPS:
        raise InvalidInput(f"{where}.op", f"unknown op {op!r}", ", ".join(OPS))
    if op in _NEEDS_VALUE and "value" not in raw:
        raise InvalidInput(f"{where}.value", f"op {op!r} needs a value")
    value = raw.get("value")
    if op in ("min", "max") and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise InvalidInput(f"{where}.value", f"op {op!r} needs a number, got {value!r}")
    if op == "matches":
        if not isinstance(value, str):
            raise InvalidInput(f"{where}.value", "op 'matches' needs a regex string")
        try:
            re.compile(value)
        except re.error as exc:
            raise InvalidInput(f"{where}.value", f"invalid regex {value!r}: {exc}") from exc
    cid = raw.get("id") or f"{fld}:{op}"
    if not isinstance(cid, str):
        raise InvalidInput(f"{where}.id", "must be a string")
    return Check(field=fld, op=op, value=value, id=cid)


def build_contract(
    objective: Any,
    inputs: Any = None,
    parent_constraints: Sequence[str] = (),
    constraints: Any = None,
    checks: Any = None,
    budget: Any = None,
    to_agent: Any = None,
) -> Contract:
    """Validate the parts of a contract; the parent's constraints are inherited first."""
    obj = _text("objective", objective)
    refs: list[str] = []
    if inputs is not None:
        if not isinstance(inputs, list):
            raise InvalidInput("inputs", "must be a list of refs (mem://sha256:<hex>)")
        if len(inputs) > MAX_INPUTS:
            raise InvalidInput("inputs", f"{len(inputs)} refs; at most {MAX_INPUTS}")
        for i, ref in enumerate(inputs):
            if not isinstance(ref, str) or not _REF.match(ref):
                raise InvalidInput(f"inputs[{i}]", f"not a ref: {ref!r}", "mem://sha256:<64 hex> from observe")
            refs.append(ref)
    extra: list[str] = []
    if constraints is not None:
        if not isinstance(constraints, list):
            raise InvalidInput("constraints", "must be a list of strings")
        extra = [_text(f"constraints[{i}]", c) for i, c in enumerate(constraints)]
    inherited = list(dict.fromkeys([*parent_constraints, *extra]))
    parsed: list[Check] = []
    if checks is not None:
        if not isinstance(checks, list):
            raise InvalidInput("checks", "must be a list of check objects")
        if len(checks) > MAX_CHECKS:
            raise InvalidInput("checks", f"{len(checks)} checks; at most {MAX_CHECKS}")
        parsed = [parse_check(i, c) for i, c in enumerate(checks)]
    ids = [c.id for c in parsed]
    if len(set(ids)) != len(ids):
        raise InvalidInput("checks", "check ids must be unique", "give each check an id")
    b = parse_budget(budget if budget is not None else {})
    agent = None
    if to_agent is not None:
        agent = _text("to_agent", to_agent)
    return Contract(obj, tuple(refs), tuple(inherited), tuple(parsed), b.to_dict(), agent)


def contract_from_payload(payload: Mapping[str, Any]) -> Contract:
    """Rebuild a stored contract (from its ``handoff_created`` event)."""
    checks = tuple(Check(field=str(c.get("field")), op=str(c.get("op")), value=c.get("value"), id=str(c.get("id") or ""))
                   for c in payload.get("checks") or [] if isinstance(c, Mapping))
    return Contract(
        objective=str(payload.get("objective") or ""), inputs=tuple(payload.get("inputs") or ()),
        constraints=tuple(payload.get("constraints") or ()), checks=checks, budget=dict(payload.get("budget") or {}),
        to_agent=payload.get("to_agent") or None,
    )


_MISSING = object()


def _get(result: Mapping[str, Any], dotted: str) -> Any:
    cur: Any = result
    for part in dotted.split("."):
        if isinstance(cur, Mapping) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return _MISSING
    return cur


def _run(check: Check, value: Any) -> str | None:
    """None when the check passes, else why it failed."""
    if value is _MISSING or value is None:
        return f"{check.field} is missing"
    op, want = check.op, check.value
    if op == "present":
        return None
    if op == "equals":
        return None if value == want else f"{check.field} is {value!r}, expected {want!r}"
    if op == "not_equals":
        return None if value != want else f"{check.field} must not be {want!r}"
    if op in ("min", "max"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"{check.field} is {value!r}, not a number"
        ok = value >= want if op == "min" else value <= want
        return None if ok else f"{check.field} is {value}, expected {'>=' if op == 'min' else '<='} {want}"
    if op == "matches":
        return None if isinstance(value, str) and re.search(want, value) else f"{check.field} does not match /{want}/"
    if op == "nonempty":
        return None if isinstance(value, str | list | dict) and len(value) > 0 else f"{check.field} is empty"
    if op == "contains":
        ok = isinstance(value, list | str) and (want in value if isinstance(value, list) or isinstance(want, str) else False)
        return None if ok else f"{check.field} does not contain {want!r}"
    if op == "is_ref":
        items = value if isinstance(value, list) else [value]
        ok = bool(items) and all(isinstance(v, str) and _ANY_REF.match(v) for v in items)
        return None if ok else f"{check.field} is not a ref (mem://sha256:<hex>)"
    return f"unknown op {op!r}"


def check_result(contract: Contract, result: Any) -> tuple[bool, list[dict[str, str]]]:
    """Run the contract's checks (and its token budget) on the child's result: (passed, failures)."""
    if not isinstance(result, Mapping):
        raise InvalidInput("result", f"must be a JSON object, got {type(result).__name__}")
    try:
        size = len(json.dumps(result, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidInput("result", f"not JSON-serialisable ({exc})") from exc
    if size > MAX_RESULT_BYTES:
        raise InvalidInput("result", f"is {size} bytes; at most {MAX_RESULT_BYTES}", "store big outputs with observe and pass refs")
    failures: list[dict[str, str]] = []
    for check in contract.checks:
        why = _run(check, _get(result, check.field))
        if why:
            failures.append({"check": check.id, "reason": why})
    limit = contract.budget.get("tokens")
    used = result.get("tokens_used")
    if limit is not None and isinstance(used, int | float) and not isinstance(used, bool) and used > limit:
        failures.append({"check": "budget.tokens", "reason": f"tokens_used {used} exceeds the budget of {limit}"})
    return not failures, failures
