"""Reaching the running daemon of a home from a CLI command: its address, one HTTP request, the hook's telemetry.

``daemon.json`` names the daemon's URL and token (0600, beside the database). Every request goes through
``transport/http_lite.py``, the loopback HTTP/1.1 client the stdio bridge uses too (plain HTTP, as the
daemon serves it; ``http.client`` would load ``email``, ``ssl``... on every prompt), with the bearer token
and a timeout, so a hung daemon never hangs the shell.

The per-prompt and per-command entry points (``bosun hook``, ``bosun run``) import this module too, also
as a plain sibling module when their scripts run under ``python -S -P`` (no ``site``, so none of bosun's
packages; the scripts put ``commands/`` and ``transport/`` on ``sys.path``): it imports the standard
library and ``http_lite`` only, and bosun's other modules inside functions.
"""

from __future__ import annotations

import json
import os
import sys
import time

if __package__:
    from bosun.server.transport import http_lite
else:  # a sibling under ``python -S -P`` (see _hook_script.py)
    import http_lite  # type: ignore[no-redef]

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

    from bosun.server.transport.http_lite import Connection

TIMEOUT_S = 10.0


class DaemonUnreachable(Exception):
    """No daemon answers for this home (the message says why)."""


def home_dir(given: str | None = None) -> str:
    """``--home``, else ``$BOSUN_HOME``, else ``~/.bosun`` (as ``Config`` reads it), absolute."""
    return os.path.abspath(os.path.expanduser(given or os.environ.get("BOSUN_HOME", "").strip() or "~/.bosun"))


def read_daemon(home: str) -> tuple[str, str | None]:
    """The daemon's URL and token from ``daemon.json`` (OSError/ValueError/KeyError/TypeError when none)."""
    with open(os.path.join(home, "daemon.json"), "rb") as fh:
        info = json.loads(fh.read())
    token = info.get("token")
    return str(info["url"]), token if isinstance(token, str) and token else None


def daemon_base(home: Path) -> tuple[str, str | None]:
    """``(http://host:port, token)`` of the daemon serving ``home``; DaemonUnreachable when none is recorded."""
    from bosun.server.transport.daemon_file import pid_alive, read_daemon_file

    info = read_daemon_file(home)
    if not info or not isinstance(info.get("url"), str):
        raise DaemonUnreachable(f"no daemon is running for {home} (no daemon.json); start one with `bosun serve`")
    if "pid" in info and not pid_alive(info["pid"]):
        raise DaemonUnreachable(f"the daemon recorded in {home / 'daemon.json'} (pid {info['pid']}) is not running")
    token = info.get("token")
    return str(info["url"]).rsplit("/mcp", 1)[0], token if isinstance(token, str) and token else None


def endpoint(daemon_url: str, path: str) -> str:
    """http://127.0.0.1:8790/mcp, /v1/observe -> http://127.0.0.1:8790/v1/observe"""
    scheme, sep, rest = daemon_url.partition("://")
    netloc = rest.split("/", 1)[0]
    if not sep or scheme not in ("http", "https") or not netloc:
        raise ValueError(f"daemon url {daemon_url!r} is not an http(s) URL")
    return f"{scheme}://{netloc}{path}"


def connect(url: str, timeout: float) -> Connection:
    """A connection to ``url``'s host, opened now (OSError when nothing listens there)."""
    if not url.startswith("http://"):
        raise OSError(f"{url}: the daemon serves plain http (TLS, where wanted, ends at a proxy in front of it)")
    host, port, _ = http_lite.split_url(url)
    conn = http_lite.Connection(host, port, timeout=timeout)
    conn.connect()
    return conn


