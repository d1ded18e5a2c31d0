"""Claim audit logic: verdicts, contradiction checks, fail-closed, evidence spans, allowlist, freshness."""

from __future__ import annotations

import json
from datetime import date

import pytest

from bosun.core.audit.audit import audit, filter_sources
from bosun.core.audit.claims import extract_claims, is_factual_claim, split_sentences
from bosun.core.audit.config import AuditConfig, config_from_dict, discover_config, load_config_file
from bosun.core.audit.consistency import check
from bosun.core.audit.provenance import assess_freshness, check_source, parse_date_value, parse_rules
from bosun.core.errors import InvalidInput

SAMPLE = {
    "query": "What are the side effects of aspirin, and how does ibuprofen compare?",
    "chunks": [
        {"content": "Aspirin lowers fever by inhibiting COX enzymes. Common side effects include stomach "
                    "irritation and nausea.", "source_url": "https://pubmed.ncbi.nlm.nih.gov/12345"},
        {"content": "Ibuprofen is a nonsteroidal anti-inflammatory drug used for pain and fever relief.",
         "source_url": "https://cochrane.org/review/67890"},
        {"content": "Miracle cures are available with no side effects or drug interactions.",
         "source_url": "https://discountpharma.biz/meds"},
    ],
    "response": "Aspirin lowers fever by inhibiting COX enzymes in the body. Common side effects of aspirin include "
                "stomach irritation and nausea. Aspirin has no meaningful drug interactions with other medicines.",
}
ALLOW = AuditConfig(allowed_domains=("pubmed.ncbi.nlm.nih.gov", "cochrane.org", "nejm.org", "who.int"))
CHUNK = [{"content": "Aspirin lowers fever by inhibiting COX enzymes. The adult acetaminophen limit is 4 grams per "
                     "day. All patients in the 2019 trial recovered within a week. The drug was approved by the FDA.",
          "source_url": "https://who.int/a"}]


def verdicts(report: dict) -> list[str]:
    return [c["verdict"] for c in report["claims"]]


def test_sample_supported_and_blocked_source_cannot_support() -> None:
    rep = audit(SAMPLE["query"], SAMPLE["chunks"], SAMPLE["response"], ALLOW, as_of=date(2026, 1, 1))
    assert verdicts(rep) == ["supported", "supported", "unsupported"]
    assert rep["blocked_source_details"] == [
        {"url": "https://discountpharma.biz/meds", "domain": "discountpharma.biz", "reason": "domain_not_allowlisted",
         "chunk_id": "c2"}
    ]
    first = rep["claims"][0]
    ev = first["evidence"][0]
    assert ev["chunk_id"] == "c0" and SAMPLE["chunks"][0]["content"][ev["start"] : ev["end"]] == ev["sentence"]
    assert rep["provenance_map"][first["text"]] == "https://pubmed.ncbi.nlm.nih.gov/12345"
    assert rep["claims"][2]["nearest"] is not None
    assert rep["trust_passed"] is False and rep["enforcement_verdict"] == "guardrail_failed"
    json.dumps(rep)  # JSON-serialisable


def test_deterministic() -> None:
    a = audit("q", SAMPLE["chunks"], SAMPLE["response"], ALLOW, as_of=date(2026, 1, 1))
    b = audit("q", SAMPLE["chunks"], SAMPLE["response"], ALLOW, as_of=date(2026, 1, 1))
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@pytest.mark.parametrize(
    ("claim", "kind"),
    [
        ("Aspirin does not lower fever by inhibiting COX enzymes.", "negation"),
        ("Aspirin raises fever by inhibiting COX enzymes.", "negation"),
        ("The adult acetaminophen limit is 6 grams per day.", "number"),
        ("The adult acetaminophen limit is 4 milligrams per day.", "unit"),
        ("All patients in the 2017 trial recovered within a week.", "date"),
        ("Some patients in the 2019 trial recovered within a week.", None),
        ("Ibuprofen lowers fever by inhibiting COX enzymes.", "named_entity"),
        ("The drug was approved by the EMA.", "named_entity"),
    ],
)
def test_contradictions(claim: str, kind: str | None) -> None:
    rep = audit("", CHUNK, claim)
    c = rep["claims"][0]
    if kind is None:  # "some" is entailed by "all": not a contradiction
        assert c["verdict"] != "contradicted"
    else:
        assert c["verdict"] == "contradicted", c
        assert kind in {m["kind"] for m in c["mismatches"]}
        assert c["confidence"] <= 0.05 and c["evidence"]
        assert rep["passed"] is False and "contradicted_claims" in rep["policy_issues"]


