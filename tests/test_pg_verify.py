"""`bosun verify` and `bosun health` on the shared PostgreSQL state (refs re-hashed, schema checked).

Runs on the throwaway cluster of tests/pg_cluster.py (skips without one, fails under CI).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from bosun.core.embedding import HashEmbedder
from bosun.server.commands.verify import verify_task
from bosun.server.config import Config
from bosun.server.engine import Engine
from tests.pg_cluster import pg_url, raw_execute  # noqa: F401  (the fixture)


async def test_verify_reads_back_every_ref_of_a_task_on_postgresql(tmp_path: Path, pg_url: str) -> None:  # noqa: F811
    engine = Engine(Config(home=tmp_path / "a", database_url=pg_url, policy_poll_s=0),
                    embedder_factory=lambda _c: HashEmbedder(64))
    await engine.open(watch_policies=False)
    try:
        st = await engine.tasks.start("verify on postgres")
        kept = await engine.refs.put(b"kept output\n" * 1000)
        gone = await engine.refs.put(b"an output that will be lost\n" * 10)
        for ref in (kept, gone):
            await engine.tasks.append(st.task_id, "decision_added", {"text": "offloaded", "ref": ref})
        code, out = await verify_task(tmp_path / "a" / "bosun.db", st.task_id, pg_url)
        assert code == 0 and out["lossless"] and out["items_verified"] == 2
        lost = hashlib.sha256(b"an output that will be lost\n" * 10).hexdigest()
        await raw_execute(engine, "DELETE FROM ref_chunks WHERE sha256 = ?", (lost,))
        await raw_execute(engine, "DELETE FROM refs WHERE sha256 = ?", (lost,))
        await raw_execute(engine, "UPDATE ref_chunks SET data = ? WHERE sha256 = ? AND n = 0",
                          (b"altered", hashlib.sha256(b"kept output\n" * 1000).hexdigest()))
        code, out = await verify_task(tmp_path / "a" / "bosun.db", st.task_id, pg_url)
        assert code == 1 and not out["lossless"] and out["missing"] == [gone]
        assert [v["ref"] for v in out["integrity_violations"]] == [kept]
        code, out = await verify_task(tmp_path / "a" / "bosun.db", "t_nope", pg_url)
        assert code == 2 and "t_nope" in out["error"]
        assert not (tmp_path / "a" / "bosun.db").exists()  # nothing was opened on SQLite
    finally:
        await engine.close()


def test_health_checks_the_postgresql_store(pg_url: str) -> None:  # noqa: F811
    from bosun.server.commands.health import check_postgres

    empty = check_postgres(pg_url)
    assert empty.state == "ok" and "no schema yet" in empty.detail
    unreachable = check_postgres("postgresql://nobody@127.0.0.1:1/none")
    assert unreachable.failed and "cannot reach" in unreachable.detail and "127.0.0.1" in unreachable.detail


async def test_health_reads_the_migrated_postgresql_schema(tmp_path: Path, pg_url: str) -> None:  # noqa: F811
    from bosun.server.commands.health import check_postgres
    from bosun.store.pg_schema import PG_SCHEMA_VERSION

    engine = Engine(Config(home=tmp_path / "h", database_url=pg_url, policy_poll_s=0),
                    embedder_factory=lambda _c: HashEmbedder(64))
    await engine.open(watch_policies=False)
    try:
        stats_store = engine.health()["store"]
        assert stats_store["backend"] == "postgresql"
    finally:
        await engine.close()
    check = check_postgres(pg_url)
    assert check.state == "ok" and f"schema v{PG_SCHEMA_VERSION}" in check.detail
