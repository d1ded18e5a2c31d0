"""The token ledger of a task, folded from its journal.

Counts what bosun saw and did: tokens observed, passed through, offloaded,
recalled; bosun's own overhead (every observe answer the agent carries,
stubs included, and every drop receipt); and the savings it may claim. Savings
are credited only on drop receipts (``dropped`` events): an offloaded result
is a saving once the agent confirms the payload left its prompt, never before.
Net = credited - overhead - recalled. Cost comes from a price table in USD per
million input tokens.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from bosun.core.errors import InvalidInput

DEFAULT_PRICE_PER_MTOK = 3.0  # USD per million input tokens when no table is configured


def parse_prices(spec: str | Mapping[str, float] | None) -> dict[str, float]:
    """``"default=3.0,gpt-4o=2.5"`` (or a mapping) into {model: USD per million input tokens}."""
    if spec is None or spec == "":
        return {"default": DEFAULT_PRICE_PER_MTOK}
    items: list[tuple[str, Any]]
    if isinstance(spec, Mapping):
        items = list(spec.items())
    else:
        items = []
        for part in spec.split(","):
            if not part.strip():
                continue
            name, sep, value = part.partition("=")
            if not sep:
                raise InvalidInput("prices", f"{part.strip()!r} is not model=usd_per_million_tokens")
            items.append((name.strip(), value.strip()))
    out: dict[str, float] = {}
    for name, value in items:
        try:
            price: float = float(value)
        except (TypeError, ValueError) as exc:
            raise InvalidInput("prices", f"price of {name!r} is not a number: {value!r}") from exc
        if price < 0:
            raise InvalidInput("prices", f"price of {name!r} is negative")
        out[str(name)] = price
    out.setdefault("default", DEFAULT_PRICE_PER_MTOK)
    return out


@dataclass
class Ledger:
    """Token accounting of one task (or, summed, of all tasks)."""

    observed_count: int = 0
    observed_tokens: int = 0
    passed_through_tokens: int = 0
    offloaded_count: int = 0
    offloaded_tokens: int = 0
    stub_tokens: int = 0
    recalled_count: int = 0
    recalled_tokens: int = 0
    dropped_count: int = 0
    credited_tokens: int = 0  # savings credited by drop receipts
    overhead_tokens: int = 0  # every bosun answer the agent carries (stubs included)
    files_read: int = 0
    pending_drop_tokens: int = 0  # offloaded but not yet confirmed dropped (not credited)
    _offloaded_refs: dict[str, int] = field(default_factory=dict, repr=False)
    _dropped_refs: set[str] = field(default_factory=set, repr=False)

    @property
    def net_tokens(self) -> int:
        return self.credited_tokens - self.overhead_tokens - self.recalled_tokens

    def add_event(self, kind: str, p: Mapping[str, Any]) -> None:
        """Fold one journal event (kinds other than observe's are ignored)."""
        if kind in ("tool_result", "tool_failure"):
            tokens = int(p.get("tokens") or 0)
            self.observed_count += 1
            self.observed_tokens += tokens
            self.overhead_tokens += int(p.get("response_tokens") or 0)
            if p.get("offloaded"):
                self.offloaded_count += 1
                self.offloaded_tokens += tokens
                self.stub_tokens += int(p.get("stub_tokens") or 0)
                ref = p.get("ref")
                if isinstance(ref, str) and ref not in self._dropped_refs:
                    self._offloaded_refs[ref] = tokens
            else:
                self.passed_through_tokens += tokens
        elif kind == "dropped":
            self.dropped_count += 1
            self.credited_tokens += int(p.get("tokens") or 0)
            self.overhead_tokens += int(p.get("response_tokens") or 0)
            ref = p.get("ref")
            if isinstance(ref, str):
                self._dropped_refs.add(ref)
                self._offloaded_refs.pop(ref, None)
        elif kind == "recalled":
            self.recalled_count += 1
            self.recalled_tokens += int(p.get("tokens") or 0)
        elif kind == "file_read":
            self.files_read += 1
            self.overhead_tokens += int(p.get("response_tokens") or 0)
        self.pending_drop_tokens = sum(self._offloaded_refs.values())

    def merge(self, other: Ledger) -> None:
        for name in (
            "observed_count", "observed_tokens", "passed_through_tokens", "offloaded_count", "offloaded_tokens",
            "stub_tokens", "recalled_count", "recalled_tokens", "dropped_count", "credited_tokens",
            "overhead_tokens", "files_read", "pending_drop_tokens",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def to_dict(self, prices: Mapping[str, float] | None = None, model: str = "default") -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if not k.startswith("_")}
        out["net_tokens"] = self.net_tokens
        table = dict(prices or {"default": DEFAULT_PRICE_PER_MTOK})
        price = table.get(model, table.get("default", DEFAULT_PRICE_PER_MTOK))
        out["cost_usd"] = {
            "model": model if model in table else "default",
            "usd_per_mtok": price,
            "observed": round(self.observed_tokens * price / 1e6, 6),
            "credited_savings": round(self.credited_tokens * price / 1e6, 6),
            "overhead": round(self.overhead_tokens * price / 1e6, 6),
            "net_savings": round(self.net_tokens * price / 1e6, 6),
        }
        return out


def ledger_of(events: Iterable[Any]) -> Ledger:
    """Fold events (objects with ``kind`` and ``payload``) into a Ledger."""
    led = Ledger()
    for ev in events:
        led.add_event(ev.kind, ev.payload)
    return led
