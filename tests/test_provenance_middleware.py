"""bosun.ProvenanceMiddleware: dokis's configuration and calls, one daemon round trip each.

Logic (config, filtering, order, round trips) runs on an in-process daemon with the deterministic
embedder; the swapped fact, which is about meaning, on a real daemon with the real model.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bosun import ComplianceViolation, ProvenanceConfig, ProvenanceMiddleware
from bosun.client import AsyncBosun, BosunClientError, ConnectionFailed
from bosun.core.errors import InvalidInput
from bosun.server.app import create_server
from bosun.server.engine import Engine
from tests.live_daemon import Counting, Daemon, closed_url, live_daemon  # noqa: F401  (the fixture)

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = ["pubmed.ncbi.nlm.nih.gov", "cochrane.org"]
CHUNKS = [
    {"content": "Aspirin lowers fever by inhibiting COX enzymes. Felix Hoffmann first synthesised it in 1897.",
     "source_url": "https://pubmed.ncbi.nlm.nih.gov/1"},
    {"content": "Miracle pills cure every fever overnight.", "source_url": "https://discountpharma.biz/meds"},
    {"content": "Paracetamol is a first-line treatment for fever in children.",
     "source_url": "https://www.cochrane.org/CD1"},
]
TRUE = "Aspirin lowers fever by inhibiting COX enzymes."
SWAPPED = "Felix Hoffmann first synthesised aspirin in 1853."  # the year swapped: the source says 1897


@dataclass
class Chunk:
    """dokis's Chunk shape: attributes, not a dict."""

    content: str
    source_url: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@pytest.fixture
def bosun(engine: Engine) -> Iterator[Counting]:
    with Counting(create_server(engine)) as b:
        yield b


# -- configuration: dokis's names, validated when built ---------------------------------------
def test_dokis_config_names_are_accepted_and_sent_to_the_daemon() -> None:
    cfg = ProvenanceConfig(allowed_domains=ALLOWED, min_citation_rate=0.85, claim_threshold=0.3,
                           enforcement_mode="guardrail", max_source_age_days=365, stale_source_action="fail",
                           matcher="bm25")
    sent = cfg.to_dict()
    assert sent["allowed_domains"] == ALLOWED and sent["min_citation_rate"] == 0.85
    assert (sent["claim_threshold"], sent["max_source_age_days"], sent["stale_source_action"], sent["matcher"]) == \
        (0.3, 365, "fail", "bm25")
    assert ProvenanceConfig(fail_on_violation=True).enforcement_mode == "enforce"
    assert cfg.replace(fail_on_violation=True).enforcement_mode == "enforce"


def test_provenance_toml_and_kwargs_build_the_same_config() -> None:
    toml = ProvenanceConfig.from_toml(ROOT / "examples" / "provenance.toml")
    assert toml.to_dict() == ProvenanceConfig(allowed_domains=["postgresql.org"], min_citation_rate=0.8,
                                              claim_threshold=0.5, enforcement_mode="audit",
                                              max_source_age_days=3650).to_dict()
    assert ProvenanceConfig.from_yaml(ROOT / "examples" / "provenance.toml").to_dict() == toml.to_dict()  # dokis's name
    mw = ProvenanceMiddleware(str(ROOT / "examples" / "provenance.toml"), enforcement_mode="enforce")
    assert mw.config.enforcement_mode == "enforce" and mw.config.allowed_domains == ["postgresql.org"]


