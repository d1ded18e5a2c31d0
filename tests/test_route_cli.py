"""The hook (stdlib only, talks to a live daemon over HTTP), /v1/route, telemetry, and `bosun eval route`."""

from __future__ import annotations

import argparse
import io
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from bosun.core.embedding import HashEmbedder
from bosun.server.app import create_server
from bosun.server.commands import _daemon, eval_route, hook
from bosun.server.commands import telemetry as telemetry_cmd
from bosun.server.config import Config
from bosun.server.engine import Engine

HOOK = (
    "import sys\n"
    "from bosun.server.cli import build_parser\n"
    "args = build_parser().parse_args(['hook', 'claude-code'])\n"
    "rc = args.func(args)\n"
    "heavy = [m for m in ('numpy', 'sklearn', 'fastembed', 'onnxruntime') if m in sys.modules]\n"
    "assert not heavy, heavy\n"
    "sys.exit(rc)\n"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    """A real bosun HTTP daemon (HashEmbedder, threshold 0 so logic routes) on a free port, with a token."""
    op = tmp_path / "op.toml"
    op.write_text(
        'threshold = 0.0\nbias = 0.0\n[weights]\nsem = 1.0\nlex = 1.0\nz = 0.0\nmargin = 0.0\nagree = 0.0\n'
        "body_sem = 0.0\nbody_lex = 0.0\n"
    )
    monkeypatch.setenv("BOSUN_ROUTE_OPERATING_POINT", str(op))
    events = tmp_path / "events.jsonl"
    monkeypatch.setenv("BOSUN_TELEMETRY_PATH", str(events))
    home = tmp_path / "home"
    port = _free_port()
    engine = Engine(Config(home=home, policies=[], token="s3cret", port=port),
                    embedder_factory=lambda _c: HashEmbedder(64))
    app = create_server(engine).streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.02)
    home.mkdir(parents=True, exist_ok=True)
    url = f"http://127.0.0.1:{port}/mcp"
    (home / "daemon.json").write_text(json.dumps({"url": url, "pid": 1, "token": "s3cret"}))
    try:
        yield home, url
    finally:
        server.should_exit = True
        thread.join(10)


def _run_hook(home: Path, stdin: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, "BOSUN_HOME": str(home), **(env_extra or {})}
    return subprocess.run([sys.executable, "-c", HOOK], input=stdin, capture_output=True, text=True, env=env,
                          timeout=60, check=False)


