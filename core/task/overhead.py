"""Overhead modes: how much of bosun a task carries, so bosun never costs a small task more than it saves.

bosun's own tokens in an agent's context are the sealed manifest (~120 tokens, carried), the
stubs that replace offloaded results, and precheck calls the agent makes itself (its request,
with the seal, and the answer). Savings are the offloaded tokens and the repeats a duplicate
verdict spares. On a task of a few small outputs, the fixed costs win; on a long task, the
savings do. The four modes (OSIRIS: bystander, light, standard, full) set the knobs:

=========  ========  =====================================  =================================
mode       manifest  offload fresh results (prune mode)     precheck in the agent's context
=========  ========  =====================================  =================================
bystander  no        from 2,000 tokens (``conservative``)   none (``bosun run`` still offloads)
light      yes       from 800 tokens (``balanced``)         none
standard   yes       any its stub halves (``cache_ttl``)    calls that write or run a program
                                                            (where repeated failures happen)
full       yes       any its stub halves (``aggressive``)   every call
=========  ========  =====================================  =================================

``auto`` starts as bystander and moves to the mode that would have carried the
fewest tokens had the task run in it from the start (``choose``, follow the leader): each mode's
savings and costs are counted on the outputs the task actually produced, so a mode is only
chosen once it has paid for itself on this task (no fitted size thresholds).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bosun.core.errors import InvalidInput


@dataclass(frozen=True)
class OverheadMode:
    name: str
    manifest: bool  # the agent carries the sealed manifest
    prune_mode: str  # observe's offload thresholds (core/offload/offload.py)
    precheck: str  # which calls the agent prechecks: "none", "runs" (writes or runs a program), "all"


MODES: dict[str, OverheadMode] = {
    "bystander": OverheadMode("bystander", False, "conservative", "none"),
    "light": OverheadMode("light", True, "balanced", "none"),
    "standard": OverheadMode("standard", True, "cache_ttl", "runs"),
    "full": OverheadMode("full", True, "aggressive", "all"),
}
AUTO = "auto"
DEFAULT_MODE = "standard"  # what bosun did before modes existed: a task in it journals no setting
OVERHEAD_MODES = (AUTO, *MODES)
ORDER = tuple(MODES)  # lightest first: ties go to the lighter mode


def check_mode(name: Any, field: str = "overhead") -> str:
    if name not in OVERHEAD_MODES:
        raise InvalidInput(field, f"unknown overhead mode {name!r}", ", ".join(OVERHEAD_MODES))
    return str(name)


def mode_events(name: str, why: str) -> list[tuple[str, dict[str, Any]]]:
    """The setting flags a task starts with: its overhead mode and the prune mode observe follows
    (``auto`` starts as bystander; the server moves it with ``choose`` as results arrive)."""
    check_mode(name)
    mode = MODES["bystander" if name == AUTO else name]
    return [("state_flag", {"name": "overhead_mode", "value": name, "why": why, "source": "bosun"}),
            ("state_flag", {"name": "prune_mode", "value": mode.prune_mode, "why": f"overhead mode {name}",
                            "source": "bosun"})]


def effective(state_flags: Mapping[str, Any], default: str = AUTO) -> OverheadMode:
    """The mode a task runs in now: its own, or (auto) the one ``choose`` last settled on."""
    name = str(state_flags.get("overhead_mode") or default)
    if name in MODES:
        return MODES[name]
    settled = next((m for m in MODES.values() if m.prune_mode == state_flags.get("prune_mode")), None)
    return settled or MODES["bystander"]


@dataclass
class Costs:
    """What each mode would have cost and saved on a task so far, had it run in that mode from the start.

    Per prompt, a mode saves what its offloads and duplicate verdicts kept out of the context so far
    and pays its manifest and the prechecks made so far (they stay in every later prompt).
    ``carried`` sums that balance over the prompts seen: the figure ``choose`` compares.
    """

    saved: dict[str, int]  # per prompt: tokens kept out so far (offloaded result minus stub, spared repeats)
    spent: dict[str, int]  # per prompt: manifest + precheck requests and answers so far
    carried: dict[str, int]  # summed over the prompts so far

    @classmethod
    def empty(cls) -> Costs:
        return cls({m: 0 for m in MODES}, {m: 0 for m in MODES}, {m: 0 for m in MODES})

    def net(self, mode: str) -> int:
        return self.carried[mode]

    def next_prompt(self) -> None:
        """One more prompt holds everything so far."""
        for m in MODES:
            self.carried[m] += self.saved[m] - self.spent[m]


def add_call(costs: Costs, offload_saving: Mapping[str, int], precheck_tokens: int, runs: bool,
             duplicate_saving: int = 0) -> None:
    """Fold one call: per mode, its offload saving (result minus stub, 0 when kept), the precheck it
    would have made (request + answer tokens; ``runs``: the call writes or runs a program) and, when
    it prechecked, what a duplicate verdict spared (the result not fetched again, minus the answer)."""
    for name, mode in MODES.items():
        costs.saved[name] += int(offload_saving.get(name, 0))
        if mode.precheck == "all" or (mode.precheck == "runs" and runs):
            costs.spent[name] += precheck_tokens
            costs.saved[name] += duplicate_saving


def add_manifest(costs: Costs, manifest_tokens: int) -> None:
    """The manifest (issued at start): carried in every prompt by the modes that carry one."""
    for name, mode in MODES.items():
        if mode.manifest:
            costs.spent[name] += manifest_tokens


def choose(costs: Costs, current: str = "bystander") -> str:
    """The mode that would have carried the fewest tokens so far (follow the leader); the current one
    is kept on a tie, then the lighter one. Nothing is fitted: the task's own outputs decide."""
    best = current
    for name in ORDER:
        if costs.net(name) > costs.net(best):
            best = name
    return best
