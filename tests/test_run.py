"""``bosun run -- CMD``: the command runs as it would bare, its output lands in the task, nothing is lost."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import uvicorn

from bosun.core.embedding import HashEmbedder
from bosun.core.errors import InvalidInput
from bosun.server.app import create_server
from bosun.server.config import Config
from bosun.server.engine import Engine


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[Path, Engine]]:
    """A real daemon (HTTP, token, HashEmbedder) on a free port, named in its home's daemon.json."""
    home = tmp_path / "home"
    port = _free_port()
    engine = Engine(Config(home=home, policies=[], token="t0k", port=port), embedder_factory=lambda _c: HashEmbedder(16))
    app = create_server(engine).streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(500):
        if server.started:
            break
        time.sleep(0.02)
    home.mkdir(parents=True, exist_ok=True)
    (home / "daemon.json").write_text(json.dumps({"url": f"http://127.0.0.1:{port}/mcp", "pid": 1, "token": "t0k"}))
    try:
        yield home, engine
    finally:
        server.should_exit = True
        thread.join(10)


def _run(home: Path, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    full = {**os.environ, "BOSUN_HOME": str(home), "BOSUN_RUN_START": "0", **(env or {})}
    full.pop("BOSUN_TASK", None)
    return subprocess.run([sys.executable, "-m", "bosun.server.commands.run", *argv], capture_output=True,
                          env=full, timeout=60, check=False)


def _until(done: Callable[[], bool], limit_s: float = 60.0) -> None:
    """Wait for a condition another process makes true (polled; the limit only stops a broken run)."""
    deadline = time.monotonic() + limit_s
    while not done():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.02)


def _journal(home: Path, session: str) -> list[tuple[str, dict]]:  # type: ignore[type-arg]
    """The session task's events, read through a second Engine on the same home (as the CLI does)."""
    import asyncio

    async def read() -> list[tuple[str, dict]]:  # type: ignore[type-arg]
        engine = Engine(Config(home=home, policies=[]), embedder_factory=lambda _c: HashEmbedder(8))
        await engine.open(watch_policies=False)
        try:
            task = await engine.observe._session_task(session)
            return [(e.kind, e.payload) for e in await engine.tasks.events(task)]
        finally:
            await engine.close()

    return asyncio.run(read())


def test_small_output_passes_through_and_the_command_is_journaled(live: tuple[Path, Engine]) -> None:
    home, _ = live
    proc = _run(home, "--session", "s1", "--", sys.executable, "-c", "print('hello'); raise SystemExit(3)")
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == b"hello\n"
    # a small output is printed at once and recorded by a detached child: wait for it (not for a time)
    _until(lambda: not list((home / "spool").iterdir()))  # observed: the spool is gone, the bytes are in the store
    proc2 = _run(home, "--session", "s1", "--", "true")
    assert proc2.returncode == 0 and proc2.stdout == b""
    _until(lambda: not list((home / "spool").iterdir()))
    events = [(k, p) for k, p in _journal(home, "s1") if k in ("tool_result", "tool_failure")]
    assert [k for k, _ in events] == ["tool_failure", "tool_result"]
    assert events[0][1]["exit_code"] == 3 and "print('hello')" in json.dumps(events[0][1]["args"])
    assert events[1][1]["exit_code"] == 0


def test_big_output_prints_the_stub_and_the_bytes_are_recallable(live: tuple[Path, Engine], tmp_path: Path) -> None:
    home, _ = live
    script = ("import random\nr = random.Random(4)\nw = ['alpha', 'beta', 'gamma', 'delta', 'omega', 'sigma']\n"
              "for i in range(3000): print(' '.join(r.choice(w) for _ in range(6)))\n"
              "print('FAILED test_parse_dates: ValueError day is out of range')")
    proc = _run(home, "--intent", "why does parse dates fail", "--", sys.executable, "-c", script)
    assert proc.returncode == 0, proc.stderr
    stub = json.loads(proc.stdout)
    assert stub["offloaded"] is True and stub["lines"] == 3001
    assert "FAILED test_parse_dates" in stub["focus"]
    expected = subprocess.run([sys.executable, "-c", script], capture_output=True, check=True).stdout
    assert _stored(home, stub["ref"]) == expected  # byte for byte
    assert not list((home / "spool").iterdir())


def _stored(home: Path, ref: str) -> bytes:
    import asyncio

    async def read() -> bytes:
        engine = Engine(Config(home=home, policies=[]), embedder_factory=lambda _c: HashEmbedder(8))
        await engine.open(watch_policies=False)
        try:
            return bytes(await engine.refs.get(await engine.recall.resolver.resolve(ref)))
        finally:
            await engine.close()

    return asyncio.run(read())


