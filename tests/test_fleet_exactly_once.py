"""Exactly-once across daemon crashes (issue 13): SIGKILL the daemon at many points of a burst of calls
relayed by ``bosun stdio``; the bridge restarts it and re-sends what was in flight with the same
idempotency key. Asserted on the journal, never on timing: no payload journaled twice, and every
call the host saw succeed is journaled exactly once.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from tests.helpers_proc import BOSUN, env_for, stop, wait_for_daemon

# each point restarts the daemon (1-2 s quiet, 15-20 s on a machine at load 14): 8 here, 20 with
# FLEET_KILL_POINTS=20 (the figure; docs/fleet.md has the command and the result)
KILL_POINTS = int(os.environ.get("FLEET_KILL_POINTS", "8"))
BURST = 24  # calls in flight per point (the bridge relays 8 at once)
SEED = 13


class Host:
    """A stdio host driving ``bosun stdio`` with raw JSON-RPC lines (answers collected by id)."""

    def __init__(self, home: Path) -> None:
        self.proc = subprocess.Popen([*BOSUN, "stdio"], env=env_for(home), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.answers: dict[int, dict[str, Any]] = {}
        self.arrived = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.next_id = 1

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            message = json.loads(line)
            with self.arrived:
                self.answers[int(message["id"])] = message
                self.arrived.notify_all()

    def send(self, method: str, params: dict[str, Any]) -> int:
        assert self.proc.stdin is not None
        msg_id = self.next_id
        self.next_id += 1
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method,
                                          "params": params}).encode() + b"\n")
        self.proc.stdin.flush()
        return msg_id

    def wait(self, ids: list[int], timeout: float = 120) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        with self.arrived:
            while not all(i in self.answers for i in ids):
                left = deadline - time.monotonic()
                assert left > 0, f"unanswered: {[i for i in ids if i not in self.answers]}"
                self.arrived.wait(left)
            return [self.answers[i] for i in ids]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _journaled(db: Path, task_id: str) -> list[str]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT payload_json FROM task_events WHERE task_id = ? AND kind = 'decision_added'",
                            (task_id,)).fetchall()
    return [str(json.loads(r[0]).get("text", "")) for r in rows]


def _succeeded(answer: dict[str, Any]) -> bool:
    result = answer.get("result")
    return isinstance(result, dict) and not result.get("isError")


def test_sigkill_at_many_points_of_a_bridged_burst_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    rng = random.Random(SEED)
    host = Host(home)
    try:
        host.wait([host.send("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                            "clientInfo": {"name": "fleet-test", "version": "1"}})])
        started = host.wait([host.send("tools/call", {"name": "plan", "arguments": {
            "mode": "start", "objective": "survive daemon crashes"}})])[0]
        task_id = started["result"]["structuredContent"]["task_id"]
        acknowledged: list[str] = []
        sent: list[str] = []
        in_flight = 0  # calls not yet answered when the daemon died (relayed again, or still queued)
        for point in range(KILL_POINTS):
            daemon = wait_for_daemon(home)
            texts = [f"decision {point}-{i}" for i in range(BURST)]
            ids = [host.send("tools/call", {"name": "observe", "arguments": {
                "task_id": task_id, "kind": "decision", "text": t}}) for t in texts]
            sent += texts
            time.sleep(rng.uniform(0.0, 0.25))  # where in the burst the crash lands (not asserted on)
            try:
                os.kill(int(daemon["pid"]), signal.SIGKILL)
            except ProcessLookupError:
                pass
            with host.arrived:
                before_kill = sum(i in host.answers for i in ids)
            in_flight += BURST - before_kill
            for text, answer in zip(texts, host.wait(ids), strict=True):
                if _succeeded(answer):
                    acknowledged.append(text)
    finally:
        host.close()
        data = json.loads((home / "daemon.json").read_text()) if (home / "daemon.json").exists() else {}
        if data.get("pid"):
            stop(int(data["pid"]))
    journal = _journaled(home / "bosun.db", task_id)
    duplicated = sorted({t for t in journal if journal.count(t) > 1})
    lost = [t for t in acknowledged if t not in journal]
    assert duplicated == []
    assert lost == []
    assert set(journal) <= set(sent)
    assert len(acknowledged) > 0
    print(f"{KILL_POINTS} kills, {len(sent)} calls, {in_flight} unanswered at a kill, {len(acknowledged)} "
          f"acknowledged, {len(journal)} journaled, {len(duplicated)} duplicated, {len(lost)} lost")
