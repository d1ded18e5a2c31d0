"""The sealed manifest: a small deterministic block the agent carries at a fixed place.

It names the task, the objective, plan progress and counts of what the task
holds, and ends in ``SEAL=sha256:<hex>``. It is a pure function of the state
(no clock, no randomness): same state, same bytes. Long texts are shortened
until the block fits ``MAX_TOKENS`` by ``core.tokens.estimate_tokens``.
"""

from __future__ import annotations

import re

from bosun.core.task.seal import SEAL_PREFIX, seal_record
from bosun.core.task.state import TaskState
from bosun.core.tokens import estimate_tokens

MAX_TOKENS = 130  # the promise: at most this many tokens
# the shortening threshold: estimate_tokens runs ~6 % under cl100k on manifests (the hex seal), so leave room
FIT_TOKENS = 120
_WS = re.compile(r"\s+")


def _clip(text: str, limit: int) -> str:
    text = _WS.sub(" ", text).strip().replace('"', "'")
    if len(text) <= limit:
        return text
    cut = text[: max(1, limit - 1)].rstrip()
    return cut + "…"


def budget_status(state: TaskState) -> str:
    """ok / warn (>= 80% of the declared token budget) / over; "none" when no budget was declared."""
    limit = state.budget.get("tokens")
    if not isinstance(limit, int | float) or isinstance(limit, bool) or limit <= 0:
        return "none"
    used = state.consumed_tokens / float(limit)
    return "ok" if used < 0.8 else ("warn" if used < 1.0 else "over")


def render(state: TaskState, obj_chars: int = 72, step_chars: int = 40) -> str:
    seal = state.seals[-1].seal if state.seals else seal_record(state).seal
    total = len(state.plan)
    done = sum(1 for step in state.completed if step in state.plan)
    lines = [f"BOSUN/1 task={state.task_id} v={state.version} status={state.status}",
             f'obj="{_clip(state.objective, obj_chars)}"']
    plan = f"plan={done}/{total}"
    if state.active and step_chars > 0:
        plan += f' now="{_clip(state.active[0], step_chars)}"'
    elif state.remaining and step_chars > 0:
        plan += f' next="{_clip(state.remaining[0], step_chars)}"'
    lines.append(plan)
    open_handoffs = sum(1 for h in state.handoffs.values() if h.get("status") != "completed")
    lines.append(
        f"inv={len(state.constraints)} dec={len(state.decisions)} files={len(state.files)} "
        f"refs={len(state.refs())} fail={len(state.failures)} lessons={len(state.lessons)} "
        f"handoffs={open_handoffs} budget={budget_status(state)}"
    )
    lines.append(f"SEAL={SEAL_PREFIX}{seal}")
    return "\n".join(lines)


def build_manifest(state: TaskState, max_tokens: int = FIT_TOKENS) -> str:
    """The manifest of ``state``, shortened until its estimate fits ``max_tokens``."""
    obj_chars, step_chars = 72, 40
    text = render(state, obj_chars, step_chars)
    while estimate_tokens(text) > max_tokens and (obj_chars > 12 or step_chars > 0):
        if step_chars > 0:
            step_chars = step_chars - 8 if step_chars > 8 else 0
        else:
            obj_chars -= 8
        text = render(state, obj_chars, step_chars)
    return text
