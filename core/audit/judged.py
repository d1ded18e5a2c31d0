"""The judge's reading of each claim: its evidence window, and supported / refuted / not-enough-info.

The lexical and embedding rules (match.py, consistency.py) see a claim and a sentence one word or one vector
at a time; the judge reads the claim with its best evidence together. Its reading enters the audit's
confidence model as two more features (``judge_features``; the coefficients are fitted by
bench/audit_train.py on claims the judge never trained on), so the rules and the judge are weighed together
rather than one overruling the other; a refutation the judge is sure of makes the claim contradicted. Every
answer names the sentences (and so the chunks) the judge read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from bosun.core.judge import NEI, REFUTED, SUPPORTED, WINDOW_WORDS, Judge, evidence_window

REFUTED_BAR = 0.5  # P(refuted) at or above this, and above P(supported): contradicted
JUDGE_FEATURES = ("judge_sup", "judge_ref")  # what the confidence model reads of a judge's reading
_LOGIT_CLIP = 8.0


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


def judge_features(reading: JudgeReading) -> dict[str, float]:
    """The reading as confidence-model features: P(supported) as a clipped logit (the model is linear in
    it), P(refuted) as it is."""
    p = min(max(reading.supported, 1e-6), 1 - 1e-6)
    logit = max(-_LOGIT_CLIP, min(_LOGIT_CLIP, math.log(p / (1 - p))))
    return {"judge_sup": logit, "judge_ref": reading.refuted}


def judge_refutes(reading: JudgeReading, bar: float = REFUTED_BAR) -> bool:
    """The judge reads the evidence as refuting the claim: P(refuted) clears the bar and outweighs support."""
    return reading.refuted >= bar and reading.refuted >= reading.supported

