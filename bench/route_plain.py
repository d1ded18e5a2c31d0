"""Plainly worded, low-word-overlap prompts on the repo's two policy corpora: is routing driven to abstain?

The outside engineering-policy corpus failed on abstentions: plainly worded questions whose policy
exists routed nothing. The repo's labelled sets mostly reuse their trigger line's words, so they
cannot show it. These prompts were written once, before any run, each avoiding the words of its
policy's trigger line and title (as a person asks, not as the author wrote), plus everyday and
generic-coding negatives. They are a regression check only (written here, and scored after every
change, never tuned on).

    python bench/route_plain.py [--no-adapter]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from route_common import BenchEmbedder, embed_cached, load_model, policy_corpus
from route_dev import HEADER, evaluate, summary

from bosun.core.routing.route import build_index_with, clause_texts

DEMO = [
    ("Give the new contractor the ability to read the customer tables", ["access-control"]),
    ("Can my bot account get owner permissions on the org?", ["access-control"]),
    ("I want to rename a field in the JSON our partners consume", ["api-versioning"]),
    ("Is it okay to remove the v1 orders route next week?", ["api-versioning"]),
    ("Spin up a bigger machine for the analytics job", ["cloud-costs"]),
    ("Our AWS bill doubled last month, what should we do?", ["cloud-costs"]),
    ("Can someone approve my change so I can land it?", ["code-review"]),
    ("What should I put in the description of my PR?", ["code-review"]),
    ("A user wants everything we hold about them wiped", ["data-retention"]),
    ("How long do we keep old order records around?", ["data-retention"]),
    ("Rename the created column on the users table", ["database-migrations"]),
    ("Populate the new status field for all existing rows", ["database-migrations"]),
    ("Bump lodash to the latest major", ["dependency-management"]),
    ("Can I pull in a library from npm to parse dates?", ["dependency-management"]),
    ("Can we ship the hotfix on December 27th?", ["production-deploys"]),  # the freeze policy is superseded
    ("Make the signup dialog usable without a mouse", ["frontend-accessibility"]),
    ("Is light grey text on white readable enough for the settings page?", ["frontend-accessibility"]),
    ("I messed up my last three commits, can I squash them and overwrite the remote?", ["git-history"]),
    ("Remove the old release-2023 tag from the repository", ["git-history"]),
    ("The site is down for everyone, what do I do first?", ["incident-response"]),
    ("Checkout latency tripled in the last ten minutes", ["incident-response"]),
    ("Print the request body so I can debug the signup bug", ["logging-and-pii"]),
    ("Is it fine to write the customer's email address to stdout?", ["logging-and-pii"]),
    ("I want a page to fire when p99 latency goes above 2 seconds", ["observability"]),
    ("How do I see where the time goes across our microservices?", ["observability"]),
    ("Push the new build of the payments service live", ["production-deploys"]),
    ("Send the release to 5% of users first and watch it", ["production-deploys"]),
    ("Where should I keep the Stripe key for the billing service?", ["secrets-handling"]),
    ("I accidentally committed my AWS access key to GitHub", ["secrets-handling"]),
    ("This check fails randomly on CI about one run in ten", ["testing-standards"]),
    ("Can I comment out the failing spec to get the build green?", ["testing-standards"]),
]

HELDOUT = [
    ("I need root on the payments box for an hour to debug", ["access-requests"]),
    ("Maria left the company on Friday, close out her logins", ["access-requests"]),
    ("A big customer keeps getting too many requests errors, can we let them send more?", ["api-rate-limits"]),
    ("How many calls per minute should the public search endpoint allow?", ["api-rate-limits"]),
    ("Finance wants to know which team is paying for these S3 buckets", ["cost-tagging"]),
    ("Who owns these three EC2 machines with no labels?", ["cost-tagging"]),
    ("Our partner wants a spreadsheet of all their users' orders", ["customer-data-exports"]),
    ("A customer asked for a copy of everything we store about her", ["customer-data-exports"]),
    ("Can I paste this snippet I found on Stack Overflow into our codebase?", ["dependency-licences"]),
    ("Are we allowed to ship a library that is copyleft?", ["dependency-licences"]),
    ("Let's hide the new dashboard so only internal staff see it for now", ["feature-flags"]),
    ("Delete the old toggle for the legacy checkout now that everyone has the new one", ["feature-flags"]),
    ("Yesterday's outage is over, now we need to write up what went wrong", ["incident-postmortems"]),
    ("Who should be blamed for the database going down last night?", ["incident-postmortems"]),
    ("How many users can the booking service handle before it falls over?", ["load-testing"]),
    ("Hammer the staging API with a million requests to see what breaks", ["load-testing"]),
    ("The new recommendation classifier beats the old one, can we switch it on?", ["ml-model-releases"]),
    ("Where did the examples we fine-tuned the ranker on come from?", ["ml-model-releases"]),
    ("Get version 4.2 of the iPhone app out to customers", ["mobile-releases"]),
    ("Should we stop supporting Android 8 users?", ["mobile-releases"]),
    ("I'm off sick tomorrow, who covers the night alerts?", ["oncall-handoff"]),
    ("Who do I call if the person carrying the phone doesn't pick up?", ["oncall-handoff"]),
    ("Send a receipt to every buyer after they pay", ["transactional-email"]),
    ("Lots of our welcome messages are landing in spam", ["transactional-email"]),
    ("Can we start using Notion for team docs?", ["vendor-onboarding"]),
    ("Is it okay to upload our user list to a new analytics startup?", ["vendor-onboarding"]),
]

NEGATIVES = [
    "What's a good recipe for banana bread?",
    "Explain how TCP handshakes work",
    "Write a haiku about autumn leaves",
    "How do I convert a list of strings to integers in Python?",
    "What is the capital of Australia?",
    "Recommend a book about the history of Rome",
    "Why is my sourdough not rising?",
    "What does the yield keyword do in Python?",
]


def labelled(name: str) -> list[dict[str, object]]:
    rows = DEMO if name == "demo" else HELDOUT
    out: list[dict[str, object]] = [{"query": p, "relevant": rel, "kind": "plain"} for p, rel in rows]
    out += [{"query": p, "relevant": [], "kind": "negative"} for p in NEGATIVES]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-adapter", action="store_true")
    args = ap.parse_args()
    emb = load_model()
    lines = [HEADER]
    for name in ("demo", "heldout"):
        pols, _ = policy_corpus(name)
        names = {p.name for p in pols}
        qs = labelled(name)
        missing = {r for q in qs for r in q["relevant"]} - names  # type: ignore[attr-defined]
        assert not missing, missing
        index = build_index_with(pols, BenchEmbedder(emb), adapter=not args.no_adapter)
        texts = list(dict.fromkeys(str(q["query"]) for q in qs))
        texts += [c for c in dict.fromkeys(c for t in texts for c in clause_texts(t)) if c not in texts]
        vecs = dict(zip(texts, embed_cached(emb, texts), strict=True))
        lines += summary(name, evaluate(index, qs, vecs, clause_vecs=vecs))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
