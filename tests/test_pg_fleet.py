"""Two daemons, one PostgreSQL (issue 18): the fleet guarantees hold across processes.

Two real ``bosun serve`` processes (two BOSUN_HOMEs, one ``BOSUN_DATABASE_URL``) serve SDK agents
split across them. Everything is asserted on the journal in the database and on the answers,
never on timing: no acknowledged update lost, versions gap-free, nothing journaled twice, no failed
call but the expected version conflicts; a manifest subscription on one daemon hears an update made
through the other; after a ``kill -9`` of one daemon mid-burst, every call that returned is durable,
the other daemon kept serving, and the restarted daemon answers a re-sent idempotency key with the
first answer, whichever daemon gave it.

Sizes are bounded (a few hundred calls) so the module stays well under a minute on a loaded machine.
The module skips, naming the reason, only when no PostgreSQL server can be started; under ``CI`` it
fails instead.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from mcp import Client
from mcp.types import CallToolResult, RequestParamsMeta, ResourceUpdatedNotification, TextContent

from bosun.server.idempotency import META_KEY
from tests.helpers_proc import BOSUN, env_for, stop, wait_for_daemon

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

AGENTS_PER_DAEMON = 2
ROUNDS = 3  # per agent: observe, recall of a ref stored through the other daemon, plan update on a shared task
MAX_TRIES = 40  # plan update retries after a conflict (each retry re-reads the version first)
KILL_AGENTS_PER_DAEMON = 2
KILL_BURST = 8  # observes per agent in the kill test
KILL_AFTER = 4  # the victim is killed once this many of its calls were answered (progress, not time)
UNVERSIONED_WRITES = 8  # per agent, all to one task, in the unversioned-writes test
REF_TEXT = "".join(f"line {i:03d}: a build log kept once and recalled by slices\n" for i in range(400))
HANG_BOUND_S = 60  # a missing notification fails the test instead of hanging it (not a timing assertion)


# -- the database --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    seq: int
    kind: str
    payload: dict[str, Any]


def journal(url: str, task_id: str) -> list[Row]:
    """The task's journal as the database holds it (read directly, not through bosun)."""
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT seq, kind, payload_json FROM task_events WHERE task_id = %s ORDER BY seq",
                            (task_id,)).fetchall()
    return [Row(int(r[0]), str(r[1]), r[2] if isinstance(r[2], dict) else json.loads(r[2])) for r in rows]


def observe_markers(rows: list[Row]) -> Counter[str]:
    """How often each observe marker (the tool's ``args.k``) is journaled."""
    out: Counter[str] = Counter()
    for row in rows:
        args = row.payload.get("args")
        if row.kind in ("tool_result", "tool_failure") and isinstance(args, dict) and isinstance(args.get("k"), str):
            out[args["k"]] += 1
    return out


def decisions(rows: list[Row]) -> dict[str, list[int]]:
    """Each decision text -> the seqs it was journaled at."""
    out: dict[str, list[int]] = {}
    for row in rows:
        if row.kind == "decision_added":
            out.setdefault(str(row.payload.get("text")), []).append(row.seq)
    return out


# -- the daemons ---------------------------------------------------------------------------------


@dataclass
class Daemon:
    home: Path
    database_url: str
    proc: subprocess.Popen[bytes] | None = None
    url: str = ""

    def spawn(self) -> Daemon:
        env = env_for(self.home, BOSUN_DATABASE_URL=self.database_url)
        with (self.home.parent / f"{self.home.name}.log").open("ab") as log:
            self.proc = subprocess.Popen([*BOSUN, "serve", "--port", "0", "--home", str(self.home)], env=env,
                                         stdout=subprocess.DEVNULL, stderr=log)
        return self

    def wait(self) -> Daemon:
        """Until daemon.json names this process (after a kill -9 the dead one's file is still there)."""
        assert self.proc is not None
        for _ in range(3000):
            data = wait_for_daemon(self.home, self.proc)
            if data["pid"] == self.proc.pid:
                self.url = str(data["url"])
                return self
            time.sleep(0.02)
        raise AssertionError(f"{self.home}: daemon.json never named pid {self.proc.pid}")

    def start(self) -> Daemon:
        return self.spawn().wait()

    def kill9(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            stop(self.proc.pid)
            self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def database_url() -> str:
    """One fresh database for the module's daemons (skips without PostgreSQL; fails under CI)."""
    from tests import pg_cluster

    return pg_cluster.fresh_database()


@pytest.fixture(scope="module")
def daemons(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Daemon, Daemon]]:
    """Daemon A and daemon B: two homes, one database."""
    root = tmp_path_factory.mktemp("pg-fleet")
    a, b = Daemon(root / "a", database_url), Daemon(root / "b", database_url)
    try:
        a.spawn(), b.spawn()  # both start at once (the model loads in the background, not awaited)
        a.wait(), b.wait()
        yield a, b
    finally:
        a.stop()
        b.stop()


