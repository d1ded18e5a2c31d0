"""The claim audit: match each claim of an answer to its evidence and build the trust report.

Pipeline: validate the chunks, drop the ones the allowlist refuses (with the
reason), extract the claims, then for each claim find its best evidence among
the sentences of the admitted chunks (one sentence, or two sentences when a
second one covers what the first misses), run the consistency checks on that
evidence, and turn lexical (and, with the semantic matcher, embedding)
features into a calibrated confidence with a small logistic model trained by
``bench/audit_train.py``. Each claim gets one verdict: ``supported``,
``partially_supported`` (supported except for a clause no evidence covers), ``contradicted`` or
``unsupported``, with its evidence spans (chunk id,
character offsets, sentence) or its nearest candidate.

It fails closed: no admitted chunk, no claim, or a contradicted claim fails
the audit and the report says why. The report is a plain dict (JSON-ready),
deterministic for the same input, config and ``as_of``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from bosun.core.audit.align import WordStates, sentence_recall_many
from bosun.core.audit.claims import ExtractedClaim, extract_claims
from bosun.core.audit.config import AuditConfig
from bosun.core.audit.index import SentenceIndex, build_index
from bosun.core.audit.judged import JudgeReading, judge_features, judge_refutes, read_claims
from bosun.core.audit.match import (
    ClaimMatch,
    ClaimTerms,
    at_most_partial,
    candidates_many,
    claim_terms,
    has_uncovered_clause,
    match_claim,
)
from bosun.core.audit.provenance import Freshness, assess_freshness, check_source, parse_rules
from bosun.core.errors import BosunError, IntegrityError, InvalidInput
from bosun.core.judge import Judge

MAX_RESPONSE_CHARS = 1_000_000
MAX_CHUNKS = 2_000
MAX_CHUNK_CHARS = 2_000_000
MAX_TOTAL_CHUNK_CHARS = 20_000_000
VERDICTS = ("supported", "partially_supported", "contradicted", "unsupported")
CONTRADICTED_CAP = 0.05  # a contradicted claim's confidence never exceeds this
EMBED_CHARS = 1000
# the semantic model with the token-alignment feature, used when word states are given (align.py);
# "semantic" (pooled cosines only) when they are not
ALIGNED_MODEL = "semantic_aligned"
JUDGED_MODEL = "judged"  # the aligned arm plus the judge's reading (bench/audit_train.py fits it)


# -- input ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ChunkIn:
    """A validated chunk: its position, id, text, URL and metadata."""

    index: int
    id: str
    content: str
    url: str | None
    metadata: dict[str, Any]


def normalise_chunks(chunks: Any) -> list[ChunkIn]:
    """Validate chunks in dokis's shape ``{content, source_url, metadata}``; errors name the field."""
    if chunks is None:
        return []
    if not isinstance(chunks, list):
        raise InvalidInput("chunks", f"must be a list of objects, got {type(chunks).__name__}",
                           '[{"content": "...", "source_url": "https://...", "metadata": {}}]')
    if len(chunks) > MAX_CHUNKS:
        raise InvalidInput("chunks", f"{len(chunks)} chunks is more than the limit", f"at most {MAX_CHUNKS}")
    out: list[ChunkIn] = []
    total = 0
    seen_ids: set[str] = set()
    for i, raw in enumerate(chunks):
        if not isinstance(raw, dict):
            raise InvalidInput(f"chunks[{i}]", f"must be an object, got {type(raw).__name__}",
                               '{"content": "...", "source_url": "https://..."}')
        content = raw.get("content", raw.get("text"))
        if content is None:
            raise InvalidInput(f"chunks[{i}].content", "is missing", "the chunk's text")
        if not isinstance(content, str):
            raise InvalidInput(f"chunks[{i}].content", f"must be a string, got {type(content).__name__}")
        if len(content) > MAX_CHUNK_CHARS:
            raise InvalidInput(f"chunks[{i}].content", f"{len(content)} characters is too long",
                               f"at most {MAX_CHUNK_CHARS}")
        total += len(content)
        url = raw.get("source_url", raw.get("url"))
        if url is not None and not isinstance(url, str):
            raise InvalidInput(f"chunks[{i}].source_url", f"must be a string, got {type(url).__name__}")
        metadata = raw.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise InvalidInput(f"chunks[{i}].metadata", f"must be an object, got {type(metadata).__name__}")
        cid = raw.get("id", raw.get("chunk_id", metadata.get("id")))
        cid = str(cid) if cid is not None and str(cid).strip() else f"c{i}"
        if cid in seen_ids:
            cid = f"{cid}#{i}"
        seen_ids.add(cid)
        out.append(ChunkIn(i, cid, content, url, metadata))
    if total > MAX_TOTAL_CHUNK_CHARS:
        raise InvalidInput("chunks", f"{total} characters in total is too much", f"at most {MAX_TOTAL_CHUNK_CHARS}")
    return out


