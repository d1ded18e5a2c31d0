"""``bosun run``'s lean path without ``os``: the posix stand-ins behave as the os calls they replace."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from bosun.server.commands import _lean, run_fast


@pytest.mark.parametrize("path", ["~", "~/.bosun", "~/a/../b", "rel/dir", "./x", "/abs/dir", "/abs//dir/", "/a/./b",
                                  "/", "~nosuchuser_zz/x", "", "..", "/a/b/.."])
def test_abspath_is_os_abspath_of_expanduser(path: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    for home in ("/home/someone", "/home/someone/", "/"):
        monkeypatch.setenv("HOME", home)
        assert _lean.abspath(path) == os.path.abspath(os.path.expanduser(path))


def test_env_reads_the_environment_as_os_environ_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOSUN_X_TEST", " caf\u00e9 ")
    assert _lean.env("BOSUN_X_TEST") == os.environ["BOSUN_X_TEST"]
    monkeypatch.delenv("BOSUN_X_TEST")
    assert _lean.env("BOSUN_X_TEST", "dflt") == "dflt"


def test_home_dir_and_spool_under_a_new_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BOSUN_HOME", str(tmp_path / "new" / "home"))
    home = _lean.home_dir()
    assert home == str(tmp_path / "new" / "home")
    name, fd = run_fast.open_spool(home)  # parents created as os.makedirs would
    try:
        spool = Path(home) / "spool"
        assert (spool / name).is_file() and (spool.stat().st_mode & 0o777) == 0o700
        assert ((spool / name).stat().st_mode & 0o777) == 0o600
        assert not os.get_inheritable(fd)
    finally:
        os.close(fd)


def test_a_socket_prepared_during_a_long_command_is_replaced_by_a_fresh_one(tmp_path: Path) -> None:
    """A connection left idle while a long command ran may have been closed by the server: not reused."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        port = server.getsockname()[1]
        (tmp_path / "daemon.json").write_text(f'{{"url": "http://127.0.0.1:{port}/mcp", "token": "t"}}')
        daemon = run_fast._Daemon(str(tmp_path))
        daemon.prepare()
        first = daemon.sock
        assert first is not None and daemon.token == "t"
        assert daemon.fresh_socket() is first  # a short command: the prepared socket is used
        daemon.prepare()
        stale = daemon.sock
        daemon.connected_at = time.monotonic() - run_fast.IDLE_SOCKET_S - 1
        fresh = daemon.fresh_socket()
        assert fresh is not None and fresh is not stale
        for s in (first, fresh):
            s.close()


def test_no_daemon_file_means_no_socket(tmp_path: Path) -> None:
    daemon = run_fast._Daemon(str(tmp_path))
    daemon.prepare()
    assert daemon.fresh_socket() is None
