"""Observe with intent: the lines of a large output that bear on what the agent is trying to do.

``focus(text, intent, budget)`` scores every line of the output, and every block of lines (a
run between blank lines, cut to a few lines), with BM25 (bm25s) against the intent's words, then
keeps the best-scoring lines with one line of context each, in output order, within a token
budget. Each kept run is printed with its line numbers, so the agent can ask recall for a
``range`` around it. Identifiers are matched whole and by their parts (``test_parse_url`` ->
``test``, ``parse``, ``url``), so a prose intent ("why does parse url fail") meets code and logs.

This is CPU work over the whole output (a megabyte is ~20,000 lines): callers run it off the
event loop.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from bosun.core.text import STOPWORDS, stem
from bosun.core.tokens import estimate_tokens

WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[.:/-][A-Za-z0-9_]+)*|\d+")
CAMEL = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
# words every output and every intent is full of: matching them says nothing about relevance
NOISE = frozenset(["line", "file", "self", "none", "true", "false", "return", "def", "import", "py", "why",
                   "does", "fail", "show", "find", "get", "see", "need", "want", "look", "check"])
BLOCK_LINES = 6  # a block is at most this many lines (a paragraph, a traceback frame group)
MAX_LINE_CHARS = 300
MAX_CANDIDATES = 3_000
KEEP_SHARE = 0.5  # of the best line's score


@dataclass
class Focus:
    """The lines that bear on the intent: ``text`` holds ``L12-14:`` runs; ``ranges`` their line spans."""

    text: str
    ranges: list[tuple[int, int]]
    scored_lines: int  # lines that held a query word
    total_lines: int


def words(text: str) -> list[str]:
    """Content words of ``text``: whole identifiers and their parts, lower-cased and stemmed."""
    out: list[str] = []
    for tok in WORD.findall(text):
        low = tok.lower()
        parts = {low}
        if len(tok) > 2 and not tok.isdigit():
            for piece in re.split(r"[._:/-]+", tok):
                parts.update(p.lower() for p in CAMEL.findall(piece))
                parts.add(piece.lower())
        for p in parts:
            if len(p) >= 2 and p not in STOPWORDS and p not in NOISE:
                out.append(stem(p))
    return out


def _scores(docs: list[list[str]], query: list[str]) -> np.ndarray:
    """BM25 score of each token list against the query words (zero where no query word occurs).

    Only the candidates (lists holding a query word, at most ``MAX_CANDIDATES``, those with the
    most distinct query words first) are indexed: bm25s indexes in a Python loop per document
    (~0.1 ms each), and a list without a query word scores zero anyway. Term weights are thus
    relative to the candidates, which is what ranking them needs.
    """
    vocab = set(query)
    scores = np.zeros(len(docs), dtype=np.float32)
    hits = [(len(vocab.intersection(d)), i) for i, d in enumerate(docs)]
    candidates = [i for n, i in sorted((h for h in hits if h[0]), key=lambda h: -h[0])[:MAX_CANDIDATES]]
    if not candidates:
        return scores
    import bm25s  # on first use: the server answers `initialize` before it loads (issue 15)
    from bm25s.tokenization import Tokenized

    ids: dict[str, int] = {}
    corpus = Tokenized(ids=[[ids.setdefault(w, len(ids)) for w in docs[i]] for i in candidates], vocab=ids)
    model = bm25s.BM25()
    model.index(corpus, show_progress=False)
    scores[candidates] = np.asarray(model.get_scores([w for w in query if w in ids]), dtype=np.float32)
    return scores


def _candidate_lines(text: str, query: list[str], starts: list[int]) -> list[int]:
    """Indices of lines that may hold a query word: one regex pass over the lower-cased text.

    A stem's first characters (all but a possible replaced suffix) occur in every word it came
    from, so this is a superset; only these lines are tokenised and scored.
    """
    import bisect

    prefixes = sorted({w[: max(2, len(w) - 1)] for w in query}, key=len, reverse=True)
    rx = re.compile("|".join(re.escape(p) for p in prefixes))
    found: list[int] = []
    last = -1
    for m in rx.finditer(text.lower()):
        i = bisect.bisect_right(starts, m.start()) - 1
        if i != last:
            found.append(i)
            last = i
    return found


def focus(text: str, intent: str, budget: int) -> Focus | None:
    """The output's lines that bear on ``intent`` within ``budget`` tokens; None when nothing matches."""
    query = list(dict.fromkeys(words(intent)))
    if not query or budget <= 0:
        return None
    lines = text.split("\n")
    starts = [0]
    for ln in lines[:-1]:
        starts.append(starts[-1] + len(ln) + 1)
    cand = _candidate_lines(text, query, starts)
    if not cand:
        return None
    docs = {i: words(lines[i][:MAX_LINE_CHARS]) for i in cand}
    keys = list(docs)
    line_scores = dict(zip(keys, _scores([docs[i] for i in keys], query), strict=True))
    spans = sorted({_block_of(lines, i) for i in keys})
    block_docs = [[w for j in range(a, b) for w in docs.get(j) or words(lines[j][:MAX_LINE_CHARS])] for a, b in spans]
    for (a, b), sc in zip(spans, _scores(block_docs, query), strict=True):
        if sc > 0:  # the lines of a matching block share part of its score
            for j in range(a, b):
                line_scores[j] = line_scores.get(j, 0.0) + 0.3 * float(sc)
    top = max(line_scores.values(), default=0.0)
    if top <= 0:
        return None
    # a line scoring under half the best one matched only common words: it would crowd out context
    ranked = sorted((i for i, sc in line_scores.items() if sc >= KEEP_SHARE * top), key=lambda i: (-line_scores[i], i))
    chosen: set[int] = set()
    used = 0
    for k in ranked:
        new = [j for j in (k - 1, k, k + 1) if 0 <= j < len(lines) and j not in chosen]
        cost = sum(estimate_tokens(lines[j][:MAX_LINE_CHARS]) + 2 for j in new) + 3
        if used + cost > budget:
            if used:
                break
            continue
        chosen.update(new)
        used += cost
    if not chosen:
        return None
    runs: list[tuple[int, int]] = []
    for j in sorted(chosen):
        if runs and j == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], j)
        else:
            runs.append((j, j))
    out: list[str] = []
    for a, b in runs:
        out.append(f"L{a + 1}:" if a == b else f"L{a + 1}-{b + 1}:")
        out.extend(lines[j][:MAX_LINE_CHARS] for j in range(a, b + 1))
    return Focus("\n".join(out), [(a + 1, b + 1) for a, b in runs], len(keys), len(lines))


def _block_of(lines: list[str], i: int) -> tuple[int, int]:
    """[start, end) of the block around line ``i``: the non-blank run holding it, at most ``BLOCK_LINES``."""
    a = i
    while a > 0 and i - a < BLOCK_LINES // 2 and lines[a - 1].strip():
        a -= 1
    b = i + 1
    while b < len(lines) and b - a < BLOCK_LINES and lines[b].strip():
        b += 1
    return a, b
