"""The small file in $BOSUN_HOME that says where the daemon listens.

``daemon.json``: ``{"url", "pid", "token", "started_at", "version"}``, written
atomically with mode 0600 (it may carry the bearer token). ``bosun stdio`` and
the Claude Code hook read it; both must stay light (stdlib only).

``serve.lock`` makes one daemon per BOSUN_HOME: the serving process holds an exclusive
``flock`` on it for its whole life (the kernel drops it when the process dies, even on
SIGKILL, so a crash never leaves a stale lock) and writes its pid in it. ``daemon.lock`` is
the bridges' lock around starting a daemon; it is held while the new daemon starts, so the
daemon cannot take that one.
"""

from __future__ import annotations

import fcntl
import json
import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # `bosun stdio` (the bridge) reads this module on every attach: no pathlib, no typing
    from pathlib import Path
    from typing import Any, TextIO

DAEMON_FILE = "daemon.json"
LOCK_FILE = "daemon.lock"
SERVE_LOCK_FILE = "serve.lock"
LOG_FILE = "daemon.log"


class DaemonRunning(RuntimeError):
    """Another daemon serves this BOSUN_HOME; the message names its pid and URL."""


def hold_serve_lock(home: Path) -> TextIO:
    """Take this home's daemon lock for the life of the process (keep the returned file open).

    Raises ``DaemonRunning`` naming the pid and URL of the daemon that holds it; nothing is
    written then, so its ``daemon.json`` stays as it is."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    fh = os.fdopen(os.open(home / SERVE_LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600), "r+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = fh.read().strip()
        fh.close()
        data = read_daemon_file(home) or {}
        pid = holder or str(data.get("pid", "unknown"))
        url = data.get("url") if str(data.get("pid")) == pid else None
        where = f"at {url}" if url else "(still starting; its URL is not written yet)"
        raise DaemonRunning(f"another bosun daemon already serves {home}: pid {pid} {where}; "
                            "use it (bosun stdio attaches to it), stop it first, or choose another --home") from None
    fh.seek(0)
    fh.truncate()
    fh.write(str(os.getpid()))
    fh.flush()
    return fh


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


def read_daemon_file(home: Path | str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(home, DAEMON_FILE), "rb") as fh:  # a str home too (the bridge passes one)
            data = json.loads(fh.read())
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
