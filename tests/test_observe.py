"""observe / recall / checkpoint / verify through the MCP surface, bad input and faults."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from mcp import Client

from bosun.core.embedding import HashEmbedder
from bosun.core.tokens import estimate_tokens
from bosun.server.app import create_server
from bosun.server.commands.verify import verify_task
from bosun.server.config import Config
from bosun.server.engine import Engine

PYTEST_OUT = (
    "".join(f"tests/test_mod.py::test_case_{i} PASSED\n" for i in range(400))
    + "FAILED tests/test_mod.py::test_parse_dates - AssertionError: assert 2 == 3\n"
    "======================== 1 failed, 400 passed in 4.12s =========================\n"
)


def _text(result: Any) -> str:
    return str(getattr(result.content[0], "text", ""))


def _sc(result: Any) -> dict[str, Any]:
    assert not result.is_error, _text(result)
    return dict(result.structured_content)


async def _start(client: Client) -> str:
    out = _sc(await client.call_tool("plan", {"mode": "start", "objective": "fix the date parser"}))
    return str(out["task_id"])


class _Direct:
    """A service answer shaped like a tool result: for the settings the observe listing no longer
    carries (seal, mode, offload: the task's settings and the CLI's flags), called on the service."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.structured_content = answer
        self.is_error = False
        self.content: list[Any] = []


SERVICE_ONLY = ("seal", "mode", "offload")


async def _observe(client: Client, tid: str, result: str, engine: Engine | None = None, **kw: Any) -> Any:
    args = {"task_id": tid, "kind": "result", "tool": "bash", "args": {"command": "pytest -q"}, "result": result}
    args.update(kw)
    if any(k in kw for k in SERVICE_ONLY):
        assert engine is not None, "seal/mode/offload go to the service"
        return _Direct(await engine.observe.run(tid, "result", "bash", args["args"], result, kw.get("seal"),
                                                mode=kw.get("mode"), offload=kw.get("offload"),
                                                intent=kw.get("intent")))
    return await client.call_tool("observe", args)


async def test_large_result_is_offloaded_small_passes_through(client: Client, engine: Engine) -> None:
    tid = await _start(client)
    big = _sc(await _observe(client, tid, PYTEST_OUT))
    assert big["offloaded"] is True and big["kind"] == "test"
    assert "FAILED tests/test_mod.py::test_parse_dates" in big["outline"] and "1 failed, 400 passed" in big["outline"]
    assert big["ref"].startswith("mem://sha256:") and big["tokens"] > 3000
    stub_cost = len(json.dumps(big)) // 3
    assert stub_cost < big["tokens"] // 5
    small = _sc(await _observe(client, tid, "ok\n", args={"command": "ls"}))
    assert small == {"offloaded": False, "tokens": estimate_tokens("ok\n")}
    # the failing test name is one recall away
    hit = _sc(await client.call_tool("recall", {"ref": big["ref"], "op": "grep", "pattern": "^FAILED", "task_id": tid}))
    assert hit["text"].startswith("401:FAILED tests/test_mod.py::test_parse_dates")
    state = await engine.tasks.get(tid)
    assert state.flags["tests_passed"] is False
    led = await engine.ledger.summary(tid)
    assert led["recalled_tokens"] > 0 and state.offloaded_tokens == big["tokens"]
    # what entered the context: the pass-through result and the stub (not the offloaded result)
    assert state.consumed_tokens == small["tokens"] + led["stub_tokens"]


