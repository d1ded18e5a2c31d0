"""The token estimator: a cl100k-style pre-tokenizer with a fitted cost per piece."""

from __future__ import annotations

from bosun.core.tokens import estimate_tokens, piece_class, pieces


def test_pieces_cover_the_text_exactly() -> None:
    for text in ["Hello world, it's 2026-11-29!\n    def foo_bar(x):\n        return x**2  # ok",
                 "naïve café 東京 🚀", "   \n\n  x\t\ty", ""]:
        assert "".join(pieces(text)) == text


def test_split_follows_cl100k_shapes() -> None:
    assert pieces(" world 2026") == [" world", " ", "202", "6"]
    assert pieces("foo_bar(x)") == ["foo", "_bar", "(x", ")"]
    assert [piece_class(p) for p in [" The", "getValue", "東京", "123", "   ", "==", "→"]] == [
        "word", "wordx", "uword", "num", "space", "punct", "usym"]


def test_estimates() -> None:
    assert estimate_tokens("") == 0 and estimate_tokens("x") == 1
    assert estimate_tokens("hello world") == 2
    prose = "The quick brown fox jumps over the lazy dog. " * 20
    assert 190 <= estimate_tokens(prose) <= 230  # cl100k: 200
    assert estimate_tokens("a" * 10_000) < estimate_tokens("a b " * 2_500)  # long runs cost per character
