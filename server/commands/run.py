"""``bosun run -- CMD ...``: run a command and keep its big output out of the agent's prompt.

    bosun run --task t_1a2b -- pytest -q
    bosun run --intent "why does test_parse fail" -- pytest -q tests/test_parse.py

The command inherits the working directory, the environment and stdin; its stdout and stderr
(merged, as an agent reads them) are written by the command itself straight into a spool file
under ``$BOSUN_HOME/spool`` (0600), so the output is never held in memory and never lost: if the
daemon is gone or dies mid-run, the spool stays and the output is still printed. The running
daemon (started as ``bosun stdio`` starts it when none answers) then observes the spool by name:
the output is scrubbed, stored and journaled in the task as a ``bash`` call with its exit code, so
precheck's duplicate and loop rules see it. Printed: the output itself when it is small, its
compressed view when that is cheaper, else the stub (ref, sizes, outline, recall calls; with
``--intent``, the lines that bear on it). The exit code is the command's; a command killed by a
signal kills this process with the same signal; SIGINT, SIGTERM, SIGHUP and SIGQUIT sent here
reach the command.

Every command an agent runs pays this process's start-up, so the work is in ``run_fast.py`` (with
``_lean.py``: modules built into the interpreter only); this module adds the argparse parser and the
command's registration. The PreToolUse hook runs ``python -S -P .../_run_script.py``: without
``site`` the interpreter starts in a third of the time, and ``site`` is loaded only when bosun's own
modules are needed (starting the daemon, ``--help``). An output of at most ``PRINT_FIRST_BYTES`` is
printed at once and handed to the daemon by a detached child, so the caller does not wait for the
journal write either.
"""

from __future__ import annotations

import sys

from bosun.server.commands._lean import HttpError, post_json, with_site  # noqa: F401  # re-exported
from bosun.server.commands._lean import dechunk as _dechunk  # noqa: F401
from bosun.server.commands.run_fast import (  # noqa: F401  # the command's pieces, re-exported for callers and tests
    MODES,
    PRINT_FIRST_BYTES,
    DaemonError,
    Options,
    copy_out,
    daemon_observe,
    exit_like,
    open_spool,
    quick_parse,
    render,
    run,
    run_command,
    settings,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

NAME = "run"
HELP = "run a command; its output is stored in bosun and printed whole (small) or as a stub (large)"
EXAMPLE = "bosun run -- pytest -q"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    import argparse

    parser.add_argument("--task", default=None, help="task id to journal the command in (default $BOSUN_TASK)")
    parser.add_argument("--session", default=None,
                        help="without a task: a key naming this shell session's task (default: the directory)")
    parser.add_argument("--intent", default=None, help="what you need from the output: its lines come back too")
    parser.add_argument("--mode", choices=list(MODES),
                        help="pruning mode for this output (default: the task's, else BOSUN_PRUNE_MODE)")
    parser.add_argument("--shell", action="store_true", help="run the one argument through /bin/sh -c")
    parser.add_argument("--no-start", action="store_true",
                        help="never start a daemon (also BOSUN_RUN_START=0): print the output, keep the spool")
    parser.add_argument("--home", help="state directory (default $BOSUN_HOME or ~/.bosun)")
    parser.add_argument("cmd", nargs=argparse.REMAINDER, help="-- the command and its arguments")


def observe_url(daemon_url: str) -> str:
    """http://127.0.0.1:8790/mcp -> http://127.0.0.1:8790/v1/observe"""
    from bosun.server.commands._lean import endpoint

    return endpoint(daemon_url, "/v1/observe")


def parse_full(argv: list[str]) -> argparse.Namespace:
    """The arguments through argparse (``--help``, errors): what the quick parser does not take."""
    import argparse

    from bosun.server.commands import with_example

    parser = argparse.ArgumentParser(prog="bosun run", **with_example(EXAMPLE))
    add_arguments(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """``python -m bosun.server.commands.run -- CMD`` (and ``bosun run``): the same without the CLI."""
    argv = sys.argv[1:] if argv is None else argv
    opts = quick_parse(argv)
    return run(opts if opts is not None else parse_full(argv))


if __name__ == "__main__":
    sys.exit(main())
