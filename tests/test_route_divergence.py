"""Divergence notice (issue 37): an explicit operating point measured on another corpus size says so on the route
answer (before, only the shipped point and self-calibration did, so a point calibrated on 17 documents and served
on 2 was silent)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from bosun.core.embedding import HashEmbedder
from bosun.server.app import create_server
from bosun.server.config import Config
from bosun.server.engine import Engine

DEPLOY = "# Deploy\n\n**Agent-trigger:** deploying the service to production, rollback plans\n\nRULE-TEXT: canary.\n"
MIGRATE = "# Migrations\n\n**Agent-trigger:** database schema migrations, dropping columns\n\nRULE-TEXT: expand.\n"
# what `bosun eval route calibrate` writes for a 17-document corpus (n_docs_range: half to twice its size)
OP = ('threshold = 0.0\nbias = 0.0\nmodel_id = "hash-bow-64"\nn_docs = 17\nn_docs_range = [8, 34]\n'
      'separability = 0.55\nseparability_range = [{lo}, {hi}]\n'
      '[weights]\nsem = 1.0\nlex = 1.0\nz = 0.0\nmargin = 0.0\nagree = 0.0\nbody_sem = 0.0\nbody_lex = 0.0\n')


@pytest.mark.parametrize(("lo", "hi", "separates"), [(0.4, 0.7, "separates at"), (0.0, 1.0, None)])
async def test_an_explicit_point_measured_elsewhere_gives_a_notice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   lo: float, hi: float, separates: str | None) -> None:
    op = tmp_path / "op.toml"
    op.write_text(OP.format(lo=lo, hi=hi))
    monkeypatch.setenv("BOSUN_ROUTE_OPERATING_POINT", str(op))
    corpus = tmp_path / "two"
    corpus.mkdir()
    (corpus / "deploy.md").write_text(DEPLOY)
    (corpus / "migrate.md").write_text(MIGRATE)
    engine = Engine(Config.from_env(home=tmp_path / "h", policies=[corpus]),
                    embedder_factory=lambda _c: HashEmbedder(64))
    async with Client(create_server(engine)) as client:
        out = (await client.call_tool("route", {"prompt": "deploy to production"})).structured_content
    assert out is not None and out["corpus_size"] == 2
    notice = " ".join(out.get("notices", []))
    assert "far from its calibration" in notice
    assert "this corpus has 2 documents; the operating point was measured on 8-34" in notice
    assert (separates in notice) if separates else "separates at" not in notice
    assert "hash-bow-64" not in notice  # the model is the one it was measured under
