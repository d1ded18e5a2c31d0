"""Self-calibrated abstention, the large-corpus first stage, shipped background vectors, build progress."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

from bosun.core.embedding import CachingEmbedder, HashEmbedder, Vectors
from bosun.core.routing import calibrate, shipped_vectors
from bosun.core.routing import route as route_mod
from bosun.core.routing.abstain import SHIPPED
from bosun.core.routing.background import BACKGROUND
from bosun.core.routing.corpus import parse_policy
from bosun.core.routing.route import build_index_with, route, score
from bosun.server.config import Config
from bosun.server.services.policies import PolicyService

TOPICS = ["deploying services to production", "database schema migrations", "rotating leaked secrets",
          "reviewing pull requests", "on-call incident response", "frontend accessibility audits",
          "cloud cost budgets", "logging personal data", "dependency upgrades", "API versioning"]


def _policies(n: int) -> list[Any]:
    out = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        text = (f"# policy {i}\n\n**Agent-trigger:** {topic}, team {i} rules; checklist {i % 7} and review {i % 5}\n\n"
                f"Body paragraph about {topic} for group {i}, with owners and an escalation path.\n")
        pol = parse_policy(f"p{i}.md", text)
        assert pol is not None
        out.append(pol)
    return out


def test_leave_one_out_z_matches_brute_force() -> None:
    rng = np.random.default_rng(3)
    sims = rng.normal(0.2, 0.05, size=(20, 4)).astype(np.float32)
    z = calibrate.leave_one_out_z(sims, 0.01)
    for i in range(20):
        rest = np.delete(sims, i, axis=0).astype(np.float64)
        expect = (sims[i] - rest.mean(axis=0)) / np.maximum(rest.std(axis=0), 0.01)
        assert np.allclose(z[i], expect, atol=1e-4)


def test_calibration_is_the_null_quantiles_within_bounds() -> None:
    p = list(np.linspace(0.0, 1.0, 101))
    z = list(np.linspace(-2.0, 6.0, 101))
    cal = calibrate.from_null(p, z)
    assert cal.threshold == pytest.approx(calibrate.THRESHOLD_LEVEL)
    assert cal.next_threshold == pytest.approx(calibrate.NEXT_LEVEL) and cal.next_threshold <= cal.threshold
    assert cal.solo_bg_z == pytest.approx(-2.0 + 8.0 * calibrate.GATE_LEVEL)
    high = calibrate.from_null([0.99] * 50, [50.0] * 50)  # a corpus every everyday prompt matches strongly
    assert high.threshold == calibrate.THRESHOLD_BOUNDS[1] and high.solo_bg_z == calibrate.GATE_BOUNDS[1]
    assert "self-calibrated on this corpus" in high.describe() and high.as_dict()["background_prompts"] == 50


def test_a_clause_never_faces_a_lower_bar_than_its_prompt() -> None:
    p = list(np.linspace(0.0, 1.0, 101))
    z = list(np.linspace(-2.0, 6.0, 101))
    cal = calibrate.from_null(p, z)
    assert cal.clause_threshold == pytest.approx(max(calibrate.THRESHOLD_LEVEL, calibrate.CLAUSE_THRESHOLD_LEVEL))
    low = calibrate.from_null(p, z, calibrate.Levels(clause_threshold=0.1, clause_gate=0.1))  # clamped up
    assert low.clause_threshold == pytest.approx(low.threshold) and low.clause_solo_bg_z == pytest.approx(low.solo_bg_z)
    assert low.as_dict()["clause_threshold"] == round(low.threshold, 3)


def test_the_same_null_can_be_read_at_other_levels() -> None:
    p = list(np.linspace(0.0, 1.0, 101))
    z = list(np.linspace(-2.0, 6.0, 101))
    cal = calibrate.from_null(p, z)
    loose = cal.at(calibrate.Levels(threshold=0.3, gate=0.5, next=0.2))
    assert loose.threshold == pytest.approx(0.3) and loose.solo_bg_z == pytest.approx(2.0)
    assert loose.next_threshold == pytest.approx(0.2) and loose.n_background == cal.n_background
    assert loose.as_dict()["levels"]["threshold"] == 0.3 and cal.at(calibrate.ROUTE_LEVELS) == cal


def test_route_uses_the_index_calibration_unless_told_otherwise() -> None:
    emb = HashEmbedder(64)
    index = build_index_with(_policies(12), emb)
    assert index.calibration is not None and index.calibration.n_background == len(BACKGROUND)
    prompt = "deploying services to production for team 3"
    qvec = emb.embed([prompt])[0]
    strict = calibrate.SelfCalibration(1.0, 99.0, 1.0, 1, 0.0, 0.0)
    loose = calibrate.SelfCalibration(0.0, -99.0, 0.0, 1, 0.0, 0.0)
    index.calibration = strict
    assert route(index, prompt, qvec, SHIPPED).hits == []
    index.calibration = loose
    assert route(index, prompt, qvec, SHIPPED).hits
    # an explicit operating point (calibrated=False) reads its own threshold, not the index's
    assert route(index, prompt, qvec, SHIPPED, calibrated=False, threshold=1.01).hits == []


def test_batched_null_equals_scoring_each_background_prompt() -> None:
    """The self-calibration's matrix products give each background prompt's score() order and probability."""
    from bosun.core.routing.abstain import probability

    emb = HashEmbedder(64)
    index = build_index_with(_policies(23), emb)
    assert index.bg_vecs is not None
    sims = route_mod.background_scores(index, index.bg_vecs)
    null_p, top = route_mod.null_probabilities(index, SHIPPED, sims)
    for i, text in enumerate(index.bg_texts):
        sc = score(index, text, index.bg_vecs[i])
        assert int(top[i]) == int(sc.order[0]), text
        assert null_p[i] == pytest.approx(probability(SHIPPED, route_mod.decision_features(sc, int(top[i]))), abs=1e-5)


def test_first_stage_scores_candidates_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    emb = HashEmbedder(64)
    index = build_index_with(_policies(300), emb)
    prompts = ["rotating leaked secrets for team 17", "review the accessibility audit checklist 3",
               "who owns the escalation path for cloud cost budgets"]
    qvecs = emb.embed(prompts)
    exact = [score(index, p, q) for p, q in zip(prompts, qvecs, strict=True)]
    monkeypatch.setattr(route_mod, "EXACT_DOCS", 10)
    monkeypatch.setattr(route_mod, "FIRST_STAGE", 60)
    staged = [score(index, p, q) for p, q in zip(prompts, qvecs, strict=True)]
    for a, b in zip(exact, staged, strict=True):
        top = a.order[:3]
        assert np.allclose(a.semantic[top], b.semantic[top]) and np.allclose(a.body_semantic[top], b.body_semantic[top])
        assert int(a.order[0]) == int(b.order[0])
        assert np.all(b.semantic <= a.semantic + 1e-6)  # outside the first stage: the whole surface, a lower bound


def test_shipped_background_vectors_cover_the_background_and_are_checked() -> None:
    shipped = shipped_vectors.load("all-MiniLM-L6-v2-int8", list(BACKGROUND))
    assert set(shipped) == set(BACKGROUND)  # regenerate with bench/route_background_vectors.py after editing
    vec = next(iter(shipped.values()))
    assert shipped_vectors.verified(vec, vec * 2.0)
    assert not shipped_vectors.verified(vec, np.roll(vec, 1))
    assert shipped_vectors.load("some-other-model", list(BACKGROUND)) == {}
    assert "/" not in shipped_vectors.file_name("org/model:v1")


class SlowEmbedder(HashEmbedder):
    """A hash embedder whose build batches block until the test lets them through (a prompt passes)."""

    def __init__(self) -> None:
        super().__init__(64)
        self.calls = 0
        self.gate = threading.Semaphore(0)

    def embed(self, texts: Sequence[str]) -> Vectors:
        if len(texts) > 1:
            self.gate.acquire()
            self.calls += 1
        return super().embed(texts)


class FakeEngine:
    """The part of the Engine a PolicyService uses: the model and the caching embed."""

    def __init__(self, inner: HashEmbedder) -> None:
        self.emb = CachingEmbedder(inner)
        self.config = Config(policies=[])

    async def judge(self) -> None:  # no judge: the rules decide (BOSUN_JUDGE=off)
        return None

    def judge_notice(self) -> None:
        return None

    async def embedder(self) -> CachingEmbedder:
        return self.emb

    async def embed(self, texts: Sequence[str]) -> Vectors:
        return await anyio.to_thread.run_sync(self.emb.embed, list(texts))


def _write_corpus(root: Path, n: int) -> None:
    root.mkdir()
    for i, pol in enumerate(_policies(n)):
        (root / f"p{i}.md").write_text(pol.text)


async def _until(cond: Any, tries: int = 400) -> None:
    for _ in range(tries):
        if cond():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never held")


async def test_build_reports_progress_serves_early_and_stops_on_close(tmp_path: Path) -> None:
    _write_corpus(tmp_path / "c", 60)
    inner = SlowEmbedder()
    svc = PolicyService(FakeEngine(inner), dirs=[tmp_path / "c"], poll_seconds=0, complete_wait_s=0)
    assert svc.index_state()["state"] == "loading"
    svc.start()
    for _ in range(5):  # no shipped vectors for this model: the 133 background prompts, in batches of 32
        inner.gate.release()
    await _until(lambda: svc.index_state()["phase"] == "surfaces")
    inner.gate.release()
    await _until(lambda: svc.index_state()["done"] > 0)
    state = svc.index_state()
    assert state["state"] == "building" and state["documents"] == 60 and 0 < state["done"] < state["total"]
    assert state["background"] == "embedded"
    inner.gate.release()
    await _until(lambda: svc.served is not None)  # whole surfaces embedded: serving before the bodies
    out = await svc.route("deploying services to production")
    assert any(n.startswith("index building") for n in out["notices"]) and out["index"]["state"] == "building"
    # a build batch is blocked inside the model now: close must not wait for it, and no batch may follow
    await svc.aclose()
    calls = inner.calls
    for _ in range(5):
        inner.gate.release()
    await asyncio.sleep(0.05)
    assert inner.calls <= calls + 1  # only the abandoned batch in flight finishes
    assert svc.index_state()["done"] < svc.index_state()["total"]


async def _surfaces_served(inner: SlowEmbedder, svc: PolicyService) -> None:
    """Let the background prompts and the surfaces through; the bodies stay gated."""
    svc.start()
    for _ in range(6):  # 5 background batches of 32, then the 8 documents' surfaces
        inner.gate.release()
    await _until(lambda: svc.served is not None)
    assert not svc.served.complete


async def test_a_route_during_the_build_waits_for_the_bodies_that_are_coming(tmp_path: Path) -> None:
    _write_corpus(tmp_path / "c", 8)
    inner = SlowEmbedder()
    svc = PolicyService(FakeEngine(inner), dirs=[tmp_path / "c"], poll_seconds=0, complete_wait_s=600)
    await _surfaces_served(inner, svc)
    pending = asyncio.ensure_future(svc.route("deploying services to production"))
    await asyncio.sleep(0.05)
    assert not pending.done()  # it can only finish on the full index: the bodies are still gated
    for _ in range(50):
        inner.gate.release()
    out = await pending
    assert not any(n.startswith("index building") for n in out.get("notices", []))
    assert "index" not in out and svc.served is not None and svc.served.complete  # the full index answered
    await svc.aclose()


async def test_the_wait_for_the_bodies_is_bounded(tmp_path: Path) -> None:
    _write_corpus(tmp_path / "c", 8)
    inner = SlowEmbedder()
    svc = PolicyService(FakeEngine(inner), dirs=[tmp_path / "c"], poll_seconds=0, complete_wait_s=0.2)
    await _surfaces_served(inner, svc)
    out = await svc.route("deploying services to production")  # bodies never come: answered from surfaces
    assert any(n.startswith("index building") for n in out["notices"]) and out["index"]["state"] == "building"
    await svc.aclose()
    for _ in range(50):
        inner.gate.release()


async def test_build_completes_with_calibration_in_listing(tmp_path: Path) -> None:
    _write_corpus(tmp_path / "c", 8)
    svc = PolicyService(FakeEngine(HashEmbedder(64)), dirs=[tmp_path / "c"], poll_seconds=0)
    svc.start()
    await svc.ready()
    await _until(lambda: svc.index_state()["state"] == "ready")
    state = svc.index_state()
    assert state["done"] == state["total"] and state["documents"] == 8 and state["error"] is None
    listing = await svc.listing()
    assert listing["calibration"]["background_prompts"] == len(BACKGROUND)
    assert listing["calibration_summary"].startswith("self-calibrated on this corpus")
    assert listing["prompt_adapter"] is False  # no adapter ships for the hash embedder
    out = await svc.route("database schema migrations for team 1")
    assert f"threshold {listing['calibration']['threshold']:.2f}" in " ".join(out["notices"]) and "index" not in out
    assert "calibration" not in out  # the full figures live in the listing, not in every answer
    await svc.aclose()


class ShippedModelEmbedder(HashEmbedder):
    """Stands in for the shipped model: returns the shipped vectors of the package's own texts, counts the rest."""

    MODEL = "all-MiniLM-L6-v2-int8"

    def __init__(self, known: dict[str, Any]) -> None:
        super().__init__(384)
        self.known = known
        self.embedded: list[str] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.embedded.extend(texts)
        hashed = HashEmbedder.embed(self, texts)
        return np.vstack([self.known.get(t, hashed[i]) for i, t in enumerate(texts)])

    def model_id(self) -> str:
        return self.MODEL


