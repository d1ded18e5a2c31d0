"""Issue 14, items 4 and 2: owner-only BOSUN_HOME whatever the umask, and file reads that cannot
escape BOSUN_ROOTS, even while a directory is being swapped for a symlink."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from bosun.server.app import create_server
from bosun.server.engine import Engine


@pytest.fixture
def open_umask() -> Iterator[None]:
    old = os.umask(0)  # the worst case: every file created world-writable unless bosun says otherwise
    try:
        yield
    finally:
        os.umask(old)


async def test_the_store_is_owner_only_even_with_umask_0(engine: Engine, home: Path, open_umask: None) -> None:
    async with Client(create_server(engine)) as client:
        started = await client.call_tool("plan", {"mode": "start", "objective": "o", "steps": ["a"]})
        assert not started.is_error
        assert stat.S_IMODE(home.stat().st_mode) == 0o700
        modes = {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in home.iterdir() if p.is_file()}
    assert "bosun.db" in modes and "bosun.db-wal" in modes
    assert {n: m for n, m in modes.items() if m != "0o600"} == {}
