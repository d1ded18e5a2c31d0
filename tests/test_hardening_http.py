"""Issue 14, items 4 and 5, on a real daemon: the same Host/Origin/body-size/nesting rules on every
HTTP route, ``/healthz`` without the token shows liveness only, and BOSUN_HOME is owner-only."""

from __future__ import annotations

import http.client
import json
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.helpers_proc import BOSUN, env_for, stop, wait_for_daemon

TOKEN = "hardening-test-token"
ROUTES = ("/healthz", "/v1/route", "/mcp")


def _call(url: str, method: str, path: str, body: bytes | None = None,
          headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, subprocess.Popen[bytes]]]:
    """One daemon for the module (a start costs ~3 s); the last test stops it and reads its log."""
    home = tmp_path_factory.mktemp("http") / "home"
    home.mkdir(mode=0o755)
    (home / "daemon.log").write_text("a log a bridge created with the default mode\n")
    (home / "daemon.log").chmod(0o644)
    proc = subprocess.Popen([*BOSUN, "serve", "--port", "0", "--home", str(home)],
                            env=env_for(home, BOSUN_TOKEN=TOKEN), stderr=subprocess.PIPE)
    try:
        url = wait_for_daemon(home, proc)["url"]
        yield url, home, proc
    finally:
        stop(proc.pid)
        proc.wait(timeout=15)


def test_foreign_host_and_origin_are_refused_on_every_route(daemon: tuple[str, Path, subprocess.Popen[bytes]]) -> None:
    url, _, _ = daemon
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    for path in ROUTES:
        method = "GET" if path == "/healthz" else "POST"
        body = None if method == "GET" else b'{"prompt": "deploy"}'
        status, _ = _call(url, method, path, body, {**auth, "Host": "evil.com"})
        assert status == 421, path
        status, _ = _call(url, method, path, body, {**auth, "Origin": "http://evil.com"})
        assert status == 403, path
    status, _ = _call(url, "GET", "/healthz", None, {**auth, "Origin": "http://localhost:3000"})
    assert status in (200, 503)  # a loopback origin is fine


def test_bodies_are_bounded_and_deep_nesting_is_a_clean_400(daemon: tuple[str, Path, subprocess.Popen[bytes]]) -> None:
    url, _, _ = daemon
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    big = json.dumps({"prompt": "x" * (2 << 20)}).encode()
    status, body = _call(url, "POST", "/v1/route", big, auth)
    assert status == 413 and b"limit" in body
    nested = b"[" * 100_000 + b"]" * 100_000
    for path in ("/v1/route", "/mcp"):
        status, body = _call(url, "POST", path, nested, {**auth, "Accept": "application/json, text/event-stream"})
        assert status == 400 and b"nested" in body, path


def test_healthz_without_the_token_is_liveness_only(daemon: tuple[str, Path, subprocess.Popen[bytes]]) -> None:
    url, home, _ = daemon
    status, body = _call(url, "GET", "/healthz")
    assert status in (200, 503)
    assert set(json.loads(body)) == {"status"} and str(home).encode() not in body
    status, body = _call(url, "GET", "/healthz", None, {"Authorization": f"Bearer {TOKEN}"})
    assert json.loads(body)["store"]["path"].startswith(str(home))


def test_bosun_home_is_owner_only_whatever_the_umask(daemon: tuple[str, Path, subprocess.Popen[bytes]]) -> None:
    url, home, _ = daemon
    _call(url, "GET", "/healthz", None, {"Authorization": f"Bearer {TOKEN}"})
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    files = {p.name: stat.S_IMODE(p.stat().st_mode) for p in home.iterdir() if p.is_file()}
    assert {"bosun.db", "daemon.json", "daemon.log"} <= set(files)
    assert {name: mode for name, mode in files.items() if mode != 0o600} == {}


@pytest.mark.parametrize(("text", "depth"), [
    (b'{"a": [1, 2, {"b": "]]]]"}]}', 3), (b'"[[[[["', 0), (b"[" * 70 + b"]" * 70, 70), (b'{"s": "\\"[["}', 1),
])
def test_json_depth_skips_strings(text: bytes, depth: int) -> None:
    from bosun.server.transport.json_scan import json_depth

    assert json_depth(text) == depth


def test_the_daemon_log_holds_no_traceback(daemon: tuple[str, Path, subprocess.Popen[bytes]]) -> None:
    """Last in the module: after every refusal above, the daemon's log has no traceback."""
    _, _, proc = daemon
    stop(proc.pid)
    proc.wait(timeout=15)
    assert proc.stderr is not None
    log = proc.stderr.read()
    assert b"RecursionError" not in log and b"Traceback" not in log, log[-2000:]
