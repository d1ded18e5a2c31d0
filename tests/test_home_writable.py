"""An unwritable BOSUN_HOME: one clear line (who cannot write, who owns it, the fix), exit 2, no traceback.

The Docker case: the image runs as uid 10001 and ``-v ./data:/data`` is a folder owned by root or by
the host user. Here the same situation is made for real: as root (CI), the command runs as
``nobody`` against a folder root owns; as any other user, against a folder of ours without write
permission (a root process could write anywhere, so that variant needs a non-root user).
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bosun.server.home_check import describe, home_problem
from tests.helpers_proc import BOSUN, env_for

NOBODY = 65534


@pytest.fixture
def locked_home() -> Iterator[tuple[Path, bool]]:
    """A folder this test's bosun process cannot write, and how to run bosun as that process."""
    base = Path(tempfile.mkdtemp(prefix="bosun-home-check-"))
    base.chmod(0o755)  # mkdtemp makes it 0700: nobody must be able to reach the folder inside
    home = base / "data"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    as_nobody = os.geteuid() == 0
    if not as_nobody:
        home.chmod(0o555)
    try:
        yield home, as_nobody
    finally:
        home.chmod(0o755)
        for p in sorted(base.rglob("*"), reverse=True):
            p.rmdir() if p.is_dir() else p.unlink()
        base.rmdir()


# As root: import what the command needs, then drop to nobody and run the real ``main`` (the
# interpreter may live under /root, which nobody cannot read, so it cannot simply exec as nobody).
AS_NOBODY = f"""
import os, sys
import anyio, bosun.server.cli, bosun.server.home_check, bosun.server.model, bosun.server.provision
import bosun.server.transport.serve, bosun.server.config, logging, pathlib
bosun.server.cli.build_parser()  # imports every command module (the CLI imports them lazily)
os.setgroups([]); os.setgid({NOBODY}); os.setuid({NOBODY})
bosun.server.cli.main(sys.argv[1:])
"""


def _run(args: list[str], home: Path, as_nobody: bool) -> subprocess.CompletedProcess[str]:
    env = env_for(home, BOSUN_TOKEN="t" * 32)
    cmd = [sys.executable, "-c", AS_NOBODY, *args] if as_nobody else [*BOSUN, *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def _owner(path: Path) -> str:
    st = path.stat()
    return f"{st.st_uid}:{st.st_gid}"


@pytest.mark.parametrize("command", [["serve", "--host", "0.0.0.0", "--port", "0"], ["provision"]])
def test_unwritable_home_is_one_line_and_exit_2(locked_home: tuple[Path, bool], command: list[str]) -> None:
    home, as_nobody = locked_home
    result = _run(command, home, as_nobody)
    uid = NOBODY if as_nobody else os.geteuid()
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    line = lines[0]
    assert f"BOSUN_HOME {home} is not writable" in line
    assert f"uid {uid}" in line and f"owned by {_owner(home)}" in line
    assert f"chown -R {uid}:" in line
    assert result.stdout == ""
    assert list(home.iterdir()) == [], "nothing may be written when the home is refused"


def test_writable_home_passes_and_leaves_no_probe(tmp_path: Path) -> None:
    home = tmp_path / "data"
    home.mkdir()
    assert home_problem(home, [home / "bosun.db"]) is None
    assert list(home.iterdir()) == []


def test_missing_home_is_judged_by_the_folder_that_would_hold_it(tmp_path: Path) -> None:
    assert home_problem(tmp_path / "not" / "yet" / "there") is None
    assert not (tmp_path / "not").exists(), "the check creates nothing"


def test_unwritable_database_inside_a_writable_home(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes a read-only file anyway; the folder case above covers root via nobody")
    db = tmp_path / "bosun.db"
    db.write_bytes(b"")
    db.chmod(0o444)
    problem = home_problem(tmp_path, [db])
    assert problem is not None and f"{db} in BOSUN_HOME" in problem and "not writable" in problem


def _stat(uid: int, gid: int, mode: int) -> os.stat_result:
    return os.stat_result((mode, 0, 0, 1, uid, gid, 0, 0, 0, 0))


def test_message_names_owner_and_offers_user_only_for_a_non_root_owner() -> None:
    denied = OSError(errno.EACCES, "Permission denied")
    home = Path("/data")
    by_root = describe(home, home, _stat(0, 0, stat.S_IFDIR | 0o755), denied, 10001, 10001)
    assert "owned by 0:0, mode drwxr-xr-x" in by_root
    assert "chown -R 10001:10001 /data" in by_root and "--user" not in by_root  # never advise running as root
    by_user = describe(home, home, _stat(1000, 1000, stat.S_IFDIR | 0o755), denied, 10001, 10001)
    assert "docker run --user 1000:1000" in by_user


def test_read_only_mount_says_so() -> None:
    home = Path("/data")
    line = describe(home, home, _stat(10001, 10001, stat.S_IFDIR | 0o700), OSError(errno.EROFS, "ro"), 10001, 10001)
    assert "read-only filesystem" in line and "chown" not in line


def test_missing_home_under_a_locked_parent_names_the_parent() -> None:
    parent, home = Path("/srv"), Path("/srv/bosun")
    line = describe(home, parent, _stat(0, 0, stat.S_IFDIR | 0o755), OSError(errno.EACCES, "denied"), 1000, 1000)
    assert line.startswith("bosun: BOSUN_HOME /srv/bosun cannot be created: /srv is not writable")
    assert "chown -R 1000:1000 /srv" in line
