"""Runtime configuration, read from the environment and the CLI.

Every knob has a default that works on a fresh machine; the README lists them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_PORT = 8790
DEFAULT_HOST = "127.0.0.1"


def _env_path(name: str, default: Path) -> Path:
    value = os.environ.get(name, "").strip()
    return Path(value).expanduser() if value else default


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return int(value)
    except ValueError as exc:
        raise SystemExit(f"{name}={value!r} is not an integer") from exc


@dataclass
class Config:
    """Everything the Engine needs to start."""

    home: Path = field(default_factory=lambda: _env_path("BOSUN_HOME", Path("~/.bosun").expanduser()))
    model_name: str = field(default_factory=lambda: os.environ.get("BOSUN_MODEL", "").strip())
    model_dir: Path | None = field(
        default_factory=lambda: Path(os.environ["BOSUN_MODEL_DIR"]).expanduser()
        if os.environ.get("BOSUN_MODEL_DIR", "").strip()
        else None
    )
    model_threads: int = field(default_factory=lambda: _env_int("BOSUN_MODEL_THREADS", 1))
    model_timeout_s: float = field(default_factory=lambda: float(_env_int("BOSUN_MODEL_TIMEOUT_S", 120)))
    host: str = field(default_factory=lambda: os.environ.get("BOSUN_HOST", DEFAULT_HOST))
    port: int = field(default_factory=lambda: _env_int("BOSUN_PORT", DEFAULT_PORT))
    token: str | None = field(default_factory=lambda: os.environ.get("BOSUN_TOKEN") or None)
    tools: list[str] = field(
        default_factory=lambda: [t.strip() for t in os.environ.get("BOSUN_TOOLS", "").split(",") if t.strip()]
    )
    policies: list[Path] = field(
        default_factory=lambda: [
            Path(p).expanduser() for p in os.environ.get("BOSUN_POLICIES", "").split(":") if p.strip()
        ]
    )

    # offloading (observe / recall / checkpoint)
    roots: list[Path] = field(  # files observe(kind="file") may read; empty = none
        default_factory=lambda: [
            Path(p).expanduser() for p in os.environ.get("BOSUN_ROOTS", "").split(":") if p.strip()
        ]
    )
    max_payload_bytes: int = field(default_factory=lambda: _env_int("BOSUN_MAX_PAYLOAD_BYTES", 16 * 1024 * 1024))
    max_file_bytes: int = field(default_factory=lambda: _env_int("BOSUN_MAX_FILE_BYTES", 8 * 1024 * 1024))
    prune_mode: str = field(default_factory=lambda: os.environ.get("BOSUN_PRUNE_MODE", "cache_ttl").strip())
    redact_disable: list[str] = field(
        default_factory=lambda: [r for r in os.environ.get("BOSUN_REDACT_DISABLE", "").split(",") if r.strip()]
    )
    redact_extra: list[str] = field(  # extra secret shapes, "name=regex" separated by newlines
        default_factory=lambda: [r for r in os.environ.get("BOSUN_REDACT_EXTRA", "").split("\n") if r.strip()]
    )
    prices: str = field(  # USD per million input tokens: "default=3.0,gpt-4o=2.5"
        default_factory=lambda: os.environ.get("BOSUN_PRICES", "").strip()
    )
    price_model: str = field(default_factory=lambda: os.environ.get("BOSUN_PRICE_MODEL", "default").strip())

    @property
    def db_path(self) -> Path:
        return self.home / "bosun.db"
