"""The dashboard extension: ``/dashboard`` on the daemon's HTTP port, and the telemetry it reads.

``register(mcp, engine)`` (listed in ``server/app.py``'s ``EXTENSIONS``) does three things:

1. binds this process's telemetry sink to the Engine's Config (``$BOSUN_HOME/telemetry.jsonl``
   unless ``BOSUN_TELEMETRY=off``), so a daemon on a temp home writes there;
2. adds the recorder middleware: one telemetry line per tool call (name, latency, error flag,
   and bosun's own verdict codes: precheck verdict and rule, seal drift verdict, audit pass/fail
   and issue codes; never an argument value);
3. adds the HTTP routes (``routes.py``): the page, its JSON, live change notices (SSE), a ref's
   outline, and the static files.
"""

from __future__ import annotations

from typing import Any

from bosun.server import telemetry
from bosun.server.dashboard.recorder import Recorder
from bosun.server.dashboard.routes import add_routes
from bosun.server.services.stats import StatsService


def register(mcp: Any, engine: Any) -> None:
    cfg = engine.config
    telemetry.bind(cfg.telemetry, cfg.telemetry_path, cfg.home)
    stats = StatsService(engine)
    recorder = Recorder(stats)
    mcp.middleware.append(recorder)
    add_routes(mcp, engine, stats, recorder)
