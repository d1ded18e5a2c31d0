"""Harness hooks. ``bosun hook claude-code``: a UserPromptSubmit hook that asks the warm daemon where a
prompt routes. ``bosun hook claude-code-pretool``: a PreToolUse hook that sends Bash commands through
``bosun run`` (see ``server/commands/pretool.py``).

A fresh process per prompt cannot afford numpy, scikit-learn or a model load
(oiax pays 0.9-4 s for them), so this module imports only the stdlib: it reads
the hook JSON on stdin, POSTs the prompt to the daemon's ``/v1/route`` (the URL
and token come from ``$BOSUN_HOME/daemon.json``), and prints
``hookSpecificOutput.additionalContext`` (at most 1,024 bytes: names, evidence,
notices). It never blocks the prompt: any failure exits 0 with no output and
records a telemetry failure. When no daemon answers it starts one (as ``bosun stdio`` does, detached)
and waits for it within its time budget; if the daemon is not up by then, the context says routing
is warming up instead of staying silent. Telemetry records the latency the harness saw: from this
process's start (``/proc/self/stat``, 10 ms ticks) to the answer, not the daemon's share alone.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any

from bosun.server.commands import config_of
from bosun.server.commands.run import HttpError, _dechunk, observe_url, post_json  # noqa: F401  # one stdlib HTTP client for both (re-exported)

if TYPE_CHECKING:  # argparse and pathlib are not imported on the hook's path (``main`` parses by hand)
    import argparse
    from pathlib import Path

NAME = "hook"
HELP = ("harness hooks: `bosun hook claude-code` (UserPromptSubmit: route the prompt via the daemon), "
        "`bosun hook claude-code-pretool` (PreToolUse: Bash commands through bosun run)")

MAX_CONTEXT_BYTES = 1024
DEFAULT_TIMEOUT_S = 2.0
WARMING = ("bosun: governance routing is warming up (its daemon is starting); policies that bear on this "
           "prompt are not checked yet. Call the route tool if a policy may apply.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("harness", choices=["claude-code", "claude-code-pretool"],
                        help="which harness hook to speak")
    parser.add_argument("--permission", choices=["allow", "ask"], default=None,
                        help="claude-code-pretool: also answer this permission decision for a rewritten command")
    parser.add_argument("--home", help="state directory holding daemon.json (default $BOSUN_HOME or ~/.bosun)")
    parser.add_argument("--timeout", type=float, default=None, help=f"seconds to wait for the daemon, "
                        f"starting it included (default {DEFAULT_TIMEOUT_S}; BOSUN_HOOK_START=0: never start it)")


def _home(args: argparse.Namespace) -> Path:
    return config_of(args).home


def route_url(daemon_url: str) -> str:
    """http://127.0.0.1:8790/mcp -> http://127.0.0.1:8790/v1/route"""
    return observe_url(daemon_url).replace("/v1/observe", "/v1/route")


def render(result: dict[str, Any], limit: int = MAX_CONTEXT_BYTES) -> str:
    """The context paragraph the agent reads: names and evidence, never rule text; '' when nothing applies."""
    hits = result.get("hits") or []
    notices = result.get("notices") or []
    if not hits:
        # an abstention adds nothing to the turn: a notice repeated on every quiet prompt is noise
        # that gets ignored (the route tool and telemetry still carry it)
        return ""
    lines = ["bosun: governance policies that may apply to this prompt (read one with the get_policy tool "
             "before acting; dismiss it if the evidence does not fit):"]
    for hit in hits:
        parts = [str(w) for w in hit.get("why") or []]
        if hit.get("requires"):
            parts.append(f"read with: {', '.join(map(str, hit['requires']))}")
        why = "; ".join(parts)
        lines.append(f"- {hit.get('name')}" + (f" ({why})" if why else ""))
    for notice in notices:
        if not str(notice).startswith("self-calibrated"):  # the same line every turn: not worth its tokens
            lines.append(f"! {notice}")
    return _clip("\n".join(lines), limit)