# -- the agents ----------------------------------------------------------------------------------


@dataclass
class Tally:
    failures: list[str] = field(default_factory=list)
    conflicts: int = 0

    def check(self, what: str, result: Any) -> Any:
        """The structured answer; a tool error is recorded as a failure (conflicts are counted apart)."""
        if result.is_error:
            text = text_of(result)
            if "conflict" in text.lower():
                self.conflicts += 1
            else:
                self.failures.append(f"{what}: {text[:200]}")
            return None
        return result.structured_content


def keyed(key: str) -> RequestParamsMeta:
    """The ``_meta`` that carries an idempotency key."""
    return cast(RequestParamsMeta, {META_KEY: key})


def text_of(result: CallToolResult) -> str:
    first = result.content[0] if result.content else None
    return first.text if isinstance(first, TextContent) else ""


async def _call(client: Client, tally: Tally, tool: str, arguments: dict[str, Any], key: str | None = None) -> Any:
    try:
        result = await client.call_tool(tool, arguments, meta=keyed(key) if key else None)
    except Exception as exc:  # a transport failure is a failed call here: both daemons are alive
        tally.failures.append(f"{tool}: {type(exc).__name__}: {exc}")
        return None
    return tally.check(tool, result)


async def _start(client: Client, objective: str) -> str:
    started = await client.call_tool("plan", {"mode": "start", "objective": objective, "steps": ["a", "b"]})
    assert not started.is_error, started.content
    assert started.structured_content is not None
    return str(started.structured_content["task_id"])


async def _update(client: Client, tally: Tally, task_id: str, text: str, version: int) -> int | None:
    """A plan update with optimistic concurrency: after a conflict, retry at the version the conflict
    answer names (as an agent would). Returns the acknowledged version (None if it never got through)."""
    for _ in range(MAX_TRIES):
        answer = await client.call_tool("plan", {"mode": "update", "task_id": task_id, "decisions": [text],
                                                 "based_on_version": version})
        got = tally.check("plan update", answer)
        if got is not None:
            return int(got["version"])
        current = re.search(r"current_version=(\d+)", text_of(answer))
        if current is None:
            return None  # a failure, recorded by check()
        version = int(current.group(1))
    tally.failures.append(f"plan update {text}: still conflicting after {MAX_TRIES} tries")
    return None


# -- the tests -----------------------------------------------------------------------------------


