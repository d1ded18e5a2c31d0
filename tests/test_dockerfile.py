"""The Dockerfile's contract, checked without a Docker engine.

The HEALTHCHECK command is run for real (with this interpreter standing in for the image's
``python``) against a tiny HTTP server: exit 0 only for a 200 from /healthz, 1 otherwise,
which is what Docker reads as healthy / unhealthy.
"""

from __future__ import annotations

import glob
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"


def instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) pairs with comments dropped and ``\\`` continuations joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # Docker drops comment lines inside a continuation
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = pending + line
        pending = ""
        keyword, _, rest = full.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    assert not pending, "Dockerfile ends inside a line continuation"
    return out


def healthcheck(parsed: list[tuple[str, str]]) -> tuple[dict[str, str], list[str]]:
    """The HEALTHCHECK options and its exec-form command."""
    found = [rest for kw, rest in parsed if kw == "HEALTHCHECK"]
    assert len(found) == 1, "exactly one HEALTHCHECK"
    options: dict[str, str] = {}
    rest = found[0]
    while rest.startswith("--"):
        opt, _, rest = rest.partition(" ")
        name, _, value = opt[2:].partition("=")
        options[name] = value
        rest = rest.strip()
    assert rest.startswith("CMD "), "HEALTHCHECK must use CMD"
    command = json.loads(rest[4:])
    assert isinstance(command, list) and all(isinstance(c, str) for c in command), "exec form (JSON array)"
    return options, command


def seconds(value: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)", value)
    assert match, f"bad duration {value!r}"
    number, unit = float(match.group(1)), match.group(2)
    return number / 1000 if unit == "ms" else number * 60 if unit == "m" else number


@pytest.fixture(scope="module")
def parsed() -> list[tuple[str, str]]:
    return instructions(DOCKERFILE.read_text())


def test_image_shape(parsed: list[tuple[str, str]]) -> None:
    keywords = [kw for kw, _ in parsed]
    assert parsed[0] == ("FROM", "python:3.11-slim")
    assert ("EXPOSE", "8790") in parsed
    entry = [json.loads(rest) for kw, rest in parsed if kw == "ENTRYPOINT"]
    assert entry == [["bosun", "serve", "--host", "0.0.0.0"]]
    runs = [rest for kw, rest in parsed if kw == "RUN"]
    assert "bosun provision" in runs, "the model must be assembled and verified at build time"
    # VOLUME after provisioning, or Docker discards what provisioning wrote under /data.
    assert keywords.index("VOLUME") > max(i for i, (kw, r) in enumerate(parsed) if r == "bosun provision")
    env = " ".join(rest for kw, rest in parsed if kw == "ENV")
    assert "BOSUN_HOME=/data" in env and "BOSUN_PORT=8790" in env
    users = [rest for kw, rest in parsed if kw == "USER"]
    assert users and users[-1] != "root", "the daemon must not run as root"


def test_copied_paths_exist_and_are_not_ignored(parsed: list[tuple[str, str]]) -> None:
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    for kw, rest in parsed:
        if kw != "COPY":
            continue
        *sources, _dest = rest.split()
        for src in sources:
            assert (ROOT / src).exists(), f"COPY {src}: not in the checkout"
            assert src not in ignored, f"COPY {src}: excluded by .dockerignore"


def test_healthcheck_timing(parsed: list[tuple[str, str]]) -> None:
    options, _ = healthcheck(parsed)
    assert seconds(options["start-period"]) >= 30, "start_period must cover the model load"
    assert seconds(options["timeout"]) >= 2


class _Health(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        code = self.status if self.path == "/healthz" else 404
        body = json.dumps({"model": {"state": "ready" if code == 200 else "loading"}}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@contextmanager
def _serve(status: int) -> Iterator[int]:
    handler = type("Handler", (_Health,), {"status": status})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _run_probe(parsed: list[tuple[str, str]], port: int) -> subprocess.CompletedProcess[str]:
    _, command = healthcheck(parsed)
    assert command[0] == "python", "the image's python runs the probe (slim has no curl)"
    env = {**os.environ, "BOSUN_PORT": str(port)}
    return subprocess.run([sys.executable, *command[1:]], env=env, capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize(("status", "expected"), [(200, 0), (503, 1), (500, 1)])
def test_healthcheck_probe_reads_healthz(parsed: list[tuple[str, str]], status: int, expected: int) -> None:
    with _serve(status) as port:
        result = _run_probe(parsed, port)
    assert result.returncode == expected, result.stderr


def test_healthcheck_probe_fails_when_nothing_listens(parsed: list[tuple[str, str]]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound but not listening: connection refused
        result = _run_probe(parsed, port)
    assert result.returncode == 1, result.stderr


def test_every_package_folder_is_installed_by_pip() -> None:
    """The image runs ``pip install .`` (not editable): a package missing from pyproject is absent there."""
    setuptools_cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools_cfg["packages"])
    found = set()
    for dotted, folder in setuptools_cfg["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            if "__pycache__" not in rel.parts:
                found.add(".".join([dotted, *rel.parts]))
    assert found - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"


def test_entrypoint_and_provision_parse_with_the_real_cli(parsed: list[tuple[str, str]]) -> None:
    from bosun.server.cli import build_parser

    entry = next(json.loads(rest) for kw, rest in parsed if kw == "ENTRYPOINT")
    args = build_parser().parse_args(entry[1:])
    assert (args.command, args.host, args.port) == ("serve", "0.0.0.0", None)  # port from BOSUN_PORT
    assert build_parser().parse_args(["provision"]).check is False


def package_folder(dotted: str, package_dir: dict[str, str]) -> Path:
    """Where setuptools looks for ``dotted``: the longest mapped prefix plus the remaining parts."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        prefix = ".".join(parts[:i])
        if prefix in package_dir:
            return ROOT / package_dir[prefix] / Path(*parts[i:])
    return ROOT / Path(*parts)


def test_every_data_file_is_package_data() -> None:
    """Non-Python files inside the package folders must match ``package-data``, or the image lacks them."""
    setuptools_cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    package_dir: dict[str, str] = setuptools_cfg["package-dir"]
    shipped: set[Path] = set()
    for dotted, patterns in setuptools_cfg.get("package-data", {}).items():
        folder = package_folder(dotted, package_dir)
        for pattern in patterns:  # setuptools expands these with a recursive glob in the package folder
            shipped.update((folder / hit).resolve() for hit in glob.glob(pattern, root_dir=folder, recursive=True))
    missing = [
        path.relative_to(ROOT).as_posix()
        for folder in package_dir.values()
        for path in (ROOT / folder).rglob("*")
        if path.is_file()
        and path.suffix not in (".py", ".pyc")
        and "__pycache__" not in path.parts
        and path.resolve() not in shipped
    ]
    assert missing == [], "add these to [tool.setuptools.package-data] in pyproject.toml"
