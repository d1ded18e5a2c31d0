"""The semantic channel of a bodiless corpus (a tool list): either channel standing high in the null admits."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from bosun.core.embedding import HashEmbedder
from bosun.core.routing import calibrate
from bosun.core.routing.abstain import SHIPPED
from bosun.core.routing.corpus import Policy, parse_policy
from bosun.core.routing.route import build_index_with, route


def _tools(n: int) -> list[Policy]:
    return [Policy(name=f"tool{i}", surface=f"look up the {w} for a place and a date", text=f"look up the {w}", source="t",
                   fmt="oiax") for i, w in enumerate(["weather", "tides", "pollen", "traffic", "sunrise", "events"][:n])]


def _policies(n: int) -> list[Any]:
    out = []
    for i in range(n):
        text = (f"# policy {i}\n\n**Agent-trigger:** topic {i} rules and checklist {i}\n\n"
                f"Body paragraph about topic {i} with owners and an escalation path.\n")
        pol = parse_policy(f"p{i}.md", text)
        assert pol is not None
        out.append(pol)
    return out


def test_the_bars_are_each_channels_quantile_at_the_joint_level() -> None:
    rng = np.random.default_rng(7)
    p = rng.uniform(0.0, 1.0, 200)
    s = rng.uniform(0.0, 0.6, 200)
    z = rng.normal(2.0, 1.0, 200)
    cal = calibrate.from_null(p.tolist(), z.tolist(), calibrate.ROUTE_LEVELS, s.tolist())
    assert cal.semantic_threshold is not None and cal.semantic_clause is not None
    # a null prompt clears the joint bar exactly when it clears one of the two channel bars
    both = np.maximum(np.searchsorted(np.sort(p), p, "right") / p.size, np.searchsorted(np.sort(s), s, "right") / s.size)
    t = float(np.quantile(both, calibrate.SEMANTIC_CHANNEL_LEVEL))
    assert np.array_equal(both >= t, (p >= cal.threshold) | (s >= cal.semantic_threshold))
    # the joint level sits above the probability-only level: each channel's own bar is stricter alone
    plain = calibrate.from_null(p.tolist(), z.tolist())
    assert cal.threshold > plain.threshold
    assert cal.semantic_threshold <= cal.semantic_clause
    assert cal.next_threshold <= cal.threshold <= cal.clause_threshold
    # a second document keeps the probability's own bar
    assert cal.next_threshold == pytest.approx(float(np.quantile(p, calibrate.NEXT_LEVEL)))
    assert "or semantic" in cal.describe() and "semantic_threshold" in cal.as_dict()


def test_levels_without_the_channel_ignore_the_semantic_null() -> None:
    p, z, s = [0.1 * i for i in range(10)], [1.0] * 10, [0.05 * i for i in range(10)]
    off = calibrate.from_null(p, z, calibrate.Levels(), s)  # the Tool Compass's levels leave it off
    assert off.semantic_threshold is None and off == calibrate.from_null(p, z, calibrate.Levels())
    on = calibrate.from_null(p, z, calibrate.ROUTE_LEVELS, s)
    assert on.at(calibrate.Levels()).semantic_threshold is None  # read at other levels: the same null, no channel
    assert on.at(calibrate.ROUTE_LEVELS) == on


def test_only_a_corpus_without_bodies_gets_the_channel() -> None:
    emb = HashEmbedder(64)
    tools = build_index_with(_tools(6), emb)
    pols = build_index_with(_policies(6), emb)
    assert tools.calibration is not None and tools.calibration.semantic_threshold is not None
    assert pols.calibration is not None and pols.calibration.semantic_threshold is None
    assert "semantic_threshold" not in pols.calibration.as_dict()


def test_a_candidate_clearing_the_semantic_bar_passes_the_probability_bar() -> None:
    emb = HashEmbedder(64)
    index = build_index_with(_tools(6), emb)
    prompt = "look up the weather for a place and a date"
    qvec = emb.embed([prompt])[0]
    base = index.calibration
    assert base is not None
    # a probability bar nothing reaches, the gate off: only the semantic channel can admit
    index.calibration = calibrate.SelfCalibration(1.0, -99.0, 1.0, 1, 0.0, 0.0, semantic_threshold=1.5,
                                                  semantic_clause=1.5)
    assert route(index, prompt, qvec, SHIPPED).hits == []
    index.calibration = calibrate.SelfCalibration(1.0, -99.0, 1.0, 1, 0.0, 0.0, semantic_threshold=0.0,
                                                  semantic_clause=1.5)
    hits = route(index, prompt, qvec, SHIPPED).hits
    assert [h.name for h in hits] == ["tool0"]  # a second document faces the probability bar (unreachable here)
    # an explicit threshold is a probability: the channel is off
    assert route(index, prompt, qvec, SHIPPED, threshold=1.0).hits == []
    assert hits[0].score < 1.0  # its score stays the probability, below the bar it passed by meaning
