"""Drive a real daemon with real agent traffic, then photograph the dashboard and time its JSON.

A ``bosun serve --port 0`` on a temp home (the real embedded model); the first ``--runs`` mini-swe-agent
trajectories of the shared dev set (file order, none picked by outcome) are replayed through MCP the way
a harness following bosun would: ``plan(start)``, then per call ``precheck`` (with the last seal) and
``observe`` of the real output, and a drop receipt for each offloaded result two calls later. A few
plain developer prompts are routed (traffic for the routing panel, not a quality measurement), the
first ``--audits`` ExpertQA dev claims that cite evidence are audited against it, and one task hands a
sub-task to a second agent. Then headless chromium (Playwright, /usr/bin/chromium) opens /dashboard:

- ``bench/results/dashboard.png``: the whole page (the bench artifact);
- ``docs/dashboard-overview.png`` and ``docs/dashboard-routing.png``: the two README screenshots;
- ``bench/results/dashboard.md``: the median latency of ``/dashboard/api/stats`` against ``/healthz``
  measured in the same run (the baseline), and the figures the page showed.

Run: ``.venv/bin/python bench/dashboard_screenshots.py`` (a minute or two; the policy index builds first; `--runs 20` for the scale figures).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("BOSUN_SHARED_DATA", "/work/shared/data"))
CHROMIUM = os.environ.get("BOSUN_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
DEFAULT_RUNS = 6  # the README's screenshots; another --runs writes dashboard_runs<N>.md/.png beside them
PROMPTS = [  # everyday requests, written before looking at any routing result; traffic only
    "deploy the billing service to production tonight",
    "rotate the leaked AWS key in the CI config",
    "add a migration that drops the legacy users column",
    "write release notes for version 2.4",
    "why is the p99 latency of the API so high since Monday",
    "refactor the date parser and add tests",
    "make the signup form usable with a screen reader",
    "what is a good name for a cat",
    "bump the requests dependency to the latest version",
    "squash my last three commits before the review",
    "how long do we keep request logs with user emails",
    "someone pushed to main during the freeze, what now",
]


def get(url: str, timeout: float = 30) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def start_daemon(home: Path) -> tuple[subprocess.Popen[bytes], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOSUN_")}
    env["BOSUN_HOME"] = str(home)
    proc = subprocess.Popen([sys.executable, "-m", "bosun", "serve", "--port", "0", "--home", str(home)], env=env,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            url = json.loads((home / "daemon.json").read_text())["url"]
            base = url.rsplit("/mcp", 1)[0]
            if get(base + "/healthz")[0] == 200:
                return proc, url
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("the daemon did not become ready")


def sc(result: Any) -> dict[str, Any]:
    if result.is_error:
        return {"error": result.content[0].text}
    return dict(result.structured_content or {})


async def replay(url: str, runs: int, audits: int) -> dict[str, int]:
    from mcp import Client

    counts = {"calls": 0, "offloaded": 0, "dropped": 0, "routes": 0, "audits": 0}
    trajectories = []
    with gzip.open(DATA / "trajectories" / "miniswe-dev.jsonl.gz", "rt") as fh:
        for line in fh:
            trajectories.append(json.loads(line))
            if len(trajectories) >= runs:
                break
    async with Client(url) as client:
        for n, run in enumerate(trajectories):
            agent = "mini-swe-agent"
            start = sc(await client.call_tool("plan", {
                "mode": "start", "objective": f"Resolve SWE-bench issue {run['traj_id']}", "agent": agent,
                "budget_tokens": 40_000, "steps": ["reproduce", "fix", "run the tests"]}))
            if "task_id" not in start:
                raise SystemExit(f"plan(start) failed: {start}")
            tid, seal = start["task_id"], start["seal"]
            waiting: list[tuple[int, str]] = []
            for i, call in enumerate(run["calls"][:60]):
                pre = sc(await client.call_tool("precheck", {"task_id": tid, "tool": call["tool"], "args": call["args"],
                                                            "seal": seal}))
                seal = str((pre.get("drift") or {}).get("seal") or seal) if isinstance(pre.get("drift"), dict) else seal
                output = (call.get("output") or "") or "(no output)"
                kind = "failure" if call.get("error") else "result"
                obs = sc(await client.call_tool("observe", {"task_id": tid, "kind": kind, "tool": call["tool"],
                                                           "args": call["args"], "result": output, "agent": agent}))
                counts["calls"] += 1
                if obs.get("offloaded"):
                    counts["offloaded"] += 1
                    waiting.append((i, obs["ref"]))
                for j, ref in list(waiting):
                    if i - j >= 2:  # the harness evicts the payload two turns later and says so
                        sc(await client.call_tool("observe", {"task_id": tid, "kind": "dropped", "result": ref}))
                        counts["dropped"] += 1
                        waiting.remove((j, ref))
            if n == 0:
                created = sc(await client.call_tool("handoff", {
                    "task_id": tid, "mode": "create", "objective": "run the full test suite and report failures",
                    "to_agent": "test-runner", "checks": [{"field": "failed", "op": "equals", "value": 0}]}))
                hid = created.get("handoff_id")
                if not hid:
                    print(f"handoff create failed: {created}", file=sys.stderr)
                else:
                    await client.call_tool("handoff", {"task_id": tid, "mode": "accept", "handoff_id": hid,
                                                       "agent": "test-runner"})
                    await client.call_tool("handoff", {"task_id": tid, "mode": "complete", "handoff_id": hid,
                                                       "agent": "test-runner", "result": {"failed": 0}})
        for prompt in PROMPTS:
            await client.call_tool("route", {"prompt": prompt})
            counts["routes"] += 1
        with gzip.open(DATA / "claims" / "expertqa-dev.jsonl.gz", "rt") as fh:
            for line in fh:
                row = json.loads(line)
                evidence = [e for e in row.get("evidence") or [] if e.get("text")]
                if not evidence:
                    continue
                chunks = [{"content": e["text"][:4000], "source_url": e.get("url") or f"doc:{k}"}
                          for k, e in enumerate(evidence)]
                await client.call_tool("audit", {"query": row["question"], "chunks": chunks, "response": row["claim"]})
                counts["audits"] += 1
                if counts["audits"] >= audits:
                    break
    return counts


def timed(url: str, reps: int) -> float:
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        status, _ = get(url)
        samples.append((time.perf_counter() - t0) * 1000)
        assert status == 200, (url, status)
    return statistics.median(samples)


async def photograph(base: str, out: Path, docs: Path, suffix: str) -> dict[str, str]:
    from playwright.async_api import async_playwright

    profile = tempfile.mkdtemp(prefix="bosun-chromium-")
    try:
        async with async_playwright() as pw:
            ctx = await pw.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True,
                                                              args=FLAGS, viewport={"width": 1440, "height": 1000},
                                                              device_scale_factor=1)
            page = await ctx.new_page()
            await page.goto(base + "/dashboard")
            await page.wait_for_function("() => document.querySelectorAll('#tasks tbody tr').length > 0",
                                         timeout=120_000)
            await page.wait_for_function("() => document.querySelector('#live').classList.contains('on')",
                                         timeout=120_000)
            if not suffix:  # the README's screenshots come from the default run
                await page.screenshot(path=str(docs / "dashboard-overview.png"))  # the top of the page, as opened
            await page.locator("#refs tbody tr").first.click()
            await page.wait_for_function("() => document.querySelector('#outline').textContent.includes('lines')",
                                         timeout=120_000)
            await page.screenshot(path=str(out / f"dashboard{suffix}.png"), full_page=True)
            # page coordinates (a bounding box is relative to the scrolled viewport)
            top = await page.evaluate("() => document.getElementById('refs').closest('section')"
                                      ".getBoundingClientRect().top + window.scrollY - 16")
            if not suffix:
                await page.screenshot(path=str(docs / "dashboard-routing.png"), full_page=True,
                                      clip={"x": 0, "y": top, "width": 1440, "height": 900})
            shown = {k: await page.inner_text(f"#kpi-{k} .value") for k in
                     ("net", "offloaded", "credited", "routed", "blocked", "audits")}
            await ctx.close()
            return shown
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS, help=f"trajectories replayed (default {DEFAULT_RUNS})")
    parser.add_argument("--audits", type=int, default=8, help="ExpertQA claims audited (default 8)")
    parser.add_argument("--reps", type=int, default=30, help="timed requests per endpoint (default 30)")
    args = parser.parse_args()
    out, docs = ROOT / "bench" / "results", ROOT / "docs"
    suffix = "" if args.runs == DEFAULT_RUNS else f"_runs{args.runs}"
    home = Path(tempfile.mkdtemp(prefix="bosun-dash-"))
    proc, url = start_daemon(home)
    base = url.rsplit("/mcp", 1)[0]
    try:
        counts = asyncio.run(replay(url, args.runs, args.audits))
        t0 = time.perf_counter()
        assert get(base + "/dashboard/api/stats")[0] == 200  # cold: every journal folded for the first time
        cold_ms = (time.perf_counter() - t0) * 1000
        stats_ms = timed(base + "/dashboard/api/stats", args.reps)
        health_ms = timed(base + "/healthz", args.reps)
        snap = json.loads(get(base + "/dashboard/api/stats")[1])
        shown = asyncio.run(photograph(base, out, docs, suffix))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        shutil.rmtree(home, ignore_errors=True)
    events = snap["telemetry"]["events"]
    lines = [
        f"# Dashboard bench (`.venv/bin/python bench/dashboard_screenshots.py{' --runs ' + str(args.runs) if suffix else ''}`)",
        "",
        f"Replayed {args.runs} mini-swe-agent dev trajectories ({counts['calls']} calls, {counts['offloaded']} offloaded, "
        f"{counts['dropped']} drop receipts), {counts['routes']} routes, {counts['audits']} ExpertQA audits; "
        f"{len(snap['tasks'])} tasks, {events} telemetry events.", "",
        "| endpoint | median ms |", "|---|---:|",
        f"| `/healthz` (baseline, same run) | {health_ms:.2f} |",
        f"| `/dashboard/api/stats`, first request (folds every journal) | {cold_ms:.2f} (one sample) |",
        f"| `/dashboard/api/stats`, warm (journals unchanged) | {stats_ms:.2f} |",
        f"| ratio warm / baseline | {stats_ms / health_ms:.1f}x |", "",
        "What the page showed (KPI cards): " + ", ".join(f"{k} {v}" for k, v in shown.items()), "",
        f"Screenshots: `bench/results/dashboard{suffix}.png` (whole page)"
        + ("" if suffix else ", `docs/dashboard-overview.png`, `docs/dashboard-routing.png`") + ".",
    ]
    (out / f"dashboard{suffix}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
