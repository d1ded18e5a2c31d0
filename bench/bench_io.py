"""Where the evaluation data lives and how to read it: shared by every bench script.

The data is the read-only ``shared/`` folder beside the checkout (``$BOSUN_SHARED`` overrides).
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def shared_dir() -> Path:
    env = os.environ.get("BOSUN_SHARED", "").strip()
    return Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared"


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a JSON Lines file, gzipped or not; blank lines skipped."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:  # type: ignore[operator]
        for line in fh:
            if line.strip():
                yield json.loads(line)
