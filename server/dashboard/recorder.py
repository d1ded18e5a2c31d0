"""The recorder: one telemetry line per tool call, with bosun's own codes about it.

Middleware around every ``tools/call``: the tool's name, latency and error flag, and from its
answer only bosun's verdict codes (precheck verdict and rule, seal drift verdict, audit pass/fail
with its issue codes, claim count and compliance). The task id is kept so the dashboard can show
a task's drift history and loop-guard blocks. Never an argument value, prompt or path. It also
remembers which clients and sessions were seen recently (the dashboard's counts) and tells
listeners that something changed, so open dashboards refresh.
"""

from __future__ import annotations

import time
from typing import Any

from bosun.server import telemetry
from bosun.server.dashboard.fleet import Tally
from bosun.server.services.changes import ChangeListeners
from bosun.server.services.stats import StatsService

MAX_ID = 64  # a task id longer than this is not one bosun issued: not recorded


def _field(result: Any, snake: str, camel: str) -> Any:
    if isinstance(result, dict):
        return result.get(camel, result.get(snake))
    return getattr(result, snake, None)


def drift_verdict(answer: dict[str, Any]) -> str | None:
    """The seal verdict of an answer (``"ok"`` or ``{"verdict": ...}``); None when no seal was checked."""
    drift = answer.get("drift")
    if isinstance(drift, str):
        return drift
    if isinstance(drift, dict) and isinstance(drift.get("verdict"), str):
        return str(drift["verdict"])
    return None


def codes_of(tool: str, answer: dict[str, Any], error: bool) -> dict[str, Any]:
    """bosun's own codes in a tool answer (the only parts of an answer that reach telemetry)."""
    out: dict[str, Any] = {"drift": drift_verdict(answer)}
    if tool == "precheck" and not error:
        out["verdict"] = answer.get("verdict")
        out["rule"] = answer.get("rule")
    elif tool == "audit":
        if error:  # an enforced audit that failed raises: the answer is the error
            out.update(passed=False, issues=["enforcement_raised"])
        else:
            out.update(passed=bool(answer.get("trust_passed")), issues=telemetry.codes(answer.get("policy_issues") or []),
                       claims=len(answer.get("claims") or []), compliance=answer.get("compliance_rate"))
    elif tool == "observe" and not error:
        out["offloaded"] = answer.get("offloaded")
    return out


def client_identity(ctx: Any) -> str | None:
    """Which client program sent a request: ``initialize``'s clientInfo (name/version) and the peer's host.

    A client that reconnects, a bridge that restarts, or a library that opens a session per call opens
    many sessions; it is one client. None when the client did not say who it is (then its session counts)."""
    params = getattr(getattr(ctx, "session", None), "client_params", None)
    info = getattr(params, "client_info", None)
    name = getattr(info, "name", None)
    if not isinstance(name, str) or not name:
        return None
    peer = getattr(getattr(ctx, "request", None), "client", None)
    host = getattr(peer, "host", None) or "local"
    return f"client:{name[:64]}/{str(getattr(info, 'version', '') or '')[:32]}@{host}"


def client_key(ctx: Any) -> str | None:
    """Who sent a request, as well as the transport tells: the legacy era's ``Mcp-Session-Id``, else the
    TCP peer of an HTTP request (a client keeps its connection), else the stdio session object."""
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    if headers is not None:
        sid = headers.get("mcp-session-id")
        if sid:
            return f"sid:{sid}"
        peer = getattr(request, "client", None)
        if peer is not None:
            return f"peer:{peer.host}:{peer.port}"
    session = getattr(ctx, "session", None)
    return f"obj:{id(session)}" if session is not None else None


class Recorder:
    """ServerMiddleware recording tool outcomes; ``changes`` tells open dashboards to refresh."""

    def __init__(self, stats: StatsService) -> None:
        self.stats = stats
        self.changes = ChangeListeners("telemetry")
        Tally.sessions = stats.sessions  # the fleet heartbeat counts this process's recent sessions

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        now = time.time()
        for seen, key in ((self.stats.sessions, client_key(ctx)), (self.stats.clients, client_identity(ctx) or client_key(ctx))):
            if key is None:
                continue
            seen[key] = now
            if len(seen) > 1000:  # forget the oldest half
                for old in sorted(seen, key=seen.__getitem__)[:500]:
                    del seen[old]
        if ctx.method != "tools/call" or not isinstance(ctx.params, dict):
            return await call_next(ctx)
        name = ctx.params.get("name")
        given = ctx.params.get("arguments")
        args: dict[str, Any] = given if isinstance(given, dict) else {}
        started = time.perf_counter()
        error = True
        result: Any = None
        try:
            result = await call_next(ctx)
            error = bool(_field(result, "is_error", "isError"))
            return result
        finally:
            self._record(str(name), args, result, error, (time.perf_counter() - started) * 1000)

    def _record(self, tool: str, args: dict[str, Any], result: Any, error: bool, ms: float) -> None:
        Tally.calls += 1
        Tally.errors += int(error)
        try:
            answer = _field(result, "structured_content", "structuredContent")
            answer = answer if isinstance(answer, dict) else {}
            task = args.get("task_id") or answer.get("task_id")
            task_id = task if isinstance(task, str) and 0 < len(task) <= MAX_ID else None
            telemetry.record_tool(tool[:MAX_ID], ms, error, task_id, **codes_of(tool, answer, error))
        except Exception:  # telemetry never costs a call
            pass
        self.changes.notify(tool)
