"""``bosun route "PROMPT"``: oiax's stdout adapter, through the daemon's /v1/route when one runs, else in-process."""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from bosun.server.commands import route as cmd
from bosun.server.config import Config

ANSWER = {"hits": [{"name": "production-deploys", "score": 0.91, "why": ["matched: deploy, production"],
                    "requires": ["code-review"]}], "abstained": False, "corpus_size": 17}


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cmd.add_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.fixture
def fake_daemon(home: Path) -> Iterator[list[dict[str, Any]]]:
    """A stand-in /v1/route on a loopback port, recorded in daemon.json; yields the bodies it received."""
    got: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            got.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
            if not body.get("prompt", "").strip():
                status, data = 400, {"error": "prompt: is empty or whitespace"}
            else:
                status, data = 200, ANSWER
            raw = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    home.mkdir(parents=True, exist_ok=True)
    (home / "daemon.json").write_text(json.dumps({"url": f"http://127.0.0.1:{server.server_port}/mcp", "token": "t0k"}))
    try:
        yield got
    finally:
        server.shutdown()
        server.server_close()


def run(home: Path, *argv: str) -> int:
    args = parse(*argv)
    args.bosun_config = Config.from_env(home=home, policies=[])
    return cmd.run(args)


def test_routes_through_the_running_daemon(home: Path, fake_daemon: list[dict[str, Any]],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert run(home, "roll back the production deploy") == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("production-deploys  0.91  (matched: deploy, production; read with: code-review)")
    assert fake_daemon[0] == {"path": "/v1/route", "auth": "Bearer t0k", "prompt": "roll back the production deploy"}


def test_json_says_where_it_was_answered(home: Path, fake_daemon: list[dict[str, Any]],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert run(home, "--json", "--top-k", "1", "roll back") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["via"] == "daemon" and out["hits"][0]["name"] == "production-deploys"
    assert fake_daemon[0]["top_k"] == 1


def test_tools_file_is_sent_for_the_compass(home: Path, tmp_path: Path, fake_daemon: list[dict[str, Any]]) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps({"tools": [{"name": "get_weather", "description": "weather for a city"}]}))
    assert run(home, "--tools", str(tools), "rain in Oslo?") == 0
    assert fake_daemon[0]["tools"] == [{"name": "get_weather", "description": "weather for a city"}]


def test_a_refused_prompt_is_an_error_not_a_fallback(home: Path, fake_daemon: list[dict[str, Any]],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert run(home, "   ") == 2
    assert "prompt: is empty" in capsys.readouterr().err


def test_bad_tools_file_is_reported(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "tools.json"
    bad.write_text("{\"tools\": 3}")
    assert run(home, "--tools", str(bad), "x") == 2
    assert "expected a list" in capsys.readouterr().err


def test_renderers() -> None:
    assert cmd.render_hits({"hits": [], "abstained": True, "corpus_size": 3}) == "no policies apply (abstained)"
    assert cmd.render_hits({"hits": [], "abstained": True, "tools": 3}) == "no tools apply (abstained)"
    assert cmd.render_tools({"hits": []}) == ""
    text = cmd.render_tools({"hits": [{"name": "get_weather", "why": ["matched: weather"]}], "tools": 5})
    assert text == "bosun tool compass: tools that fit this prompt: get_weather (matched: weather)"
    assert len(cmd.render_tools({"hits": [{"name": "x" * 2000}]}).encode()) <= 512


@pytest.mark.model
def test_in_process_without_a_daemon(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(home, "--json", "roll back the production deploy of the billing service") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["via"] == "in-process"
    assert out["hits"] and out["hits"][0]["name"] == "production-deploys"


def test_compass_context_for_the_hook(home: Path, tmp_path: Path, fake_daemon: list[dict[str, Any]]) -> None:
    assert cmd.compass_context(home, "rain in Oslo?") == ""  # no tool list kept: nothing, no call
    assert fake_daemon == []
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"name": "get_weather", "description": "weather for a city"}]))
    assert run(home, "--tools", str(tools), "--save-tools", "rain in Oslo?") == 0
    assert json.loads((home / "tools.json").read_text())[0]["name"] == "get_weather"
    text = cmd.compass_context(home, "rain in Oslo?")
    assert text.startswith("bosun tool compass: ") and "production-deploys" in text  # the stand-in's answer
    assert fake_daemon[-1]["tools"][0]["name"] == "get_weather"
