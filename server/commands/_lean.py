"""The floor under the per-command entry points (the hooks, ``bosun run``): JSON, HTTP to the daemon, telemetry.

Why: a harness starts a fresh process for every prompt and every shell command, and on this
2-core machine ``import json`` (it loads ``re``, ``enum``, ``functools``, ``collections``) and
``import socket`` or ``signal`` (``enum``, ``selectors``) took 10 ms each quiet and 25-50 ms
loaded: more than the interpreter's own start under ``-S``. This module uses only modules built
into the interpreter (``_json``, ``_socket``, ``posix``) so the entry scripts run as
``python -S -P .../_hook_script.py`` without ``site`` and without those imports. Everything here
behaves as the ``json``/``socket``/``urllib`` code it replaces (the tests compare them), and falls
back to that code where the C accelerators are missing. ``os`` itself (``stat``, ``posixpath``,
``_collections_abc``: ~2-3 ms of CPU per process) is not imported on ``bosun run``'s path either: the
built-in ``posix`` does the same calls, and ``os`` loads only where a rare case needs it.
"""

from __future__ import annotations

import posix
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# -- JSON through the C accelerator json itself uses -------------------------------------------------------


def _constant(name: str) -> float:
    return {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}[name]


class _DecoderSettings:
    """The attributes ``_json.make_scanner`` reads: ``json.JSONDecoder()``'s defaults."""

    def __init__(self) -> None:
        self.strict = True
        self.object_hook = None
        self.object_pairs_hook = None
        self.parse_float = float
        self.parse_int = int
        self.parse_constant = _constant
        self.memo: dict[str, str] = {}


def _unserialisable(obj: Any) -> Any:
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


_scan: Callable[[str, int], tuple[Any, int]] | None
_encoders: dict[tuple[bool, bool], Callable[[Any, int], Any]] = {}
try:
    from _json import encode_basestring, encode_basestring_ascii, make_encoder, make_scanner

    _scan = make_scanner(_DecoderSettings())  # type: ignore[arg-type]  # it reads these attributes only
    for _compact in (True, False):  # json.dumps (allow_nan, no sort), with its separators or compact ones
        for _ascii in (True, False):
            _encoders[_compact, _ascii] = make_encoder(
                None, _unserialisable, encode_basestring_ascii if _ascii else encode_basestring, None,
                ":" if _compact else ": ", "," if _compact else ", ", False, False, True)
except (ImportError, TypeError):  # another interpreter, or another signature: the json module does the same
    _scan = None
    _encoders = {}

JSON_SPACE = " \t\n\r"


def loads(text: str | bytes) -> Any:
    """``json.loads``: one JSON value (surrounding whitespace allowed); ValueError otherwise."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if _scan is None:
        import json

        return json.loads(text)
    body = text.strip(JSON_SPACE)
    try:
        value, end = _scan(body, 0)
    except (StopIteration, SystemError):  # not JSON (the scanner reports errors through json.decoder, when loaded)
        value, end = None, -1
    if end != len(body):  # the json module says what is wrong, as json.loads would
        import json

        return json.loads(text)
    return value


def dumps(value: Any, compact: bool = False, ensure_ascii: bool = True) -> str:
    """``json.dumps(value, ensure_ascii=...)`` (``compact``: with ``separators=(",", ":")``)."""
    encode = _encoders.get((compact, ensure_ascii))
    if encode is None:
        import json

        return json.dumps(value, separators=(",", ":") if compact else None, ensure_ascii=ensure_ascii)
    return "".join(encode(value, 0))


# -- HTTP/1.1 to the loopback daemon over a raw socket ------------------------------------------------------
class HttpError(OSError):
    """The daemon answered something that is not HTTP."""


def endpoint(daemon_url: str, path: str) -> str:
    """http://127.0.0.1:8790/mcp, /v1/observe -> http://127.0.0.1:8790/v1/observe"""
    scheme, sep, rest = daemon_url.partition("://")
    netloc = rest.split("/", 1)[0]
    if not sep or scheme not in ("http", "https") or not netloc:
        raise ValueError(f"daemon url {daemon_url!r} is not an http(s) URL")
    return f"{scheme}://{netloc}{path}"


