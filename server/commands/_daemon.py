"""Reaching the running daemon of a home from a CLI command (``stats``, ``health``, ``dashboard``).

``daemon.json`` names its URL and token (0600, beside the database); every request here is a
plain stdlib GET with the bearer token, and a short timeout so a hung daemon never hangs the shell.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

TIMEOUT_S = 10.0


class DaemonUnreachable(Exception):
    """No daemon answers for this home (the message says why)."""


def daemon_base(home: Path) -> tuple[str, str | None]:
    """``(http://host:port, token)`` of the daemon serving ``home``; DaemonUnreachable when none is recorded."""
    from bosun.server.transport.daemon_file import pid_alive, read_daemon_file

    info = read_daemon_file(home)
    if not info or not isinstance(info.get("url"), str):
        raise DaemonUnreachable(f"no daemon is running for {home} (no daemon.json); start one with `bosun serve`")
    if "pid" in info and not pid_alive(info["pid"]):
        raise DaemonUnreachable(f"the daemon recorded in {home / 'daemon.json'} (pid {info['pid']}) is not running")
    token = info.get("token")
    return str(info["url"]).rsplit("/mcp", 1)[0], token if isinstance(token, str) and token else None


def get_json(base: str, path: str, token: str | None, timeout: float = TIMEOUT_S) -> tuple[int, dict[str, Any]]:
    """``(status, body)`` of a GET; DaemonUnreachable when nothing answers."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(base + path, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return int(resp.status), json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read() or b"{}")
        except ValueError:
            return exc.code, {}
    except (OSError, ValueError) as exc:
        raise DaemonUnreachable(f"the daemon at {base} does not answer: {exc}") from exc