def test_without_a_daemon_the_output_is_printed_and_the_spool_kept(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "daemon.json").write_text(json.dumps({"url": f"http://127.0.0.1:{_free_port()}/mcp", "pid": 1}))
    proc = _run(home, "--", sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(5)")
    assert proc.returncode == 5
    assert proc.stdout == b"out\nerr\n"
    assert b"not recorded" in proc.stderr
    kept = list((home / "spool").iterdir())
    assert len(kept) == 1 and kept[0].read_bytes() == b"out\nerr\n"
    assert (kept[0].stat().st_mode & 0o777) == 0o600


def test_a_signal_kills_run_like_the_command(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    proc = _run(home, "--", sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert proc.returncode == -signal.SIGTERM


def test_a_missing_command_exits_127_like_a_shell(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    proc = _run(home, "--", "no-such-command-bosun-test")
    assert proc.returncode == 127 and b"no-such-command-bosun-test" in proc.stdout


async def test_observe_spool_journals_the_command_and_keeps_an_oversized_spool(home: Path) -> None:
    engine = Engine(Config(home=home, policies=[], max_payload_bytes=10_000), embedder_factory=lambda _c: HashEmbedder(8))
    await engine.open()
    try:
        spool = home / "spool"
        spool.mkdir(parents=True, exist_ok=True)
        (spool / "run-1-a.out").write_bytes(b"".join(b"line %d\n" % i for i in range(5000)))
        out = await engine.observe.observe_spool(None, "sess", "make all", "run-1-a.out", 2)
        assert out["partial"]["bytes"] == (spool / "run-1-a.out").stat().st_size and out["offloaded"] is True
        events = [e for e in await engine.tasks.events(out["task_id"]) if e.kind == "tool_failure"]
        assert events[-1].payload["exit_code"] == 2 and "make all" in json.dumps(events[-1].payload["args"])
        data = await engine.refs.get(events[-1].payload["stored_ref"])
        assert data.startswith(b"line 0\n") and data.endswith(b"line 4999\n") and b"spool file run-1-a.out" in data
        for bad in ("../x.out", "run-1-a.out/..", "daemon.json"):
            with pytest.raises(InvalidInput, match="spool"):
                await engine.observe.observe_spool(None, "sess", "make", bad, 0)
    finally:
        await engine.close()


def test_config_reads_the_start_switches() -> None:
    assert Config.from_env({}).run_start is True and Config.from_env({}).hook_start is True
    off = Config.from_env({"BOSUN_RUN_START": "0", "BOSUN_HOOK_START": "off"})
    assert off.run_start is False and off.hook_start is False
    from bosun.server.config import ConfigError

    with pytest.raises(ConfigError, match="BOSUN_RUN_START"):
        Config.from_env({"BOSUN_RUN_START": "maybe"})


def test_the_observe_endpoint_wants_the_token_and_a_spool_name(live: tuple[Path, Engine]) -> None:
    from bosun.server.commands._daemon import post_json

    home, _ = live
    url = json.loads((home / "daemon.json").read_text())["url"].replace("/mcp", "/v1/observe")
    body = {"command": "make", "spool": "run-1-x.out", "exit_code": 0}
    assert post_json(url, body, None, 10)[0] == 401
    status, payload = post_json(url, {**body, "spool": "../bosun.db"}, "t0k", 10)
    assert status == 400 and b"spool" in payload
    status, payload = post_json(url, {**body, "spool": "run-9-missing.out"}, "t0k", 10)
    assert status == 400 and b"could not be read" in payload


RUN_SCRIPT = Path(__file__).resolve().parents[1] / "server" / "commands" / "_run_script.py"
# what the hook's form of bosun run must not load: site itself (and bosun's modules behind it), or the CLI's parser
AVOIDED = {"site", "argparse", "pathlib", "subprocess", "bosun", "bosun.server.commands", "http.client"}


def test_the_hook_form_runs_without_site(live: tuple[Path, Engine]) -> None:
    """``python -S -P .../_run_script.py`` (what the PreToolUse hook writes) journals a larger output through the
    daemon and prints it, without ``site`` or bosun's package (the stdlib, ``run`` and ``_daemon`` as siblings)."""
    home, _ = live
    env = {**os.environ, "BOSUN_HOME": str(home), "BOSUN_RUN_START": "0"}
    env.pop("BOSUN_TASK", None)
    printed = "\n".join(f"line {i} é" for i in range(30)) + "\n"  # over PRINT_FIRST_BYTES: the daemon answers
    proc = subprocess.run([sys.executable, "-S", "-P", "-X", "importtime", str(RUN_SCRIPT), "--session", "lean", "--",
                           sys.executable, "-c", f"print({printed!r}, end='')"], capture_output=True, env=env,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    shown = proc.stdout.decode()  # the compressed view (the repeated lines collapsed, a recall away)
    assert shown.startswith("line 0 é\n") and "line 29 é" in shown and "bosun recall" in shown
    imported = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.decode().splitlines()
                if line.startswith("import time:")}
    assert {"run", "_daemon"} <= imported and not imported & AVOIDED
    assert not list((home / "spool").iterdir())  # the daemon has it: the spool is gone
    results = [p for k, p in _journal(home, "lean") if k == "tool_result"]
    assert len(results) == 1 and results[0]["exit_code"] == 0


def test_a_signal_forwarded_by_the_lean_form_reaches_the_command(live: tuple[Path, Engine]) -> None:
    """SIGTERM sent to bosun run reaches the command; the command's death by that signal is bosun run's."""
    home, _ = live
    env = {**os.environ, "BOSUN_HOME": str(home), "BOSUN_RUN_START": "0"}
    proc = subprocess.Popen([sys.executable, "-S", "-P", str(RUN_SCRIPT), "--", sys.executable, "-c",
                             "import time; print('up', flush=True); time.sleep(60)"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    spool = home / "spool"
    _until(lambda: spool.is_dir() and any(f.read_bytes().startswith(b"up") for f in spool.iterdir()))
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)
    assert proc.returncode == -signal.SIGTERM
