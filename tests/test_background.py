"""The owner of background work: tasks cancelled, thread work in flight finished before close returns."""

from __future__ import annotations

import threading

import anyio
import pytest

from bosun.server.background import Background


async def test_close_cancels_tasks_and_waits_for_the_batch_in_flight() -> None:
    """A short-lived process (a CLI command) must not finalise while model inference runs on a worker
    thread: that aborts the interpreter (seen as exit 134 from `bosun select` during a corpus build)."""
    bg = Background()
    release, finished = threading.Event(), threading.Event()

    def batch() -> str:
        release.wait(30)  # "inference" that is still running when the Engine closes
        finished.set()
        return "done"

    async def build() -> None:
        await bg.in_thread(batch)

    task = bg.spawn(build(), "corpus-build")
    with anyio.fail_after(30):
        while not bg.busy_threads():
            await anyio.sleep(0.001)

    async def close() -> None:
        await bg.aclose(deadline_s=30)

    async with anyio.create_task_group() as tg:
        tg.start_soon(close)
        with anyio.fail_after(30):
            while not task.done():  # the task is cancelled at once; the thread is still busy
                await anyio.sleep(0.001)
        assert task.cancelled() and bg.busy_threads() and not finished.is_set()
        release.set()  # the batch completes; only then may close return
    assert finished.is_set() and bg.busy_threads() == []
    with pytest.raises(RuntimeError, match="shutting down"):
        bg.spawn(build(), "late")
