"""The daemon's listening socket and how its address reads, for a single daemon (``serve.py``) and for the
supervisor of ``bosun serve --workers N`` (``workers.py``): both bind, neither may import the other."""

from __future__ import annotations

import socket


class ServeError(RuntimeError):
    """The daemon cannot start as configured (the message says why)."""


def bind_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # proto set: asyncio then turns Nagle off
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port") from exc
    sock.listen(512)
    sock.setblocking(False)
    return sock


def bound_address(host: str, port: int) -> str:
    """``host:port`` as bound (``0.0.0.0:8790``, ``[::]:8790``): what the operator exposed, not what to dial."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def url_host(host: str) -> str:
    """The host to dial for a bound one (a wildcard bind is dialled on loopback)."""
    if host in ("0.0.0.0", "::", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host
