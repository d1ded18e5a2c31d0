"""``bosun dashboard``: open the running daemon's dashboard in a browser, or print its URL.

The page is served by the daemon itself (``/dashboard`` on its HTTP port). It opens in a browser
when this is a desktop session (a terminal and a display); otherwise, or with ``--print``, the URL
is printed. A daemon with a token (bound beyond loopback) needs ``Authorization: Bearer <token>``
on every request: the command says so, since a browser does not send it by itself.
"""

from __future__ import annotations

import argparse
import os
import sys

NAME = "dashboard"
HELP = "open the daemon's dashboard (tasks, savings, routing, audits) in a browser, or print its URL"
EXAMPLE = "bosun dashboard --print"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--print", dest="print_only", action="store_true", help="print the URL, never open a browser")
    parser.add_argument("--home", help="state directory (default $BOSUN_HOME or ~/.bosun)")


def desktop() -> bool:
    """A browser can be shown: a terminal on a machine with a display (macOS and Windows always have one)."""
    if not sys.stdout.isatty():
        return False
    return sys.platform in ("darwin", "win32") or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def run(args: argparse.Namespace) -> int:
    from bosun.server.commands import config_of
    from bosun.server.commands._daemon import DaemonUnreachable, daemon_base, get_json

    config = config_of(args)
    try:
        base, token = daemon_base(config.home)
        status, _body = get_json(base, "/healthz", token)
    except DaemonUnreachable as exc:
        print(f"{exc}", file=sys.stderr)
        return 1
    url = base + "/dashboard"
    print(url)
    if token:
        print("this daemon has a token: every request needs the header 'Authorization: Bearer <token>' "
              f"(the token is in {config.home / 'daemon.json'})", file=sys.stderr)
        return 0
    if status not in (200, 503):
        print(f"warning: the daemon answered /healthz with {status}", file=sys.stderr)
    if not args.print_only and desktop():
        import webbrowser

        if not webbrowser.open(url):
            print("no browser could be started: open the URL above", file=sys.stderr)
    return 0
