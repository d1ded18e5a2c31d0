"""Shared fixtures: an Engine on a temp BOSUN_HOME, with a fast deterministic
embedder for tests about logic, or the real embedded model for tests about meaning.

Also how the suite spreads over the CPUs (pytest-xdist, ``-n auto --dist loadscope`` in
pyproject): the whole suite runs on one worker per idle CPU (at most ``MAX_WORKERS``), because
much of its time is spent waiting on real ``bosun`` processes; a run that names files or test ids
stays in this process (a worker's start-up would cost more than it saves; ``-n 0`` forces that).
``loadscope`` keeps each module on one worker, so a module-scoped daemon is started once and the
module's tests run in their written order.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import Client

from bosun.core.embedding import HashEmbedder
from bosun.server.app import create_server
from bosun.server.config import Config
from bosun.server.engine import Engine

_REAL_MODEL = None
MAX_WORKERS = 4  # each worker holds its own model (~0.5 GB) and, when needed, its own PostgreSQL cluster


def _whole_suite(config: pytest.Config) -> bool:
    """True when the run collects directories (the README's bare ``pytest``), not named files or ids."""
    return all(Path(arg.split("::")[0]).is_dir() for arg in config.args)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for ``-n auto``: one per usable CPU for the whole suite, none (in-process) for a partial run.

    Quiet, two workers on 2 cores ran the suite in 158 s against 255 s in-process. Only a saturated machine
    (1-minute load average at least twice the CPUs) runs in-process: there workers only add their own start-up
    (each collects the suite and loads the model: a process-heavy subset at load 11-17 took the same wall time,
    201-238 s vs 207-213 s, for 79-80 s of CPU instead of 61-65 s). The load average lags by a minute, so it
    is not used to count idle CPUs. ``PYTEST_XDIST_AUTO_NUM_WORKERS`` overrides the count."""
    override = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    if override:
        return int(override)
    if not _whole_suite(config):
        return 0
    cpus = len(os.sched_getaffinity(0))
    if cpus < 2 or os.getloadavg()[0] >= 2 * cpus:
        return 0
    return min(MAX_WORKERS, cpus)


def real_model_factory(config: Config):  # type: ignore[no-untyped-def]
    """Load the embedded model once per test session (it is read-only)."""
    global _REAL_MODEL
    if _REAL_MODEL is None:
        from bosun.server.engine import default_embedder_factory

        _REAL_MODEL = default_embedder_factory(config)
    return _REAL_MODEL


@pytest.fixture
def anyio_backend() -> str:
    """Async tests and fixtures run under anyio (auto mode, see pyproject) on asyncio."""
    return "asyncio"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "bosun-home"


@pytest.fixture
def config(home: Path) -> Config:
    """The environment's configuration (tests set BOSUN_* with monkeypatch) on a temp home."""
    return Config.from_env(home=home, policies=[])


@pytest.fixture
def engine(config: Config) -> Engine:
    """An Engine with the deterministic HashEmbedder (open it through a client)."""
    return Engine(config, embedder_factory=lambda _c: HashEmbedder(64))


@pytest.fixture
def real_engine(config: Config) -> Engine:
    """An Engine with the real embedded model (shared across the session)."""
    return Engine(config, embedder_factory=real_model_factory)


@pytest.fixture(params=["auto", "legacy"])
async def client(request: pytest.FixtureRequest, engine: Engine) -> AsyncIterator[Client]:
    """In-memory MCP client over both wire eras (2026-07-28 and 2025-11-25)."""
    async with Client(create_server(engine), mode=request.param) as c:
        yield c


@pytest.fixture
async def real_client(real_engine: Engine) -> AsyncIterator[Client]:
    async with Client(create_server(real_engine)) as c:
        yield c
