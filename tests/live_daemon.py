"""A real ``bosun serve`` daemon (real embedded model) for a test module: ``live_daemon`` (its URL and home).

The framework adapter tests run their chains against it; import the fixtures with
``from tests.live_daemon import live_client, live_daemon  # noqa: F401``. ``live_client`` is a ``Bosun``
open on it that counts its round trips (``calls``), so a test can hold an adapter to one per call.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from bosun.client import Bosun
from bosun.middleware import close_shared
from tests.helpers_proc import BOSUN, env_for, stop, wait_for_daemon, wait_ready


class Daemon(NamedTuple):
    url: str  # its MCP endpoint
    home: Path  # its BOSUN_HOME (daemon.json names the URL: a client's default connection finds it)


@pytest.fixture(scope="module")
def live_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """One daemon per module (a start costs a few seconds), ready (model loaded) before the first test."""
    home = tmp_path_factory.mktemp("adapters") / "home"
    proc = subprocess.Popen([*BOSUN, "serve", "--port", "0", "--home", str(home)], env=env_for(home),
                            stderr=subprocess.DEVNULL)
    try:
        url = str(wait_for_daemon(home, proc)["url"])
        wait_ready(url)
        yield Daemon(url, home)
    finally:
        close_shared()  # the sessions middlewares opened on it by URL
        stop(proc.pid)
        proc.wait(timeout=15)


class Counting(Bosun):
    """A Bosun that counts its daemon round trips (every method, and ``call``, ends in the session's ``call``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[str] = []
        session_call = self._async.call

        async def counted(tool: str, arguments: dict[str, Any], progress: Any = None) -> dict[str, Any]:
            self.calls.append(tool)
            return await session_call(tool, arguments, progress)

        self._async.call = counted  # type: ignore[method-assign]


@pytest.fixture(scope="module")
def live_client(live_daemon: Daemon) -> Iterator[Counting]:
    with Counting(live_daemon.url) as client:
        yield client


def closed_url() -> str:
    """An MCP URL on a loopback port where nothing listens (the daemon is down)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/mcp"