def test_quantifier_mismatch() -> None:
    assert check("All patients recovered within a week.", "Some patients recovered within a week.")[0].kind == "quantifier"
    assert check("Most patients recovered within a week.", "Few patients recovered within a week.")[0].kind == "quantifier"
    assert check("Some patients recovered within a week.", "Most patients recovered within a week.") == []


def test_threshold_changes_verdicts() -> None:
    resp = "Aspirin lowers fever in adults. Stomach irritation is a side effect of aspirin."
    lo = audit("", SAMPLE["chunks"][:1], resp, AuditConfig(claim_threshold=0.0))
    hi = audit("", SAMPLE["chunks"][:1], resp, AuditConfig(claim_threshold=1.0))
    assert verdicts(lo) == ["supported", "supported"]
    assert verdicts(hi) == ["unsupported", "unsupported"]
    assert 0.0 < lo["claims"][0]["confidence"] < 1.0


def test_two_chunk_support() -> None:
    chunks = [
        {"content": "Marie Curie was born in Warsaw.", "source_url": "https://a.org/1"},
        {"content": "Curie won the Nobel Prize in Chemistry in 1911.", "source_url": "https://b.org/2"},
    ]
    rep = audit("", chunks, "Marie Curie, born in Warsaw, won the Nobel Prize in Chemistry in 1911.",
                AuditConfig(claim_threshold=0.3))
    c = rep["claims"][0]
    assert c["verdict"] == "supported"
    assert {e["chunk_id"] for e in c["evidence"]} == {"c0", "c1"}


@pytest.mark.parametrize(
    ("chunks", "response", "issue"),
    [
        ([], "Aspirin lowers fever.", "no_sources"),
        ([{"content": "x y z", "source_url": "https://evil.biz/"}], "Aspirin lowers fever.", "no_admitted_sources"),
        (SAMPLE["chunks"], "Hello! Is this helpful?", "no_claims"),
    ],
)
def test_fails_closed(chunks: list, response: str, issue: str) -> None:
    rep = audit("", chunks, response, ALLOW)
    assert rep["passed"] is False and rep["trust_passed"] is False
    assert issue in rep["policy_issues"] and rep["failure_reasons"]
    assert rep["compliance_rate"] == 0.0


def test_modes() -> None:
    for mode, verdict in (("audit", "audit_failed"), ("guardrail", "guardrail_failed"), ("enforce", "enforce_raised")):
        rep = audit("", [], "Aspirin lowers fever.", AuditConfig(enforcement_mode=mode))
        assert rep["enforcement_verdict"] == verdict
        assert rep["raised_on_violation"] is (mode == "enforce")
    assert config_from_dict({"fail_on_violation": True}).enforcement_mode == "enforce"


def test_allowlist_subdomains_and_paths() -> None:
    rules = parse_rules(("who.int", "nejm.org/doi", "*.gov"))
    assert check_source("https://apps.who.int/x", rules).admitted
    assert not check_source("https://evilwho.int/x", rules).admitted
    assert check_source("https://www.nejm.org/doi/10.1056/x", rules).admitted
    assert not check_source("https://nejm.org/doify", rules).admitted
    assert check_source("https://pubmed.ncbi.nlm.nih.gov/1", rules).admitted
    assert not check_source("https://gov/1", rules).admitted
    assert check_source("", rules).reason == "missing_source_url"
    assert check_source(None, rules).reason == "missing_source_url"
    for bad in ("not a url", "ftp://who.int/x", "https://", "https://who.int:abc/", "javascript:alert(1)"):
        assert check_source(bad, rules).reason == "malformed_source_url", bad
    with pytest.raises(InvalidInput, match=r"allowed_domains\[0\]"):
        parse_rules(("not a domain",))


def test_filter_sources_reasons() -> None:
    chunks = [
        {"content": "a", "source_url": "https://who.int/a"},
        {"content": "b", "source_url": "https://spam.biz/b"},
        {"content": "c"},
        {"content": "d", "source_url": "http//broken"},
    ]
    out = filter_sources(chunks, ALLOW)
    assert [c["id"] for c in out["chunks"]] == ["c0"]
    assert [b["reason"] for b in out["blocked_source_details"]] == [
        "domain_not_allowlisted", "missing_source_url", "malformed_source_url"
    ]
    open_out = filter_sources(chunks, AuditConfig())
    assert open_out["admitted"] == 4 and len(open_out["source_warnings"]) == 2


