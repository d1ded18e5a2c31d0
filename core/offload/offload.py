"""Offloading policy: when a tool result leaves the prompt, and the stub that replaces it.

Four pruning modes (OSIRIS section 6). Offloading a *fresh* result never
touches the cached prompt prefix (it sits in the working zone), so modes differ
in how large a fresh result must be before it is moved out, and in what older
history a compaction plan may move out (``evict``):

| mode | offload fresh results from | compaction may move (never the newest ``keep_recent``) |
|---|---|---|
| ``cache_ttl`` (default) | any size whose stub costs at most half of it | the working zone; everything once the prompt cache expired (idle > TTL); keeps 4 |
| ``conservative`` | 2,000 tokens | the working zone only (zero cache impact); keeps 8 |
| ``balanced`` | 800 tokens | the working zone and cold history (older than 8 results); keeps 4 |
| ``aggressive`` | any size whose stub costs at most half of it | everything rehydratable (may cost a prefix re-fill); keeps 1 |

A result is offloaded only when its stub saves tokens: the stub (ref, sizes,
outline, recall calls) must cost at most half the result, so bosun never costs
more than it saves. In cache_ttl and aggressive that is the only rule (a minimal
stub is ~70 tokens, so outputs from ~140 tokens on can leave): on the replay's dev
split, a 500 / 350 / 250 / 150-token floor saved less at every step (bench/results/
offload_threshold.md). An explicit slice the agent asked for (``sed -n 10,80p``,
``head -n 50``) passes through up to ``slice_max_tokens``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from bosun.core.errors import InvalidInput
from bosun.core.offload.outline import Outline
from bosun.core.tokens import estimate_tokens

SAMPLE_ABOVE = 96_000  # characters: larger payloads get a sampled token estimate
SAMPLE_SLICES = 48  # many short slices, each started at a line start: bench/token_sampling.py
SAMPLE_SLICE = 100


@dataclass(frozen=True)
class PruneMode:
    """Thresholds of one pruning mode (see the module table)."""

    name: str
    offload_min_tokens: int
    slice_factor: float
    outline_share: float  # outline budget as a share of the payload's tokens ...
    outline_min: int  # ... clamped to [outline_min, outline_max]
    outline_max: int
    evict: str  # compaction scope: ttl | working | cold | all
    slice_max_tokens: int = 0  # an explicit slice passes through up to this (0: slice_factor x the threshold)
    ttl_s: float = 300.0
    cold_after: int = 8  # results older than this many newer results are "cold"
    keep_recent: int = 4  # compaction never moves the newest results (the agent is working with them)
    min_evict_tokens: int = 60  # smaller items stay: their digest line would cost a quarter of them or more

    def outline_budget(self, tokens: int) -> int:
        return int(min(self.outline_max, max(self.outline_min, tokens * self.outline_share)))


MODES: dict[str, PruneMode] = {
    "cache_ttl": PruneMode("cache_ttl", 0, 4.0, 0.05, 48, 220, "ttl", slice_max_tokens=500),
    "conservative": PruneMode("conservative", 2000, 4.0, 0.06, 64, 300, "working", keep_recent=8),
    "balanced": PruneMode("balanced", 800, 3.0, 0.05, 48, 240, "cold"),
    "aggressive": PruneMode("aggressive", 0, 2.0, 0.04, 32, 160, "all", slice_max_tokens=500, keep_recent=1),
}
DEFAULT_MODE = "cache_ttl"
MAX_STUB_SHARE = 0.5  # a stub may cost at most this share of the result it replaces
STUB_FLOOR_TOKENS = 49  # a stub with an empty outline (ref, sizes, kind, recall hints): no output under twice this can leave
VIEW_MIN_TOKENS = 40  # below this, a compressed view's ref and note cost about what the noise does


def get_mode(name: str | None) -> PruneMode:
    mode = MODES.get(name or DEFAULT_MODE)
    if mode is None:
        raise InvalidInput("mode", f"unknown pruning mode {name!r}", ", ".join(MODES))
    return mode


def count_lines(data: bytes) -> int:
    """Lines in UTF-8 ``data`` (a last line without a newline counts), as ``str.count`` would give.

    A newline byte is a newline character in UTF-8, so counting bytes is exact; numpy compares a
    megabyte in ~40 us where ``count`` takes ~0.4 ms.
    """
    if not data:
        return 0
    if len(data) < 65536:
        newlines = data.count(b"\n")
    else:
        newlines = int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) == 10))
    return newlines + (0 if data.endswith(b"\n") else 1)


def fast_tokens(text: str) -> int:
    """``estimate_tokens``, sampled on large payloads: 48 evenly spaced ~100-character slices.

    The per-character cost of the estimator (~60 ns) would otherwise dominate observing a
    megabyte. Each slice starts at a line start when one is near and ends at a line end when
    it can (a cut word or number costs more tokens than it has), and the sampled cost per
    character is scaled to the whole. On 360 payloads of 100 KB-1 MB cut from real agent
    output (``bench/token_sampling.py``) the sampled figure is within 2.1 % of the full estimate
    at the median, 5.3 % at p90 and 14.5 % at worst, at a fifth of the cost of 16 x 1,500
    characters (which gave 1.6-1.9 % / 4.8-6.7 % / 7.8-10.5 % on the same kind of payloads).
    """
    n = len(text)
    if n <= SAMPLE_ABOVE:
        return estimate_tokens(text)
    step = (n - SAMPLE_SLICE) // (SAMPLE_SLICES - 1)
    pieces: list[str] = []
    for i in range(SAMPLE_SLICES):
        start = i * step
        nl = text.find("\n", start, start + SAMPLE_SLICE)
        if nl >= 0:
            start = nl + 1
        piece = text[start : start + SAMPLE_SLICE]
        end = piece.rfind("\n")
        if end > SAMPLE_SLICE // 2:
            piece = piece[: end + 1]
        pieces.append(piece)
    sample = "".join(pieces)  # estimated in one call: mostly whole lines, joined at line ends
    return max(1, round(estimate_tokens(sample) * n / max(len(sample), 1)))


_SLICE = re.compile(
    r"\bsed\s+-n\s+['\"]?\d+\s*,\s*\d+\s*p|\b(?:head|tail)\s+-(?:n\s*)?\d+|\bnl\b.*\|\s*sed\s+-n|"
    r"\bgrep\b.*\s-[A-Za-z]*[ABC]\s*\d+|\bawk\s+['\"]NR\s*[>=<]"
)


def explicit_slice(command: str | None) -> bool:
    """True when the command already asked for a bounded part (the agent wants all of it)."""
    return bool(command and _SLICE.search(command))


@dataclass
class Decision:
    offload: bool
    reason: str


def decide(tokens: int, mode: PruneMode, command: str | None = None, force: bool | None = None) -> Decision:
    """Whether a result of ``tokens`` tokens leaves the prompt (before the stub-cost check)."""
    if force is True:
        return Decision(True, "requested")
    if force is False:
        return Decision(False, "requested")
    threshold = mode.offload_min_tokens
    if explicit_slice(command):
        threshold = mode.slice_max_tokens or int(threshold * mode.slice_factor)
        if tokens < threshold:
            return Decision(False, f"explicit slice under {threshold} tokens")
    if tokens < threshold:
        return Decision(False, f"under {threshold} tokens ({mode.name})")
    if tokens < STUB_FLOOR_TOKENS / MAX_STUB_SHARE:
        return Decision(False, "a stub could not cost half of it")
    return Decision(True, f"over {threshold} tokens ({mode.name})" if threshold else f"stub may save ({mode.name})")


def outline_budget(mode: PruneMode, tokens: int, kind: str) -> int:
    """Tokens the outline of a ``kind`` output may take.

    JSON (API results) gets the room the half rule leaves: its outline is the identifiers and key
    names an API agent acts on next, and an agent that has to recall one re-reads its whole
    context for it, which costs more than the stub saves on a short run. A test run too: its
    failing tests and their first error lines are what a coding agent acts on next.
    """
    budget = mode.outline_budget(tokens)
    if kind in ("json", "jsonl", "test"):
        budget = max(budget, min(mode.outline_max, int(tokens * MAX_STUB_SHARE) - STUB_FLOOR_TOKENS))
    return budget


def hint_text(hint: dict[str, Any]) -> str:
    """A recall hint as a compact call: ``grep pattern='^FAILED' context=0``."""
    op = hint.get("op", "head")
    args = " ".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in hint.items() if k != "op")
    return f"{op} {args}".strip()


def build_stub(
    ref: str, nbytes: int, tokens: int, total_lines: int, outline: Outline, max_hints: int = 3
) -> dict[str, Any]:
    """The stub that stands in for an offloaded result (what the agent carries)."""
    hints = [hint_text(h) for h in outline.hints[: max_hints - 1]]
    hints.append('grep pattern="<regex>"')
    return {
        "ref": ref,
        "bytes": nbytes,
        "tokens": tokens,
        "lines": total_lines,
        "kind": outline.kind,
        "outline": outline.text,
        "recall": hints,
    }


def stub_tokens(stub: dict[str, Any]) -> int:
    """What the stub costs in the prompt: its compact JSON, as the agent receives it."""
    return estimate_tokens(json.dumps(stub, separators=(",", ":"), ensure_ascii=False))


def worth_it(tokens: int, stub_cost: int) -> bool:
    """Offload only when the stub costs at most half the result: a real saving, never a loss."""
    return stub_cost <= tokens * MAX_STUB_SHARE


def short_ref(digest: str, n: int = 16) -> str:
    """The stub's ref: a 16-hex prefix (64 bits) that recall resolves to the full verified address."""
    return f"mem://sha256:{digest[:n]}"


def answer_tokens(answer: dict[str, Any]) -> int:
    """Tokens the agent carries for a bosun answer: its compact JSON, as the tool sends it."""
    return estimate_tokens(json.dumps(answer, separators=(",", ":"), ensure_ascii=False))