def test_hook_end_to_end_without_heavy_imports(daemon: tuple[Path, str], tmp_path: Path) -> None:
    home, _ = daemon
    proc = _run_hook(home, json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": "rollback plan for the production deploy"}))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    ctx = out["hookSpecificOutput"]["additionalContext"]
    assert out["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    assert "production-deploys" in ctx and len(ctx.encode()) <= 1024
    assert "canary (5% of traffic" not in ctx  # names and evidence, never rule text
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    daemon_side, hook_side = events[-2], events[-1]
    assert daemon_side["outcome"] == "routed" and daemon_side["via"] == "http"
    # the hook records what the harness waited for: its own process included, so never less than the daemon's
    assert hook_side["outcome"] == "routed" and hook_side["via"] == "hook"
    assert hook_side["delivered_ms"] >= daemon_side["delivered_ms"]
    assert "rollback" not in (tmp_path / "events.jsonl").read_text()  # never the prompt


def test_hook_never_blocks_when_the_daemon_is_gone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    events = tmp_path / "ev.jsonl"
    (home / "daemon.json").write_text(json.dumps({"url": f"http://127.0.0.1:{_free_port()}/mcp", "token": None}))
    env = {"BOSUN_TELEMETRY_PATH": str(events), "BOSUN_HOOK_START": "0"}
    proc = _run_hook(home, json.dumps({"prompt": "deploy"}), env)
    assert proc.returncode == 0 and proc.stdout == ""
    last = json.loads(events.read_text().splitlines()[-1])
    assert (last["outcome"], last["failure_class"], last["via"]) == ("failed", "daemon", "hook")
    proc = _run_hook(home, "not json", env)
    assert proc.returncode == 0 and proc.stdout == ""
    assert json.loads(events.read_text().splitlines()[-1])["failure_class"] == "input"


def test_http_route_requires_the_token(daemon: tuple[Path, str]) -> None:
    import urllib.error
    import urllib.request

    _, url = daemon
    endpoint = url.replace("/mcp", "/v1/route")
    req = urllib.request.Request(endpoint, data=b'{"prompt": "deploy"}', method="POST")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=10)
    assert err.value.code == 401
    req = urllib.request.Request(endpoint, data=b'{"prompt": "  "}', method="POST",
                                 headers={"Authorization": "Bearer s3cret"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=10)
    assert err.value.code == 400 and "prompt" in err.value.read().decode()


def test_render_clips_to_1024_bytes() -> None:
    hits = [{"name": f"policy-{i}", "why": ["matched: " + "é" * 300]} for i in range(5)]
    text = hook.render({"hits": hits, "notices": ["far from calibration"]})
    assert len(text.encode()) <= 1024 and text.endswith("...")
    assert hook.render({"hits": [], "abstained": True}) == ""


def test_telemetry_report_names_never_routed() -> None:
    events = [
        {"outcome": "routed", "names": ["a"], "route_ms": 4.0, "delivered_ms": 5.0, "corpus_size": 3},
        {"outcome": "abstained", "names": [], "route_ms": 3.0, "delivered_ms": 4.0, "corpus_size": 3},
        {"outcome": "failed", "failure_class": "daemon", "via": "hook"},
    ]
    text = telemetry_cmd.summarise(events, ["a", "b", "c"])
    assert "routed          1  (33.3%)" in text and "daemon" in text
    assert "documents routed at least once: 1/3" in text
    assert text.rstrip().splitlines()[-3:-1] == ["      b", "      c"]


@pytest.mark.model
def test_eval_route_calibrate_writes_toml_or_refuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    import tomllib

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "deploys.md").write_text("**Agent-trigger:** deploying services to production, rollbacks\n\nbody\n")
    (corpus / "secrets.md").write_text("**Agent-trigger:** API keys, passwords and other secrets\n\nbody\n")
    labelled = "\n".join(json.dumps(r) for r in [
        {"prompt": "ship the new release to production", "expected": ["deploys"]},
        {"prompt": "where do I store the database password", "expected": ["secrets"], "sibling": "deploys"},
        {"prompt": "write a haiku about autumn leaves", "expected": []},
    ])
    out = tmp_path / "op.toml"
    args = argparse.Namespace(eval_what="route", mode="calibrate", corpus=[str(corpus)], operating_point=None,
                              out=str(out), corpus_id="tiny", refit=False, home=str(tmp_path / "home"), input="-")
    monkeypatch.setattr("sys.stdin", io.StringIO(labelled))
    assert eval_route.run(args) == 0
    data = tomllib.loads(out.read_text())
    assert data["model_id"] == "all-MiniLM-L6-v2-int8" and data["n_docs"] == 2 and data["corpus_id"] == "tiny"
    assert data["metrics"]["false_alarms"] == 0 and len(data["corpus_fingerprint"]) == 64
    assert "<- chosen" in capsys.readouterr().out
    # a negative identical to a trigger line cannot clear the zero-false-alarm gate: exit 1
    monkeypatch.setattr("sys.stdin", io.StringIO(labelled + "\n" + json.dumps(
        {"prompt": "deploying services to production, rollbacks", "expected": []})))
    assert eval_route.run(args) == 1
    # an operating point measured under another model is an error
    out.write_text(out.read_text().replace("all-MiniLM-L6-v2-int8", "other-model"))
    args.mode, args.operating_point = "score", str(out)
    monkeypatch.setattr("sys.stdin", io.StringIO(labelled))
    assert eval_route.run(args) == 2
    assert "other-model" in capsys.readouterr().err


def test_render_lists_required_documents() -> None:
    text = hook.render({"hits": [{"name": "deploys", "why": ["matched: deploy"], "requires": ["code-review"]},
                                 {"name": "plain", "why": []}]})
    assert "- deploys (matched: deploy; read with: code-review)" in text and "- plain" in text


def test_hook_with_a_wrong_token_records_a_daemon_failure(daemon: tuple[Path, str], tmp_path: Path) -> None:
    home, url = daemon
    (home / "daemon.json").write_text(json.dumps({"url": url, "pid": 1, "token": "wrong"}))
    proc = _run_hook(home, json.dumps({"prompt": "deploy to production"}))
    assert proc.returncode == 0 and proc.stdout == ""
    last = json.loads((tmp_path / "events.jsonl").read_text().splitlines()[-1])
    assert (last["outcome"], last["failure_class"], last["via"]) == ("failed", "daemon", "hook")


def _hook_args(home: Path, timeout: float) -> Any:
    import argparse

    return argparse.Namespace(harness="claude-code", home=str(home), timeout=timeout, permission=None)


def test_hook_starts_the_daemon_and_routes_once_it_answers(daemon: tuple[Path, str], tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """No daemon file: the hook starts the daemon (here: the start publishes the live test daemon) and routes."""
    import io

    live_home, _ = daemon
    home = tmp_path / "fresh"
    home.mkdir()
    started: list[Path] = []

    def fake_start(h: str) -> None:
        started.append(Path(h))
        (Path(h) / "daemon.json").write_text((live_home / "daemon.json").read_text())

    monkeypatch.setattr(hook, "start_daemon", fake_start)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(json.dumps({"prompt": "rollback plan for the production deploy"}).encode())))
    assert hook.run(_hook_args(home, 30.0)) == 0
    assert started == [home]
    out = json.loads(capsys.readouterr().out)
    assert "production-deploys" in out["hookSpecificOutput"]["additionalContext"]


