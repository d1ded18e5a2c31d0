"""The npm launcher (npm/bin/bosun-mcp.js), run for real with node against fake interpreters.

Fakes stand in for python and uvx: they record their argv, echo one stdin line to stdout (so the
test can tell the child's output from anything the launcher might add), and exit with a chosen
code. Skipped when node is not installed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

import bosun

ROOT = Path(__file__).resolve().parents[1]
LAUNCHER = ROOT / "npm" / "bin" / "bosun-mcp.js"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not on PATH")

FAKE = """#!{python}
import json, os, signal, sys, time
log = {log!r}
if "-c" in sys.argv[1:3] or sys.argv[1:] == ["--version"]:
    sys.exit(int(os.environ.get("FAKE_PROBE_EXIT", "0")))  # the launcher's capability probes
def on_term(signum, frame):
    with open(log + ".signal", "w") as fh:
        fh.write(str(signum))
    sys.exit(int(os.environ.get("FAKE_TERM_EXIT", "0")))
signal.signal(signal.SIGTERM, on_term)
with open(log, "w") as fh:
    json.dump({{"argv": sys.argv[1:], "name": os.path.basename(sys.argv[0])}}, fh)
line = sys.stdin.readline()
sys.stdout.write(line)
sys.stdout.flush()
if os.environ.get("FAKE_WAIT"):
    while True:
        time.sleep(0.05)
sys.exit(int(os.environ.get("FAKE_EXIT", "0")))
"""


def make_fake(path: Path, log: Path) -> Path:
    path.write_text(FAKE.format(python=sys.executable, log=str(log)))
    path.chmod(0o755)
    return path


def run_launcher(
    env: dict[str, str], args: list[str] | None = None, stdin: str = "ping\n"
) -> subprocess.CompletedProcess[str]:
    assert NODE is not None
    return subprocess.run(
        [NODE, str(LAUNCHER), *(args or [])],
        input=stdin,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )


def base_env(path_dir: Path) -> dict[str, str]:
    """A minimal environment whose PATH holds only ``path_dir`` (no real uvx or python)."""
    return {"PATH": str(path_dir), "HOME": os.environ.get("HOME", "/tmp")}


def test_versions_are_pinned_together() -> None:
    package = json.loads((ROOT / "npm" / "package.json").read_text())
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert package["name"] == "bosun-mcp" == pyproject["project"]["name"]
    assert pyproject["project"]["dynamic"] == ["version"]  # written once, in bosun/__init__.py
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "bosun.__version__"}
    assert package["version"] == bosun.__version__
    assert package["bin"] == {"bosun-mcp": "bin/bosun-mcp.js"}
    assert "bosun-mcp==${VERSION}" in LAUNCHER.read_text()


def test_bosun_python_runs_bosun_stdio_and_passes_args(tmp_path: Path) -> None:
    log = tmp_path / "argv.json"
    fake = make_fake(tmp_path / "fakepython", log)
    env = {**base_env(tmp_path / "empty"), "BOSUN_PYTHON": str(fake), "FAKE_EXIT": "7"}
    result = run_launcher(env, ["--standalone"])
    assert json.loads(log.read_text())["argv"] == ["-P", "-m", "bosun", "stdio", "--standalone"]
    assert result.returncode == 7  # the child's exit code comes back unchanged
    assert result.stdout == "ping\n"  # only the child's bytes: the launcher adds nothing to stdout
    assert "BOSUN_PYTHON" in result.stderr


def test_uvx_runs_the_pinned_pypi_release(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "argv.json"
    make_fake(bindir / "uvx", log)
    make_fake(bindir / "python3", tmp_path / "python3.json")  # uvx wins over a local python
    result = run_launcher(base_env(bindir), ["--standalone"])
    assert result.returncode == 0, result.stderr
    version = json.loads((ROOT / "npm" / "package.json").read_text())["version"]
    assert json.loads(log.read_text())["argv"] == ["--from", f"bosun-mcp=={version}", "bosun-mcp", "--standalone"]
    assert not (tmp_path / "python3.json").exists()
    assert result.stdout == "ping\n"


def test_falls_back_to_a_python_with_bosun(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "argv.json"
    make_fake(bindir / "python3", log)
    result = run_launcher(base_env(bindir))
    assert result.returncode == 0, result.stderr
    assert json.loads(log.read_text()) == {"argv": ["-P", "-m", "bosun", "stdio"], "name": "python3"}
    assert result.stdout == "ping\n"


def test_python_without_bosun_is_skipped(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    make_fake(bindir / "python3", tmp_path / "python3.json")
    make_fake(bindir / "python", tmp_path / "python.json")
    env = {**base_env(bindir), "FAKE_PROBE_EXIT": "1"}  # too old, or bosun not importable
    result = run_launcher(env)
    assert result.returncode == 127
    assert result.stdout == ""
    assert "pip install bosun-mcp==" in result.stderr and "uv" in result.stderr
    assert not (tmp_path / "python3.json").exists() and not (tmp_path / "python.json").exists()


def test_nothing_found_exits_127_with_clean_stdout(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = run_launcher(base_env(tmp_path / "empty"))
    assert result.returncode == 127
    assert result.stdout == ""
    assert "BOSUN_PYTHON" in result.stderr


def test_sigterm_is_forwarded_and_exit_code_propagated(tmp_path: Path) -> None:
    assert NODE is not None
    log = tmp_path / "argv.json"
    fake = make_fake(tmp_path / "fakepython", log)
    env = {
        **base_env(tmp_path / "empty"),
        "BOSUN_PYTHON": str(fake),
        "FAKE_WAIT": "1",
        "FAKE_TERM_EXIT": "3",
    }
    proc = subprocess.Popen(
        [NODE, str(LAUNCHER)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("hello\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == "hello\n"  # the child is up and its handler installed
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + 5
    while not (tmp_path / "argv.json.signal").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert (tmp_path / "argv.json.signal").read_text() == str(int(signal.SIGTERM))
    assert code == 3


async def test_launcher_serves_real_bosun_over_stdio(tmp_path: Path) -> None:
    """End to end: an SDK stdio client -> node launcher -> ``python -m bosun stdio --standalone``."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    assert NODE is not None
    env = {"BOSUN_PYTHON": sys.executable, "BOSUN_HOME": str(tmp_path / "home"), "BOSUN_LAUNCHER_QUIET": "1"}
    params = StdioServerParameters(command=NODE, args=[str(LAUNCHER), "--standalone"], env=env)
    async with Client(params, mode="legacy") as client:
        tools = await client.list_tools()
    assert "recall" in {tool.name for tool in tools.tools}
