"""Owner-only files: BOSUN_HOME is 0700 and every file bosun writes in it 0600, whatever the umask.

The store holds task journals and tool outputs (redacted, but still the user's work); on a
shared machine nobody else should read them. SQLite creates its database 0644 (less the umask)
and gives the ``-wal`` and ``-shm`` files the database's mode, so the database file is created
here first, 0600, and the rest follow it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) and make it owner-only if it is ours (an upgrade from a 0755 home)."""
    path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    st = path.stat()
    if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & 0o077:
        path.chmod(stat.S_IMODE(st.st_mode) & DIR_MODE)
    return path


def private_file(path: Path) -> Path:
    """Create ``path`` empty (0600) if missing, or drop the group/other bits of an existing one we own."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    except FileExistsError:
        tighten(path)
    else:
        os.close(fd)
    return path


def tighten(path: Path) -> None:
    """Owner-only mode on an existing regular file we own (never through a symlink)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & 0o077:
        path.chmod(FILE_MODE)


def tighten_home(home: Path) -> None:
    """BOSUN_HOME 0700 and every regular file directly in it 0600 (logs and locks other code created)."""
    private_dir(home)
    for entry in home.iterdir():
        tighten(entry)
