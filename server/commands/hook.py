"""Harness hooks. ``bosun hook claude-code``: a UserPromptSubmit hook that asks the warm daemon where a
prompt routes. ``bosun hook claude-code-pretool``: a PreToolUse hook that sends Bash commands through
``bosun run`` (see ``server/commands/pretool.py``).

A fresh process per prompt cannot afford numpy, scikit-learn or a model load
(oiax pays 0.9-4 s for them), so this module imports only the stdlib and ``_daemon``: it reads
the hook JSON on stdin, POSTs the prompt to the daemon's ``/v1/route`` (the URL
and token come from ``$BOSUN_HOME/daemon.json``), and prints
``hookSpecificOutput.additionalContext`` (at most 1,024 bytes: names, evidence,
notices). It never blocks the prompt: any failure exits 0 with no output and
records a telemetry failure. When no daemon answers it starts one (as ``bosun stdio`` does, detached)
and waits for it within its time budget; if the daemon is not up by then, the context says routing
is warming up instead of staying silent. Telemetry records the latency the harness saw: from this
process's start (``/proc/self/stat``, 10 ms ticks) to the answer, not the daemon's share alone.

One function, ``main``, serves every way the hook starts: the console script (``bosun hook``, handed its
arguments before the CLI parser is built), ``python -m bosun.server.commands.hook`` and the form the settings
snippet writes, ``python -S -P .../_hook_script.py claude-code`` (no ``site``: this module and ``_daemon``
are then imported as plain siblings). Starting the daemon, the tool compass and ``--help`` load bosun's
other modules when needed.
"""

from __future__ import annotations

import json
import os
import sys
import time

if __package__:
    from bosun.server.commands import _daemon
else:  # run as a script's sibling under ``python -S -P`` (see _hook_script.py)
    import _daemon  # type: ignore[no-redef]

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import Any

NAME = "hook"
HELP = ("harness hooks: `bosun hook claude-code` (UserPromptSubmit: route the prompt via the daemon), "
        "`bosun hook claude-code-pretool` (PreToolUse: Bash commands through bosun run), "
        "`bosun hook settings` (print the Claude Code settings that run both)")
EXAMPLE = "bosun hook settings --write ~/.claude/settings.json"
HARNESSES = ("claude-code", "claude-code-pretool")
MAX_CONTEXT_BYTES = 1024
DEFAULT_TIMEOUT_S = 2.0
WARMING = ("bosun: governance routing is warming up (its daemon is starting); policies that bear on this "
           "prompt are not checked yet. Call the route tool if a policy may apply.")


class Options:
    """The parsed arguments (argparse's names, so ``run`` takes either)."""

    def __init__(self, harness: str) -> None:
        self.harness = harness
        self.permission: str | None = None
        self.home: str | None = None
        self.timeout: float | None = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("harness", choices=[*HARNESSES, "settings"],
                        help="which harness hook to speak (settings: print the Claude Code settings snippet)")
    parser.add_argument("--permission", choices=["allow", "ask"], default=None,
                        help="claude-code-pretool: also answer this permission decision for a rewritten command")
    parser.add_argument("--home", help="state directory holding daemon.json (default $BOSUN_HOME or ~/.bosun)")
    parser.add_argument("--timeout", type=float, default=None, help=f"seconds to wait for the daemon, "
                        f"starting it included (default {DEFAULT_TIMEOUT_S}; BOSUN_HOOK_START=0: never start it)")
    parser.add_argument("--write", metavar="SETTINGS_JSON", default=None,
                        help="settings: merge the hooks into this Claude Code settings file instead of printing")


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
    if len(positional) != 1 or positional[0] not in HARNESSES:
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
    return clip("\n".join(lines), limit)


