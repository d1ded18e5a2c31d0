"""Route telemetry: one JSON line per route attempt, off unless BOSUN_TELEMETRY_PATH is set.

Records the outcome (routed / abstained / failed with a class), the degraded
flag, corpus size, route and delivered latency, and the names returned:
never the prompt text and never a path. Stdlib only, so the Claude Code hook
can record its own failures without importing numpy. A broken sink never
costs a turn: every error here is swallowed.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

ENV = "BOSUN_TELEMETRY_PATH"
FAILURE_CLASSES = ("input", "corpus_load", "model", "route", "daemon", "timeout", "render")
_lock = threading.Lock()


def path() -> str | None:
    value = os.environ.get(ENV, "").strip()
    return os.path.expanduser(value) if value else None


def write(event: dict[str, Any]) -> None:
    target = path()
    if not target:
        return
    event.setdefault("ts", round(time.time(), 3))
    line = json.dumps(event, separators=(",", ":")) + "\n"
    try:
        with _lock:
            fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
    except OSError:
        pass


def record_route(result: dict[str, Any], via: str, delivered_ms: float) -> None:
    hits = result.get("hits") or []
    write({
        "outcome": "routed" if hits else "abstained",
        "via": via,
        "degraded": bool(result.get("degraded", False)),
        "corpus_size": int(result.get("corpus_size", 0)),
        "route_ms": round(float(result.get("route_ms", 0.0)), 3),
        "delivered_ms": round(delivered_ms, 3),
        "cached": bool(result.get("cached", False)),
        "names": [h.get("name") for h in hits if isinstance(h, dict)],
        "notices": len(result.get("notices") or []),
    })


def record_failure(failure_class: str, via: str, delivered_ms: float | None = None) -> None:
    event: dict[str, Any] = {"outcome": "failed", "failure_class": failure_class, "via": via}
    if delivered_ms is not None:
        event["delivered_ms"] = round(delivered_ms, 3)
    write(event)
