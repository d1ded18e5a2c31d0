"""The seal: three zone hashes over the stable parts of a task, and the drift verdict.

Provider prompt caches are prefix caches, so the task's stable context is split
into zones that change at different rates (OSIRIS section 2):

    head_hash   = H(["bosun.head/1",  sha(system_head), sha(rules)])              immutable
    zoneB_hash  = H(["bosun.zoneB/1", norm(objective), [norm(step)...], sha(contract)])  quasi-stable
    tail_hash   = H(["bosun.tail/1",  [norm(constraint)...], [norm(decision)...]])    append-only
                  (with sealed flags: H(["bosun.tail/1", [...], [...], [[name, JSON(value)]...]]))
    prefix_hash = sha256(head_hash + zoneB_hash)     the cached prefix
    zoneA_hash  = sha256(head_hash + tail_hash)      the whole zone A
    seal        = sha256(prefix_hash + tail_hash)    what the manifest carries

Canonical serialisation (enough to recompute a seal in ten lines):
- ``norm(t)``: Unicode NFC; ``\\r\\n`` and lone ``\\r`` become ``\\n``; trailing spaces and
  tabs are stripped from every line; leading and trailing newlines are stripped.
- ``sha(t)`` = lowercase hex sha256 of ``norm(t)`` in UTF-8, or ``""`` when that part was
  never recorded. (bosun stores recorded texts already normalised, so ``sha`` is also the
  text's ref ``mem://sha256:<sha>``.)
- ``H(x)`` = hex sha256 of the UTF-8 bytes of ``json.dumps(x, ensure_ascii=False,
  separators=(",", ":"))``: a JSON array, no spaces, non-ASCII characters kept raw.
- ``a + b`` joins two 64-character lowercase hex strings; ``sha256`` hashes its ASCII bytes.
- Field order is exactly as written above; lists keep their journal order.
- Sealed flags (every task flag except the settings ``prune_mode`` / ``overhead_mode``) are the
  fourth element of the tail, sorted by name, each ``[name, json.dumps(value, sort_keys=True)]``;
  a task without flags hashes exactly as before (three elements).
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Sequence
from typing import Any

from bosun.core.errors import InvalidInput
from bosun.core.task.state import SETTING_FLAGS, SealRecord, TaskState

SEAL_PREFIX = "sha256:"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")

# verdicts, from best to worst
OK = "ok"  # same seal: nothing stable changed
GROWTH = "normal_growth"  # tail appended: prefix hash unchanged, the prompt cache holds
MINOR = "minor_drift"  # zone B changed (plan or tool contract): re-prefill the delta
CRITICAL = "critical_drift"  # head changed, a pinned item rewritten, or a seal this task never issued


def norm(text: str) -> str:
    """The canonical form of a text before hashing (see the module docstring)."""
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(line.rstrip(" \t") for line in text.split("\n")).strip("\n")


def text_sha(text: str) -> str:
    return hashlib.sha256(norm(text).encode("utf-8")).hexdigest()


def _h(parts: list[Any]) -> str:
    data = json.dumps(parts, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def _cat(a: str, b: str) -> str:
    return hashlib.sha256((a + b).encode("ascii")).hexdigest()


def head_hash(head_sha: str, rules_sha: str) -> str:
    return _h(["bosun.head/1", head_sha, rules_sha])


def zoneB_hash(objective: str, plan: Sequence[str], contract_sha: str) -> str:
    return _h(["bosun.zoneB/1", norm(objective), [norm(s) for s in plan], contract_sha])


def tail_hash(constraints: Sequence[str], decisions: Sequence[str],
              flags: Sequence[tuple[str, str]] = ()) -> str:
    parts: list[Any] = ["bosun.tail/1", [norm(c) for c in constraints], [norm(d) for d in decisions]]
    if flags:
        parts.append([list(f) for f in flags])
    return _h(parts)


def sealed_flags(state: TaskState) -> tuple[tuple[str, str], ...]:
    """The task's flags the seal covers: (name, canonical JSON value), sorted by name."""
    return tuple(sorted((name, json.dumps(value, sort_keys=True, ensure_ascii=False, default=str))
                        for name, value in state.flags.items() if name not in SETTING_FLAGS))


def prefix_hash(head: str, zone_b: str) -> str:
    return _cat(head, zone_b)


def zoneA_hash(head: str, tail: str) -> str:
    return _cat(head, tail)


def seal_of(prefix: str, tail: str) -> str:
    return _cat(prefix, tail)