def test_hook_says_routing_is_warming_up_when_the_daemon_is_not_up_in_time(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    import io

    home = tmp_path / "fresh"
    home.mkdir()
    events = tmp_path / "ev.jsonl"
    monkeypatch.setenv("BOSUN_TELEMETRY_PATH", str(events))
    monkeypatch.setattr(hook, "start_daemon", lambda h: None)  # started, never answers
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(json.dumps({"prompt": "deploy"}).encode())))
    assert hook.run(_hook_args(home, 0.3)) == 0
    out = json.loads(capsys.readouterr().out)
    assert "warming up" in out["hookSpecificOutput"]["additionalContext"]
    last = json.loads(events.read_text().splitlines()[-1])
    assert (last["failure_class"], last["via"]) == ("daemon", "hook") and last["delivered_ms"] >= 300 * 0.5


def test_process_age_counts_the_interpreter_start() -> None:
    age = _daemon.process_age_ms()
    assert age is None or age > 0


def test_hook_adds_the_tool_compass_when_the_tool_list_is_kept(daemon: tuple[Path, str]) -> None:
    home, _ = daemon
    tools = [{"name": "kubectl_rollback", "description": "roll back a production deploy of a kubernetes service"},
             {"name": "weather_lookup", "description": "current weather forecast for a city"},
             {"name": "pdf_merge", "description": "merge several pdf documents into one file"}]
    (home / "tools.json").write_text(json.dumps(tools))
    proc = _run_hook(home, json.dumps({"prompt": "rollback plan for the production deploy"}))
    assert proc.returncode == 0, proc.stderr
    ctx = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "production-deploys" in ctx  # routing first
    assert "bosun tool compass" in ctx and "kubectl_rollback" in ctx and "weather_lookup" not in ctx
