"""Invariants (TOML rules), globs, budgets, shell effects and handoff contracts (pure core)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bosun.core.errors import InvalidInput
from bosun.core.guard.globs import check_glob, path_match
from bosun.core.guard.handoff import build_contract, check_result
from bosun.core.guard.invariants import parse_rules
from bosun.core.guard.shell_effects import analyse
from bosun.core.task.budget import check_budget, parse_budget

EXAMPLE = Path(__file__).resolve().parents[1] / "invariants.example.toml"


def test_example_file_parses_and_holds_the_seed_rules() -> None:
    rules = parse_rules(EXAMPLE.read_text(), "invariants.example.toml")
    ids = [r.id for r in rules.rules]
    assert "tests-before-commit" in ids and "no-test-edit" in ids and len(ids) >= 6


def test_tests_before_commit_blocks_until_tests_pass() -> None:
    rules = parse_rules(EXAMPLE.read_text())
    hits = rules.evaluate("git.commit", {"message": "fix"}, {}, [])
    assert [h.rule.id for h in hits] == ["tests-before-commit"]
    assert "requires tests_passed" in hits[0].reason and hits[0].to_dict()["required_action"]
    assert rules.evaluate("git.commit", {}, {"tests_passed": True}, []) == []
    shell = rules.evaluate("bash", {"command": "git add -A && git commit -m x"}, {"tests_passed": False}, [])
    assert [h.rule.id for h in shell] == ["tests-before-commit-shell"]


def test_path_glob_matches_writes_not_reads_by_default() -> None:
    rules = parse_rules(EXAMPLE.read_text())
    assert [h.rule.id for h in rules.evaluate("bash", {"command": "sed -i 's/a/b/' tests/test_x.py"}, {}, [])] == ["no-test-edit"]
    assert rules.evaluate("bash", {"command": "cat tests/test_x.py"}, {}, []) == []
    assert [h.rule.id for h in rules.evaluate("write_file", {"path": "/repo/tests/a.py"}, {}, [])] == ["no-test-edit"]
    assert rules.evaluate("read_file", {"path": "/repo/tests/a.py"}, {}, []) == []
    secrets = rules.evaluate("read_file", {"path": "app/.env"}, {}, [])
    assert [h.rule.id for h in secrets] == ["no-secrets-files"]


def test_require_step_and_warn_verdict() -> None:
    rules = parse_rules(EXAMPLE.read_text())
    hits = rules.evaluate("edit_file", {"path": "app/migrations/0002_x.py"}, {}, [])
    assert [h.rule.id for h in hits] == ["migrations-need-plan-step"]
    assert rules.evaluate("edit_file", {"path": "app/migrations/0002_x.py"}, {}, ["Design the schema change"]) == []
    warn = rules.evaluate("cancel_reservation", {"reservation_id": "X"}, {}, [])
    assert warn[0].rule.verdict == "warn"


@pytest.mark.parametrize(("text", "line", "field"), [
    ('[[invariant]]\nid = "a"\nwhen = { tool = "x" }\n', 1, "message"),
    ('[[invariant]]\nid = "a"\nmessage = "m"\nwhen = { tool = "x[" }\n', 4, "when.tool"),
    ('[[invariant]]\nid = "a"\nmessage = "m"\nwhen = { path_glob = "src/]" }\n', 4, "when.path_glob"),
    ('[[invariant]]\nid = "a"\nmessage = "m"\nwhen = { tool = "x" }\nverdict = "deny"\n', 5, "verdict"),
    ('[[invariant]]\nid = "a"\nmessage = "m"\nwhen = { tool = "x", args = { c = "re:(" } }\n', 4, "when.args.c"),
    ('[[invariant]]\nid = "a"\nmessage = "m"\nwhen = { tool = "x" }\n\n[[invariant]]\nid = "a"\n'
     'message = "m"\nwhen = { tool = "y" }\n', 7, "id"),
    ('[[invariant]]\nid = "a"\nmessage = "m"\nwhen = { tool = "x"\n', 4, "toml"),
    ('[[invariant]]\nid = "a"\nmessage = "m"\nwhen = { tool = "x" }\nrequire = { sate = "t" }\n', 5, "require.sate"),
])
def test_malformed_rules_name_the_line_and_field(text: str, line: int, field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_rules(text, "inv.toml")
    message = str(info.value)
    assert f"inv.toml:{line}" in message and field in message


def test_globs() -> None:
    assert path_match("tests/**", "/repo/tests/unit/a.py")
    assert path_match("**/.env", ".env") and path_match("*.py", "a.py") and not path_match("*.py", "a.pyc")
    assert not path_match("/etc/*", "/home/etc/x")
    with pytest.raises(InvalidInput, match=r"when\.tool: invalid glob"):
        check_glob("when.tool", "a[b")


def test_budget_soft_warns_hard_blocks_naming_numbers() -> None:
    b = parse_budget({"tokens": 10_000})
    assert check_budget(b, 7_000).verdict == "allow"
    soft = check_budget(b, 8_500)
    assert soft.verdict == "warn" and "8,500" in soft.reason and "8,000" in soft.reason
    hard = check_budget(b, 10_000)
    assert hard.verdict == "block" and "10,000" in hard.reason
    cost = check_budget(parse_budget({"cost_usd": 1.0, "usd_per_mtok": 10}), 100_000)
    assert cost.verdict == "block" and "$1.0000" in cost.reason
    with pytest.raises(InvalidInput, match=r"budget\.tokens"):
        parse_budget({"tokens": -1})
    with pytest.raises(InvalidInput, match=r"budget\.soft_tokens"):
        parse_budget({"tokens": 10, "soft_tokens": 20})


def test_shell_effects() -> None:
    assert analyse("sed -n '1,5p' a.py").writes is False
    assert analyse("sed -i 's/a/b/;s/c/d/' a.py").targets == ("a.py",)
    assert analyse("grep -rn foo src | head").reads == ("src",)
    assert analyse("git diff").writes is False
    assert analyse("git checkout -- a.py").targets == ("a.py",)
    assert analyse("git checkout main").targets is None
    assert analyse("python -c 'print(1 > 0)'").writes is False
    assert analyse("ls > /dev/null 2>&1").writes is False
    assert analyse("pytest -q tests/x.py").runs_tests


def test_handoff_contract_checks() -> None:
    c = build_contract("fix the parser", ["mem://sha256:" + "a" * 64], ["no API changes"], ["keep it small"],
                       [{"field": "tests_passed", "op": "equals", "value": True},
                        {"field": "files_changed", "op": "nonempty"},
                        {"field": "report", "op": "is_ref"}], {"tokens": 5000})
    assert c.constraints == ("no API changes", "keep it small")
    ok, failures = check_result(c, {"tests_passed": True, "files_changed": ["a.py"], "report": "mem://sha256:" + "b" * 64,
                                    "tokens_used": 100})
    assert ok and failures == []
    ok, _ = check_result(c, {"tests_passed": True, "files_changed": ["a.py"], "report": "mem://sha256:" + "b" * 16})
    assert ok  # the short ref observe shows is a ref too
    ok, failures = check_result(c, {"tests_passed": False, "files_changed": [], "tokens_used": 9000})
    assert not ok and {f["check"] for f in failures} == {"tests_passed:equals", "files_changed:nonempty",
                                                         "report:is_ref", "budget.tokens"}
    with pytest.raises(InvalidInput, match=r"checks\[0\]\.op"):
        build_contract("x", checks=[{"field": "a", "op": "bogus"}])
    with pytest.raises(InvalidInput, match="inputs\\[0\\]"):
        build_contract("x", inputs=["not-a-ref"])
    with pytest.raises(InvalidInput, match="result"):
        check_result(c, ["not", "an", "object"])
