"""``bosun verify --task ID``: proof that nothing a task offloaded was lost or altered.

Every content address the task's journal points at (results, failures, file
reads, head/contract texts, checkpoints) is read back and re-hashed. Prints
``{"lossless", "items_externalized", "items_verified", "items_missing",
"integrity_violations"}`` and exits 1 on any missing or altered item (2 when the
task or the database does not exist). The SQLite database is opened read-only, so it
runs beside a live daemon (WAL lets readers in while it writes); with ``BOSUN_DATABASE_URL``
the shared PostgreSQL state is verified instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

NAME = "verify"
HELP = "prove a task's offloaded payloads are all present and intact (non-loss audit)"
EXAMPLE = "bosun verify --task t_3f9a1c2b7d4e"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", required=True, help="the task id (task= of the manifest)")
    parser.add_argument("--home", help="state directory (default $BOSUN_HOME or ~/.bosun)")


def task_refs(events: list[Any]) -> list[str]:
    """Every content address a journal points at, in first-seen order."""
    seen: dict[str, None] = {}
    for ev in events:
        for key in ("ref", "stored_ref"):
            value = ev.payload.get(key)
            if isinstance(value, str) and value.startswith("mem://sha256:"):
                seen.setdefault(value, None)
    return list(seen)


async def verify_refs(refs: Any, items: list[str]) -> dict[str, Any]:
    """Read back and re-hash each ref through the RefStore protocol."""
    from bosun.core.errors import IntegrityError, NotFound
    from bosun.server.commands.progress import Progress

    verified = 0
    missing: list[str] = []
    violations: list[dict[str, str]] = []
    with Progress("verify: re-hashing refs", total=len(items)) as bar:  # stderr, on a terminal only
        for ref in items:
            try:
                await refs.get(ref)
                verified += 1
            except NotFound:
                missing.append(ref)
            except IntegrityError as exc:
                violations.append({"ref": ref, "problem": str(exc)})
            bar.advance()
    return {
        "lossless": not missing and not violations,
        "items_externalized": len(items),
        "items_verified": verified,
        "items_missing": len(missing),
        "integrity_violations": violations,
        "missing": missing,
    }


async def verify_task(db_path: Path, task_id: str, database_url: str | None = None) -> tuple[int, dict[str, Any]]:
    """Verify on SQLite (read-only, beside a live daemon) or, with ``database_url``, on PostgreSQL."""
    if database_url:
        return await _verify_on(database_url, db_path, task_id)
    import aiosqlite

    from bosun.store.refs import SQLiteRefStore
    from bosun.store.sqlite_uri import readonly_uri
    from bosun.store.tasks import SQLiteTaskStore

    if not db_path.exists():
        return 2, {"error": f"no bosun database at {db_path}"}
    conn = await aiosqlite.connect(readonly_uri(db_path), uri=True)
    try:
        events = await SQLiteTaskStore(conn).events(task_id)
        if not events:
            return 2, {"error": f"task not found: {task_id}", "database": str(db_path)}
        report = await verify_refs(SQLiteRefStore(conn), task_refs(events))
    finally:
        await conn.close()
    return _answer(task_id, report)


async def _verify_on(database_url: str, db_path: Path, task_id: str) -> tuple[int, dict[str, Any]]:
    """The shared PostgreSQL state, through the same store factory the daemon uses."""
    from bosun.store.backend import open_stores

    stores = await open_stores(db_path, database_url)
    try:
        events = await stores.tasks.events(task_id)
        if not events:
            return 2, {"error": f"task not found: {task_id}", "database": stores.location}
        report = await verify_refs(stores.refs, task_refs(events))
    finally:
        await stores.aclose()
    return _answer(task_id, report)


def _answer(task_id: str, report: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """Exit 0 when lossless, else 1; ``missing`` listed only when something is."""
    out = {"task_id": task_id, **report}
    if not out["missing"]:
        out.pop("missing")
    return (0 if report["lossless"] else 1), out


def run(args: argparse.Namespace) -> int:
    import asyncio

    from bosun.server.commands import config_of

    config = config_of(args)
    code, out = asyncio.run(verify_task(config.home / "bosun.db", args.task, config.database_url))
    print(json.dumps(out, sort_keys=False))
    if code == 2:
        print(out.get("error", "verify failed"), file=sys.stderr)
    return code
