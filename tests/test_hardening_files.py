"""Issue 14, items 4 and 2: owner-only BOSUN_HOME whatever the umask, and file reads that cannot
escape BOSUN_ROOTS, even while a directory is being swapped for a symlink."""

from __future__ import annotations

import ctypes
import os
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from bosun.core.embedding import HashEmbedder
from bosun.core.errors import BosunError
from bosun.server.app import create_server
from bosun.server.config import Config
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


# -- item 2: the sandbox race -------------------------------------------------------------------

RENAME_EXCHANGE = 2


def _exchanger() -> Callable[[Path, Path], None] | None:
    """renameat2(RENAME_EXCHANGE): swap two paths atomically (what the fuzzing attack used)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "renameat2"):
        return None

    def exchange(a: Path, b: Path) -> None:
        if libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), RENAME_EXCHANGE) != 0:
            raise OSError(ctypes.get_errno(), "renameat2")

    return exchange


def _swappable_root(tmp_path: Path) -> Path:
    """A root whose ``sub/hostname`` is inside, and ``swap``, a symlink to a directory outside it
    holding another ``hostname``: exchanging the two names points ``sub`` outside."""
    root, outside = tmp_path / "root", tmp_path / "etc"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "sub" / "hostname").write_text("inside the root\n")
    (outside / "hostname").write_text("OUTSIDE-SECRET\n")
    (root / "swap").symlink_to(outside)
    return root


@pytest.fixture(params=["openat2", "nofollow"])
def opener(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "nofollow":  # the fallback for kernels without openat2
        from bosun.server.services import safe_open

        monkeypatch.setattr(safe_open, "_openat2", lambda _fd, _rel: None)
    return str(request.param)


async def test_a_directory_swapped_for_a_symlink_mid_call_never_leads_outside(tmp_path: Path, opener: str) -> None:
    exchange = _exchanger()
    if exchange is None:
        pytest.skip("renameat2 is not available in this libc")
    root = _swappable_root(tmp_path)
    config = Config(home=tmp_path / "home", policies=[], roots=[root])
    engine = Engine(config, embedder_factory=lambda _c: HashEmbedder(64))
    stop = threading.Event()
    swaps = 0

    def flip() -> None:
        nonlocal swaps
        while not stop.is_set():
            exchange(root / "sub", root / "swap")
            swaps += 1

    async with Client(create_server(engine)) as client:
        started = await client.call_tool("plan", {"mode": "start", "objective": "read", "steps": ["a"]})
        task_id = started.structured_content["task_id"]  # type: ignore[index]
        flipper = threading.Thread(target=flip, daemon=True)
        switch = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)  # switch threads as often as possible: the swap lands anywhere in a call
        flipper.start()
        outcomes: dict[str, int] = {}
        try:
            for _ in range(200):
                try:
                    answer = await engine.files.observe_file(task_id, "sub/hostname")
                except BosunError as exc:  # refused or not found mid-swap: fine, and named
                    key = "refused" if "outside" in str(exc) or "not found" in str(exc) else str(exc)
                    outcomes[key] = outcomes.get(key, 0) + 1
                    continue
                data = await engine.refs.get(await engine.recall.resolver.resolve(answer["ref"]))
                key = "outside" if b"OUTSIDE" in data else "inside"
                outcomes[key] = outcomes.get(key, 0) + 1
        finally:
            stop.set()
            flipper.join()
            sys.setswitchinterval(switch)
    assert swaps > 0
    assert outcomes.get("outside", 0) == 0, outcomes
    assert set(outcomes) <= {"inside", "refused"}, outcomes  # no OSError EINVAL, no internal error
    assert outcomes.get("inside", 0) > 0, outcomes


async def test_a_swap_between_the_check_and_the_read_is_harmless(
        tmp_path: Path, opener: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deterministic: the directory becomes a symlink to outside right when the file is first stat'ed
    (after any path check, before any read), once per call; the content read must still be the inside file."""
    exchange = _exchanger()
    if exchange is None:
        pytest.skip("renameat2 is not available in this libc")
    root = _swappable_root(tmp_path)
    engine = Engine(Config(home=tmp_path / "home", policies=[], roots=[root]),
                    embedder_factory=lambda _c: HashEmbedder(64))
    armed = {"on": False}
    real_stat, real_fstat = os.stat, os.fstat

    def swap_once() -> None:
        if armed["on"]:
            armed["on"] = False
            exchange(root / "sub", root / "swap")

    def stat_then_swap(path: Any, *args: Any, **kwargs: Any) -> Any:
        out = real_stat(path, *args, **kwargs)
        if "hostname" in str(path):
            swap_once()
        return out

    def fstat_then_swap(fd: int) -> Any:
        out = real_fstat(fd)
        swap_once()
        return out

    async with Client(create_server(engine)) as client:
        started = await client.call_tool("plan", {"mode": "start", "objective": "read", "steps": ["a"]})
        task_id = started.structured_content["task_id"]  # type: ignore[index]
        monkeypatch.setattr(os, "stat", stat_then_swap)
        monkeypatch.setattr(os, "fstat", fstat_then_swap)
        for _ in range(3):
            armed["on"] = True
            answer = await engine.files.observe_file(task_id, "sub/hostname")
            monkeypatch.setattr(os, "stat", real_stat)
            data = await engine.refs.get(await engine.recall.resolver.resolve(answer["ref"]))
            monkeypatch.setattr(os, "stat", stat_then_swap)
            assert data == b"inside the root\n"
            assert not armed["on"]  # the swap did happen inside the call
            exchange(root / "sub", root / "swap")  # back to the start