def _check_response(response: Any) -> str:
    if response is None:
        raise InvalidInput("response", "is missing", "the answer text to audit")
    if not isinstance(response, str):
        raise InvalidInput("response", f"must be a string, got {type(response).__name__}")
    if len(response) > MAX_RESPONSE_CHARS:
        raise InvalidInput("response", f"{len(response)} characters is too long to audit in one call",
                           f"at most {MAX_RESPONSE_CHARS}; audit the answer in parts")
    return response


# -- filter_sources ------------------------------------------------------------------------

def filter_sources(chunks: Any, config: AuditConfig) -> dict[str, Any]:
    """The chunks the allowlist admits, and for each other one why it was dropped."""
    items = normalise_chunks(chunks)
    rules = parse_rules(config.allowed_domains)
    admitted: list[dict[str, Any]] = []
    blocked: list[dict[str, Any]] = []
    warnings: list[dict[str, Any]] = []
    for c in items:
        res = check_source(c.url, rules)
        if res.admitted:
            admitted.append({"index": c.index, "id": c.id, "content": c.content, "source_url": c.url,
                             "metadata": c.metadata})
            if res.warning:
                warnings.append({"index": c.index, "id": c.id, "url": c.url, "warning": res.warning})
        else:
            blocked.append({"index": c.index, "id": c.id, "url": c.url, "domain": res.host, "reason": res.reason})
    return {
        "chunks": admitted,
        "blocked_source_details": blocked,
        "blocked_sources": [b["url"] for b in blocked],
        "source_warnings": warnings,
        "admitted": len(admitted),
        "dropped": len(blocked),
        "allowlist": list(config.allowed_domains),
    }


# -- the model -----------------------------------------------------------------------------

@dataclass(frozen=True)
class LogisticModel:
    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    vetoes: bool = True  # a rules' mismatch or uncovered clause overrules the confidence (the judged arm: measured)
    refutes: bool = False  # the judge's sure refutation makes a claim contradicted (the judged arm: measured)

    @property
    def _terms(self) -> list[tuple[str, float, float, float]]:
        cached: list[tuple[str, float, float, float]] | None = self.__dict__.get("_terms_cache")
        if cached is None:
            cached = list(zip(self.features, self.mean.tolist(), self.scale.tolist(), self.coef.tolist(), strict=True))
            object.__setattr__(self, "_terms_cache", cached)
        return cached

    def prob(self, x: dict[str, float]) -> float:
        """P(supported) at a 50/50 prior; plain Python: a handful of features is faster than numpy."""
        z = self.intercept
        for name, mean, scale, coef in self._terms:
            z += (x[name] - mean) / scale * coef
        return 1.0 / (1.0 + math.exp(-max(-40.0, min(40.0, z))))


