"""Persistence: content-addressed blobs, tasks and journals, caches (SQLite via aiosqlite)."""
