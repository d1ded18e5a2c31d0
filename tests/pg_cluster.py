"""A throwaway PostgreSQL cluster for the tests: started once per test session, in a temp dir.

``pg_url`` (a fixture) yields a URL to a fresh, empty database per test (``CREATE DATABASE``
is a file copy of ``template1``, a few ms on the throwaway cluster). The cluster comes from the
``initdb``/``pg_ctl`` found on PATH or under ``/usr/lib/postgresql/*/bin``; it listens on a
unix socket in its own directory and on a free loopback port (trust auth: nothing but this
process's tests can reach it while it lives, and it is deleted at exit).

``initdb`` refuses to run as root: as root the cluster runs as an unprivileged user
(``postgres`` if it exists, else ``nobody``) through ``runuser``.

When no server can be started the tests that need one skip with the reason, except under
``CI`` (any non-empty value), where they fail: CI must never skip the PostgreSQL suite silently.
Other test modules import it: ``from tests.pg_cluster import pg_url  # noqa: F401``.
"""

from __future__ import annotations

import atexit
import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

START_TIMEOUT_S = 60


@dataclass
class Cluster:
    """A running throwaway cluster."""

    datadir: Path
    bindir: Path
    port: int
    user: str | None  # the OS user it runs as (None: this process's user)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://bosun@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        _run(self, [str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", "immediate", "-w", "stop"],
             check=False)
        shutil.rmtree(self.datadir.parent, ignore_errors=True)


def find_bindir() -> Path | None:
    """The directory holding initdb and pg_ctl (PATH first, then Debian's versioned dirs, newest first)."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(os.path.realpath(on_path)).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0, reverse=True)
    for initdb in candidates:
        bindir = Path(initdb).parent
        if (bindir / "pg_ctl").exists():
            return bindir
    return None


def _run_as() -> str | None:
    """The unprivileged user to run the cluster as when we are root (None when we are not)."""
    if os.getuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise RuntimeError("running as root and neither a 'postgres' nor a 'nobody' user exists for initdb")


def _run(cluster: Cluster | None, argv: list[str], user: str | None = None, check: bool = True,
         timeout: float = START_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    user = cluster.user if cluster is not None else user
    if user is not None:
        argv = ["runuser", "-u", user, "--", *argv]
    return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=timeout, cwd="/")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_cluster() -> Cluster:
    """initdb + pg_ctl start in a fresh temp dir; raises RuntimeError saying why it could not."""
    bindir = find_bindir()
    if bindir is None:
        raise RuntimeError("no PostgreSQL server binaries (initdb/pg_ctl not on PATH nor in /usr/lib/postgresql/*/bin)")
    user = _run_as()
    root = Path(tempfile.mkdtemp(prefix="bosun-pg-"))
    datadir = root / "data"
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    root.chmod(0o700)
    try:
        _run(None, [str(bindir / "initdb"), "-D", str(datadir), "-U", "bosun", "--auth=trust", "-E", "UTF8",
                    "--locale=C", "--no-sync"], user=user)
        port = _free_port()
        cluster = Cluster(datadir, bindir, port, user)
        opts = (f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c full_page_writes=off -c max_connections=200 -c shared_buffers=32MB")
        _run(cluster, [str(bindir / "pg_ctl"), "-D", str(datadir), "-o", opts, "-l", str(root / "log"),
                       "-w", "-t", str(START_TIMEOUT_S), "start"])
    except (subprocess.SubprocessError, OSError) as exc:
        detail = getattr(exc, "stderr", "") or ""
        log = root / "log"
        if log.exists():
            detail += log.read_text(errors="replace")[-2000:]
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"the throwaway PostgreSQL cluster did not start: {exc} {detail.strip()}") from exc
    return cluster


_cluster: Cluster | None = None
_failure: str | None = None
_names = itertools.count(1)


def cluster() -> Cluster:
    """The session's cluster (started on first use, stopped at exit); skips or (under CI) fails without one."""
    global _cluster, _failure
    if _cluster is None and _failure is None:
        try:
            _cluster = start_cluster()
        except RuntimeError as exc:
            _failure = str(exc)
        else:
            atexit.register(_cluster.stop)
    if _cluster is None:
        reason = f"PostgreSQL unavailable: {_failure}"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI is set: the PostgreSQL tests must run, not skip)", pytrace=False)
        pytest.skip(reason)
    return _cluster


def fresh_database() -> str:
    """A new empty database on the session's cluster; returns its URL."""
    import psycopg

    c = cluster()
    name = f"bosun_test_{os.getpid()}_{next(_names)}"
    with psycopg.connect(c.url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return c.url(name)


@pytest.fixture
def pg_url() -> Iterator[str]:
    """The URL of a fresh database on the throwaway cluster (skips, or fails under CI, without one)."""
    yield fresh_database()


BACKENDS = ["sqlite", "postgresql"]


def with_backend(config: Any, backend: str) -> Any:
    """``config`` (a bosun Config) pointed at ``backend``: SQLite in its home, or a fresh PostgreSQL database."""
    if backend == "postgresql":
        config.database_url = fresh_database()
    return config


async def raw_execute(engine: Any, sql: str, params: tuple[Any, ...] = ()) -> None:
    """Run ``sql`` (``?`` placeholders) behind bosun's back on the engine's database, whichever backend:
    what a stray tool or an operator could do. Raises the driver's own error."""
    url = engine.config.database_url
    if not url:
        await engine.conn.execute_fetchall(sql, params)
        return
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(sql.replace("?", "%s"), params)
