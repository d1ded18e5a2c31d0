"""The shared progress line (server/commands/progress.py): drawn on a terminal, silent when piped."""

from __future__ import annotations

import io

import pytest

from bosun.server.commands.progress import Progress, enabled_for, track


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_silent_when_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BOSUN_PROGRESS", raising=False)
    out = io.StringIO()
    assert list(track(range(5), "counting", stream=out)) == [0, 1, 2, 3, 4]
    assert out.getvalue() == ""


def test_terminal_gets_a_line_and_it_is_cleared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BOSUN_PROGRESS", raising=False)
    out = _Tty()
    with Progress("verifying refs", total=4, stream=out, heartbeat=False) as bar:
        bar.advance(2, note="mem://x")
        assert "2/4" in bar.line() and "50%" in bar.line() and "left" in bar.line()
    text = out.getvalue()
    assert "verifying refs" in text
    assert text.endswith("\r")  # the line is wiped: the command's own output starts clean


def test_env_switch_overrides_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOSUN_PROGRESS", "off")
    assert not enabled_for(_Tty())
    monkeypatch.setenv("BOSUN_PROGRESS", "on")
    assert enabled_for(io.StringIO())


def test_unknown_total_shows_elapsed_and_a_stage_restarts(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _Tty()
    bar = Progress("loading the model", stream=out, enabled=True, heartbeat=False)
    assert "elapsed" in bar.line() and "/" not in bar.line()
    bar.stage("embedding prompts", total=10)
    bar.advance(10)
    assert "10/10" in bar.line() and "100%" in bar.line()
    bar.close("done: 10 prompts")
    assert out.getvalue().endswith("done: 10 prompts\n")
