"""Harness vocabularies (issue 37): each harness's real edit, read and run call shapes, through observe and
precheck over MCP. An edit is progress wherever it comes from: re-running a failing command after one is never
blocked; without one, the fourth identical failure is."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from bosun.core.guard.harness import classify, patch_paths
from bosun.core.guard.invariants import parse_rules
from bosun.core.guard.shell_effects import analyse
from bosun.server.engine import Engine

FAILURE = "Traceback (most recent call last):\n  File \"reproduce.py\", line 3, in <module>\nAssertionError: 1 != 2\n"
PATCH = "*** Begin Patch\n*** Update File: src/calc.py\n@@ def add(a, b):\n-    return a - b\n+    return a + b\n*** End Patch\n"

# harness -> (edit calls, one per try; the run call): the shapes each harness sends
HARNESSES: dict[str, tuple[list[tuple[str, Any]], tuple[str, Any]]] = {
    "claude-code": ([("Edit", {"file_path": "/repo/src/calc.py", "old_string": "a - b", "new_string": "a + b"}),
                     ("MultiEdit", {"file_path": "/repo/src/calc.py",
                                    "edits": [{"old_string": "x = 1", "new_string": "x = 2"}]}),
                     ("Write", {"file_path": "/repo/src/calc.py", "content": "def add(a, b):\n    return a + b\n"})],
                    ("Bash", {"command": "python -m pytest tests/test_calc.py", "description": "run the tests"})),
    "swe-agent (shell)": ([("bash", {"command": "str_replace_editor str_replace /testbed/src/calc.py   --old_str "
                                                "'a - b' --new_str 'a + b'"}),
                           ("bash", {"command": "str_replace_editor insert /testbed/src/calc.py --insert_line 3 "
                                                "--new_str '    pass'"}),
                           ("bash", {"command": "str_replace_editor undo_edit /testbed/src/calc.py"})],
                          ("bash", {"command": "cd /testbed && python reproduce.py"})),
    "swe-agent / openhands (function calls)": (
        [("str_replace_editor", {"command": "str_replace", "path": "/workspace/src/calc.py", "old_str": "a - b",
                                 "new_str": "a + b"}),
         ("str_replace_editor", {"command": "create", "path": "/workspace/reproduce.py", "file_text": "print(1)\n"}),
         ("str_replace_editor", {"command": "insert", "path": "/workspace/src/calc.py", "insert_line": 3,
                                 "new_str": "    pass"})],
        ("execute_bash", {"command": "python reproduce.py", "is_input": "false"})),
    "codex": ([("apply_patch", {"input": PATCH}),
               ("shell", {"command": ["apply_patch", PATCH.replace("a + b", "b + a")], "workdir": "/repo"}),
               ("shell", {"command": ["bash", "-lc", "apply_patch <<'EOF'\n" + PATCH + "EOF"]})],
              ("shell", {"command": ["bash", "-lc", "pytest -q tests/test_calc.py"], "workdir": "/repo"})),
    "cursor": ([("edit_file", {"target_file": "src/calc.py", "instructions": "fix add",
                               "code_edit": "def add(a, b):\n    return a + b\n"}),
                ("search_replace", {"file_path": "src/calc.py", "old_string": "a - b", "new_string": "a + b"}),
                ("edit_file", {"target_file": "src/calc.py", "instructions": "again", "code_edit": "# ...\n"})],
               ("run_terminal_cmd", {"command": "npm test", "is_background": False})),
    "aider-style whole-file writes": ([("write_file", {"path": "src/calc.py", "content": "def add(a, b):\n    1\n"}),
                                       ("write_file", {"path": "src/calc.py", "content": "def add(a, b):\n    2\n"}),
                                       ("create_file", {"path": "src/calc.py", "content": "def add(a, b):\n    3\n"})],
                                      ("run", {"command": "python -m pytest -q"})),
    "mini-swe-agent (bash only)": ([("bash", {"command": "sed -i 's/a - b/a + b/' src/calc.py"}),
                                    ("bash", {"command": "cat <<'EOF' > src/calc.py\ndef add(a, b):\n    return a + b\n"
                                                         "EOF"}),
                                    ("bash", {"command": "python - <<'EOF'\nfrom pathlib import Path\n"
                                                         "Path('src/calc.py').write_text('x')\nEOF"})],
                                   ("bash", {"command": "python3 reproduce.py"})),
}


async def call(client: Client, name: str, /, **args: Any) -> dict[str, Any]:
    res = await client.call_tool(name, args)
    assert not res.is_error, res.content
    return res.structured_content or {}


async def start(client: Client, engine: Engine) -> str:
    await client.list_tools()
    return (await engine.tasks.start("fix add()")).task_id


@pytest.mark.parametrize("harness", list(HARNESSES))
async def test_rerun_after_each_edit_is_progress_never_blocked(client: Client, engine: Engine, harness: str) -> None:
    edits, (run_tool, run_args) = HARNESSES[harness]
    tid = await start(client, engine)
    for tool, args in edits:
        verdict = await call(client, "precheck", task_id=tid, tool=run_tool, args=run_args)
        assert verdict["verdict"] != "block", (harness, verdict)
        await call(client, "observe", task_id=tid, kind="failure", tool=run_tool, args=run_args, result=FAILURE)
        assert (await call(client, "precheck", task_id=tid, tool=tool, args=args))["verdict"] == "allow"
        await call(client, "observe", task_id=tid, kind="result", tool=tool, args=args,
                   result="The file has been edited.")
    last = await call(client, "precheck", task_id=tid, tool=run_tool, args=run_args)
    assert last["verdict"] == "allow", (harness, last)


@pytest.mark.parametrize("harness", list(HARNESSES))
async def test_the_same_failure_without_an_edit_is_blocked(client: Client, engine: Engine, harness: str) -> None:
    edits, (run_tool, run_args) = HARNESSES[harness]
    read = ("Read", {"file_path": "/repo/src/calc.py"})
    tid = await start(client, engine)
    for _ in range(3):
        await call(client, "observe", task_id=tid, kind="failure", tool=run_tool, args=run_args, result=FAILURE)
        await call(client, "observe", task_id=tid, kind="result", tool=read[0], args=read[1], result="def add(a, b):")
    verdict = await call(client, "precheck", task_id=tid, tool=run_tool, args=run_args)
    assert verdict["verdict"] == "block" and verdict["rule"] == "loop:repeated_failure", (harness, verdict)
    # a FAILED editor call changed nothing: still blocked (a failing shell command may have written: not here)
    tool, args = edits[0]
    action = classify(tool, args)
    if action.kind == "edit" or (action.command is not None and analyse(action.command).editor_writes):
        await call(client, "observe", task_id=tid, kind="failure", tool=tool, args=args,
                   result="No replacement was performed, old_str `a - b` did not appear verbatim in src/calc.py.")
        assert (await call(client, "precheck", task_id=tid, tool=run_tool, args=run_args))["verdict"] == "block"
    await call(client, "observe", task_id=tid, kind="result", tool=tool, args=args, result="edited")
    assert (await call(client, "precheck", task_id=tid, tool=run_tool, args=run_args))["verdict"] == "allow"


@pytest.mark.parametrize(("tool", "args"), [
    ("Read", {"file_path": "/repo/src/calc.py"}),
    ("str_replace_editor", {"command": "view", "path": "/repo/src/calc.py"}),
    ("bash", {"command": "str_replace_editor view /repo/src/calc.py  --view_range 1 20"}),
    ("read_file", {"target_file": "src/calc.py", "should_read_entire_file": True}),
])
async def test_a_read_repeated_unchanged_is_a_duplicate_until_an_edit(client: Client, engine: Engine, tool: str,
                                                                      args: dict[str, Any]) -> None:
    tid = await start(client, engine)
    await call(client, "observe", task_id=tid, kind="result", tool=tool, args=args, result="def add(a, b):\n")
    again = await call(client, "precheck", task_id=tid, tool=tool, args=args)
    assert again["verdict"] == "suggest_alternative" and again["rule"] == "duplicate:duplicate"
    await call(client, "observe", task_id=tid, kind="result", tool="Edit",
               args={"file_path": "/repo/src/calc.py", "old_string": "a", "new_string": "b"}, result="ok")
    assert (await call(client, "precheck", task_id=tid, tool=tool, args=args))["verdict"] == "allow"


def test_classify_names_what_each_tool_does() -> None:
    assert classify("Edit", {"file_path": "a.py"}).kind == "edit"
    assert classify("mcp__fs__write_file", {"path": "a.py"}).paths == ("a.py",)
    assert classify("str_replace_editor", {"command": "view", "path": "a.py"}).kind == "read"
    assert classify("str_replace_editor", {"command": "undo_edit", "path": "a.py"}).kind == "edit"
    assert classify("shell", {"command": ["bash", "-lc", "ls -la"]}).command == "ls -la"
    assert classify("execute_bash", {"command": "ls"}).kind == "run"
    assert classify("get_user_details", {"user_id": "x"}).kind == "other"
    assert patch_paths(PATCH + "*** Add File: b.py\n+x\n*** Delete File: c.py\n") == ("src/calc.py", "b.py", "c.py")
    assert patch_paths("--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n") == ("x.py",)


@pytest.mark.parametrize(("command", "targets", "family"), [
    ("str_replace_editor create /testbed/r.py --file_text 'print(1)'", ("/testbed/r.py",), "str_replace_editor create"),
    ("cd /testbed && python -m pytest tests/x.py", None, "python -m pytest"),
    ("cd /testbed && python reproduce.py", None, "python reproduce.py"),
    ("apply_patch <<'EOF'\n" + PATCH + "EOF", ("src/calc.py",), "apply_patch"),
])
def test_shell_families_and_editor_writes(command: str, targets: tuple[str, ...] | None, family: str) -> None:
    effect = analyse(command)
    assert effect.family == family
    if targets is not None:
        assert effect.writes and effect.targets == targets and effect.editor_writes


@pytest.mark.parametrize(("tool", "args", "blocked"), [
    ("MultiEdit", {"file_path": "secrets/prod.env", "edits": [{"old_string": "a", "new_string": "b"}]}, True),
    ("str_replace_editor", {"command": "create", "path": "secrets/prod.env", "file_text": "x"}, True),
    ("str_replace_editor", {"command": "view", "path": "secrets/prod.env"}, False),
    ("apply_patch", {"input": "*** Begin Patch\n*** Update File: secrets/prod.env\n@@\n-a\n+b\n*** End Patch\n"}, True),
    ("bash", {"command": "str_replace_editor str_replace secrets/prod.env --old_str a --new_str b"}, True),
    ("bash", {"command": "str_replace_editor view secrets/prod.env"}, False),
    ("edit_file", {"target_file": "secrets/prod.env", "instructions": "x", "code_edit": "y"}, True),
    ("Read", {"file_path": "secrets/prod.env"}, False),
])
def test_a_write_protecting_invariant_sees_every_harness_edit(tool: str, args: dict[str, Any], blocked: bool) -> None:
    rules = parse_rules('[[invariant]]\nid = "no-secret-writes"\nwhen = { path_glob = "secrets/**", access = "write" }\n'
                        'message = "secrets are read-only"\n', "inv.toml")
    assert bool(rules.evaluate(tool, args, {}, [])) is blocked
