"""Task flags (issue 19 item 1): set and cleared with who and why, sealed, and what invariants require.

Also the task-state configuration block (BOSUN_CACHE_TTL_S, BOSUN_PRUNE_THRESHOLD_TOKENS,
BOSUN_OVERHEAD_MODE, BOSUN_PROJECT).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from bosun.core.task.replay import rebuild
from bosun.core.task.seal import hashes
from bosun.server.config import Config, ConfigError
from bosun.server.engine import Engine

EXAMPLE = Path(__file__).resolve().parents[1] / "invariants.example.toml"


def _sc(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    assert result.structured_content is not None
    return result.structured_content


def _err(result: Any) -> str:
    assert result.is_error, result.structured_content
    return str(result.content[0].text)


async def _plan(client: Client, **args: Any) -> Any:
    return await client.call_tool("plan", args)


@pytest.fixture(autouse=True)
def _example_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOSUN_INVARIANTS", str(EXAMPLE))


def test_config_block_defaults_and_env() -> None:
    cfg = Config.from_env({})
    assert (cfg.cache_ttl_s, cfg.prune_threshold_tokens, cfg.overhead_mode, cfg.project) == (
        300.0, 40_000, "standard", "default")
    cfg = Config.from_env({"BOSUN_CACHE_TTL_S": "60", "BOSUN_PRUNE_THRESHOLD_TOKENS": "8000",
                           "BOSUN_OVERHEAD_MODE": "light", "BOSUN_PROJECT": "github.com/acme/api"})
    assert (cfg.cache_ttl_s, cfg.prune_threshold_tokens, cfg.overhead_mode, cfg.project) == (
        60.0, 8000, "light", "github.com/acme/api")
    with pytest.raises(ConfigError, match="BOSUN_OVERHEAD_MODE"):
        Config.from_env({"BOSUN_OVERHEAD_MODE": "turbo"})
    with pytest.raises(ConfigError, match="BOSUN_PRUNE_THRESHOLD_TOKENS"):
        Config.from_env({"BOSUN_PRUNE_THRESHOLD_TOKENS": "10"})


async def test_deploy_after_review_blocks_until_the_flag_is_set_and_again_once_cleared(
        client: Client, engine: Engine) -> None:
    tid = _sc(await _plan(client, mode="start", objective="ship the release", agent="dev"))["task_id"]
    deploy = {"task_id": tid, "tool": "deploy", "args": {"env": "prod"}}
    before = _sc(await client.call_tool("precheck", deploy))
    assert before["verdict"] == "block" and before["rule"] == "invariant:deploy-after-review"
    assert "review_approved" in before["required_action"]
    _sc(await _plan(client, mode="update", task_id=tid, agent="alice",
                    more={"flags": {"review_approved": True}, "why": "PR #12 approved by alice"}))
    assert _sc(await client.call_tool("precheck", deploy))["verdict"] == "allow"
    _sc(await _plan(client, mode="update", task_id=tid, agent="bob",
                    more={"flags": {"review_approved": None}, "why": "new commits after the review"}))
    assert _sc(await client.call_tool("precheck", deploy))["verdict"] == "block"


async def test_a_flag_is_journaled_with_who_and_why_and_shown_on_resume(client: Client, engine: Engine) -> None:
    tid = _sc(await _plan(client, mode="start", objective="o", more={"overhead": "light"}))["task_id"]
    _sc(await _plan(client, mode="update", task_id=tid, agent="alice",
                    more={"flags": {"review_approved": True, "env": "staging"}, "why": "review #7"}))
    events = [e for e in await engine.tasks.events(tid) if e.kind == "state_flag" and e.payload["source"] == "agent"]
    assert [(e.payload["name"], e.payload["value"], e.payload["why"], e.agent) for e in events] == [
        ("env", "staging", "review #7", "alice"), ("review_approved", True, "review #7", "alice")]
    flags = _sc(await _plan(client, mode="resume", task_id=tid))["resume"]["flags"]
    assert flags["review_approved"] == {"value": True, "by": "alice", "why": "review #7", "source": "agent",
                                        "seq": events[1].seq, "sealed": True}
    assert flags["overhead_mode"]["sealed"] is False and flags["overhead_mode"]["source"] == "bosun"


async def test_flags_are_covered_by_the_seal(client: Client, engine: Engine) -> None:
    a = _sc(await _plan(client, mode="start", objective="o", decisions=["d"]))
    tid = a["task_id"]
    b = _sc(await _plan(client, mode="update", task_id=tid, more={"flags": {"review_approved": True}, "why": "ok"}))
    assert b["seal"] != a["seal"]
    status = _sc(await _plan(client, mode="status", task_id=tid, seal=a["seal"]))
    drift = status["drift"]
    assert drift["verdict"] == "normal_growth" and drift["flags_changed"] == ["review_approved"]
    assert "flags changed" in drift["action"]
    # the seal is a function of the journal: replay gives the same one
    state = rebuild(await engine.tasks.events(tid))
    assert "sha256:" + hashes(state)["seal"] == b["seal"]
    # the same value again appends nothing; clearing returns to the flag-less tail
    same = _sc(await _plan(client, mode="update", task_id=tid, more={"flags": {"review_approved": True},
                                                                      "why": "again"}))
    assert same["applied"] == 0 or same["version"] == b["version"]
    cleared = _sc(await _plan(client, mode="update", task_id=tid, more={"flags": {"review_approved": None},
                                                                         "why": "reverted"}))
    assert cleared["seal"] == a["seal"]


async def test_bad_flags_are_refused_naming_the_field(client: Client) -> None:
    tid = _sc(await _plan(client, mode="start", objective="o"))["task_id"]

    async def bad(more: dict[str, Any]) -> str:
        return _err(await _plan(client, mode="update", task_id=tid, more=more)).removeprefix(
            "Error executing tool plan: ")

    assert (await bad({"flags": {"review_approved": True}})).startswith("why: is required")
    assert (await bad({"flags": {"tests_passed": True}, "why": "trust me"})).startswith("flags.tests_passed: is set "
                                                                                        "by bosun from evidence")
    assert (await bad({"flags": {"Bad Name": True}, "why": "x"})).startswith("flags.Bad Name:")
    assert (await bad({"flags": {"x": {"nested": 1}}, "why": "x"})).startswith("flags.x: must be")
    assert (await bad({"flags": {"prune_mode": "fast"}, "why": "x"})).startswith("flags.prune_mode: unknown value")
    assert (await bad({"why": "alone"})).startswith("why: goes with flags")
    assert "did you mean 'flags'" in await bad({"flag": {"x": True}})


async def test_tests_passed_still_comes_from_an_observed_test_run(client: Client, engine: Engine) -> None:
    tid = _sc(await _plan(client, mode="start", objective="o"))["task_id"]
    commit = {"task_id": tid, "tool": "git.commit", "args": {"message": "fix"}}
    assert _sc(await client.call_tool("precheck", commit))["verdict"] == "block"
    _sc(await client.call_tool("observe", {"task_id": tid, "kind": "result", "tool": "bash",
                                           "args": {"command": "pytest -q"},
                                           "result": "tests/test_a.py ....\n======= 4 passed in 0.12s =======\n"}))
    assert _sc(await client.call_tool("precheck", commit))["verdict"] == "allow"
    flags = _sc(await _plan(client, mode="resume", task_id=tid))["resume"]["flags"]
    assert flags["tests_passed"]["source"] == "observe" and flags["tests_passed"]["value"] is True


def test_a_person_sets_and_clears_a_flag_from_the_shell(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse
    import asyncio
    import json

    from bosun.core.embedding import HashEmbedder
    from bosun.server.commands import flag as cmd

    async def start() -> str:
        engine = Engine(Config.from_env(home=home, policies=[]), embedder_factory=lambda _c: HashEmbedder(64))
        await engine.open()
        try:
            return (await engine.tasks.start("ship it")).task_id
        finally:
            await engine.close()

    def run(*argv: str) -> int:
        parser = argparse.ArgumentParser()
        cmd.add_arguments(parser)
        return cmd.run(parser.parse_args([*argv, "--home", str(home)]))

    tid = asyncio.run(start())
    assert run("set", tid, "review_approved", "--why", "PR #12 approved", "--by", "alice") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["flags"]["review_approved"]["by"] == "alice" and out["flags"]["review_approved"]["value"] is True
    assert run("set", tid, "review_approved") == 1 and "why: is required" in capsys.readouterr().err
    assert run("set", tid, "tests_passed", "--why", "x") == 1 and "from evidence" in capsys.readouterr().err
    assert run("clear", tid, "review_approved", "--why", "new commits", "--by", "bob") == 0
    assert "review_approved" not in json.loads(capsys.readouterr().out)["flags"]
    assert run("list", tid) == 0


async def test_the_resume_prompt_lists_the_flags(client: Client) -> None:
    tid = _sc(await _plan(client, mode="start", objective="o"))["task_id"]
    _sc(await _plan(client, mode="update", task_id=tid, agent="alice",
                    more={"flags": {"review_approved": True}, "why": "PR #12 approved"}))
    prompt = await client.get_prompt("task-resume", {"task_id": tid})
    text = prompt.messages[0].content.text  # type: ignore[union-attr]
    assert "review_approved=true (by alice: PR #12 approved)" in text