@lru_cache(maxsize=4)
def load_model(name: str) -> LogisticModel:
    """The shipped coefficients for one matcher (core/audit/audit_model.json, written by bench/audit_train.py)."""
    try:
        raw = resources.files("bosun.core.audit").joinpath("audit_model.json").read_text("utf-8")
        m = json.loads(raw)[name]
        return LogisticModel(
            tuple(m["features"]), np.asarray(m["mean"], dtype=np.float64), np.asarray(m["scale"], dtype=np.float64),
            np.asarray(m["coef"], dtype=np.float64), float(m["intercept"]),
            bool(m.get("vetoes", True)), bool(m.get("refutes", False)),
        )
    except (OSError, KeyError, ValueError) as exc:
        raise IntegrityError(f"the audit model file is missing or corrupt ({name}: {exc}); reinstall bosun") from exc


def embed_text(text: str) -> str:
    """What the semantic matcher embeds: the model reads ~256 tokens, so longer text is cut first
    (keeps memory flat on pages whose "sentences" are whole navigation menus)."""
    return text[:EMBED_CHARS]


# -- the report ----------------------------------------------------------------------------

class ComplianceViolation(BosunError):
    """Raised for ``enforcement_mode="enforce"`` when trust fails; carries the full report."""

    def __init__(self, report: dict[str, Any]) -> None:
        self.report = report
        counts = report["counts"]
        reasons = "; ".join(report["failure_reasons"]) or "trust failed"
        super().__init__(
            f"audit failed in enforce mode: {reasons} (supported {counts['supported']}, "
            f"contradicted {counts['contradicted']}, unsupported {counts['unsupported']})"
        )


@dataclass
class AuditPlan:
    """Validated input, each claim's BM25 candidates, and the texts a semantic matcher must embed."""

    query: str
    chunks: list[ChunkIn]
    admitted: list[ChunkIn]
    blocked: list[dict[str, Any]]
    warnings: list[dict[str, Any]]
    claims: list[ExtractedClaim]
    index: SentenceIndex
    config: AuditConfig
    response_chars: int
    terms: list[ClaimTerms]
    candidates: list[list[int]]

    def candidate_sentences(self) -> list[int]:
        """Every sentence that is a candidate for some claim, in first-seen order."""
        return list(dict.fromkeys(s for cands in self.candidates for s in cands))

    def texts_to_embed(self) -> list[str]:
        """Claims, then the candidate sentences only: the cost does not grow with the chunks."""
        return ([embed_text(c.clean) for c in self.claims]
                + [embed_text(self.index.sentences[s].text) for s in self.candidate_sentences()])


def resolve_matcher(config: AuditConfig, has_embedder: bool) -> AuditConfig:
    """``auto`` becomes ``semantic`` when an embedder is at hand, ``bm25`` otherwise."""
    if config.matcher != "auto":
        return config
    return replace(config, matcher="semantic" if has_embedder else "bm25")


def plan_audit(query: Any, chunks: Any, response: Any, config: AuditConfig) -> AuditPlan:
    """Validate and prepare: filter sources, extract claims, index the admitted sentences, retrieve.
    ``config.matcher`` must be resolved (see ``resolve_matcher``)."""
    if query is not None and not isinstance(query, str):
        raise InvalidInput("query", f"must be a string, got {type(query).__name__}")
    text = _check_response(response)
    items = normalise_chunks(chunks)
    rules = parse_rules(config.allowed_domains)
    admitted: list[ChunkIn] = []
    blocked: list[dict[str, Any]] = []
    warnings: list[dict[str, Any]] = []
    for c in items:
        res = check_source(c.url, rules)
        if res.admitted:
            admitted.append(c)
            if res.warning:
                warnings.append({"chunk_id": c.id, "url": c.url, "warning": res.warning})
        else:
            blocked.append({"url": c.url, "domain": res.host, "reason": res.reason, "chunk_id": c.id})
    claims = extract_claims(text, config.extractor)
    index = build_index([c.content for c in admitted])
    terms = [claim_terms(c.clean, index) for c in claims]
    cands = candidates_many(terms, index)
    return AuditPlan(query or "", items, admitted, blocked, warnings, claims, index, config, len(text), terms, cands)


