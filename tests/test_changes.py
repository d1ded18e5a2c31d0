"""Change notices: committed task writes tell listeners; a failing listener never fails a write."""

from __future__ import annotations

import pytest

from bosun.core.errors import Conflict
from bosun.server.engine import Engine


@pytest.fixture
async def opened(engine: Engine):  # type: ignore[no-untyped-def]
    await engine.open()
    yield engine
    await engine.close()


async def test_committed_writes_are_announced_and_failed_ones_are_not(opened: Engine) -> None:
    seen: list[str] = []
    remove = opened.tasks.changes.add(seen.append)

    def broken(_: str) -> None:
        raise RuntimeError("a subscriber bug")

    opened.tasks.changes.add(broken)
    state = await opened.tasks.start("ship the release")
    await opened.tasks.append(state.task_id, "decision_recorded", {"text": "use blue-green"})
    assert seen == [state.task_id, state.task_id]
    with pytest.raises(Conflict):
        await opened.tasks.append(state.task_id, "decision_recorded", {"text": "x"}, expected_version=1)
    assert len(seen) == 2  # nothing committed, nothing announced
    remove()
    await opened.tasks.append(state.task_id, "decision_recorded", {"text": "canary first"})
    assert len(seen) == 2
