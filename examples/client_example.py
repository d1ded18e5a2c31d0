"""bosun as a library: pick the context for a question, then audit an answer against it.

    python examples/client_example.py            # the running daemon (daemon.json), else `bosun stdio`
    python examples/client_example.py http://127.0.0.1:8790/mcp

tests/test_client.py runs ``main`` against an in-process daemon.
"""

from __future__ import annotations

import sys
from typing import Any

from bosun.client import Bosun

PASSAGES = [
    {"id": "retry", "text": "The payment service retries failed card charges three times with exponential backoff.",
     "source": "https://docs.example.com/payments/retries"},
    {"id": "timeout", "text": "Card charges time out after 30 seconds; a timed-out charge is retried like a failure.",
     "source": "https://docs.example.com/payments/timeouts"},
    {"id": "lunch", "text": "The office canteen serves lunch from noon until two.",
     "source": "https://intranet.example.com/canteen"},
]


def main(b: Bosun) -> dict[str, Any]:
    """Select context for a question, then check an answer built from it."""
    question = "How does the payment service handle a failed or timed-out card charge?"
    picked = b.select_context(question, PASSAGES, budget_tokens=60)
    chosen = [p for p in PASSAGES if p["id"] in {s["id"] for s in picked["selected"]}]
    answer = "Failed card charges are retried three times with exponential backoff."
    report = b.audit(answer, [{"content": p["text"], "source_url": p["source"]} for p in chosen], query=question)
    return {"selected": [s["id"] for s in picked["selected"]], "passed": report["passed"],
            "counts": report["counts"]}


if __name__ == "__main__":
    with Bosun(sys.argv[1] if len(sys.argv) > 1 else None) as client:
        print(main(client))
