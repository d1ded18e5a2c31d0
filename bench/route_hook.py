"""The Claude Code hook end to end: a fresh process per prompt against a warm daemon. Medians; run by hand.

Starts `bosun serve --port 0` on a temporary BOSUN_HOME (demo corpus), waits
until it answers, warms it, then times N fresh hook processes (distinct
prompts, so nothing is served from the result cache): the form `bosun hook
settings` writes (`python -S -P .../_hook_script.py claude-code`), the console
script `bosun hook claude-code` and the module form, beside same-run baselines:
`python -c pass`, `python -S -P -c pass` and the console script's imports
without the request. Bytecode is cached, as in an installed bosun. ``--baseline-script`` times another
``_hook_script.py`` (the previous code's, from ``git archive REV server/commands``: it runs standalone, as the
settings' form does) in the same rounds, so a before/after comparison shares the machine's load.

    python bench/route_hook.py [--n 30] [--baseline-script /tmp/old/server/commands/_hook_script.py]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

BIN = Path(sys.executable).parent
LEAN = str(Path(__file__).resolve().parents[1] / "server" / "commands" / "_hook_script.py")


def timed(cmd: list[str], stdin: str, env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, check=False)
    return time.perf_counter() - t0, proc.stdout


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--baseline-script", default=None, help="another _hook_script.py timed in the same rounds")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        env = {**os.environ, "BOSUN_HOME": str(home)}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        daemon = subprocess.Popen([str(BIN / "bosun"), "serve", "--port", "0"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(600):
                if (home / "daemon.json").exists():
                    break
                time.sleep(0.1)
            url = json.loads((home / "daemon.json").read_text())["url"].replace("/mcp", "/v1/route")
            req = urllib.request.Request(url, data=b'{"prompt": "warm up the deploy"}', method="POST")
            for _ in range(600):
                try:
                    urllib.request.urlopen(req, timeout=60).read()
                    break
                except OSError:
                    time.sleep(0.2)
            hook, hook_mod, base, imports, lean, base_s, old = [], [], [], [], [], [], []
            routed = lean_routed = 0
            for i in range(args.n):
                prompt = json.dumps({"hook_event_name": "UserPromptSubmit",
                                     "prompt": f"roll back the production deploy number {i}"})
                dt, out = timed([str(BIN / "bosun"), "hook", "claude-code"], prompt, env)
                hook.append(dt)
                routed += bool(out.strip())
                hook_mod.append(timed([sys.executable, "-m", "bosun.server.commands.hook", "claude-code"],
                                      prompt.replace("number", "item"), env)[0])
                dt, out = timed([sys.executable, "-S", "-P", LEAN, "claude-code"], prompt.replace("number", "no."), env)
                lean.append(dt)
                lean_routed += bool(out.strip())
                if args.baseline_script:
                    old.append(timed([sys.executable, "-S", "-P", args.baseline_script, "claude-code"],
                                     prompt.replace("number", "nr."), env)[0])
                base_s.append(timed([sys.executable, "-S", "-P", "-c", "pass"], "", env)[0])
                base.append(timed([sys.executable, "-c", "pass"], "", env)[0])
                imports.append(timed([sys.executable, "-c", "import bosun.server.cli, socket, json"], "", env)[0])
        finally:
            daemon.terminate()
            daemon.wait(10)
    p50 = statistics.median
    print(f"lean hook `python -S -P .../_hook_script.py claude-code` (fresh process, warm daemon): p50 "
          f"{p50(lean) * 1000:.1f} ms, max {max(lean) * 1000:.1f} ms, {lean_routed}/{args.n} produced context; "
          f"{(p50(lean) - p50(base_s)) * 1000:.1f} ms over `python -S -P -c pass` ({p50(base_s) * 1000:.1f} ms)")
    if old:
        print(f"baseline script {args.baseline_script} (same rounds): p50 {p50(old) * 1000:.1f} ms, "
              f"max {max(old) * 1000:.1f} ms")
    print(f"console script `bosun hook claude-code` (fresh process, warm daemon): p50 {p50(hook) * 1000:.1f} ms, "
          f"max {max(hook) * 1000:.1f} ms, {routed}/{args.n} produced context")
    print(f"hook as `python -m bosun.server.commands.hook claude-code`: p50 {p50(hook_mod) * 1000:.1f} ms")
    print(f"baseline `python -c pass`: p50 {p50(base) * 1000:.1f} ms")
    print(f"baseline hook imports only: p50 {p50(imports) * 1000:.1f} ms")
    print(f"hook minus bare interpreter: {(p50(hook) - p50(base)) * 1000:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