@pytest.mark.parametrize(("options", "field"), [
    ({"min_citation_rate": 1.5}, "config.min_citation_rate"),
    ({"enforcement_mode": "block"}, "config.enforcement_mode"),
    ({"extractor": "llm"}, "config.extractor"),  # dokis's LLM extractor: bosun makes no LLM call
    ({"extractor": "nltk"}, "config.extractor"),
    ({"model": "all-mpnet-base-v2"}, "config.model"),  # a per-call model would be silently ignored: refused
    ({"allowed_domain": ["x.org"]}, "config"),  # a typo in a trust policy must not weaken it
])
def test_an_option_bosun_would_not_carry_out_is_an_error_naming_it(options: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        ProvenanceMiddleware(**options)
    assert err.value.field == field
    assert next(iter(options)) in str(err.value) or field in str(err.value)


# -- the calls: the sources passed in come back, one round trip each ------------------------------
def test_filter_keeps_the_sources_passed_in_and_says_why_others_went(bosun: Counting) -> None:
    mw = ProvenanceMiddleware(client=bosun, allowed_domains=ALLOWED)
    dokis_chunks = [Chunk(c["content"], c["source_url"]) for c in CHUNKS]
    clean = mw.filter(dokis_chunks)
    assert list(clean) == [dokis_chunks[0], dokis_chunks[2]]  # the same objects, in order
    assert clean.dropped == 1 and clean.blocked[0]["url"] == "https://discountpharma.biz/meds"
    assert clean.blocked[0]["reason"] == "domain_not_allowlisted"
    by_metadata = [{"text": c["content"], "metadata": {"source": c["source_url"]}} for c in CHUNKS]
    assert mw.filter(by_metadata) == [by_metadata[0], by_metadata[2]]  # the URL read from metadata
    assert bosun.calls == ["filter_sources", "filter_sources"]


def test_audit_takes_dokis_order_and_bosuns_and_counts_one_round_trip(bosun: Counting) -> None:
    mw = ProvenanceMiddleware(client=bosun, allowed_domains=ALLOWED)
    dokis = mw.audit("what lowers fever?", CHUNKS, TRUE)  # dokis: audit(query, chunks, response)
    ours = mw.audit(TRUE, CHUNKS, query="what lowers fever?")
    for report in (dokis, ours):
        assert report.trust_passed and report.compliance_rate == 1.0
        assert report.blocked_sources == ["https://discountpharma.biz/meds"]
        assert list(report.provenance_map.values()) == ["https://pubmed.ncbi.nlm.nih.gov/1"]
        assert report["query"] == "what lowers fever?"
    assert bosun.calls == ["audit", "audit"]


def test_the_pipeline_filters_generates_and_audits_in_two_round_trips(bosun: Counting) -> None:
    mw = ProvenanceMiddleware(client=bosun, allowed_domains=ALLOWED)
    seen: list[Any] = []

    def generate(query: str, sources: Any) -> str:
        seen.extend(sources)
        return TRUE

    out = mw("what lowers fever?", CHUNKS, generate)
    assert seen == [CHUNKS[0], CHUNKS[2]]  # the model never saw the blocked source
    assert out.answer == TRUE and out.sources.dropped == 1 and out.report.trust_passed
    assert bosun.calls == ["filter_sources", "audit"]


def test_select_spends_the_budget_on_the_sources_passed_in(bosun: Counting) -> None:
    mw = ProvenanceMiddleware(client=bosun)
    sources = [*CHUNKS, {"content": "   ", "source_url": "https://cochrane.org/empty"}]  # empty: never picked
    picked = mw.select("what lowers fever?", sources, budget_tokens=25)
    assert picked and all(p in sources[:3] for p in picked)
    assert sum(p["tokens"] for p in picked.picks) == picked.tokens_used <= 25
    assert [p["rank"] for p in picked.picks] == list(range(1, len(picked) + 1))
    assert bosun.calls == ["select_context"]


def test_enforce_mode_raises_compliance_violation(bosun: Counting) -> None:
    mw = ProvenanceMiddleware(client=bosun, enforcement_mode="enforce")
    with pytest.raises(ComplianceViolation) as err:
        mw.audit("Aspirin cures cancer in every patient.", CHUNKS)
    assert "enforce mode" in str(err.value) and err.value.report is None


async def test_async_calls_through_an_async_client(engine: Engine) -> None:
    async with AsyncBosun(create_server(engine)) as b:
        mw = ProvenanceMiddleware(client=b, allowed_domains=ALLOWED)
        clean = await mw.afilter(CHUNKS)
        assert clean == [CHUNKS[0], CHUNKS[2]]
        report = await mw.aaudit(TRUE, clean, query="what lowers fever?")
        assert report.trust_passed
        with pytest.raises(BosunClientError, match="AsyncBosun"):
            mw.filter(CHUNKS)  # a sync call cannot use the async session


async def test_async_calls_through_a_sync_client(bosun: Counting) -> None:
    mw = ProvenanceMiddleware(client=bosun, allowed_domains=ALLOWED)
    assert await mw.afilter(CHUNKS) == [CHUNKS[0], CHUNKS[2]]
    assert bosun.calls == ["filter_sources"]


def test_a_source_the_middleware_cannot_read_is_named() -> None:
    mw = ProvenanceMiddleware()
    with pytest.raises(InvalidInput) as err:
        mw.chunks([CHUNKS[0], 42])
    assert err.value.field == "sources[1]"


# -- a real daemon -----------------------------------------------------------------------------
def test_a_swapped_fact_is_flagged_by_the_real_daemon(live_daemon: Daemon) -> None:  # noqa: F811
    mw = ProvenanceMiddleware(server=live_daemon.url, allowed_domains=ALLOWED)
    assert mw.audit(TRUE, CHUNKS, query="what lowers fever?").trust_passed
    report = mw.audit(SWAPPED, CHUNKS, query="what lowers fever?")
    assert not report.trust_passed and report.enforcement_verdict == "guardrail_failed"
    assert report.claims[0]["verdict"] in ("contradicted", "unsupported")
    with pytest.raises(ComplianceViolation):
        ProvenanceMiddleware(server=live_daemon.url, allowed_domains=ALLOWED, enforcement_mode="enforce").audit(
            SWAPPED, CHUNKS)


def test_a_daemon_that_is_down_is_a_clear_error() -> None:
    mw = ProvenanceMiddleware(server=closed_url(), allowed_domains=ALLOWED)
    with pytest.raises(ConnectionFailed, match="bosun serve"):
        mw.filter(CHUNKS)


def test_the_examples_in_the_docs_run_as_written(live_daemon: Daemon, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """docs/adapters.md: each python block, as written, against the daemon of $BOSUN_HOME."""
    monkeypatch.setenv("BOSUN_HOME", str(live_daemon.home))
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "adapters.md").read_text(), re.S)
    assert len(blocks) == 3
    for block in blocks:
        exec(compile(block, "docs/adapters.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "1 domain_not_allowlisted" and out[1].startswith("True 1.0")
    assert out.count("False ['contradicted']") == 2 and "https://db-gossip.example.net/secrets" not in "\n".join(out)
