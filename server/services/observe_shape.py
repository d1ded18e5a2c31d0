"""The text-dependent half of observing an output: measure it, then shape the answer (stub, view, note).

Pure CPU work over the scrubbed text, with no store or journal: the in-process observe runs it on
the event loop or a thread, and a huge output runs it in a separate process
(``server/offload_worker.py``), so both answer exactly alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bosun.core.actions import error_signature
from bosun.core.offload.compress import compress
from bosun.core.offload.intent import focus
from bosun.core.offload.offload import (
    MAX_STUB_SHARE,
    VIEW_MIN_TOKENS,
    Decision,
    PruneMode,
    answer_tokens,
    build_stub,
    count_lines,
    decide,
    fast_tokens,
    outline_budget,
    short_ref,
    worth_it,
)
from bosun.core.offload.outline import Outline, Utf8Text, build_outline, detect_kind

INTENT_MAX = 300  # tokens of intent lines at most (also at most the room the stub leaves under half the result)
VIEW_NOISY_MAX = 262_144  # characters: above this an offloaded output keeps its stub without a view pass
THREAD_ABOVE = 65_536  # characters: CPU work on larger outputs (view, intent) runs on a worker thread


@dataclass
class Measured:
    """What the whole text says before the bytes are stored: lines, tokens, the offload decision, the outline."""

    total_lines: int
    tokens: int
    choice: Decision
    outline: Outline | None


def measure(text: str, data: bytes, redactions: dict[str, int], prune: PruneMode, command: str | None,
            offload: bool | None, failed: bool, build: Callable[..., Outline] = build_outline,
            found: dict[bytes, list[int]] | None = None) -> Measured:
    """Count, estimate, decide and outline ``text`` (``data``: its scrubbed UTF-8 bytes; ``build``: the
    outline builder, named by the caller so a test can replace it where the service looks it up;
    ``found``: ``OUTLINE_LITERALS``' positions in ``data``, from redaction's scan, when it had them)."""
    # numpy first: it lets go of the GIL, so the writer thread gets going at once
    total_lines = count_lines(data)  # the bytes hold the same newlines as ``text``
    utf8 = Utf8Text.of(text, data if not redactions else None, found)  # unredacted: data is text's UTF-8
    tokens = fast_tokens(text)
    choice = decide(tokens, prune, command, offload)
    kind = detect_kind(text, command, utf8)
    outline = None
    if choice.offload or failed or kind == "test":  # a test run's outcome sets tests_passed even when small
        budget = outline_budget(prune, tokens, kind)
        outline = build(text, budget=budget, command=command, kind=kind, utf8=utf8)
    return Measured(total_lines, tokens, choice, outline)


@dataclass
class Shaped:
    """The answer to an observed output and what its journal event records of it."""

    answer: dict[str, Any]
    offloaded: bool
    stub_tokens: int
    response_tokens: int
    reason: str
    outline_kind: str | None
    facts: dict[str, Any]
    error_signature: str | None = None
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def shape_is_light(text: str, measured: Measured, offload: bool | None, intent: str | None) -> bool:
    """Whether ``shape`` will only build a stub (no intent or view pass over ``text``): then a thread hop
    costs more than the work (13-24 % of a 1 MB observe's CPU, measured), so it runs in line."""
    if offload is False:
        return True  # neither a stub nor a view
    if not measured.choice.offload or measured.outline is None or intent:
        return False  # a view pass (no stub) or an intent pass
    return len(text) > VIEW_NOISY_MAX or ("\x1b" not in text and "\r" not in text)


def shape(text: str, nbytes: int, digest: str, measured: Measured, redactions: dict[str, int],
          offload: bool | None, intent: str | None, failed: bool) -> Shaped:
    """The stub (or view, or pass-through note) for ``text`` stored under ``digest``: pure CPU work, so a
    huge output is shaped in a separate process (``server/offload_worker.py``) exactly as here."""
    outline, tokens, choice = measured.outline, measured.tokens, measured.choice
    redacted = {"redacted": sum(redactions.values())} if redactions else {}
    stub: dict[str, Any] | None = None
    answer: dict[str, Any] | None = None
    reason = choice.reason
    cost = 0
    if choice.offload and outline is not None:
        stub = build_stub(short_ref(digest), nbytes, tokens, measured.total_lines, outline)
        answer = {"offloaded": True, **stub, **redacted}
        cost = answer_tokens(answer)  # the stub as the agent carries it: the whole answer
        if offload is not True and not worth_it(tokens, cost):
            stub, answer, reason = None, None, f"a stub ({cost} tokens) would not save enough"
    if stub is not None and answer is not None and intent:
        room = min(INTENT_MAX, max(0, int(tokens * MAX_STUB_SHARE) - cost))
        found = focus(text, intent, room)
        if found is not None:
            answer["focus"] = found.text
            cost = answer_tokens(answer)
    # with a stub in hand, the view must shrink the output below the stub's cost: worth a line pass
    # up to 64 KB, or up to 256 KB when terminal noise (ANSI, redraws) makes a big shrink likely
    if offload is not False and tokens > VIEW_MIN_TOKENS and (
            stub is None or len(text) <= THREAD_ABOVE
            or (len(text) <= VIEW_NOISY_MAX and ("\x1b" in text or "\r" in text))):
        answer, stub, cost = _view(text, digest, tokens, redacted, answer, stub, cost)
    if answer is None:
        answer = {"offloaded": False, "tokens": tokens, **redacted}
        response_tokens = answer_tokens(answer)
    else:
        response_tokens = cost
    if "view" in answer:
        reason = "compressed view: " + str(answer.get("note"))
    shaped = Shaped(answer, stub is not None, cost if stub else 0, response_tokens, reason,
                    outline.kind if outline is not None else None, outline.facts if outline is not None else {})
    if failed:
        shaped.error_signature = error_signature(text)
        shaped.error = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")[:300]
    return shaped


def _view(text: str, digest: str, tokens: int, redacted: dict[str, int], answer: dict[str, Any] | None,
          stub: dict[str, Any] | None, cost: int) -> tuple[dict[str, Any] | None, dict[str, Any] | None, int]:
    """The output with its noise taken out, when that costs less than the stub (or the output).

    The view marks every change in its text and the answer carries the ref: nothing is lost
    silently, the full output is one recall away.
    """
    view = compress(text)
    if not view.changed:
        return answer, stub, cost
    candidate = {"offloaded": True, "ref": short_ref(digest), "tokens": tokens, "note": view.note(),
                 "view": "", **redacted}
    # sampled above 96 KB like the output's own count (the exact estimator takes ~0.5 s on a megabyte)
    view_cost = answer_tokens(candidate) + fast_tokens(view.text)
    candidate["view"] = view.text
    if view_cost >= (cost if stub is not None else tokens):  # the cheaper of stub and output wins
        return answer, stub, cost
    return candidate, candidate, view_cost