def run_audit(plan: AuditPlan, as_of: date | None = None, vectors: np.ndarray | None = None,
              words: Sequence[WordStates] | None = None, judge: Judge | None = None) -> dict[str, Any]:
    """Match every claim and build the trust report. ``vectors`` = embeddings of ``texts_to_embed()``;
    ``words`` = their contextual word states (align.py), which add the token-alignment feature;
    ``judge`` (a cross-encoder with a claim head) reads each claim with its evidence window and decides."""
    cfg = plan.config
    as_of = as_of or cfg.as_of or datetime.now(UTC).date()
    if cfg.matcher == "auto":
        cfg = plan.config = resolve_matcher(cfg, vectors is not None)
    semantic = cfg.matcher == "semantic"
    if semantic and vectors is None:
        raise InvalidInput("config.matcher", "semantic matching needs the embedding model", "bm25, or run in the daemon")
    aligned = semantic and words is not None
    model = load_model(ALIGNED_MODEL if aligned else "semantic" if semantic else "bm25")
    contents = [c.content for c in plan.admitted]
    n_claims = len(plan.claims)
    claim_vecs = vectors[:n_claims] if semantic and vectors is not None else None
    cand_vecs: dict[int, np.ndarray] | None = None
    if semantic and vectors is not None:
        cand_vecs = dict(zip(plan.candidate_sentences(), vectors[n_claims:], strict=True))
    per: list[dict[str, np.ndarray]] | None = None
    if aligned and words is not None:
        per = sentence_recall_many(list(words[:n_claims]), plan.candidates,
                                   dict(zip(plan.candidate_sentences(), words[n_claims:], strict=True)))
    fresh = [assess_freshness(c.metadata, cfg.max_source_age_days, as_of, cfg.source_date_metadata_key)
             for c in plan.admitted]

    readings: list[JudgeReading | None] = [None] * n_claims
    judged = load_model(JUDGED_MODEL) if judge is not None else None
    if judge is not None and plan.admitted and plan.index.sentences:
        readings = read_claims([c.clean for c in plan.claims], [s.text for s in plan.index.sentences], judge)
    claims_out: list[dict[str, Any]] = []
    for k, claim in enumerate(plan.claims):
        if not plan.admitted or not plan.index.sentences:
            claims_out.append(_unsupported_claim(claim, 0.0, "no admitted source to check it against"))
            continue
        m = match_claim(claim.clean, plan.index, contents, claim_vecs[k] if claim_vecs is not None else None,
                        cand_vecs, plan.terms[k], plan.candidates[k],
                        per_sentence=per[k] if per is not None else None)
        reading = readings[k]
        scorer = model
        if reading is not None and judged is not None and aligned:  # the judge's features join the rules'
            m.features.update(judge_features(reading))
            scorer = judged
        rec = _claim_record(claim, m, scorer.prob(m.features), plan, fresh, cfg, scorer.vetoes)
        if reading is not None and judged is not None:
            rec = _judged_record(rec, reading, plan, judged.refutes)
        claims_out.append(rec)
    report = _report(plan, claims_out, fresh, as_of)
    report["token_alignment"] = aligned
    if judge is not None:
        report["judge"] = judge.model_id()
    return report


