"""Forward-only schema migrations, applied in list order and recorded by name.

Add a migration by appending a new ``(name, sql)`` entry at the end; never
edit or reorder one that has shipped. The schema version is the number of
migrations applied.
"""

from __future__ import annotations

MIGRATIONS: list[tuple[str, str]] = [
    (
        "0001_refs",
        """
        CREATE TABLE refs (
            sha256     TEXT PRIMARY KEY,
            media_type TEXT NOT NULL,
            size       INTEGER NOT NULL,
            data       BLOB NOT NULL,
            created_at REAL NOT NULL
        );
        """,
    ),
    (
        "0002_embeddings",
        """
        CREATE TABLE embeddings (
            model_id TEXT NOT NULL,
            sha256   TEXT NOT NULL,
            dim      INTEGER NOT NULL,
            vec      BLOB NOT NULL,
            PRIMARY KEY (model_id, sha256)
        );
        """,
    ),
    (
        "tasks_0001",
        """
        CREATE TABLE tasks (
            task_id    TEXT PRIMARY KEY,
            objective  TEXT NOT NULL,
            status     TEXT NOT NULL,
            version    INTEGER NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE TABLE task_events (
            task_id      TEXT NOT NULL,
            seq          INTEGER NOT NULL,
            kind         TEXT NOT NULL,
            payload_json TEXT NOT NULL,
            agent        TEXT,
            created_at   REAL NOT NULL,
            PRIMARY KEY (task_id, seq)
        ) WITHOUT ROWID;
        """,
    ),
    (
        # a state-changing call has exactly one effect. The key is journaled on the
        # event it produced (task_events.idem_key); ``idempotency`` maps it to that event and keeps
        # the first answer, so a re-sent call is answered without being applied again.
        "idempotency_0001",
        """
        ALTER TABLE task_events ADD COLUMN idem_key TEXT;
        CREATE TABLE idempotency (
            key         TEXT PRIMARY KEY,
            task_id     TEXT NOT NULL,
            seq         INTEGER NOT NULL,
            created_at  REAL NOT NULL,
            fingerprint TEXT,
            answer      TEXT
        );
        """,
    ),
    (
        # ``refs.data`` becomes the last column. SQLite builds a row's record whole, and a
        # ``zeroblob(n)`` is kept as a count of zeros only when no column after it holds data: with
        # ``created_at`` after it, a 100 MB put from a file (``server/blob_file.py``: zero blob, then
        # incremental writes) first allocated 100 MB of zeros (+200 MB peak, measured). The table is
        # rebuilt once (every blob copied, one row in memory at a time); reads name their columns.
        "refs_0002_data_last",
        """
        CREATE TABLE refs_data_last (
            sha256     TEXT PRIMARY KEY,
            media_type TEXT NOT NULL,
            size       INTEGER NOT NULL,
            created_at REAL NOT NULL,
            data       BLOB NOT NULL
        );
        INSERT INTO refs_data_last (sha256, media_type, size, created_at, data)
            SELECT sha256, media_type, size, created_at, data FROM refs ORDER BY rowid;
        DROP TABLE refs;
        ALTER TABLE refs_data_last RENAME TO refs;
        """,
    ),
]

SCHEMA_VERSION = len(MIGRATIONS)
