"""The read-only SQLite URI of a database path, percent-encoded.

SQLite parses a ``file:`` URI: a home whose path holds ``?``, ``#`` or ``%`` would otherwise be cut
at that character and open (or create) another file than the store. Standard library only, so the
lean commands (``bosun health``) can use it without loading the store.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote


def readonly_uri(path: Path | str) -> str:
    """``file:<percent-encoded path>?mode=ro`` for ``sqlite3.connect(..., uri=True)``."""
    return f"file:{quote(str(path), safe='/')}?mode=ro"
