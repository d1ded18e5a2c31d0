"""bosun as a real process: stdio, HTTP, the bearer token, and the shared daemon behind `bosun stdio`."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.helpers_proc import BOSUN, env_for, health, serve_pids, stop, wait_for_daemon, wait_ready

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
}
MISSING_REF = "mem://sha256:" + "0" * 64


def _send(proc: subprocess.Popen[bytes], msg: dict[str, object]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(msg).encode() + b"\n")
    proc.stdin.flush()


def test_stdio_answers_initialize_before_the_model_is_ready_and_keeps_stdout_clean(tmp_path: Path) -> None:
    home = tmp_path / "home"
    # stdio and HTTP in one process: HTTP lets the test watch the model load
    proc = subprocess.Popen(
        [*BOSUN, "serve", "--stdio", "--port", "0", "--home", str(home)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env_for(home),
    )
    try:
        assert proc.stdout is not None
        _send(proc, INIT)
        first = proc.stdout.readline()
        answered_at = time.time()
        assert json.loads(first)["result"]["serverInfo"]["name"] == "bosun"
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                     "params": {"name": "recall", "arguments": {"ref": MISSING_REF}}})
        daemon = wait_for_daemon(home, proc)
        ready = wait_ready(daemon["url"])
        assert ready["model"]["loads"] == 1
        # the handshake did not wait for the model: it was answered before the load finished
        assert answered_at < ready["model"]["ready_at"]
        out, err = proc.communicate(timeout=30)  # closes stdin: the host goes away, bosun must exit
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err.decode()[-2000:]
    lines = [first, *out.splitlines()]
    for line in lines:
        if line.strip():
            assert json.loads(line)["jsonrpc"] == "2.0", line  # nothing but protocol on stdout
    replies = {json.loads(line).get("id"): json.loads(line) for line in lines if line.strip()}
    assert replies[2]["result"]["isError"] is True
    assert not (home / "daemon.json").exists()


async def test_http_daemon_health_calls_and_bad_input(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc = subprocess.Popen([*BOSUN, "serve", "--port", "0", "--home", str(home)], env=env_for(home),
                            stderr=subprocess.PIPE)
    try:
        daemon = wait_for_daemon(home, proc)
        assert daemon["url"].startswith("http://127.0.0.1:")
        body = wait_ready(daemon["url"])
        assert body["version"] and body["model"]["id"] == "all-MiniLM-L6-v2-int8"
        assert body["store"]["schema_version"] >= 1 and body["store"]["path"].startswith(str(home))
        async with Client(daemon["url"]) as client:
            bad = await client.call_tool("recall", {"ref": "nonsense"})
            assert bad.is_error and "ref" in bad.content[0].text
            missing = await client.call_tool("recall", {"ref": MISSING_REF})
            assert missing.is_error and "not found" in missing.content[0].text
            tools = await client.list_tools()  # still serving
            assert "recall" in {t.name for t in tools.tools}
            await client.call_tool("route", {"prompt": "how do I rotate a leaked API key"})  # waits for the index
        _, body = health(daemon["url"])
        index = body["route_index"]  # reported apart from the model; a route is served from generation 1 on
        assert index["state"] in ("building", "ready") and index["documents"] > 0
        assert 0 <= index["done"] <= index["total"]  # the demo's vectors ship with it: it may embed nothing
    finally:
        stop(proc.pid)
        proc.wait(timeout=15)
    assert proc.returncode == 0
    assert not (home / "daemon.json").exists()


def test_binding_beyond_loopback_needs_a_token(tmp_path: Path) -> None:
    home = tmp_path / "home"
    res = subprocess.run([*BOSUN, "serve", "--host", "0.0.0.0", "--port", "0", "--home", str(home)],
                         env=env_for(home), capture_output=True, timeout=60)
    assert res.returncode == 2
    assert b"BOSUN_TOKEN" in res.stderr


async def test_bearer_token_guards_mcp_but_not_healthz(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc = subprocess.Popen([*BOSUN, "serve", "--host", "0.0.0.0", "--port", "0", "--home", str(home)],
                            env=env_for(home, BOSUN_TOKEN="s3cret-token"), stderr=subprocess.PIPE)
    try:
        daemon = wait_for_daemon(home, proc)
        assert daemon["token"] == "s3cret-token"
        assert oct((home / "daemon.json").stat().st_mode & 0o777) == "0o600"
        status, _ = health(daemon["url"])
        assert status in (200, 503)
        req = urllib.request.Request(daemon["url"], data=json.dumps(INIT).encode(), method="POST",
                                     headers={"Content-Type": "application/json",
                                              "Accept": "application/json, text/event-stream"})
        try:
            urllib.request.urlopen(req, timeout=10)
            raise AssertionError("an unauthenticated MCP request was served")
        except urllib.error.HTTPError as exc:
            assert exc.code == 401
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        async with httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret-token"}) as http:
            async with Client(streamable_http_client(daemon["url"], http_client=http)) as client:
                tools = await client.list_tools()
                assert "recall" in {t.name for t in tools.tools}
    finally:
        stop(proc.pid)
        proc.wait(timeout=15)


async def test_two_bridges_started_together_share_one_daemon(tmp_path: Path) -> None:
    home = tmp_path / "home"
    params = StdioServerParameters(command=BOSUN[0], args=[*BOSUN[1:], "stdio"], env=env_for(home))
    names: list[set[str]] = []

    async def one_host() -> None:
        async with Client(params) as client:
            tools = await client.list_tools()
            names.append({t.name for t in tools.tools})
            res = await client.call_tool("recall", {"ref": MISSING_REF})
            assert res.is_error and "not found" in res.content[0].text

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(one_host)
            tg.start_soon(one_host)
        assert len(names) == 2 and all("recall" in n for n in names)
        daemon = json.loads((home / "daemon.json").read_text())
        assert serve_pids(home) == [daemon["pid"]]  # exactly one daemon for this home
        body = wait_ready(daemon["url"])
        assert body["model"]["loads"] == 1
        # a third host attaches to the same daemon rather than starting another
        async with Client(params) as client:
            await client.list_tools()
        assert serve_pids(home) == [daemon["pid"]]
    finally:
        for pid in serve_pids(home):
            stop(pid)


async def test_one_process_serves_stdio_and_http_from_one_state(tmp_path: Path) -> None:
    home = tmp_path / "home"
    params = StdioServerParameters(command=BOSUN[0], args=[*BOSUN[1:], "serve", "--stdio", "--port", "0"],
                                   env=env_for(home))
    async with Client(params) as over_stdio:
        started = await over_stdio.call_tool("plan", {"mode": "start", "objective": "fix the flaky login test",
                                                      "steps": ["reproduce", "fix", "verify"]})
        assert not started.is_error, started.content[0].text
        task_id = started.structured_content["task_id"]  # type: ignore[index]
        payload = "".join(f"tests/test_login.py::test_{i} PASSED\n" for i in range(400)) + "1 failed\n"
        observed = await over_stdio.call_tool("observe", {"task_id": task_id, "kind": "result", "tool": "bash",
                                                          "args": {"cmd": "pytest"}, "result": payload})
        assert not observed.is_error, observed.content[0].text
        daemon = wait_for_daemon(home)
        async with Client(daemon["url"]) as over_http:
            status = await over_http.call_tool("plan", {"mode": "status", "task_id": task_id})
            assert not status.is_error, status.content[0].text
            assert "fix the flaky login test" in json.dumps(status.structured_content)
            ref = observed.structured_content["ref"]  # type: ignore[index]
            tail = await over_http.call_tool("recall", {"ref": ref, "op": "tail", "lines": 1})
            assert not tail.is_error and "1 failed" in tail.content[0].text
        body = wait_ready(daemon["url"])
        assert body["model"]["loads"] == 1


async def test_bosun_tools_narrows_one_hosts_tool_list_not_the_shared_daemon(tmp_path: Path) -> None:
    home = tmp_path / "home"
    narrow = StdioServerParameters(command=BOSUN[0], args=[*BOSUN[1:], "stdio"],
                                   env=env_for(home, BOSUN_TOOLS="recall,plan"))
    wide = StdioServerParameters(command=BOSUN[0], args=[*BOSUN[1:], "stdio"], env=env_for(home))
    try:
        async with Client(narrow) as client:
            assert {t.name for t in (await client.list_tools()).tools} == {"recall", "plan"}
        async with Client(wide) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"recall", "plan", "observe", "precheck"} <= names
    finally:
        for pid in serve_pids(home):
            stop(pid)


def test_bosun_tools_on_the_daemon_rejects_unknown_names(tmp_path: Path) -> None:
    home = tmp_path / "home"
    res = subprocess.run([*BOSUN, "serve", "--port", "0", "--home", str(home)],
                         env=env_for(home, BOSUN_TOOLS="recall,nonsense"), capture_output=True, timeout=60)
    assert res.returncode == 2 and b"nonsense" in res.stderr


async def test_a_folder_named_bosun_in_the_working_directory_does_not_shadow_the_daemon(tmp_path: Path) -> None:
    """A host that starts ``bosun stdio`` from the parent of a clone named bosun still gets a daemon."""
    home, cwd = tmp_path / "home", tmp_path / "work"
    (cwd / "bosun").mkdir(parents=True)
    (cwd / "bosun" / "__init__.py").write_text("raise SystemExit('the shadowing folder was imported')\n")
    script = str(Path(BOSUN[0]).parent / "bosun")  # the console script a host runs
    params = StdioServerParameters(command=script, args=["stdio"], env=env_for(home), cwd=str(cwd))
    try:
        async with Client(params) as client:
            res = await client.call_tool("recall", {"ref": MISSING_REF})
            assert res.is_error and "not found" in res.content[0].text
        assert len(serve_pids(home)) == 1
    finally:
        for pid in serve_pids(home):
            stop(pid)


def test_a_bridge_creates_its_files_owner_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """daemon.log and the start lock are 0600 in a 0700 home from the moment the bridge makes them."""
    import os

    from bosun.server.transport import bridge

    home = tmp_path / "home"
    modes: dict[str, int] = {}

    class Stop(Exception):
        pass

    def no_daemon(*args: object, **kwargs: object) -> None:  # look at the files, start nothing
        modes.update({name: (home / name).stat().st_mode & 0o777 for name in ("daemon.log", "daemon.lock")})
        modes["home"] = home.stat().st_mode & 0o777
        raise Stop

    import subprocess  # the bridge imports it only to start a daemon

    monkeypatch.setattr(subprocess, "Popen", no_daemon)
    old = os.umask(0o022)
    try:
        with pytest.raises(Stop):
            bridge.ensure_daemon(home, [])
    finally:
        os.umask(old)
    assert modes == {"daemon.log": 0o600, "daemon.lock": 0o600, "home": 0o700}
