"""The PreToolUse hook: Bash calls go through bosun run, except those that must not; it never blocks."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from bosun.server.commands import pretool
from bosun.server.commands.pretool import decide, leave_alone


@pytest.fixture(autouse=True)
def _settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Permission rules come from a settings file of the test's own, never from this machine's."""
    path = tmp_path / "settings.json"
    monkeypatch.setattr(pretool, "settings_files", lambda _cwd: [str(path)])
    return path


def _event(command: str, mode: str = "bypassPermissions", **tool_input: object) -> dict[str, object]:
    return {"session_id": "abc123", "hook_event_name": "PreToolUse", "tool_name": "Bash", "permission_mode": mode,
            "cwd": "/nonexistent", "tool_input": {"command": command, "description": "d", **tool_input}}


def test_a_bash_call_is_rewritten_to_run_through_bosun_and_keeps_its_other_fields() -> None:
    out = decide(_event("pytest -q tests/ | tail -20", timeout=120000))
    assert out is not None
    spec = out["hookSpecificOutput"]
    assert spec["hookEventName"] == "PreToolUse" and "permissionDecision" not in spec
    new = spec["updatedInput"]
    assert new["timeout"] == 120000 and new["description"] == "d"
    argv = shlex.split(new["command"])
    assert argv[-3:] == ["bash", "-c", "pytest -q tests/ | tail -20"]  # the original, whole, in a child bash
    assert argv[1:3] == ["-S", "-P"] and argv[3].endswith("/server/commands/_run_script.py")  # no site
    assert argv[argv.index("--session") + 1] == "claude-code:abc123"


@pytest.mark.parametrize("command, argv", [
    ("pytest -q tests/unit", ["pytest", "-q", "tests/unit"]),
    ("git log --oneline -5", ["git", "log", "--oneline", "-5"]),
])
def test_a_plain_argv_runs_without_a_shell(command: str, argv: list[str]) -> None:
    out = decide(_event(command))
    assert out is not None
    words = shlex.split(out["hookSpecificOutput"]["updatedInput"]["command"])
    assert words[words.index("--") + 1:] == argv


@pytest.mark.parametrize("command", ["ls *.py tests", "echo hello world", "FOO=1 make test", "make\nmake test",
                                     "cat ~/notes.txt", "pytest -q 'a b'", "make 2>err.log", "grep -rn x src | head"])
def test_shell_syntax_builtins_and_assignments_keep_the_shell(command: str) -> None:
    out = decide(_event(command))
    assert out is not None
    words = shlex.split(out["hookSpecificOutput"]["updatedInput"]["command"])
    assert words[-3:] == ["bash", "-c", command]


def test_the_rewritten_command_runs_through_run_py_without_site(tmp_path: object) -> None:
    """The exact command line the hook writes runs the original (no daemon: printed, exit code kept)."""
    import os

    out = decide(_event("python3 -c 'import sys; print(42); sys.exit(4)'"))
    assert out is not None
    env = {**os.environ, "BOSUN_HOME": str(tmp_path), "BOSUN_RUN_START": "0"}
    done = subprocess.run(out["hookSpecificOutput"]["updatedInput"]["command"], shell=True, capture_output=True,
                          env=env, timeout=60, check=False)
    assert done.returncode == 4 and done.stdout == b"42\n"
    assert leave_alone(out["hookSpecificOutput"]["updatedInput"]["command"]) == "already bosun"


def test_the_rewritten_command_runs_the_original_with_its_exit_code(tmp_path: object) -> None:
    out = decide(_event("printf 'a b\\n' && python3 -c 'import sys; sys.exit(4)'"))
    assert out is not None
    argv = shlex.split(out["hookSpecificOutput"]["updatedInput"]["command"])
    # run it the way bosun run would run its command part: the original text, unchanged
    cmd = argv[argv.index("--") + 1:]
    done = subprocess.run(cmd, capture_output=True, check=False)
    assert done.returncode == 4 and done.stdout == b"a b\n"


