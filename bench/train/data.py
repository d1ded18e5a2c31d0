"""Training pairs for bosun's judge: claim/evidence and query/document, with a data card.

Sources (what may train shipped weights, per ../shared/data/training/README.md):
* FEVER dev (claim_verification.jsonl.gz, CC-BY-SA 3.0): supported / refuted pairs; "not enough info"
  pairs made here from the claim against the evidence of another claim on a near topic;
* Seal-Tools (tool_relevance.jsonl.gz, Apache-2.0): query / tool pairs, plus the nearest wrong tools;
* WiCE dev and ExpertQA dev (../shared/data/claims), the four fifths that bench/audit_data.py does not hold
  out (seed 23): the claim against the evidence window bosun shows the judge at run time;
* synthetic pairs the MiniCheck way, from the supported pairs above: number, entity and direction swaps and
  negation (refuted), an added clause and same-page windows without the supporting sentences (not enough
  info), surface rewrites that keep the meaning (supported);
* doc2query pairs: sentences of the demo policies' bodies (server/policies) and templated requests made
  from Seal-Tools descriptions, against their own document and its nearest wrong documents.
No MetaTool query, no policy corpus written blind (bench/corpora), no held-out fifth, no eval-only set.
"""

from __future__ import annotations

import random
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))
from audit_data import expertqa, holdout, wice  # noqa: E402
from bench_io import read_jsonl, shared_dir  # noqa: E402

from bosun.core.judge import NEI, REFUTED, SUPPORTED, content_keys, evidence_window  # noqa: E402

CLAIM, ROUTE = "claim", "route"


@dataclass
class Pair:
    task: str  # CLAIM or ROUTE
    a: str
    b: str
    label: int  # CLAIM: 0 supported, 1 refuted, 2 nei; ROUTE: 1 relevant, 0 not
    source: str


def _fever_clean(text: str) -> str:
    """FEVER's tokenised text back to plain prose (``-LRB-`` -> ``(``, `` `` `` -> ``"``, `` , `` -> ``,``)."""
    for a, b in (("-LRB-", "("), ("-RRB-", ")"), ("-LSB-", "["), ("-RSB-", "]"), ("``", '"'), ("''", '"'),
                 ("-COLON-", ":")):
        text = text.replace(a, b)
    text = re.sub(r"\s+([,.;:!?%)\]])", r"\1", text)
    text = re.sub(r"([(\[])\s+", r"\1", text)
    return re.sub(r"\s+", " ", text).strip()


# --- synthetic claim rewrites ------------------------------------------------------------------------------

_NUM = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?![\w])")
_AUX = re.compile(r"\b(is|are|was|were|has|have|had|can|will|does|did|could|should|would)\b(?! not)")
_DIRECTION = {
    "increase": "decrease", "increased": "decreased", "increases": "decreases", "more": "fewer", "higher": "lower",
    "before": "after", "larger": "smaller", "largest": "smallest", "rise": "fall", "rose": "fell", "won": "lost",
    "first": "last", "gain": "loss", "above": "below", "positive": "negative", "north": "south", "east": "west",
    "older": "younger", "oldest": "youngest", "longer": "shorter", "longest": "shortest", "maximum": "minimum",
    "most": "least", "earlier": "later", "better": "worse", "best": "worst", "high": "low", "early": "late",
    "major": "minor", "male": "female", "born": "died", "win": "lose", "start": "end", "began": "ended",
}
_DIRECTION.update({v: k for k, v in list(_DIRECTION.items())})
_SYNONYM = {
    "film": "movie", "movie": "film", "began": "started", "started": "began", "big": "large", "large": "big",
    "famous": "well-known", "making": "producing", "bought": "purchased", "purchased": "bought",
    "help": "assist", "people": "individuals", "show": "demonstrate", "shows": "demonstrates", "use": "utilize",
    "created": "made", "made": "created", "job": "position", "country": "nation", "town": "city",
    "received": "got", "about": "approximately", "several": "multiple", "many": "numerous",
}
_ENTITY = re.compile(r"(?<!^)(?<![.!?]\s)\b([A-Z][a-z]+(?:\s+[A-Z][a-z]+)*)")


