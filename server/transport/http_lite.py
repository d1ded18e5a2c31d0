"""A minimal HTTP/1.1 client for talking to the daemon on loopback, built on ``_socket`` alone.

``bosun stdio`` (the bridge) is started by every host for every session, ``bosun hook`` on every prompt
and ``bosun run`` on every shell command (through ``commands/_daemon.py``), and their start-up is on the
host's clock: ``http.client`` pulls in ``email`` (header parsing), ``ssl``, ``socket``, ``selectors``,
``calendar``, ``datetime``... (~35-40 ms of a ~100 ms attach), none of which a plain
keep-alive POST to ``127.0.0.1`` needs. This is the part of HTTP/1.1 the daemon's uvicorn speaks:
a request with ``Content-Length``, a response framed by ``Content-Length``, chunked encoding or the
connection's close; header names compared case-insensitively. No TLS, no redirects, no proxies.

Every failure (refused, reset, a malformed or truncated response) is an ``OSError``, so callers
handle one exception type as they did with ``OSError`` + ``http.client.HTTPException``.
"""

from __future__ import annotations

import _socket

CHUNK = 65536
MAX_LINE = 65536
MAX_HEADERS = 200


class HttpProtocolError(OSError):
    """The peer's answer is not HTTP/1.1 as expected (or ended early)."""


def split_url(url: str) -> tuple[str, int, str]:
    """``(host, port, path)`` of an ``http://`` URL (``urllib.parse.urlsplit``'s answer for these URLs)."""
    rest = url.split("://", 1)[1] if "://" in url else url
    netloc, slash, path = rest.partition("/")
    netloc = netloc.rpartition("@")[2]
    if netloc.startswith("["):  # IPv6 literal
        host, _, after = netloc[1:].partition("]")
        port_text = after[1:] if after.startswith(":") else ""
    else:
        host, _, port_text = netloc.partition(":")
    path = (slash + path).split("?", 1)[0].split("#", 1)[0]
    return host.lower() or "127.0.0.1", int(port_text) if port_text else 80, path