def _judged_record(rec: dict[str, Any], reading: JudgeReading, plan: AuditPlan, refutes: bool) -> dict[str, Any]:
    """The judge's probabilities and the chunk it read go into the record; its sure refutation (when the
    shipped arm measured it worth having) makes the claim contradicted."""
    rec = dict(rec, judge=reading.as_dict())
    spans = [_span(plan, s) for s in reading.sentences[:3]]
    first = plan.admitted[plan.index.sentences[reading.sentences[0]].chunk] if reading.sentences else None
    where = f"chunk {first.id}" if first is not None and first.id else "the best evidence"
    said = (f"the judge read {where}: supported {reading.supported:.2f}, refuted {reading.refuted:.2f}, "
            f"not enough info {reading.nei:.2f}")
    if refutes and judge_refutes(reading) and rec["verdict"] != "contradicted":
        rec.update(verdict="contradicted", supported=False, source_url=None, source_chunk=None, evidence=spans,
                   freshness_status="not_applicable", source_date=None, source_age_days=None, nearest=None,
                   confidence=round(min(rec["confidence"], CONTRADICTED_CAP), 4),
                   note=f"contradicted: the judge reads {where} as refuting it ({reading.refuted:.2f})")
    else:
        rec["note"] = f"{rec['note']}; {said}" if rec.get("note") else said
    return rec


def _span(plan: AuditPlan, sid: int, score: float | None = None) -> dict[str, Any]:
    s = plan.index.sentences[sid]
    chunk = plan.admitted[s.chunk]
    out: dict[str, Any] = {"chunk_id": chunk.id, "chunk_index": chunk.index, "source_url": chunk.url,
                           "start": s.start, "end": s.end, "sentence": s.text}
    if score is not None:
        out["score"] = round(score, 4)
    return out


def _unsupported_claim(claim: ExtractedClaim, conf: float, note: str) -> dict[str, Any]:
    return {
        "text": claim.text, "start": claim.start, "end": claim.end, "verdict": "unsupported", "supported": False,
        "confidence": round(conf, 4), "source_url": None, "source_chunk": None, "evidence": [], "nearest": None,
        "mismatches": [], "freshness_status": "not_applicable", "source_date": None, "source_age_days": None,
        "note": note,
    }


def _claim_record(
    claim: ExtractedClaim, m: ClaimMatch, conf: float, plan: AuditPlan, fresh: list[Freshness], cfg: AuditConfig,
    vetoes: bool = True,
) -> dict[str, Any]:
    """The verdict from the confidence and, with ``vetoes``, the rules' contradictions and partial support."""
    rec = _unsupported_claim(claim, conf, "")
    rec["features"] = {k: round(v, 4) for k, v in m.features.items()}
    if m.mismatches and vetoes:
        rec.update(verdict="contradicted", confidence=round(min(conf, CONTRADICTED_CAP), 4),
                   evidence=[_span(plan, s) for s in m.evidence], mismatches=[x.to_dict() for x in m.mismatches],
                   note="contradicted: " + "; ".join(f"{x.kind}: {x.note}" for x in m.mismatches))
        return rec
    if conf >= cfg.claim_threshold and m.evidence and vetoes and at_most_partial(m.features):
        note = (f"partially supported: no evidence covers {m.weakest_clause!r}" if has_uncovered_clause(m.features)
                else f"partially supported: the evidence does not say {m.universal!r}")
        rec.update(verdict="partially_supported", evidence=[_span(plan, s) for s in m.evidence], note=note)
        return rec
    if conf >= cfg.claim_threshold and m.evidence:
        chunk_pos = [plan.index.sentences[s].chunk for s in m.evidence]
        primary = plan.admitted[chunk_pos[0]]
        status, src_date, age = _claim_freshness([fresh[c] for c in dict.fromkeys(chunk_pos)])
        rec.update(
            verdict="supported", supported=True, source_url=primary.url,
            source_chunk={"id": primary.id, "index": primary.index, "source_url": primary.url},
            evidence=[_span(plan, s) for s in m.evidence], freshness_status=status,
            source_date=src_date.isoformat() if src_date else None, source_age_days=age,
            note="supported by two sentences" if len(m.evidence) > 1 else None,
        )
        return rec
    if m.nearest is not None:
        rec["nearest"] = _span(plan, m.nearest, m.nearest_score)
        rec["note"] = f"confidence {conf:.2f} is below claim_threshold {cfg.claim_threshold:.2f}"
    else:
        rec["note"] = "no admitted sentence shares a content word with the claim"
    return rec


