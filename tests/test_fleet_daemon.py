"""One daemon per BOSUN_HOME, one payload limit on every transport, and the bridge's idempotency keys."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any

from mcp import Client

from bosun.server.config import Config
from bosun.server.transport.bridge import IDEMPOTENCY_META_KEY, with_idempotency_key
from bosun.server.transport.serve import body_limit
from tests.helpers_proc import BOSUN, env_for, stop, wait_for_daemon


def test_a_second_serve_on_the_same_home_exits_naming_the_first_and_leaves_daemon_json(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = subprocess.Popen([*BOSUN, "serve", "--port", "0", "--home", str(home)], env=env_for(home),
                             stderr=subprocess.DEVNULL)
    try:
        daemon = wait_for_daemon(home, first)
        before = (home / "daemon.json").read_bytes()
        second = subprocess.run([*BOSUN, "serve", "--port", "0", "--home", str(home)], env=env_for(home),
                                capture_output=True, timeout=60)
        assert second.returncode != 0
        err = second.stderr.decode()
        assert str(first.pid) in err and daemon["url"] in err, err
        assert (home / "daemon.json").read_bytes() == before  # not overwritten, not deleted
        assert json.loads(before)["pid"] == first.pid
    finally:
        stop(first.pid)
        first.wait(timeout=30)
    assert not (home / "daemon.json").exists()  # the first removed its own file on exit


def test_after_the_first_daemon_dies_a_new_one_can_serve(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = subprocess.Popen([*BOSUN, "serve", "--port", "0", "--home", str(home)], env=env_for(home),
                             stderr=subprocess.DEVNULL)
    wait_for_daemon(home, first)
    first.kill()  # SIGKILL: no cleanup; the kernel drops the lock
    first.wait(timeout=30)
    second = subprocess.Popen([*BOSUN, "serve", "--port", "0", "--home", str(home)], env=env_for(home),
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            data = json.loads((home / "daemon.json").read_text())
            if data["pid"] == second.pid:
                break
            assert second.poll() is None, "the second daemon refused a home whose daemon is dead"
            subprocess.run(["sleep", "0.05"], check=True)
        else:
            raise AssertionError("the second daemon never wrote daemon.json")
    finally:
        stop(second.pid)
        second.wait(timeout=30)


def test_the_http_body_limit_follows_bosun_max_payload_bytes() -> None:
    cfg = Config.from_env({"BOSUN_MAX_PAYLOAD_BYTES": str(40 * 1024 * 1024)})
    assert body_limit(cfg.max_payload_bytes) > 2 * 40 * 1024 * 1024
    assert body_limit(Config().max_payload_bytes) > 4 * 1024 * 1024  # the SDK's default, which broke 5 MB observes


async def test_a_5_mb_observe_over_http_is_stored_not_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc = subprocess.Popen([*BOSUN, "serve", "--port", "0", "--home", str(home)], env=env_for(home),
                            stderr=subprocess.DEVNULL)
    try:
        daemon = wait_for_daemon(home, proc)
        async with Client(daemon["url"]) as client:
            started = await client.call_tool("plan", {"mode": "start", "objective": "big output"})
            assert started.structured_content is not None
            tid = started.structured_content["task_id"]
            body = "\n".join(f"line {i} of a big build log" for i in range(200_000))  # ~5.4 MB
            assert len(body) > 5_000_000
            out = await client.call_tool("observe", {"task_id": tid, "kind": "result", "tool": "bash",
                                                     "result": body})
            assert not out.is_error, out.content
    finally:
        stop(proc.pid)
        proc.wait(timeout=30)


def test_the_bridge_keys_every_tools_call_once_and_keeps_a_hosts_own_key() -> None:
    call: dict[str, Any] = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                            "params": {"name": "observe", "arguments": {}}}
    keyed = with_idempotency_key(call)
    key = keyed["params"]["_meta"][IDEMPOTENCY_META_KEY]
    assert isinstance(key, str) and len(key) >= 16
    assert with_idempotency_key(keyed) == keyed  # a re-send keeps the key it was first sent with
    assert with_idempotency_key(call)["params"]["_meta"][IDEMPOTENCY_META_KEY] != key  # a new request, a new key
    own = {**call, "params": {**call["params"], "_meta": {IDEMPOTENCY_META_KEY: "host-1", "x": 1}}}
    assert with_idempotency_key(own) == own
    listing = {"jsonrpc": "2.0", "id": 8, "method": "tools/list"}
    assert with_idempotency_key(listing) == listing


def test_stdio_answers_a_tools_call_nested_too_deep_with_its_id(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    deep = "[" * 300 + "]" * 300
    nested = ('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"recall",'
              '"arguments":{"ref":"x","where":{"a":' + deep + '}}}}')
    lines = [json.dumps(init), json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), nested,
             json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"})]
    proc = subprocess.Popen([*BOSUN, "serve", "--stdio", "--no-http", "--home", str(home)], env=env_for(home),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    replies: dict[Any, Any] = {}
    watchdog = threading.Timer(60, proc.kill)  # an unanswered request must fail the test, not hang it
    watchdog.start()
    try:
        proc.stdin.write(("\n".join(lines) + "\n").encode())
        proc.stdin.flush()
        while 3 not in replies:  # the ping after the deep call is answered: the session went on
            line = proc.stdout.readline()
            assert line, "stdout closed before the answers came"
            message = json.loads(line)
            replies[message.get("id")] = message
    finally:
        watchdog.cancel()
        proc.stdin.close()
        proc.wait(timeout=60)
    assert replies[2]["error"]["code"] == -32600 and "nested deeper" in replies[2]["error"]["message"]


def test_top_level_id_ignores_ids_inside_arguments_and_strings() -> None:
    from bosun.server.transport.json_scan import top_level_id

    deep = "[" * 100 + "]" * 100
    body = ('{"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"id":5,"t":"\\"id\\": 9","d":'
            + deep + '}},"id":"abc"}')
    assert top_level_id(body.encode()) == "abc"
    assert top_level_id(b'{"id": 12, "x": [[[]]]}') == 12
    assert top_level_id(b'{"x": {"id": 1}}') is None
