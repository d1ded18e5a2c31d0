"""Claim extraction: split an answer into sentences and keep the factual ones.

A sentence is a claim when it asserts something a source could confirm or
refute. Questions, headings, greetings, offers of help, advice addressed to the
reader and first-person opinions are not claims. The ``regex`` extractor keeps
every sentence (dokis's legacy splitter); ``claimify`` (the default) applies
the selection rules below. Precision/recall on a labelled set of answer
sentences is in bench/results/audit.md.

Also here: the tokenizer the matcher and the consistency checks share, so the
same word means the same token everywhere. Tokens are lower-cased Unicode
words with a light English suffix stripper; runs of CJK characters become
character bigrams so languages without spaces still match lexically.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from functools import lru_cache

from bosun.core.text import STOPWORDS, stem

# -- sentence splitting --------------------------------------------------------------------

_ABBREV = {
    "e.g", "i.e", "etc", "vs", "dr", "mr", "mrs", "ms", "prof", "st", "no", "fig", "al", "approx",
    "inc", "ltd", "co", "corp", "jr", "sr", "u.s", "u.k", "u.n", "e.u", "jan", "feb", "mar", "apr",
    "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "mt", "ft", "vol", "pp", "ca", "cf",
    "dept", "est", "gen", "gov", "lt", "col", "sgt", "rev", "ph.d", "m.d", "b.c", "a.d", "p.m", "a.m",
}
_BOUNDARY = re.compile(r"([.!?。！？]+[\"')\]”’]*)(\s+|$)|\n\s*\n|\n(?=\s*(?:[-*•]|\d+[.)])\s)")
_LAST_WORD = re.compile(r"([\w.]+)$")
_CITATION = re.compile(r"\s*\[(?:\d+(?:\s*[,–-]\s*\d+)*|[a-z]?\d+)\](?:\s*\[\d+\])*")
_CJK = re.compile("[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_LIST_MARK = re.compile(r"^\s*(?:[-*•]+|\d+[.)]|[a-z][.)])\s+")


@dataclass(frozen=True)
class Sentence:
    """A sentence and its character span in the text it came from."""

    text: str
    start: int
    end: int


def split_sentences(text: str) -> list[Sentence]:
    """Sentences with offsets; abbreviations, initials and decimals do not end one."""
    out: list[Sentence] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        if m.group(1):
            before = text[max(start, m.start(1) - 40) : m.start(1)]  # the last word only: flat cost
            last = _LAST_WORD.search(before)
            word = last.group(1).lower() if last else ""
            if m.group(1) == "." and (word in _ABBREV or (len(word) == 1 and word.isalpha())):
                continue
            if m.group(1) == "." and m.end() < len(text) and text[m.end()].islower():
                continue
            end = m.end(1)
        else:
            end = m.start()
        _emit(text, start, end, out)
        start = m.end()
    _emit(text, start, len(text), out)
    return out


def _emit(text: str, start: int, end: int, out: list[Sentence]) -> None:
    piece = text[start:end]
    lead = len(piece) - len(piece.lstrip())
    piece = piece.strip()
    if not piece:
        return
    s = start + lead
    for offset, line in _lines(piece):
        out.append(Sentence(line, s + offset, s + offset + len(line)))


def _lines(piece: str) -> list[tuple[int, str]]:
    """A heading line followed by text on the next line is two units, not one."""
    if "\n" not in piece:
        return [(0, piece)]
    parts: list[tuple[int, str]] = []
    pos = 0
    for raw in piece.split("\n"):
        stripped = raw.strip()
        if stripped:
            parts.append((pos + raw.index(stripped[0]), stripped))
        pos += len(raw) + 1
    merged: list[tuple[int, str]] = []
    for offset, line in parts:
        if merged and not _looks_complete(merged[-1][1]) and not _LIST_MARK.match(line) and not line.endswith(":"):
            prev_off, prev = merged[-1]
            if not prev.endswith(":") and not _LIST_MARK.match(prev):
                merged[-1] = (prev_off, piece[prev_off : offset + len(line)])
                continue
        merged.append((offset, line))
    return merged


def _looks_complete(line: str) -> bool:
    return line.endswith((".", "!", "?", ":", "。")) or len(line.split()) <= 6


def strip_citations(text: str) -> str:
    """Remove inline citation markers like ``[1]`` or ``[2][3]``."""
    return _CITATION.sub("", text).strip()


# -- claim selection -----------------------------------------------------------------------

_NON_CLAIM_START = re.compile(
    r"^(?:sure|certainly|of course|absolutely|great question|good question|thanks|thank you|hello|hi|hey|"
    r"i hope|hope this|let me|let's|let us|feel free|please|i'?m happy|i am happy|i'?d be happy|"
    r"here (?:is|are)|below (?:is|are)|as an ai|i'?m not sure|i don'?t know|i cannot|i can'?t|"
    r"in (?:summary|conclusion|short),?$|to (?:summarize|sum up),?$|overall,?$|"
    r"you (?:should|could|might|may|can|must|need|will want|'ll want)|you'?d|make sure|be sure|remember|"
    r"don'?t forget|note that you|consider|try|consult|ask|check|talk to|seek|avoid|keep in mind|"
    r"if you (?:have|need|want|are|would)|do you|would you)\b",
    re.IGNORECASE,
)
_CHATTER = re.compile(
    r"^(?:good luck|hope|happy|enjoy|now,? let'?s|it'?s worth|(?:step|option|tip|note) \d+\b|"
    r"(?:that'?s|this is|it'?s) (?:a |an )?(?:really |very )?(?:interesting|great|good|complex|broad|tricky)\b)"
    r"|\b(?:it|that|this) (?:all )?depends\b|\bnot (?:medical|legal|financial|professional) advice\b"
    r"|^(?:in (?:summary|conclusion|short)|overall|to sum up),? (?:it|this|that|the answer)\b",
    re.IGNORECASE,
)
_OPINION = re.compile(
    r"\b(?:i think|i believe|i feel|in my (?:opinion|view|experience)|i would|i'd recommend|i recommend|"
    r"we recommend|i suggest|personally|my favou?rite|i love|i like)\b",
    re.IGNORECASE,
)
_IMPERATIVE = {
    "add", "apply", "avoid", "be", "call", "choose", "click", "consider", "consult", "contact", "do",
    "don't", "drink", "eat", "ensure", "follow", "get", "go", "keep", "limit", "make", "open", "read",
    "remember", "run", "see", "seek", "select", "set", "start", "stop", "take", "talk", "try", "use",
    "visit", "wash", "watch", "write", "install", "type", "enter", "restart", "rest", "store", "check",
}
_VERBISH = re.compile(
    r"\b(?:is|are|was|were|be|been|being|has|have|had|do|does|did|can|could|will|would|shall|should|"
    r"may|might|must|[a-z]{2,}(?:ed|es|s))\b|\d",
    re.IGNORECASE,
)


def is_factual_claim(sentence: str) -> bool:
    """The claimify-style selection rule: does this sentence assert a checkable fact?"""
    text = _LIST_MARK.sub("", strip_citations(sentence)).strip()
    words = text.split()
    cjk = len(_CJK.findall(text))
    if len(words) + cjk // 2 < 3:
        return False
    if text.endswith("?") or text.endswith(":") or text.startswith(("#", "|", "```")):
        return False
    if _NON_CLAIM_START.match(text) or _OPINION.search(text) or _CHATTER.search(text):
        return False
    first = words[0].lower().strip(",.;:\"'")
    if first in _IMPERATIVE:
        return False
    if not text.endswith((".", "!", "。", ")", '"', "”")) and len(words) <= 6 and not cjk and not _VERBISH.search(text):
        return False  # a heading or a fragment
    if len(words) >= 8 or (len(words) >= 5 and text.endswith((".", "!"))):
        return True
    return bool(_VERBISH.search(" ".join(words[1:])) or bool(cjk))


@dataclass(frozen=True)
class ExtractedClaim:
    """A claim, its span in the response, and its text with citation markers removed."""

    text: str
    start: int
    end: int
    clean: str


def extract_claims(response: str, extractor: str = "claimify") -> list[ExtractedClaim]:
    """Claims of a response, in order. ``regex`` keeps every sentence."""
    out: list[ExtractedClaim] = []
    for sent in split_sentences(response):
        clean = _LIST_MARK.sub("", strip_citations(sent.text)).strip()
        if not clean or not any(ch.isalnum() for ch in clean):
            continue
        if extractor == "claimify" and not is_factual_claim(sent.text):
            continue
        out.append(ExtractedClaim(sent.text, sent.start, sent.end, clean))
    return out


# -- tokens --------------------------------------------------------------------------------

# Negation and quantifier words are content for the consistency checks, but they are
# stop-words for overlap scoring so "not X" still finds the passage about X.
FUNCTION_CONTENT = frozenset(
    ["not", "no", "never", "none", "nor", "neither", "n't", "cannot", "all", "every", "some", "most", "many", "few", "several", "any", "only", "always", "sometimes", "often", "usually", "rarely", "seldom"]
)
_WORD = re.compile(r"\w+(?:[.,]\d+)*", re.UNICODE)


def _is_cjk(ch: str) -> bool:
    code = ord(ch)
    return 0x3040 <= code <= 0x30FF or 0x3400 <= code <= 0x9FFF or 0xAC00 <= code <= 0xD7AF or 0xF900 <= code <= 0xFAFF


_PREFIX_HYPHEN = re.compile(r"\b(non|anti|un|in|dis|pre|post|co|multi|self|re|over|under)-(?=[a-z])")


def words(text: str) -> list[str]:
    """Lower-cased word tokens (numbers keep their separators), CJK as character bigrams.

    A hyphenated prefix joins its word ("non-steroidal" -> "nonsteroidal"), so both spellings match.
    """
    low = _PREFIX_HYPHEN.sub(r"\1", text.lower())
    if not _CJK.search(low):
        return _WORD.findall(low)
    out: list[str] = []
    for m in _WORD.finditer(low):
        token = m.group(0)
        if any(_is_cjk(ch) for ch in token):
            chars = [ch for ch in token if not ch.isspace()]
            out.extend(a + b for a, b in itertools.pairwise(chars)) if len(chars) > 1 else out.extend(chars)
        else:
            out.append(token)
    return out


def content_tokens(text: str) -> list[str]:
    """Stemmed content tokens for overlap scoring (stop-words and negations removed)."""
    return list(_content_tokens(text))


@lru_cache(maxsize=32_768)
def _content_tokens(text: str) -> tuple[str, ...]:
    out: list[str] = []
    for w in words(text):
        if w in STOPWORDS or w in FUNCTION_CONTENT or (len(w) == 1 and not w.isdigit()):
            continue
        out.append(stem(w.replace(",", "")) if not w[0].isdigit() else w.replace(",", ""))
    return tuple(out)
