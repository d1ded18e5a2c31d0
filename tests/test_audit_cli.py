"""``bosun audit FILE``: dokis input format, config discovery, --json, stdin, exit codes 0/1/2."""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

import pytest

from bosun.server.commands import audit as cmd

SAMPLE = {
    "query": "q",
    "chunks": [{"content": "The archived 2018 formulary says the adult acetaminophen limit is 6 grams per day.",
                "source_url": "https://who.int/archive/formulary-2018", "metadata": {"year": 2018}}],
    "response": "The archived 2018 formulary says the adult acetaminophen limit is 6 grams per day.",
}


def run(argv: list[str], monkeypatch: pytest.MonkeyPatch, cwd: Path, stdin: str | None = None) -> int:
    monkeypatch.chdir(cwd)
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    parser = argparse.ArgumentParser()
    cmd.add_arguments(parser)
    if "--matcher" not in argv:  # the lexical path unless a test asks otherwise: no model in these tests
        argv = [*argv, "--matcher", "bm25"]
    return cmd.run(parser.parse_args(argv))


def test_auto_matcher_uses_the_model_or_says_why_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The default matcher is semantic when the model loads, and bm25 (said on stderr) when it cannot."""
    import numpy as np

    from bosun.server.model import ModelError

    f = tmp_path / "in.json"
    f.write_text(json.dumps(SAMPLE))
    seen: list[int] = []

    def fake_embed(texts: list[str]) -> np.ndarray:
        seen.append(len(texts))
        rng = np.random.default_rng(0)
        vecs = rng.normal(size=(len(texts), 8)).astype(np.float32)
        return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)

    monkeypatch.setattr(cmd, "_local_embedder", lambda: (fake_embed, None))
    assert run([str(f), "--json", "--matcher", "auto", "--as-of", "2018-06-01"], monkeypatch, tmp_path) in (0, 1)
    assert json.loads(capsys.readouterr().out)["matcher"] == "semantic" and seen

    def no_model() -> None:
        raise ModelError("no model here")

    monkeypatch.setattr(cmd, "_local_embedder", no_model)
    assert run([str(f), "--json", "--matcher", "auto", "--as-of", "2018-06-01"], monkeypatch, tmp_path) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["matcher"] == "bm25" and "no model here" in captured.err


def test_semantic_matcher_aligns_tokens_as_the_daemon_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """With a model that gives token states, ``bosun audit`` runs the token alignment (the daemon's
    default fit), asking for the word states before the vectors (one model run gives both)."""
    import numpy as np

    from bosun.core.audit.align import WordStates
    from bosun.core.audit.claims import content_tokens
    from bosun.core.embedding import HashEmbedder

    f = tmp_path / "in.json"
    f.write_text(json.dumps(SAMPLE))
    order: list[str] = []
    hashed = HashEmbedder(16)

    def embed(texts: list[str]) -> np.ndarray:
        order.append("embed")
        return hashed.embed(texts)

    def words(texts: list[str]) -> list[WordStates]:
        order.append("words")
        return [WordStates(tuple(content_tokens(t)), hashed.embed(content_tokens(t))) for t in texts]

    monkeypatch.setattr(cmd, "_local_embedder", lambda: (embed, words))
    assert run([str(f), "--json", "--matcher", "semantic", "--as-of", "2018-06-01"], monkeypatch, tmp_path) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["token_alignment"] is True and rep["claims"][0]["features"]["align"] > 0.99
    assert order == ["words", "embed"]


def test_pass_fail_and_discovery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "in.json"
    f.write_text(json.dumps(SAMPLE))
    assert run([str(f), "--as-of", "2018-06-01"], monkeypatch, tmp_path) == 0
    assert "TRUST PASSED" in capsys.readouterr().out
    (tmp_path / "provenance.toml").write_text("max_source_age_days = 365\nstale_source_action = \"fail\"\n")
    assert run([str(f), "--as-of", "2026-01-01"], monkeypatch, tmp_path) == 1  # discovered: stale fails
    out = capsys.readouterr().out
    assert "TRUST FAILED" in out and "provenance.toml" in out and "stale" in out
    assert run([str(f), "--as-of", "2026-01-01", "--json"], monkeypatch, tmp_path) == 1
    rep = json.loads(capsys.readouterr().out)
    assert rep["claims"][0]["freshness_status"] == "stale" and rep["config_file"].endswith("provenance.toml")


def test_stdin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["-", "--json"], monkeypatch, tmp_path, stdin=json.dumps(SAMPLE)) == 0
    assert json.loads(capsys.readouterr().out)["trust_passed"] is True


@pytest.mark.parametrize(
    ("content", "message"),
    [("{not json", "not valid JSON"), ('{"query": "q"}', "missing field"), ("[1]", "JSON object"),
     ('{"chunks": [{"source_url": "https://a.org"}], "response": "x"}', "chunks[0].content")],
)
def test_input_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                      content: str, message: str) -> None:
    f = tmp_path / "in.json"
    f.write_text(content)
    assert run([str(f)], monkeypatch, tmp_path) == 2
    assert message in capsys.readouterr().err


def test_missing_file_and_bad_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    assert run([str(tmp_path / "nope.json")], monkeypatch, tmp_path) == 2
    f = tmp_path / "in.json"
    f.write_text(json.dumps(SAMPLE))
    bad = tmp_path / "bad.toml"
    bad.write_text('extractor = "llm"\n')
    assert run([str(f), "--config", str(bad)], monkeypatch, tmp_path) == 2
    assert "config.extractor" in capsys.readouterr().err


def test_lexical_path_does_not_load_the_model(tmp_path: Path) -> None:
    """In a fresh interpreter: the lexical audit never imports fastembed or onnxruntime."""
    import subprocess

    f = tmp_path / "in.json"
    f.write_text(json.dumps(SAMPLE))
    code = (
        "import sys, argparse\n"
        "from bosun.server.commands import audit as cmd\n"
        "p = argparse.ArgumentParser(); cmd.add_arguments(p)\n"
        f"rc = cmd.run(p.parse_args([{str(f)!r}, '--json', '--as-of', '2018-06-01', '--matcher', 'bm25']))\n"
        "heavy = [m for m in sys.modules if m.startswith(('fastembed', 'onnxruntime'))]\n"
        "print('RESULT', rc, heavy, file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert "RESULT 0 []" in out.stderr, out.stderr
