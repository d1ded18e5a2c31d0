"""The host configuration snippets in README.md work, driven by the SDK client as a host would.

Every fenced ``mcpServers`` (or VS Code ``servers``) JSON block and ``[mcp_servers.*]`` TOML block is parsed and launched
(stdio entries as given, with ``bosun`` resolved to this venv's script and ``BOSUN_HOME`` pointed
at a temporary directory; HTTP entries against the daemon the first stdio entry started).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FENCE = re.compile(r"```(json|toml)\n(.*?)```", re.S)


def snippets() -> list[tuple[str, dict[str, Any]]]:
    """(label, server entry) for every server entry in README's fenced config blocks."""
    out: list[tuple[str, dict[str, Any]]] = []
    for n, (lang, body) in enumerate(FENCE.findall(README.read_text())):
        if lang == "json" and "mcpServers" in body:
            for name, entry in json.loads(body)["mcpServers"].items():
                out.append((f"json#{n}:{name}", entry))
        elif lang == "json" and '"servers"' in body:  # VS Code's .vscode/mcp.json
            for name, entry in json.loads(body)["servers"].items():
                out.append((f"vscode#{n}:{name}", entry))
        elif lang == "toml" and "mcp_servers" in body:
            for name, entry in tomllib.loads(body)["mcp_servers"].items():
                out.append((f"toml#{n}:{name}", entry))
    return out


def bosun_script() -> str:
    script = Path(sys.executable).parent / "bosun"
    return str(script) if script.exists() else (shutil.which("bosun") or "bosun")


@pytest.fixture
def snippet_home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    yield home
    data = json.loads((home / "daemon.json").read_text()) if (home / "daemon.json").exists() else {}
    pid = data.get("pid")
    if isinstance(pid, int) and pid > 0:  # the daemon a snippet's `bosun stdio` started for this test
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)


def test_readme_has_stdio_and_http_snippets() -> None:
    found = snippets()
    assert any("command" in entry for _, entry in found)
    assert any("url" in entry for _, entry in found)
    assert {label.split("#")[0] for label, _ in found} == {"json", "toml", "vscode"}  # mcpServers, Codex, VS Code


async def test_readme_snippets_connect(snippet_home: Path) -> None:
    found = snippets()
    stdio = [(label, e) for label, e in found if "command" in e]
    http = [(label, e) for label, e in found if "url" in e]
    for label, entry in stdio:  # the first one starts the daemon, the others attach to it
        command = bosun_script() if entry["command"] == "bosun" else entry["command"]
        env = {**{k: str(v) for k, v in entry.get("env", {}).items()}, "BOSUN_HOME": str(snippet_home)}
        params = StdioServerParameters(command=command, args=list(entry.get("args", [])), env=env)
        async with Client(params, mode="legacy") as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
        assert "recall" in tools, label
    daemon = json.loads((snippet_home / "daemon.json").read_text())
    for label, entry in http:
        url = re.sub(r"^http://[^/]+", daemon["url"].rsplit("/mcp", 1)[0], str(entry["url"]))
        async with Client(url) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
        assert "recall" in tools, label
