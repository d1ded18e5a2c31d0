"""Runtime configuration: every ``BOSUN_*`` variable parsed once, in one place.

``Config.from_env()`` reads the environment (or a given mapping) and reports a bad value as
a ``ConfigError`` naming the variable and what it accepts; ``Config()`` is the defaults
alone (tests, embedding). Every knob has a default that works on a fresh machine; the
docs/configuration.md lists them. CLI flags override the environment through ``from_env(**overrides)``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from bosun.core.errors import BosunError

DEFAULT_PORT = 8790
DEFAULT_HOST = "127.0.0.1"
DEFAULT_HOME = Path("~/.bosun")
PRUNE_MODES = ("cache_ttl", "conservative", "balanced", "aggressive")
_PREFETCH = ("auto", "on", "off", "1", "0")  # BOSUN_MODEL_PREFETCH
# BOSUN_POLICIES and BOSUN_ROOTS: ";" everywhere, and ":" too on POSIX (os.pathsep)
LIST_SEPARATOR = re.compile("[;" + re.escape(os.pathsep) + "]")
T = TypeVar("T")


class ConfigError(BosunError):
    """A ``BOSUN_*`` variable holds a value bosun cannot use."""

    def __init__(self, variable: str, value: str, accepts: str) -> None:
        self.variable = variable
        super().__init__(f"{variable}={value!r} is not valid: {accepts}")


def default_home() -> Path:
    return DEFAULT_HOME.expanduser()


@dataclass
class Config:
    """Everything the Engine and the transports need."""

    home: Path = field(default_factory=default_home)
    model_name: str = ""  # BOSUN_MODEL: a fastembed name ("" = the embedded model)
    model_dir: Path | None = None  # BOSUN_MODEL_DIR
    model_threads: int = 1  # BOSUN_MODEL_THREADS
    model_timeout_s: float = 120.0  # BOSUN_MODEL_TIMEOUT_S
    judge: str = "off"  # BOSUN_JUDGE: off (default) | on (the shipped cross-encoder) | a provisioned NAME or PATH
    host: str = DEFAULT_HOST  # BOSUN_HOST
    port: int = DEFAULT_PORT  # BOSUN_PORT
    token: str | None = None  # BOSUN_TOKEN
    tools: list[str] = field(default_factory=list)  # BOSUN_TOOLS
    policies: list[Path] = field(default_factory=list)  # BOSUN_POLICIES
    # offloading (observe / recall / checkpoint)
    roots: list[Path] = field(default_factory=list)  # BOSUN_ROOTS: files observe(kind="file") may read
    max_payload_bytes: int = 16 * 1024 * 1024  # BOSUN_MAX_PAYLOAD_BYTES
    max_file_bytes: int = 8 * 1024 * 1024  # BOSUN_MAX_FILE_BYTES
    prune_mode: str = "cache_ttl"  # BOSUN_PRUNE_MODE
    redact_disable: list[str] = field(default_factory=list)  # BOSUN_REDACT_DISABLE
    redact_extra: list[str] = field(default_factory=list)  # BOSUN_REDACT_EXTRA: "name=regex" lines
    prices: str = ""  # BOSUN_PRICES: USD per million input tokens, "default=3.0,gpt-4o=2.5"
    price_model: str = "default"  # BOSUN_PRICE_MODEL
    invariants: Path | None = None  # BOSUN_INVARIANTS: the invariants file (default: see invariants_path)
    # routing
    policy_poll_s: float = 1.0  # BOSUN_POLICY_POLL_S: how often policy files are checked for changes (0: never)
    route_operating_point: Path | None = None  # BOSUN_ROUTE_OPERATING_POINT: a TOML point replacing self-calibration
    # fleet: admission, HTTP sessions
    max_inflight: int = 32  # BOSUN_MAX_INFLIGHT: tool calls running at once
    max_queued: int = 256  # BOSUN_MAX_QUEUED: tool calls waiting for a slot; beyond it "busy, retry after"
    queue_timeout_s: float = 30.0  # BOSUN_QUEUE_TIMEOUT_S: longest wait for a slot before "busy, retry after"
    session_idle_timeout_s: float = 600.0  # BOSUN_SESSION_IDLE_TIMEOUT_S: an idle HTTP session is reclaimed
    max_sessions: int = 1000  # BOSUN_MAX_SESSIONS: HTTP sessions held at once
    # per-call deadline: a call still running after it is answered with a timeout error naming
    # the tool (cancelled only before its journal write: a started write finishes); 0 turns it off
    call_timeout_s: float = 150.0  # BOSUN_CALL_TIMEOUT_S
    # huge observe: a result over this many bytes is observed from a file, outside the SDK's
    # request path, with redaction and outline in a separate process (0: never)
    big_observe_bytes: int = 8 * 1024 * 1024  # BOSUN_BIG_OBSERVE_BYTES
    # local telemetry (dashboard, stats): on by default, rotated, never prompt text or paths
    telemetry: bool = True  # BOSUN_TELEMETRY: on | off
    telemetry_path: Path | None = None  # BOSUN_TELEMETRY_PATH: the events file (default $BOSUN_HOME/telemetry.jsonl)
    # task state: OSIRIS settings, overhead modes, the project that shared memory is keyed by
    cache_ttl_s: float = 300.0  # BOSUN_CACHE_TTL_S: a provider prompt cache is taken as expired after this idle time
    prune_threshold_tokens: int = 40_000  # BOSUN_PRUNE_THRESHOLD_TOKENS: known context above this -> trim advice
    overhead_mode: str = "standard"  # BOSUN_OVERHEAD_MODE: standard | auto | bystander | light | full
    project: str = "default"  # BOSUN_PROJECT: project id for project-scoped memory (a task may name its own)
    # capture without asking: bosun run and the harness hooks start the daemon when none answers
    hook_start: bool = True  # BOSUN_HOOK_START: on | off (also 1 | 0): the UserPromptSubmit hook may start the daemon
    run_start: bool = True  # BOSUN_RUN_START: on | off (also 1 | 0): bosun run may start the daemon
    # shared state: postgresql://... puts every store in PostgreSQL (several daemons, one state);
    # unset: SQLite in BOSUN_HOME
    database_url: str | None = None  # BOSUN_DATABASE_URL
    # start-up: load the model on a thread before the server's own imports (ready sooner, but what the
    # SDK answers comes later: the load holds the GIL much of the time); by default only where the SDK answers
    # nothing the host waits for (stdio --standalone with a recorded handshake: server/cli.py _prefetch_model)
    model_prefetch: bool = False  # BOSUN_MODEL_PREFETCH: on | off | auto (also 1 | 0); on: before any import
    model_prefetch_auto: bool = True  # auto (the default): stdio --standalone with a recorded handshake

    @property
    def db_path(self) -> Path:
        return self.home / "bosun.db"

    @property
    def invariants_path(self) -> Path:
        """Where the invariants file is looked for: BOSUN_INVARIANTS, else the first root's
        ``.bosun/invariants.toml``, else ``$BOSUN_HOME/invariants.toml``."""
        if self.invariants is not None:
            return self.invariants
        if self.roots:
            return self.roots[0] / ".bosun" / "invariants.toml"
        return self.home / "invariants.toml"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Config:
        """The configuration of this process: defaults, then ``BOSUN_*``, then ``overrides`` (CLI flags)."""
        env = os.environ if env is None else env
        read = _Reader(env)
        prefetch = read.choice("BOSUN_MODEL_PREFETCH", "auto", _PREFETCH)
        values: dict[str, Any] = {
            "home": read.path("BOSUN_HOME") or default_home(),
            "model_name": read.text("BOSUN_MODEL", ""),
            "model_dir": read.path("BOSUN_MODEL_DIR"),
            "model_threads": read.number("BOSUN_MODEL_THREADS", 1, int, minimum=1),
            "model_timeout_s": read.number("BOSUN_MODEL_TIMEOUT_S", 120.0, float, minimum=1),
            "judge": read.text("BOSUN_JUDGE", "off") or "off",
            "host": read.text("BOSUN_HOST", DEFAULT_HOST),
            "port": read.number("BOSUN_PORT", DEFAULT_PORT, int, minimum=0, maximum=65535),
            "token": read.text("BOSUN_TOKEN", "") or None,
            "tools": read.items("BOSUN_TOOLS", ","),
            "policies": [Path(p).expanduser() for p in read.items("BOSUN_POLICIES", LIST_SEPARATOR)],
            "roots": [Path(p).expanduser() for p in read.items("BOSUN_ROOTS", LIST_SEPARATOR)],
            "max_payload_bytes": read.number("BOSUN_MAX_PAYLOAD_BYTES", 16 * 1024 * 1024, int, minimum=1024),
            "max_file_bytes": read.number("BOSUN_MAX_FILE_BYTES", 8 * 1024 * 1024, int, minimum=1024),
            "prune_mode": read.choice("BOSUN_PRUNE_MODE", "cache_ttl", PRUNE_MODES),
            "redact_disable": read.items("BOSUN_REDACT_DISABLE", ","),
            "redact_extra": read.items("BOSUN_REDACT_EXTRA", "\n"),
            "prices": read.text("BOSUN_PRICES", ""),
            "price_model": read.text("BOSUN_PRICE_MODEL", "default") or "default",
            "invariants": read.path("BOSUN_INVARIANTS"),
            "policy_poll_s": read.number("BOSUN_POLICY_POLL_S", 1.0, float, minimum=0),
            "route_operating_point": read.path("BOSUN_ROUTE_OPERATING_POINT"),
            "max_inflight": read.number("BOSUN_MAX_INFLIGHT", 32, int, minimum=1),
            "max_queued": read.number("BOSUN_MAX_QUEUED", 256, int, minimum=0),
            "queue_timeout_s": read.number("BOSUN_QUEUE_TIMEOUT_S", 30.0, float, minimum=0.1),
            "session_idle_timeout_s": read.number("BOSUN_SESSION_IDLE_TIMEOUT_S", 600.0, float, minimum=1),
            "max_sessions": read.number("BOSUN_MAX_SESSIONS", 1000, int, minimum=1),
            "call_timeout_s": read.number("BOSUN_CALL_TIMEOUT_S", 150.0, float, minimum=0),
            "big_observe_bytes": read.number("BOSUN_BIG_OBSERVE_BYTES", 8 * 1024 * 1024, int, minimum=0),
            "telemetry": read.choice("BOSUN_TELEMETRY", "on", ("on", "off")) == "on",
            "telemetry_path": read.path("BOSUN_TELEMETRY_PATH"),
            "cache_ttl_s": read.number("BOSUN_CACHE_TTL_S", 300.0, float, minimum=1),
            "prune_threshold_tokens": read.number("BOSUN_PRUNE_THRESHOLD_TOKENS", 40_000, int, minimum=1000),
            "overhead_mode": read.choice("BOSUN_OVERHEAD_MODE", "standard",
                                         ("standard", "auto", "bystander", "light", "full")),
            "project": read.text("BOSUN_PROJECT", "default"),
            "hook_start": read.choice("BOSUN_HOOK_START", "on", ("on", "off", "1", "0")) in ("on", "1"),
            "run_start": read.choice("BOSUN_RUN_START", "on", ("on", "off", "1", "0")) in ("on", "1"),
            "database_url": database_url(read.text("BOSUN_DATABASE_URL", "")),
            "model_prefetch": prefetch in ("on", "1"),
            "model_prefetch_auto": prefetch == "auto",
        }
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise TypeError(f"unknown Config fields {unknown}")
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def database_url(value: str) -> str | None:
    """BOSUN_DATABASE_URL (or --database-url): a postgresql:// URL, or None for SQLite in BOSUN_HOME."""
    if not value:
        return None
    if not re.match(r"^postgres(ql)?://", value):
        shown = re.sub(r"://([^:/@]*):[^@]*@", r"://\1:***@", value)  # never echo a password
        raise ConfigError("BOSUN_DATABASE_URL", shown, "a postgresql:// URL (unset: SQLite in BOSUN_HOME)")
    return value


