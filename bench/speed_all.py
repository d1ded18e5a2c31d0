"""Every speed row of issue 15 in one command, each beside a baseline measured in the same run.

    python bench/speed_all.py [--starts 7] [--n 30] [--rounds 15] [--skip offload,select] [--tests] [--out FILE]

Rows measured here (fresh processes, raw JSON-RPC over pipes, so the client adds nothing):

* start-up: process start -> ``initialize`` answered and -> ``tools/list`` answered (the first answer the
  server has to compute: the SDK loaded, the tools built) for ``bosun stdio --standalone``, beside a bare
  ``python -c pass`` and a no-op ``MCPServer`` (one tool, the SDK's own stdio) started the same way;
  then -> the first ``tools/call`` answered (a recall of a ref that does not exist: no model) and -> the
  first ``route`` answered (the model and the policy index), each sent when the previous answer came; and
  ``initialize`` -> model ready (the engine's "model ... ready" log line on stderr). bosun answers
  ``initialize``, ``tools/list`` and ``prompts/list`` from its first lines with the SDK's own answers
  recorded by an earlier start in the same home (server/transport/early_init.py): the row "nothing
  recorded yet" is a first start, where the SDK answers after its import, as every start did before.
* ``bosun stdio`` attaching to a running daemon: process start -> ``initialize`` answered.
* the Claude Code hooks (fresh process, warm daemon): the UserPromptSubmit hook in the form the settings
  run (``bosun hook settings``: ``python -S -P .../_hook_script.py claude-code``), the console script
  ``bosun hook claude-code`` and the ``python -m`` form, beside ``python -S -P -c pass`` and ``python -c
  pass``; the PreToolUse hook (``claude-code-pretool``) lean and as the console script.
* daemon RSS idle with the model ready and the policy index built, beside the no-op server's RSS.

Rows run as their own benches (subprocesses, their tables printed as they print them):
``bench/run_overhead.py`` (bosun run overhead), ``bench/offload_speed.py`` (observe 1 MB, recall grep),
``bench/select_speed.py`` (select_context). ``--tests`` also times the README test command.
Medians; the load average is printed with each section (the machine is shared: read the ratios).
Every process runs without ``PYTHONDONTWRITEBYTECODE`` (an installed bosun has its bytecode compiled at
install; here the first run writes it), so modules are loaded from ``.pyc``, not compiled per process.
``initialize`` -> model ready is measured with the model prefetch as by default (``auto``: from the process
start when the handshake is answered from a record) and off, in the same rounds (``on`` is ``auto``
wherever the handshake is recorded).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve()
PY = sys.executable
BOSUN = str(Path(PY).parent / "bosun")
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "speed_all", "version": "0"}}})
TOOLS_LIST = (json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n"
              + json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
EARLY_CACHE = "initialize-cache.json"  # server/transport/early_init.py CACHE_FILE
# the first calls a host makes once it has the tools: one no tool needs the model for (a recall of a ref that
# does not exist: the SDK, the engine and the store answer it), then a route (the model and the policy index)
FIRST_CALL = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                         "params": {"name": "recall", "arguments": {"ref": "ref://sha256/" + "0" * 64}}})
FIRST_ROUTE = json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                          "params": {"name": "route", "arguments": {"prompt": "how do I rotate the database password?"}}})


LEAN_HOOK = str(ROOT / "server" / "commands" / "_hook_script.py")


def clean_env(home: Path | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOSUN_") and k != "PYTHONDONTWRITEBYTECODE"}
    if home is not None:
        env["BOSUN_HOME"] = str(home)
    env.update(extra)
    return env


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores"


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


# -- the no-op baseline server ------------------------------------------------------------------
def noop_stdio() -> None:
    """An MCPServer with one no-op tool over the SDK's own stdio: the floor for any SDK server."""
    from mcp.server import MCPServer

    mcp: Any = MCPServer("noop")

    @mcp.tool()
    def noop() -> str:
        """Does nothing."""
        return "ok"

    mcp.run()