async def test_drop_receipt_credits_once_and_ledger(client: Client, engine: Engine) -> None:
    tid = await _start(client)
    big = _sc(await _observe(client, tid, PYTEST_OUT))
    led = await engine.ledger.summary(tid)
    assert led["credited_tokens"] == 0 and led["pending_drop_tokens"] == big["tokens"]
    drop = _sc(await client.call_tool("observe", {"task_id": tid, "kind": "dropped", "result": big["ref"]}))
    assert drop["credited_tokens"] == big["tokens"]
    again = _sc(await client.call_tool("observe", {"task_id": tid, "kind": "dropped", "result": [big["ref"]]}))
    assert again["credited_tokens"] == 0 and again["already_dropped"]
    led = await engine.ledger.summary(tid)
    assert led["credited_tokens"] == big["tokens"] and led["overhead_tokens"] > 0
    assert led["net_tokens"] == led["credited_tokens"] - led["overhead_tokens"] - led["recalled_tokens"]
    assert (await engine.ledger.overall())["credited_tokens"] >= big["tokens"]
    bad = await client.call_tool("observe", {"task_id": tid, "kind": "dropped", "result": "mem://sha256:" + "ab" * 32})
    assert bad.is_error


async def test_secrets_never_stored_or_returned(client: Client, engine: Engine) -> None:
    tid = await _start(client)
    secret = "ghp_abcdefghijklmnopqrstuvwxyzABCDEF0123"
    out = _sc(await _observe(client, tid, (f"token={secret}\n" + PYTEST_OUT), args={"command": f"echo {secret}"},
                             offload=True, engine=engine))
    assert out["redacted"] >= 1
    raw = _sc(await client.call_tool("recall", {"ref": out["ref"], "op": "raw", "max_tokens": 20000}))
    assert secret not in raw["text"] and "[REDACTED:github_token]" in raw["text"]
    events = await engine.tasks.events(tid)
    assert secret not in json.dumps([e.to_dict() for e in events])


async def test_recall_short_ref_integrity_and_bad_input(client: Client, engine: Engine) -> None:
    tid = await _start(client)
    big = _sc(await _observe(client, tid, PYTEST_OUT))
    outline = _sc(await client.call_tool("recall", {"ref": big["ref"], "op": "outline"}))
    assert outline["kind"] == "test"
    agg = _sc(await client.call_tool("recall", {"ref": big["ref"], "op": "aggregate", "pattern": r"(PASSED|FAILED)"}))
    assert "400  L1  PASSED" in agg["text"].replace("   ", " ").replace("  400", "400")
    # altered bytes: an integrity error, never the wrong bytes
    digest = (await engine.observe.resolver.resolve(big["ref"]))
    await engine.conn.execute("UPDATE refs SET data = ? WHERE sha256 = ?", (b"tampered", digest))
    res = await client.call_tool("recall", {"ref": big["ref"], "op": "head"})
    assert res.is_error and "failed verification" in _text(res)
    for args, needle in [
        ({"ref": "mem://sha256:" + "0" * 64}, "not found"),
        ({"ref": "mem://sha256:abc"}, "ref"),
        ({"ref": big["ref"], "op": "jsonl", "where": {"a": 1}}, ""),
    ]:
        r = await client.call_tool("recall", args)
        assert r.is_error and needle in _text(r)


async def test_observe_bad_input_names_the_field(client: Client, engine: Engine) -> None:
    tid = await _start(client)
    cases = [
        ({"task_id": tid, "kind": "result", "result": "x"}, "tool"),
        ({"task_id": tid, "kind": "result", "tool": "bash"}, "result"),
        ({"task_id": "t_missing", "kind": "result", "tool": "bash", "result": "x"}, "task not found"),
        ({"task_id": tid, "kind": "file"}, "path"),
        ({"task_id": tid, "kind": "dropped"}, "result"),
        ({"task_id": tid, "kind": "decision"}, "text"),
        ({"task_id": tid, "kind": "result", "tool": "bash", "result": "x", "mode": "turbo"}, "unknown argument"),
    ]
    for args, needle in cases:
        r = await client.call_tool("observe", args)
        assert r.is_error and needle in _text(r), (args, _text(r))
    ok = _sc(await client.call_tool("observe", {"task_id": tid, "kind": "decision", "text": "use dateutil"}))
    assert ok["recorded"] == "decision_added"
    state = await engine.tasks.get(tid)
    assert state.decisions == ["use dateutil"]


