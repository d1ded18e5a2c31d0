"""The judge's reading of each claim: its evidence window, and supported / refuted / not-enough-info.

The lexical and embedding rules (match.py, consistency.py) see a claim and a sentence one word or one vector
at a time; the judge reads the claim with its best evidence together. When the judge is at hand it decides
the verdict, and the rules stay as a second opinion: a contradiction the rules find (a number, a negation,
a swapped role) stands unless the judge is sure the evidence supports the claim. Every answer names the
sentences (and so the chunks) the judge read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bosun.core.judge import NEI, REFUTED, SUPPORTED, WINDOW_WORDS, Judge, evidence_window

REFUTED_BAR = 0.5  # P(refuted) at or above this, and above P(supported): contradicted
RULES_OVERRIDE = 0.9  # P(supported) at or above this outweighs a contradiction the rules found


@dataclass(frozen=True)
class JudgeReading:
    supported: float
    refuted: float
    nei: float
    sentences: tuple[int, ...]  # the window's sentence ids, the best-matching first

    def as_dict(self) -> dict[str, object]:
        return {"supported": round(self.supported, 4), "refuted": round(self.refuted, 4), "nei": round(self.nei, 4)}


def read_claims(claims: Sequence[str], sentences: Sequence[str], judge: Judge,
                budget_words: int = WINDOW_WORDS) -> list[JudgeReading | None]:
    """One reading per claim (None where no sentence shares a word with it), in one batch of judge calls."""
    windows = [evidence_window(c, sentences, budget_words) for c in claims]
    todo = [i for i, (text, _) in enumerate(windows) if text]
    out: list[JudgeReading | None] = [None] * len(claims)
    if not todo:
        return out
    probs = judge.claim_probs([(claims[i], windows[i][0]) for i in todo])
    for row, i in zip(probs.tolist(), todo, strict=True):
        out[i] = JudgeReading(row[SUPPORTED], row[REFUTED], row[NEI], tuple(windows[i][1]))
    return out


def judged_verdict(reading: JudgeReading, rule_verdict: str, threshold: float,
                   refuted_bar: float = REFUTED_BAR, override: float = RULES_OVERRIDE) -> str:
    """supported / contradicted / unsupported from the judge, with the rules' contradiction as a veto."""
    if reading.refuted >= refuted_bar and reading.refuted >= reading.supported:
        return "contradicted"
    if rule_verdict == "contradicted" and reading.supported < override:
        return "contradicted"
    if reading.supported >= threshold:
        return "supported"
    return "unsupported"
