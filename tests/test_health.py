"""``bosun health``: each check, and the exit code's bits naming what failed."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

from bosun.server.commands import health
from tests.helpers_proc import BOSUN, env_for, stop, wait_for_daemon, wait_ready


def test_store_check(tmp_path: Path) -> None:
    assert health.check_store(tmp_path / "none.db").state == "ok"  # created by the first serve
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database" * 100)
    assert health.check_store(junk).failed
    newer = tmp_path / "newer.db"
    conn = sqlite3.connect(newer)
    conn.execute("CREATE TABLE schema_migrations (name TEXT, applied_at REAL)")
    conn.executemany("INSERT INTO schema_migrations VALUES (?, 0)", [(f"m{i}",) for i in range(99)])
    conn.commit()
    conn.close()
    check = health.check_store(newer)
    assert check.failed and "newer than this bosun" in check.detail


def test_daemon_body_maps_to_checks() -> None:
    body = {"version": "x", "uptime_s": 3, "model": {"state": "failed", "error": "weights missing"},
            "route_index": {"state": "building", "done": 3, "total": 9}}
    daemon, model, index = health.from_daemon(body, "http://127.0.0.1:1")
    assert daemon.state == "ok" and model.failed and "weights missing" in model.detail
    assert index.state == "starting" and not index.failed  # building serves a first index meanwhile
    assert health.exit_code([daemon, model, index]) == health.BITS["model"]
    failed = [health.Check(p, "failed", "") for p in health.BITS]
    assert health.exit_code(failed) == 15


def test_health_against_a_real_daemon_and_after_it_stops(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc = subprocess.Popen([*BOSUN, "serve", "--port", "0", "--home", str(home)], env=env_for(home),
                            stderr=subprocess.DEVNULL)
    try:
        wait_ready(wait_for_daemon(home, proc)["url"])
        res = subprocess.run([*BOSUN, "health", "--json", "--home", str(home)], env=env_for(home),
                             capture_output=True, timeout=120)
        body = json.loads(res.stdout)
        states = {c["part"]: c["state"] for c in body["checks"]}
        assert res.returncode == 0 == body["exit_code"], body
        assert states["daemon"] == "ok" and states["model"] == "ok" and states["store"] == "ok"
        assert states["index"] in ("ok", "starting")
        shown = subprocess.run([*BOSUN, "dashboard", "--print", "--home", str(home)], env=env_for(home),
                               capture_output=True, timeout=120)
        assert shown.returncode == 0 and shown.stdout.decode().strip().endswith("/dashboard")
        stats = subprocess.run([*BOSUN, "stats", "--json", "--home", str(home)], env=env_for(home),
                               capture_output=True, timeout=120)
        assert stats.returncode == 0 and json.loads(stats.stdout)["source"] == "daemon"
    finally:
        stop(proc.pid)
        proc.wait(timeout=20)
    res = subprocess.run([*BOSUN, "health", "--home", str(home)], env=env_for(home), capture_output=True,
                         timeout=120)
    assert res.returncode & health.BITS["daemon"]
    assert not res.returncode & health.BITS["store"]
    assert b"daemon  failed" in res.stdout
    gone = subprocess.run([*BOSUN, "dashboard", "--home", str(home)], env=env_for(home), capture_output=True,
                          timeout=120)
    assert gone.returncode == 1 and b"bosun serve" in gone.stderr
