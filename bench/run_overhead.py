"""What ``bosun run -- CMD`` costs over running CMD bare, and its memory on a 100 MB output.

    python bench/run_overhead.py [--rounds 25] [--mb 100] [--out bench/results/run_overhead.md]

A daemon is started in a fresh BOSUN_HOME (as ``bosun stdio`` starts it) and left warm. For each
command, bare and wrapped runs alternate (same run, same load), ``rounds`` times; the overhead is
the median of the per-round differences. The wrapped form is the one the PreToolUse hook writes
(``pretool.rewrite``: ``python -S -P .../_run_script.py --session bench -- CMD`` for a plain argv, ``... -- bash
-c CMD`` otherwise), run the way the Bash tool runs any command, ``bash -c``, against ``bash -c CMD``. The
module form the hook wrote before (``python -P -m bosun.server.commands.run ... -- bash -c CMD``) is timed
in the same rounds as a reference, and so is another ``_run_script.py`` given with ``--baseline-script``
(e.g. the previous code's, from a git worktree: it runs standalone, like the hook's form).
Bytecode: the timed processes run without ``PYTHONDONTWRITEBYTECODE`` (an installed bosun has its ``.pyc``
written at install; a warm-up round writes them here), so a module is loaded, not compiled, every time.
Memory: ``/usr/bin/time -f %M`` (peak RSS of the process and its waited children) of ``bosun run``
on a trivial command (idle) and on one printing ``mb`` MB, and the daemon's RSS before and after.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = [
    "true",
    "echo hello",
    "ls -la /usr/lib | head -40",
    "seq 1 2000",
    "python3 -c 'print(1)'",
]


def wrapped(cmd: str) -> list[str]:
    """What the Bash tool runs once the PreToolUse hook has rewritten ``cmd``."""
    from bosun.server.commands.pretool import rewrite, runner

    return ["bash", "-c", rewrite(cmd, "bench", runner())]


def script_form(script: str, cmd: str) -> list[str]:
    """``wrapped`` with another ``_run_script.py`` (the same argv shape)."""
    from bosun.server.commands.pretool import rewrite

    return ["bash", "-c", rewrite(cmd, "bench", [sys.executable, "-S", "-P", script])]


def module_form(cmd: str) -> list[str]:
    return [sys.executable, "-P", "-m", "bosun.server.commands.run", "--session", "bench", "--", "bash", "-c", cmd]


RUN_SCRIPT = str(Path(__file__).resolve().parents[1] / "server" / "commands" / "_run_script.py")


CPU: dict[str, list[float]] = {}  # CPU ms (user + system of the waited process tree) per timed label


def timed(argv: list[str], env: dict[str, str], label: str = "") -> float:
    """Wall ms of one run; its CPU ms (less sensitive to a loaded machine) is kept under ``label``."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    wall = (time.perf_counter() - t0) * 1000
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if label:
        CPU.setdefault(label, []).append((r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) * 1000)
    return wall


