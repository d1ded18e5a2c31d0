"""A daemon judges a plan update's version on the journal, not on a cache another daemon made stale.

Runs on the throwaway cluster of tests/pg_cluster.py (skips without one, fails under CI).
"""

from __future__ import annotations

from pathlib import Path

from bosun.core.embedding import HashEmbedder
from bosun.server.config import Config
from bosun.server.engine import Engine
from tests.pg_cluster import pg_url  # noqa: F401  (the fixture)


async def test_an_update_based_on_the_other_daemons_write_is_not_a_conflict(tmp_path: Path, pg_url: str) -> None:  # noqa: F811
    engines = [Engine(Config(home=tmp_path / n, database_url=pg_url, policy_poll_s=0),
                      embedder_factory=lambda _c: HashEmbedder(64)) for n in ("a", "b")]
    a, b = engines
    # a's cache goes stale the moment b writes; the notice from b may not have arrived when a is asked
    await a.open(watch_policies=False)
    await b.open(watch_policies=False)
    try:
        st = await a.tasks.start("one task, two daemons")
        await a.tasks.get(st.task_id)  # cached in a at version 1
        await b.tasks.append(st.task_id, "decision_added", {"text": "through b"})  # version 2
        after = await a.tasks.append_many(st.task_id, [("decision_added", {"text": "through a"})],
                                          expected_version=2)
        assert after.version == 3 and after.decisions == ["through b", "through a"]
    finally:
        for engine in engines:
            await engine.close()