def _claim_freshness(parts: list[Freshness]) -> tuple[str, date | None, int | None]:
    """A claim resting on several chunks is as fresh as the oldest of them."""
    if all(p.status == "not_applicable" for p in parts):
        return "not_applicable", None, None
    for status in ("stale", "unknown"):
        hit = [p for p in parts if p.status == status]
        if hit:
            oldest = max(hit, key=lambda p: p.age_days or 0)
            return status, oldest.source_date, oldest.age_days
    oldest = max(parts, key=lambda p: p.age_days or 0)
    return "fresh", oldest.source_date, oldest.age_days


def _trust_status(rec: dict[str, Any]) -> str:
    if rec["verdict"] != "supported":
        return str(rec["verdict"])
    return {"stale": "supported_stale", "unknown": "supported_unknown_age"}.get(rec["freshness_status"], "supported_fresh")


def _report(plan: AuditPlan, claims: list[dict[str, Any]], fresh: list[Freshness], as_of: date) -> dict[str, Any]:
    cfg = plan.config
    n = len(claims)
    counts = {v: sum(1 for c in claims if c["verdict"] == v) for v in VERDICTS}
    rate = counts["supported"] / n if n else 0.0
    reasons: list[str] = []
    issues: list[str] = []
    if not plan.chunks:
        issues.append("no_sources")
        reasons.append("no chunks were given, so nothing can support a claim")
    elif not plan.admitted:
        issues.append("no_admitted_sources")
        reasons.append(f"all {len(plan.chunks)} chunks were blocked by the allowlist")
    if n == 0:
        issues.append("no_claims")
        reasons.append("no factual claim was found in the response")
    if plan.blocked:
        issues.append("blocked_sources")
    if counts["contradicted"]:
        issues.append("contradicted_claims")
        reasons.append(f"{counts['contradicted']} claim(s) contradicted by their evidence")
    if counts["unsupported"]:
        issues.append("unsupported_claims")
    if counts["partially_supported"]:
        issues.append("partially_supported_claims")
    if n and rate < cfg.min_citation_rate:
        issues.append("below_min_citation_rate")
        reasons.append(f"compliance {rate:.2f} is below min_citation_rate {cfg.min_citation_rate:.2f}")
    passed = bool(n and plan.admitted and rate >= cfg.min_citation_rate and not counts["contradicted"])

    fresh_details: dict[str, dict[str, Any]] = {}
    for chunk, f in zip(plan.admitted, fresh, strict=True):
        key = chunk.url or f"(no url: {chunk.id})"
        if key in fresh_details:
            fresh_details[key]["chunk_ids"].append(chunk.id)
            continue
        fresh_details[key] = {"url": chunk.url, "chunk_ids": [chunk.id], **f.to_dict()}
    stale_sources = any(f.status == "stale" for f in fresh)
    unknown_ages = any(f.status == "unknown" for f in fresh)
    stale_claims = [c for c in claims if c["verdict"] == "supported" and c["freshness_status"] == "stale"]
    unknown_claims = [c for c in claims if c["verdict"] == "supported" and c["freshness_status"] == "unknown"]
    if stale_sources:
        issues.append("stale_sources")
    if stale_claims:
        issues.append("stale_supported_claims")
    if unknown_ages:
        issues.append("unknown_source_ages")
    freshness_enabled = cfg.max_source_age_days is not None
    freshness_passed = True
    if freshness_enabled and cfg.stale_source_action == "fail" and stale_claims:
        freshness_passed = False
        reasons.append(f"{len(stale_claims)} supported claim(s) rest on sources older than {cfg.max_source_age_days} days")
    if freshness_enabled and cfg.unknown_age_action == "fail" and unknown_claims:
        freshness_passed = False
        reasons.append(f"{len(unknown_claims)} supported claim(s) rest on sources of unknown age")
    trust = passed and freshness_passed
    mode = cfg.enforcement_mode
    verdict = "passed" if trust else {"audit": "audit_failed", "guardrail": "guardrail_failed"}.get(mode, "enforce_raised")

    def brief(i: int, c: dict[str, Any]) -> dict[str, Any]:
        return {"claim": i, "text": c["text"], "verdict": c["verdict"], "note": c["note"]}

    return {
        "query": plan.query,
        "response_chars": plan.response_chars,
        "claims": claims,
        "counts": counts,
        "compliance_rate": round(rate, 4),
        "passed": passed,
        "freshness_passed": freshness_passed,
        "trust_passed": trust,
        "failure_reasons": reasons,
        "provenance_map": {c["text"]: c["source_url"] for c in claims if c["verdict"] == "supported" and c["source_url"]},
        "violations": [brief(i, c) for i, c in enumerate(claims) if c["verdict"] != "supported"],
        "stale_claims": [brief(i, c) for i, c in enumerate(claims) if c in stale_claims],
        "blocked_sources": [b["url"] for b in plan.blocked],
        "blocked_source_details": plan.blocked,
        "source_warnings": plan.warnings,
        "source_freshness_details": list(fresh_details.values()),
        "claim_verdicts": [
            {"claim_text": c["text"], "verdict": c["verdict"], "trust_status": _trust_status(c),
             "freshness_status": c["freshness_status"], "confidence": c["confidence"],
             "supporting_url": c["source_url"], "source_date": c["source_date"],
             "source_age_days": c["source_age_days"], "note": c["note"]}
            for c in claims
        ],
        "policy_issues": issues,
        "has_blocked_sources": bool(plan.blocked),
        "has_unsupported_claims": counts["unsupported"] > 0,
        "has_contradicted_claims": counts["contradicted"] > 0,
        "has_stale_sources": stale_sources,
        "has_stale_supported_claims": bool(stale_claims),
        "has_unknown_source_ages": unknown_ages,
        "freshness_enabled": freshness_enabled,
        "max_source_age_days": cfg.max_source_age_days,
        "stale_source_action": cfg.stale_source_action if freshness_enabled else None,
        "as_of": as_of.isoformat(),
        "domain": cfg.domain,
        "min_citation_rate": cfg.min_citation_rate,
        "claim_threshold": cfg.claim_threshold,
        "matcher": cfg.matcher,
        "extractor": cfg.extractor,
        "enforcement_mode": mode,
        "enforcement_verdict": verdict,
        "raised_on_violation": mode == "enforce" and not trust,
    }


