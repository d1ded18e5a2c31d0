"""The numpy TF-IDF of routing gives scikit-learn's numbers, and routing imports no scikit-learn."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from bosun.core.routing.route import analyze
from bosun.core.routing.stopwords import ENGLISH_STOP_WORDS
from bosun.core.routing.tfidf import fit
from bosun.server.services.policies import demo_corpus_dir, scan_corpus

DOCS = ["deploying the application to production, CI/CD configuration",
        "database schema migrations: dropping columns, renaming tables, backfills",
        "rotating leaked secrets and API keys; never commit .env files",
        "deploy deploy deploy to prod on Friday",
        "",
        "the and of"]


def _sklearn(docs: list[str]) -> tuple[object, np.ndarray]:
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(analyzer=analyze, sublinear_tf=True, norm="l2", dtype=np.float32)
    return vec, vec.fit_transform(docs).toarray()


def test_stop_words_are_scikit_learns() -> None:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS as REFERENCE

    assert ENGLISH_STOP_WORDS == REFERENCE


def test_fit_matches_scikit_learn_on_the_demo_corpus_and_edge_cases() -> None:
    surfaces = [f"{p.surface} {p.title}" for p in scan_corpus([demo_corpus_dir()]).policies]
    for docs in (DOCS, surfaces):
        ours = fit(docs, analyze)
        assert ours is not None
        vec, ref = _sklearn(docs)
        assert ours.vocabulary_ == vec.vocabulary_  # type: ignore[attr-defined]
        assert np.allclose(ours.idf_, vec.idf_, atol=1e-6)  # type: ignore[attr-defined]
        assert np.allclose(ours.rows.dense(), ref, atol=1e-6)
        assert np.allclose(ours.columns.dense(), ref.T, atol=1e-6)
        for prompt in ("deploy the prod release and roll back deploy", "API keys in .env files", "zzz nothing"):
            q = vec.transform([prompt]).toarray().ravel()  # type: ignore[attr-defined]
            assert np.allclose(ours.cosines(analyze(prompt)), ref @ q, atol=1e-5)


def test_fit_without_any_term_is_none() -> None:
    assert fit(["", "the and of"], analyze) is None
    assert fit([], analyze) is None


def test_building_and_routing_import_no_scikit_learn_or_scipy() -> None:
    code = ("import sys\n"
            "from bosun.core.embedding import HashEmbedder\n"
            "from bosun.core.routing.abstain import SHIPPED\n"
            "from bosun.core.routing.route import build_index_with, route\n"
            "from bosun.server.services.policies import demo_corpus_dir, scan_corpus\n"
            "emb = HashEmbedder(32)\n"
            "index = build_index_with(scan_corpus([demo_corpus_dir()]).policies, emb)\n"
            "route(index, 'drop a column in prod', emb.embed(['drop a column in prod'])[0], SHIPPED)\n"
            "print(sorted(m for m in ('sklearn', 'scipy') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
