"""Forward-only migrations of the PostgreSQL schema (the twin of ``store/schema.py``).

Same rule as SQLite: append a new ``(name, sql)`` at the end, never edit one that shipped. Each
runs in one transaction (PostgreSQL's DDL is transactional), recorded in ``schema_migrations``.

What the database enforces itself, whoever writes (docs/storage.md):

- ``task_events`` is append-only: UPDATE, DELETE and TRUNCATE raise (SQLSTATE ``BS002``).
- it is gap-free: an event whose seq is not the task's last seq + 1 raises ``BS001``; the check
  holds a per-task advisory lock to the end of the transaction, so two daemons appending to one
  task are serialised and the second sees the first's row (a stale version is a conflict, never
  a lost update).
- the ``tasks`` index row and the idempotency key are written by the same trigger, in the same
  statement as the events; a second use of a key is a primary-key violation on ``idempotency``.
- every committed append notifies channel ``bosun_tasks`` with ``<origin>\\t<task_id>`` (the
  writer's ``application_name``), so every daemon's listener hears every other daemon's writes.
- blobs live in ``ref_chunks`` (1 MiB rows) under their ``refs`` row, written in one transaction:
  a ref is visible exactly when all its bytes are. Keys sort bytewise (``COLLATE "C"``) so a hex
  prefix is a range scan.
"""

from __future__ import annotations

MIGRATION_LOCK = 0x626F73756E  # pg_advisory_lock key for migrations ("bosun")
NOTIFY_CHANNEL = "bosun_tasks"