# -- start-up -----------------------------------------------------------------------------------
class Started:
    """A process started with pipes; ``initialized`` and ``ready`` are seconds since the spawn."""

    def __init__(self, argv: list[str], env: dict[str, str], ready_marker: str | None = None) -> None:
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env, cwd=ROOT)
        self.ready: float | None = None
        self.ready_event = threading.Event()
        self.stderr_tail: list[str] = []
        self.marker = ready_marker
        threading.Thread(target=self._watch_stderr, daemon=True).start()

    def _watch_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace")
            self.stderr_tail = [*self.stderr_tail, line][-20:]
            if self.marker and self.ready is None and self.marker in line:
                self.ready = time.perf_counter() - self.t0
                self.ready_event.set()
        self.ready_event.set()

    def initialize(self, timeout: float = 120.0) -> float:
        """Send ``initialize`` at once (a host does) and return the seconds until its answer arrived."""
        return self._ask(INITIALIZE, 1, timeout)

    def list_tools(self, timeout: float = 120.0) -> float:
        """After ``initialize``: ``notifications/initialized`` and ``tools/list``; seconds since the start
        until the tool list arrived."""
        return self._ask(TOOLS_LIST, 2, timeout)

    def call(self, line: str, answer_id: int, timeout: float = 120.0) -> float:
        """A ``tools/call``; seconds since the start until its answer (a result, perhaps ``isError``) arrived."""
        return self._ask(line, answer_id, timeout)

    def _ask(self, lines: str, answer_id: int, timeout: float) -> float:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(lines.encode() + b"\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"{self.proc.args!r} closed stdout before answering: {''.join(self.stderr_tail)}")
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if message.get("id") == answer_id:
                if "result" not in message:
                    raise RuntimeError(f"request {answer_id} failed: {message}")
                return time.perf_counter() - self.t0
        raise RuntimeError(f"no answer to request {answer_id}")

    def close(self, timeout: float = 20.0) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.close()  # stdio EOF: the server exits
        except OSError:
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def timed_run(argv: list[str], env: dict[str, str], stdin: bytes = b"") -> tuple[float, bytes]:
    t0 = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, env=env, check=False, cwd=ROOT)
    return time.perf_counter() - t0, done.stdout


