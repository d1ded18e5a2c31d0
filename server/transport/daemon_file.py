"""The small file in $BOSUN_HOME that says where the daemon listens.

``daemon.json``: ``{"url", "pid", "token", "started_at", "version"}``, written
atomically with mode 0600 (it may carry the bearer token). ``bosun stdio`` and
the Claude Code hook read it; both must stay light (stdlib only).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

DAEMON_FILE = "daemon.json"
LOCK_FILE = "daemon.lock"
LOG_FILE = "daemon.log"


def daemon_file(home: Path) -> Path:
    return home / DAEMON_FILE


def write_daemon_file(home: Path, url: str, token: str | None, version: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = daemon_file(home)
    tmp = path.with_suffix(".tmp")
    body = {"url": url, "pid": os.getpid(), "token": token, "started_at": time.time(), "version": version}
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(body, fh)
    os.replace(tmp, path)
    return path


def read_daemon_file(home: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(daemon_file(home).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        return None
    return data


def remove_daemon_file(home: Path) -> None:
    """Remove the file only if it still names this process."""
    data = read_daemon_file(home)
    if data is not None and data.get("pid") == os.getpid():
        try:
            daemon_file(home).unlink()
        except OSError:
            pass


def pid_alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def health_url(mcp_url: str) -> str:
    base = mcp_url[: -len("/mcp")] if mcp_url.endswith("/mcp") else mcp_url.rstrip("/")
    return base + "/healthz"
