"""`bosun observe` (pipe), `bosun recall` and `bosun verify` from a shell."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from bosun.server.cli import build_parser
from bosun.server.commands.observe import open_engine
from bosun.server.config import Config

TEST_LOG = "".join(f"tests/test_x.py::test_{i} PASSED\n" for i in range(400)) + (
    "FAILED tests/test_x.py::test_9 - AssertionError: 1 != 2\n===== 1 failed, 400 passed in 3.2s =====\n"
)


def _task(home: Path) -> str:
    async def start() -> str:
        engine = await open_engine(Config(home=home))
        try:
            return (await engine.tasks.start(objective="cli")).task_id
        finally:
            await engine.close()

    return asyncio.run(start())


def _run(argv: list[str], stdin: str = "", monkeypatch: pytest.MonkeyPatch | None = None) -> int:
    if monkeypatch is not None:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    args = build_parser().parse_args(argv)
    return int(args.func(args))


def test_pipe_observe_recall_verify(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    tid = _task(home)
    assert _run(["observe", "--task", tid, "--command", "echo hi", "--home", str(home)], "hi\n", monkeypatch) == 0
    assert capsys.readouterr().out == "hi\n"  # small: the pipe is transparent
    assert _run(["observe", "--task", tid, "--command", "pytest -q", "--home", str(home)], TEST_LOG, monkeypatch) == 0
    stub = json.loads(capsys.readouterr().out)
    assert stub["offloaded"] and "FAILED tests/test_x.py::test_9" in stub["outline"]
    assert _run(["recall", stub["ref"], "--op", "grep", "--pattern", "^FAILED", "--task", tid, "--home", str(home)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1] == "401:FAILED tests/test_x.py::test_9 - AssertionError: 1 != 2"
    assert _run(["recall", "mem://sha256:" + "0" * 16, "--home", str(home)]) == 1
    assert "not found" in capsys.readouterr().err
    assert _run(["recall", stub["ref"], "--op", "jsonl", "--where", "{bad", "--home", str(home)]) == 1
    assert "where" in capsys.readouterr().err
    assert _run(["verify", "--task", tid, "--home", str(home)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["lossless"] and report["items_externalized"] == 2
    assert _run(["observe", "--task", "t_nope", "--home", str(home)], "data\n", monkeypatch) == 2
    captured = capsys.readouterr()
    assert captured.out == "data\n" and "task not found" in captured.err  # the output is never swallowed