async def test_binary_and_invalid_utf8_output(client: Client, engine: Engine) -> None:
    tid = await _start(client)
    lone = _sc(await _observe(client, tid, "line \ud800 x\n" * 3000, args={"command": "cat \udcff"}))
    assert lone["offloaded"] is True  # lone surrogates became U+FFFD instead of failing the call
    blob = (b"\x00\x01\xff\xfe" * 5000).decode("latin-1")
    out = _sc(await _observe(client, tid, blob, args={"command": "cat a.bin"}))
    assert out["offloaded"] is True and out["kind"] == "binary"
    part = _sc(await client.call_tool("recall", {"ref": out["ref"], "op": "range", "unit": "bytes", "start": 0, "end": 8}))
    assert part["total_bytes"] > 0


async def test_payload_over_limit_is_refused_whole(home: Path) -> None:
    eng = Engine(Config(home=home, policies=[], max_payload_bytes=10_000), embedder_factory=lambda _c: HashEmbedder(64))
    async with Client(create_server(eng)) as client:
        tid = await _start(client)
        r = await _observe(client, tid, "x" * 20_000)
        assert r.is_error and "limit is 10000" in _text(r)
        async with eng.conn.execute("SELECT COUNT(*) FROM refs WHERE size >= 20000") as cur:
            assert (await cur.fetchone())[0] == 0
        assert not [e for e in await eng.tasks.events(tid) if e.kind in ("tool_result", "tool_failure")]


