"""CheckpointService: snapshot, resume, completion report, and reversible compaction plans.

snapshot stores the folded task state as a verified ref and journals ``checkpoint_saved``
(it also marks where the working zone starts); resume returns what an agent needs to
continue after a crash or a context reset; report is the completion report (stored as a ref
too); compact, trim and clear return plans that move history out of the prompt into refs.
Nothing is ever deleted: a plan lists drop candidates and how to bring each back.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from bosun.core.errors import InvalidInput
from bosun.core.offload.compaction import digest_line, items_from_events, plan_compaction
from bosun.core.offload.offload import get_mode, short_ref
from bosun.core.offload.query import bound
from bosun.core.task.ledger import ledger_of
from bosun.core.task.manifest import build_manifest
from bosun.core.task.seal import SEAL_PREFIX
from bosun.server.services.ledger import LedgerService
from bosun.server.services.tasks import TaskService, check_task_id

if TYPE_CHECKING:
    from bosun.server.config import Config
    from bosun.server.services.ports import OpenStores

MEDIA_JSON = "application/json"


class CheckpointService:
    """checkpoint(mode=snapshot|resume|report|compact|trim|clear) for every task."""

    def __init__(self, config: Config, stores: OpenStores, tasks: TaskService, ledger: LedgerService) -> None:
        self.stores = stores
        self.tasks = tasks
        self.ledger = ledger
        self.default_mode = get_mode(config.prune_mode).name

    async def run(self, task_id: str, mode: str, seal: str | None = None, target_tokens: int | None = None,
                  prune_mode: str | None = None, max_tokens: int = 1500) -> dict[str, Any]:
        """One checkpoint call; ``drift`` joins the answer when a seal was given."""
        stores, tasks = self.stores, self.tasks
        task_id = check_task_id(task_id)
        if not isinstance(max_tokens, int) or max_tokens < 100:
            raise InvalidInput("max_tokens", f"must be an integer >= 100, got {max_tokens!r}")
        state = await tasks.get(task_id)
        drift = await tasks.check_seal(task_id, seal) if seal else None
        events = await tasks.events(task_id)
        prune = get_mode(prune_mode or str(state.flags.get("prune_mode") or self.default_mode))
        out: dict[str, Any]
        if mode == "snapshot":
            body = json.dumps(state.to_dict(), ensure_ascii=False, sort_keys=True).encode("utf-8")
            ref = await stores.refs.put(body, MEDIA_JSON)
            ledger = ledger_of(events)
            state = await tasks.append(task_id, "checkpoint_saved", {
                "ref": ref, "version": state.version, "observed_tokens": ledger.observed_tokens})
            out = {"checkpoint": state.version, "ref": short_ref(ref.rsplit(":", 1)[1]), "of_version": state.version - 1,
                   "seal": SEAL_PREFIX + state.seal}
        elif mode == "resume":
            items, snap = items_from_events(events)
            live = [i for i in items if not i.dropped]
            lines = [build_manifest(state) if not state.closed else f"task {task_id} is {state.status}"]
            if state.active or state.remaining:
                lines.append("next: " + "; ".join((state.active or state.remaining)[:3]))
            for sig, f in list(state.failures.items())[-5:]:
                lines.append(f"failure x{f.get('attempts')}: {sig}")
            if state.flags:
                lines.append("flags: " + ", ".join(f"{k}={v}" for k, v in state.flags.items()))
            lines.append(f"{len(live)} results on record ({sum(i.tokens for i in live)} tokens), latest:")
            lines.extend(digest_line(i) for i in live[-12:])
            text, cut = bound("\n".join(lines), 64_000, max_tokens)
            out = {"resume": text, "truncated": cut, "snapshot_seq": snap or None, "version": state.version,
                   "seal": SEAL_PREFIX + state.seal}
        elif mode == "report":
            led_report = self.ledger.report(events)
            refs = sorted({str(r) for ev in events for k in ("ref", "stored_ref")
                           if isinstance(r := ev.payload.get(k), str) and r.startswith("mem://")})
            verified = 0
            for r in refs:
                verified += int(await stores.refs.verify(r))
            report = {
                "task_id": task_id, "objective": state.objective, "status": state.status, "version": state.version,
                "plan": {"completed": state.completed, "active": state.active, "remaining": state.remaining},
                "decisions": state.decisions, "constraints": state.constraints,
                "files": sorted(state.files), "failures": [{"signature": s, "attempts": f.get("attempts")}
                                                           for s, f in state.failures.items()],
                "lessons": state.lessons, "flags": state.flags, "ledger": led_report,
                "refs": {"total": len(refs), "verified": verified, "lossless": verified == len(refs)},
            }
            full = json.dumps(report, ensure_ascii=False, sort_keys=True)
            ref = await stores.refs.put(full.encode("utf-8"), MEDIA_JSON)
            text, cut = bound(json.dumps(report, ensure_ascii=False, separators=(",", ":")), 64_000, max_tokens)
            out = {"report": report if not cut else text, "truncated": cut, "ref": short_ref(ref.rsplit(":", 1)[1]),
                   "seal": SEAL_PREFIX + state.seal}
        else:
            plan = plan_compaction(events, prune, mode, time.time(), target_tokens)
            out = plan.to_dict()
            out["drop"] = [short_ref(r.rsplit(":", 1)[1]) for r in out["drop"]]
            out["apply"] = "evict these from your context, then observe(kind='dropped', refs=drop) to credit them"
            out["prune_mode"] = prune.name
            out["seal"] = SEAL_PREFIX + state.seal
        if drift is not None:
            out["drift"] = "ok" if drift.get("verdict") == "ok" else drift
        return out