def provision(home: Path) -> None:
    subprocess.run([PY, "-m", "bosun", "provision", "--home", str(home)], env=clean_env(), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _bosun_start(env: dict[str, str], prefetch: str, fresh_home: Path | None = None) -> dict[str, float | None]:
    """Seconds of one standalone start: start -> initialize, -> tools/list, -> the first recall and route answered
    (sent one after the other, as soon as the previous answer came), and initialize -> model ready (or None).
    ``fresh_home``: its recorded handshake answers are set aside for this start (a first start), then put back."""
    saved = None
    cache = fresh_home / EARLY_CACHE if fresh_home is not None else None
    if cache is not None and cache.exists():
        saved = cache.read_bytes()
        cache.unlink()
    try:
        s = Started([BOSUN, "-v", "stdio", "--standalone"], {**env, "BOSUN_MODEL_PREFETCH": prefetch},
                    ready_marker="ready in")
        out: dict[str, float | None] = {"init": s.initialize()}
        out["list"] = s.list_tools()
        out["call"] = s.call(FIRST_CALL, 3)
        out["route"] = s.call(FIRST_ROUTE, 4)
        s.ready_event.wait(120)
        out["ready"] = s.ready - float(out["init"] or 0) if s.ready is not None else None
        s.close()
    finally:
        if cache is not None and saved is not None:
            cache.write_bytes(saved)
    return out


def startup_rows(root: Path, starts: int) -> list[str]:
    home = root / "standalone"
    provision(home)
    env = clean_env(home)
    interp: list[float] = []
    noop: dict[str, list[float]] = {"init": [], "list": []}
    variants = {"auto": ("auto", None), "off": ("off", None), "first": ("auto", home)}
    runs: dict[str, dict[str, list[float]]] = {v: {"init": [], "list": [], "call": [], "route": [], "ready": []}
                                               for v in variants}
    for i in range(starts + 1):  # interleaved: the same load hits every row; round 0 warms the caches (and records)
        t_interp = timed_run([PY, "-c", "pass"], env)[0]
        s = Started([PY, str(HERE), "noop-stdio"], env)
        t_noop = s.initialize()
        t_noop_list = s.list_tools()
        s.close()
        if i:
            interp.append(t_interp)
            noop["init"].append(t_noop)
            noop["list"].append(t_noop_list)
        for name, (prefetch, fresh) in variants.items():
            start = _bosun_start(env, prefetch, fresh)
            if i:
                for measure, value in start.items():
                    if value is not None:
                        runs[name][measure].append(value)
    base_init, base_list = p50(noop["init"]), p50(noop["list"])
    rows = [
        f"| `python -c pass` (the interpreter alone) | {p50(interp) * 1000:.0f} ms | |",
        f"| no-op MCPServer over stdio: start -> `initialize` answered | {base_init * 1000:.0f} ms | floor |",
        f"| no-op MCPServer over stdio: start -> `tools/list` answered | {base_list * 1000:.0f} ms | floor |",
    ]
    labels = {"auto": " (answered early from the SDK's answers recorded by an earlier start; the model load "
                      "beside the imports: `BOSUN_MODEL_PREFETCH=auto`, the default)",
              "off": " (`BOSUN_MODEL_PREFETCH=off`, answered early)",
              "first": " (first start in a home: nothing recorded yet, the SDK answers)"}
    for name, label in labels.items():
        run = runs[name]
        rows.append(f"| `bosun stdio --standalone`{label}: start -> `initialize` answered | "
                    f"{p50(run['init']) * 1000:.0f} ms (max {max(run['init']) * 1000:.0f}) | <= 1000 ms; "
                    f"{p50(run['init']) / base_init:.2f}x the no-op |")
        rows.append(f"| `bosun stdio --standalone`{label}: start -> `tools/list` answered | "
                    f"{p50(run['list']) * 1000:.0f} ms (max {max(run['list']) * 1000:.0f}) | "
                    f"{p50(run['list']) / base_list:.2f}x the no-op's `tools/list` |")
        rows.append(f"| `bosun stdio --standalone`{label}: start -> first `tools/call` answered (a recall: no model) | "
                    f"{p50(run['call']) * 1000:.0f} ms (max {max(run['call']) * 1000:.0f}) | "
                    f"{p50(run['call']) / base_list:.2f}x the no-op's `tools/list` |")
        rows.append(f"| `bosun stdio --standalone`{label}: start -> first `route` answered (model and policy index) | "
                    f"{p50(run['route']) * 1000:.0f} ms (max {max(run['route']) * 1000:.0f}) | |")
        if run["ready"]:
            total = p50([a + b for a, b in zip(run["init"], run["ready"], strict=False)])
            rows.append(f"| `initialize` -> model ready{label} | {p50(run['ready']) * 1000:.0f} ms "
                        f"(max {max(run['ready']) * 1000:.0f}; start -> ready {total * 1000:.0f} ms) | "
                        "<= 1000 ms (negative: ready before `initialize` was answered) |")
        else:
            rows.append(f"| `initialize` -> model ready{label} | not seen (no 'ready in' log line) | <= 1000 ms |")
    return rows


# -- the warm daemon: attach, hook, RSS --------------------------------------------------------
def start_daemon(home: Path, argv: list[str]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(argv, env=clean_env(home), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=ROOT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (home / "daemon.json").exists():
        if proc.poll() is not None:
            raise RuntimeError(f"{argv} exited with {proc.returncode}")
        time.sleep(0.02)
    return proc


def daemon_url(home: Path) -> str:
    return str(json.loads((home / "daemon.json").read_text())["url"])


def wait_ready(home: Path, timeout: float = 180) -> dict[str, Any]:
    """Poll /healthz until the model is ready and the policy index is built."""
    import urllib.error
    import urllib.request

    url = daemon_url(home).rsplit("/mcp", 1)[0] + "/healthz"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                body: dict[str, Any] = json.loads(resp.read())
                index = body.get("route_index", {})
                state = index.get("state") if isinstance(index, dict) else None
                if state in (None, "ready"):
                    return body
        except urllib.error.HTTPError:
            pass
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError("daemon never became ready")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def daemon_rows(root: Path, n: int) -> list[str]:
    home = root / "warm"
    provision(home)
    env = clean_env(home)
    daemon = start_daemon(home, [BOSUN, "serve", "--port", "0"])
    noop_home = root / "noop"
    noop = start_daemon(noop_home, [PY, str(ROOT / "bench" / "transport_bench.py"), "noop-server", "--home",
                                    str(noop_home)])
    try:
        wait_ready(home)
        time.sleep(2.0)  # idle: background work after the index build settles
        rss, rss_noop = rss_mb(daemon.pid), rss_mb(noop.pid)
        interp, interp_s, attach, hook, hook_m, lean, pre, pre_lean = [], [], [], [], [], [], [], []
        routed = lean_routed = 0
        bash = json.dumps({"tool_name": "Bash", "session_id": "bench",
                           "tool_input": {"command": "pytest -q tests/test_x.py"}}).encode()
        for i in range(-2, n):  # two warm-up rounds (bytecode written, page cache), not counted
            rows_of = {}
            rows_of["interp"] = timed_run([PY, "-c", "pass"], env)[0]
            rows_of["interp_s"] = timed_run([PY, "-S", "-P", "-c", "pass"], env)[0]
            s = Started([BOSUN, "stdio"], env)
            rows_of["attach"] = s.initialize()
            s.close()
            prompt = json.dumps({"hook_event_name": "UserPromptSubmit",
                                 "prompt": f"roll back the production deploy number {i}"}).encode()
            dt, out = timed_run([PY, "-S", "-P", LEAN_HOOK, "claude-code"], env, prompt)
            rows_of["lean"] = dt
            dt2, out2 = timed_run([BOSUN, "hook", "claude-code"], env, prompt.replace(b"number", b"no."))
            rows_of["hook"] = dt2
            rows_of["hook_m"] = timed_run([PY, "-m", "bosun", "hook", "claude-code"], env,
                                          prompt.replace(b"number", b"item"))[0]
            rows_of["pre_lean"] = timed_run([PY, "-S", "-P", LEAN_HOOK, "claude-code-pretool"], env, bash)[0]
            rows_of["pre"] = timed_run([BOSUN, "hook", "claude-code-pretool"], env, bash)[0]
            if i < 0:
                continue
            lean_routed += bool(out.strip())
            routed += bool(out2.strip())
            for name, into in (("interp", interp), ("interp_s", interp_s), ("attach", attach), ("lean", lean),
                               ("hook", hook), ("hook_m", hook_m), ("pre_lean", pre_lean), ("pre", pre)):
                into.append(rows_of[name])
    finally:
        stop(daemon)
        stop(noop)
    return [
        f"| `python -c pass` (the interpreter alone) | {p50(interp) * 1000:.0f} ms | |",
        f"| `bosun stdio` attaching to a running daemon: start -> `initialize` answered | "
        f"{p50(attach) * 1000:.0f} ms | <= 100 ms; {(p50(attach) - p50(interp)) * 1000:.0f} ms over the interpreter |",
        f"| `python -S -P -c pass` (the interpreter without site) | {p50(interp_s) * 1000:.0f} ms | |",
        f"| Claude Code hook as the settings run it, `python -S -P .../_hook_script.py claude-code` (fresh "
        f"process, warm daemon) | {p50(lean) * 1000:.0f} ms ({lean_routed}/{n} added context) | p50 <= 50 ms; "
        f"{(p50(lean) - p50(interp_s)) * 1000:.0f} ms over `python -S -P -c pass` |",
        f"| the same hook as the console script `bosun hook claude-code` | {p50(hook) * 1000:.0f} ms "
        f"({routed}/{n} added context) | {(p50(hook) - p50(interp)) * 1000:.0f} ms over `python -c pass` |",
        f"| the same hook as `python -m bosun hook claude-code` | {p50(hook_m) * 1000:.0f} ms | |",
        f"| PreToolUse hook (a Bash call rewritten), `python -S -P .../_hook_script.py claude-code-pretool` | "
        f"{p50(pre_lean) * 1000:.0f} ms | console script `bosun hook claude-code-pretool`: {p50(pre) * 1000:.0f} ms |",
        f"| daemon RSS idle, model ready and policy index built | {rss:.0f} MB | no-op server {rss_noop:.0f} MB |",
    ]


# -- the other benches ----------------------------------------------------------------------------
def sub_bench(argv: list[str], timeout: float = 1800) -> str:
    t0 = time.perf_counter()
    done = subprocess.run([PY, *argv], capture_output=True, text=True, cwd=ROOT, timeout=timeout, check=False)
    took = time.perf_counter() - t0
    head = f"`python {' '.join(argv)}` ({took:.0f} s, exit {done.returncode}; {load()} at the end)"
    body = done.stdout.strip() or done.stderr.strip()[-2000:]
    return f"{head}\n\n{body}\n"


def test_suite_row() -> str:
    t0 = time.perf_counter()
    done = subprocess.run([PY, "-m", "pytest", "-q", "-p", "no:cacheprovider"], capture_output=True, text=True,
                          cwd=ROOT, check=False)
    took = time.perf_counter() - t0
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-500:]
    return f"| the README test command (`.venv/bin/python -m pytest`) | {took / 60:.1f} min ({summary}) | <= 3 min quiet |"


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "noop-stdio":
        noop_stdio()
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--starts", type=int, default=7, help="cold starts per start-up row")
    ap.add_argument("--n", type=int, default=30, help="fresh processes per attach/hook row")
    ap.add_argument("--rounds", type=int, default=15, help="rounds per command in run_overhead")
    ap.add_argument("--skip", default="", help="comma list of: startup,daemon,run,offload,select")
    ap.add_argument("--tests", action="store_true", help="also time the README test command")
    ap.add_argument("--out", type=Path, help="also write the report to this markdown file")
    args = ap.parse_args()
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    out = [f"# bosun speed, issue 15 rows ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", "",
           f"Command: `python bench/speed_all.py --starts {args.starts} --n {args.n} --rounds {args.rounds}`"
           f"{' --skip ' + args.skip if args.skip else ''}{' --tests' if args.tests else ''}; {load()} at start.", "",
           "| row | p50 | target / baseline |", "|---|---:|---|"]
    with tempfile.TemporaryDirectory(prefix="bosun-speed-") as tmp:
        root = Path(tmp)
        if "startup" not in skip:
            out += startup_rows(root, args.starts)
            print("\n".join(out), flush=True)
        if "daemon" not in skip:
            rows = daemon_rows(root, args.n)
            out += rows
            print("\n".join(rows), flush=True)
        if args.tests:
            out.append(test_suite_row())
            print(out[-1], flush=True)
        out += ["", f"{load()} after the table rows.", ""]
        sections = [("run", ["bench/run_overhead.py", "--rounds", str(args.rounds), "--mb", "20"]),
                    ("offload", ["bench/offload_speed.py", "--repeat", "21", "--paced", "0"]),
                    ("select", ["bench/select_speed.py"])]
        for name, argv in sections:
            if name in skip:
                continue
            out += [f"## {name}", "", sub_bench(argv)]
            print("\n".join(out[-3:]), flush=True)
    if args.out:
        args.out.write_text("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
