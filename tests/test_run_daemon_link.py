"""``bosun run``'s link to the daemon: its home and spool, and the connection opened while the command runs."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from bosun.server.commands import _daemon, run


def test_home_dir_and_spool_under_a_new_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BOSUN_HOME", str(tmp_path / "new" / "home"))
    home = _daemon.home_dir()
    assert home == str(tmp_path / "new" / "home")
    assert _daemon.home_dir("~/x") == os.path.expanduser("~/x")
    name, fd = run.open_spool(home)  # parents created
    try:
        spool = Path(home) / "spool"
        assert (spool / name).is_file() and (spool.stat().st_mode & 0o777) == 0o700
        assert ((spool / name).stat().st_mode & 0o777) == 0o600
        assert not os.get_inheritable(fd)
    finally:
        os.close(fd)


def test_a_connection_prepared_during_a_long_command_is_replaced_by_a_fresh_one(tmp_path: Path) -> None:
    """A connection left idle while a long command ran may have been closed by the server: not reused."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        port = server.getsockname()[1]
        (tmp_path / "daemon.json").write_text(f'{{"url": "http://127.0.0.1:{port}/mcp", "token": "t"}}')
        daemon = run._Daemon(str(tmp_path))
        daemon.prepare()
        first = daemon.sock
        assert first is not None and first.sock is not None and daemon.token == "t"
        assert daemon.fresh_socket() is first  # a short command: the prepared connection is used
        daemon.prepare()
        stale = daemon.sock
        daemon.connected_at = time.monotonic() - run.IDLE_SOCKET_S - 1
        fresh = daemon.fresh_socket()
        assert fresh is not None and fresh is not stale and stale.sock is None  # the stale one was closed
        for conn in (first, fresh):
            conn.close()


def test_no_daemon_file_means_no_connection(tmp_path: Path) -> None:
    daemon = run._Daemon(str(tmp_path))
    daemon.prepare()
    assert daemon.fresh_socket() is None


def test_an_answer_that_is_not_http_is_an_os_error(tmp_path: Path) -> None:
    """A stranger on the daemon's port (it answers garbage) is reported as the refused connection would be."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        url = f"http://127.0.0.1:{server.getsockname()[1]}/v1/route"
        conn = _daemon.connect(url, 10)
        peer, _ = server.accept()
        with peer:
            peer.sendall(b"SSH-2.0-OpenSSH\r\n")
            peer.shutdown(socket.SHUT_WR)
            with pytest.raises(OSError):
                _daemon.post_json(url, {"prompt": "x"}, None, 10, conn)
