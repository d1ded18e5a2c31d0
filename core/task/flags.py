"""Named task flags: what invariants' ``require = {state = ...}`` test, set and cleared on the record.

A flag is a named JSON scalar on the task (``review_approved = true``, ``env = "staging"``).
Agents and people set and clear flags with ``plan(mode="update", more={"flags": {...}, "why": ...})``;
each change is one ``state_flag`` journal event carrying the value, who (the journal's agent)
and why, and every flag but the two settings in ``SETTING_FLAGS`` is covered by the seal.

Some flags are facts bosun derives from evidence (``EVIDENCE_FLAGS``): nobody may set them
by hand, or an invariant like ``tests-before-commit`` would only test the agent's word. Settings
(``SETTING_FLAGS``) tune bosun for the task and must hold one of their known values.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from bosun.core.errors import InvalidInput
from bosun.core.task.state import SETTING_FLAGS, TaskState

NAME = re.compile(r"^[a-z][a-z0-9_.-]{0,63}$")
MAX_VALUE_CHARS = 200
MAX_WHY_CHARS = 500

# flags bosun sets itself, and the evidence it sets them from (docs/plan.md lists them too)
EVIDENCE_FLAGS: dict[str, str] = {
    "tests_passed": "observe(kind='test'), or any observed result that reads as a test run: true when the "
                    "run's summary reports passes and no failure or error, false when it reports a failure "
                    "or an error; an unknown outcome leaves the flag as it was",
}
# settings: the values each one accepts (None: checked by the caller that owns the setting)
SETTING_VALUES: dict[str, tuple[str, ...]] = {
    "prune_mode": ("cache_ttl", "conservative", "balanced", "aggressive"),
    "overhead_mode": ("auto", "bystander", "light", "standard", "full"),
}
assert set(SETTING_VALUES) == SETTING_FLAGS


def _check_value(field: str, value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        if isinstance(value, float) and value != value:  # NaN is not JSON
            raise InvalidInput(field, "must be a finite number")
        return value
    if isinstance(value, str):
        if not value.strip() or len(value) > MAX_VALUE_CHARS:
            raise InvalidInput(field, f"must be a non-empty string of at most {MAX_VALUE_CHARS} characters")
        return value.strip()
    raise InvalidInput(field, f"must be true/false, a number or a short string (null clears), "
                              f"got {type(value).__name__}")


def flag_events(flags: Any, why: Any, state: TaskState) -> list[tuple[str, dict[str, Any]]]:
    """Validate ``{name: value | null}`` and return the ``state_flag`` events that change something.

    ``null`` clears a flag. A value equal to the current one appends nothing. ``why`` is required:
    a flag is a claim about the task, and its reason is what a reviewer reads in the journal.
    """
    if not isinstance(flags, Mapping) or not flags:
        raise InvalidInput("flags", "must be a non-empty object {name: value}, null clears",
                           '{"review_approved": true}')
    if not isinstance(why, str) or not why.strip():
        raise InvalidInput("why", "is required with flags: say who approved or what evidence holds",
                           "e.g. 'PR #12 approved by alice'")
    why = why.strip()
    if len(why) > MAX_WHY_CHARS:
        raise InvalidInput("why", f"is {len(why)} characters; at most {MAX_WHY_CHARS}")
    out: list[tuple[str, dict[str, Any]]] = []
    for name in sorted(flags):
        field = f"flags.{name}"
        if not isinstance(name, str) or not NAME.match(name):
            raise InvalidInput(field, "a flag name is lowercase letters, digits, '_', '.', '-' (max 64)",
                               "e.g. review_approved")
        if name in EVIDENCE_FLAGS:
            raise InvalidInput(field, f"is set by bosun from evidence ({EVIDENCE_FLAGS[name]})",
                               "report the run with observe, or require a flag of your own in the invariant")
        value = _check_value(field, flags[name])
        if name in SETTING_VALUES and value is not None and value not in SETTING_VALUES[name]:
            raise InvalidInput(field, f"unknown value {value!r}", ", ".join(SETTING_VALUES[name]))
        if value is None:
            if name in state.flags:
                out.append(("state_flag", {"name": name, "value": None, "cleared": True, "why": why,
                                           "source": "agent"}))
        elif name not in state.flags or json.dumps(state.flags[name]) != json.dumps(value):
            out.append(("state_flag", {"name": name, "value": value, "why": why, "source": "agent"}))
    return out


def flag_view(state: TaskState) -> dict[str, Any]:
    """Each current flag with who set it, why and from what (the resume and status views)."""
    out: dict[str, Any] = {}
    for name, value in sorted(state.flags.items()):
        meta = state.flag_meta.get(name, {})
        out[name] = {"value": value, "by": meta.get("by"), "why": meta.get("why"),
                     "source": meta.get("source") or ("bosun" if name in EVIDENCE_FLAGS else "agent"),
                     "seq": meta.get("seq"), "sealed": name not in SETTING_FLAGS}
    return out
