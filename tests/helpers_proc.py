"""Helpers for tests that run bosun as a real process."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

BOSUN = [sys.executable, "-m", "bosun"]
# One document of the shipped demo corpus: enough for a daemon whose test is about processes, transports
# or the store, not routing quality. Its index builds from one document instead of the demo's seventeen
# (measured: ~2.5 s less CPU per daemon start on this 2-core machine, 3.8-4.4 s instead of 6.3-7.2 s).
SMALL_CORPUS_DOCS = ("secrets-handling.md",)
_small_corpus: Path | None = None


def env_for(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOSUN_")}
    env["BOSUN_HOME"] = str(home)
    env.update(extra)
    return env


def small_corpus() -> Path:
    """A policy directory holding ``SMALL_CORPUS_DOCS`` copied from the demo corpus (made once per process)."""
    global _small_corpus
    if _small_corpus is None:
        from bosun.server.services.policies import demo_corpus_dir

        target = Path(tempfile.mkdtemp(prefix="bosun-small-corpus-"))
        atexit.register(shutil.rmtree, target, True)
        for name in SMALL_CORPUS_DOCS:
            shutil.copyfile(demo_corpus_dir() / name, target / name)
        _small_corpus = target
    return _small_corpus


def quick_env(home: Path, **extra: str) -> dict[str, str]:
    """``env_for`` with the one-document corpus: for daemons whose test does not judge routing."""
    return env_for(home, BOSUN_POLICIES=str(small_corpus()), **extra)


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
