"""Cold start: a fresh BOSUN_HOME, the first route after `initialize`, and the full cold build.

For each corpus (the demo corpus, the 13-policy held-out corpus) in a fresh state directory (so no
text is cached), it measures, over MCP (in-memory client):

* ``first route s``: from the end of ``initialize`` to the first ``route`` answer (model load,
  surface embedding and the index build included; the body text may still be embedding);
* ``full build s``: from ``initialize`` until ``index_state()`` reports ready (every text embedded);
* ``model load s``: the embedding model's load, which the first route waits for;
* what the first answer said (hits, and the "index building, N of M" notice when it came early).

Each corpus runs in a fresh process, so each pays the imports of a cold daemon (the first corpus of one
process would otherwise pay them for both). The demo corpus's texts ship with their vectors; the
13-policy corpus is a corpus the package has never seen, so all of its texts are embedded.

    python bench/route_cold.py [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mcp import Client
from route_common import REPO

from bosun.server.app import create_server
from bosun.server.config import Config
from bosun.server.engine import Engine
from bosun.server.services.policies import PolicyService

PROMPT = "Ship version 2.4.1 of the billing service to prod"


async def cold(name: str, corpus: list[Path], home: Path) -> None:
    engine = Engine(Config(home=home, policies=corpus))
    server = create_server(engine)
    async with Client(server) as client:
        t0 = time.perf_counter()
        res = await client.call_tool("route", {"prompt": PROMPT})
        first = time.perf_counter() - t0
        out = res.structured_content or {}
        svc: PolicyService = engine.policies
        while svc.index_state()["state"] not in ("ready", "failed"):
            await asyncio.sleep(0.05)
        full = time.perf_counter() - t0
        state = svc.index_state()
        building = [n for n in out.get("notices", []) if n.startswith("index building")]
        load = engine.model_load_seconds or 0.0
        print(f"| {name} | {state['documents']} | {state['total']} | {state['background']} | {load:.2f} | {first:.2f} "
              f"| {full:.2f} "
              f"| {[h['name'] for h in out.get('hits', [])]} | {building[0] if building else '-'} |", flush=True)


CORPORA: dict[str, list[Path]] = {"demo": [], "heldout (13)": [REPO / "examples" / "policies-heldout"]}


async def one(name: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        await cold(name, CORPORA[name], Path(tmp) / "home")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--only", choices=list(CORPORA), help=argparse.SUPPRESS)  # one corpus in this process
    args = ap.parse_args()
    if args.only:
        asyncio.run(one(args.only))
        return 0
    print("| corpus | documents | texts embedded | background vectors | model load s | first route s | full build s "
          "| first hits | notice |")
    print("|---|---:|---:|---|---:|---:|---:|---|---|")
    for _ in range(args.rounds):
        for name in CORPORA:
            subprocess.run([sys.executable, __file__, "--only", name], check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
