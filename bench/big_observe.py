"""A 100 MB observe over HTTP while other agents keep calling (issue 13): daemon memory and their latency.

    python bench/big_observe.py [--mb 100] [--agents 10] [--baseline-seconds 10] [--via http bridge run] [--out FILE]

One ``bosun serve`` daemon (``BOSUN_MAX_PAYLOAD_BYTES`` raised to fit the payload). ``--agents`` SDK
clients over streamable HTTP loop on bosun's smallest real call (``recall`` of 5 lines by short
ref). First they run alone for ``--baseline-seconds`` (the baseline, same run, same machine); then,
for each ``--via``, one more client sends ``observe(kind="result")`` with a ``--mb`` MB log-like
text while they go on: an SDK client over HTTP, an SDK client through a ``bosun stdio`` bridge
(a keyed call: the bridge adds an idempotency key), or ``bosun run``'s way (the output in a spool
file under BOSUN_HOME, its name posted to ``/v1/observe``). The big call's client runs in a process of its
own, so the time it spends building and sending 100 MB of JSON does not stall the agents' loop
(it did in the first version of this bench, inflating their latency during the call).

Reported per big call: the daemon's RSS (VmRSS from ``/proc/<pid>/status``, sampled every 5 ms by a
thread) before it, its peak while it runs, right after the answer and 5 s later; the rise as a
multiple of the payload (target <= 1.5x); the peak RSS of the daemon's child processes (the offload
worker that scrubs and outlines a huge output); the small calls' p50/p99 alone and while the big
call runs (target p99 <= 250 ms); the big call's own time. The load average is printed with them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
sys.path.insert(0, str(ROOT / "bench"))
from fleet_load import wait_warm  # noqa: E402
from transport_bench import clean_env, stop, wait_daemon  # noqa: E402

REF_TEXT = "".join(f"line {i:03d}: bosun stores large tool output once and recalls only a slice\n" for i in range(60))
MB = 1024 * 1024


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def rss_parts(pid: int) -> str:
    """RssAnon / RssFile / RssShmem of a process, MB (what kind of memory a peak was)."""
    parts = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("RssAnon:", "RssFile:", "RssShmem:")):
            parts[line.split(":")[0][3:].lower()] = int(line.split()[1]) // 1024
    return " / ".join(f"{k} {v}" for k, v in parts.items())


class RssSampler:
    """The peak VmRSS of a process between ``start`` and ``stop`` (a thread reading /proc every 5 ms)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_kb = 0
        self.peak_parts = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            now = rss_kb(self.pid)
            if now > self.peak_kb:
                self.peak_kb = now
                self.peak_parts = rss_parts(self.pid)
            time.sleep(0.005)

    def start(self) -> None:
        self.peak_kb = rss_kb(self.pid)
        self._thread.start()

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.peak_kb, rss_kb(self.pid))


def child_rss_kb(pid: int) -> int:
    """The summed VmRSS of ``pid``'s children (the offload worker during a huge observe)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            try:
                total += rss_kb(int(child))
            except (OSError, ValueError):
                pass
    return total


class ChildSampler(RssSampler):
    """The peak summed RSS of a process's children (sampled like ``RssSampler``)."""

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_kb = max(self.peak_kb, child_rss_kb(self.pid))
            time.sleep(0.005)

    def start(self) -> None:
        self.peak_kb = 0
        self._thread.start()

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak_kb