def swap_number(claim: str, rng: random.Random) -> str | None:
    nums = list(_NUM.finditer(claim))
    if not nums:
        return None
    m = rng.choice(nums)
    raw = m.group(1).replace(",", "")
    value = float(raw)
    if "." in raw:
        new = f"{value * rng.choice([0.5, 1.5, 2, 3]):.{len(raw.split('.')[1])}f}"
    elif 1800 <= value <= 2100:
        new = str(int(value) + rng.choice([-11, -7, -3, -2, -1, 1, 2, 3, 5, 9]))
    else:
        new = str(max(0, int(value * rng.choice([2, 3, 10]) + rng.randint(1, 9))))
    return claim[: m.start(1)] + new + claim[m.end(1) :] if new != raw else None


def negate(claim: str) -> str | None:
    if " not " in claim:
        return claim.replace(" not ", " ", 1)
    if " never " in claim:
        return claim.replace(" never ", " always ", 1)
    m = _AUX.search(claim)
    if not m:
        return None
    return claim[: m.end()] + " not" + claim[m.end() :]


def swap_direction(claim: str) -> str | None:
    words = claim.split(" ")
    for i, w in enumerate(words):
        core = w.strip(".,;:").lower()
        if core in _DIRECTION:
            words[i] = w.lower().replace(core, _DIRECTION[core])
            return " ".join(words)
    return None


def swap_entity(claim: str, evidence: str, rng: random.Random) -> str | None:
    mine = [m for m in _ENTITY.finditer(claim)]
    theirs = sorted({m.group(1) for m in _ENTITY.finditer(evidence)} - {m.group(1) for m in mine})
    if not mine or not theirs:
        return None
    m = rng.choice(mine)
    other = rng.choice(theirs)
    if other.lower() in claim.lower():
        return None
    return claim[: m.start(1)] + other + claim[m.end(1) :]


def rewrite(claim: str, rng: random.Random) -> str:
    """A surface rewrite that keeps the meaning: synonyms, a dropped parenthetical, a lead-in."""
    words = claim.split(" ")
    for i, w in enumerate(words):
        core = w.strip(".,;:")
        if core in _SYNONYM and rng.random() < 0.7:
            words[i] = w.replace(core, _SYNONYM[core])
    out = re.sub(r"\s*\([^)]*\)", "", " ".join(words))
    lead = rng.choice(["", "", "It is reported that ", "The source states that ", "Notably, "])
    if lead and out:
        out = lead + out[0].lower() + out[1:]
    return out


def add_clause(claim: str, other: str) -> str:
    base = claim.rstrip(" .")
    tail = other.rstrip(" .")
    return f"{base}, and {tail[0].lower() + tail[1:]}." if tail else claim


def synthetic(claim: str, evidence: str, others: list[str], rng: random.Random, source: str) -> list[Pair]:
    """MiniCheck-style variants of one supported (claim, evidence) pair."""
    out: list[Pair] = []
    for make, kind in ((lambda: swap_number(claim, rng), "number"), (lambda: negate(claim), "negation"),
                       (lambda: swap_direction(claim), "direction"),
                       (lambda: swap_entity(claim, evidence, rng), "entity")):
        changed = make()
        if changed and changed != claim:
            out.append(Pair(CLAIM, changed, evidence, REFUTED, f"{source}+{kind}"))
    if others:
        out.append(Pair(CLAIM, add_clause(claim, rng.choice(others)), evidence, NEI, f"{source}+added_clause"))
    para = rewrite(claim, rng)
    if para != claim:
        out.append(Pair(CLAIM, para, evidence, SUPPORTED, f"{source}+rewrite"))
    return out


# --- claim sources -----------------------------------------------------------------------------------------