async def test_agents_on_two_daemons_lose_and_duplicate_nothing(daemons: tuple[Daemon, Daemon]) -> None:
    a, b = daemons
    tally = Tally()
    acknowledged_updates: dict[str, tuple[str, int]] = {}  # decision text -> (task, version answered)
    acknowledged_observes: dict[str, str] = {}  # marker -> task
    # every client lives only while it is used: one left idle past the server's keep-alive (5 s, easily
    # reached on a loaded machine) can meet a closed connection (httpx ReadError) on its next request or close
    async with Client(a.url) as setup_a, Client(b.url) as setup_b:
        shared = [await _start(setup_a, "shared task one"), await _start(setup_b, "shared task two")]
        # refs stored through one daemon, recalled through the other (content-addressed, verified on read)
        stored = {}
        for origin, client in (("a", setup_a), ("b", setup_b)):
            text = f"{origin}\n{REF_TEXT}"
            out = await client.call_tool("observe", {"task_id": shared[0], "kind": "result", "tool": "cat",
                                                     "args": {"k": f"ref-{origin}"}, "result": text})
            assert not out.is_error and out.structured_content and out.structured_content["ref"], out.content
            stored[origin] = (str(out.structured_content["ref"]), text)
            acknowledged_observes[f"ref-{origin}"] = shared[0]

    async def agent(url: str, name: str, other: str) -> None:
        async with Client(url) as client:
            own = await _start(client, f"agent {name} fixes a bug")
            ref, text = stored[other]
            head = "".join(text.splitlines(keepends=True)[:3])
            versions = dict.fromkeys(shared, 1)  # this agent's last known version of each shared task
            for r in range(ROUNDS):
                marker = f"obs-{name}-{r}"
                body = f"{marker}\n" + "".join(f"{marker} line {j}: ok\n" for j in range(20 + 40 * (r % 3)))
                if await _call(client, tally, "observe", {"task_id": own, "kind": "result", "tool": "pytest",
                                                          "args": {"k": marker}, "result": body}) is not None:
                    acknowledged_observes[marker] = own
                got = await _call(client, tally, "recall", {"ref": ref, "op": "head", "lines": 3})
                if got is not None and got["text"].rstrip("\n") != head.rstrip("\n"):
                    tally.failures.append(f"recall of {ref} through the other daemon: {got['text'][:80]!r}")
                task = shared[r % 2]
                decision = f"dec-{name}-{r}"
                acked = await _update(client, tally, task, decision, versions[task])
                if acked is not None:
                    acknowledged_updates[decision] = (task, acked)
                    versions[task] = acked

    async with anyio.create_task_group() as tg:
        for i in range(AGENTS_PER_DAEMON):
            tg.start_soon(agent, a.url, f"a{i}", "b")
            tg.start_soon(agent, b.url, f"b{i}", "a")

    async with Client(a.url) as check_a, Client(b.url) as check_b:
        # a stale version through the other daemon: the conflict answer, nothing applied
        head = len(journal(a.database_url, shared[0]))
        stale = await check_b.call_tool("plan", {"mode": "update", "task_id": shared[0], "decisions": ["stale"],
                                                 "based_on_version": head - 1})
        assert stale.is_error and "conflict" in text_of(stale).lower()
        assert len(journal(a.database_url, shared[0])) == head
        # both daemons see the same state
        views = [await c.call_tool("plan", {"mode": "status", "task_id": t}) for c in (check_a, check_b) for t in shared]
    assert tally.failures == []
    assert len(acknowledged_updates) == 2 * AGENTS_PER_DAEMON * ROUNDS

    rows = {t: journal(a.database_url, t) for t in set(acknowledged_observes.values()) | set(shared)}
    for task, events in rows.items():
        assert [e.seq for e in events] == list(range(1, len(events) + 1)), f"{task}: versions not gap-free"
    journaled = {t: decisions(r) for t, r in rows.items()}
    for text, (task, version) in acknowledged_updates.items():
        assert journaled[task].get(text) == [version], f"{text}: acknowledged at v{version}, journaled {journaled[task].get(text)}"
    every_decision = Counter(text for d in journaled.values() for text, seqs in d.items() for _ in seqs)
    assert [t for t, n in every_decision.items() if n > 1] == []
    markers = sum((observe_markers(r) for r in rows.values()), Counter())
    assert {m: markers[m] for m in acknowledged_observes} == dict.fromkeys(acknowledged_observes, 1)
    assert [m for m, n in markers.items() if n > 1] == []
    for view in views:
        assert not view.is_error and view.structured_content is not None
    versions = [int(v.structured_content["version"]) for v in views]  # type: ignore[index]
    assert versions[:2] == versions[2:] == [len(rows[t]) for t in shared]


class Notices:
    """The server's notifications, in arrival order."""

    def __init__(self) -> None:
        self.updated: list[str] = []
        self.changed = anyio.Event()

    async def __call__(self, message: Any) -> None:
        message = getattr(message, "root", message)
        if isinstance(message, ResourceUpdatedNotification):
            self.updated.append(str(message.params.uri))
        self.changed.set()
        self.changed = anyio.Event()


async def test_a_subscription_on_one_daemon_hears_an_update_through_the_other(
        daemons: tuple[Daemon, Daemon]) -> None:
    a, b = daemons
    notices = Notices()
    async with Client(a.url, mode="legacy", message_handler=notices) as watcher, Client(b.url) as agent:
        watched, other = await _start(agent, "watched through A"), await _start(agent, "not watched")
        uri = f"bosun://task/{watched}/manifest"
        await watcher.subscribe_resource(uri)
        for task in (other, watched):  # the unwatched task is written first: its notice must not arrive
            result = await agent.call_tool("plan", {"mode": "update", "task_id": task, "decisions": ["canary first"]})
            assert not result.is_error and result.structured_content is not None, result.content
        version = int(result.structured_content["version"])
        with anyio.fail_after(HANG_BOUND_S):
            while uri not in notices.updated:
                await notices.changed.wait()
        manifest = await watcher.read_resource(uri)
    assert notices.updated == [uri]
    text = manifest.contents[0].text  # type: ignore[union-attr]
    assert f"task={watched} v={version} " in text  # daemon A serves the version written through B


def _decisions_of(url: str, tasks: list[str]) -> tuple[Counter[str], list[str]]:
    """Every journaled decision text across ``tasks``, and the tasks whose seqs are not 1..n."""
    texts: Counter[str] = Counter()
    gaps = []
    for task in tasks:
        rows = journal(url, task)
        texts.update(str(r.payload.get("text")) for r in rows if r.kind == "decision_added")
        if [r.seq for r in rows] != list(range(1, len(rows) + 1)):
            gaps.append(task)
    return texts, gaps


