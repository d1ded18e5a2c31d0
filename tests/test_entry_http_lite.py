"""The bridge's loopback HTTP/1.1 client (server/transport/http_lite.py) against canned raw responses.

Each test serves exact bytes from a real socket, so the framing rules (Content-Length, chunked, close)
and the failure modes (truncated answers become ``OSError``) are checked on the wire, not on mocks.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from bosun.server.transport.http_lite import Connection, split_url


class Canned:
    """A one-thread server: for each accepted connection, reads requests and answers from ``replies``."""

    def __init__(self, replies: list[bytes], close_after: bool = False) -> None:
        self.replies = list(replies)
        self.requests: list[bytes] = []
        self.connections = 0
        self.close_after = close_after
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while self.replies:
            conn, _ = self.sock.accept()
            self.connections += 1
            with conn:
                while self.replies:
                    head = b""
                    while b"\r\n\r\n" not in head:
                        data = conn.recv(65536)
                        if not data:
                            break
                        head += data
                    if not head:
                        break
                    top, _, body = head.partition(b"\r\n\r\n")
                    length = next((int(line.split(b":")[1]) for line in top.split(b"\r\n")
                                   if line.lower().startswith(b"content-length:")), 0)
                    while len(body) < length:
                        body += conn.recv(65536)
                    self.requests.append(top + b"\r\n\r\n" + body)
                    conn.sendall(self.replies.pop(0))
                    if self.close_after:
                        break


@pytest.fixture()
def canned() -> Iterator[type[Canned]]:
    yield Canned


def test_content_length_and_keep_alive_reuse_one_connection(canned: type[Canned]) -> None:
    server = canned([b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nMcp-Session-Id: abc\r\n\r\nhello",
                     b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"])
    conn = Connection("127.0.0.1", server.port)
    conn.request("POST", "/mcp", body=b'{"a":1}', headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert (resp.status, resp.getheader("mcp-session-id"), resp.read()) == (200, "abc", b"hello")
    conn.request("POST", "/mcp", body=b"{}")
    resp = conn.getresponse()
    assert (resp.status, resp.read()) == (202, b"")
    assert server.connections == 1
    first = server.requests[0]
    assert first.startswith(b"POST /mcp HTTP/1.1\r\n") and f"Host: 127.0.0.1:{server.port}".encode() in first
    assert b"Content-Length: 7\r\n" in first and first.endswith(b'\r\n\r\n{"a":1}')


def test_chunked_event_stream_is_read_line_by_line(canned: type[Canned]) -> None:
    body = b"event: message\r\ndata: {\"id\":1}\r\n\r\ndata: {\"id\":2}\n\n"
    pieces = [body[:7], body[7:30], body[30:]]
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
    server = canned([b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                     + chunked])
    conn = Connection("127.0.0.1", server.port)
    conn.request("POST", "/mcp", body=b"{}")
    resp = conn.getresponse()
    lines = []
    while line := resp.readline():
        lines.append(line)
    assert b"".join(lines) == body
    assert lines[1] == b'data: {"id":1}\r\n'


def test_a_body_without_length_runs_to_the_close_and_the_next_request_reconnects(canned: type[Canned]) -> None:
    server = canned([b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it",
                     b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"], close_after=True)
    conn = Connection("127.0.0.1", server.port)
    conn.request("GET", "/healthz")
    assert conn.getresponse().read() == b"all of it"
    conn.request("GET", "/healthz")
    assert conn.getresponse().read() == b"ok"
    assert server.connections == 2


@pytest.mark.parametrize("reply", [
    b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",  # closed before Content-Length
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",  # closed inside a chunk
    b"",  # closed without answering
    b"SSH-2.0-OpenSSH\r\n\r\n",  # not HTTP at all
])
def test_a_truncated_or_foreign_answer_is_an_oserror(canned: type[Canned], reply: bytes) -> None:
    server = canned([reply], close_after=True)
    conn = Connection("127.0.0.1", server.port)
    conn.request("POST", "/mcp", body=b"{}")
    with pytest.raises(OSError):
        conn.getresponse().read()


def test_refused_is_an_oserror() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    with pytest.raises(OSError):
        Connection("127.0.0.1", port, timeout=2).request("GET", "/healthz")


def test_split_url_agrees_with_urlsplit() -> None:
    from urllib.parse import urlsplit

    for url in ("http://127.0.0.1:8790/mcp", "http://localhost:1/mcp?x=1", "http://[::1]:8790/mcp",
                "http://user@Host.Example:9/", "http://127.0.0.1/mcp"):
        parts = urlsplit(url)
        assert split_url(url) == (parts.hostname, parts.port or 80, parts.path), url


def test_the_bridge_path_does_not_import_http_client_ssl_or_email() -> None:
    """What the attach path used to load (issue 15: ~40 of 106 ms): http.client -> email, ssl, socket."""
    probe = ("import sys\nbefore = set(sys.modules)\nimport bosun.server.cli, bosun.server.transport.bridge\n"
             "print(sorted(m for m in ('http.client', 'ssl', 'email', 'socket', 'uuid', 'concurrent.futures', "
             "'subprocess', 'urllib.parse', 'pathlib', 'typing', 'logging') if m in set(sys.modules) - before))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
