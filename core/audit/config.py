"""Audit configuration: dokis's keys, validated, plus bosun's additions.

Every key dokis names is accepted (``allowed_domains``, ``min_citation_rate``,
``claim_threshold``, ``extractor``, ``matcher``, ``model``, ``enforcement_mode``,
``max_source_age_days``, ``stale_source_action``, ``source_date_metadata_key``,
``fail_on_violation``, ``domain``). bosun adds ``as_of`` (freshness is computed
against an explicit date so a report can be reproduced) and
``unknown_age_action``. Unknown keys are an error naming the key: a typo in a
trust policy must not silently weaken it.

``claim_threshold`` is a probability here (bosun's confidence is calibrated),
so its default is 0.5 rather than dokis's BM25-specific 0.35.
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

from bosun.core.errors import InvalidInput

EXTRACTORS = ("claimify", "regex")
UNSUPPORTED_EXTRACTORS = {
    "nltk": "bosun splits sentences itself and does not ship NLTK's punkt data",
    "llm": "bosun makes no LLM call",
}
MATCHERS = ("auto", "bm25", "semantic")
# "semantic" is the hybrid matcher (BM25 candidates, coverage features and embedding similarity);
# "auto" (the default) is "semantic" wherever the embedding model is available (the daemon, the CLI
# when the model loads) and "bm25" otherwise; the report's "matcher" says which one ran.
MATCHER_ALIASES = {"lexical": "bm25", "hybrid": "semantic"}
MODES = ("audit", "guardrail", "enforce")
ACTIONS = ("warn", "fail")
CONFIG_FILENAME = "provenance.toml"


@dataclass(frozen=True)
class AuditConfig:
    """One audit's policy. Frozen: a report records exactly the config it used."""

    allowed_domains: tuple[str, ...] = ()
    min_citation_rate: float = 0.80
    claim_threshold: float = 0.5
    extractor: str = "claimify"
    matcher: str = "auto"
    model: str = "all-MiniLM-L6-v2"
    enforcement_mode: str = "guardrail"
    max_source_age_days: int | None = None
    stale_source_action: str = "warn"
    source_date_metadata_key: str | None = None
    domain: str | None = None
    as_of: date | None = None
    unknown_age_action: str = "warn"
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (dates as ISO strings), echoed in every report."""
        out = asdict(self)
        out.pop("extra", None)
        out["allowed_domains"] = list(self.allowed_domains)
        out["as_of"] = self.as_of.isoformat() if self.as_of else None
        return out


_KEYS = {
    "allowed_domains", "min_citation_rate", "claim_threshold", "extractor", "matcher", "model",
    "enforcement_mode", "max_source_age_days", "stale_source_action", "source_date_metadata_key",
    "fail_on_violation", "domain", "as_of", "unknown_age_action",
}


def _num(data: dict[str, Any], key: str, default: float, lo: float, hi: float) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(f"config.{key}", f"must be a number, got {value!r}", f"{lo} to {hi}")
    if not lo <= float(value) <= hi:
        raise InvalidInput(f"config.{key}", f"{value} is out of range", f"{lo} to {hi}")
    return float(value)


def _choice(data: dict[str, Any], key: str, default: str, choices: tuple[str, ...]) -> str:
    value = data.get(key, default)
    if not isinstance(value, str) or value.strip().lower() not in choices:
        raise InvalidInput(f"config.{key}", f"unknown value {value!r}", ", ".join(choices))
    return value.strip().lower()


def _opt_str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"config.{key}", f"must be a string, got {type(value).__name__}")
    return value.strip() or None


def parse_as_of(value: Any, key: str = "config.as_of") -> date | None:
    """An explicit evaluation date: ISO date or datetime string, or a date."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            return date.fromisoformat(text[:10]) if len(text) >= 10 else date.fromisoformat(text)
        except ValueError:
            pass
    raise InvalidInput(key, f"not an ISO date: {value!r}", "YYYY-MM-DD")


