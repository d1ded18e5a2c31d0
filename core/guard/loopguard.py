"""LoopGuard: spot wasted and looping tool calls before they run.

The guard folds a task's journal (``tool_result``, ``tool_failure``, ``file_read``,
``step_completed``, ``state_flag`` events) into a small, bounded summary and judges a
proposed call against it. Five patterns (OSIRIS section 7):

==================  ==========================================================  ====================
pattern             fires when                                                   verdict
==================  ==========================================================  ====================
duplicate           the same call (tool + canonical args) already returned a      suggest_alternative
                    result and the world has not changed since                    (with the stored ref)
repeated_failure    this exact call already failed with error signature S, and    block + required_action
                    S has occurred >= 3 times since the world last changed
loop_pattern        S has occurred >= 3 times across >= 2 different argument      warn
                    sets of the same tool family, and this call is one more try
oscillation         the last fingerprints go X, Y, X and this call is Y again     warn
runaway             N calls in a row made no progress                             warn, block at 2N
==================  ==========================================================  ====================

Progress (documented, explicit): a call makes progress when
  * it changes the world: a file changed (a shell command that writes, e.g. ``sed -i``,
    ``cat > f``, ``patch``, ``git apply``, a python script that opens files for writing;
    or a ``file_read`` whose sha256 differs from the last one seen for that path), a
    successful call to a mutating API tool (``book_*``, ``update_*``, ``cancel_*`` ...);
  * a plan step is completed (``step_completed``);
  * a state flag changes value (``state_flag``, e.g. ``tests_passed``);
  * it returns a result (or an error) this call never returned before in this task (a new search
    that comes back empty is exploring; the same call with the same outcome is not progress).

Harness vocabularies (``core/guard/harness.py``) say which tools edit, read or run: an edit
through Claude Code's ``Edit``, SWE-agent's ``str_replace_editor`` (as a tool or as the shell
program it is there), Codex's ``apply_patch``, Cursor's ``edit_file`` ... is a world change
when it succeeds; a failed edit changed nothing. Failures are grouped by command family: the
program and what it runs (``python repro.py``, ``python -m pytest``, ``str_replace_editor
str_replace``), never the ``cd dir &&`` in front; an editor's failures by the words before the
text it quotes ("No replacement was performed, old_str `...`").
A world change starts a new *epoch*: failures are counted per epoch, and a result is
only a duplicate if it was produced in the current epoch. So re-running the tests after
an edit is progress, never a loop. A call that fails exactly as its previous run did
(same error signature, no change since) is not a world change even when its command may
write (``make``, ``npm run build``, ``cargo build``, ``pip install``): the repeated failure
is the evidence that it changed nothing, so the count reaches the block threshold.

``fingerprint = sha256(tool || canonical_args || result_signature)``. Memory per task is
bounded: every table is an LRU with a fixed capacity (see ``LoopPolicy``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bosun.core.actions import (
    args_hash,
    error_signature,
    shell_command,
)
from bosun.core.guard.harness import classify
from bosun.core.guard.shell_effects import analyse, is_source_path, normalise_path, paths_overlap

_MUTATING = re.compile(
    r"(?:^|[._-])(?:book|update|cancel|create|delete|remove|write|edit|set|send|transfer|post|put|patch|apply|"
    r"commit|push|insert|add|modify|move|rename|upload|submit|pay|refund|assign|close|merge|exchange|"
    r"replace|save|install|deploy|reset|revert|checkout|drop|grant|revoke|approve|reject|store|make)",
    re.IGNORECASE,
)
_TRANSIENT = re.compile(
    r"timed? ?out|timeout|temporar|rate.?limit|too many requests|\b429\b|\b50[234]\b|connection (?:reset|refused|aborted)"
    r"|try again|unavailable|EAGAIN|ECONNRESET|network is unreachable",
    re.IGNORECASE,
)
_QUOTE = re.compile(r"[`'\"]")
# a shell command's non-zero exit is only an error when its output ends like one (linters, grep, diff exit 1 too)
_ERRORISH = re.compile(r"error|exception|traceback|fail|fatal|denied|not found|no such|cannot|can't|unable|"
                       r"invalid|refused|abort|panic|segmentation|killed|errno|undefined", re.IGNORECASE)


# ---------------------------------------------------------------- canonical forms and hashes
def call_key(tool: str, a_hash: str) -> str:
    """Identity of a call without its result: sha256(tool || args_hash), shortened."""
    return hashlib.sha256(f"{tool}\x00{a_hash}".encode()).hexdigest()[:32]


def fingerprint(tool: str, canonical: str, result_signature: str) -> str:
    """sha256(tool || canonical_args || result_signature): identity of a call and its outcome."""
    return hashlib.sha256(f"{tool}\x00{canonical}\x00{result_signature}".encode()).hexdigest()


def editor_signature(error_text: str) -> str:
    """What kind of failure an edit had: its first line up to the text it quotes, numbers masked.

    Editors quote the text they could not find ("No replacement was performed, old_str `...` did
    not appear verbatim", "String to replace not found in file"); three edits missing three
    different texts fail the same way, which is the loop. "" when no such words lead the line.
    """
    first = next((ln.strip() for ln in error_text.splitlines() if ln.strip()), "")
    head = _QUOTE.split(first, 1)[0].strip(" ,:;")
    return "edit: " + error_signature(head) if len(head) >= 12 else ""


def is_transient(error_text: str) -> bool:
    """Errors that may succeed on retry (timeouts, rate limits): never blocked."""
    return bool(_TRANSIENT.search(error_text or ""))


def is_mutating_tool(tool: str) -> bool:
    """API tools whose name says they change state (book_reservation, update_x, git.commit ...)."""
    return bool(_MUTATING.search(tool))


# ---------------------------------------------------------------- policy, findings
@dataclass(frozen=True)
class LoopPolicy:
    """Thresholds and memory bounds; defaults were chosen on the dev trajectories (bench/loop_eval.py)."""

    failure_threshold: int = 3  # same error signature this often in one epoch -> block a known-failing call
    loop_threshold: int = 3  # same error this often in one epoch ...
    loop_distinct: int = 2  # ... across at least this many different argument sets -> warn
    runaway_warn: int = 8  # calls in a row without progress -> warn
    runaway_block: int = 16  # ... -> block
    max_keys: int = 256  # remembered distinct calls (LRU)
    max_signatures: int = 1024  # remembered result signatures (LRU)
    max_failure_groups: int = 64  # error groups counted in the current epoch
    max_paths: int = 256  # file hashes / known scripts
    window: int = 6  # recent fingerprints kept for oscillation


@dataclass(frozen=True)
class Finding:
    """One pattern that fired for a proposed call."""

    pattern: str  # duplicate | repeated_failure | loop_pattern | oscillation | runaway
    verdict: str  # suggest_alternative | warn | block
    reason: str
    required_action: str | None = None
    ref: str | None = None  # the stored result to use instead of re-running
    saved_tokens: int = 0  # tokens the stored result would cost again if re-run
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pattern": self.pattern, "verdict": self.verdict, "reason": self.reason}
        if self.required_action:
            out["required_action"] = self.required_action
        if self.ref:
            out["ref"] = self.ref
        if self.saved_tokens:
            out["saved_tokens"] = self.saved_tokens
        if self.details:
            out["details"] = self.details
        return out


@dataclass(slots=True)
class _Call:
    """What the guard remembers about one distinct call (tool + args)."""

    tool: str
    family: str
    result_sig: str | None = None  # last successful result signature
    ref: str | None = None
    sha256: str | None = None
    tokens: int = 0
    seq: int = 0
    epoch: int = -1  # world clock when the last result was produced
    reads: tuple[str, ...] | None = None  # paths the result depends on (None: everything)
    volatile: bool = False  # reads outputs or directories, which programs the agent runs may rewrite
    fail_sig: str | None = None  # last failure's signature, if the last outcome was a failure
    fail_epoch: int = -1
    fail_transient: bool = False


@dataclass(frozen=True, slots=True)
class _Effects:
    family: str
    writes: tuple[str, ...] | None  # () = writes nothing; None = may write anything
    reads: tuple[str, ...] | None
    created: dict[str, bool]
    executes: bool = False  # runs a program (not a plain reader) that writes no file we can see
    editor: bool = False  # writes only through an editor tool (Edit, str_replace_editor ...): a failure wrote nothing
    api: bool = False  # a tool no harness vocabulary knows: judged by its name (is_mutating_tool)


def _lru_put(table: OrderedDict[Any, Any], key: Any, value: Any, cap: int) -> None:
    table[key] = value
    table.move_to_end(key)
    while len(table) > cap:
        table.popitem(last=False)


class LoopGuard:
    """Per-task loop state: fed journal events in order, asked about proposed calls."""

    def __init__(self, policy: LoopPolicy | None = None) -> None:
        self.policy = policy or LoopPolicy()
        self.epoch = 0  # the clock: bumps on every world change and every program run
        self.world = 0  # bumps on world changes only: failures are counted per world epoch
        self.global_change = 0  # clock of the last change whose extent is unknown
        self.path_changes: OrderedDict[str, int] = OrderedDict()  # path -> clock of its last change (LRU)
        self.evicted_change = 0  # newest clock among path changes forgotten by the LRU
        self.exec_change = 0  # clock of the last program run (may have written outputs and caches)
        self.calls: OrderedDict[str, _Call] = OrderedDict()
        self.signatures: dict[int, None] = {}  # 64-bit prefixes of seen results, oldest first (LRU)
        self.failures: OrderedDict[tuple[str, str], set[str]] = OrderedDict()  # (family, sig) -> keys, this epoch
        self.failure_counts: dict[tuple[str, str], int] = {}
        self.recent: deque[tuple[str, str]] = deque(maxlen=self.policy.window)  # (key, fingerprint)
        self.files: OrderedDict[str, str] = OrderedDict()  # path -> sha256
        self.scripts: OrderedDict[str, bool] = OrderedDict()  # script path -> its body writes files
        self.flags: dict[str, str] = {}
        self.no_progress = 0  # calls in a row without progress
        # effects of calls seen in full at precheck time: observe journals args shortened, so a long heredoc
        # or python -c body is analysed here, keyed by the call, and used when its result arrives
        self.remembered: OrderedDict[str, _Effects] = OrderedDict()
        self.events_seen = 0
        self.last_seq = 0

    # ------------------------------------------------------------ folding events
    def observe(self, kind: str, payload: Mapping[str, Any], seq: int = 0) -> None:
        """Fold one journal event in (unknown kinds are ignored)."""
        self.events_seen += 1
        self.last_seq = max(self.last_seq, seq)
        if kind == "tool_result":
            self._on_call(payload, failed=False, seq=seq)
        elif kind == "tool_failure":
            self._on_call(payload, failed=True, seq=seq)
        elif kind == "file_read":
            path = str(payload.get("path") or "")
            sha = str(payload.get("sha256") or "")
            if path and sha:
                before = self.files.get(path)
                _lru_put(self.files, path, sha, self.policy.max_paths)
                if before is not None and before != sha:
                    self._world_changed((normalise_path(path),))
        elif kind == "step_completed":
            self.no_progress = 0
        elif kind == "state_flag":
            name = str(payload.get("name") or "")
            value = json.dumps(payload.get("value"), sort_keys=True, default=str)
            if self.flags.get(name) != value:
                if name in self.flags:  # the state moved: failures so far say nothing about the next try
                    self.failures.clear()
                    self.failure_counts.clear()
                self.flags[name] = value
                self.no_progress = 0
        elif kind == "handoff_completed":
            self.no_progress = 0

    def _world_changed(self, paths: tuple[str, ...] | None) -> None:
        """Files or external state changed: ``paths`` written, or None when the extent is unknown."""
        self.epoch += 1
        self.world += 1
        if paths is None:
            self.global_change = self.epoch
        else:
            for path in paths:
                self.path_changes[path] = self.epoch
                self.path_changes.move_to_end(path)
                while len(self.path_changes) > self.policy.max_paths:
                    _, clock = self.path_changes.popitem(last=False)
                    self.evicted_change = max(self.evicted_change, clock)
        self.failures.clear()
        self.failure_counts.clear()
        self.no_progress = 0

    def remember(self, tool: str, args: Any) -> None:
        """Analyse a proposed call's full arguments now, for when its (shortened) result event arrives."""
        if classify(tool, args).kind == "other":
            return
        key = call_key(tool, args_hash(args))
        _lru_put(self.remembered, key, self._effects(tool, args), 64)

    def _effects(self, tool: str, args: Any) -> _Effects:
        """Family, writes (paths or None = unknown), reads and created scripts of a call.

        The harness vocabularies (core/guard/harness.py) say what an edit, read or run tool does;
        a shell command's text is analysed; any other tool is judged by its name when it succeeds.
        """
        action = classify(tool, args)
        if action.kind == "run" and action.command is not None:
            effect = analyse(action.command, self.scripts)
            return _Effects(f"{tool}:{effect.family}", effect.targets if effect.writes else (), effect.reads,
                            effect.created_scripts, executes=not effect.writes and effect.reads is None,
                            editor=effect.editor_writes)
        paths = None if action.paths is None else tuple(normalise_path(p) for p in action.paths)
        if action.kind == "edit":
            return _Effects(tool, paths, None, {}, editor=True)
        if action.kind == "read":
            return _Effects(tool, (), paths, {})
        return _Effects(tool, (), None, {}, api=True)

    def fresh(self, rec: _Call) -> bool:
        """Whether nothing that ``rec``'s last result depends on changed since it was produced."""
        if rec.epoch == self.epoch:
            return True
        if rec.epoch < self.global_change or rec.reads is None or rec.epoch < self.evicted_change:
            return False
        if rec.volatile and rec.epoch < self.exec_change:
            return False
        return not any(
            clock > rec.epoch and any(paths_overlap(path, r) for r in rec.reads)
            for path, clock in self.path_changes.items()
        )

    def _on_call(self, payload: Mapping[str, Any], failed: bool, seq: int) -> None:
        tool = str(payload.get("tool") or "")
        args = payload.get("args")
        a_hash = str(payload.get("args_hash") or "") or args_hash(args)
        key = call_key(tool, a_hash)
        fx = self.remembered.pop(key, None) or self._effects(tool, args)
        family, created = fx.family, fx.created
        for path, body_writes in created.items():
            _lru_put(self.scripts, path, body_writes, self.policy.max_paths)
            _lru_put(self.scripts, path.lstrip("./"), body_writes, self.policy.max_paths)
        rec = self.calls.get(key) or _Call(tool=tool, family=family)
        if failed:
            error_text = str(payload.get("error") or "")
            sig = str(payload.get("error_signature") or "") or error_signature(error_text)
            if fx.editor:
                sig = editor_signature(error_text) or sig
            outcome = "E:" + sig
        else:
            sig = str(payload.get("result_signature") or payload.get("sha256") or "")
            outcome = "R:" + sig
        fp = hashlib.sha256(f"{key}\x00{outcome}".encode()).digest()
        # progress: this call has never ended this way before. Keyed by call and outcome, not the outcome alone:
        # searches for different things that all come back empty are exploring, not looping (an empty output
        # seen once in the task made every later empty result "no progress"); repeats and cycles stay repeats
        seen = int.from_bytes(fp[:8], "big")
        progress = seen not in self.signatures
        self.signatures.pop(seen, None)
        self.signatures[seen] = None
        if len(self.signatures) > self.policy.max_signatures:
            del self.signatures[next(iter(self.signatures))]
        # a call that failed exactly as its last run did (same error, nothing changed since) changed nothing:
        # a failing build or install may name unknown targets, but repeating its failure is not progress
        same_failure = (failed and rec.fail_sig is not None and rec.fail_epoch == self.world
                        and rec.fail_sig == sig)
        if (fx.writes is None or fx.writes) and not same_failure and not (failed and fx.editor):
            self._world_changed(fx.writes)
            progress = True
        elif fx.executes:
            # a program ran: it may have written outputs/caches (not sources); a tick of the clock, not progress
            self.epoch += 1
            self.exec_change = self.epoch
        elif not failed and fx.api and is_mutating_tool(tool):
            self._world_changed(None)
            progress = True
        if failed:
            rec.fail_sig = sig
            rec.fail_epoch = self.world
            rec.fail_transient = is_transient(str(payload.get("error") or "")) or is_transient(sig)
            if sig and (fx.editor or shell_command(tool, args) is None or _ERRORISH.search(sig)):
                group = (family, sig)
                keys = self.failures.get(group) or set()
                if len(keys) < 16:  # only "one or several argument sets" matters; stay bounded
                    keys.add(key)
                _lru_put(self.failures, group, keys, self.policy.max_failure_groups)
                self.failure_counts[group] = self.failure_counts.get(group, 0) + 1
                for stale in [g for g in self.failure_counts if g not in self.failures]:
                    del self.failure_counts[stale]
        else:
            rec.fail_sig = None
            rec.result_sig = sig
            ref = payload.get("ref") or payload.get("stored_ref")  # stored_ref: kept even when passed through
            rec.ref = str(ref) if ref else None
            rec.sha256 = None if rec.ref else (str(payload.get("sha256") or "") or None)  # the ref names it already
            rec.tokens = int(payload.get("tokens") or 0)
            rec.seq = seq
            rec.epoch = self.epoch
            rec.reads = fx.reads
            rec.volatile = fx.reads is not None and not all(is_source_path(r) for r in fx.reads)
        _lru_put(self.calls, key, rec, self.policy.max_keys)
        self.recent.append((key, fp.hex()[:16]))
        self.no_progress = 0 if progress else self.no_progress + 1

    # ------------------------------------------------------------ judging a proposed call
    def check(self, tool: str, args: Any, remember: bool = False) -> list[Finding]:
        """Findings for calling ``tool`` with ``args`` now, most severe first (empty: allow).

        ``remember=True`` also keeps the call's analysed effects for when its result arrives
        (what precheck does: it sees the full arguments, observe journals them shortened).
        """
        a_hash = args_hash(args)
        key = call_key(tool, a_hash)
        fx = self.remembered.get(key)
        if fx is None:
            fx = self._effects(tool, args)
            if remember and classify(tool, args).kind != "other":
                _lru_put(self.remembered, key, fx, 64)
        family = fx.family
        rec = self.calls.get(key)
        p = self.policy
        findings: list[Finding] = []

        # repeated failure: this exact call failed this epoch, and its error keeps coming back
        if rec is not None and rec.fail_sig and rec.fail_epoch == self.world:
            count = self.failure_counts.get((rec.family, rec.fail_sig), 0)
            if count >= p.failure_threshold and not rec.fail_transient:
                findings.append(Finding(
                    "repeated_failure", "block",
                    f"this exact call already failed with '{rec.fail_sig}', an error seen {count} times "
                    "since the last change to files or state",
                    required_action="change something first (edit the code or inputs, or record what you learned with a "
                    "lesson); re-running the same call will fail the same way",
                    details={"error_signature": rec.fail_sig, "count": count},
                ))
        # loop pattern: the same error keeps coming back across different arguments
        if not findings:
            for (fam, sig), keys in self.failures.items():
                count = self.failure_counts.get((fam, sig), 0)
                if fam == family and count >= p.loop_threshold and len(keys) >= p.loop_distinct:
                    findings.append(Finding(
                        "loop_pattern", "warn",
                        f"{count} calls of {fam} with {len(keys)} different argument sets all failed with '{sig}'; "
                        "the cause is probably not the arguments",
                        details={"error_signature": sig, "count": count, "distinct_args": len(keys)},
                    ))
                    break
        # oscillation: X, Y, X and now Y again (fingerprints include the results)
        if len(self.recent) >= 3:
            (k1, f1), (k2, f2), (_k3, f3) = list(self.recent)[-3:]
            if f1 == f3 and f1 != f2 and k1 != k2 and key == k2:
                findings.append(Finding(
                    "oscillation", "warn",
                    "alternating between two calls with the same results (A/B/A/B); neither changes the outcome",
                    details={"window": 4},
                ))
        # runaway: many calls with no progress
        if self.no_progress >= p.runaway_block:
            findings.append(Finding(
                "runaway", "block",
                f"{self.no_progress} calls in a row made no progress (no file changed, no step completed, "
                "no new result)",
                required_action="stop and re-plan: complete or revise a plan step, change a file, or ask for help",
                details={"calls_without_progress": self.no_progress},
            ))
        elif self.no_progress >= p.runaway_warn:
            findings.append(Finding(
                "runaway", "warn",
                f"{self.no_progress} calls in a row made no progress (no file changed, no step completed, "
                "no new result)",
                details={"calls_without_progress": self.no_progress},
            ))
        # duplicate: same call, same world, result already stored
        if rec is not None and rec.result_sig is not None and rec.fail_sig is None and self.fresh(rec):
            where = rec.ref or (f"sha256:{rec.sha256}" if rec.sha256 else f"event #{rec.seq}")
            findings.append(Finding(
                "duplicate", "suggest_alternative",
                f"the same call already returned a result (event #{rec.seq}) and nothing changed since; "
                f"reuse it: {where}",
                ref=rec.ref, saved_tokens=rec.tokens,
                details={"seq": rec.seq, "sha256": rec.sha256} if rec.sha256 else {"seq": rec.seq},
            ))
        elif rec is not None and rec.fail_sig and rec.fail_epoch == self.world and not findings:
            findings.append(Finding(
                "duplicate", "suggest_alternative",
                f"the same call already failed with '{rec.fail_sig}' and nothing changed since",
                details={"error_signature": rec.fail_sig},
            ))
        order = {"block": 0, "suggest_alternative": 1, "warn": 2}
        findings.sort(key=lambda f: order[f.verdict])
        return findings

    def memory_bytes(self) -> int:
        """Approximate resident size of this guard's tables (for the bounded-memory report)."""
        import sys

        total = sys.getsizeof(self.calls) + sys.getsizeof(self.signatures) + sys.getsizeof(self.files)
        for k, v in self.calls.items():
            total += sys.getsizeof(k) + sys.getsizeof(v) + sum(
                sys.getsizeof(x) for x in (v.tool, v.family, v.result_sig, v.ref, v.sha256, v.fail_sig) if x
            )
        total += sum(sys.getsizeof(k) for k in self.signatures)
        total += sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in self.files.items())
        total += sum(sys.getsizeof(k) for k in self.scripts)
        for g, keys in self.failures.items():
            total += sys.getsizeof(g) + sum(sys.getsizeof(x) for x in g) + sys.getsizeof(keys) + sum(sys.getsizeof(k) for k in keys)
        total += sys.getsizeof(self.recent) + sum(sys.getsizeof(a) + sys.getsizeof(b) for a, b in self.recent)
        return total
