"""Speed of the offload path, against baselines measured in the same run.

1. observe of a 1 MB tool output vs (sha256 + one store put) of the same bytes (target: within 2x),
   paired call by call, each side in its own store;
2. recall(grep) over a 1 MB stored payload, hash verification included (target: <= 5 ms quiet, issue 15);
3. ``bosun verify`` of a task with 1,000 refs (target: < 1 s).

The 1 MB payload is real agent output (miniswe-dev trajectories, concatenated). Medians of
repeated runs; the machine is shared, so ratios within one run are what to read.

    python bench/offload_speed.py [--repeat 41] [--paced 40 --pause 0.25] [--out FILE]

observe hands the bytes to the blob writer's thread (hash + insert) and builds the outline
meanwhile, so its wall-clock time is what the agent waits; the CPU-time row shows the work
summed over threads.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import hashlib
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bosun.core.embedding import HashEmbedder
from bosun.core.offload.query import run_query
from bosun.server.commands.verify import verify_task
from bosun.server.config import Config
from bosun.server.engine import Engine

SHARED = Path(os.environ.get("BOSUN_SHARED", Path(__file__).resolve().parents[1].parent / "shared"))
DATA = SHARED / "data" / "trajectories" / "miniswe-dev.jsonl.gz"


def payload(size: int = 1_000_000) -> str:
    parts: list[str] = []
    total = 0
    with gzip.open(DATA, "rt") as fh:
        for line in fh:
            for c in json.loads(line)["calls"]:
                out = c.get("output") or ""
                parts.append(out)
                total += len(out)
                if total >= size:
                    text = "\n".join(parts)
                    return text[: text.rfind("\n", 0, size) + 1]
    raise RuntimeError("not enough data")


def real_outputs(min_bytes: int = 1024) -> list[str]:
    """Every tool output of the trajectories (miniswe-dev, tau-airline) over ``min_bytes``: what observe
    really sees (one is 868 KB, 557 more are over 4 KB, most are a few KB)."""
    out: list[str] = []
    for path in sorted(DATA.parent.glob("*.jsonl.gz")):
        with gzip.open(path, "rt") as fh:
            for line in fh:
                for c in json.loads(line)["calls"]:
                    o = c.get("output")
                    if isinstance(o, str) and len(o.encode()) > min_bytes:
                        out.append(o)
    return out


def real_stages(redactor: Any, passes: int = 3) -> dict[str, float]:
    """CPU time (ms, this thread) of observe's two text stages summed over ``real_outputs()``, each the
    minimum of ``passes``: redaction (as observe calls it) and measuring (lines, tokens, kind, outline)."""
    from bosun.core.offload import outline as outline_mod
    from bosun.core.offload.offload import get_mode
    from bosun.server.services import observe_shape

    needles = getattr(outline_mod, "OUTLINE_LITERALS", None)
    outputs = real_outputs()
    best = {"redact": [float("inf")] * len(outputs), "measure": [float("inf")] * len(outputs)}
    mode = get_mode("cache_ttl")
    for _ in range(passes):
        for j, text in enumerate(outputs):
            raw = text.encode()
            c0 = time.thread_time()
            found = None
            if needles is not None:
                data, red, found = redactor.redact_bytes_finding(raw, needles if len(raw) > 16_384 else ())
            else:
                data, red = redactor.redact_bytes(raw)
            c1 = time.thread_time()
            extra = {"found": found} if found is not None and len(raw) > 16_384 else {}
            observe_shape.measure(text if not red else data.decode("utf-8", "replace"), data, red, mode,
                                  "cat out.log", None, False, **extra)
            c2 = time.thread_time()
            best["redact"][j] = min(best["redact"][j], c1 - c0)
            best["measure"][j] = min(best["measure"][j], c2 - c1)
    return {"outputs": len(outputs), **{k: sum(v) * 1000 for k, v in best.items()}}


def ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1000:.2f} ms"


def old_redactor(rev: str) -> Any:
    """A ``Redactor`` of ``core/redact.py`` at ``rev`` (read with ``git show``, loaded under a private name)."""
    import subprocess
    import sys
    import types

    src = subprocess.run(["git", "show", f"{rev}:core/redact.py"], cwd=Path(__file__).resolve().parents[1],
                         capture_output=True, text=True, check=True).stdout
    mod = types.ModuleType("_redact_at_" + rev)
    sys.modules[mod.__name__] = mod  # (dataclasses look their module up)
    exec(compile(src, f"{rev}:core/redact.py", "exec"), mod.__dict__)
    return mod.Redactor()


async def ab_redactor(rev: str, rounds: int) -> None:
    """observe of the 1 MB payload with ``rev``'s redactor and with this checkout's, and the baseline, in
    one process, each on its own store, in alternating order every round: medians of wall and CPU time."""
    def engine(prefix: str) -> Engine:
        return Engine(Config(home=Path(tempfile.mkdtemp(prefix=prefix)), policies=[]),
                      embedder_factory=lambda _c: HashEmbedder(8))

    engines = {"baseline": engine("bosun-ab-base-"), rev: engine("bosun-ab-old-"), "this checkout": engine("bosun-ab-new-")}
    for e in engines.values():
        await e.open(watch_policies=False)
    engines[rev].observe.redactor = old_redactor(rev)
    tids = {k: (await e.tasks.start(objective="ab")).task_id for k, e in engines.items() if k != "baseline"}
    text = payload()
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in engines}
    for i in range(rounds):
        for k in (list(engines) if i % 2 else list(engines)[::-1]):
            variant = text + f"\n{k} {i}\n"  # fresh bytes each time: no INSERT OR IGNORE shortcut
            c0, t0 = time.process_time(), time.perf_counter()
            if k == "baseline":
                data = variant.encode()
                hashlib.sha256(data).hexdigest()
                await engines[k].refs.put(data)
            else:
                assert (await engines[k].observe.observe_output(tids[k], False, "bash", {"command": "cat big.log"},
                                                                variant))["offloaded"]
            times[k].append((time.perf_counter() - t0, time.process_time() - c0))
    for e in engines.values():
        await e.close()
    base_w = statistics.median(w for w, _ in times["baseline"])
    base_c = statistics.median(c for _, c in times["baseline"])
    print(f"| 1 MB, {rounds} interleaved rounds | wall median | vs baseline | CPU median (all threads) | vs baseline |")
    print("|---|---:|---:|---:|---:|")
    for k, xs in times.items():
        w, c = statistics.median(w for w, _ in xs), statistics.median(c for _, c in xs)
        print(f"| {'sha256 + one store put' if k == 'baseline' else 'observe, redaction of ' + k} | "
              f"{w * 1000:.2f} ms | {w / base_w:.2f}x | {c * 1000:.2f} ms | {c / base_c:.2f}x |")
    load = os.getloadavg()
    print(f"\nload average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}")


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=41)
    ap.add_argument("--out", default="")
    ap.add_argument("--paced", type=int, default=40, help="observes with a pause before each (0: skip)")
    ap.add_argument("--pause", type=float, default=0.25, help="seconds between paced observes")
    ap.add_argument("--ab", default="", metavar="REV",
                    help="only the interleaved A/B: observe with REV's core/redact.py against this checkout's "
                         "and the baseline, --repeat rounds (redaction is the stage that differs)")
    args = ap.parse_args()
    if args.ab:
        await ab_redactor(args.ab, args.repeat)
        return
    home = Path(tempfile.mkdtemp(prefix="bosun-speed-"))
    engine = Engine(Config(home=home, policies=[]), embedder_factory=lambda _c: HashEmbedder(8))
    await engine.open(watch_policies=False)  # observe never routes: no index build competing for the CPU
    # the baseline's puts go to a store of their own: in one database, each side's megabyte
    # would also grow the other's WAL and double how often either stalls on a checkpoint
    base_engine = Engine(Config(home=Path(tempfile.mkdtemp(prefix="bosun-base-")), policies=[]),
                         embedder_factory=lambda _c: HashEmbedder(8))
    await base_engine.open(watch_policies=False)
    svc = engine.observe
    tasks = engine.tasks
    tid = (await tasks.start(objective="speed")).task_id
    text = payload()
    size = len(text.encode())
    base: list[float] = []
    obs: list[float] = []
    base_cpu: list[float] = []
    obs_cpu: list[float] = []
    for i in range(args.repeat):
        variant = text + f"\nrun {i}\n"  # fresh bytes each time: no INSERT OR IGNORE shortcut
        c0, t0 = time.process_time(), time.perf_counter()
        data = variant.encode()
        hashlib.sha256(data).hexdigest()
        await base_engine.refs.put(data)
        base.append(time.perf_counter() - t0)
        base_cpu.append(time.process_time() - c0)
        variant = text + f"\nobserve {i}\n"
        c0, t0 = time.process_time(), time.perf_counter()
        ans = await svc.observe_output(tid, False, "bash", {"command": "cat big.log"}, variant)
        obs.append(time.perf_counter() - t0)
        obs_cpu.append(time.process_time() - c0)
        assert ans["offloaded"]
    ratio = statistics.median(obs) / statistics.median(base)
    cpu_ratio = statistics.median(obs_cpu) / statistics.median(base_cpu)

    # where observe's time goes (each stage alone, same bytes)
    from bosun.core.offload import outline as outline_mod
    from bosun.core.offload.offload import fast_tokens, get_mode
    from bosun.core.offload.outline import Utf8Text, build_outline

    stages: dict[str, list[float]] = {"redact (16 secret shapes; finds the outline's needles too)": [],
                                      "token estimate (sampled)": [], "outline (kind detection + builder)": [],
                                      "journal append": []}
    needles = getattr(outline_mod, "OUTLINE_LITERALS", None)
    for i in range(args.repeat):
        staged = text + f"\nstage {i}\n"
        raw = staged.encode()
        found = None
        t0 = time.perf_counter()  # as observe does it (the code before round 7: redaction alone)
        if needles is not None:
            found = svc.redactor.redact_bytes_finding(raw, needles)[2]
        else:
            svc.redactor.redact_bytes(raw)
        stages["redact (16 secret shapes; finds the outline's needles too)"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        tok = fast_tokens(staged)
        stages["token estimate (sampled)"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()  # as observe does: the searches run on the (unredacted) bytes
        utf8 = Utf8Text.of(staged, raw, found) if found is not None else Utf8Text.of(staged, raw)
        build_outline(staged, get_mode("cache_ttl").outline_budget(tok), utf8=utf8)
        stages["outline (kind detection + builder)"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        await tasks.append(tid, "state_flag", {"name": "bench", "value": i})
        stages["journal append"].append(time.perf_counter() - t0)

    real = real_stages(svc.redactor)

    # paced like an agent's calls: a pause before each observe (SQLite's checkpoints then run in
    # the pauses, on the blob writer's second thread, not inside a call)
    paced: list[float] = []
    for i in range(args.paced):
        await asyncio.sleep(args.pause)
        t0 = time.perf_counter()
        await svc.observe_output(tid, False, "bash", {"command": "cat big.log"}, text + f"\npaced {i}\n")
        paced.append(time.perf_counter() - t0)
    paced.sort()

    # recall(grep) over the stored MB: fetch + verify + scan + bound
    ref = ans["ref"]
    grep: list[float] = []
    grep_cpu: list[float] = []
    scan_only: list[float] = []
    for _ in range(args.repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        blob = await engine.refs.get(await svc.resolver.resolve(ref))
        res = run_query(blob, "grep", pattern=r"^FAILED|Traceback", max_matches=20)
        grep.append(time.perf_counter() - t0)
        grep_cpu.append(time.process_time() - c0)
        t0 = time.perf_counter()
        run_query(blob, "grep", pattern=r"^FAILED|Traceback", max_matches=20)
        scan_only.append(time.perf_counter() - t0)

    # verify of 1,000 refs
    vt = (await tasks.start(objective="verify speed")).task_id
    for i in range(1000):
        await svc.observe_output(vt, False, "bash", {"command": f"echo {i}"}, f"output number {i}\n" * 3)
    await engine.close()
    await base_engine.close()
    ver: list[float] = []
    for _ in range(5):
        t0 = time.perf_counter()
        code, out = await verify_task(home / "bosun.db", vt)
        ver.append(time.perf_counter() - t0)
        assert code == 0 and out["items_verified"] == 1000, out

    lines = [
        "# Offload speed",
        "",
        f"Command: `python bench/offload_speed.py --repeat {args.repeat}` (payload: {size:,} bytes of real agent output)",
        "",
        "| measure | median | target | verdict |",
        "|---|---:|---|---|",
        f"| sha256 + one store put (baseline, same run) | {ms(base)} | | |",
        f"| observe (redact, hash, store, outline, stub, journal) | {ms(obs)} | within 2x of baseline | "
        f"{ratio:.2f}x {'PASS' if ratio <= 2 else 'MISS'} |",
        f"| CPU time, all threads: baseline / observe | {ms(base_cpu)} / {ms(obs_cpu)} | within 2x | "
        f"{cpu_ratio:.2f}x {'PASS' if cpu_ratio <= 2 else 'MISS'} |",
        *([f"| observe paced {args.pause} s apart ({args.paced} calls): median / p90 / max | {ms(paced)} / "
           f"{paced[int(0.9 * len(paced))] * 1000:.2f} ms / {paced[-1] * 1000:.2f} ms | | |"] if paced else []),
        f"| recall grep over 1 MB (fetch + sha256 verify + scan) | {ms(grep)} | <= 5 ms | "
        f"{'PASS' if statistics.median(grep) <= 0.005 else 'MISS'} |",
        f"| recall grep, CPU time all threads (what a loaded machine cannot inflate as much) | {ms(grep_cpu)} | | |",
        f"| grep scan alone (run_query on bytes in memory) | {ms(scan_only)} | | |",
        *[f"| observe stage: {name} | {ms(xs)} | | |" for name, xs in stages.items()],
        f"| real outputs over 1 KB ({real['outputs']:,}, both trajectory sets): redaction CPU, summed | "
        f"{real['redact']:.1f} ms | | |",
        f"| real outputs over 1 KB: measuring CPU (lines, tokens, kind, outline), summed | {real['measure']:.1f} ms | | |",
        f"| bosun verify, 1,000 refs (read-only open, re-hash each) | {ms(ver)} | < 1 s | "
        f"{'PASS' if statistics.median(ver) < 1 else 'MISS'} |",
        "",
        f"grep found {res.extra['matches']} matching lines in {res.total_lines:,} lines.",
    ]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        Path(args.out).write_text(report)


if __name__ == "__main__":
    asyncio.run(main())