async def send_big(url: str, home: str, task_id: str, mb: float, via: str) -> dict[str, object]:
    """The big observe, from this (separate) process: over HTTP, or through a ``bosun stdio`` bridge."""
    from mcp import Client, StdioServerParameters

    payload = log_text(int(mb * MB), seed={"http": 13, "bridge": 14, "run": 15}[via])  # each its own blob to store
    if via == "run":  # what bosun run does: the output spooled under BOSUN_HOME, its name posted to /v1/observe
        import urllib.request

        name = f"run-bench-{os.getpid()}.out"
        (Path(home) / "spool").mkdir(mode=0o700, exist_ok=True)
        (Path(home) / "spool" / name).write_text(payload)
        del payload
        body = json.dumps({"spool": name, "command": "cat build.log", "exit_code": 0, "session": "bench"}).encode()
        request = urllib.request.Request(url.rsplit("/", 1)[0] + "/v1/observe", data=body,
                                         headers={"content-type": "application/json"})
        t0 = time.perf_counter()
        with urllib.request.urlopen(request, timeout=900) as response:
            answer = json.loads(response.read())
        return {"error": answer.get("error", ""), "seconds": time.perf_counter() - t0}
    target: object = url
    if via == "bridge":
        target = StdioServerParameters(command=PY, args=["-m", "bosun", "stdio"],
                                       env=clean_env(BOSUN_HOME=home, HOME=os.environ.get("HOME", "/tmp")))
    async with Client(target) as client:  # type: ignore[arg-type]
        t0 = time.perf_counter()
        big = await client.call_tool("observe", {"task_id": task_id, "kind": "result", "tool": "cat",
                                                 "args": {"path": "build.log"}, "result": payload},
                                     read_timeout_seconds=900)
        seconds = time.perf_counter() - t0
    text = big.content[0].text[:200] if big.content else ""  # type: ignore[union-attr]
    return {"error": text if big.is_error else "", "seconds": seconds}


