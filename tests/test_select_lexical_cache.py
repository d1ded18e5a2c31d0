"""The hybrid's lexical view is built from per-text caches: a view built from them must be the view
built from scratch, long texts must not be pinned, and the caches must stay bounded."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from bosun.core.selection import lexical
from bosun.core.selection.lexical import LexicalView, view_of

TEXTS = [
    "Kiss and Tell (1945 film)\nKiss and Tell is a 1945 American comedy film starring Shirley Temple as Corliss Archer.",
    "Shirley Temple\nShirley Temple Black was an American actress and later a diplomat, ambassador to Ghana.",
    "retry the upload with exponential backoff when the server answers 503",
    "Meet Corliss Archer\nMeet Corliss Archer is an American radio sitcom that aired from 1943 to 1956.",
    "!!",  # no terms at all
    "Janet Waldo\nJanet Waldo was an American radio and voice actress, the voice of Corliss Archer.",
]
LONG = "Long report\n" + " ".join(f"word{i % 997} detail{i % 13}" for i in range(6_000))  # > _CACHE_CHARS


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    lexical.forget_texts()
    yield
    lexical.forget_texts()


def arrays(view: LexicalView) -> dict[str, np.ndarray]:
    present = np.zeros(view.v + 1, np.float32)
    present[view.row_terms(0)] = 1.0  # the terms of text 0, which names the star and the radio show
    return {"indices": view.indices, "indptr": view.indptr, "titled": view.titled, "idf": view.idf,
            "head_grid": view.head_grid, "head_base": view.head_base, "data": view.data,
            "named_by": view.named_by(present), "titled_weight": view.titled_weight}


def test_a_view_from_the_per_text_caches_is_the_view_built_from_scratch() -> None:
    pool = [*TEXTS, LONG]
    cold = arrays(LexicalView(pool))  # every text encoded now (and the short ones cached)
    assert set(lexical._IDS) == set(TEXTS)
    warm = arrays(LexicalView(pool))  # every short text read back from the caches
    for name, value in cold.items():
        np.testing.assert_array_equal(warm[name], value, err_msg=name)
    assert warm["titled"].tolist() == [True, True, False, True, False, True, True]
    named = warm["named_by"]
    assert named[1] == pytest.approx(1.0) and 0.0 < named[3] < 1.0  # "Shirley Temple" whole, "Meet Corliss Archer" in part
    assert named[2] == 0.0 and named[4] == 0.0  # untitled texts are never named


def test_long_texts_are_not_held_and_the_caches_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    LexicalView([LONG])
    assert LONG not in lexical._IDS and LONG not in lexical._META
    monkeypatch.setattr(lexical, "_TEXT_SLOTS", 8)
    many = [f"note {i}: the upload {i} failed with status {500 + i}" for i in range(30)]
    view = LexicalView(many)
    assert len(lexical._IDS) <= 8 and set(lexical._IDS) == set(lexical._META)
    assert set(lexical._IDS) <= set(many[-8:])  # the oldest went first
    again = LexicalView(many)  # most of them are encoded again: same ids, same view
    np.testing.assert_array_equal(again.indices, view.indices)
    np.testing.assert_array_equal(again.indptr, view.indptr)


def test_tfidf_weights_joined_later_match_each_texts_own_counts() -> None:
    view = view_of(TEXTS)
    for i, text in enumerate(TEXTS):
        if len(view.row_terms(i)):
            assert view.similarity_to(text)[i] == pytest.approx(1.0, abs=1e-5)  # a text is its own nearest
    assert view.similarity_to(TEXTS[0])[2] == 0.0  # nothing shared with the retry note
