"""Should a prompt route to anything at all? A calibrated decision over several signals.

Ranking (``bosun.core.routing.route``) orders documents; this module decides which of
the top ones are admitted. oiax admits with two fixed floors on raw scores,
which its own corpus showed costing recall while its zero-false-alarm result
rested on three negatives. bosun instead reads, for each candidate document:

* ``sem``: its semantic cosine (best surface phrase);
* ``lex``: its TF-IDF cosine (shared content words);
* ``z``: how far its semantic score stands above this prompt's scores on the
  whole corpus (in standard deviations): a prompt about nothing in the corpus
  scores every document alike, a relevant one lifts a few;
* ``margin``: its semantic lead over the best other document;
* ``agree``: 1 when both scorers put it first.

A logistic model turns them into a relevance probability; a document is
routed when it reaches the operating point's ``threshold``. The shipped
weights were fitted (``bench/route_fit_defaults.py``) on pooled labelled data
and are recorded with their provenance; ``bosun eval route calibrate`` refits
the threshold (and optionally the weights) for your corpus.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import numpy.typing as npt

# the logistic model's inputs; candidate_features also returns "bg_z", "bg_gap" and "multi", which the
# corroboration gate (admissible) reads and an operating point may weigh too
FEATURES = ("sem", "lex", "z", "margin", "agree", "body_sem", "body_lex")
ALL_FEATURES = (*FEATURES, "bg_z", "bg_gap", "multi", "mention", "pair")


@dataclass
class OperatingPoint:
    """Everything the router needs to decide, plus where it came from."""

    weights: dict[str, float]
    bias: float
    threshold: float
    top_k: int = 2
    # corroboration gate: a candidate sharing fewer than two distinct content words with the document
    # is admitted only if its semantic score stands this many standard deviations above the
    # document's own background (its scores on unrelated prompts); see admissible()
    solo_bg_z: float = -99.0  # GATE_OFF: a point written before the gate existed behaves as it did
    rrf_k: int = 60
    model_id: str = ""
    corpus_id: str = ""
    corpus_fingerprint: str = ""
    n_docs: int = 0
    n_docs_range: tuple[int, int] = (0, 0)
    separability: float = 0.0
    separability_range: tuple[float, float] = (0.0, 1.0)
    measured: str = ""  # ISO date
    metrics: dict[str, float] = field(default_factory=dict)
    source: str = "shipped"  # shipped | file path

    def describe(self) -> str:
        ws = " ".join(f"{k}={v:+.2f}" for k, v in self.weights.items())
        return (
            f"threshold={self.threshold:.2f} solo_bg_z={self.solo_bg_z:.1f} top_k={self.top_k} rrf_k={self.rrf_k} weights[{ws} bias={self.bias:+.2f}]"
            f" measured {self.measured} on {self.corpus_id or 'unknown corpus'} ({self.n_docs} documents)"
            f" under {self.model_id or 'unknown model'}"
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "source":
                continue
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str) -> OperatingPoint:
        from bosun.core.errors import InvalidInput

        try:
            weights = {str(k): float(v) for k, v in dict(data["weights"]).items()}
            unknown = [f for f in weights if f not in ALL_FEATURES]
            if unknown or not weights:
                raise InvalidInput("operating_point.weights", f"unknown {', '.join(unknown)}" if unknown else "empty",
                                   ", ".join(ALL_FEATURES))
            nr = data.get("n_docs_range", [0, 0])
            sr = data.get("separability_range", [0.0, 1.0])
            return cls(
                weights=weights,
                bias=float(data["bias"]),
                threshold=float(data["threshold"]),
                solo_bg_z=float(data.get("solo_bg_z", GATE_OFF)),
                top_k=int(data.get("top_k", 2)),
                rrf_k=int(data.get("rrf_k", 60)),
                model_id=str(data.get("model_id", "")),
                corpus_id=str(data.get("corpus_id", "")),
                corpus_fingerprint=str(data.get("corpus_fingerprint", "")),
                n_docs=int(data.get("n_docs", 0)),
                n_docs_range=(int(nr[0]), int(nr[1])),
                separability=float(data.get("separability", 0.0)),
                separability_range=(float(sr[0]), float(sr[1])),
                measured=str(data.get("measured", "")),
                metrics={str(k): float(v) for k, v in dict(data.get("metrics", {})).items()},
                source=source,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInput("operating_point", f"{source}: malformed ({exc})", "a TOML file written by `bosun eval route calibrate`") from exc


# Fitted by bench/route_fit_defaults.py (logistic regression, class-balanced) on pooled labelled prompts:
# MetaTool dev (199 tool descriptions; single/multi/awareness_pos positives, awareness_neg negatives),
# 12 random 15-tool MetaTool sub-corpora (out-of-corpus queries as negatives) and bosun's demo corpus
# (examples/policies-labelled.jsonl). Threshold and corroboration gate: zero demo false alarms is a hard
# gate, then the best mean F1 over the demo set and the 15-tool sub-corpora, ties to the quieter point.
# The script writes this point to bench/results/route_shipped.toml; see bench/results/route.md.
SHIPPED = OperatingPoint(
    weights={"sem": 4.227, "lex": 4.77, "z": 0.177, "margin": 7.564, "agree": 0.188, "body_sem": -0.672,
             "body_lex": 12.871},
    bias=-2.95,
    threshold=0.5,
    solo_bg_z=3.0,
    model_id="all-MiniLM-L6-v2-int8",
    corpus_id="pooled: MetaTool dev (199 tools; 12 random 15-tool subsets) + bosun demo policies (17)",
    n_docs=199,
    n_docs_range=(5, 1000),  # measured on 15-199 documents; flagged well outside that
    separability=0.53,  # MetaTool 0.515, demo policies 0.547
    separability_range=(0.3, 0.85),
    measured="2026-11-29",
)


def candidate_features(lex: npt.NDArray[np.float32], sem: npt.NDArray[np.float32], doc: int,
                       body_sem: npt.NDArray[np.float32] | None = None,
                       body_lex: npt.NDArray[np.float32] | None = None,
                       bg_z: npt.NDArray[np.float32] | None = None,
                       words: npt.NDArray[np.float32] | None = None,
                       bg_near: float | None = None) -> dict[str, float]:
    """The decision signals of one document for one prompt (all arrays are per corpus document)."""
    n = len(sem)
    s = float(sem[doc])
    if n >= 2:
        others = np.delete(sem, doc)
        margin = s - float(others.max())
    else:
        margin = 0.0
    if n >= 5:
        mu = float(sem.mean())
        sd = float(sem.std())
        z = (s - mu) / sd if sd > 1e-6 else 0.0
    else:
        z = 0.0
    agree = 1.0 if (int(np.argmax(sem)) == doc and float(lex[doc]) > 0 and int(np.argmax(lex)) == doc) else 0.0
    bz = max(-BG_Z_CLIP, min(BG_Z_CLIP, float(bg_z[doc]))) if bg_z is not None else 0.0
    # lexical evidence counts in full only when two or more distinct content words match
    multi = 1.0 if words is not None and float(words[doc]) >= 2 else 0.0
    blex = float(body_lex[doc]) if body_lex is not None else 0.0
    return {
        "sem": s, "lex": float(lex[doc]), "z": z, "margin": margin, "agree": agree,
        "body_sem": float(body_sem[doc]) if body_sem is not None else 0.0,
        "body_lex": blex, "bg_z": bz, "multi": multi,
        # > 0: the prompt is closer to this document than to any background prompt
        "bg_gap": s - bg_near if bg_near is not None else -1.0,
    }


BG_Z_CLIP = 8.0
GATE_OFF = -99.0  # solo_bg_z at or below this switches the corroboration gate off (the pre-gate design)


def probability(op: OperatingPoint, feats: dict[str, float]) -> float:
    x = op.bias + sum(w * feats[k] for k, w in op.weights.items())
    return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, x))))


def admissible(op: OperatingPoint, feats: dict[str, float], p: float, threshold: float,
               solo_bg_z: float | None = None, everyday_gap: bool = True) -> bool:
    """Route this candidate? Its probability must reach the threshold, and evidence must corroborate.

    One shared word is not evidence of relevance ("plan a trip" shares "plan" with a deploy policy's
    "rollback plans"), and the embedding is pulled by that same word, so a candidate matching fewer
    than two distinct co-occurring content words must also be corroborated by meaning against the
    background prompts (``bosun.core.routing.background``) from both sides: its score must stand
    ``solo_bg_z`` deviations above the document's own background, and the prompt must be closer to
    the document than to every background prompt (``bg_gap`` > 0: it does not read as an everyday
    request). Two words that share only a body paragraph (``pair``) need the second test alone; a
    candidate whose shared words all sit inside quotation marks (``mention``) is rejected. The gate
    is monotone: it can only remove hits the logistic model admitted.

    ``everyday_gap`` False drops the second test (``bg_gap``): for a corpus whose documents serve
    everyday requests (a tool list: weather, travel, shopping), reading like an everyday request is
    not evidence that nothing fits.
    """
    if p < threshold:
        return False
    gate = op.solo_bg_z if solo_bg_z is None else solo_bg_z
    if gate <= GATE_OFF:
        return True
    if feats.get("mention", 0.0) >= 1.0:
        # every shared word is inside quotation marks: the prompt mentions the document's words
        # ("Translate 'rate limit' into German") and its embedding is pulled by them, so neither
        # the words nor the semantic score are evidence about the request
        return False
    if feats["multi"] >= 1.0:
        return True
    if feats.get("pair", 0.0) >= 1.0:
        # two words share one body paragraph but not the surface: a paragraph mentions many things
        # ("model" and "running" in an ML policy), so the prompt must also read closer to the document
        # than to every background request
        return feats["bg_gap"] > 0.0 or not everyday_gap
    return feats["bg_z"] >= gate and (feats["bg_gap"] > 0.0 or not everyday_gap)


def separability(surface_vecs: npt.NDArray[np.float32]) -> float:
    """1 - mean nearest-neighbour cosine between documents' surfaces (higher = easier to tell apart)."""
    n = surface_vecs.shape[0]
    if n < 2:
        return 1.0
    # past 1,000 documents a systematic sample of rows (each against every document) estimates
    # the mean; blocks keep 6,000 documents from ever holding a 144 MB matrix
    rows_idx = np.arange(n) if n <= 1000 else np.linspace(0, n - 1, 1000).astype(np.int64)
    nearest = np.empty(len(rows_idx), np.float32)
    for start in range(0, len(rows_idx), 512):
        chunk = rows_idx[start : start + 512]
        block = surface_vecs[chunk] @ surface_vecs.T
        block[np.arange(len(chunk)), chunk] = -np.inf
        nearest[start : start + len(chunk)] = block.max(axis=1)
    return float(1.0 - nearest.mean())


def divergence(op: OperatingPoint, n_docs: int, sep: float, model_id: str) -> list[str]:
    """Reasons this corpus is far from where the operating point was measured (empty: none)."""
    reasons = []
    if op.model_id and model_id and op.model_id != model_id:
        reasons.append(f"the operating point was measured under {op.model_id}; this index uses {model_id}")
    lo, hi = op.n_docs_range
    if hi and not lo <= n_docs <= hi:
        reasons.append(f"this corpus has {n_docs} documents; the operating point was measured on {lo}-{hi}")
    slo, shi = op.separability_range
    if n_docs >= 2 and not slo <= sep <= shi:
        reasons.append(
            f"this corpus separates at {sep:.2f}; the operating point was measured on {slo:.2f}-{shi:.2f}"
        )
    return reasons
