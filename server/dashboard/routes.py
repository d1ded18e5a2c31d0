"""The dashboard's HTTP routes, on the daemon's own port (same Host/Origin rules and token as ``/mcp``).

- ``GET /dashboard``: the page (static HTML, JS and CSS shipped as package data; no build step);
  ``GET /`` redirects there.
- ``GET /dashboard/api/stats``: the snapshot the page draws (``StatsService.snapshot``).
- ``GET /dashboard/api/ref?ref=...``: a stored result's outline, for a person (no task is charged).
- ``GET /dashboard/events``: server-sent events, one ``change`` whenever a task journal, the policy
  index or the telemetry changed (debounced), so the page refreshes live without polling the store.
- ``GET /dashboard/static/<file>``.

``bosun serve`` wraps the whole app in ``HttpGuard`` (Host/Origin, loopback) and, when a token is
set, ``BearerAuth``; each route here also checks the token itself (as ``/healthz`` does), so an app
built without those wrappers (tests, embedders) still refuses a request without it.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import AsyncIterator
from importlib import resources
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse

from bosun.core.errors import BosunError
from bosun.server.dashboard.fleet import fleet_snapshot
from bosun.server.dashboard.recorder import Recorder
from bosun.server.services.stats import StatsService

STATIC = {"app.js": "text/javascript; charset=utf-8", "style.css": "text/css; charset=utf-8"}
HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
}
DEBOUNCE_S = 0.3  # several writes in a burst become one change notice
KEEPALIVE_S = 15.0  # an SSE comment this often keeps proxies from closing an idle stream


def _static(name: str) -> bytes:
    return resources.files("bosun.server.dashboard").joinpath("static", name).read_bytes()


def authorised(request: Request, token: str | None) -> bool:
    """No token configured: open (the bind is loopback; serve refuses otherwise). Else the bearer token."""
    if not token:
        return True
    given = request.headers.get("authorization", "").encode()
    return hmac.compare_digest(given, f"Bearer {token}".encode())


def _refused() -> JSONResponse:
    return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401,
                        headers={"WWW-Authenticate": "Bearer"})


def add_routes(mcp: Any, engine: Any, stats: StatsService, recorder: Recorder) -> None:
    """Register the dashboard's routes on ``mcp`` (Starlette routes through ``custom_route``)."""

    def guarded(handler: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            if not authorised(request, engine.config.token):
                return _refused()
            return await handler(request)  # type: ignore[no-any-return]

        endpoint.__name__ = handler.__name__
        return endpoint

    async def page(request: Request) -> Response:
        return Response(_static("index.html"), media_type="text/html; charset=utf-8", headers=HEADERS)

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return JSONResponse({"error": "not found"}, status_code=404)
        return Response(_static(name), media_type=STATIC[name], headers=HEADERS)

    async def api_stats(request: Request) -> Response:
        snapshot = await stats.snapshot()
        snapshot["fleet"] = await fleet_snapshot(engine)  # every daemon on this state, not this one only
        return JSONResponse(snapshot, headers=HEADERS)

    async def api_ref(request: Request) -> Response:
        ref = request.query_params.get("ref", "")
        try:
            out, _text = await engine.recall.recall(ref, "outline")
        except BosunError as exc:
            return JSONResponse({"error": str(exc)}, status_code=404, headers=HEADERS)
        return JSONResponse(out, headers=HEADERS)

    async def events(request: Request) -> Response:
        return StreamingResponse(_changes(request, engine, recorder), media_type="text/event-stream",
                                 headers={**HEADERS, "X-Accel-Buffering": "no"})

    async def redirect(request: Request) -> Response:
        return RedirectResponse("/dashboard", status_code=307)

    mcp.custom_route("/", methods=["GET"])(guarded(redirect))  # a person opening the daemon's address
    mcp.custom_route("/dashboard", methods=["GET"])(guarded(page))
    mcp.custom_route("/dashboard/", methods=["GET"])(guarded(redirect))
    mcp.custom_route("/dashboard/static/{name}", methods=["GET"])(guarded(static))
    mcp.custom_route("/dashboard/api/stats", methods=["GET"])(guarded(api_stats))
    mcp.custom_route("/dashboard/api/ref", methods=["GET"])(guarded(api_ref))
    mcp.custom_route("/dashboard/events", methods=["GET"])(guarded(events))


async def _changes(request: Request, engine: Any, recorder: Recorder) -> AsyncIterator[bytes]:
    """``event: change`` after every committed task write, new policy index or recorded tool call."""
    loop = asyncio.get_running_loop()
    changed = asyncio.Event()

    def on_change(key: str) -> None:
        loop.call_soon_threadsafe(changed.set)

    removers = [engine.tasks.changes.add(on_change), engine.policies.changes.add(on_change),
                recorder.changes.add(on_change)]
    try:
        yield b"retry: 2000\nevent: hello\ndata: {}\n\n"
        while True:
            try:
                await asyncio.wait_for(changed.wait(), timeout=KEEPALIVE_S)
            except TimeoutError:
                if await request.is_disconnected():
                    return
                yield b": keepalive\n\n"
                continue
            await asyncio.sleep(DEBOUNCE_S)
            changed.clear()
            if await request.is_disconnected():
                return
            yield b"event: change\ndata: " + json.dumps({"at": loop.time()}).encode() + b"\n\n"
    finally:
        for remove in removers:
            remove()