PG_MIGRATIONS: list[tuple[str, str]] = [
    (
        "pg_0001_core",
        """
        CREATE TABLE refs (
            sha256     TEXT COLLATE "C" PRIMARY KEY,
            media_type TEXT NOT NULL,
            size       BIGINT NOT NULL,
            chunks     INTEGER NOT NULL,
            created_at DOUBLE PRECISION NOT NULL
        );
        CREATE TABLE ref_chunks (
            sha256 TEXT COLLATE "C" NOT NULL REFERENCES refs (sha256) DEFERRABLE INITIALLY DEFERRED,
            n      INTEGER NOT NULL,
            data   BYTEA NOT NULL,
            PRIMARY KEY (sha256, n)
        );
        CREATE TABLE embeddings (
            model_id TEXT NOT NULL,
            sha256   TEXT NOT NULL,
            dim      INTEGER NOT NULL,
            vec      BYTEA NOT NULL,
            PRIMARY KEY (model_id, sha256)
        );
        CREATE TABLE tasks (
            task_id    TEXT PRIMARY KEY,
            objective  TEXT NOT NULL,
            status     TEXT NOT NULL,
            version    BIGINT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX tasks_updated ON tasks (updated_at DESC);
        CREATE TABLE task_events (
            task_id      TEXT NOT NULL,
            seq          BIGINT NOT NULL,
            kind         TEXT NOT NULL,
            payload_json TEXT NOT NULL,
            agent        TEXT,
            created_at   DOUBLE PRECISION NOT NULL,
            idem_key     TEXT,
            PRIMARY KEY (task_id, seq)
        );
        CREATE TABLE idempotency (
            key         TEXT PRIMARY KEY,
            task_id     TEXT NOT NULL,
            seq         BIGINT NOT NULL,
            created_at  DOUBLE PRECISION NOT NULL,
            fingerprint TEXT,
            answer      TEXT
        );
        CREATE INDEX idempotency_created ON idempotency (created_at);

        CREATE FUNCTION bosun_task_events_gap_free() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            last BIGINT;
        BEGIN
            PERFORM pg_advisory_xact_lock(hashtextextended('bosun_task:' || NEW.task_id, 0));
            SELECT COALESCE(MAX(seq), 0) INTO last FROM task_events WHERE task_id = NEW.task_id;
            IF NEW.seq <> last + 1 THEN
                RAISE EXCEPTION 'task_events: stale or out-of-order seq % (last %)', NEW.seq, last
                    USING ERRCODE = 'BS001';
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER task_events_gap_free BEFORE INSERT ON task_events
            FOR EACH ROW EXECUTE FUNCTION bosun_task_events_gap_free();

        CREATE FUNCTION bosun_task_events_applied() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.kind = 'task_started' THEN
                INSERT INTO tasks (task_id, objective, status, version, created_at, updated_at)
                VALUES (NEW.task_id, COALESCE(NEW.payload_json::jsonb ->> 'objective', ''), 'open',
                        NEW.seq, NEW.created_at, NEW.created_at);
            ELSE
                UPDATE tasks SET version = NEW.seq, updated_at = NEW.created_at,
                    status = CASE WHEN NEW.kind = 'task_closed'
                                  THEN COALESCE(NEW.payload_json::jsonb ->> 'status', 'done')
                                  ELSE status END
                WHERE task_id = NEW.task_id;
            END IF;
            IF NEW.idem_key IS NOT NULL THEN
                INSERT INTO idempotency (key, task_id, seq, created_at)
                VALUES (NEW.idem_key, NEW.task_id, NEW.seq, NEW.created_at);
            END IF;
            PERFORM pg_notify('bosun_tasks', current_setting('application_name') || E'\\t' || NEW.task_id);
            RETURN NULL;
        END $$;
        CREATE TRIGGER task_events_applied AFTER INSERT ON task_events
            FOR EACH ROW EXECUTE FUNCTION bosun_task_events_applied();

        CREATE FUNCTION bosun_task_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'task_events is append-only (% refused)', TG_OP USING ERRCODE = 'BS002';
        END $$;
        CREATE TRIGGER task_events_no_update BEFORE UPDATE OR DELETE ON task_events
            FOR EACH ROW EXECUTE FUNCTION bosun_task_events_append_only();
        CREATE TRIGGER task_events_no_truncate BEFORE TRUNCATE ON task_events
            FOR EACH STATEMENT EXECUTE FUNCTION bosun_task_events_append_only();
        """,
    ),
    (
        # NOTIFY payloads stop at 8000 bytes and a task id has no length limit: a notice that would not fit
        # names no task ("<origin>\t"), which a listener takes as "some task changed" (store/pg_listen.py),
        # instead of failing the append
        "pg_0002_notify_fits",
        """
        CREATE OR REPLACE FUNCTION bosun_task_events_applied() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            notice TEXT;
        BEGIN
            IF NEW.kind = 'task_started' THEN
                INSERT INTO tasks (task_id, objective, status, version, created_at, updated_at)
                VALUES (NEW.task_id, COALESCE(NEW.payload_json::jsonb ->> 'objective', ''), 'open',
                        NEW.seq, NEW.created_at, NEW.created_at);
            ELSE
                UPDATE tasks SET version = NEW.seq, updated_at = NEW.created_at,
                    status = CASE WHEN NEW.kind = 'task_closed'
                                  THEN COALESCE(NEW.payload_json::jsonb ->> 'status', 'done')
                                  ELSE status END
                WHERE task_id = NEW.task_id;
            END IF;
            IF NEW.idem_key IS NOT NULL THEN
                INSERT INTO idempotency (key, task_id, seq, created_at)
                VALUES (NEW.idem_key, NEW.task_id, NEW.seq, NEW.created_at);
            END IF;
            notice := current_setting('application_name') || E'\t' || NEW.task_id;
            IF octet_length(notice) > 7900 THEN
                notice := current_setting('application_name') || E'\t';
            END IF;
            PERFORM pg_notify('bosun_tasks', notice);
            RETURN NULL;
        END $$;
        """,
    ),
    (
        # every daemon sharing the database says it is alive every few seconds (store/fleet.py): the
        # dashboard and `bosun stats` of any of them then show the fleet, not one process
        "pg_0003_fleet",
        """
        CREATE TABLE bosun_daemons (
            origin     TEXT PRIMARY KEY,
            host       TEXT NOT NULL,
            pid        INTEGER NOT NULL,
            worker     INTEGER,
            version    TEXT NOT NULL,
            started_at DOUBLE PRECISION NOT NULL,
            seen_at    DOUBLE PRECISION NOT NULL,
            calls      BIGINT NOT NULL DEFAULT 0,
            errors     BIGINT NOT NULL DEFAULT 0,
            sessions   INTEGER NOT NULL DEFAULT 0,
            rss_kb     BIGINT NOT NULL DEFAULT 0
        );
        """,
    ),
]

PG_SCHEMA_VERSION = len(PG_MIGRATIONS)