def clip(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    cut = data[: limit - 3].decode("utf-8", "ignore")
    return cut.rstrip() + "..."


def delivered_ms(started: float) -> float:
    """End-to-end latency: the longer of the process's age and the time since ``started``."""
    inside = (time.perf_counter() - started) * 1000
    age = _daemon.process_age_ms()
    return max(inside, age) if age is not None else inside


def record_failure(failure_class: str, started: float) -> None:
    """One failed route attempt in telemetry (``telemetry.record_failure``'s event)."""
    _daemon.telemetry_write({"event": "route", "outcome": "failed", "failure_class": failure_class, "via": "hook",
                             "delivered_ms": round(delivered_ms(started), 3)})


def record_route(result: dict[str, Any], started: float) -> None:
    """One answered route attempt in telemetry (``telemetry.record_route``'s event)."""
    hits = result.get("hits") or []
    _daemon.telemetry_write({
        "event": "route",
        "outcome": "routed" if hits else "abstained",
        "via": "hook",
        "degraded": bool(result.get("degraded", False)),
        "corpus_size": int(result.get("corpus_size", 0)),
        "route_ms": round(float(result.get("route_ms", 0.0)), 3),
        "delivered_ms": round(delivered_ms(started), 3),
        "cached": bool(result.get("cached", False)),
        "names": [h.get("name") for h in hits if isinstance(h, dict)],
        "notices": len(result.get("notices") or []),
    })


def start_allowed() -> bool:
    """BOSUN_HOOK_START (on | off | 1 | 0, as ``Config`` reads it); a bad value is read as on, since a hook
    never fails a prompt."""
    return os.environ.get("BOSUN_HOOK_START", "on").strip().lower() not in ("off", "0")


def start_daemon(home: str) -> None:
    """Start the daemon as ``bosun stdio`` does (bridge.ensure_daemon: locked, one daemon), detached."""
    import subprocess

    code = "import sys; from pathlib import Path; from bosun.server.transport.bridge import ensure_daemon; " \
           "ensure_daemon(Path(sys.argv[1]))"
    subprocess.Popen([sys.executable, "-P", "-c", code, str(home)], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def compass(home: str, prompt: str, deadline: float) -> str:
    """The Tool Compass paragraph when the harness's tool list is kept in ``$BOSUN_HOME/tools.json``.

    Claude Code's hook input carries no tool list; ``bosun route --tools F --save-tools ...`` keeps
    one there. Nothing (and no import beyond the stdlib) when there is no such file or no time left.
    """
    left = deadline - time.perf_counter() - 0.1
    if left <= 0 or not os.path.exists(os.path.join(home, "tools.json")):
        return ""
    try:
        _daemon.with_site()
        from pathlib import Path

        from bosun.server.commands.route import compass_context

        return compass_context(Path(home), prompt, timeout=left)
    except Exception:  # the compass is extra: the routing context still goes out
        return ""


def _say(context: str) -> None:
    out = {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": context}}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


def _ask(home: str, prompt: str, timeout: float) -> tuple[int, bytes]:
    url, token = _daemon.read_daemon(home)
    return _daemon.post_json(_daemon.endpoint(url, "/v1/route"), {"prompt": prompt}, token, timeout)


def read_prompt() -> str | None:
    """The prompt of the hook event on stdin; None when there is none."""
    raw = sys.stdin.buffer.read()
    event = json.loads(raw) if raw.strip() else {}
    prompt = event.get("prompt") if isinstance(event, dict) else None
    return prompt if isinstance(prompt, str) and prompt.strip() else None


def route(opts: Any, starter: Callable[[str], None] | None = None,
          compass_of: Callable[[str, str, float], str] = compass) -> int:
    """The UserPromptSubmit hook: route the prompt through the warm daemon (started when none answers) and
    print the context; always exit 0 (a hook never blocks the prompt)."""
    started = time.perf_counter()
    try:
        prompt = read_prompt()
    except (ValueError, OSError):
        prompt = None
    if prompt is None:
        record_failure("input", started)
        return 0
    timeout = opts.timeout
    if timeout is None:
        try:
            timeout = float(os.environ.get("BOSUN_HOOK_TIMEOUT_S", DEFAULT_TIMEOUT_S))
        except ValueError:
            timeout = DEFAULT_TIMEOUT_S
    home = _daemon.home_dir(opts.home)
    deadline = started + timeout
    try:
        status, payload = _ask(home, prompt, timeout)
    except TimeoutError:
        record_failure("timeout", started)
        return 0
    except (OSError, ValueError, KeyError, TypeError):  # no daemon file, or nothing listening: start one
        if not start_allowed():
            record_failure("daemon", started)
            return 0
        try:
            (starter or start_daemon)(home)
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
        record_failure("input" if status == 400 else "daemon", started)
        return 0
    try:
        result = json.loads(payload)
    except ValueError:
        record_failure("daemon", started)
        return 0
    try:
        result = result if isinstance(result, dict) else {}
        context = render(result)
        record_route(result, started)
        tools_note = compass_of(home, prompt, deadline)
        context = "\n".join(part for part in (context, tools_note) if part)
        if context:
            _say(context)
    except Exception:
        record_failure("render", started)
    return 0


def _warming(started: float) -> int:
    _say(WARMING)
    record_failure("daemon", started)
    return 0


def run(args: Any) -> int:
    """One hook call, from argparse's Namespace or ``quick_parse``'s Options (the same attribute names)."""
    if args.harness == "claude-code-pretool":
        if __package__:
            from bosun.server.commands.pretool import run_pretool
        else:
            from pretool import run_pretool  # type: ignore[no-redef]
        return run_pretool(args)
    if args.harness == "settings":
        _daemon.with_site()
        from bosun.server.commands.hook_settings import run_settings

        return run_settings(args)
    return route(args)


def main(argv: list[str] | None = None) -> int:
    """Every form of the hook (see the module's docstring); anything ``quick_parse`` does not take (``--help``,
    ``settings``, a typo) goes to argparse, which needs bosun's modules."""
    argv = sys.argv[1:] if argv is None else argv
    return run(_daemon.parse_args(argv, quick_parse, "bosun hook", EXAMPLE, add_arguments))


if __name__ == "__main__":
    sys.exit(main())
