"""Helpers for tests that run bosun as a real process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

BOSUN = [sys.executable, "-m", "bosun"]


def env_for(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOSUN_")}
    env["BOSUN_HOME"] = str(home)
    env.update(extra)
    return env


def wait_for_daemon(home: Path, proc: subprocess.Popen[bytes] | None = None, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"daemon exited early with {proc.returncode}")
        try:
            data: dict[str, Any] = json.loads((home / "daemon.json").read_text())
            return data
        except (OSError, ValueError):
            time.sleep(0.02)
    raise AssertionError("daemon.json never appeared")


def health(url: str) -> tuple[int, dict[str, Any]]:
    hz = url.rsplit("/mcp", 1)[0] + "/healthz"
    try:
        with urllib.request.urlopen(hz, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def wait_ready(url: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, body = health(url)
        if status == 200:
            return body
        assert status == 503, status
        time.sleep(0.05)
    raise AssertionError("model never became ready")


def stop(pid: int, timeout: float = 15) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)


def serve_pids(home: Path) -> list[int]:
    """PIDs of bosun daemons serving ``home`` (from /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"serve" in cmd and str(home).encode() in cmd and any(c.endswith(b"bosun") for c in cmd):
            pids.append(int(entry.name))
    return pids
