"""The lean hook path: ``python -S -P .../_hook_script.py claude-code`` (no site: the stdlib and ``_daemon``
only, the same ``main`` the console script calls), its telemetry twin of ``telemetry.write``, and
``bosun hook settings``."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from bosun.server import telemetry
from bosun.server.commands import _daemon, hook, hook_settings

SCRIPT = Path(hook_settings.__file__).with_name("_hook_script.py")
# what the lean path must not load: site itself (and bosun's modules behind it), or the CLI's parser and paths
AVOIDED = {"site", "argparse", "pathlib", "dataclasses", "bosun", "bosun.server.commands", "http.client"}

def test_lean_telemetry_writes_what_telemetry_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Same file (env only: the hook binds no Config), same line, same rotation."""
    telemetry.unbind()
    monkeypatch.setenv("BOSUN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("BOSUN_TELEMETRY_PATH", raising=False)
    monkeypatch.delenv("BOSUN_TELEMETRY", raising=False)
    assert _daemon.telemetry_path() == telemetry.path()
    monkeypatch.setenv("BOSUN_TELEMETRY_PATH", str(tmp_path / "ev.jsonl"))
    assert _daemon.telemetry_path() == telemetry.path()
    monkeypatch.setenv("BOSUN_TELEMETRY", "OFF")
    assert _daemon.telemetry_path() is None and telemetry.path() is None
    monkeypatch.delenv("BOSUN_TELEMETRY")
    assert (_daemon.TELEMETRY_MAX_BYTES, _daemon.TELEMETRY_GENERATIONS) == (telemetry.MAX_BYTES, telemetry.GENERATIONS)

    result = {"hits": [{"name": "deploys"}], "corpus_size": 17, "route_ms": 0.5, "notices": ["x"]}
    telemetry.record_route(result, via="hook", delivered_ms=12.5)
    hook.record_route(result, started=0.0)
    theirs, ours = [json.loads(line) for line in (tmp_path / "ev.jsonl").read_text().splitlines()]
    assert set(theirs) == set(ours)
    for key in ("event", "outcome", "via", "degraded", "corpus_size", "route_ms", "cached", "names", "notices"):
        assert theirs[key] == ours[key]

    monkeypatch.setattr(_daemon, "TELEMETRY_MAX_BYTES", 10)
    _daemon.telemetry_write({"event": "route"})
    _daemon.telemetry_write({"event": "route"})
    assert (tmp_path / "ev.jsonl.1").exists() and (tmp_path / "ev.jsonl.2").exists()


class _Route(http.server.BaseHTTPRequestHandler):
    """A stand-in daemon's /v1/route: answers one hit for any prompt mentioning 'deploy'."""

    seen: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:  # the stdlib's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        hits = [{"name": "production-deploys", "why": ["matched: deploy"]}] if "deploy" in body["prompt"] else []
        data = json.dumps({"hits": hits, "notices": [], "corpus_size": 3, "route_ms": 0.1}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def fake_daemon(tmp_path: Path) -> Iterator[Path]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Route)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    home = tmp_path / "home"
    home.mkdir()
    url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
    (home / "daemon.json").write_text(json.dumps({"url": url, "pid": 1, "token": "t0k"}))
    _Route.seen = []
    try:
        yield home
    finally:
        server.shutdown()
        thread.join(5)


def _lean_hook(home: Path, harness: str, stdin: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOSUN_")}
    env.update(BOSUN_HOME=str(home), BOSUN_TELEMETRY_PATH=str(tmp_path / "ev.jsonl"), BOSUN_HOOK_START="0",
               HOME=str(tmp_path))
    env.pop("CLAUDE_PROJECT_DIR", None)
    return subprocess.run([sys.executable, "-S", "-P", "-X", "importtime", str(SCRIPT), harness], input=stdin,
                          capture_output=True, text=True, env=env, timeout=60, check=False)


def _imported(stderr: str) -> set[str]:
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def test_lean_hook_routes_without_site(fake_daemon: Path, tmp_path: Path) -> None:
    proc = _lean_hook(fake_daemon, "claude-code", json.dumps({"prompt": "roll back the deploy"}), tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "UserPromptSubmit" and "- production-deploys (matched: deploy)" in out["additionalContext"]
    assert _Route.seen == [{"path": "/v1/route", "auth": "Bearer t0k", "body": {"prompt": "roll back the deploy"}}]
    assert not _imported(proc.stderr) & AVOIDED
    event = json.loads((tmp_path / "ev.jsonl").read_text().splitlines()[-1])
    assert (event["outcome"], event["via"], event["names"]) == ("routed", "hook", ["production-deploys"])
    assert event["delivered_ms"] > 0


def test_lean_hook_stays_silent_on_abstention_bad_input_and_no_daemon(fake_daemon: Path, tmp_path: Path) -> None:
    proc = _lean_hook(fake_daemon, "claude-code", json.dumps({"prompt": "what is the weather"}), tmp_path)
    assert (proc.returncode, proc.stdout) == (0, "")
    proc = _lean_hook(fake_daemon, "claude-code", "not json", tmp_path)
    assert (proc.returncode, proc.stdout) == (0, "")
    assert json.loads((tmp_path / "ev.jsonl").read_text().splitlines()[-1])["failure_class"] == "input"
    (fake_daemon / "daemon.json").unlink()
    proc = _lean_hook(fake_daemon, "claude-code", json.dumps({"prompt": "deploy"}), tmp_path)
    assert (proc.returncode, proc.stdout) == (0, "")
    assert json.loads((tmp_path / "ev.jsonl").read_text().splitlines()[-1])["failure_class"] == "daemon"


def test_lean_pretool_rewrites_as_the_console_script_does(tmp_path: Path) -> None:
    event = json.dumps({"tool_name": "Bash", "session_id": "s1", "permission_mode": "bypassPermissions",
                        "cwd": str(tmp_path), "tool_input": {"command": "pytest -q tests"}})
    lean = _lean_hook(tmp_path, "claude-code-pretool", event, tmp_path)
    env = {**os.environ, "HOME": str(tmp_path)}  # no settings file of this machine's decides the answer
    env.pop("CLAUDE_PROJECT_DIR", None)
    full = subprocess.run([sys.executable, "-m", "bosun.server.commands.hook", "claude-code-pretool"], input=event,
                          capture_output=True, text=True, timeout=60, check=False, env=env)
    assert lean.returncode == 0 and json.loads(lean.stdout) == json.loads(full.stdout)
    assert "_run_script.py" in json.loads(lean.stdout)["hookSpecificOutput"]["updatedInput"]["command"]


def test_lean_hook_sends_help_and_typos_to_argparse(tmp_path: Path) -> None:
    proc = _lean_hook(tmp_path, "claude-cod", "", tmp_path)
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_settings_snippet_runs_the_lean_script_and_merges_idempotently(tmp_path: Path) -> None:
    ours = hook_settings.snippet()
    command = ours["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
    assert command.split()[:3] == [sys.executable, "-S", "-P"] and command.endswith("_hook_script.py claude-code")
    assert Path(command.split()[3]) == SCRIPT and SCRIPT.is_file()
    assert ours["hooks"]["PreToolUse"][0]["matcher"] == "Bash"
    other = {"type": "command", "command": "echo mine"}
    settings = {"model": "x", "hooks": {"UserPromptSubmit": [{"hooks": [other, {"type": "command",
                                                                               "command": "bosun hook claude-code"}]}]}}
    merged = hook_settings.merge(settings, ours)
    again = hook_settings.merge(merged, ours)
    assert merged == again and merged["model"] == "x"
    prompt_hooks = [h for g in merged["hooks"]["UserPromptSubmit"] for h in g["hooks"]]
    assert prompt_hooks == [other, ours["hooks"]["UserPromptSubmit"][0]["hooks"][0]]


def test_settings_write_merges_into_a_file(tmp_path: Path) -> None:
    target = tmp_path / ".claude" / "settings.json"
    for _ in range(2):
        done = subprocess.run([sys.executable, "-m", "bosun", "hook", "settings", "--write", str(target)],
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
    written = json.loads(target.read_text())
    assert len(written["hooks"]["UserPromptSubmit"]) == 1 and len(written["hooks"]["PreToolUse"]) == 1
    target.write_text("[1]")
    done = subprocess.run([sys.executable, "-m", "bosun", "hook", "settings", "--write", str(target)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and target.read_text() == "[1]"


def test_with_site_keeps_the_script_directory_behind_site_packages() -> None:
    """Once the lean path needs bosun's modules it loads ``site``; the commands and transport directories
    (``progress.py``, ``stats.py``...) stay last on ``sys.path``, so they never shadow an installed package."""
    here = str(SCRIPT.parent)
    code = ("import sys, os; sys.path += [sys.argv[1], os.path.join(os.path.dirname(sys.argv[1]), 'transport')]; "
            "import _daemon; _daemon.with_site(); import bosun.server.config; "
            "print(sys.path[-2:] == _daemon.script_path(), any('site-packages' in p for p in sys.path[:-2]))")
    done = subprocess.run([sys.executable, "-S", "-P", "-c", code, here], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "True"]