def _domains(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple):
        raise InvalidInput("config.allowed_domains", "must be a list of domains", '["who.int", "nejm.org/doi"]')
    out: list[str] = []
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            raise InvalidInput(f"config.allowed_domains[{i}]", f"must be a non-empty string, got {item!r}")
        out.append(item.strip())
    return tuple(out)


def config_from_dict(data: dict[str, Any] | None) -> AuditConfig:
    """Validate a plain dict (tool argument or parsed TOML) into an AuditConfig."""
    if data is None:
        return AuditConfig()
    if not isinstance(data, dict):
        raise InvalidInput("config", f"must be an object, got {type(data).__name__}")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise InvalidInput("config", f"unknown key(s): {', '.join(unknown)}", ", ".join(sorted(_KEYS)))
    extractor = str(data.get("extractor", "claimify")).strip().lower()
    if extractor in UNSUPPORTED_EXTRACTORS:
        raise InvalidInput(
            "config.extractor", f"{extractor!r} is not available: {UNSUPPORTED_EXTRACTORS[extractor]}", ", ".join(EXTRACTORS)
        )
    matcher = data.get("matcher", "auto")
    if isinstance(matcher, str):
        matcher = MATCHER_ALIASES.get(matcher.strip().lower(), matcher)
    mode_value = data.get("enforcement_mode")
    if mode_value is None:
        fail = data.get("fail_on_violation", False)
        if not isinstance(fail, bool):
            raise InvalidInput("config.fail_on_violation", f"must be true or false, got {fail!r}")
        mode_value = "enforce" if fail else "guardrail"
    max_age = data.get("max_source_age_days")
    if max_age is not None and (isinstance(max_age, bool) or not isinstance(max_age, int) or max_age < 0):
        raise InvalidInput("config.max_source_age_days", f"must be a whole number of days >= 0, got {max_age!r}")
    model = data.get("model", "all-MiniLM-L6-v2")
    if not isinstance(model, str) or not model.strip():
        raise InvalidInput("config.model", f"must be a model name, got {model!r}")
    return AuditConfig(
        allowed_domains=_domains(data.get("allowed_domains")),
        min_citation_rate=_num(data, "min_citation_rate", 0.80, 0.0, 1.0),
        claim_threshold=_num(data, "claim_threshold", 0.5, 0.0, 1.0),
        extractor=_choice({"extractor": extractor}, "extractor", "claimify", EXTRACTORS),
        matcher=_choice({"matcher": matcher}, "matcher", "auto", MATCHERS),
        model=model.strip(),
        enforcement_mode=_choice({"enforcement_mode": mode_value}, "enforcement_mode", "guardrail", MODES),
        max_source_age_days=max_age,
        stale_source_action=_choice(data, "stale_source_action", "warn", ACTIONS),
        source_date_metadata_key=_opt_str(data, "source_date_metadata_key"),
        domain=_opt_str(data, "domain"),
        as_of=parse_as_of(data.get("as_of")),
        unknown_age_action=_choice(data, "unknown_age_action", "warn", ACTIONS),
    )


def load_config_file(path: Path) -> AuditConfig:
    """Read a ``provenance.toml`` (dokis's format). YAML is refused as dokis does."""
    if path.suffix.lower() in {".yaml", ".yml"}:
        raise InvalidInput("--config", f"{path.name} is YAML; provenance configs are TOML", "a .toml file")
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise InvalidInput("--config", f"file not found: {path}") from exc
    except OSError as exc:
        raise InvalidInput("--config", f"cannot read {path}: {exc.strerror}") from exc
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInput("--config", f"{path} is not valid TOML: {exc}") from exc
    return config_from_dict(data)


def discover_config(input_path: Path | None, cwd: Path) -> Path | None:
    """dokis's discovery: ``provenance.toml`` in the working directory, then beside the input file."""
    candidates = [cwd / CONFIG_FILENAME]
    if input_path is not None:
        candidates.append(input_path.resolve().parent / CONFIG_FILENAME)
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    return None
