"""Transport latency and start-up of the bosun daemon, against a no-op baseline served the same way.

    python bench/transport_bench.py [-n 400] [--warmup 40] [--starts 5] [--out bench/results/foundation.md]

Measured in one run on this machine, all through the SDK's own ``Client``:

* start-up: process start to ``initialize`` answered (legacy handshake, what most hosts send) and
  to model ready (``GET /healthz`` turns 200), for ``bosun serve --stdio``, ``bosun serve`` (HTTP),
  ``bosun stdio`` starting a daemon (cold) and attaching to a running one (warm); a no-op server
  started the same way is the floor.
* round trips: a small ``recall`` (head of a stored 4 KB ref) over stdio, over HTTP and through the
  ``bosun stdio`` bridge, and a no-op tool on each of the same three transports. The no-op server
  is an ``MCPServer`` with one tool, served by bosun's own ``serve()`` (same uvicorn settings, same
  stdio runner, same daemon file, so the bridge can attach to it). All six clients stay connected
  and are called round-robin, so machine noise hits every row alike. Both wire eras are run.

Targets (issue 2): recall within 1.3x of the no-op on the same transport; the bridge adds < 2 ms.
The ``noop-server`` subcommand is the baseline server itself (the bench spawns it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve()
PY = sys.executable
REF_TEXT = "".join(f"line {i:03d}: bosun stores large tool output once and recalls only a slice\n" for i in range(60))
RECALL_ARGS: dict[str, Any] = {"op": "head", "lines": 5}


# -- the baseline server ------------------------------------------------------------------------
def noop_server(home: Path, stdio: bool) -> None:
    """An MCPServer with one no-op tool, served by bosun's own ``serve()`` on a free port."""
    import anyio
    from mcp.server import MCPServer
    from starlette.requests import Request
    from starlette.responses import JSONResponse

    import bosun.server.transport.serve as serve_mod
    from bosun.server.config import Config

    mcp: MCPServer[Any] = MCPServer("noop", log_level="WARNING")

    @mcp.tool()
    def noop() -> str:
        """Do nothing (latency floor)."""
        return "ok"

    @mcp.custom_route("/healthz", methods=["GET"])
    async def healthz(_: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    serve_mod.create_server = lambda engine=None: mcp  # type: ignore[assignment,misc]
    config = Config(home=home)
    config.host, config.port, config.token = "127.0.0.1", 0, None
    anyio.run(lambda: serve_mod.serve(config, http=True, stdio=stdio))


# -- helpers ------------------------------------------------------------------------------------
def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOSUN_")}
    env.update(extra)
    return env


def read_daemon(home: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((home / "daemon.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def health(url: str) -> int:
    """HTTP status of the daemon's /healthz, 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url.removesuffix("/mcp") + "/healthz", timeout=2) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


async def wait_for(predicate: Callable[[], bool], timeout: float = 120.0, step: float = 0.01) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("timed out waiting for the server")
        await asyncio.sleep(step)


async def wait_daemon(home: Path, pid: int | None = None, ready: bool = False) -> dict[str, Any]:
    """The daemon file of ``home`` once its server answers (200 if ``ready``)."""
    found: dict[str, Any] = {}

    def ok() -> bool:
        data = read_daemon(home)
        if not data or (pid is not None and data.get("pid") != pid):
            return False
        status = health(str(data["url"]))
        if status == 200 or (status == 503 and not ready):
            found.update(data)
            return True
        return False

    await wait_for(ok)
    return found


def stdio_params(args: list[str]) -> Any:
    from mcp.client.stdio import StdioServerParameters

    return StdioServerParameters(command=PY, args=args, env=clean_env(), cwd=str(ROOT))


def bosun_cmd(*args: str) -> list[str]:
    return ["-m", "bosun", *args]


def noop_cmd(home: Path, stdio: bool) -> list[str]:
    return [str(HERE), "noop-server", "--home", str(home), *(["--stdio"] if stdio else [])]


def spawn(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as fh:
        return subprocess.Popen(
            [PY, *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fh, env=clean_env(), cwd=ROOT
        )


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def stop_daemon_of(home: Path) -> None:
    """Stop the daemon a bridge started for ``home`` (a process this bench caused to start)."""
    data = read_daemon(home)
    pid = data.get("pid") if data else None
    if isinstance(pid, int) and pid > 0:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)


async def seed(home: Path) -> str:
    """Put the recall target straight into the store of ``home``; returns its ref."""
    from bosun.store.db import open_db
    from bosun.store.refs import SQLiteRefStore

    home.mkdir(parents=True, exist_ok=True)
    conn = await open_db(home / "bosun.db")
    try:
        return await SQLiteRefStore(conn).put(REF_TEXT.encode(), "text/plain")
    finally:
        await conn.close()


def provision(home: Path) -> None:
    subprocess.run([PY, *bosun_cmd("provision", "--home", str(home))], check=True, env=clean_env(),
                   stdout=subprocess.DEVNULL)


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    n = len(ordered)
    return {
        "n": n,
        "median": statistics.median(ordered),
        "p90": ordered[max(0, int(0.9 * n) - 1)],
        "p99": ordered[max(0, int(0.99 * n) - 1)],
    }


# -- round trips --------------------------------------------------------------------------------
@dataclass
class Lane:
    name: str  # e.g. "recall / HTTP"
    transport: str
    tool: str
    args: dict[str, Any]
    client: Any


async def round_trips(root: Path, mode: str, n: int, warmup: int) -> dict[str, dict[str, float]]:
    from mcp import Client

    homes = {k: root / f"{mode}-{k}" for k in ("http", "stdio", "noop-http", "noop-stdio")}
    for key in ("http", "stdio"):
        provision(homes[key])
    ref = await seed(homes["http"])
    assert await seed(homes["stdio"]) == ref
    procs = [spawn(bosun_cmd("serve", "--home", str(homes["http"]), "--port", "0"), root / "daemon.log"),
             spawn(noop_cmd(homes["noop-http"], stdio=False), root / "noop.log")]
    try:
        bosun_http = await wait_daemon(homes["http"], procs[0].pid, ready=True)
        noop_http = await wait_daemon(homes["noop-http"], procs[1].pid)
        async with AsyncExitStack() as stack:
            async def connect(server: Any) -> Any:
                return await stack.enter_async_context(Client(server, mode=mode))  # type: ignore[arg-type]

            recall = {"ref": ref, **RECALL_ARGS}
            lanes = [
                Lane("noop / stdio", "stdio", "noop", {},
                     await connect(stdio_params(noop_cmd(homes["noop-stdio"], stdio=True)))),
                Lane("recall / stdio", "stdio", "recall", recall,
                     await connect(stdio_params(bosun_cmd("serve", "--stdio", "--home", str(homes["stdio"]),
                                                          "--port", "0")))),
                Lane("noop / HTTP", "HTTP", "noop", {}, await connect(str(noop_http["url"]))),
                Lane("recall / HTTP", "HTTP", "recall", recall, await connect(str(bosun_http["url"]))),
                Lane("noop / bridge", "bridge", "noop", {},
                     await connect(stdio_params(bosun_cmd("stdio", "--home", str(homes["noop-http"]))))),
                Lane("recall / bridge", "bridge", "recall", recall,
                     await connect(stdio_params(bosun_cmd("stdio", "--home", str(homes["http"]))))),
            ]
            await wait_daemon(homes["stdio"], ready=True)  # the stdio server's model is loaded too
            samples: dict[str, list[float]] = {lane.name: [] for lane in lanes}
            order = random.Random(7)
            for i in range(warmup + n):
                order.shuffle(lanes)  # no lane always follows the same one
                for lane in lanes:
                    t0 = time.perf_counter()
                    result = await lane.client.call_tool(lane.tool, lane.args)
                    elapsed = (time.perf_counter() - t0) * 1000
                    if result.is_error:
                        raise RuntimeError(f"{lane.name}: {result.content}")
                    if i >= warmup:
                        samples[lane.name].append(elapsed)
            out = {name: summary(values) for name, values in samples.items()}
            for transport in ("stdio", "HTTP", "bridge"):  # same-cycle pairs cancel the load drift
                pairs = zip(samples[f"recall / {transport}"], samples[f"noop / {transport}"], strict=True)
                out[f"recall / {transport}"]["paired_ratio"] = statistics.median(r / q for r, q in pairs)
            for tool in ("recall", "noop"):
                pairs = zip(samples[f"{tool} / bridge"], samples[f"{tool} / HTTP"], strict=True)
                out[f"{tool} / bridge"]["paired_minus_http"] = statistics.median(b - h for b, h in pairs)
            http_lane = next(lane for lane in lanes if lane.name == "recall / HTTP")
            last = await http_lane.client.call_tool("recall", recall)
            out["recall / HTTP"]["result_bytes"] = len(json.dumps(last.structured_content))
            return out
    finally:
        for proc in procs:
            stop(proc)


# -- start-up -----------------------------------------------------------------------------------
async def timed_connect(server: Any, t0: float, stack: AsyncExitStack) -> float:
    from mcp import Client

    await stack.enter_async_context(Client(server, mode="legacy"))
    return (time.perf_counter() - t0) * 1000


async def start_stdio(root: Path, i: int, noop: bool) -> tuple[float, float | None]:
    home = root / ("start-noop-stdio" if noop else "start-stdio")
    if not noop and i == 0:
        provision(home)
    args = noop_cmd(home, stdio=True) if noop else bosun_cmd("serve", "--stdio", "--home", str(home), "--port", "0")
    async with AsyncExitStack() as stack:
        t0 = time.perf_counter()
        init_ms = await timed_connect(stdio_params(args), t0, stack)
        if noop:
            return init_ms, None
        await wait_daemon(home, ready=True)
        return init_ms, (time.perf_counter() - t0) * 1000


async def start_http(root: Path, i: int, noop: bool) -> tuple[float, float | None]:
    from mcp import Client

    home = root / ("start-noop-http" if noop else "start-http")
    if not noop and i == 0:
        provision(home)
    t0 = time.perf_counter()
    proc = spawn(noop_cmd(home, stdio=False) if noop else bosun_cmd("serve", "--home", str(home), "--port", "0"),
                 root / "start.log")
    try:
        daemon = await wait_daemon(home, proc.pid)
        async with Client(str(daemon["url"]), mode="legacy"):
            init_ms = (time.perf_counter() - t0) * 1000
        if noop:
            return init_ms, None
        await wait_daemon(home, proc.pid, ready=True)
        return init_ms, (time.perf_counter() - t0) * 1000
    finally:
        stop(proc)


async def start_bridge(root: Path, i: int, cold: bool, warm_home: Path) -> tuple[float, float | None]:
    home = root / "start-bridge" if cold else warm_home
    if cold and i == 0:
        provision(home)
    try:
        async with AsyncExitStack() as stack:
            t0 = time.perf_counter()
            init_ms = await timed_connect(stdio_params(bosun_cmd("stdio", "--home", str(home))), t0, stack)
            await wait_daemon(home, ready=True)
            return init_ms, (time.perf_counter() - t0) * 1000 if cold else None
    finally:
        if cold:
            stop_daemon_of(home)


async def startups(root: Path, starts: int) -> dict[str, dict[str, float]]:
    warm_home = root / "start-warm"
    provision(warm_home)
    warm_daemon = spawn(bosun_cmd("serve", "--home", str(warm_home), "--port", "0"), root / "warm.log")
    await wait_daemon(warm_home, warm_daemon.pid, ready=True)
    kinds: dict[str, Callable[[int], Awaitable[tuple[float, float | None]]]] = {
        "noop, stdio": lambda i: start_stdio(root, i, noop=True),
        "bosun serve --stdio": lambda i: start_stdio(root, i, noop=False),
        "noop, HTTP": lambda i: start_http(root, i, noop=True),
        "bosun serve (HTTP)": lambda i: start_http(root, i, noop=False),
        "bosun stdio, daemon running": lambda i: start_bridge(root, i, cold=False, warm_home=warm_home),
        "bosun stdio, starts the daemon": lambda i: start_bridge(root, i, cold=True, warm_home=warm_home),
    }
    inits: dict[str, list[float]] = {k: [] for k in kinds}
    readies: dict[str, list[float]] = {k: [] for k in kinds}
    try:
        for i in range(starts):
            for name, run in kinds.items():
                init_ms, ready_ms = await run(i)
                inits[name].append(init_ms)
                if ready_ms is not None:
                    readies[name].append(ready_ms)
    finally:
        stop(warm_daemon)
    out: dict[str, dict[str, float]] = {}
    for name in kinds:
        row = {"n": len(inits[name]), "init_median": statistics.median(inits[name]), "init_max": max(inits[name])}
        if readies[name]:
            row["ready_median"] = statistics.median(readies[name])
        out[name] = row
    return out


# -- report -------------------------------------------------------------------------------------
def render(results: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [
        "# Foundation transport benchmark",
        "",
        f"Measured {results['when']} on {results['machine']} by `python bench/transport_bench.py "
        f"-n {args.n} --warmup {args.warmup} --starts {args.starts}` (SDK `Client`, mcp {results['mcp']}).",
        "All rows come from the same run. The six round-trip clients stay connected and are called once per cycle",
        "in a shuffled order; the paired ratio is the median over cycles of recall / no-op within one cycle,",
        "which cancels the load drift of this shared 2-core machine (the load average is printed above).",
        "",
        "## Start-up (legacy `initialize` handshake; model ready = `/healthz` 200)",
        "",
        "| process | runs | to `initialize` answered (median / max) | to model ready (median) |",
        "|---|---|---|---|",
    ]
    for name, row in results["startup"].items():
        ready = f"{row['ready_median']:.0f} ms" if "ready_median" in row else "-"
        lines.append(f"| {name} | {row['n']} | {row['init_median']:.0f} / {row['init_max']:.0f} ms | {ready} |")
    lines += ["", "## Round trips (ms; bosun `recall` head of a 4 KB ref vs a no-op tool, same transport)", ""]
    verdicts: list[str] = []
    for mode, table in results["round_trips"].items():
        lines += [f"### wire era: {mode} (n={args.n} per row after {args.warmup} warm-up calls)", "",
                  "| transport | no-op median | recall median | ratio of medians | paired ratio | recall p90 / p99 |",
                  "|---|---|---|---|---|---|"]
        for transport in ("stdio", "HTTP", "bridge"):
            noop, rec = table[f"noop / {transport}"], table[f"recall / {transport}"]
            ratio = rec["median"] / noop["median"]
            lines.append(f"| {transport} | {noop['median']:.2f} | {rec['median']:.2f} | {ratio:.2f}x "
                         f"| {rec['paired_ratio']:.2f}x | {rec['p90']:.2f} / {rec['p99']:.2f} |")
            verdicts.append(f"{mode} {transport}: recall/no-op {ratio:.2f}x, paired {rec['paired_ratio']:.2f}x "
                            f"({'meets' if rec['paired_ratio'] <= 1.3 else 'misses'} the 1.3x target on the paired ratio)")
        bridge_recall = table["recall / bridge"]["median"] - table["recall / HTTP"]["median"]
        bridge_noop = table["noop / bridge"]["median"] - table["noop / HTTP"]["median"]
        paired = table["recall / bridge"]["paired_minus_http"]
        vs_stdio = table["recall / bridge"]["median"] - table["recall / stdio"]["median"]
        lines += ["", f"Bridge cost against the SDK's HTTP client to the same daemon (bridge median - HTTP median): "
                      f"recall {bridge_recall:+.2f} ms (paired {paired:+.2f} ms), no-op {bridge_noop:+.2f} ms. "
                      f"Against a stdio server in the host's own child process: recall {vs_stdio:+.2f} ms.", ""]
        verdicts.append(f"{mode} bridge adds {bridge_recall:+.2f} ms to recall, paired {paired:+.2f} ms "
                        f"({'meets' if paired < 2 else 'misses'} the < 2 ms target on the paired difference)")
    lines += ["## Verdicts", "", *[f"- {v}" for v in verdicts], ""]
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    import mcp

    with tempfile.TemporaryDirectory(prefix="bosun-transport-") as tmp:
        root = Path(tmp)
        results: dict[str, Any] = {
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
                       f"Python {platform.python_version()}",
            "mcp": getattr(mcp, "__version__", None) or _dist_version("mcp"),
            "round_trips": {},
        }
        for mode in args.modes:
            results["round_trips"][mode] = await round_trips(root, mode, args.n, args.warmup)
        results["startup"] = await startups(root, args.starts)
        return results


def _dist_version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command")
    ns = sub.add_parser("noop-server", help="the baseline server (spawned by the bench)")
    ns.add_argument("--home", required=True)
    ns.add_argument("--stdio", action="store_true")
    parser.add_argument("-n", type=int, default=400, help="timed calls per round-trip row")
    parser.add_argument("--warmup", type=int, default=40)
    parser.add_argument("--starts", type=int, default=5, help="start-ups per start-up row")
    parser.add_argument("--modes", nargs="+", default=["auto", "legacy"], choices=["auto", "legacy"])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "foundation.md")
    args = parser.parse_args()
    if args.command == "noop-server":
        noop_server(Path(args.home), args.stdio)
        return
    results = asyncio.run(main_async(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(results, args))
    print(json.dumps(results, indent=1))
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
