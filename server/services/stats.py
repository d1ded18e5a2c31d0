"""StatsService: what bosun saved, routed, blocked and audited, aggregated on demand (read only).

The dashboard, ``bosun stats`` and the dashboard's JSON all read this one snapshot. It is built
from the services the tools use (the task journals through ``engine.tasks``, the ledger through
``engine.ledger``, the policy index through ``engine.policies``, ``engine.health()``) and from
the local telemetry file (route outcomes, precheck verdicts, seal drift verdicts, audit results:
what the journal does not hold). Nothing here writes.
"""

from __future__ import annotations

import os
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bosun.core.task.ledger import Ledger
from bosun.core.task.memory import is_scope_id
from bosun.server import telemetry

if TYPE_CHECKING:
    from bosun.server.services.ports import StatsSource

TASK_LIMIT = 50  # tasks shown (most recently updated first)
SERIES_POINTS = 120  # points per time series (older points are merged)
SCOPE_ROWS = 16  # list_tasks rows fetched beyond the limit, for the shared memory scopes filtered out
LARGEST_REFS = 10
TOP = 8


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def _thin(points: list[dict[str, Any]], limit: int = SERIES_POINTS) -> list[dict[str, Any]]:
    """Keep at most ``limit`` points of a cumulative series (evenly spaced, the last one always kept)."""
    if len(points) <= limit:
        return points
    step = len(points) / limit
    kept = [points[int(i * step)] for i in range(limit - 1)]
    return [*kept, points[-1]]