# Both daemons write one task without a version: each write catches up and retries until it lands.
async def test_writes_without_a_version_from_both_daemons_to_one_task_all_land(
        daemons: tuple[Daemon, Daemon]) -> None:
    a, b = daemons
    tally = Tally()
    async with Client(a.url) as setup:
        task = await _start(setup, "one task, two daemons")

    async def agent(url: str, name: str) -> None:
        async with Client(url) as client:
            for i in range(UNVERSIONED_WRITES):
                await _call(client, tally, "observe", {"task_id": task, "kind": "decision", "text": f"{name}-{i}"})

    async with anyio.create_task_group() as tg:
        for i in range(AGENTS_PER_DAEMON):
            tg.start_soon(agent, a.url, f"a{i}")
            tg.start_soon(agent, b.url, f"b{i}")
    texts, gaps = _decisions_of(a.database_url, [task])
    assert gaps == []
    assert [t for t, n in texts.items() if n > 1] == []
    assert tally.failures == [] and tally.conflicts == 0  # no version was given: nothing may conflict
    assert len(texts) == 2 * AGENTS_PER_DAEMON * UNVERSIONED_WRITES


async def test_kill_9_of_one_daemon_mid_burst_loses_nothing_and_keys_hold_across_daemons(
        daemons: tuple[Daemon, Daemon]) -> None:
    victim, survivor = daemons
    calls: dict[str, dict[str, Any]] = {}  # idempotency key -> arguments
    answers: dict[str, Any] = {}  # key -> the first answer (structured)
    unanswered: list[str] = []  # keys whose call died with the victim (committed or not: unknown)
    tasks: list[str] = []
    survivor_tally = Tally()
    killed = anyio.Event()
    answered_by_victim = 0

    async def agent(url: str, name: str, on_victim: bool) -> None:
        """Its own task (started through its daemon), then a burst of keyed observes."""
        nonlocal answered_by_victim
        keys = [f"kill-{name}-{i}" for i in range(KILL_BURST)]
        try:
            async with Client(url) as client:
                task = await _start(client, f"agent {name} survives a kill -9")
                tasks.append(task)
                for i, key in enumerate(keys):
                    calls[key] = {"task_id": task, "kind": "decision", "text": f"decision {name}-{i}"}
                for key in keys:
                    if on_victim and killed.is_set():
                        break  # the rest is sent after the restart below
                    result = await client.call_tool("observe", calls[key], meta=keyed(key))
                    got = (survivor_tally if not on_victim else Tally()).check(key, result)
                    if got is None:
                        continue
                    answers[key] = got
                    if on_victim:
                        answered_by_victim += 1
                        if answered_by_victim == KILL_AFTER:
                            victim.kill9()
                            killed.set()
        except Exception as exc:  # the SDK client fails as a whole when its server dies
            if not (on_victim and killed.is_set()):
                survivor_tally.failures.append(f"{name}: {type(exc).__name__}: {exc}")
        if on_victim:
            unanswered.extend(k for k in keys if k in calls and k not in answers)  # committed or not: unknown

    with anyio.fail_after(HANG_BOUND_S * 2):
        async with anyio.create_task_group() as tg:
            for i in range(KILL_AGENTS_PER_DAEMON):
                tg.start_soon(agent, victim.url, f"v{i}", True)
                tg.start_soon(agent, survivor.url, f"s{i}", False)
    assert killed.is_set()
    assert survivor_tally.failures == []  # the survivor kept serving through the kill
    assert len(calls) == 2 * KILL_AGENTS_PER_DAEMON * KILL_BURST
    texts, gaps = _decisions_of(survivor.database_url, tasks)
    assert gaps == []
    assert [t for t, n in texts.items() if n > 1] == []
    assert [k for k in answers if texts[calls[k]["text"]] != 1] == []  # every call that returned is durable

    victim.start()  # same home, same database: it resumes
    async with Client(victim.url) as again_victim:
        for key in unanswered:  # re-sent with the same key: applied once in total, whatever the kill left
            result = await again_victim.call_tool("observe", calls[key], meta=keyed(key))
            assert not result.is_error, result.content
            answers[key] = result.structured_content
    async with Client(victim.url) as again_victim, Client(survivor.url) as again_survivor:
        for key, first in list(answers.items()):  # every key, re-sent to the other daemon: the first answer
            target = again_survivor if key.startswith("kill-v") else again_victim
            repeat = await target.call_tool("observe", calls[key], meta=keyed(key))
            assert not repeat.is_error, repeat.content
            assert repeat.structured_content == first, key
        # the restarted daemon serves what the survivor wrote while it was down
        views = {t: await again_victim.call_tool("plan", {"mode": "status", "task_id": t}) for t in tasks}
    texts, gaps = _decisions_of(survivor.database_url, tasks)
    assert gaps == []
    assert texts == Counter(args["text"] for args in calls.values())  # each call exactly once
    for task, view in views.items():
        assert view.structured_content is not None
        assert int(view.structured_content["version"]) == len(journal(survivor.database_url, task))
