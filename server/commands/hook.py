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

import sys
from typing import TYPE_CHECKING

from bosun.server.commands import _lean, hook_fast
from bosun.server.commands._lean import HttpError, post_json  # noqa: F401  # re-exported
from bosun.server.commands.hook_fast import (  # noqa: F401  # the hook's pieces, re-exported for callers and tests
    DEFAULT_TIMEOUT_S,
    MAX_CONTEXT_BYTES,
    WARMING,
    Options,
    quick_parse,
    render,
)

if TYPE_CHECKING:  # argparse and pathlib are not imported on the hook's path (``main`` parses by hand)
    import argparse
    from pathlib import Path

NAME = "hook"
HELP = ("harness hooks: `bosun hook claude-code` (UserPromptSubmit: route the prompt via the daemon), "
        "`bosun hook claude-code-pretool` (PreToolUse: Bash commands through bosun run), "
        "`bosun hook settings` (print the Claude Code settings that run both)")
EXAMPLE = "bosun hook settings --write ~/.claude/settings.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("harness", choices=["claude-code", "claude-code-pretool", "settings"],
                        help="which harness hook to speak (settings: print the Claude Code settings snippet)")
    parser.add_argument("--permission", choices=["allow", "ask"], default=None,
                        help="claude-code-pretool: also answer this permission decision for a rewritten command")
    parser.add_argument("--home", help="state directory holding daemon.json (default $BOSUN_HOME or ~/.bosun)")
    parser.add_argument("--timeout", type=float, default=None, help=f"seconds to wait for the daemon, "
                        f"starting it included (default {DEFAULT_TIMEOUT_S}; BOSUN_HOOK_START=0: never start it)")
    parser.add_argument("--write", metavar="SETTINGS_JSON", default=None,
                        help="settings: merge the hooks into this Claude Code settings file instead of printing")


def route_url(daemon_url: str) -> str:
    """http://127.0.0.1:8790/mcp -> http://127.0.0.1:8790/v1/route"""
    return _lean.endpoint(daemon_url, "/v1/route")


def observe_url(daemon_url: str) -> str:
    """http://127.0.0.1:8790/mcp -> http://127.0.0.1:8790/v1/observe"""
    return _lean.endpoint(daemon_url, "/v1/observe")


def process_age_ms() -> float | None:
    return _lean.process_age_ms()


def delivered_ms(started: float) -> float:
    return hook_fast.delivered_ms(started)


def start_daemon(home: Path) -> None:
    """Start the daemon as ``bosun stdio`` does (bridge.ensure_daemon: locked, one daemon), detached."""
    hook_fast.start_daemon(str(home))


def run(args: argparse.Namespace) -> int:
    if args.harness == "claude-code-pretool":
        from bosun.server.commands.pretool import run_pretool

        return run_pretool(args)
    if args.harness == "settings":
        from bosun.server.commands.hook_settings import run_settings

        return run_settings(args)
    # ``start_daemon`` is looked up now, so a caller (a test) may replace it
    return hook_fast.route(args, starter=lambda home: start_daemon(_path(home)))


def _path(home: str) -> Path:
    from pathlib import Path

    return Path(home)


def main(argv: list[str] | None = None) -> int:
    """``python -m bosun.server.commands.hook claude-code`` (and ``bosun hook``): the hook without the whole CLI."""
    argv = sys.argv[1:] if argv is None else argv
    opts = quick_parse(argv)
    if opts is not None:
        return run(opts)  # type: ignore[arg-type]  # the same attributes as argparse's Namespace
    import argparse

    from bosun.server.commands import with_example

    parser = argparse.ArgumentParser(prog="bosun hook", **with_example(EXAMPLE))
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