def fever(rng: random.Random, n_nei: int, synth_share: float, context_share: float = 0.0) -> list[Pair]:
    rows = [r for r in read_jsonl(shared_dir() / "data" / "training" / "claim_verification.jsonl.gz")]
    out: list[Pair] = []
    claims = [_fever_clean(r["claim"]) for r in rows]
    evs = [_fever_clean(r["evidence"]) for r in rows]
    for c, e, r in zip(claims, evs, rows, strict=True):
        window, _ = evidence_window(c, [e])
        out.append(Pair(CLAIM, c, window, SUPPORTED if r["label"] == "supported" else REFUTED, "fever"))
    # not enough info: the claim against another claim's evidence that shares its topic but is not its own
    by_key: dict[str, list[int]] = defaultdict(list)
    keys = [content_keys(c) for c in claims]
    for i, ks in enumerate(keys):
        for k in ks:
            by_key[k].append(i)
    order = list(range(len(rows)))
    rng.shuffle(order)
    made = 0
    for i in order:
        if made >= n_nei:
            break
        counts: Counter[int] = Counter()
        for k in keys[i]:
            if len(by_key[k]) < 200:
                counts.update(by_key[k])
        own = content_keys(evs[i])
        for j, _ in counts.most_common(12):
            if j == i or evs[j] == evs[i] or content_keys(evs[j]) >= (own & keys[i]):
                continue
            window, _ = evidence_window(claims[i], [evs[j]])
            out.append(Pair(CLAIM, claims[i], window, NEI, "fever+other_evidence"))
            made += 1
            break
    # the same pairs inside a longer window, between other evidence on near topics: the verdict is unchanged,
    # but the model must find the sentence that bears on the claim, as in an audit's chunk windows
    for i in order[: int(len(order) * context_share)]:
        others = [evs[j] for j in rng.sample(range(len(rows)), 2) if j != i]
        parts = [*others, evs[i]]
        rng.shuffle(parts)
        label = SUPPORTED if rows[i]["label"] == "supported" else REFUTED
        out.append(Pair(CLAIM, claims[i], " ".join(parts), label, "fever+context"))
    sup = [(c, e) for c, e, r in zip(claims, evs, rows, strict=True) if r["label"] == "supported"]
    rng.shuffle(sup)
    for c, e in sup[: int(len(sup) * synth_share)]:
        window, _ = evidence_window(c, [e])
        out.extend(synthetic(c, window, [x for x, _ in rng.sample(sup, 1)], rng, "fever"))
    return out


_JOINS = ("{a}, and {b}", "{a}; {b}", "{a}. {B}", "{a}, while {b}", "{a}, and also {b}", "{A} and {b}")


def _join(a: str, b: str, rng: random.Random) -> str:
    a, b = a.rstrip(" ."), b.rstrip(" .")
    return rng.choice(_JOINS).format(a=a, b=b, A=a, B=b) + "."


def conjunctions(rng: random.Random, n: int) -> list[Pair]:
    """Partial support without a seam to learn: two supported FEVER claims on a shared topic joined into one,
    against a window holding both evidences (supported) or only one of them among other evidence (not enough
    info), with the same joins on both sides, so the judge must check every part of the claim."""
    rows = [r for r in read_jsonl(shared_dir() / "data" / "training" / "claim_verification.jsonl.gz")
            if r["label"] == "supported"]
    claims = [_fever_clean(r["claim"]) for r in rows]
    evs = [_fever_clean(r["evidence"]) for r in rows]
    by_key: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(claims):
        for k in content_keys(c):
            by_key[k].append(i)
    out: list[Pair] = []
    order = list(range(len(rows)))
    rng.shuffle(order)
    for i in order:
        if len(out) >= n:
            break
        near = [j for k in content_keys(claims[i]) if len(by_key[k]) < 200 for j in by_key[k]
                if j != i and evs[j] != evs[i]]
        if not near:
            continue
        j = rng.choice(near)
        other = evs[rng.randrange(len(evs))]
        joined = _join(claims[i], claims[j], rng) if rng.random() < 0.5 else _join(claims[j], claims[i], rng)
        both = [evs[i], evs[j], other]
        rng.shuffle(both)
        out.append(Pair(CLAIM, joined, evidence_window(joined, both)[0], SUPPORTED, "fever+conjunction"))
        kept = [evs[i] if rng.random() < 0.5 else evs[j], other, evs[rng.randrange(len(evs))]]
        rng.shuffle(kept)
        out.append(Pair(CLAIM, joined, evidence_window(joined, kept)[0], NEI, "fever+conjunction_part_missing"))
    return out


def wice_pairs(rng: random.Random) -> list[Pair]:
    raw = {r["claim"]: r for r in read_jsonl(shared_dir() / "data" / "claims" / "wice-dev.jsonl.gz")}
    exs = [ex for ex in wice() if not holdout(ex.group)]
    others = [ex.claim for ex in exs]
    out: list[Pair] = []
    for ex in exs:
        r = raw[ex.claim]
        sents: list[str] = r["sentences"]
        window, _ = evidence_window(ex.claim, sents)
        label = SUPPORTED if ex.label == 1 else NEI
        out.append(Pair(CLAIM, ex.claim, window, label, f"wice_{r['label']}"))
        if r["label"] == "supported" and r["supporting_sets"]:
            best = r["supporting_sets"][0]
            support = " ".join(sents[i] for i in best if i < len(sents))
            out.append(Pair(CLAIM, ex.claim, support, SUPPORTED, "wice_supporting_set"))
            out.extend(synthetic(ex.claim, window, [rng.choice(others)], rng, "wice"))
        if r["supporting_any"]:
            rest = [s for i, s in enumerate(sents) if i not in set(r["supporting_any"])]
            window_rest, _ = evidence_window(ex.claim, rest)
            if window_rest:
                out.append(Pair(CLAIM, ex.claim, window_rest, NEI, "wice+without_support"))
    return out


