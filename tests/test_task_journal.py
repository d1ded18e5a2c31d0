"""Task journal basics: start, append, optimistic concurrency, replay, the seal recomputed by hand."""

from __future__ import annotations

import hashlib
import json
import unicodedata

import pytest

from bosun.core.errors import InvalidInput, NotFound
from bosun.core.task.replay import rebuild
from bosun.server.config import Config
from bosun.server.engine import Engine
from bosun.server.services.tasks import VersionConflict
from tests.pg_cluster import BACKENDS, raw_execute, with_backend


@pytest.fixture(params=BACKENDS)
def config(request: pytest.FixtureRequest, config: Config) -> Config:
    """Every test here runs on SQLite and on a throwaway PostgreSQL (tests/pg_cluster.py)."""
    return with_backend(config, request.param)


@pytest.fixture
async def opened(engine: Engine):  # type: ignore[no-untyped-def]
    await engine.open()
    yield engine
    await engine.close()


async def test_start_append_and_replay(opened: Engine) -> None:
    svc = opened.tasks
    st = await svc.start("fix the profile bug", constraints=["no network"], plan=["reproduce", "fix", "test"],
                         agent="a1")
    assert st.version == 1 and st.remaining == ["reproduce", "fix", "test"]
    st = await svc.append(st.task_id, "step_started", {"step": "reproduce"}, agent="a1", expected_version=1)
    st = await svc.append_many(st.task_id, [("step_completed", {"step": "reproduce"}),
                                            ("decision_added", {"text": "patch $PROFILE loader"})], agent="a2")
    assert st.version == 4 and st.completed == ["reproduce"] and st.decisions == ["patch $PROFILE loader"]
    events = await svc.events(st.task_id)
    assert [e.seq for e in events] == [1, 2, 3, 4]
    assert rebuild(events).to_dict() == st.to_dict()
    assert (await svc.events(st.task_id, since_seq=3))[0].kind == "decision_added"


async def test_stale_version_is_a_conflict_with_the_current_seal(opened: Engine) -> None:
    svc = opened.tasks
    st = await svc.start("objective")
    await svc.append(st.task_id, "constraint_added", {"text": "c1"}, expected_version=1)
    with pytest.raises(VersionConflict) as info:
        await svc.append(st.task_id, "constraint_added", {"text": "c2"}, expected_version=1)
    now = await svc.get(st.task_id)
    assert info.value.current == 2 and info.value.seal == now.seal and now.seal in str(info.value)
    assert now.constraints == ["c1"]


async def test_bad_input(opened: Engine) -> None:
    svc = opened.tasks
    with pytest.raises(NotFound):
        await svc.get("t_nope")
    st = await svc.start("objective")
    with pytest.raises(InvalidInput, match="objective"):
        await svc.append(st.task_id, "task_started", {"objective": "other"})
    await svc.append(st.task_id, "task_closed", {"status": "done"})
    with pytest.raises(InvalidInput, match="closed"):
        await svc.manifest(st.task_id)


def _norm(t: str) -> str:
    t = unicodedata.normalize("NFC", t).replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(line.rstrip(" \t") for line in t.split("\n")).strip("\n")


def recompute_seal(objective: str, plan: list[str], constraints: list[str], decisions: list[str],
                   head_sha: str = "", rules_sha: str = "", contract_sha: str = "") -> str:
    """The README's recipe, written independently of core/task/seal.py."""
    def h(x: object) -> str:
        return hashlib.sha256(json.dumps(x, ensure_ascii=False, separators=(",", ":")).encode()).hexdigest()
    def cat(a: str, b: str) -> str:
        return hashlib.sha256((a + b).encode()).hexdigest()
    head = h(["bosun.head/1", head_sha, rules_sha])
    zone_b = h(["bosun.zoneB/1", _norm(objective), [_norm(s) for s in plan], contract_sha])
    tail = h(["bosun.tail/1", [_norm(c) for c in constraints], [_norm(d) for d in decisions]])
    return cat(cat(head, zone_b), tail)


async def test_seal_recomputes_from_the_documented_recipe(opened: Engine) -> None:
    svc = opened.tasks
    st = await svc.start("Corriger le bogue du profil\r\n  ", constraints=["ne pas toucher tests/ "],
                         plan=["e\u0301tape 1", "step 2"])
    head_text = "You are a coding agent.\r\nBe brief.   \n"
    res = await svc.record_head(st.task_id, "head", head_text)
    st = await svc.append(st.task_id, "decision_added", {"text": "use UTF-8"})
    head_sha = hashlib.sha256(_norm(head_text).encode()).hexdigest()
    assert res["sha256"] == head_sha
    expected = recompute_seal("Corriger le bogue du profil", ["\u00e9tape 1", "step 2"],
                              ["ne pas toucher tests/"], ["use UTF-8"], head_sha=head_sha)
    assert st.seal == expected
    assert (await svc.manifest(st.task_id)).endswith("SEAL=sha256:" + expected)


