"""The shell and Python examples in the README run as written (from the checkout root)."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from bosun.server.app import create_server
from bosun.server.engine import Engine
from tests.helpers_proc import BOSUN, env_for

ROOT = Path(__file__).resolve().parents[1]


def _readme_bosun_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("try the pieces from a shell:", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [re.sub(r"\s+#.*$", "", line).strip() for line in block.strip().splitlines()]


def test_readme_shell_examples_run(tmp_path: Path) -> None:
    commands = _readme_bosun_commands()
    assert len(commands) == 3
    codes, errors = [], []
    for command in commands:
        argv = shlex.split(command.split("<")[0])
        stdin_path = command.split("<")[1].strip() if "<" in command else None
        assert argv[0] == ".venv/bin/bosun"
        with open(ROOT / stdin_path) if stdin_path else open("/dev/null") as stdin:
            res = subprocess.run([*BOSUN, *argv[1:]], cwd=ROOT, stdin=stdin, capture_output=True, text=True,
                                 env=env_for(tmp_path / "home"), timeout=300)
        assert res.stdout.strip(), (command, res.stderr[-2000:])
        codes.append(res.returncode)
        errors.append(f"{command}: exit {res.returncode}\n{res.stderr[-1500:]}\n{res.stdout[-1500:]}")
    # routing scores, the example audit fails its trust check (exit 1, as the README says), select succeeds
    assert codes == [0, 1, 0], "\n\n".join(errors)


def _readme_python_block() -> str:
    text = (ROOT / "README.md").read_text()
    return text.split("## A first minute", 1)[1].split("```python", 1)[1].split("```", 1)[0]


def test_readme_first_minute_python_runs(engine: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's Python example offloads an output and recalls the one line that matters from it."""
    block = _readme_python_block()
    assert "with Bosun() as b:" in block
    # the same code, aimed at an in-process daemon instead of the one in $BOSUN_HOME
    exec(compile(block.replace("Bosun()", "Bosun(server)"), "README.md", "exec"),
         {"server": create_server(engine), "__name__": "readme"})
    out = capsys.readouterr().out
    assert "1234:line 1234: ERROR disk full" in out and "'matches': 1" in out