class Response:
    """One response: status, headers, and the body read by ``read`` / ``readline`` (decoded from chunks)."""

    def __init__(self, conn: Connection, status: int, headers: dict[str, str], method: str) -> None:
        self.conn = conn
        self.status = status
        self.headers = headers
        self.will_close = headers.get("connection", "").lower() == "close"
        self.chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        self.left: int | None = None  # bytes left in the body (or the current chunk); None: until close
        self.done = False
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            self.done = True
        elif self.chunked:
            self.left = 0
        elif "content-length" in headers:
            try:
                self.left = int(headers["content-length"])
            except ValueError:
                raise HttpProtocolError(f"bad Content-Length {headers['content-length']!r}") from None
            self.done = self.left <= 0
        else:
            self.will_close = True  # the body runs until the peer closes
        self.pending = b""  # body bytes read ahead by readline
        if self.done:
            self._finish()

    def getheader(self, name: str, default: str | None = None) -> str | None:
        return self.headers.get(name.lower(), default)

    def _finish(self) -> None:
        self.done = True
        if self.will_close:
            self.conn.close()
        else:
            self.conn.response = None

    def _next_piece(self) -> bytes:
        """The next decoded piece of the body; ``b""`` at its end."""
        if self.done:
            return b""
        conn = self.conn
        if self.chunked:
            if self.left == 0:
                size_line = conn.readline()
                if not size_line:
                    raise HttpProtocolError("the response ended inside a chunked body")
                try:
                    self.left = int(size_line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise HttpProtocolError(f"bad chunk size {size_line[:40]!r}") from None
                if self.left == 0:
                    while conn.readline() not in (b"\r\n", b"\n", b""):  # trailers
                        pass
                    self._finish()
                    return b""
            assert self.left is not None
            piece = conn.read_some(self.left)
            if not piece:
                raise HttpProtocolError("the response ended inside a chunk")
            self.left -= len(piece)
            if self.left == 0 and conn.readline() not in (b"\r\n", b"\n"):
                raise HttpProtocolError("a chunk is not followed by CRLF")
            return piece
        if self.left is None:
            piece = conn.read_some(CHUNK)
            if not piece:
                self._finish()
            return piece
        piece = conn.read_some(self.left)
        if not piece:
            raise HttpProtocolError(f"the response ended {self.left} bytes before its Content-Length")
        self.left -= len(piece)
        if self.left == 0:
            self._finish()
        return piece

    def read(self) -> bytes:
        """The rest of the body."""
        parts = [self.pending]
        self.pending = b""
        while True:
            piece = self._next_piece()
            if not piece:
                return b"".join(parts)
            parts.append(piece)

    def readline(self) -> bytes:
        """The body's next line with its ``\\n`` (the last line may lack it); ``b""`` at the end."""
        while True:
            cut = self.pending.find(b"\n")
            if cut >= 0:
                line, self.pending = self.pending[: cut + 1], self.pending[cut + 1:]
                return line
            piece = self._next_piece()
            if not piece:
                line, self.pending = self.pending, b""
                return line
            self.pending += piece


class Connection:
    """A keep-alive connection (``http.client.HTTPConnection``'s calls that the bridge uses), Nagle off:
    small JSON-RPC posts must not wait for delayed ACKs. It reconnects on the next request after a close."""

    def __init__(self, host: str, port: int, timeout: float | None = None) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.sock: _socket.socket | None = None
        self.buffer = b""
        self.response: Response | None = None
        self.method = "GET"

    def connect(self) -> None:
        error: OSError | None = None
        # an ASCII host goes as bytes: a str host loads the idna codec on every start
        host: str | bytes = self.host.encode("ascii") if self.host.isascii() else self.host
        for family, kind, proto, _, address in _socket.getaddrinfo(host, self.port, 0, _socket.SOCK_STREAM):
            sock = _socket.socket(family, kind, proto)
            try:
                sock.settimeout(self.timeout)
                sock.connect(address)
                sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
            except OSError as exc:
                sock.close()
                error = exc
                continue
            self.sock = sock
            self.buffer = b""
            return
        raise error or OSError(f"cannot resolve {self.host}")

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock = None
        self.buffer = b""
        self.response = None

    def request(self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        if self.response is not None:  # the previous body was not read to its end: the stream is out of step
            self.close()
        if self.sock is None:
            self.connect()
        assert self.sock is not None
        host = f"[{self.host}]" if ":" in self.host else self.host
        lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{self.port}" if self.port != 80 else f"Host: {host}",
                 "Accept-Encoding: identity"]
        if body or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body)}")
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self.method = method
        try:
            self.sock.sendall(head + body if len(body) < CHUNK else head)
            if len(body) >= CHUNK:
                self.sock.sendall(body)
        except OSError:
            self.close()
            raise

    def getresponse(self) -> Response:
        try:
            status_line = self.readline()
            if not status_line:
                raise HttpProtocolError("the peer closed the connection without answering")
            version, _, rest = status_line.decode("latin-1").partition(" ")
            if not version.startswith("HTTP/"):
                raise HttpProtocolError(f"not an HTTP status line: {status_line[:60]!r}")
            try:
                status = int(rest.split(" ", 1)[0])
            except ValueError:
                raise HttpProtocolError(f"bad status line {status_line[:60]!r}") from None
            headers: dict[str, str] = {}
            for _ in range(MAX_HEADERS):
                line = self.readline()
                if line in (b"\r\n", b"\n"):
                    break
                if not line:
                    raise HttpProtocolError("the response ended inside its headers")
                name, _, value = line.decode("latin-1").partition(":")
                key = name.strip().lower()
                value = value.strip()
                headers[key] = f"{headers[key]}, {value}" if key in headers else value
            else:
                raise HttpProtocolError("too many response headers")
            if version == "HTTP/1.0" and headers.get("connection", "").lower() != "keep-alive":
                headers["connection"] = "close"
            self.response = Response(self, status, headers, self.method)
            return self.response
        except OSError:
            self.close()
            raise

    # -- buffered reads ------------------------------------------------------------------------
    def _fill(self) -> bool:
        if self.sock is None:
            return False
        data = self.sock.recv(CHUNK)
        if not data:
            return False
        self.buffer += data
        return True

    def readline(self) -> bytes:
        """One raw line from the socket with its ``\\n``; ``b""`` when the peer closed first."""
        start = 0
        while True:
            cut = self.buffer.find(b"\n", start)
            if cut >= 0:
                line, self.buffer = self.buffer[: cut + 1], self.buffer[cut + 1:]
                return line
            if len(self.buffer) > MAX_LINE:
                raise HttpProtocolError("a response line is too long")
            start = len(self.buffer)
            if not self._fill():
                line, self.buffer = self.buffer, b""
                return line if line.endswith(b"\n") else b""

    def read_some(self, most: int) -> bytes:
        """Up to ``most`` bytes (at least one unless the peer closed)."""
        if not self.buffer and not self._fill():
            return b""
        piece, self.buffer = self.buffer[:most], self.buffer[most:]
        return piece
