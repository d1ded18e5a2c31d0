"""SIGTERM to exit: how long `bosun serve` takes to stop, at any moment of its life.

    python bench/shutdown_bench.py [--rounds 3] [--load] [--out bench/results/shutdown.md]

Each round starts `bosun serve` on a fresh BOSUN_HOME whose policy corpus is MetaTool's 199
tool descriptions (so the first corpus build, embedding every document with the real model,
takes seconds), and sends SIGTERM at a chosen moment: while the model loads, during the first
corpus build, once the index is ready, while 8 clients call tools in a loop, and right after
10 MiB of outputs were observed (a large WAL left to checkpoint; its size is reported). It measures
SIGTERM -> process exit (wall clock) and checks the exit code and that daemon.json is gone.
``--moments large_wal`` runs only the named moments.
``--load`` runs a busy loop on one core beside it (the CI machine is busy). Target: < 3 s.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_io import read_jsonl, shared_dir

MOMENTS = ("model_loading", "first_corpus_build", "index_ready", "under_calls", "large_wal")
WAL_MB = 10  # the size that took 1.6 s to stop in a user's report


def write_corpus(root: Path) -> Path:
    """MetaTool's tool descriptions as one markdown policy each (name + description as trigger)."""
    corpus = root / "corpus"
    corpus.mkdir()
    for row in read_jsonl(shared_dir() / "data" / "routing" / "metatool-docs.jsonl"):
        name = "".join(ch if ch.isalnum() else "-" for ch in row["doc_id"]).strip("-").lower() or "tool"
        (corpus / f"{name}.md").write_text(f"# {row['doc_id']}\n\n**Agent-trigger:** {row['text']}\n\n{row['text']}\n")
    return corpus


def health(url: str) -> dict:
    try:
        with urllib.request.urlopen(url.rsplit("/mcp", 1)[0] + "/healthz", timeout=5) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return json.loads(exc.read() or b"{}")
    except OSError:
        return {}


def wait_for(predicate, timeout: float = 120.0, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False


def calls(url: str, stop: threading.Event) -> None:
    """One client calling recall (a missing ref: store read + error path) until told to stop."""
    import anyio
    from mcp import Client

    async def loop() -> None:
        try:
            async with Client(url) as client:
                while not stop.is_set():
                    await client.call_tool("recall", {"ref": "mem://sha256:" + "0" * 64})
        except Exception:
            return  # the daemon went away: expected

    anyio.run(loop)


def observe_megabytes(url: str, megabytes: int) -> None:
    """``megabytes`` distinct 1 MiB outputs observed into one task: the WAL grows by about as much."""
    import anyio
    from mcp import Client

    async def one(client: Client, task: str) -> None:
        lines = "\n".join(f"{i:06d} {os.urandom(24).hex()}" for i in range(1 << 20 >> 6))
        await client.call_tool("observe", {"task_id": task, "kind": "result", "tool": "bash", "result": lines})

    async def fill() -> None:  # all at once, as a burst: no pause for the store to checkpoint in
        async with Client(url) as client:
            started = await client.call_tool("plan", {"mode": "start", "objective": "fill the WAL"})
            task = (started.structured_content or {})["task_id"]
            async with anyio.create_task_group() as tg:
                for _ in range(megabytes):
                    tg.start_soon(one, client, task)

    anyio.run(fill)


def wal_mb(home: Path) -> float:
    try:
        return (home / "bosun.db-wal").stat().st_size / (1 << 20)
    except OSError:
        return 0.0


def one_round(moment: str, corpus: Path) -> dict:
    home = Path(tempfile.mkdtemp(prefix="bosun-shutdown-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOSUN_")}
    env.update(BOSUN_HOME=str(home), BOSUN_POLICIES=str(corpus))
    proc = subprocess.Popen([sys.executable, "-P", "-m", "bosun", "serve", "--port", "0"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stop = threading.Event()
    workers: list[threading.Thread] = []
    try:
        assert wait_for(lambda: (home / "daemon.json").exists()), "daemon.json never appeared"
        url = json.loads((home / "daemon.json").read_text())["url"]
        state = {}
        if moment == "model_loading":
            state = health(url)
        elif moment == "first_corpus_build":
            wait_for(lambda: health(url).get("route_index", {}).get("state") == "building")
            wait_for(lambda: health(url).get("route_index", {}).get("done", 0) > 0, timeout=30)
            state = health(url)
        elif moment in ("index_ready", "under_calls"):
            wait_for(lambda: health(url).get("route_index", {}).get("state") == "ready", timeout=300)
            if moment == "under_calls":
                workers = [threading.Thread(target=calls, args=(url, stop), daemon=True) for _ in range(8)]
                for w in workers:
                    w.start()
                time.sleep(1.0)
            state = health(url)
        elif moment == "large_wal":
            wait_for(lambda: health(url).get("route_index", {}).get("state") == "ready", timeout=300)
            observe_megabytes(url, WAL_MB)
            state = health(url)
        wal = wal_mb(home)
        t0 = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
        seconds = time.perf_counter() - t0
    finally:
        stop.set()
        if proc.poll() is None:
            proc.kill()
    index = state.get("route_index", {})
    return {"moment": moment, "seconds": seconds, "exit": code, "daemon_file_left": (home / "daemon.json").exists(),
            "wal_mb": round(wal, 1),
            "model": state.get("model", {}).get("state"), "index": f"{index.get('state')} {index.get('done')}/{index.get('total')}"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--load", action="store_true", help="keep one core busy beside the daemon")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--moments", nargs="+", choices=MOMENTS, default=list(MOMENTS))
    args = ap.parse_args()
    corpus = write_corpus(Path(tempfile.mkdtemp(prefix="bosun-shutdown-corpus-")))
    burner = subprocess.Popen(["sh", "-c", "while :; do :; done"]) if args.load else None
    rows = []
    try:
        for _ in range(args.rounds):
            for moment in args.moments:
                row = one_round(moment, corpus)
                rows.append(row)
                print(json.dumps(row), file=sys.stderr)
    finally:
        if burner is not None:
            burner.kill()
    lines = [f"SIGTERM -> exit of `bosun serve` ({args.rounds} rounds{', one core busy' if args.load else ''}; "
             "`python bench/shutdown_bench.py`)", "",
             "| moment | median s | max s | exit codes | daemon.json left | WAL when signalled | "
             "state when signalled (last round) |",
             "|---|---:|---:|---|---|---:|---|"]
    for moment in args.moments:
        mine = [r for r in rows if r["moment"] == moment]
        secs = [r["seconds"] for r in mine]
        lines.append(f"| {moment} | {statistics.median(secs):.2f} | {max(secs):.2f} | "
                     f"{sorted({r['exit'] for r in mine})} | {sum(r['daemon_file_left'] for r in mine)} | "
                     f"{max(r['wal_mb'] for r in mine):.1f} MB | "
                     f"model {mine[-1]['model']}, index {mine[-1]['index']} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with args.out.open("a") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