def test_freshness_against_as_of() -> None:
    chunks = [{"content": "The archived 2018 formulary says the adult acetaminophen limit is 6 grams per day.",
               "source_url": "https://who.int/archive", "metadata": {"year": 2018}}]
    resp = "The archived 2018 formulary says the adult acetaminophen limit is 6 grams per day."
    cfg = AuditConfig(max_source_age_days=365, stale_source_action="fail")
    old = audit("", chunks, resp, cfg, as_of=date(2026, 1, 1))
    assert old["claims"][0]["freshness_status"] == "stale" and old["claim_verdicts"][0]["trust_status"] == "supported_stale"
    assert old["passed"] is True and old["freshness_passed"] is False and old["trust_passed"] is False
    new = audit("", chunks, resp, cfg, as_of=date(2018, 6, 1))
    assert new["claims"][0]["freshness_status"] == "fresh" and new["trust_passed"] is True
    assert new["claims"][0]["source_age_days"] == (date(2018, 6, 1) - date(2018, 1, 1)).days
    warn = audit("", chunks, resp, AuditConfig(max_source_age_days=365), as_of=date(2026, 1, 1))
    assert warn["trust_passed"] is True and "stale_supported_claims" in warn["policy_issues"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2021-03-04", date(2021, 3, 4)), ("2021-03-04T10:00:00Z", date(2021, 3, 4)), ("2021/03/04", date(2021, 3, 4)),
        ("March 4, 2021", date(2021, 3, 4)), ("4 March 2021", date(2021, 3, 4)), ("Mar 2021", date(2021, 3, 1)),
        ("25/12/2020", date(2020, 12, 25)), (2019, date(2019, 1, 1)), ("2019", date(2019, 1, 1)),
        ("Thu, 04 Mar 2021 10:00:00 GMT", date(2021, 3, 4)), (1614852000, date(2021, 3, 4)),
        ("03/04/2021", None), ("last tuesday", None), ("2021-02-30", None), (True, None),
    ],
)
def test_date_formats(value: object, expected: date | None) -> None:
    assert parse_date_value(value)[0] == expected


def test_unknown_age_and_preferred_key() -> None:
    f = assess_freshness({"published_at": "sometime"}, 30, date(2026, 1, 1), None)
    assert f.status == "unknown" and "unparseable" in (f.note or "")
    f = assess_freshness({"date": "2020-01-01", "crawled": "2025-12-31"}, 30, date(2026, 1, 1), "crawled")
    assert f.status == "fresh" and f.metadata_key == "crawled"


def test_bad_input_names_the_field() -> None:
    with pytest.raises(InvalidInput, match=r"chunks\[1\]\.content"):
        audit("", [{"content": "a"}, {"source_url": "https://x.org"}], "A claim here.")
    with pytest.raises(InvalidInput, match=r"chunks\[0\]\.metadata"):
        audit("", [{"content": "a", "metadata": "2020"}], "A claim here.")
    with pytest.raises(InvalidInput, match="response"):
        audit("", [], None)
    with pytest.raises(InvalidInput, match="response"):
        audit("", [], "x" * 1_000_001)
    with pytest.raises(InvalidInput, match="config"):
        config_from_dict({"claim_treshold": 0.3})
    with pytest.raises(InvalidInput, match=r"config\.extractor"):
        config_from_dict({"extractor": "llm"})
    with pytest.raises(InvalidInput, match=r"config\.claim_threshold"):
        config_from_dict({"claim_threshold": 3})


def test_large_response_is_audited() -> None:
    sentence = "Aspirin lowers fever by inhibiting COX enzymes in the body. "
    rep = audit("", SAMPLE["chunks"], sentence * 5000, ALLOW)  # ~300 KB, 5000 claims
    assert rep["counts"]["supported"] == 5000


def test_non_english() -> None:
    chunks = [{"content": "Aspirin senkt Fieber, indem es COX-Enzyme hemmt.", "source_url": "https://a.de/x"}]
    rep = audit("", chunks, "Aspirin senkt Fieber, indem es COX-Enzyme hemmt.")
    assert rep["claims"][0]["verdict"] == "supported"
    zh = [{"content": "阿司匹林通过抑制环氧合酶来退烧。", "source_url": "https://a.cn/x"}]
    rep = audit("", zh, "阿司匹林通过抑制环氧合酶来退烧。")
    assert rep["claims"][0]["verdict"] == "supported"