class TelemetryReader:
    """The telemetry events: the live file is read on from where the last read stopped; everything is
    re-read only after a rotation (the rotated files or the live file's inode changed)."""

    def __init__(self) -> None:
        self._rotated: tuple[Any, ...] | None = None
        self._inode: int | None = None
        self._offset = 0
        self._events: list[dict[str, Any]] = []

    def events(self, target: str | None) -> list[dict[str, Any]]:
        if not target:
            return []
        live = Path(target)
        rotated = []
        for f in telemetry.generations(target):
            if f != live:
                try:
                    st = f.stat()
                except OSError:
                    continue
                rotated.append((f.name, st.st_ino, st.st_size))
        try:
            st = live.stat()
            inode, size = st.st_ino, st.st_size
        except OSError:
            inode, size = None, 0
        if tuple(rotated) != self._rotated or inode != self._inode or size < self._offset:
            self._events = [e for f in telemetry.generations(target) if f != live
                            for e in telemetry.read_events_of(f)]
            self._rotated, self._inode, self._offset = tuple(rotated), inode, 0
        if inode is not None and size > self._offset:
            with live.open("rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read(size - self._offset)
            end = chunk.rfind(b"\n") + 1  # a line still being written is read next time
            self._events.extend(telemetry.parse_lines(chunk[:end].decode("utf-8", errors="replace")))
            self._offset += end
        return self._events


LEDGER_KINDS = ("tool_result", "tool_failure", "dropped", "recalled", "file_read")


class _TaskFold:
    """One task's journal folded so far: its ledger, its savings timeline and its offloaded refs."""

    def __init__(self) -> None:
        self.version = 0
        self.ledger = Ledger()
        self.timeline: list[tuple[float, str, Any]] = []
        self.largest: list[dict[str, Any]] = []

    def add(self, task_id: str, ev: Any) -> None:
        self.version = max(self.version, int(ev.seq))
        if ev.kind not in LEDGER_KINDS:
            return
        p = ev.payload
        self.ledger.add_event(ev.kind, p)
        self.timeline.append((ev.created_at, ev.kind, p))
        if ev.kind in ("tool_result", "tool_failure") and p.get("offloaded") and p.get("ref"):
            self.largest.append({"ref": p["ref"], "tokens": int(p.get("tokens") or 0), "tool": p.get("tool"),
                                 "kind": p.get("content_kind"), "task_id": task_id, "at": ev.created_at})
            self.largest.sort(key=lambda r: -r["tokens"])
            del self.largest[LARGEST_REFS:]


def _savings_series(timeline: list[tuple[float, str, Any]]) -> list[dict[str, Any]]:
    """Cumulative offloaded / credited / overhead / carried / net tokens over all tasks, in time order."""
    running = Ledger()
    series = []
    for at, kind, payload in sorted(timeline, key=lambda item: item[0]):
        running.add_event(kind, payload)
        series.append({"t": round(at, 3), "offloaded": running.offloaded_tokens, "credited": running.credited_tokens,
                       "overhead": running.overhead_tokens,
                       "carried": running.stub_tokens + running.passed_through_tokens, "net": running.net_tokens})
    return _thin(series)


class StatsService:
    """One snapshot of the daemon's figures, built from the Engine's public services."""

    def __init__(self, engine: StatsSource) -> None:
        self.engine = engine
        self.reader = TelemetryReader()
        self.sessions: dict[str, float] = {}  # session (session id, TCP peer) -> last seen (kept by the recorder)
        self.clients: dict[str, float] = {}  # client program (clientInfo name/version @ host) -> last seen
        self._folds: dict[str, _TaskFold] = {}  # per task, folded up to its version: a snapshot reads only new events
        self._series_key: tuple[Any, ...] | None = None
        self._series: list[dict[str, Any]] = []

    def telemetry_path(self) -> str | None:
        cfg = self.engine.config
        return telemetry.sink_of(cfg.telemetry, cfg.telemetry_path, cfg.home)

    async def snapshot(self, task_limit: int = TASK_LIMIT) -> dict[str, Any]:
        """Everything the dashboard shows, as one JSON-ready dict."""
        events = self.reader.events(self.telemetry_path())
        tool_events = [e for e in events if e.get("event") == "tool"]
        tasks, savings = await self._tasks_and_savings(tool_events, task_limit)
        return {
            "generated_at": round(time.time(), 3),
            "daemon": self.daemon(),
            "tasks": tasks,
            "savings": savings,
            "routing": self.routing([e for e in events if telemetry.is_route(e)]),
            "audits": self.audits(tool_events),
            "guard": self.guard(tool_events),
            "tools": self.tools(tool_events),
            "telemetry": {"enabled": self.telemetry_path() is not None, "events": len(events)},
        }

    # -- the daemon --------------------------------------------------------------------------
    def daemon(self) -> dict[str, Any]:
        health = self.engine.health(detail=True)
        cfg = self.engine.config
        size: int | None = None  # not read on PostgreSQL (the database is shared, its size is the operator's)
        if not cfg.database_url:
            size = 0
            for suffix in ("", "-wal", "-shm"):
                try:
                    size += os.stat(f"{cfg.db_path}{suffix}").st_size
                except OSError:
                    pass
        recent = time.time() - 600
        health["store"] = {**health["store"], "bytes": size}
        health["store"].pop("path", None)  # the page is shown to whoever holds the token: no paths,
        health["store"].pop("url", None)  # and no database host or name
        health["sessions_recent"] = sum(1 for seen in self.sessions.values() if seen >= recent)
        health["clients_recent"] = sum(1 for seen in self.clients.values() if seen >= recent)
        health["started_at"] = self.engine.started_at
        return health

    # -- tasks and savings -------------------------------------------------------------------
    async def _fold(self, task_id: str, version: int) -> _TaskFold:
        """The task's ledger and savings timeline, folding only the journal events not seen yet."""
        fold = self._folds.get(task_id)
        if fold is None or fold.version > version:
            fold = self._folds[task_id] = _TaskFold()
        if fold.version < version:
            for ev in await self.engine.tasks.events(task_id, fold.version):
                fold.add(task_id, ev)
        return fold

    async def _tasks_and_savings(self, tool_events: list[dict[str, Any]],
                                 task_limit: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        try:  # a shared memory scope is journaled like a task but is not one: it is not shown as a task
            rows = [row for row in await self.engine.tasks.list_tasks(limit=task_limit + SCOPE_ROWS)
                    if not is_scope_id(row["task_id"])][:task_limit]
        except RuntimeError:  # the engine is not open yet
            rows = []
        by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for e in tool_events:
            if e.get("task"):
                by_task[str(e["task"])].append(e)
        total = Ledger()
        largest: list[dict[str, Any]] = []
        tasks = []
        folds = []
        for row in rows:
            tid = row["task_id"]
            fold = await self._fold(tid, int(row["version"]))
            folds.append(fold)
            state = await self.engine.tasks.get(tid)
            total.merge(fold.ledger)
            largest.extend(fold.largest)
            tasks.append(self._task(state, fold.ledger, by_task.get(tid, [])))
        key = tuple((row["task_id"], row["version"]) for row in rows)
        if key != self._series_key:
            self._series = _savings_series([item for fold in folds for item in fold.timeline])
            self._series_key = key
        largest.sort(key=lambda r: -r["tokens"])
        overall = total.to_dict(self.engine.ledger.prices, self.engine.ledger.price_model)
        overall["tasks"] = len(rows)
        return tasks, {"overall": overall, "series": self._series, "largest_refs": largest[:LARGEST_REFS]}

    def _task(self, state: Any, ledger: Ledger, events: list[dict[str, Any]]) -> dict[str, Any]:
        led = ledger.to_dict(self.engine.ledger.prices, self.engine.ledger.price_model)
        drift = [{"t": e.get("ts"), "verdict": e["drift"], "tool": e.get("tool")} for e in events if e.get("drift")]
        verdicts = Counter(e["verdict"] for e in events if e.get("tool") == "precheck" and e.get("verdict"))
        budget = dict(state.budget or {})
        limit = budget.get("tokens")
        return {
            "task_id": state.task_id,
            "objective": state.objective,
            "status": state.status,
            "version": state.version,
            "agents": list(state.agents),
            "seal": state.seal,
            "seal_versions": [s.version for s in state.seals],
            "drift": drift[-50:],
            "last_drift": drift[-1]["verdict"] if drift else None,
            "budget": {"limit_tokens": limit, "consumed_tokens": state.consumed_tokens,
                       "share": round(state.consumed_tokens / limit, 4) if isinstance(limit, int | float) and limit else None,
                       **({"limit_usd": budget["cost_usd"]} if "cost_usd" in budget else {})},
            "guard": {"block": verdicts.get("block", 0), "warn": verdicts.get("warn", 0),
                      "suggest_alternative": verdicts.get("suggest_alternative", 0), "allow": verdicts.get("allow", 0)},
            "handoffs": [{"id": hid, "status": h.get("status"), "agent": h.get("agent"), "passed": h.get("passed")}
                         for hid, h in state.handoffs.items()],
            "ledger": {k: led[k] for k in ("observed_tokens", "offloaded_tokens", "offloaded_count", "credited_tokens",
                                           "overhead_tokens", "recalled_tokens", "pending_drop_tokens", "net_tokens")},
            "plan": {"steps": len(state.plan), "completed": len(state.completed)},
            "updated_at": state.updated_at,
        }

    # -- routing -----------------------------------------------------------------------------
    def routing(self, events: list[dict[str, Any]]) -> dict[str, Any]:
        n = len(events)
        outcomes = Counter(str(e.get("outcome", "?")) for e in events)
        names = Counter(name for e in events for name in e.get("names") or [])
        failures = Counter(str(e.get("failure_class", "?")) for e in events if e.get("outcome") == "failed")
        delivered = [float(e["delivered_ms"]) for e in events if "delivered_ms" in e and e.get("outcome") != "failed"]
        route_ms = [float(e["route_ms"]) for e in events if "route_ms" in e]
        policies = self.engine.policies
        corpus: list[str] | None = None
        calibration = None
        served = policies.served
        if served is not None:
            corpus = sorted(p.name for p in served.index.policies)
            calibration = (served.index.calibration.describe()
                           if policies.calibrated() and served.index.calibration is not None
                           else f"explicit operating point {policies.operating_point().source}")
        return {
            "attempts": n,
            "shares": {k: round(outcomes.get(k, 0) / n, 4) if n else 0.0 for k in ("routed", "abstained", "failed")},
            "counts": {k: outcomes.get(k, 0) for k in ("routed", "abstained", "failed")},
            "failure_classes": dict(failures.most_common()),
            "latency_ms": {"delivered_p50": percentile(delivered, 50), "delivered_p99": percentile(delivered, 99),
                           "route_p50": percentile(route_ms, 50), "route_p99": percentile(route_ms, 99)},
            "latency_series": self._latency_series(events),
            "top_policies": [{"name": k, "count": v} for k, v in names.most_common(TOP)],
            "never_routed": [c for c in corpus if not names[c]] if corpus is not None else None,
            "corpus_size": len(corpus) if corpus is not None else None,
            "demo_corpus": policies.demo,
            "calibration": calibration,
            "index": policies.index_state(),
        }

    @staticmethod
    def _latency_series(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Delivered latency p50/p99 per time bucket (at most ``SERIES_POINTS`` buckets)."""
        timed = [(float(e.get("ts") or 0), float(e["delivered_ms"])) for e in events
                 if "delivered_ms" in e and e.get("outcome") != "failed"]
        if not timed:
            return []
        start, end = timed[0][0], timed[-1][0]
        width = max(1e-3, (end - start) / SERIES_POINTS)
        buckets: dict[int, list[float]] = defaultdict(list)
        for t, ms in timed:  # the last event joins the last bucket: alone in one, its latency drew the line's end
            buckets[min(SERIES_POINTS - 1, int((t - start) // width))].append(ms)
        return [{"t": round(start + i * width, 3), "p50": percentile(v, 50), "p99": percentile(v, 99), "n": len(v)}
                for i, v in sorted(buckets.items())]

    # -- audits, guard, tools ----------------------------------------------------------------
    @staticmethod
    def audits(events: list[dict[str, Any]]) -> dict[str, Any]:
        rows = [e for e in events if e.get("tool") == "audit"]
        passed = sum(1 for e in rows if e.get("passed") is True)
        issues = Counter(code for e in rows if e.get("passed") is not True for code in e.get("issues") or [])
        return {"count": len(rows), "passed": passed, "failed": len(rows) - passed,
                "top_failure_reasons": [{"reason": k, "count": v} for k, v in issues.most_common(TOP)]}

    @staticmethod
    def guard(events: list[dict[str, Any]]) -> dict[str, Any]:
        rows = [e for e in events if e.get("tool") == "precheck" and e.get("verdict")]
        verdicts = Counter(str(e["verdict"]) for e in rows)
        rules = Counter(str(e["rule"]) for e in rows if e.get("rule") and e.get("verdict") != "allow")
        return {"prechecks": len(rows), "verdicts": dict(verdicts),
                "top_rules": [{"rule": k, "count": v} for k, v in rules.most_common(TOP)]}

    @staticmethod
    def tools(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        by_tool: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for e in events:
            by_tool[str(e.get("tool"))].append(e)
        return sorted(({"tool": name, "calls": len(rows), "errors": sum(1 for e in rows if e.get("error")),
                        "p50_ms": percentile([float(e.get("ms") or 0) for e in rows], 50)}
                       for name, rows in by_tool.items()), key=lambda r: -int(r["calls"]))


def telemetry_file(home: Path, enabled: bool = True, explicit: Path | None = None) -> str | None:
    """The telemetry file a configuration reads (``bosun stats`` without a daemon)."""
    return telemetry.sink_of(enabled, explicit, home)
