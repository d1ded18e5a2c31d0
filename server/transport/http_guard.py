"""One set of HTTP rules for every route (``/mcp``, ``/v1/route``, ``/healthz``): plain ASGI middleware.

The SDK's DNS-rebinding protection covers ``/mcp`` only; custom routes sat outside it. Here,
for every request:

- Host: on a loopback bind, only a loopback name (a DNS-rebinding page sends its own host).
- Origin: when sent, it must be a loopback origin on a loopback bind (a browser page elsewhere
  cannot drive bosun); beyond loopback the bearer token is the guard (sidecar names vary).
- Body: at most ``max_body`` bytes (``route_body`` for ``/v1/route``), refused with 413 before
  it is parsed; a JSON body nested deeper than ``MAX_DEPTH`` is refused with 400, so no parser
  meets a 100,000-level document (a ``RecursionError``). Both are checked while the body
  arrives; a large body is spooled to a file meanwhile and handed on as one object
  (``body_spool.py``), so it is held once, not as chunks plus their join.

Refusals are short JSON bodies, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from bosun.server.transport.body_spool import TRIM_ABOVE, BodyBuffer, release_freed_memory
from bosun.server.transport.json_scan import MAX_DEPTH, DepthLimit

if TYPE_CHECKING:
    from bosun.server.transport.big_call import Handoff

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]

ROUTE_BODY = 1 << 20  # /v1/route carries one prompt (at most 100 kB) and top_k
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
def _host_name(value: str) -> str:
    """The name part of a Host header (``[::1]:8790`` -> ``[::1]``, ``localhost:1`` -> ``localhost``)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[: value.find("]") + 1] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def is_loopback_name(name: str) -> bool:
    return name in LOOPBACK_NAMES or name.startswith("127.")


class HttpGuard:
    """Host, Origin, body-size and nesting rules in front of the whole Starlette app."""

    def __init__(self, app: ASGIApp, *, loopback: bool, max_body: int, route_body: int = ROUTE_BODY,
                 spool_dir: Path | None = None, big_observe: int = 0) -> None:
        self.app = app
        self.big_observe = big_observe  # bytes: a larger observe body reaches the SDK small (big_call.py); 0: never
        self.spool_dir = spool_dir  # where a large body waits while it arrives (None: in memory)
        self.loopback = loopback
        self.max_body = max_body
        self.route_body = route_body

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers") or []}
        problem = self._header_problem(headers)
        if problem is not None:
            await _refuse(send, *problem)
            return
        if scope.get("method") not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        limit = self.route_body if scope.get("path") == "/v1/route" else self.max_body
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            await _refuse(send, 413, _too_large(f"is {int(declared):,} bytes", limit))
            return
        buffer = BodyBuffer(self.spool_dir)
        try:
            if await self._receive_body(buffer, receive, send, limit):
                handoff = await self._big_call(scope, buffer)
                if handoff is not None:
                    buffer.close()  # the string is in its own file now; the SDK gets the rest
                    try:
                        await self.app(_with_length(scope, len(handoff.envelope)),
                                       _replay(iter([handoff.envelope]), receive), send)
                    finally:
                        handoff.value.release()
                    return
                # on piece by piece, not kept here: the app's copy is the only one
                await self.app(scope, _replay(buffer.pieces(), receive), send)
        finally:
            buffer.close()
            if buffer.size > TRIM_ABOVE:  # the call's copies of a huge body are freed now: return the pages
                await asyncio.to_thread(release_freed_memory)

    async def _big_call(self, scope: Scope, buffer: BodyBuffer) -> Handoff | None:
        """A huge ``observe`` body's small form (None for any other request: it goes on as it came)."""
        spooled = buffer.spooled
        if (not self.big_observe or buffer.size <= self.big_observe or spooled is None or self.spool_dir is None
                or scope.get("path") != "/mcp"):
            return None
        from bosun.server.transport.big_call import extract  # numpy and the spool: loaded for big bodies only

        return await asyncio.to_thread(extract, spooled, buffer.size, self.spool_dir)

    async def _receive_body(self, buffer: BodyBuffer, receive: Any, send: Any, limit: int) -> bool:
        """Read the body into ``buffer``, measuring it as it arrives; False once it was refused (or the
        client left). A body too large or too deep is refused before the rest is read."""
        depth = DepthLimit(MAX_DEPTH)
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return False
            chunk = message.get("body", b"")
            if buffer.size + len(chunk) > limit:
                await _refuse(send, 413, _too_large("is over that", limit))
                return False
            depth.feed(chunk)
            if depth.exceeded:
                await _refuse(send, 400, f"JSON nested deeper than {MAX_DEPTH} levels")
                return False
            buffer.add(chunk)
            if not message.get("more_body", False):
                return True

    def _header_problem(self, headers: dict[bytes, bytes]) -> tuple[int, str] | None:
        if not self.loopback:
            return None  # beyond loopback the bearer token guards every route
        host = _host_name(headers.get(b"host", b"").decode("latin-1"))
        if host and not is_loopback_name(host):
            return 421, f"Host {host!r} is not this loopback server"
        origin = headers.get(b"origin")
        if origin is not None:
            text = origin.decode("latin-1").strip()
            name = (urlsplit(text).hostname or "") if text != "null" else "null"
            if not is_loopback_name(name.lower()) and not is_loopback_name(f"[{name.lower()}]"):
                return 403, f"Origin {text!r} may not call this server"
        return None


def _replay(pieces: Iterator[bytes], receive: Any) -> Callable[[], Awaitable[dict[str, Any]]]:
    """A ``receive`` that hands on the buffered body's pieces, then defers to the real one (disconnects).

    It keeps no piece after handing it on: a 100 MB body is not held a second time for as
    long as the request runs."""
    upcoming: bytes | None = next(pieces, b"")

    async def replay() -> dict[str, Any]:
        nonlocal upcoming
        if upcoming is None:
            return dict(await receive())
        piece, upcoming = upcoming, next(pieces, None)
        return {"type": "http.request", "body": piece, "more_body": upcoming is not None}

    return replay


def _with_length(scope: Scope, length: int) -> Scope:
    """``scope`` with its Content-Length set to ``length`` (the body the app gets instead)."""
    headers = [(k, v) for k, v in scope.get("headers") or [] if k.lower() != b"content-length"]
    return {**scope, "headers": [*headers, (b"content-length", str(length).encode())]}


def _too_large(size: str, limit: int) -> str:
    """The 413 text: which limit, where it comes from, what to do (the bridge shows it to the model)."""
    return (f"request body {size}; the limit is {limit:,} bytes (BOSUN_MAX_PAYLOAD_BYTES per payload, "
            "JSON-escaped, plus the envelope): a payload argument (observe's result, select_context's "
            "candidates, audit's chunks) is too large; send less, or raise BOSUN_MAX_PAYLOAD_BYTES")


async def _refuse(send: Any, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
