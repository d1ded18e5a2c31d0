"""Words for the lexical scorers: one stemmer and one list of function words.

Routing, the audit and selection all compare texts by their content words; they share
this light suffix stripper (plural, -ing, -ed, -ly, -ment, -ation) so that "deploy",
"deploying" and "deployment" meet in every wing. A wing adds its own stop words on top
(routing: prompt filler; the audit keeps negations and quantifiers as content).
"""

from __future__ import annotations

from functools import lru_cache

STOPWORDS: frozenset[str] = frozenset(
    ["a", "an", "the", "and", "or", "but", "if", "then", "than", "so", "of", "in", "on", "at", "to", "for", "from", "by", "with", "as", "into", "onto", "over", "under", "about", "above", "below", "between", "among", "through", "during", "before", "after", "since", "until", "while", "is", "are", "was", "were", "be", "been", "being", "am", "do", "does", "did", "doing", "has", "have", "had", "having", "this", "that", "these", "those", "it", "its", "it's", "they", "them", "their", "there", "here", "he", "she", "him", "her", "his", "hers", "we", "us", "our", "you", "your", "i", "me", "my", "mine", "who", "whom", "whose", "which", "what", "when", "where", "why", "how", "also", "just", "very", "too", "can", "could", "will", "would", "shall", "should", "may", "might", "must", "such", "same", "other", "another", "each", "both", "either", "via", "per", "upon", "within", "without", "against", "toward", "towards", "s", "t", "one", "ones", "include", "includes", "including", "included"]
)


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """A light suffix stripper: plural, -ing, -ed, -ly, -ies; enough to align word forms."""
    w = word
    if len(w) <= 3 or w.isdigit():
        return w
    for suffix, repl, min_len in (
        ("ies", "y", 5), ("sses", "ss", 5), ("ness", "", 7), ("ments", "", 8), ("ment", "", 7),
        ("ingly", "", 8), ("edly", "", 7), ("ing", "", 6), ("ations", "ate", 8), ("ation", "ate", 7),
        ("ed", "", 5), ("ly", "", 6), ("es", "", 6), ("s", "", 4),
    ):
        if w.endswith(suffix) and len(w) >= min_len and not (suffix == "s" and w.endswith(("ss", "us", "is"))):
            w = w[: len(w) - len(suffix)] + repl
            break
    if len(w) >= 4 and w[-1] == w[-2] and w[-1] not in "lsz" and w != word:
        w = w[:-1]  # stopp(ed) -> stop
    if len(w) > 4 and w.endswith("e"):
        w = w[:-1]  # inhibite / inhibit, relate / relat
    return w