def _clip(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    cut = data[: limit - 3].decode("utf-8", "ignore")
    return cut.rstrip() + "..."


def process_age_ms() -> float | None:
    """Milliseconds since this process started (the interpreter's start-up included), from /proc."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            stat = fh.read().decode("ascii", "replace")
        start_ticks = int(stat.rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", "rb") as fh:
            uptime = float(fh.read().split()[0])
        return max(0.0, (uptime - start_ticks / os.sysconf("SC_CLK_TCK")) * 1000)
    except (OSError, ValueError, IndexError):
        return None


def delivered_ms(started: float) -> float:
    """End-to-end latency: the longer of the process's age and the time since ``started``."""
    inside = (time.perf_counter() - started) * 1000
    age = process_age_ms()
    return max(inside, age) if age is not None else inside


def _record_failure(failure_class: str, started: float) -> None:
    try:
        from bosun.server import telemetry

        telemetry.record_failure(failure_class, via="hook", delivered_ms=delivered_ms(started))
    except Exception:  # telemetry never costs a turn
        pass


def _record_route(result: dict[str, Any], started: float) -> None:
    try:
        from bosun.server import telemetry

        telemetry.record_route(result, via="hook", delivered_ms=delivered_ms(started))
    except Exception:
        pass


def start_daemon(home: Path) -> None:
    """Start the daemon as ``bosun stdio`` does (bridge.ensure_daemon: locked, one daemon), detached."""
    import subprocess

    code = "import sys; from pathlib import Path; from bosun.server.transport.bridge import ensure_daemon; " \
           "ensure_daemon(Path(sys.argv[1]))"
    subprocess.Popen([sys.executable, "-P", "-c", code, str(home)], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def _daemon(home: Path) -> tuple[str, str | None]:
    info = json.loads((home / "daemon.json").read_text())
    return route_url(str(info["url"])), info.get("token")


def _warming(started: float) -> int:
    out = {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": WARMING}}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    _record_failure("daemon", started)
    return 0


def _start_allowed(args: argparse.Namespace) -> bool:
    """BOSUN_HOOK_START (Config.hook_start); a bad value is read as on, since a hook never fails a prompt."""
    try:
        return bool(config_of(args).hook_start)
    except Exception:
        return True


def _ask(home: Path, prompt: str, timeout: float) -> tuple[int, bytes]:
    url, token = _daemon(home)
    return post_json(url, {"prompt": prompt}, token, timeout)


def _compass(home: Path, prompt: str, deadline: float) -> str:
    """The Tool Compass paragraph when the harness's tool list is kept in ``$BOSUN_HOME/tools.json``.

    Claude Code's hook input carries no tool list; ``bosun route --tools F --save-tools ...`` keeps
    one there. Nothing (and no import beyond the stdlib) when there is no such file or no time left.
    """
    left = deadline - time.perf_counter() - 0.1
    if left <= 0 or not (home / "tools.json").exists():
        return ""
    try:
        from bosun.server.commands.route import compass_context

        return compass_context(home, prompt, timeout=left)
    except Exception:  # the compass is extra: the routing context still goes out
        return ""


def run(args: argparse.Namespace) -> int:
    if args.harness == "claude-code-pretool":
        from bosun.server.commands.pretool import run_pretool

        return run_pretool(args)
    started = time.perf_counter()
    try:
        raw = sys.stdin.buffer.read()
        event = json.loads(raw.decode("utf-8")) if raw.strip() else {}
        prompt = event.get("prompt") if isinstance(event, dict) else None
        if not isinstance(prompt, str) or not prompt.strip():
            _record_failure("input", started)
            return 0
    except (ValueError, OSError):
        _record_failure("input", started)
        return 0
    timeout = args.timeout if args.timeout is not None else float(os.environ.get("BOSUN_HOOK_TIMEOUT_S", DEFAULT_TIMEOUT_S))
    home = _home(args)
    deadline = started + timeout
    try:
        status, payload = _ask(home, prompt, timeout)
    except TimeoutError:
        _record_failure("timeout", started)
        return 0
    except (OSError, ValueError, KeyError, TypeError):  # no daemon file, or nothing listening: start one
        if not _start_allowed(args):
            _record_failure("daemon", started)
            return 0
        try:
            start_daemon(home)
        except OSError:
            return _warming(started)
        while True:
            time.sleep(0.05)
            left = deadline - time.perf_counter() - 0.1
            if left <= 0:
                return _warming(started)
            try:
                status, payload = _ask(home, prompt, left)
                break
            except (OSError, ValueError, KeyError, TypeError):
                continue
    if status == 503:  # up, its model still loading
        return _warming(started)
    if status != 200:
        _record_failure("input" if status == 400 else "daemon", started)
        return 0
    try:
        result = json.loads(payload.decode("utf-8"))
    except ValueError:
        _record_failure("daemon", started)
        return 0
    try:
        context = render(result if isinstance(result, dict) else {})
        _record_route(result if isinstance(result, dict) else {}, started)
        tools_note = _compass(home, prompt, deadline)
        context = "\n".join(part for part in (context, tools_note) if part)
        if context:
            out = {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": context}}
            sys.stdout.write(json.dumps(out) + "\n")
            sys.stdout.flush()
    except Exception:
        _record_failure("render", started)
    return 0


class Options:
    """The parsed arguments (argparse's names, so ``run`` takes either)."""

    def __init__(self, harness: str) -> None:
        self.harness = harness
        self.permission: str | None = None
        self.home: str | None = None
        self.timeout: float | None = None


def quick_parse(argv: list[str]) -> Options | None:
    """The arguments without argparse (imports the hook's fresh process need not pay); None for anything
    else (argparse then parses, and reports the error or the help)."""
    positional: list[str] = []
    values: dict[str, str] = {}
    i = 0
    while i < len(argv):
        name, eq, value = argv[i].partition("=")
        if name in ("--permission", "--home", "--timeout"):
            if not eq:
                if i + 1 >= len(argv):
                    return None
                i += 1
                value = argv[i]
            values[name[2:]] = value
        elif name.startswith("-"):
            return None
        else:
            positional.append(argv[i])
        i += 1
    if len(positional) != 1 or positional[0] not in ("claude-code", "claude-code-pretool"):
        return None
    if values.get("permission") not in (None, "allow", "ask"):
        return None
    opts = Options(positional[0])
    opts.permission = values.get("permission")
    opts.home = values.get("home")
    try:
        opts.timeout = float(values["timeout"]) if "timeout" in values else None
    except ValueError:
        return None
    return opts


def main(argv: list[str] | None = None) -> int:
    """``python -m bosun.server.commands.hook claude-code`` (and ``bosun hook``): the hook without the whole CLI."""
    argv = sys.argv[1:] if argv is None else argv
    opts = quick_parse(argv)
    if opts is not None:
        return run(opts)  # type: ignore[arg-type]  # the same attributes as argparse's Namespace
    import argparse

    parser = argparse.ArgumentParser(prog="bosun hook")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