@pytest.mark.parametrize("command, why", [
    ("ls", "short"),
    ("cd src && make", "shell state"),
    ("export A=1", "shell state"),
    ("source .venv/bin/activate && pytest", "shell state"),
    ("vim README.md", "interactive"),
    ("git add -p", "interactive"),
    ("git commit", "interactive"),
    ("tail -f app.log", "interactive"),
    ("python3", "interactive"),
    ("docker run -it ubuntu bash", "interactive"),
    ("make 2>&1 | bosun observe --task t1", "already bosun"),
    ("bosun run -- make", "already bosun"),
])
def test_commands_that_must_run_as_they_are_are_left_alone(command: str, why: str) -> None:
    assert leave_alone(command) == why
    assert decide(_event(command)) is None


@pytest.mark.parametrize("command", ["git commit -m 'fix: x'", "python3 -m pytest -q", "grep -rn TODO src | head",
                                     "cat <<'EOF' > a.py\nprint(1)\nEOF"])
def test_ordinary_commands_go_through(command: str) -> None:
    assert leave_alone(command) is None


def test_other_tools_and_background_calls_are_left_alone() -> None:
    assert decide({"tool_name": "Read", "tool_input": {"file_path": "a.py"}}) is None
    assert decide(_event("pytest -q", run_in_background=True)) is None
    assert decide({"tool_name": "Bash", "tool_input": "pytest"}) is None
    assert decide(None) is None


def test_the_permission_decision_is_only_given_when_asked() -> None:
    out = decide(_event("pytest -q", mode="default"), permission="ask")
    assert out is not None and out["hookSpecificOutput"]["permissionDecision"] == "ask"


def _rules(path: Path, **perms: list[str]) -> None:
    path.write_text(json.dumps({"permissions": perms}))


def test_outside_bypass_mode_only_an_allowed_command_is_rewritten_and_it_says_allow(_settings: Path) -> None:
    """Claude Code checks its rules on the rewritten command: the hook must not turn a silent call into a prompt."""
    _rules(_settings, allow=["Bash(pytest:*)", "Bash(git log --oneline)"])
    out = decide(_event("pytest -q tests", mode="default"))
    assert out is not None and out["hookSpecificOutput"]["permissionDecision"] == "allow"
    assert decide(_event("git log --oneline", mode="default")) is not None
    assert decide(_event("git log --oneline -5", mode="default")) is None  # exact rule: not this one
    assert decide(_event("pytest -q && rm -rf build", mode="default")) is None  # a second command is not covered
    assert decide(_event("pytesting -q", mode="default")) is None  # a prefix rule matches whole words
    assert decide(_event("make test", mode="default")) is None  # would prompt: left for Claude Code


def test_a_deny_or_ask_rule_keeps_the_original_even_in_bypass_mode_or_when_forced(_settings: Path) -> None:
    _rules(_settings, allow=["Bash"], deny=["Bash(rm:*)"], ask=["Bash(git push:*)"])
    assert decide(_event("rm -rf build/cache")) is None
    assert decide(_event("make clean && rm -rf build")) is None
    assert decide(_event("git push origin main", mode="default"), permission="allow") is None
    out = decide(_event("make test", mode="default"))
    assert out is not None and out["hookSpecificOutput"]["permissionDecision"] == "allow"  # a whole-tool allow


def test_an_unreadable_settings_file_leaves_every_command_alone(_settings: Path) -> None:
    _settings.write_text("{not json")
    assert decide(_event("pytest -q tests")) is None


@pytest.mark.parametrize("stdin", ["not json", "[1, 2]", '{"tool_name": "Bash"}', ""])
def test_the_hook_never_blocks_on_bad_input(stdin: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "bosun.server.commands.hook", "claude-code-pretool"], input=stdin,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and proc.stdout == ""


def test_the_hook_process_prints_the_rewrite(tmp_path: Path) -> None:
    import os

    env = {**os.environ, "HOME": str(tmp_path)}
    env.pop("CLAUDE_PROJECT_DIR", None)
    proc = subprocess.run([sys.executable, "-m", "bosun.server.commands.hook", "claude-code-pretool"],
                          input=json.dumps(_event("pytest -q tests")), capture_output=True, text=True, timeout=60,
                          check=False, env=env)
    assert proc.returncode == 0
    assert "/server/commands/_run_script.py" in json.loads(proc.stdout)["hookSpecificOutput"]["updatedInput"]["command"]
