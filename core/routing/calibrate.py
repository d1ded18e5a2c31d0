"""Self-calibration: set the decision to route from the corpus itself, without labels.

When a corpus loads, bosun knows nothing about its prompts but it has its documents and a
fixed set of everyday background prompts (``bosun.core.routing.background``) that no document
governs. Scoring every background prompt against the corpus, exactly as a real prompt is scored,
gives this corpus's *null* distribution: how strong the best candidate looks when nothing
applies. A corpus of one-line tool blurbs and one of terse policies produce very different
nulls (the relevance probability of the best candidate sits near 0.45 on MetaTool's 199 tools
and near 0.15 on a 15-policy corpus), so one fixed threshold cannot fit both.

The decision then reads:

* ``threshold``: a candidate's relevance probability must exceed what the best candidate of
  ``THRESHOLD_LEVEL`` of background prompts reaches;
* ``solo_bg_z``: a candidate matching fewer than two co-occurring words must stand, in its own
  document's background deviations, above ``GATE_LEVEL`` of the background prompts' best
  candidates (each prompt's own score left out of its document's background statistics);
* ``clause_threshold`` / ``clause_solo_bg_z``: the same two bars for a clause's own best document
  (``CLAUSE_THRESHOLD_LEVEL``, ``CLAUSE_GATE_LEVEL``);
* ``next_threshold``: once one document is routed, a further one needs to beat only
  ``NEXT_LEVEL`` of the null (a prompt that needs two documents rarely scores the second as high).

The levels were chosen on the MetaTool dev tuning split and 15-tool MetaTool sub-corpora
(bench/route_dev.py, bench/route_multi.py); the held-out split and the repo's policy corpora were
scored after. A clause of a multi-intent prompt (``route.py::_clause_hits``) is one more test against
the same null, so it faces its own, stricter levels (``CLAUSE_*``, never below the prompt's): the
rule was the most recall@2 on MetaTool tune positives with false alarms on its awareness negatives
<= 0.20. Chosen: threshold p60, gate p80 (p70 before clauses existed), clauses p90 / p90.

A corpus of one-line blurbs (no document has a body: a tool list) has a second channel
(``Levels.semantic_channel``, round 8): a candidate passes a bar when its probability *or* its semantic score
stands that high in the null. Each background prompt's best candidate gets ``max(F_p(p), F_s(sem))`` (F: the
null's own distribution of each), the bar's level is a quantile of that, and it is read back as one bar per
channel (``threshold`` for the probability, ``semantic_threshold`` for the cosine), for a first document and a
clause's; a second document keeps its probability bar (``NEXT_LEVEL`` of the probability's null): on a tool list
the runner-up is often a sibling tool as close in meaning as the leader, and only the probability's margin tells
it apart (a semantic bar for it too added 1,880 second names on MetaTool tune for 114 right ones). The probability weighs
lexical overlap, which a 20-word blurb rarely has, and on MetaTool the semantic score alone separates better
(ROC AUC 0.910 vs 0.894); on policy corpora (bodies) the same rule cost a prompt on both labelled dev sets,
so it is not used there. Level chosen on the MetaTool tune split by the same rule: p70.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

THRESHOLD_LEVEL = 0.6
GATE_LEVEL = 0.8
NEXT_LEVEL = 0.4
CLAUSE_THRESHOLD_LEVEL = 0.9  # a clause's own best document (route.py::_clause_hits): never below the prompt's
CLAUSE_GATE_LEVEL = 0.9
SEMANTIC_CHANNEL_LEVEL = 0.7  # the first-document level when the semantic channel is on (bodiless corpora)
# sane bounds whatever the corpus: never route on a coin flip below 0.05, never demand certainty
THRESHOLD_BOUNDS = (0.05, 0.9)
GATE_BOUNDS = (1.0, 6.0)


@dataclass(frozen=True)
class Levels:
    """Where on the null each bar sits (quantiles of the background prompts' best candidates)."""

    threshold: float = THRESHOLD_LEVEL
    gate: float = GATE_LEVEL
    next: float = NEXT_LEVEL
    clause_threshold: float = CLAUSE_THRESHOLD_LEVEL
    clause_gate: float = CLAUSE_GATE_LEVEL
    # the one-word gate also asks that the prompt read closer to the document than to every background
    # prompt (abstain.admissible's ``everyday_gap``); off for corpora that serve everyday requests
    everyday_gap: bool = True
    # a corpus without bodies also admits on the semantic channel (see the module docstring); its
    # first-document level replaces ``threshold`` there. None: the channel is off (the Tool Compass)
    semantic_channel: float | None = None

    def as_dict(self) -> dict[str, float | bool]:
        out: dict[str, float | bool] = {"threshold": self.threshold, "gate": self.gate, "next": self.next,
                                        "clause_threshold": self.clause_threshold, "clause_gate": self.clause_gate,
                                        "everyday_gap": self.everyday_gap}
        if self.semantic_channel is not None:
            out["semantic_channel"] = self.semantic_channel
        return out


ROUTE_LEVELS = Levels(semantic_channel=SEMANTIC_CHANNEL_LEVEL)


@dataclass(frozen=True)
class SelfCalibration:
    """The decision fitted to one corpus, and the figures it came from (shown to operators)."""

    threshold: float
    solo_bg_z: float
    next_threshold: float
    n_background: int
    null_p_median: float
    null_bg_z_median: float
    # a clause of a multi-intent prompt is one more test against the same null: its own (stricter) levels
    clause_threshold: float | None = None
    clause_solo_bg_z: float | None = None
    levels: Levels = ROUTE_LEVELS
    # the semantic channel's bars (cosines; None when the channel is off): a first document, a clause's
    semantic_threshold: float | None = None
    semantic_clause: float | None = None
    # the null itself, so another use of the same index (the Tool Compass) can sit at other levels
    null_p: tuple[float, ...] = field(default=(), repr=False, compare=False)
    null_bg_z: tuple[float, ...] = field(default=(), repr=False, compare=False)
    null_sem: tuple[float, ...] = field(default=(), repr=False, compare=False)  # empty: the corpus has bodies

    def at(self, levels: Levels) -> SelfCalibration:
        """The same null read at other levels (no re-scoring)."""
        if not self.null_p:
            return replace(self, levels=levels)
        return from_null(list(self.null_p), list(self.null_bg_z), levels, list(self.null_sem) or None)

    def describe(self) -> str:
        """The one line a route answer carries (levels and counts are in ``as_dict``)."""
        clause = f", clause {self.clause_threshold:.2f}" if self.clause_threshold is not None else ""
        sem = (f"; or semantic {self.semantic_threshold:.2f}, clause {self.semantic_clause:.2f}"
               if self.semantic_threshold is not None and self.semantic_clause is not None else "")
        return (f"self-calibrated on this corpus: threshold {self.threshold:.2f}, "
                f"one-word gate {self.solo_bg_z:.1f}, second document {self.next_threshold:.2f}{clause}{sem}")

    def as_dict(self) -> dict[str, float | int | dict[str, float | bool]]:
        return {"threshold": round(self.threshold, 3), "solo_bg_z": round(self.solo_bg_z, 2),
                "next_threshold": round(self.next_threshold, 3), "background_prompts": self.n_background,
                "null_p_median": round(self.null_p_median, 3), "null_bg_z_median": round(self.null_bg_z_median, 2),
                "clause_threshold": round(self.clause_threshold if self.clause_threshold is not None else self.threshold, 3),
                "clause_solo_bg_z": round(self.clause_solo_bg_z if self.clause_solo_bg_z is not None else self.solo_bg_z, 2),
                **({"semantic_threshold": round(self.semantic_threshold, 3),
                    "semantic_clause": round(self.semantic_clause, 3)}
                   if self.semantic_threshold is not None and self.semantic_clause is not None else {}),
                "levels": self.levels.as_dict()}


def leave_one_out_z(sems: npt.NDArray[np.float32], sd_floor: float) -> npt.NDArray[np.float32]:
    """[n_background, n_docs] semantic scores -> each prompt's z against the others' mean and spread per doc."""
    nb = sems.shape[0]
    if nb < 3:
        return np.zeros_like(sems)
    x = sems.astype(np.float64)
    total, squares = x.sum(axis=0), (x * x).sum(axis=0)
    mean = (total - x) / (nb - 1)
    var = (squares - x * x) / (nb - 1) - mean * mean
    sd = np.maximum(np.sqrt(np.maximum(var, 0.0)), sd_floor)
    return ((x - mean) / sd).astype(np.float32)


def from_null(null_p: list[float], null_bg_z: list[float], levels: Levels = ROUTE_LEVELS,
              null_sem: list[float] | None = None) -> SelfCalibration:
    """The calibration from the best candidate's probability and bg_z on each background prompt.

    ``null_sem``: that candidate's semantic score, given for a corpus without bodies; with
    ``levels.semantic_channel`` set it turns the semantic channel on (the module docstring).
    """
    p = np.asarray(null_p, np.float64)
    z = np.asarray(null_bg_z, np.float64)
    if p.size == 0:
        return SelfCalibration(0.5, 3.0, 0.5, 0, 0.0, 0.0, levels=levels)
    lo, hi = THRESHOLD_BOUNDS
    s = np.asarray(null_sem if null_sem is not None else [], np.float64)
    channel = levels.semantic_channel is not None and s.size == p.size
    if channel:
        assert levels.semantic_channel is not None
        # each null prompt's best candidate: how high it stands in either channel's own distribution
        both = np.maximum(_cdf(p, p), _cdf(s, s))
        at = lambda level: float(np.clip(np.quantile(both, level), 0.0, 1.0))  # noqa: E731
        t_first, t_clause = at(levels.semantic_channel), at(levels.clause_threshold)
        bar = lambda x, t: float(np.quantile(x, t, method="inverted_cdf"))  # noqa: E731  F(x) >= t from here
        thr = float(np.clip(bar(p, t_first), lo, hi))
        nxt = float(np.clip(np.quantile(p, levels.next), lo, thr))  # a second document: the probability alone
        clause_thr = float(np.clip(bar(p, t_clause), lo, hi))
        sem_bars: tuple[float | None, float | None] = (bar(s, t_first), max(bar(s, t_clause), bar(s, t_first)))
    else:
        thr = float(np.clip(np.quantile(p, levels.threshold), lo, hi))
        nxt = float(np.clip(np.quantile(p, levels.next), lo, thr))
        clause_thr = float(np.clip(np.quantile(p, levels.clause_threshold), lo, hi))
        sem_bars = (None, None)
    gate = float(np.clip(np.quantile(z, levels.gate), *GATE_BOUNDS))
    clause_gate = float(np.clip(np.quantile(z, levels.clause_gate), *GATE_BOUNDS))
    return SelfCalibration(thr, gate, nxt, int(p.size), float(np.median(p)), float(np.median(z)),
                           max(thr, clause_thr), max(gate, clause_gate), levels, *sem_bars,
                           tuple(float(x) for x in p), tuple(float(x) for x in z),
                           tuple(float(x) for x in s) if s.size == p.size else ())


def _cdf(null: npt.NDArray[np.float64], x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The share of ``null`` at or below each value of ``x``."""
    return np.searchsorted(np.sort(null), x, side="right") / max(1, null.size)