def log_text(size: int, seed: int = 13) -> str:
    """``size`` bytes of build/test-log-like ASCII lines (seeded: the same text every run)."""
    rng = random.Random(seed)
    words = ["worker", "fetch", "parse", "commit", "retry", "cache", "index", "flush", "shard", "merge"]
    lines = []
    for i in range(20_000):
        level = rng.choice(["INFO", "INFO", "INFO", "DEBUG", "WARN"])
        lines.append(f"2026-11-30T12:{i // 60 % 60:02d}:{i % 60:02d}.{rng.randint(0, 999):03d} {level} "
                     f"{rng.choice(words)}-{rng.randint(0, 31)} item={i} took={rng.randint(1, 999)}ms "
                     f"path=/srv/data/{rng.choice(words)}/{rng.randint(0, 9999):04d}.bin status=ok\n")
    block = "".join(lines)
    return (block * (size // len(block) + 1))[:size]


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000


async def big_call(url: str, home: Path, task_id: str, mb: float, via: str) -> dict[str, object]:
    """Run ``send_big`` in a child process; its JSON answer."""
    proc = await asyncio.create_subprocess_exec(
        PY, str(Path(__file__).resolve()), "--send", via, "--url", url, "--home", str(home), "--task", task_id,
        "--mb", str(mb), stdout=asyncio.subprocess.PIPE, cwd=ROOT)
    out, _ = await proc.communicate()
    return dict(json.loads(out.decode().strip().splitlines()[-1]))


async def main(args: argparse.Namespace) -> str:
    from mcp import Client

    size_mb = args.mb
    with tempfile.TemporaryDirectory(prefix="bosun-big-") as tmp:
        home = Path(tmp) / "home"
        env = clean_env(BOSUN_MAX_PAYLOAD_BYTES=str(int(args.mb * MB) + MB))
        with open(Path(tmp) / "daemon.log", "ab") as log:
            proc = subprocess.Popen([PY, "-m", "bosun", "serve", "--port", "0", "--home", str(home)],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, env=env, cwd=ROOT)
        rows: list[str] = []
        try:
            daemon = await wait_daemon(home, proc.pid, ready=True)
            url = str(daemon["url"])
            await wait_warm(url)
            async with Client(url) as setup:
                started = await setup.call_tool("plan", {"mode": "start", "objective": "big observe bench"})
                tid = started.structured_content["task_id"]
                stored = await setup.call_tool("observe", {"task_id": tid, "kind": "result", "tool": "cat",
                                                           "result": REF_TEXT * 6})
                short = stored.structured_content["ref"]
            calls: list[tuple[float, float]] = []  # (start, end) of every small call, perf_counter
            window = {"done": False}
            errors: list[str] = []
            warm = asyncio.Semaphore(0)

            async def agent() -> None:
                async with Client(url) as client:
                    for _ in range(3):  # warm-up calls (session set-up, first-call costs) are not counted
                        await client.call_tool("recall", {"ref": short, "op": "head", "lines": 5})
                    warm.release()
                    while not window["done"]:
                        t0 = time.perf_counter()
                        result = await client.call_tool("recall", {"ref": short, "op": "head", "lines": 5})
                        calls.append((t0, time.perf_counter()))
                        if result.is_error:
                            errors.append(result.content[0].text[:80] if result.content else "error")

            agents = [asyncio.create_task(agent()) for _ in range(args.agents)]
            for _ in agents:
                await warm.acquire()
            calls.clear()
            t_base = time.perf_counter()
            await asyncio.sleep(args.baseline_seconds)
            baseline = [end - start for start, end in calls if start >= t_base]
            rows += ["| small calls alone (baseline, same run) | n, p50, p99 ms | "
                     f"{len(baseline)}, {statistics.median(baseline) * 1000:.1f}, {pct(baseline, 0.99):.1f} |"]
            for via in args.via:
                before_kb = rss_kb(proc.pid)
                sampler, children = RssSampler(proc.pid), ChildSampler(proc.pid)
                sampler.start()
                children.start()
                t0 = time.perf_counter()
                big = await big_call(url, str(home), tid, args.mb, via)
                t1 = time.perf_counter()
                peak_kb = sampler.stop()
                worker_kb = children.stop()
                after_kb = rss_kb(proc.pid)
                await asyncio.sleep(5)
                later_kb = rss_kb(proc.pid)
                during = [end - start for start, end in calls if start < t1 and end > t0]
                rise_mb = (peak_kb - before_kb) / 1024
                rows += [
                    f"| {via}: big observe answered | | {'error: ' + str(big['error']) if big['error'] else 'ok'} "
                    f"in {t1 - t0:.1f} s |",
                    f"| {via}: daemon RSS | before / peak / after / 5 s later MB | {before_kb / 1024:.0f} / "
                    f"{peak_kb / 1024:.0f} / {after_kb / 1024:.0f} / {later_kb / 1024:.0f} |",
                    f"| {via}: peak daemon RSS rise | MB, x payload (target <= 1.5x) | {rise_mb:.0f} MB = "
                    f"{rise_mb / size_mb:.2f}x (at the peak: {sampler.peak_parts or rss_parts(proc.pid)} MB) |",
                    f"| {via}: offload worker peak RSS | MB, x payload (a child process, freed when it exits; "
                    f"target <= 1.5x) | {worker_kb / 1024:.0f} MB = {worker_kb / 1024 / size_mb:.2f}x |",
                    f"| {via}: small calls during the big observe | n, p50, p99, max ms (target p99 <= 250) | "
                    f"{len(during)}, {(statistics.median(during) * 1000) if during else float('nan'):.1f}, "
                    f"{pct(during, 0.99):.1f}, {(max(during) * 1000) if during else float('nan'):.1f} |",
                ]
            window["done"] = True
            await asyncio.gather(*agents)
        finally:
            stop(proc)
    load = os.getloadavg()
    head = [
        f"big_observe: {size_mb:.0f} MB observe ({', '.join(args.via)}), {args.agents} agents on small recalls; "
        f"{os.cpu_count()} CPUs, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end",
        "",
        "| measure | unit | value |",
        "|---|---|---|",
    ]
    rows.append(f"| small-call errors | | {len(errors)}{': ' + errors[0] if errors else ''} |")
    tables = head + rows
    if args.worker_rounds:
        tables += ["", *worker_alone(args.mb, args.worker_rounds)]
    return "\n".join(tables) + "\n"


WORKER_WAYS = {  # name: (window_above, refs table layout)
    "windowed outline, data last (now)": (None, "data_last"),
    "windowed outline, created_at last (the old refs layout)": (None, "created_at_last"),
    "whole text, data last": (1 << 40, "data_last"),
    "whole text, created_at last (before this round)": (1 << 40, "created_at_last"),
}
_REFS = {"data_last": "CREATE TABLE refs (sha256 TEXT PRIMARY KEY, media_type TEXT NOT NULL, size INTEGER NOT NULL, "
                      "created_at REAL NOT NULL, data BLOB NOT NULL)",
         "created_at_last": "CREATE TABLE refs (sha256 TEXT PRIMARY KEY, media_type TEXT NOT NULL, size INTEGER NOT "
                            "NULL, data BLOB NOT NULL, created_at REAL NOT NULL)"}


def worker_alone(mb: float, rounds: int) -> list[str]:
    """The offload worker on its own (``python -m bosun.server.offload_worker``): the same log scrubbed, stored
    in SQLite and shaped from windows (now), from windows into the old refs layout, from the whole text,
    and from the whole text into the old layout (the worker before this round); rounds alternate the ways. Peak RSS is the child's own
    ``VmHWM`` (exact, not sampled)."""
    import sqlite3

    results: dict[str, list[tuple[float, float, str]]] = {name: [] for name in WORKER_WAYS}
    with tempfile.TemporaryDirectory(prefix="bosun-worker-") as tmp:
        src = Path(tmp) / "build.log"
        src.write_text(log_text(int(mb * MB)))
        for _ in range(rounds):
            for name, (above, layout) in WORKER_WAYS.items():
                db = Path(tmp) / "refs.db"
                for suffix in ("", "-wal", "-shm"):
                    Path(str(db) + suffix).unlink(missing_ok=True)
                with sqlite3.connect(db) as conn:
                    conn.execute("PRAGMA journal_mode=WAL")
                    conn.execute(_REFS[layout])
                conn.close()
                request: dict[str, object] = {"sources": [{"path": str(src)}], "out": str(Path(tmp) / "scrubbed"),
                                              "sqlite_db": str(db), "media_type": "text/plain"}
                if above is not None:
                    request["window_above"] = above
                t0 = time.perf_counter()
                done = subprocess.run([PY, "-m", "bosun.server.offload_worker"], input=json.dumps(request).encode(),
                                      capture_output=True, cwd=ROOT, check=False)
                seconds = time.perf_counter() - t0
                ok = json.loads(done.stdout)["ok"]
                results[name].append((ok["peak_rss_kb"] / 1024, seconds, str(ok["shaped"]["answer"]["outline"])))
    outlines = {r[2] for runs in results.values() for r in runs}
    load = os.getloadavg()
    lines = [f"offload worker alone, {mb:.0f} MB log (scrub, SQLite put, shape), {rounds} rounds alternated, "
             f"load average {load[0]:.1f} at the end; the same stub every way: {'yes' if len(outlines) == 1 else 'NO'}",
             "", "| worker | peak RSS MB (median) | x payload | seconds (median) |", "|---|---:|---:|---:|"]
    for name, runs in results.items():
        peak = statistics.median(r[0] for r in runs)
        lines.append(f"| {name} | {peak:.0f} | {peak / mb:.2f}x | {statistics.median(r[1] for r in runs):.1f} |")
    return lines


DATA = Path("/work/shared/data/trajectories")


def real_texts(n: int, size: int, seed: int) -> dict[str, list[str]]:
    """Huge outputs made of real tool outputs (third-party agent runs, /work/shared/data): a coding agent's
    bash outputs of whole runs in order ("session"), tau-bench API results one per line ("jsonl") and
    as one JSON list ("json document"); ``n`` texts of ``size`` characters per family, seeded."""
    import gzip

    def runs(name: str) -> list[list[str]]:
        with gzip.open(DATA / name, "rt") as fh:
            rows = [json.loads(line) for line in fh]
        return [[c["output"] for c in r["calls"] if c.get("output")] for r in rows]

    swe, tau = runs("miniswe-dev.jsonl.gz"), runs("tau-airline.jsonl.gz")
    api = []
    for outputs in tau:
        for out in outputs:
            try:
                api.append(json.loads(out))
            except ValueError:
                continue
    rng = random.Random(seed)
    families: dict[str, list[str]] = {"session": [], "jsonl": [], "json document": []}
    for _ in range(n):
        parts: list[str] = []
        total = 0
        while total < size:
            parts.append("\n".join(rng.choice(swe)) + "\n")
            total += len(parts[-1])
        families["session"].append("".join(parts))
        lines = []
        total = 0
        while total < size:
            lines.append(json.dumps(rng.choice(api)) + "\n")
            total += len(lines[-1])
        families["jsonl"].append("".join(lines))
        families["json document"].append(json.dumps([json.loads(line) for line in lines], indent=rng.choice([None, 2])))
    return families


def equal_on_real(n: int, seed: int) -> list[str]:
    """The worker's answer from windows against the whole text's, on huge outputs made of real tool outputs
    (``real_texts``): how many are equal in everything (digest, sizes, tokens, lines, kind, outline, hints,
    stub, failure signature), per family and kind, for a plain and a failed observe."""
    from bosun.server.offload_worker import observe_files

    rows = ["| family | observe | texts | equal | kinds (whole path) | windowed kind = whole kind | whole outline's lines "
            "also in the windowed one |", "|---|---|---:|---:|---|---:|---:|"]
    with tempfile.TemporaryDirectory(prefix="bosun-equal-") as tmp:
        src = Path(tmp) / "src"
        for family, texts in real_texts(n, 1_300_000, seed).items():
            for failed in (False, True):
                equal = same_kind = 0
                kinds: dict[str, int] = {}
                shared: list[float] = []
                for text in texts:
                    src.write_text(text)
                    got = [observe_files({"sources": [{"path": str(src)}], "out": str(Path(tmp) / "out"),
                                          "window_above": above, "failed": failed, "command": "bash"})
                           for above in (0, 1 << 40)]
                    windowed, whole = got
                    keys = ("digest", "nbytes", "tokens", "lines", "redactions", "shaped")
                    equal += all(windowed[k] == whole[k] for k in keys) and windowed["windowed"]
                    kind = str(whole["shaped"]["outline_kind"])
                    kinds[kind] = kinds.get(kind, 0) + 1
                    same_kind += windowed["shaped"]["outline_kind"] == kind
                    mine = set(str(windowed["shaped"]["answer"].get("outline", "")).splitlines())
                    theirs = str(whole["shaped"]["answer"].get("outline", "")).splitlines()
                    shared.append(sum(line in mine for line in theirs) / max(1, len(theirs)))
                shown = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
                rows.append(f"| {family} | {'failed' if failed else 'result'} | {len(texts)} | {equal} | {shown} | "
                            f"{same_kind} | {statistics.mean(shared):.0%} |")
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=100.0, help="payload size in MiB (<= 200)")
    parser.add_argument("--agents", type=int, default=10, help="agents making small calls meanwhile (<= 50)")
    parser.add_argument("--baseline-seconds", type=float, default=10.0)
    parser.add_argument("--via", nargs="+", choices=("http", "bridge", "run"), default=["http", "bridge", "run"],
                        help="how the big call is sent, each in turn in one run: an SDK client over HTTP, one "
                             "through a bosun stdio bridge, or bosun run's spool file posted to /v1/observe")
    parser.add_argument("--worker-rounds", type=int, default=2,
                        help="then run the offload worker alone, windowed vs whole text, this many rounds (0: skip)")
    parser.add_argument("--out", type=Path, default=None, help="append the table to this file")
    parser.add_argument("--send", choices=("http", "bridge", "run"), help=argparse.SUPPRESS)  # the big call's own process
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--home", help=argparse.SUPPRESS)
    parser.add_argument("--task", help=argparse.SUPPRESS)
    parser.add_argument("--equal", type=int, default=0, metavar="N",
                        help="only compare the windowed worker's answers with the whole text's on N huge outputs per "
                             "family made of real tool outputs (/work/shared/data/trajectories), and exit")
    parser.add_argument("--seed", type=int, default=0, help="for --equal")
    ns = parser.parse_args()
    if ns.equal:
        print("\n".join([f"windowed vs whole-text worker answers, {ns.equal} texts of ~1.3 M characters per family, "
                         f"seed {ns.seed}", "", *equal_on_real(min(ns.equal, 50), ns.seed)]))
        sys.exit(0)
    if ns.send:
        print(json.dumps(asyncio.run(send_big(ns.url, ns.home, ns.task, ns.mb, ns.send))))
        sys.exit(0)
    if ns.mb > 200 or ns.agents > 50 or ns.baseline_seconds > 60 or ns.worker_rounds > 5:
        parser.error("keep runs bounded: --mb <= 200, --agents <= 50, --baseline-seconds <= 60, --worker-rounds <= 5 "
                     "(the machine is shared)")
    report = asyncio.run(main(ns))
    print(report)
    if ns.out is not None:
        with open(ns.out, "a") as fh:
            fh.write(report + "\n")