def host_port(netloc: str) -> tuple[str, int]:
    netloc = netloc.rsplit("@", 1)[-1]
    if netloc.startswith("["):
        host, _, rest = netloc[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else 80
    host, _, port = netloc.partition(":")
    return host or "127.0.0.1", int(port) if port else 80


def connect(host: str, port: int, timeout: float) -> Any:
    """A TCP socket connected to ``host:port`` (``_socket``: no ``socket`` module, no idna codec for a
    numeric or ASCII host). Close it with ``.close()``."""
    import _socket

    family = _socket.AF_INET6 if ":" in host else _socket.AF_INET
    sock = _socket.socket(family, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect((host, port))
        sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
    except BaseException:
        sock.close()
        raise
    return sock


def url_socket(url: str, timeout: float) -> Any:
    """A socket connected to a plain-http URL's host (None for https)."""
    scheme, _, rest = url.partition("://")
    if scheme != "http":
        return None
    return connect(*host_port(rest.partition("/")[0]), timeout)


def post_json(url: str, body: dict[str, Any], token: str | None, timeout: float,
              sock: Any = None) -> tuple[int, bytes]:
    """POST JSON and return (status, body). Plain-http URLs (the loopback daemon) are spoken to over a raw
    socket (``sock``, when already connected; closed here); https goes through urllib."""
    data = dumps(body).encode("utf-8")
    scheme, _, rest = url.partition("://")
    netloc, _, path = rest.partition("/")
    if scheme != "http":
        return _post_urllib(url, data, token, timeout)
    head = [f"POST /{path} HTTP/1.1", f"Host: {netloc}", "Content-Type: application/json",
            f"Content-Length: {len(data)}", "Connection: close"]
    if token:
        head.append(f"Authorization: Bearer {token}")
    request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data
    chunks = []
    if sock is None:
        sock = connect(*host_port(netloc), timeout)
    try:
        sock.settimeout(timeout)
        sock.sendall(request)
        while True:
            block = sock.recv(65536)
            if not block:
                break
            chunks.append(block)
    finally:
        sock.close()
    return parse_response(b"".join(chunks), netloc)


def _post_urllib(url: str, data: bytes, token: str | None, timeout: float) -> tuple[int, bytes]:
    import urllib.error
    import urllib.request

    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read()


def parse_response(raw: bytes, where: str = "the daemon") -> tuple[int, bytes]:
    """(status, body) of a whole HTTP/1.1 response (``Connection: close``); HttpError if it is not one."""
    header, sep, payload = raw.partition(b"\r\n\r\n")
    lines = header.decode("latin-1").split("\r\n")
    status_line = lines[0].split(" ", 2)
    if not sep or len(status_line) < 2 or not status_line[0].startswith("HTTP/") or not status_line[1].isdigit():
        raise HttpError(f"not an HTTP response from {where}")
    fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    if fields.get("transfer-encoding", "").lower() == "chunked":
        payload = dechunk(payload)
    return int(status_line[1]), payload


def dechunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2:]
    return bytes(out)


# -- the home, the daemon file, the process ---------------------------------------------------------------
def env(name: str, default: str = "") -> str:
    """``os.environ.get(name, default)`` from ``posix.environ`` (bytes, decoded as ``os.environ`` decodes them)."""
    value = posix.environ.get(name.encode())
    return default if value is None else value.decode(sys.getfilesystemencoding(), "surrogateescape")


def _is_normal(path: str) -> bool:
    """Whether ``os.path.normpath`` would leave an absolute ``path`` as it is."""
    return path.startswith("/") and not path.startswith("//") and "//" not in path and "/./" not in path \
        and "/../" not in path and not path.endswith(("/.", "/..")) and (path == "/" or not path.endswith("/"))


def abspath(path: str) -> str:
    """``os.path.abspath(os.path.expanduser(path))`` without loading ``os`` in the common cases."""
    if path == "~" or path.startswith("~/"):
        home = env("HOME")
        if home:
            path = (home.rstrip("/") + path[1:]) or "/"
    if not path.startswith("~"):
        if not path.startswith("/"):
            path = f"{posix.getcwd()}/{path}"
        if _is_normal(path):
            return path
    import os.path

    return os.path.abspath(os.path.expanduser(path))


def home_dir(given: str | None = None) -> str:
    """``--home``, else ``$BOSUN_HOME``, else ``~/.bosun`` (as ``Config`` reads it), absolute."""
    return abspath(given or env("BOSUN_HOME").strip() or "~/.bosun")


def read_daemon(home: str) -> tuple[str, str | None]:
    """The daemon's URL and token from ``daemon.json`` (OSError/ValueError/KeyError/TypeError when none)."""
    with open(f"{home.rstrip('/')}/daemon.json", "rb") as fh:
        info = loads(fh.read())
    token = info.get("token")
    return str(info["url"]), token if isinstance(token, str) and token else None


def process_age_ms() -> float | None:
    """Milliseconds since this process started (the interpreter's start-up included), from /proc."""
    import os

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

    The entry scripts appended this directory to ``sys.path``; it is moved back behind site-packages, so a
    module here (``progress.py``, ``stats.py``...) never stands in for an installed package of that name."""
    if sys.flags.no_site:
        import os
        import site

        site.main()
        here = os.path.dirname(os.path.abspath(__file__))
        if here in sys.path:
            sys.path.remove(here)
            sys.path.append(here)


# -- telemetry of a process with no Config bound (server/telemetry.py's ``write`` for the hook) ----------
TELEMETRY_FILE = "telemetry.jsonl"
TELEMETRY_MAX_BYTES = 4 * 1024 * 1024
TELEMETRY_GENERATIONS = 2


def telemetry_path() -> str | None:
    """``$BOSUN_TELEMETRY_PATH``, else ``$BOSUN_HOME/telemetry.jsonl``; None when ``BOSUN_TELEMETRY=off``."""
    import os

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
    import os

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
        line = dumps(event, compact=True) + "\n"
        append_rotating(target, line, TELEMETRY_MAX_BYTES, TELEMETRY_GENERATIONS)
    except (OSError, TypeError, ValueError):
        pass
