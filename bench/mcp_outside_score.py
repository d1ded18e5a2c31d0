"""Score bosun the way the outside scorers do: the real server over MCP (stdio, standalone), shipped
defaults, a fresh ``BOSUN_HOME``, aggregate numbers only (no per-item output, so an unseen set stays unseen).

    python bench/mcp_outside_score.py route bench/corpora/policies-haulwise-holdout2
    python bench/mcp_outside_score.py audit bench/labels/blind_probes_holdout2.jsonl

``route DIR``: ``DIR/policies`` is served with ``--policies``; each line of ``DIR/prompts.jsonl``
(``{"prompt", "expected": [names]}``) is one ``route`` call, scored with the metrics of ``bosun eval route
score`` (``core/routing/metrics.compute``: recall@2 over all expected names, top-1, false alarms on prompts
with ``expected: []``). It also counts answers that came while the index was still building.

``audit FILE``: each probe (``{"kind", "evidence": [...], "claim", "label"}``) is one ``audit`` call,
the claim as the response and one chunk per evidence passage; a claim counts as accepted only when every
extracted claim is ``supported`` (``partially_supported`` is not).

The in-process equivalents are ``bosun eval route score`` and ``bench/audit_blind_probes.py``; this one
also covers what only the served path does (the daemon's index build, the prompt adapter, the transport).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from bosun.core.routing.metrics import compute, parse_labelled


def _server(extra: list[str]) -> StdioServerParameters:
    env = dict(os.environ, BOSUN_HOME=tempfile.mkdtemp(prefix="bosun-outside-"))
    return StdioServerParameters(command=sys.executable, args=["-m", "bosun", "stdio", "--standalone", *extra],
                                 env=env)


def _data(res: Any) -> dict[str, Any]:
    if res.is_error:
        raise SystemExit(f"the call failed: {res.content[0].text if res.content else res}")
    out = res.structured_content if res.structured_content is not None else json.loads(res.content[0].text)
    return dict(out)


async def score_route(corpus: Path) -> str:
    rows = parse_labelled((corpus / "prompts.jsonl").read_text(encoding="utf-8").splitlines())
    routed: list[list[str]] = []
    building = 0
    async with Client(_server(["--policies", str(corpus / "policies")])) as client:
        for row in rows:
            data = _data(await client.call_tool("route", {"prompt": row.prompt}))
            routed.append([h["name"] for h in data.get("hits", [])])
            building += any(n.startswith("index building") for n in data.get("notices", []))
    m = compute(rows, routed)
    return (f"{corpus.name} over MCP: recall@2 {m['recall_at_2']:.3f}, top-1 {m['top1']:.3f}, false alarms "
            f"{int(m['false_alarms'])}/{int(m['negatives'])}; answered while the index was building: {building}")


async def score_audit(path: Path) -> str:
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    async with Client(_server([])) as client:
        for probe in rows:
            chunks = [{"content": s, "source_url": "https://example.org/source"} for s in probe["evidence"]]
            data = _data(await client.call_tool("audit", {"response": probe["claim"], "chunks": chunks}))
            claims = data.get("claims", [])
            accepted = bool(claims) and all(c.get("verdict") == "supported" for c in claims)
            side = "faithful" if probe["label"] == "supported" else "changed"
            total[side] += 1
            right[side] += accepted == (side == "faithful")
    return (f"{path.name} over MCP: changed claims rejected {right['changed']} of {total['changed']}; "
            f"faithful claims accepted {right['faithful']} of {total['faithful']}")


def main() -> None:
    if len(sys.argv) != 3 or sys.argv[1] not in ("route", "audit"):
        raise SystemExit(__doc__)
    target = Path(sys.argv[2])
    print(anyio.run(score_route if sys.argv[1] == "route" else score_audit, target))


if __name__ == "__main__":
    main()