def _demo_texts() -> list[str]:
    from bosun.server.services.policies import _plan, demo_corpus_dir

    plan = _plan([demo_corpus_dir()])
    return list(dict.fromkeys(plan.first + plan.rest))


def test_shipped_demo_vectors_cover_every_text_the_demo_corpus_embeds() -> None:
    texts = _demo_texts()
    shipped = shipped_vectors.load(ShippedModelEmbedder.MODEL, texts, shipped_vectors.DEMO)
    # fails after editing the demo corpus or how texts are cut: rerun bench/route_background_vectors.py
    assert set(shipped) == set(texts)


async def test_demo_corpus_builds_from_shipped_vectors_after_one_probe() -> None:
    texts = _demo_texts()
    known = {**shipped_vectors.load(ShippedModelEmbedder.MODEL, list(BACKGROUND)),
             **shipped_vectors.load(ShippedModelEmbedder.MODEL, texts, shipped_vectors.DEMO)}
    inner = ShippedModelEmbedder(known)
    svc = PolicyService(FakeEngine(inner), dirs=None, poll_seconds=0)
    assert svc.demo
    await svc.reload()
    assert svc.index_state()["state"] == "ready" and svc.index_state()["total"] == 0
    assert len(inner.embedded) == 2  # one probe per shipped file, nothing else
    assert svc.served is not None and len(svc.served.index.phrases.text) + len(svc.served.index.chunks.text) == len(texts)


async def test_demo_vectors_of_another_model_are_not_trusted() -> None:
    """A model with the shipped id but other weights fails the probe and embeds every text itself."""
    inner = ShippedModelEmbedder({})
    svc = PolicyService(FakeEngine(inner), dirs=None, poll_seconds=0)
    await svc.reload()
    assert svc.index_state()["state"] == "ready"
    assert set(_demo_texts()) <= set(inner.embedded) and svc.index_state()["background"] == "embedded"
