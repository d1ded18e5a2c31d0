"""Can this process write BOSUN_HOME? If not, one line that says why, by whom, and how to fix it.

The Docker image runs as uid 10001. A bind mount (``-v ./data:/data``) is a folder Docker creates
as root, or one the host user owns: without this check ``bosun serve`` died deep inside SQLite
(``unable to open database file``) after a long traceback and ``bosun provision`` with a bare
``PermissionError``. Checked by doing (a probe file is created and removed), not by reading mode
bits, so ACLs, root-squashed NFS and read-only mounts give the true answer.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

EXIT_UNWRITABLE = 2


def _nearest_existing(path: Path) -> Path:
    """``path`` itself, or the closest ancestor that exists (where ``mkdir -p`` would start)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(path.anchor or "/")


def _probe_dir(directory: Path) -> OSError | None:
    """None if a file can be created (and removed) in ``directory``, else the error that stopped it."""
    try:
        fd, name = tempfile.mkstemp(prefix=".bosun-probe-", dir=directory)
    except OSError as exc:
        return exc
    os.close(fd)
    os.unlink(name)
    return None


def _probe_file(path: Path) -> OSError | None:
    """None if ``path`` (an existing file) opens for writing; nothing is written or truncated."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
    except OSError as exc:
        return exc
    os.close(fd)
    return None


def describe(home: Path, blocked: Path, st: os.stat_result, error: OSError, uid: int, gid: int) -> str:
    """The one line: what is not writable, by whom, who owns it, and the two fixes."""
    if blocked == home:
        what = f"BOSUN_HOME {home}"
    elif blocked in home.parents:
        what = f"BOSUN_HOME {home} cannot be created: {blocked}"
    else:
        what = f"{blocked} in BOSUN_HOME"
    if error.errno == errno.EROFS:
        return (f"bosun: {what} is on a read-only filesystem (uid {uid}, gid {gid} cannot write it); "
                "mount it read-write (drop ':ro' from the volume) or set BOSUN_HOME to a writable path")
    target = home if home.exists() else blocked
    owner = f"{st.st_uid}:{st.st_gid}"
    fix = f"fix: `chown -R {uid}:{gid} {target}` (for a Docker bind mount: the host folder)"
    if st.st_uid != 0:
        fix += f", or run as its owner (`docker run --user {owner}`)"
    return (f"bosun: {what} is not writable by this process (uid {uid}, gid {gid}): "
            f"owned by {owner}, mode {stat.filemode(st.st_mode)}; {fix}")


def home_problem(home: Path, inside: Iterable[Path] = ()) -> str | None:
    """None when bosun can create and update its files in ``home``; otherwise the one-line reason.

    ``inside`` names files or folders bosun rewrites in place (the database, the model folder):
    checked when they exist, since an old root-owned ``bosun.db`` fails like a root-owned home.
    """
    uid, gid = os.geteuid(), os.getegid()
    start = _nearest_existing(home)
    checks: list[Path] = [start]
    checks += [p for p in inside if p.exists() or p.is_symlink()]
    for path in checks:
        error = _probe_dir(path) if path.is_dir() else _probe_file(path)
        if error is not None and error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return describe(home, path, path.stat(), error, uid, gid)
    return None