async def test_record_head_reports_volatile_tokens(opened: Engine) -> None:
    svc = opened.tasks
    st = await svc.start("objective")
    res = await svc.record_head(st.task_id, "head", "System. Today is 2026-11-29T12:00:05Z.\n"
                                "session id: 3f2a9c1e-1b2c-4d5e-8f90-123456789abc turn 7")
    kinds = [v["kind"] for v in res["volatile"]]
    assert kinds == ["timestamp", "uuid", "counter"]
    assert res["volatile"][0]["line"] == 1 and res["volatile"][1]["line"] == 2
    again = await svc.record_head(st.task_id, "head", "System. Today is 2026-11-29T12:00:05Z.\n"
                                  "session id: 3f2a9c1e-1b2c-4d5e-8f90-123456789abc turn 7")
    assert again["changed"] is False and again["version"] == res["version"]


def test_recorded_seal_always_matches_the_state() -> None:
    """After any event sequence, the last recorded seal is the seal of the state (nothing changes a zone silently)."""
    import random

    from bosun.core.task.replay import apply_event
    from bosun.core.task.seal import hashes
    from bosun.core.task.state import Event

    rng = random.Random(7)
    kinds = [("constraint_added", lambda i: {"text": f"c{i}"}), ("decision_added", lambda i: {"text": f"d{i}"}),
             ("plan_set", lambda i: {"steps": [f"s{i}", "common"]}), ("step_started", lambda i: {"step": f"x{i}"}),
             ("step_completed", lambda i: {"step": "common"}), ("head_recorded", lambda i: {"sha256": f"{i:064x}"}),
             ("contract_recorded", lambda i: {"sha256": f"{i + 1:064x}"}),
             ("decision_revised", lambda i: {"index": 0, "text": f"r{i}", "reason": "why"}),
             ("tool_result", lambda i: {"tool": "bash", "args_hash": str(i % 3), "tokens": 10}),
             ("memory_added", lambda i: {"scope": "task", "key": "k", "text": str(i)}),
             ("state_flag", lambda i: {"name": "tests_passed", "value": i % 2 == 0}),
             ("something_new", lambda i: {"x": i})]
    state = rebuild([Event("t", 1, "task_started", {"objective": "o", "decisions": ["d"]})])
    for i in range(2, 300):
        kind, payload = rng.choice(kinds)
        state = apply_event(state, Event("t", i, kind, payload(i)))
        assert state.seal == hashes(state)["seal"], kind


async def test_store_keeps_the_journal_append_only_and_gap_free(opened: Engine) -> None:
    import sqlite3

    import psycopg

    from bosun.core.errors import Conflict
    from bosun.store.tasks import NewEvent

    svc = opened.tasks
    st = await svc.start("objective", extra=[("lesson_added", {"text": "l1"})])
    assert st.version == 2 and st.lessons == ["l1"]
    store = await svc.store()
    with pytest.raises(Conflict):  # a gap
        await store.append(st.task_id, [NewEvent("lesson_added", {"text": "x"})], 5)
    with pytest.raises(Conflict):  # a stale version
        await store.append(st.task_id, [NewEvent("lesson_added", {"text": "x"})], 1)
    refused = (sqlite3.IntegrityError, psycopg.Error)  # the database itself refuses, whoever asks
    with pytest.raises(refused, match="append-only"):
        await raw_execute(opened, "UPDATE task_events SET kind = 'x' WHERE task_id = ?", (st.task_id,))
    with pytest.raises(refused, match="append-only"):
        await raw_execute(opened, "DELETE FROM task_events WHERE task_id = ?", (st.task_id,))
    with pytest.raises(refused, match="stale or out-of-order"):  # a gap, written around bosun
        await raw_execute(opened, "INSERT INTO task_events (task_id, seq, kind, payload_json, created_at) "
                          "VALUES (?, 9, 'x', '{}', 0)", (st.task_id,))
    await svc.append(st.task_id, "task_closed", {"status": "failed"})
    row = await store.task(st.task_id)
    assert row is not None and row.status == "failed" and row.version == 3 and row.objective == "objective"
    assert [e.seq for e in await svc.events(st.task_id)] == [1, 2, 3]
