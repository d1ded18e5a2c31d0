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


def stage(parsed: list[tuple[str, str]], name: str) -> list[tuple[str, str]]:
    """The instructions of the stage ``FROM ... AS name``."""
    return next(s for s in stages(parsed) if s[0][1].endswith(f" AS {name}"))


def stages(parsed: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The instructions of each build stage (each starts with its FROM)."""
    out: list[list[tuple[str, str]]] = []
    for kw, rest in parsed:
        if kw == "FROM":
            out.append([])
        out[-1].append((kw, rest))
    return out


@pytest.fixture(scope="module")
def final(parsed: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return stages(parsed)[-1]


def test_image_shape(parsed: list[tuple[str, str]], final: list[tuple[str, str]]) -> None:
    assert all(s[0][1].startswith("python:3.11-slim") for s in stages(parsed))
    assert final[0] == ("FROM", "python:3.11-slim")
    keywords = [kw for kw, _ in final]
    assert ("EXPOSE", "8790") in final
    entry = [json.loads(rest) for kw, rest in final if kw == "ENTRYPOINT"]
    assert entry == [["bosun", "serve", "--host", "0.0.0.0"]]
    runs = [rest for kw, rest in final if kw == "RUN"]
    assert "bosun provision" in runs, "the model must be assembled and verified at build time"
    # VOLUME after provisioning, or Docker discards what provisioning wrote under /data.
    assert keywords.index("VOLUME") > max(i for i, (kw, r) in enumerate(final) if r == "bosun provision")
    env = " ".join(rest for kw, rest in final if kw == "ENV")
    assert "BOSUN_HOME=/data" in env and "BOSUN_PORT=8790" in env
    users = [rest for kw, rest in final if kw == "USER"]
    assert users and users[-1] != "root", "the daemon must not run as root"


def test_user_and_group_ids_are_pinned_and_nothing_lands_in_data(final: list[tuple[str, str]]) -> None:
    """gid 10001 (not whatever --user-group picks: 999 is systemd-journal on many hosts), no home copied into /data."""
    account = next(cmd for kw, rest in final if kw == "RUN" for cmd in rest.split("&&") if "useradd" in cmd)
    group = next(cmd for kw, rest in final if kw == "RUN" for cmd in rest.split("&&") if "groupadd" in cmd)
    assert re.search(r"groupadd (--gid|-g) 10001\b", group)
    assert re.search(r"useradd .*--uid 10001\b", account) and re.search(r"useradd .*--gid 10001\b", account)
    for flag in ("--user-group", "--create-home", "-m ", "--system"):  # --system: the SYS_UID_MAX warning
        assert flag not in account, flag
    home = re.search(r"--home-dir (\S+)", account)
    assert home and not home.group(1).startswith("/data"), "$HOME inside the volume collects dotfiles"
    assert [rest for kw, rest in final if kw == "USER"][-1] == "10001:10001"
    env = " ".join(rest for kw, rest in final if kw == "ENV")
    cache = re.search(r"XDG_CACHE_HOME=(\S+)", env)
    assert cache and not cache.group(1).startswith("/data"), "onnxruntime writes its device id under the cache"


def test_sources_stay_in_the_build_stage(final: list[tuple[str, str]]) -> None:
    copies = [rest for kw, rest in final if kw == "COPY"]
    assert copies and all(c.startswith("--from=build ") for c in copies), copies
    assert not any(kw == "WORKDIR" and rest == "/src" for kw, rest in final)


def test_dependencies_install_from_the_lock(parsed: list[tuple[str, str]]) -> None:
    build = stage(parsed, "build")
    copied = " ".join(rest for kw, rest in build if kw == "COPY")
    assert "constraints.txt" in copied and "--from=requirements /requirements.txt" in copied
    installs = [rest for kw, rest in build if kw == "RUN" and "pip install" in rest]
    assert installs
    for run in installs:
        for command in run.split("&&"):
            if "pip install" in command:
                assert "-c constraints.txt" in command or "--no-deps" in command, command


def test_proxy_ca_is_a_secret_and_the_index_url_stays_in_the_build_stage(
    parsed: list[tuple[str, str]], final: list[tuple[str, str]]
) -> None:
    build = stage(parsed, "build")
    deps = next(rest for kw, rest in build if kw == "RUN" and "-c constraints.txt" in rest)
    assert "--mount=type=secret,id=ca" in deps and "PIP_CERT=/run/secrets/ca" in deps
    assert any(kw == "ARG" and rest.startswith("PIP_INDEX_URL") for kw, rest in build)
    assert not any(kw == "ARG" or "PIP_INDEX_URL" in rest or "PIP_CERT" in rest for kw, rest in final)


def test_lock_pins_every_dependency_within_pyproject() -> None:
    """constraints.txt covers pyproject's dependencies (and dev extras) at versions their specifiers allow."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not an exact pin"
            pins[canonicalize_name(name)] = version
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    for spec in map(Requirement, wanted):
        name = canonicalize_name(spec.name)
        assert name in pins, f"{spec.name} is not in constraints.txt: regenerate it (see its header)"
        assert spec.specifier.contains(pins[name], prereleases=True), f"{spec} excludes the pin {pins[name]}"


def test_secrets_and_local_state_stay_out_of_the_build_context() -> None:
    ignored = set((ROOT / ".dockerignore").read_text().splitlines())
    assert {"*.env", "data"} <= ignored
    assert "constraints.txt" not in ignored


def test_copied_paths_exist_and_are_not_ignored(parsed: list[tuple[str, str]]) -> None:
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    for kw, rest in parsed:
        if kw != "COPY" or rest.startswith("--from="):
            continue
        *sources, _dest = rest.split()
        for src in sources:
            assert (ROOT / src).exists(), f"COPY {src}: not in the checkout"
            assert src not in ignored, f"COPY {src}: excluded by .dockerignore"


def test_healthcheck_timing(parsed: list[tuple[str, str]]) -> None:
    options, _ = healthcheck(parsed)
    assert seconds(options["start-period"]) >= 30, "start_period must cover the model load"
    assert seconds(options["timeout"]) >= 2
    # The first probe comes one interval after start: keep it near the ~3-6 s the daemon needs.
    assert seconds(options["interval"]) <= 10
    # Docker Engine < 25 refuses to build a HEALTHCHECK with an option it does not know
    # ("Unknown flag: start-interval"); the start interval belongs in compose / docker run.
    assert set(options) <= {"interval", "timeout", "start-period", "retries"}


def test_compose_health_interval_is_the_images(parsed: list[tuple[str, str]]) -> None:
    """compose.yaml says that without start_interval (older engines) the image's interval applies:
    compose's own interval overrides the image's, so the two must be the same."""
    import yaml

    options, _ = healthcheck(parsed)
    spec = yaml.safe_load((ROOT / "compose.yaml").read_text())
    health = spec["services"]["bosun"]["healthcheck"]
    assert seconds(str(health["interval"])) == seconds(options["interval"])
    assert seconds(str(health["start_interval"])) <= 1


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


def test_the_image_installs_the_postgres_driver(parsed: list[tuple[str, str]], tmp_path: Path) -> None:
    """The requirements stage's own command, run here on the repository's pyproject: the runtime list
    it writes carries the postgres extra, so BOSUN_DATABASE_URL works in the image."""
    requirements = stage(parsed, "requirements")
    script = next(rest for kw, rest in requirements if kw == "RUN")  # shell form
    script = script.replace("/tmp/pyproject.toml", str(ROOT / "pyproject.toml"))
    script = script.replace("/requirements.txt", str(tmp_path / "requirements.txt"))
    subprocess.run(["sh", "-c", script.replace("python ", f"{sys.executable} ", 1)], check=True, timeout=60)
    wanted = (tmp_path / "requirements.txt").read_text().splitlines()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert wanted == [*project["dependencies"], *project["optional-dependencies"]["postgres"]]
    assert any(line.startswith("psycopg") for line in wanted)


def test_compose_postgres_runs_two_sidecars_on_one_database() -> None:
    """compose.postgres.yaml: two bosun services share one BOSUN_DATABASE_URL (without a password in it),
    each with its own /data volume and host port, started once PostgreSQL is healthy."""
    import yaml

    spec = yaml.safe_load((ROOT / "compose.postgres.yaml").read_text())
    services = spec["services"]
    sidecars = {name: svc for name, svc in services.items() if svc.get("image") == "bosun"}
    assert len(sidecars) == 2
    urls = {svc["environment"]["BOSUN_DATABASE_URL"] for svc in sidecars.values()}
    assert len(urls) == 1 and re.fullmatch(r"postgresql://bosun@postgres:5432/bosun", urls.pop())
    assert len({svc["volumes"][0].split(":")[0] for svc in sidecars.values()}) == 2
    assert len({svc["ports"][0] for svc in sidecars.values()}) == 2
    for svc in sidecars.values():
        assert svc["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert "postgres.env" in svc["env_file"] and "bosun.env" in svc["env_file"]
    db = services["postgres"]
    assert db["environment"]["POSTGRES_USER"] == "bosun" and db["environment"]["POSTGRES_DB"] == "bosun"
    assert "pg_isready" in db["healthcheck"]["test"]
    assert {"*.env"} <= set((ROOT / ".dockerignore").read_text().splitlines())  # postgres.env stays out