def expertqa_pairs(rng: random.Random) -> list[Pair]:
    exs = [ex for ex in expertqa() if not holdout(ex.group) and ex.judgeable and ex.chunks
           and ex.label in (0, 1, "partial")]
    others = [ex.claim for ex in exs]
    out: list[Pair] = []
    for ex in exs:
        window, _ = evidence_window(ex.claim, [c["content"] for c in ex.chunks])
        if not window:
            continue
        label = SUPPORTED if ex.label == 1 else NEI
        out.append(Pair(CLAIM, ex.claim, window, label, f"expertqa_{ex.label}"))
        if ex.label == 1:
            out.extend(synthetic(ex.claim, window, [rng.choice(others)], rng, "expertqa"))
    return out


# --- relevance sources -------------------------------------------------------------------------------------

def seal_tools() -> tuple[list[Pair], list[str], dict[str, set[str]]]:
    """Seal-Tools pairs as given (positives and their listed negatives), every tool text, and each query's
    positives (for mining the nearest wrong tools)."""
    out: list[Pair] = []
    docs: set[str] = set()
    positives: dict[str, set[str]] = defaultdict(set)
    for r in read_jsonl(shared_dir() / "data" / "training" / "tool_relevance.jsonl.gz"):
        out.append(Pair(ROUTE, r["query"], r["doc"], int(r["label"]), "sealtools"))
        docs.add(r["doc"])
        if r["label"] == 1:
            positives[r["query"]].add(r["doc"])
    return out, sorted(docs), positives


_TEMPLATES = ["Can you {d}?", "I need to {d}.", "Is there a way to {d}?", "Help me {d}.", "How do I {d}?",
              "Please {d}.", "I want to {d} for my project.", "{D}."]


def templated_queries(docs: list[str], rng: random.Random, n: int) -> list[tuple[str, str]]:
    """doc2query from tool descriptions: a request phrased from the description, some words dropped."""
    out = []
    for doc in rng.sample(docs, min(n, len(docs))):
        _, _, desc = doc.partition(": ")
        words = desc.rstrip(".").split()
        if len(words) < 3:
            continue
        kept = [w for i, w in enumerate(words) if i == 0 or rng.random() > 0.2]
        d = " ".join(kept)
        d = d[0].lower() + d[1:]
        out.append((rng.choice(_TEMPLATES).format(d=d, D=d[0].upper() + d[1:]), doc))
    return out


def policy_doc2query() -> list[tuple[str, str, list[str]]]:
    """Sentences of the demo policies' bodies as pseudo-queries for the policy's routing surface; returns
    (query, positive surface, every surface of the corpus)."""
    from bosun.core.routing.corpus import parse_policy, split_front_matter
    from bosun.core.routing.route import humanise_name

    root = REPO / "server" / "policies"
    pols = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix in (".md", ".mdc"):
            p = parse_policy(path.name, path.read_text(encoding="utf-8"), stem=path.stem)
            if p is not None:
                pols.append(p)
    surfaces = [f"{humanise_name(p.name)}: {p.surface}" for p in pols]
    out = []
    for p, surf in zip(pols, surfaces, strict=True):
        body_sents = [s for s in re.split(r"(?<=[.!?])\s+|\n+", split_front_matter(p.text)[1]) if 6 <= len(s.split()) <= 40
                      and not s.lstrip().startswith(("#", "|", "```", "---"))]
        for s in body_sents[:12]:
            out.append((s.strip("-* ").strip(), surf, surfaces))
    return out


def card(pairs: list[Pair]) -> dict[str, Any]:
    by: Counter[str] = Counter()
    for p in pairs:
        by[f"{p.task}:{p.source}:{p.label}"] += 1
    return {"rows": len(pairs), "by_task_source_label": dict(sorted(by.items()))}