class _Reader:
    """Typed reads of one environment, each failure naming its variable."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env

    def text(self, name: str, default: str) -> str:
        value = self.env.get(name, "").strip()
        return value or default

    def path(self, name: str) -> Path | None:
        value = self.env.get(name, "").strip()
        return Path(value).expanduser() if value else None

    def items(self, name: str, separator: str | re.Pattern[str]) -> list[str]:
        raw = self.env.get(name, "")
        parts = separator.split(raw) if isinstance(separator, re.Pattern) else raw.split(separator)
        return [part.strip() for part in parts if part.strip()]

    def choice(self, name: str, default: str, allowed: tuple[str, ...]) -> str:
        value = self.text(name, default)
        if value not in allowed:
            raise ConfigError(name, value, "one of " + ", ".join(allowed))
        return value

    def number(self, name: str, default: T, kind: Callable[[str], T], minimum: float | None = None,
               maximum: float | None = None) -> T:
        raw = self.env.get(name, "").strip()
        if not raw:
            return default
        bounds = " ".join(p for p in (f">= {minimum:g}" if minimum is not None else "",
                                      f"<= {maximum:g}" if maximum is not None else "") if p)
        accepts = f"{'an integer' if kind is int else 'a number'}{' ' + bounds if bounds else ''}"
        try:
            value = kind(raw)
        except ValueError as exc:
            raise ConfigError(name, raw, accepts) from exc
        number = float(value)  # type: ignore[arg-type]
        if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
            raise ConfigError(name, raw, accepts)
        return value
