"""``bosun health [--json]``: is each part of bosun working? The exit code says which one is not.

Four checks, each a bit of the exit code so a script can tell them apart (0: all healthy):

- ``1`` daemon: a daemon is recorded for the home and answers ``/healthz``;
- ``2`` model: the daemon's model is ready (not failed); with no daemon, the model loads offline
  here (``bosun provision --check``);
- ``4`` index: the daemon's policy index is serving (building counts as working: a first index
  from the surfaces serves meanwhile); with no daemon, the corpus scans without error;
- ``8`` store: the database opens read-only, passes SQLite's ``quick_check`` and its schema is not
  newer than this bosun (a missing database is fine: the first ``serve`` creates it).

A model or index still loading is ``starting``, a model the first ``serve`` will assemble or fetch
is ``pending``: neither fails the check.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

NAME = "health"
HELP = "check the daemon, model, policy index and store; the exit code's bits say which failed (1 2 4 8)"
BITS = {"daemon": 1, "model": 2, "index": 4, "store": 8}
EXAMPLE = "bosun health --json"


@dataclass
class Check:
    part: str
    state: str  # ok | starting (loading) | pending (set up on first serve) | failed
    detail: str

    @property
    def failed(self) -> bool:
        return self.state == "failed"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    parser.add_argument("--home", help="state directory (default $BOSUN_HOME or ~/.bosun)")


def check_store(db_path: Path) -> Check:
    from bosun.store.schema import SCHEMA_VERSION
    from bosun.store.sqlite_uri import readonly_uri

    if not db_path.exists():
        return Check("store", "ok", "no database yet (the first `bosun serve` creates it)")
    try:
        conn = sqlite3.connect(readonly_uri(db_path), uri=True, timeout=5)
        try:
            verdict = conn.execute("PRAGMA quick_check").fetchone()[0]
            applied = conn.execute("SELECT COUNT(*) FROM schema_migrations").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return Check("store", "failed", f"cannot read the database: {exc}")
    size = sum(p.stat().st_size for p in db_path.parent.glob(db_path.name + "*") if p.is_file())
    if verdict != "ok":
        return Check("store", "failed", f"SQLite quick_check: {verdict}")
    if applied > SCHEMA_VERSION:
        return Check("store", "failed", f"schema v{applied} is newer than this bosun (v{SCHEMA_VERSION}): upgrade bosun")
    return Check("store", "ok", f"schema v{applied}, {size / 1048576:.2f} MiB, quick_check ok")


def check_postgres(url: str) -> Check:
    """The shared PostgreSQL store: reachable, migrated, not newer than this bosun (read-only queries)."""
    from bosun.store.pg_db import redact_url
    from bosun.store.pg_schema import PG_SCHEMA_VERSION

    shown = redact_url(url)
    try:
        import psycopg
    except ImportError:
        return Check("store", "failed", "BOSUN_DATABASE_URL is set but the driver is missing: "
                                        "pip install 'bosun-mcp[postgres]'")
    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            row = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()
            if not row or not row[0]:
                return Check("store", "ok", f"{shown}: no schema yet (the first `bosun serve` creates it)")
            counted = conn.execute("SELECT COUNT(*) FROM schema_migrations").fetchone()
            size_row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    except psycopg.Error as exc:
        return Check("store", "failed", f"cannot reach {shown}: {str(exc).strip().splitlines()[0]}")
    applied = int(counted[0]) if counted else 0
    if applied > PG_SCHEMA_VERSION:
        return Check("store", "failed",
                     f"schema v{applied} is newer than this bosun (v{PG_SCHEMA_VERSION}): upgrade bosun")
    size = int(size_row[0]) if size_row else 0
    return Check("store", "ok", f"PostgreSQL {shown}: schema v{applied}, {size / 1048576:.2f} MiB")


def from_daemon(body: dict[str, Any], base: str) -> list[Check]:
    """The model and index checks as the daemon's /healthz reports them."""
    model = body.get("model") or {}
    state = model.get("state")
    if state == "ready":
        seconds = model.get("load_seconds")
        m = Check("model", "ok", f"{model.get('id')} ready" + (f" (loaded in {seconds:.2f} s)" if seconds else ""))
    elif state == "failed":
        m = Check("model", "failed", f"{model.get('error')}; run `bosun provision --check`")
    else:
        m = Check("model", "starting", f"loading ({state})")
    index = body.get("route_index") or {}
    istate = index.get("state")
    docs = index.get("documents")
    if istate == "ready":
        i = Check("index", "ok", f"{docs} documents, generation {index.get('generation')}")
    elif istate == "failed":
        i = Check("index", "failed", str(index.get("error")))
    else:
        i = Check("index", "starting", f"{istate}: {index.get('done', 0)}/{index.get('total', 0)} texts embedded")
    return [Check("daemon", "ok", f"{base} answers (bosun {body.get('version')}, up {body.get('uptime_s', 0):.0f} s)"), m, i]


def offline(config: Any) -> list[Check]:
    """No daemon: load the model here, and scan the corpus."""
    from bosun.server.model import default_model_dir
    from bosun.server.provision import provision
    from bosun.server.services.policies import CorpusError, demo_corpus_dir, scan_corpus

    if config.model_dir is not None:
        report = provision(config.model_name or None, config.model_dir, check=True)
    else:
        report = provision(config.model_name or None, default_model_dir(config.home), check=True)
    # FETCHABLE: the first `bosun serve` assembles (default model) or fetches it; not a failure yet
    state = {"PRESENT": "ok", "FETCHABLE": "pending"}.get(report.state, "failed")
    model = Check("model", state, f"{report.state}: {report.detail}")
    dirs = list(config.policies) or [demo_corpus_dir()]
    try:
        scan = scan_corpus(dirs)
        count = len(scan.policies)
        index = Check("index", "ok" if count else "failed",
                      f"corpus scans: {count} documents" + ("" if config.policies else " (the demo corpus)")
                      if count else "the corpus has no routable document")
    except CorpusError as exc:
        index = Check("index", "failed", str(exc))
    return [model, index]


def checks(config: Any) -> list[Check]:
    from bosun.server.commands._daemon import DaemonUnreachable, daemon_base, get_json

    out: list[Check]
    try:
        base, token = daemon_base(config.home)
        status, body = get_json(base, "/healthz", token)
        if status in (200, 503) and "model" in body:
            out = from_daemon(body, base)
        else:
            raise DaemonUnreachable(f"{base}/healthz answered {status} {body.get('error') or ''}".strip())
    except DaemonUnreachable as exc:
        out = [Check("daemon", "failed", str(exc)), *offline(config)]
    store = check_postgres(config.database_url) if config.database_url else check_store(config.db_path)
    return [*out, store]


def exit_code(results: list[Check]) -> int:
    return sum(BITS[c.part] for c in results if c.failed)


def run(args: argparse.Namespace) -> int:
    from bosun.server.commands import config_of

    results = checks(config_of(args))
    code = exit_code(results)
    if args.json:
        print(json.dumps({"exit_code": code, "checks": [asdict(c) for c in results]}, indent=2))
    else:
        for c in results:
            print(f"{c.part:<7} {c.state:<9} {c.detail}")
        if code:
            failed = ", ".join(f"{c.part} ({BITS[c.part]})" for c in results if c.failed)
            print(f"\nexit {code}: {failed} failed")
    return code