def _sha_of(part: dict[str, Any] | None) -> str:
    return str(part.get("sha256") or "") if part else ""


def hashes(state: TaskState) -> dict[str, str]:
    """All five hashes and the seal of a state."""
    h = head_hash(_sha_of(state.head), _sha_of(state.rules))
    b = zoneB_hash(state.objective, state.plan, _sha_of(state.contract))
    t = tail_hash(state.constraints, state.decisions, sealed_flags(state))
    p = prefix_hash(h, b)
    return {"head_hash": h, "zoneB_hash": b, "tail_hash": t, "prefix_hash": p,
            "zoneA_hash": zoneA_hash(h, t), "seal": seal_of(p, t)}


def seal_record(state: TaskState) -> SealRecord:
    h = hashes(state)
    return SealRecord(version=state.version, seal=h["seal"], head_hash=h["head_hash"], zoneB_hash=h["zoneB_hash"],
                      tail_hash=h["tail_hash"], n_constraints=len(state.constraints),
                      n_decisions=len(state.decisions), flags=sealed_flags(state))


def parse_seal(value: str, field: str = "seal") -> str:
    """Accept ``sha256:<hex>``, ``SEAL=sha256:<hex>`` or bare hex; return the 64-char hex."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(field, "must be a non-empty string", "sha256:<64 lowercase hex chars> from the manifest")
    text = value.strip()
    for prefix in ("SEAL=", SEAL_PREFIX):
        if text.startswith(prefix):
            text = text[len(prefix):]
    text = text.lower()
    if not _HEX64.match(text):
        raise InvalidInput(field, f"not a sha256 seal: {value[:80]!r}",
                           "sha256:<64 hex chars>, the SEAL= line of the manifest")
    return text


def verdict(state: TaskState, agent_seal: str | None) -> dict[str, Any]:
    """The drift verdict block for a caller that carried ``agent_seal`` (None: just the current seal).

    The agent's seal is looked up in the task's seal history; its zone hashes are
    compared with the current ones. Priority: head change (critical) > a pinned
    constraint/decision rewritten since (critical, semantic) > zone B change (minor)
    > tail appended (normal growth) > same (ok).
    """
    current = state.seals[-1] if state.seals else seal_record(state)
    out: dict[str, Any] = {"seal": SEAL_PREFIX + current.seal, "version": state.version}
    if agent_seal is None:
        out["verdict"] = OK
        out["checked"] = False
        return out
    digest = parse_seal(agent_seal)
    out["checked"] = True
    if digest == current.seal:
        out["verdict"] = OK
        return out
    old = next((r for r in state.seals if r.seal == digest), None)
    if old is None:
        out.update(verdict=CRITICAL, cause="unknown_seal", changed=["unknown"], cache="unknown",
                   action="this seal was never issued for this task: call plan(mode='resume') and carry the new manifest")
        return out
    changed = []
    if old.head_hash != current.head_hash:
        changed.append("head")
    if old.zoneB_hash != current.zoneB_hash:
        changed.append("zoneB")
    if old.tail_hash != current.tail_hash:
        changed.append("tail")
    rewritten = [r for r in state.revisions if r["version"] > old.version and r["index"] < (
        old.n_constraints if r["collection"] == "constraints" else old.n_decisions)]
    out["changed"] = changed
    out["since_version"] = old.version
    if old.flags != current.flags:
        before, now = dict(old.flags), dict(current.flags)
        out["flags_changed"] = sorted(n for n in set(before) | set(now) if before.get(n) != now.get(n))
    if "head" in changed:
        out.update(verdict=CRITICAL, cause="head_changed", cache="full_prefill",
                   action="the system head or rules changed: the whole cached prefix is re-prefilled")
    elif rewritten:
        out.update(verdict=CRITICAL, semantic_break=True, cause="pinned_rewrite", cache="intact",
                   rewritten=[{"collection": r["collection"], "index": r["index"], "version": r["version"]}
                              for r in rewritten],
                   action="a pinned constraint or decision you carry was rewritten: drop your copy and "
                          "call plan(mode='resume')")
    elif "zoneB" in changed:
        out.update(verdict=MINOR, cache="delta_prefill",
                   action="the plan or tool contract changed: replace your manifest")
    else:
        what = "constraints or decisions were appended" if "flags_changed" not in out or (
            old.tail_hash != tail_hash(state.constraints, state.decisions, old.flags)) else "task flags changed"
        out.update(verdict=GROWTH, cache="prefix_intact",
                   action=f"{what}: prefix cache holds; append the new items (plan mode='resume' lists them)")
    return out
