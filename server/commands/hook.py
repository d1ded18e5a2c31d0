"""``bosun hook claude-code``: a UserPromptSubmit hook that asks the warm daemon where a prompt routes.

A fresh process per prompt cannot afford numpy, scikit-learn or a model load
(oiax pays 0.9-4 s for them), so this module imports only the stdlib: it reads
the hook JSON on stdin, POSTs the prompt to the daemon's ``/v1/route`` (the URL
and token come from ``$BOSUN_HOME/daemon.json``), and prints
``hookSpecificOutput.additionalContext`` (at most 1,024 bytes: names, evidence,
notices). It never blocks the prompt: any failure exits 0 with no output and
records a telemetry failure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

NAME = "hook"
HELP = "harness hooks: `bosun hook claude-code` (UserPromptSubmit: route the prompt via the running daemon)"

MAX_CONTEXT_BYTES = 1024
DEFAULT_TIMEOUT_S = 2.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("harness", choices=["claude-code"], help="which harness's hook protocol to speak")
    parser.add_argument("--home", help="state directory holding daemon.json (default $BOSUN_HOME or ~/.bosun)")
    parser.add_argument("--timeout", type=float, default=None, help=f"seconds to wait for the daemon (default {DEFAULT_TIMEOUT_S})")


def _home(args: argparse.Namespace) -> Path:
    value = getattr(args, "home", None) or os.environ.get("BOSUN_HOME", "").strip()
    return Path(value).expanduser() if value else Path("~/.bosun").expanduser()


def route_url(daemon_url: str) -> str:
    """http://127.0.0.1:8790/mcp -> http://127.0.0.1:8790/v1/route"""
    parts = urlsplit(daemon_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"daemon url {daemon_url!r} is not an http(s) URL")
    return urlunsplit((parts.scheme, parts.netloc, "/v1/route", "", ""))


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
        lines.append(f"! {notice}")
    return _clip("\n".join(lines), limit)


def _clip(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    cut = data[: limit - 3].decode("utf-8", "ignore")
    return cut.rstrip() + "..."


def _record_failure(failure_class: str, started: float) -> None:
    try:
        from bosun.server import telemetry

        telemetry.record_failure(failure_class, via="hook", delivered_ms=(time.perf_counter() - started) * 1000)
    except Exception:  # telemetry never costs a turn
        pass


def run(args: argparse.Namespace) -> int:
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
    try:
        info = json.loads((_home(args) / "daemon.json").read_text())
        url = route_url(str(info["url"]))
        token = info.get("token")
    except (OSError, ValueError, KeyError, TypeError):
        _record_failure("daemon", started)
        return 0
    timeout = args.timeout if args.timeout is not None else float(os.environ.get("BOSUN_HOOK_TIMEOUT_S", DEFAULT_TIMEOUT_S))
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=json.dumps({"prompt": prompt}).encode("utf-8"), headers=headers,
                                     method="POST")
    try:
        # loopback daemon: skip proxy discovery, which costs a few ms per fresh process
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=timeout) as resp:
            result = json.loads(resp.read().decode("utf-8"))
    except TimeoutError:
        _record_failure("timeout", started)
        return 0
    except urllib.error.HTTPError as exc:
        _record_failure("input" if exc.code == 400 else "daemon", started)
        return 0
    except (urllib.error.URLError, OSError, ValueError):
        _record_failure("daemon", started)
        return 0
    try:
        context = render(result if isinstance(result, dict) else {})
        if context:
            out = {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": context}}
            sys.stdout.write(json.dumps(out) + "\n")
            sys.stdout.flush()
    except Exception:
        _record_failure("render", started)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m bosun.server.commands.hook claude-code``: the same hook without building the whole CLI."""
    parser = argparse.ArgumentParser(prog="bosun hook")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
