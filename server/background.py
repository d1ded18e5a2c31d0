"""One owner for the daemon's background work: tasks on the event loop and work in threads.

Why: work left running in a worker thread (a model load, a corpus being embedded) used to
keep the process alive for tens of seconds after SIGTERM, and a cancelled close could leave
the database's thread behind. Everything bosun starts in the background goes through here,
so a shutdown stops it within a deadline: tasks are cancelled and awaited, thread work runs
on daemon threads (a cancelled caller stops waiting at once; the thread finishes its current
batch alone and cannot hold the process open), and ``stopping`` tells batch loops to stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
log = logging.getLogger("bosun.background")


class Background:
    """Starts, tracks and stops the background work of one Engine."""

    def __init__(self) -> None:
        self.stopping = threading.Event()  # read by thread work between batches
        self._tasks: set[asyncio.Task[Any]] = set()
        self._threads: set[threading.Thread] = set()
        self._threads_lock = threading.Lock()

    def spawn(self, coro: Coroutine[Any, Any, T], name: str) -> asyncio.Task[T]:
        """Run ``coro`` as a task this owner cancels on shutdown."""
        if self.stopping.is_set():
            coro.close()
            raise RuntimeError(f"cannot start {name}: shutting down")
        task = asyncio.get_running_loop().create_task(coro, name=f"bosun-{name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a daemon thread; cancelling the caller abandons the wait, not the process."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def settle(result: Any, error: BaseException | None) -> None:
            if future.done():  # the caller was cancelled: nobody waits for this any more
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)

        def run() -> None:
            try:
                result = fn(*args)
            except BaseException as exc:
                with contextlib.suppress(RuntimeError):  # the loop is already closed
                    loop.call_soon_threadsafe(settle, None, exc)
                return
            finally:
                with self._threads_lock:
                    self._threads.discard(threading.current_thread())
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, result, None)

        thread = threading.Thread(target=run, name=f"bosun-{getattr(fn, '__name__', 'work')}", daemon=True)
        with self._threads_lock:
            self._threads.add(thread)
        thread.start()
        return await future

    async def aclose(self, deadline_s: float) -> None:
        """Cancel every task, then let thread work in flight finish its batch: ``deadline_s`` in all.

        Waiting for the threads matters to a short-lived process (a CLI command): model inference
        still running on a daemon thread when the interpreter finalises aborts the process.
        """
        self.stopping.set()
        deadline = asyncio.get_running_loop().time() + deadline_s
        pending = [t for t in self._tasks if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            _, still = await asyncio.wait(pending, timeout=deadline_s)
            for task in still:
                log.warning("background task %s did not stop within %.1fs; abandoned", task.get_name(), deadline_s)
        while self.busy_threads() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
        if self.busy_threads():
            log.warning("thread work still running after %.1fs: %s", deadline_s, ", ".join(self.busy_threads()))

    def busy_threads(self) -> list[str]:
        """Names of the threads still running work started by ``in_thread``."""
        with self._threads_lock:
            return sorted(t.name for t in self._threads if t.is_alive())

    def running(self) -> list[str]:
        """Names of the tasks still running (for /healthz and tests)."""
        return sorted(t.get_name() for t in self._tasks if not t.done())


class Prefetch:
    """``fn(*args)`` started on a daemon thread now; ``result()`` waits for it and returns it (or raises its error).

    Why: a process that will need something slow (the embedding model) can start it before its own
    imports, which then run beside it: onnxruntime builds its session without holding the GIL.
    """

    def __init__(self, fn: Callable[..., Any], *args: Any, name: str = "prefetch") -> None:
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn, args), name=f"bosun-{name}", daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        try:
            self._value = fn(*args)
        except BaseException as exc:  # handed to whoever asks for the result
            self._error = exc

    def result(self, *_ignored: Any) -> Any:
        """The value (waiting for it); extra arguments are ignored, so it can stand in for a factory."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value

    def done(self) -> bool:
        return not self._thread.is_alive()
