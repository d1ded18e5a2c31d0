"""The prompt adapter: its map, the check that it belongs to the model, its place in scoring, the shipped file."""

from __future__ import annotations

import importlib.resources
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bosun.core.embedding import HashEmbedder
from bosun.core.routing import adapter as adapter_mod
from bosun.core.routing import shipped_vectors
from bosun.core.routing.adapter import QueryAdapter, for_index
from bosun.core.routing.background import BACKGROUND
from bosun.core.routing.corpus import parse_policy
from bosun.core.routing.route import build_index_with, score

DIM = 16


def _unit(rows: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(rows, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _adapter(mix: float, seed: int = 1, probe: tuple[str, np.ndarray] | None = None) -> QueryAdapter:
    rng = np.random.default_rng(seed)
    u = rng.normal(0, 0.3, (DIM, 3)).astype(np.float32)
    v = rng.normal(0, 0.3, (DIM, 3)).astype(np.float32)
    return QueryAdapter(u, v, mix, probe[0] if probe else "", probe[1] if probe else None)


def test_zero_correction_is_the_identity() -> None:
    q = _unit(5, 0)
    ad = QueryAdapter(np.zeros((DIM, 2), np.float32), np.zeros((DIM, 2), np.float32), 1.0)
    assert np.allclose(ad.apply(q), q, atol=1e-6)
    assert np.allclose(ad.apply(q[0]), q[0], atol=1e-6)


def test_apply_keeps_unit_length_and_mix_interpolates() -> None:
    q = _unit(4, 2)
    full, none, half = _adapter(1.0).apply(q), _adapter(0.0).apply(q), _adapter(0.5).apply(q)
    assert np.allclose(np.linalg.norm(full, axis=1), 1.0, atol=1e-5)
    assert np.allclose(none, q, atol=1e-6)  # mix 0: the model's own direction
    assert not np.allclose(full, q, atol=1e-3)
    # the half mix lies between the two directions
    assert np.all((half * q).sum(axis=1) > (full * q).sum(axis=1) - 1e-6)
    # one vector and a batch agree
    assert np.allclose(_adapter(0.5).apply(q[1]), half[1], atol=1e-6)


def test_another_dimension_is_left_alone() -> None:
    q = (np.ones(DIM + 1) / np.sqrt(DIM + 1)).astype(np.float32)
    assert np.array_equal(_adapter(1.0).apply(q), q)


def test_used_only_when_the_index_reproduces_the_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    probe = _unit(1, 3)[0]
    ad = _adapter(1.0, probe=("a background prompt", probe))
    monkeypatch.setattr(adapter_mod, "shipped", lambda model_id: ad)
    assert for_index("m", {"a background prompt": probe}) is ad
    assert for_index("m", {"a background prompt": _unit(1, 4)[0]}) is None  # same id, other weights
    assert for_index("m", {}) is None  # the probe was not embedded: cannot tell


def _corpus() -> list[Any]:
    topics = ["deploying services to production", "database schema migrations", "rotating leaked secrets",
              "reviewing pull requests", "on-call incident response", "frontend accessibility audits"]
    out = []
    for i, topic in enumerate(topics):
        pol = parse_policy(f"p{i}.md", f"# policy {i}\n\n**Agent-trigger:** {topic}\n\nBody about {topic}.\n")
        assert pol is not None
        out.append(pol)
    return out


def test_scoring_adapts_the_prompt_and_the_background() -> None:
    emb = HashEmbedder(dim=DIM)
    dim = emb.dimension()
    rng = np.random.default_rng(5)
    ad = QueryAdapter(rng.normal(0, 0.3, (dim, 2)).astype(np.float32),
                      rng.normal(0, 0.3, (dim, 2)).astype(np.float32), 0.75)
    pols = _corpus()
    plain = build_index_with(pols, emb, adapter=False)
    adapted = build_index_with(pols, emb, adapter=ad)
    assert plain.adapter is None and adapted.adapter is ad
    assert plain.bg_vecs is not None and adapted.bg_vecs is not None
    assert np.allclose(adapted.bg_vecs, ad.apply(plain.bg_vecs), atol=1e-6)
    prompt = "how do we roll out a migration to the production database"
    qvec = emb.embed([prompt])[0]
    by_adapted = score(adapted, prompt, qvec)
    by_hand = score(plain, prompt, ad.apply(qvec))  # the same numbers as adapting the vector beforehand
    assert np.allclose(by_adapted.semantic, by_hand.semantic, atol=1e-6)
    assert not np.allclose(by_adapted.semantic, score(plain, prompt, qvec).semantic, atol=1e-4)


def _shipped_files() -> list[Path]:
    folder = Path(str(importlib.resources.files("bosun.core.routing") / "data"))
    return sorted(folder.glob("adapter-*.npz"))


@pytest.mark.parametrize("path", _shipped_files(), ids=lambda p: p.name)
def test_shipped_file_matches_its_training_script(path: Path) -> None:
    """The package file was written by bench/route_adapter.py with the constants it declares today."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    try:
        import route_adapter as script  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    with np.load(path) as data:
        model_id = str(data["model_id"])
        inputs = json.loads(str(data["inputs"]))
        u, v, mix = np.asarray(data["u"]), np.asarray(data["v"]), float(data["mix"])
        probe_text, probe_vec = str(data["probe_text"]), np.asarray(data["probe_vec"], np.float32)
    assert path.name == adapter_mod.file_name(model_id)
    expected = script.declared_inputs(script.SHIPPED_L2, script.SHIPPED_MIX, inputs["n_queries"])
    assert inputs == expected
    assert mix == script.SHIPPED_MIX
    assert u.shape == v.shape == (u.shape[0], script.RANK)
    # the probe is a background prompt whose shipped vector (same model) it reproduces
    assert probe_text == BACKGROUND[0]
    shipped_bg = shipped_vectors.load(model_id, [probe_text])
    assert probe_text in shipped_bg
    assert shipped_vectors.verified(shipped_bg[probe_text], probe_vec)
    loaded = adapter_mod.shipped(model_id)
    assert loaded is not None and loaded.matches({probe_text: shipped_bg[probe_text]})
