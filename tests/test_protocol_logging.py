"""logging/setLevel: bosun's log records reach the sessions that asked for them, per session, scrubbed."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import LoggingMessageNotificationParams

from bosun.server.app import create_server
from bosun.server.engine import Engine
from bosun.server.protocol.logs import LEVELS, mcp_level

# logging/setLevel is deprecated at 2026-07-28 but served to 2025 sessions: that is what is tested here
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

SECRET = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"


class Received:
    """A logging callback that remembers what arrived and wakes whoever waits for a text."""

    def __init__(self) -> None:
        self.messages: list[LoggingMessageNotificationParams] = []
        self.changed = anyio.Event()

    async def __call__(self, params: LoggingMessageNotificationParams) -> None:
        self.messages.append(params)
        self.changed.set()
        self.changed = anyio.Event()

    def texts(self) -> list[str]:
        return [str(m.data) for m in self.messages]

    async def wait_for(self, needle: str) -> None:
        with anyio.fail_after(10):
            while not any(needle in t for t in self.texts()):
                await self.changed.wait()


async def test_a_record_reaches_the_session_that_set_a_level_scrubbed_and_no_other(engine: Engine) -> None:
    mcp = create_server(engine)
    listening, silent = Received(), Received()
    async with Client(mcp, mode="legacy", logging_callback=listening) as a, \
            Client(mcp, mode="legacy", logging_callback=silent) as b:
        await a.set_logging_level("info")
        logging.getLogger("bosun.test").info("rotated the deploy key %s", SECRET)
        logging.getLogger("bosun.test").debug("below the level this session asked for")
        await listening.wait_for("rotated the deploy key")
        await b.list_tools()  # b's connection stays open and served while a gets its records
    text = next(t for t in listening.texts() if "rotated the deploy key" in t)
    assert SECRET not in text  # scrubbed like everything bosun stores
    assert not any("below the level" in t for t in listening.texts())
    assert listening.messages[0].level == "info" and listening.messages[0].logger == "bosun.test"
    assert silent.messages == []


async def test_records_logged_during_a_call_arrive_before_its_answer(engine: Engine) -> None:
    received = Received()
    async with Client(create_server(engine), mode="legacy", logging_callback=received) as client:
        await client.set_logging_level("info")
        result = await client.call_tool("recall", {"ref": "mem://sha256:" + "0" * 64, "no_such_argument": 1})
        assert result.is_error
        # argument_guard logs the refusal at info while the call runs: delivered before the result
        assert any("refused its arguments" in t for t in received.texts()), received.texts()


@pytest.mark.parametrize("asked", ["info", None])
async def test_a_2026_request_gets_records_only_when_it_opted_in(engine: Engine, asked: str | None) -> None:
    received = Received()
    async with Client(create_server(engine), mode="auto", logging_callback=received, log_level=asked) as client:  # type: ignore[arg-type]
        result = await client.call_tool("recall", {"ref": "mem://sha256:" + "0" * 64, "no_such_argument": 1})
        assert result.is_error
    refused = [t for t in received.texts() if "refused its arguments" in t]
    assert bool(refused) == (asked is not None)


async def test_setting_a_level_is_answered_with_an_empty_result_and_bad_levels_are_refused(engine: Engine) -> None:
    from mcp import MCPError

    async with Client(create_server(engine), mode="legacy") as client:
        assert (await client.set_logging_level("warning")).model_dump(exclude_none=True) == {}
        with pytest.raises((MCPError, Exception)):
            await client.set_logging_level("loud")  # type: ignore[arg-type]


def test_python_levels_map_to_the_mcp_scale() -> None:
    assert mcp_level(logging.DEBUG) == "debug" and mcp_level(logging.INFO) == "info"
    assert mcp_level(logging.WARNING) == "warning" and mcp_level(logging.CRITICAL) == "critical"
    assert mcp_level(25) == "notice" and list(LEVELS) == sorted(LEVELS, key=LEVELS.__getitem__)


async def test_the_daemons_own_level_is_back_when_the_sessions_are_gone(engine: Engine) -> None:
    bosun_logger = logging.getLogger("bosun")
    before = bosun_logger.level
    async with Client(create_server(engine), mode="legacy") as client:
        await client.set_logging_level("debug")
        assert bosun_logger.getEffectiveLevel() == logging.DEBUG
        root_filters = [f for h in logging.getLogger().handlers for f in h.filters]
        assert all(f.filter(_record("bosun.x", logging.DEBUG)) is False for f in root_filters
                   if type(f).__name__ == "_KeepStderrLevel")
    assert bosun_logger.level == before


def _record(name: str, level: int) -> Any:
    return logging.LogRecord(name, level, __file__, 1, "m", None, None)
