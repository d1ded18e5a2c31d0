"""Open a file under a root without ever leaving it, race-free.

Checking a real path and then opening the path again can be raced: a directory swapped for a
symlink in between (an atomic rename exchange) leads the open outside the root. Here the open
itself is confined, and the caller checks and reads through the descriptor it got:

- ``openat2(root_fd, rel, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`` where the kernel has it
  (Linux >= 5.6): symlinks are followed only while they stay beneath the root;
- else component by component with ``O_NOFOLLOW`` from the root's descriptor: no symlink at all.
"""

from __future__ import annotations

import ctypes
import errno
import os
from functools import cache

SYS_OPENAT2 = 437  # the same number on every Linux architecture (asm-generic)
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_BENEATH = 0x08
OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY  # a FIFO must not block the open


class Escape(OSError):
    """The path leads outside the root (a symlink out, or an absolute link)."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


@cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _openat2(dir_fd: int, rel: str) -> int | None:
    """The descriptor, or None when the kernel (or a seccomp filter) has no openat2."""
    libc = _libc()
    if libc is None or not hasattr(libc, "syscall"):
        return None
    how = _OpenHow(OPEN_FLAGS, 0, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
    fd = libc.syscall(SYS_OPENAT2, dir_fd, os.fsencode(rel), ctypes.byref(how), ctypes.sizeof(how))
    if fd >= 0:
        return int(fd)
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EPERM):  # an old kernel, or a seccomp profile that refuses the call
        return None
    if err in (errno.EXDEV, errno.ELOOP):
        raise Escape(err, "the path leads outside its root", rel)
    raise OSError(err, os.strerror(err), rel)


def _walk_nofollow(dir_fd: int, parts: list[str]) -> int:
    """Open ``parts`` under ``dir_fd`` one component at a time, refusing every symlink."""
    fd = os.dup(dir_fd)
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            flags = (OPEN_FLAGS if last else os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC) | os.O_NOFOLLOW
            try:
                nxt = os.open(part, flags, dir_fd=fd)
            except OSError as exc:
                # ELOOP: the last component is a symlink; ENOTDIR on a directory component: a symlink
                # (O_NOFOLLOW) or a file; neither is followed here
                if exc.errno == errno.ELOOP or (exc.errno == errno.ENOTDIR and not last):
                    raise Escape(errno.ELOOP, "a symlink on the path (not followed without openat2)", part) from exc
                raise
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_beneath(root: str, rel: str) -> int:
    """A read-only descriptor of ``rel`` resolved strictly beneath ``root`` (the caller closes it)."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise Escape(errno.EXDEV, "not a path beneath the root", rel)
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fd = _openat2(root_fd, "/".join(parts))
        return fd if fd is not None else _walk_nofollow(root_fd, parts)
    finally:
        os.close(root_fd)


def read_fd(fd: int, limit: int) -> bytes:
    """At most ``limit + 1`` bytes from ``fd`` (one more than allowed tells the caller it grew)."""
    chunks: list[bytes] = []
    left = limit + 1
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
