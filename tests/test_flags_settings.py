"""OSIRIS settings (issue 19 item 6): the prune threshold driven by context pressure, the cache TTL,
and the overhead modes (bystander, light, standard, full, auto)."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from bosun.core.task.overhead import MODES, Costs, add_call, add_manifest, choose, effective
from bosun.server.engine import Engine


def _sc(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    assert result.structured_content is not None
    return result.structured_content


@pytest.fixture(autouse=True)
def _settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOSUN_PRUNE_THRESHOLD_TOKENS", "5000")
    monkeypatch.setenv("BOSUN_CACHE_TTL_S", "3600")


async def test_context_over_the_prune_threshold_makes_precheck_ask_for_a_trim(client: Client) -> None:
    tid = _sc(await client.call_tool("plan", {"mode": "start", "objective": "o"}))["task_id"]
    call = {"task_id": tid, "tool": "bash", "args": {"command": "ls"}}
    assert _sc(await client.call_tool("precheck", call))["verdict"] == "allow"
    _sc(await client.call_tool("plan", {"mode": "update", "task_id": tid,
                                        "more": {"declare": {"history": 9000, "window": 200_000}}}))
    out = _sc(await client.call_tool("precheck", call))
    assert out["verdict"] == "warn" and out["rule"] == "pressure:prune_threshold"
    assert "target_tokens=" in out["required_action"] and "5,000" in out["reasons"][0]
    status = _sc(await client.call_tool("plan", {"mode": "status", "task_id": tid}))
    prune = status["prune"]
    assert prune["threshold_tokens"] == 5000 and prune["over_by"] == prune["known_tokens"] - 5000 > 4000
    assert prune["cache"]["ttl_s"] == 3600 and prune["cache"]["alive"] is True
    assert prune["action"].startswith("checkpoint(mode='trim'")


async def test_a_bystander_task_carries_no_manifest_and_observe_follows_its_prune_mode(client: Client) -> None:
    st = _sc(await client.call_tool("plan", {"mode": "start", "objective": "o", "more": {"overhead": "bystander"}}))
    assert "manifest" not in st and st["seal"].startswith("sha256:")
    resumed = _sc(await client.call_tool("plan", {"mode": "resume", "task_id": st["task_id"]}))
    assert "manifest" in resumed  # on request it is still there
    flags = resumed["resume"]["flags"]
    assert flags["overhead_mode"]["value"] == "bystander" and flags["prune_mode"]["value"] == "conservative"
    full = _sc(await client.call_tool("plan", {"mode": "start", "objective": "o", "more": {"overhead": "full"}}))
    assert "manifest" in full
    bad = await client.call_tool("plan", {"mode": "start", "objective": "o", "more": {"overhead": "turbo"}})
    assert bad.is_error and "more.overhead" in bad.content[0].text
    late = await client.call_tool("plan", {"mode": "update", "task_id": st["task_id"],
                                           "more": {"overhead": "full"}})
    assert late.is_error and "set at start" in late.content[0].text


def test_auto_stays_bystander_on_a_small_task_and_moves_once_a_mode_pays_for_itself() -> None:
    costs = Costs.empty()
    add_manifest(costs, 110)
    mode = "bystander"
    for _ in range(10):  # small outputs: nothing to offload anywhere; prechecks would only cost
        costs.next_prompt()
        mode = choose(costs, mode)
        add_call(costs, {m: 0 for m in MODES}, precheck_tokens=90, runs=True)
    assert mode == "bystander" and costs.net("bystander") == 0 > costs.net("full")
    for _ in range(30):  # now 900-token outputs: balanced and lower thresholds offload them
        costs.next_prompt()
        mode = choose(costs, mode)
        add_call(costs, {"bystander": 0, "light": 700, "standard": 700, "full": 720}, precheck_tokens=90,
                 runs=False)
    assert mode in ("light", "standard", "full") and MODES[mode].manifest
    assert costs.net(mode) == max(costs.net(m) for m in MODES)


def test_effective_mode_of_a_task() -> None:
    assert effective({}).name == "bystander"
    assert effective({"overhead_mode": "full"}).name == "full"
    assert effective({"overhead_mode": "auto", "prune_mode": "balanced"}).name == "light"


def test_the_cache_ttl_decides_whether_compaction_may_reach_into_cached_history() -> None:
    from bosun.core.offload.compaction import plan_compaction
    from bosun.core.offload.offload import get_mode
    from bosun.core.task.state import Event

    def result(seq: int) -> Event:
        return Event("t", seq, "tool_result", {"tool": "bash", "args": f"cat f{seq}", "ref": f"mem://sha256:{seq:064x}",
                                               "tokens": 600}, created_at=1000.0)

    events = [result(1), result(2), Event("t", 3, "checkpoint_saved", {}, created_at=1000.0),
              *[result(s) for s in range(4, 9)]]
    mode = get_mode("cache_ttl")  # its own TTL: 300 s
    alive = plan_compaction(events, mode, "compact", now=1100.0)
    assert alive.cache_alive and all(i.seq > 3 for i in alive.items)
    expired = plan_compaction(events, mode, "compact", now=1100.0, ttl_s=60.0)  # BOSUN_CACHE_TTL_S=60
    assert not expired.cache_alive and {1, 2} <= {i.seq for i in expired.items}


async def test_an_auto_task_moves_its_prune_mode_once_a_heavier_mode_pays_for_itself(client: Client,
                                                                                      engine: Engine) -> None:
    st = _sc(await client.call_tool("plan", {"mode": "start", "objective": "o", "more": {"overhead": "auto"}}))
    tid = st["task_id"]
    flags = (await engine.tasks.get(tid)).flags
    assert flags["overhead_mode"] == "auto" and flags["prune_mode"] == "conservative"
    log = "".join(f"step {i}: compiled module_{i} with warnings about deprecated api usage\n" for i in range(90))
    for i in range(3):  # ~1,100-token outputs: bystander keeps them whole, light and heavier modes offload
        _sc(await client.call_tool("observe", {"task_id": tid, "kind": "result", "tool": "bash",
                                               "args": {"command": f"cat build{i}.log"}, "result": log}))
        await engine.plan.auto.settled()
    state = await engine.tasks.get(tid)
    assert state.flags["prune_mode"] == "balanced"  # light: the lightest mode that pays for its manifest
    assert state.flag_meta["prune_mode"]["why"].startswith("auto: light would have carried")
    # a task in a fixed mode is never moved
    fixed = _sc(await client.call_tool("plan", {"mode": "start", "objective": "o", "more": {"overhead": "bystander"}}))
    for i in range(3):
        _sc(await client.call_tool("observe", {"task_id": fixed["task_id"], "kind": "result", "tool": "bash",
                                               "args": {"command": f"cat build{i}.log"}, "result": log}))
    await engine.plan.auto.settled()
    assert (await engine.tasks.get(fixed["task_id"])).flags["prune_mode"] == "conservative"