def peak_rss_kb(argv: list[str], env: dict[str, str]) -> int:
    done = subprocess.run(["/usr/bin/time", "-f", "%M", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          env=env, check=False)
    return int(done.stderr.decode().strip().splitlines()[-1])


def post_latency(home: Path, daemon: dict[str, object], rounds: int) -> list[float]:
    """Milliseconds of one ``POST /v1/observe`` of a one-line spool, as ``bosun run`` sends it."""
    from bosun.server.commands._daemon import post_json

    url = str(daemon["url"]).replace("/mcp", "/v1/observe")
    token = daemon.get("token")
    spool = home / "spool"
    spool.mkdir(exist_ok=True, mode=0o700)
    out = []
    for i in range(rounds):
        name = f"run-bench-{i}.out"
        (spool / name).write_bytes(b"hello %d\n" % i)
        t0 = time.perf_counter()
        post_json(url, {"command": f"echo {i}", "spool": name, "exit_code": 0, "session": "bench"},
                  token if isinstance(token, str) else None, 30.0)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--out", default="")
    ap.add_argument("--baseline-script", default="", help="another _run_script.py to time in the same rounds")
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="bosun-run-bench-"))
    env = {**os.environ, "BOSUN_HOME": str(home)}
    env.pop("BOSUN_TASK", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: bytecode cached, not compiled per process
    from bosun.server.transport.bridge import ensure_daemon

    t0 = time.perf_counter()
    daemon = ensure_daemon(home)
    start_s = time.perf_counter() - t0
    pid = int(daemon["pid"])
    lines = [f"# bosun run overhead ({args.rounds} alternating rounds per command, warm daemon)", "",
             f"Command: `python bench/run_overhead.py --rounds {args.rounds} --mb {args.mb}"
             f"{' --baseline-script ' + args.baseline_script if args.baseline_script else ''}`; "
             f"daemon start (first use): {start_s:.1f} s; load average at start: {os.getloadavg()[0]:.1f}", "",
             "| command | bare p50 ms | bosun run p50 ms | overhead p50 ms | overhead p90 ms | module form overhead p50 ms "
             f"|{' baseline script overhead p50 ms |' if args.baseline_script else ''}",
             f"|---|---:|---:|---:|---:|---:|{'---:|' if args.baseline_script else ''}"]
    if args.baseline_script:
        lines.insert(4, f"Baseline script: `{args.baseline_script}`.\n")
    all_diffs: list[float] = []
    all_module: list[float] = []
    all_base: list[float] = []
    py: list[float] = []
    imp: list[float] = []
    try:
        for _ in range(3):  # warm the page cache, the bytecode caches and the daemon's first calls
            timed(wrapped("seq 1 100"), env)
            timed(module_form("seq 1 100"), env)
            if args.baseline_script:
                timed(script_form(args.baseline_script, "seq 1 100"), env)
        for cmd in COMMANDS:
            bare, wrap, diffs, module, base = [], [], [], [], []
            for _ in range(args.rounds):
                b = timed(["bash", "-c", cmd], env, "bare")
                w = timed(wrapped(cmd), env, "wrapped")
                m = timed(module_form(cmd), env)
                py.append(timed([sys.executable, "-S", "-P", "-c", "pass"], env, "pass"))
                imp.append(timed([sys.executable, "-S", "-P", RUN_SCRIPT], env, "load"))  # loads run.py, no command
                bare.append(b)
                wrap.append(w)
                diffs.append(w - b)
                module.append(m - b)
                if args.baseline_script:
                    base.append(timed(script_form(args.baseline_script, cmd), env, "baseline") - b)
            all_diffs += diffs
            all_module += module
            all_base += base
            q = statistics.quantiles(diffs, n=10)
            lines.append(f"| `{cmd}` | {statistics.median(bare):.1f} | {statistics.median(wrap):.1f} | "
                         f"{statistics.median(diffs):.1f} | {q[-1]:.1f} | {statistics.median(module):.1f} |"
                         + (f" {statistics.median(base):.1f} |" if base else ""))
        lines += ["", f"Load average at the end: {os.getloadavg()[0]:.1f}.", "",
                  f"All commands: overhead p50 {statistics.median(all_diffs):.1f} ms, "
                  f"p90 {statistics.quantiles(all_diffs, n=10)[-1]:.1f} ms (the module form: p50 "
                  f"{statistics.median(all_module):.1f} ms"
                  + (f"; the baseline script: p50 {statistics.median(all_base):.1f} ms, p90 "
                     f"{statistics.quantiles(all_base, n=10)[-1]:.1f} ms" if all_base else "") + ").", ""]
        cpu = {k: statistics.median(v) for k, v in CPU.items()}
        lines.append(f"CPU (user + system of the process tree, p50 over all commands; steadier than wall time on a "
                     f"loaded machine): bare {cpu['bare']:.1f} ms, bosun run {cpu['wrapped']:.1f} ms"
                     + (f", the baseline script {cpu['baseline']:.1f} ms" if "baseline" in cpu else "")
                     + f"; `python -S -P -c pass` {cpu['pass']:.1f} ms, loading run.py {cpu['load']:.1f} ms.")
        lines.append("")
        post = post_latency(home, daemon, args.rounds)
        lines.append(f"Where it goes (same rounds, interleaved): `python -S -P -c pass` p50 {statistics.median(py):.1f} ms; loading "
                     f"run.py adds {statistics.median(imp) - statistics.median(py):.1f} ms; the daemon's "
                     f"`/v1/observe` of a small spool (HTTP round trip, journal write) p50 {statistics.median(post):.1f} "
                     "ms (outputs of at most 40 bytes: after the exit, from a detached child); the rest is "
                     "spawning the command (through `bash -c` when it has shell syntax) into the spool.")
        idle = peak_rss_kb(wrapped("true"), env)
        before = rss_kb(pid)
        big_cmd = f"yes 'bosun run memory probe: a line of ordinary text 0123456789' | head -c {args.mb * 1_000_000}"
        t1 = time.perf_counter()
        big = peak_rss_kb(wrapped(big_cmd), env)
        big_s = time.perf_counter() - t1
        after = rss_kb(pid)
        lines += ["", f"## {args.mb} MB output", "",
                  f"- bosun run peak RSS: idle (`true`) {idle / 1024:.1f} MB, with {args.mb} MB of output "
                  f"{big / 1024:.1f} MB: {(big - idle) / 1024:+.1f} MB above idle (target <= 64 MB); {big_s:.1f} s",
                  f"- daemon RSS: {before / 1024:.1f} MB before, {after / 1024:.1f} MB after (it observes at most "
                  "BOSUN_MAX_PAYLOAD_BYTES: head and tail, the spool keeps every byte)"]
    finally:
        try:
            os.kill(pid, 15)
        except OSError:
            pass
        time.sleep(0.5)
        shutil.rmtree(home, ignore_errors=True)
    report = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).write_text(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