def request(method: str, url: str, body: dict[str, Any] | None, token: str | None, timeout: float,
            conn: Connection | None = None) -> tuple[int, bytes]:
    """``(status, body)`` of one request with a JSON body (over ``conn`` when one is open already; closed here).
    Every failure, an answer that is not HTTP included, is an OSError."""
    conn = conn or connect(url, timeout)
    headers = {"Content-Type": "application/json", "Connection": "close"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        data = b"" if body is None else json.dumps(body).encode("utf-8")
        conn.request(method, http_lite.split_url(url)[2], data, headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def post_json(url: str, body: dict[str, Any], token: str | None, timeout: float,
              conn: Connection | None = None) -> tuple[int, bytes]:
    """POST JSON and return (status, body)."""
    return request("POST", url, body, token, timeout, conn)


def get_json(base: str, path: str, token: str | None, timeout: float = TIMEOUT_S) -> tuple[int, dict[str, Any]]:
    """``(status, body)`` of a GET; DaemonUnreachable when nothing answers."""
    try:
        status, data = request("GET", base + path, None, token, timeout)
    except (OSError, ValueError) as exc:
        raise DaemonUnreachable(f"the daemon at {base} does not answer: {exc}") from exc
    try:
        return status, json.loads(data or b"{}")
    except ValueError as exc:
        if status >= 400:
            return status, {}
        raise DaemonUnreachable(f"the daemon at {base} does not answer: {exc}") from exc


def process_age_ms() -> float | None:
    """Milliseconds since this process started (the interpreter's start-up included), from /proc."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            stat = fh.read().decode("ascii", "replace")
        start_ticks = int(stat.rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", "rb") as fh:
            uptime = float(fh.read().split()[0])
        return max(0.0, (uptime - start_ticks / os.sysconf("SC_CLK_TCK")) * 1000)
    except (OSError, ValueError, IndexError):
        return None


def with_site() -> None:
    """Load ``site`` now if the interpreter started without it (``-S``): bosun's own modules live in site-packages.

    The entry scripts appended this directory and ``transport/`` to ``sys.path``; they are moved back behind
    site-packages, so a module there (``progress.py``, ``stats.py``...) never stands in for an installed package
    of that name."""
    if sys.flags.no_site:
        import site

        site.main()
        for where in script_path():
            if where in sys.path:
                sys.path.remove(where)
                sys.path.append(where)


def script_path() -> list[str]:
    """The directories the ``-S`` entry scripts import from as siblings: this one and ``transport/``."""
    here = os.path.dirname(os.path.abspath(__file__))
    return [here, os.path.join(os.path.dirname(here), "transport")]


def parse_args(argv: list[str], quick_parse: Callable[[list[str]], Any], prog: str, example: str,
               add_arguments: Callable[[argparse.ArgumentParser], None]) -> Any:
    """A per-call command's options: its own quick parser's (no argparse to import), else argparse's, which
    loads bosun's modules to explain ``--help`` or a typo."""
    opts = quick_parse(argv)
    if opts is None:
        with_site()
        import argparse

        from bosun.server.commands import with_example

        parser = argparse.ArgumentParser(prog=prog, **with_example(example))
        add_arguments(parser)
        opts = parser.parse_args(argv)
    return opts


# -- telemetry of a process with no Config bound (server/telemetry.py's ``write`` for the hook) ----------
TELEMETRY_FILE = "telemetry.jsonl"
TELEMETRY_MAX_BYTES = 4 * 1024 * 1024
TELEMETRY_GENERATIONS = 2


def telemetry_path() -> str | None:
    """``$BOSUN_TELEMETRY_PATH``, else ``$BOSUN_HOME/telemetry.jsonl``; None when ``BOSUN_TELEMETRY=off``."""
    if os.environ.get("BOSUN_TELEMETRY", "").strip().lower() == "off":
        return None
    chosen = os.environ.get("BOSUN_TELEMETRY_PATH", "").strip()
    if chosen:
        return os.path.expanduser(chosen)
    base = os.environ.get("BOSUN_HOME", "").strip() or "~/.bosun"
    return os.path.join(os.path.expanduser(base), TELEMETRY_FILE)


def append_rotating(target: str, line: str, max_bytes: int, generations: int) -> None:
    """Append ``line`` to ``target`` (0600, its directory 0700 when new); past ``max_bytes`` shift ``.1`` to
    ``.2`` ... (dropping the oldest) and the live file to ``.1``. Raises OSError; shared with telemetry.write."""
    parent = os.path.dirname(target)
    if parent and not os.path.isdir(parent):
        os.makedirs(parent, mode=0o700, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    if size >= max_bytes:
        for i in range(generations, 1, -1):
            older = f"{target}.{i - 1}"
            if os.path.exists(older):
                os.replace(older, f"{target}.{i}")
        os.replace(target, f"{target}.1")


def telemetry_write(event: dict[str, Any]) -> None:
    """Append one event line (rotated at ``TELEMETRY_MAX_BYTES``, as ``telemetry.write``); never raises."""
    target = telemetry_path()
    if not target:
        return
    event.setdefault("ts", round(time.time(), 3))
    try:
        line = json.dumps(event, separators=(",", ":")) + "\n"
        append_rotating(target, line, TELEMETRY_MAX_BYTES, TELEMETRY_GENERATIONS)
    except (OSError, TypeError, ValueError):
        pass