def audit(
    query: Any, chunks: Any, response: Any, config: AuditConfig | None = None, as_of: date | None = None,
    embed: Any = None, words: Callable[[list[str]], Sequence[WordStates]] | None = None, judge: Judge | None = None,
) -> dict[str, Any]:
    """One-call audit. ``embed(texts) -> float32[n, d]`` is required only for the semantic matcher
    (the default ``auto`` matcher uses it when given, and runs lexical without it). ``words(texts)``
    (``align.one_pass_words`` on the same model) adds the token alignment to the semantic matcher."""
    cfg = resolve_matcher(config or AuditConfig(), embed is not None)
    plan = plan_audit(query, chunks, response, cfg)
    vectors = None
    if cfg.matcher == "semantic":
        if embed is None:
            raise InvalidInput("config.matcher", "semantic matching needs an embedder", "bm25")
        texts = plan.texts_to_embed()
        # word states first: a one-pass model (align.one_pass_words) puts the sentence vectors of the same
        # run into the embedding cache, so ``embed`` below runs nothing for them
        states = (list(words(texts)) if texts else []) if words is not None else None
        vectors = np.asarray(embed(texts), dtype=np.float32) if texts else np.zeros((0, 1), dtype=np.float32)
        return run_audit(plan, as_of, vectors, states, judge)
    return run_audit(plan, as_of, vectors, judge=judge)