async def test_file_reads_only_under_roots(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("def f():\n    return 1\n")
    outside = tmp_path / "secret.txt"
    outside.write_text("nope")
    (root / "link.txt").symlink_to(outside)
    (root / "big.bin").write_bytes(b"x" * 2000)
    cfg = Config(home=tmp_path / "home", policies=[], roots=[root], max_file_bytes=1000)
    eng = Engine(cfg, embedder_factory=lambda _c: HashEmbedder(64))
    async with Client(create_server(eng)) as client:
        tid = await _start(client)
        ok = _sc(await client.call_tool("observe", {"task_id": tid, "kind": "file", "result": "src/a.py"}))
        assert ok["size"] == 22 and ok["changed"] is None and ok["path"].endswith("src/a.py")
        (root / "src" / "a.py").write_text("def f():\n    return 2\n")
        again = _sc(await client.call_tool("observe", {"task_id": tid, "kind": "file", "result": str(root / "src/a.py")}))
        assert again["changed"] is True
        for path, needle in [("../secret.txt", "traversal"), ("link.txt", "outside BOSUN_ROOTS"),
                             (str(outside), "outside BOSUN_ROOTS"), ("big.bin", "limit is 1000"),
                             ("src", "not a regular file"), ("missing.py", "not found")]:
            r = await client.call_tool("observe", {"task_id": tid, "kind": "file", "result": path})
            assert r.is_error and needle in _text(r), (path, _text(r))


async def test_checkpoint_modes(client: Client, engine: Engine) -> None:
    tid = await _start(client)
    for i in range(3):
        await _observe(client, tid, f"result {i}\n" * 200, args={"command": f"cmd {i}"}, offload=False, engine=engine)
    snap = _sc(await client.call_tool("checkpoint", {"task_id": tid, "mode": "snapshot"}))
    assert snap["ref"].startswith("mem://sha256:")
    big = _sc(await _observe(client, tid, PYTEST_OUT))
    compact = _sc(await client.call_tool("checkpoint", {"task_id": tid, "mode": "compact"}))
    # working zone only, and the newest 4 results are kept: nothing to move yet
    assert compact["scope"].startswith("working zone") and compact["items"] == 0 and compact["kept"] == 4
    clear = _sc(await client.call_tool("checkpoint", {"task_id": tid, "mode": "clear"}))
    assert clear["items"] == 4 and clear["freed_tokens"] > 0 and len(clear["drop"]) == 4
    # applying a plan = drop receipts; nothing is deleted, every item is still recallable
    _sc(await client.call_tool("observe", {"task_id": tid, "kind": "dropped", "result": clear["drop"]}))
    for ref in clear["drop"]:
        _sc(await client.call_tool("recall", {"ref": ref, "op": "head", "lines": 1}))
    resume = _sc(await client.call_tool("checkpoint", {"task_id": tid, "mode": "resume"}))
    assert "BOSUN/1" in resume["resume"] and "SEAL=" in resume["resume"]
    report = _sc(await client.call_tool("checkpoint", {"task_id": tid, "mode": "report"}))
    assert report["report"]["refs"]["lossless"] is True and report["report"]["ledger"]["credited_tokens"] > 0
    assert big["tokens"] <= report["report"]["ledger"]["observed_tokens"]
    trim = await client.call_tool("checkpoint", {"task_id": tid, "mode": "trim", "target_tokens": 0})
    assert trim.is_error and "target_tokens" in _text(trim)


async def test_verify_reports_missing_and_altered(client: Client, engine: Engine) -> None:
    tid = await _start(client)
    a = _sc(await _observe(client, tid, PYTEST_OUT))
    b = _sc(await _observe(client, tid, PYTEST_OUT.replace("4.12s", "5.00s")))
    _sc(await _observe(client, tid, "small\n", args={"command": "ls"}))
    code, out = await verify_task(engine.config.db_path, tid)
    assert code == 0 and out["lossless"] and out["items_externalized"] == 3 == out["items_verified"]
    off = engine.observe.resolver
    da, db = await off.resolve(a["ref"]), await off.resolve(b["ref"])
    await engine.conn.execute("UPDATE refs SET data = ? WHERE sha256 = ?", (b"altered", da))
    await engine.conn.execute("DELETE FROM refs WHERE sha256 = ?", (db,))
    code, out = await verify_task(engine.config.db_path, tid)
    assert code == 1 and not out["lossless"] and out["items_missing"] == 1
    assert len(out["integrity_violations"]) == 1 and da in out["integrity_violations"][0]["ref"]
    code, out = await verify_task(engine.config.db_path, "t_nope")
    assert code == 2


def test_killed_mid_observe_leaves_whole_observations(tmp_path: Path) -> None:
    """SIGKILL a process that observes in a loop: every journaled result's bytes are present and intact."""
    home = tmp_path / "home"
    script = textwrap.dedent(f"""
        import asyncio, sys
        from pathlib import Path
        from mcp import Client
        from bosun.core.embedding import HashEmbedder
        from bosun.server.app import create_server
        from bosun.server.config import Config
        from bosun.server.engine import Engine

        async def main():
            eng = Engine(Config(home=Path({str(home)!r}), policies=[]), embedder_factory=lambda c: HashEmbedder(64))
            async with Client(create_server(eng)) as c:
                r = await c.call_tool("plan", {{"mode": "start", "objective": "crash test"}})
                print(r.structured_content["task_id"], flush=True)
                i = 0
                while True:
                    i += 1
                    await c.call_tool("observe", {{"task_id": r.structured_content["task_id"], "kind": "result",
                        "tool": "bash", "args": {{"command": f"run {{i}}"}}, "result": f"line {{i}}\\n" * (50 + i * 40)}})
        asyncio.run(main())
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    tid = proc.stdout.readline().strip()
    assert tid.startswith("t_")
    deadline = time.time() + 20
    db = home / "bosun.db"
    while time.time() < deadline:
        time.sleep(0.3)
        with sqlite3.connect(db) as conn:
            n = conn.execute("SELECT COUNT(*) FROM task_events WHERE task_id = ?", (tid,)).fetchone()[0]
        if n >= 15:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    import asyncio

    code, out = asyncio.run(verify_task(db, tid))
    assert code == 0, out
    assert out["items_externalized"] >= 10 and out["items_verified"] == out["items_externalized"]


async def test_head_contract_and_seal_drift(client: Client, engine: Engine) -> None:
    out = _sc(await client.call_tool("plan", {"mode": "start", "objective": "seal test"}))
    tid, seal = out["task_id"], out["seal"]
    ok = _sc(await _observe(client, tid, "fine\n", args={"command": "ls"}, seal=seal, engine=engine))
    assert ok["drift"] == "ok"
    bad = _sc(await _observe(client, tid, "fine\n", args={"command": "ls"}, seal="sha256:" + "0" * 64, engine=engine))
    assert bad["drift"]["verdict"] == "critical_drift"
    head = _sc(await client.call_tool("observe", {"task_id": tid, "kind": "head",
                                                   "text": "You are a helpful agent. Today is 2026-11-29T12:00:00Z."}))
    assert head["changed"] is True and head["volatile_count"] >= 1
    contract = _sc(await client.call_tool("observe", {"task_id": tid, "kind": "contract", "text": "tools: bash, recall"}))
    assert contract["kind"] == "contract"
    state = await engine.tasks.get(tid)
    assert state.head is not None and state.contract is not None


async def test_structured_result_is_stored_as_json(client: Client, engine: Engine) -> None:
    tid = await _start(client)
    rows = [{"id": i, "status": "ok" if i % 7 else "failed", "name": f"item {i}"} for i in range(300)]
    out = _sc(await client.call_tool("observe", {"task_id": tid, "kind": "result", "tool": "api.list",
                                                  "args": {"page": 1}, "result": {"items": rows}}))
    assert out["offloaded"] and out["kind"] == "json" and "{items: [300 × {id, status, name}]}" in out["outline"]
    assert out["outline"].startswith("id: 0, 1, 2")  # the identifiers first, then the key names
    hit = _sc(await client.call_tool("recall", {"ref": out["ref"], "op": "jsonl", "path": "items",
                                                "where": {"status": "failed"}, "fields": ["id"], "max_matches": 3}))
    assert hit["text"].splitlines() == ['{"id":0}', '{"id":7}', '{"id":14}'] and hit["matches"] == 43


async def test_small_test_run_sets_tests_passed(client: Client, engine: Engine) -> None:
    tid = await _start(client)
    out = _sc(await _observe(client, tid, "tests/test_a.py ...\n============ 3 passed in 0.12s ============\n"))
    assert out["offloaded"] is False
    assert (await engine.tasks.get(tid)).flags["tests_passed"] is True
    await _observe(client, tid, "FAILED tests/test_a.py::test_b - assert 1 == 2\n===== 1 failed, 2 passed in 0.1s =====\n")
    assert (await engine.tasks.get(tid)).flags["tests_passed"] is False


async def test_observe_suggests_compaction_every_8_results(client: Client, engine: Engine) -> None:
    tid = await _start(client)
    answers = [_sc(await _observe(client, tid, f"row {i} " * 120 + "\n", args={"command": f"cmd {i}"}, offload=False, engine=engine))
               for i in range(8)]
    assert all("compact" not in a for a in answers[:7])
    hint = answers[7]["compact"]
    assert hint["items"] == 4 and hint["frees"] >= 500  # the newest 4 stay
    plan = _sc(await client.call_tool("checkpoint", {"task_id": tid, "mode": "compact"}))
    assert plan["items"] == hint["items"]


async def test_a_failure_while_the_bytes_are_stored_leaves_no_event_and_no_stray_write(
    client: Client, engine: Engine, monkeypatch: Any
) -> None:
    """observe hands the bytes to the blob writer, then builds the outline: if that fails, the write
    still finishes (an unreferenced blob, harmless), nothing is journaled, and the next call works."""
    import bosun.server.services.observe as offload_module

    tid = await _start(client)

    def broken(*_a: Any, **_k: Any) -> Any:
        raise RuntimeError("outline exploded")

    monkeypatch.setattr(offload_module, "build_outline", broken)
    failed = await _observe(client, tid, PYTEST_OUT + "one\n")
    assert failed.is_error
    db = engine.config.db_path
    with sqlite3.connect(db) as conn:
        kinds = [k for (k,) in conn.execute("SELECT kind FROM task_events WHERE task_id = ?", (tid,))]
        stored = conn.execute("SELECT COUNT(*) FROM refs").fetchone()[0]
    assert "tool_result" not in kinds and stored >= 1
    monkeypatch.undo()
    ok = _sc(await _observe(client, tid, PYTEST_OUT + "two\n"))
    assert ok["offloaded"] is True
    code, out = await verify_task(db, tid)
    assert code == 0 and out["items_verified"] == out["items_externalized"] == 1


async def test_compaction_hint_reads_the_journal_incrementally_and_plans_the_same(
    client: Client, engine: Engine
) -> None:
    """The hint's view of the journal (new events only, slimmed) gives the plan the full journal gives,
    through results, failures, drops, snapshots and other events in between."""
    from bosun.core.offload.compaction import plan_compaction
    from bosun.core.offload.offload import get_mode

    tid = await _start(client)
    svc, tasks = engine.observe, engine.tasks
    pm = get_mode("cache_ttl")
    refs: list[str] = []
    for i in range(30):
        kind = "failure" if i % 7 == 3 else "result"
        out = _sc(await _observe(client, tid, f"row {i} " * (60 + 20 * i) + "\n", kind=kind,
                                 args={"command": f"cmd {i}"}))
        if out.get("ref"):
            refs.append(out["ref"])
        if i == 12:
            _sc(await client.call_tool("checkpoint", {"task_id": tid, "mode": "snapshot"}))
            _sc(await client.call_tool("plan", {"mode": "update", "task_id": tid, "decisions": [f"d{i}"]}))
        if i in (15, 22) and refs:
            _sc(await client.call_tool("observe", {"task_id": tid, "kind": "dropped", "result": [refs.pop(0)]}))
        view = await svc._compaction_view(tid)
        full = await tasks.events(tid)
        now = full[-1].created_at + 1
        assert view.seq == full[-1].seq and view.last_activity == max(e.created_at for e in full)
        slim = plan_compaction(view.events, pm, "compact", now, last_activity=view.last_activity).to_dict()
        assert slim == plan_compaction(full, pm, "compact", now).to_dict(), i


def test_shape_is_light_only_when_no_intent_or_view_pass_will_scan_the_text() -> None:
    """A 1 MB plain log with a stub is shaped in line; an intent, terminal noise or no stub means a pass."""
    from types import SimpleNamespace

    from bosun.server.services.observe_shape import shape_is_light

    stubbed = SimpleNamespace(choice=SimpleNamespace(offload=True), outline=object())
    plain = "line of log output\n" * 60_000
    assert shape_is_light(plain, stubbed, None, None)  # type: ignore[arg-type]
    assert not shape_is_light(plain, stubbed, None, "why does it fail")  # type: ignore[arg-type]
    assert not shape_is_light("\x1b[31mred\x1b[0m\n" * 10_000, stubbed, None, None)  # type: ignore[arg-type]
    unstubbed = SimpleNamespace(choice=SimpleNamespace(offload=False), outline=None)
    assert not shape_is_light(plain, unstubbed, None, None)  # type: ignore[arg-type]
    assert shape_is_light(plain, unstubbed, False, "intent")  # type: ignore[arg-type]


async def test_json_nested_deeper_than_the_parser_goes_is_observed_and_recalled(client: Client,
                                                                                 engine: Engine) -> None:
    """A tool that prints JSON nested hundreds or thousands of levels deep (a fuzzer's output, a malformed
    dump): observe stores and outlines it (as text where it cannot be walked), and recall reads it back."""
    tid = await _start(client)
    for depth in (700, 5_000, 50_000):
        for text in ("[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth,
                     '{"rows":[' + "[" * depth + "1" + "]" * depth + "]}" + " " * 40_000):
            out = _sc(await _observe(client, tid, text, offload=True, engine=engine))
            assert out["offloaded"] is True, (depth, text[:8])
            for op in ("outline", "head", "jsonl"):
                got = await client.call_tool("recall", {"ref": out["ref"], "op": op, "task_id": tid})
                assert not got.is_error or "JSON" in _text(got), (depth, op, _text(got)[:200])
            raw = _sc(await client.call_tool("recall", {"ref": out["ref"], "op": "raw", "max_tokens": 100_000}))
            assert raw["text"].strip().startswith(text[:32]), depth