def test_claim_extraction() -> None:
    text = "Sure! Aspirin lowers fever [1]. Is it safe? Consult your doctor.\n## Side effects\n- Nausea is common."
    claims = extract_claims(text)
    assert [c.clean for c in claims] == ["Aspirin lowers fever.", "Nausea is common."]
    assert all(text[c.start : c.end] == c.text for c in claims)
    assert len(extract_claims(text, "regex")) == 6
    assert [s.text for s in split_sentences("Dr. Smith paid 3.5 dollars in the U.S. today. Then left.")] == [
        "Dr. Smith paid 3.5 dollars in the U.S. today.", "Then left."
    ]
    assert not is_factual_claim("I think this is the best option.")


def test_config_file_and_discovery(tmp_path) -> None:  # type: ignore[no-untyped-def]
    toml = tmp_path / "provenance.toml"
    toml.write_text('allowed_domains = ["who.int"]\nclaim_threshold = 0.3\nmatcher = "bm25"\n'
                    'enforcement_mode = "enforce"\nmax_source_age_days = 365\nas_of = 2025-01-01\n')
    cfg = load_config_file(toml)
    assert cfg.allowed_domains == ("who.int",) and cfg.claim_threshold == 0.3 and cfg.as_of == date(2025, 1, 1)
    data = tmp_path / "sub"
    data.mkdir()
    assert discover_config(data / "in.json", tmp_path) == toml  # working directory first
    assert discover_config(tmp_path / "in.json", data) == toml  # then beside the input
    assert discover_config(data / "in.json", data) is None
    (tmp_path / "bad.toml").write_text("allowed_domains = [")
    with pytest.raises(InvalidInput, match="not valid TOML"):
        load_config_file(tmp_path / "bad.toml")


def test_polarity_and_no_effect() -> None:
    assert check("Aspirin increases fever.", "Aspirin lowers fever.")[0].kind == "negation"
    assert check("Smoking prevents lung cancer.", "Smoking causes lung cancer.")[0].kind == "negation"
    assert check("Aspirin has no effect on fever.", "Aspirin lowers fever.")[0].kind == "negation"
    assert check("Aspirin lowers fever in adults.", "In adults, aspirin lowers fever.") == []
    # negation in another clause of the evidence is not a contradiction
    assert check("The protocol affects American companies.",
                 "Although the United States is not a signatory, the protocol affects American companies.") == []


def test_shipped_model_matches_the_code() -> None:
    """core/audit/audit_model.json (bench/audit_train.py) must name exactly the features the matcher computes,
    with the monotone signs the training enforces."""
    from bosun.core.audit.audit import load_model
    from bosun.core.audit.match import LEXICAL_FEATURES, SEMANTIC_FEATURES

    for name, feats in (("bm25", LEXICAL_FEATURES), ("semantic", SEMANTIC_FEATURES)):
        model = load_model(name)
        assert model.features == feats
        signs = dict(zip(model.features, model.coef.tolist(), strict=True))
        assert all(signs[f] >= 0 for f in feats if f.startswith(("cov", "bigram", "sem", "clause")))
        assert all(signs[f] <= 0 for f in ("num_missing", "miss_frac", "miss_max", "mismatch"))


def test_negation_with_repeated_words_and_directional_words() -> None:
    ev = "It lowers blood glucose by reducing hepatic glucose production."
    assert check("Metformin does not lower blood glucose.", ev)[0].kind == "negation"
    ev2 = "In 2022 the company reported revenue of 4.2 billion dollars, up 12 percent from the previous year."
    assert check("Revenue fell 12 percent from the previous year.", ev2)[0].kind == "negation"
    assert check("Revenue rose 12 percent from the previous year.", ev2) == []


def test_quantifier_phrases() -> None:
    ev = "Most patients recovered within a week."
    assert check("Less than half of the patients recovered within a week.", ev)[0].kind == "quantifier"
    assert check("Only a few patients recovered within a week.", ev)[0].kind == "quantifier"
    assert check("More than half of the patients recovered within a week.", ev) == []


def test_opposite_function_words() -> None:
    assert check("The treaty was signed before the war.", "The treaty was signed after the war.")[0].kind == "negation"
    assert check("The treaty was signed after the war.", "The treaty was signed after the war.") == []
