"""PrecheckService: the warm state behind ``precheck`` (loop guards, invariants file, budgets).

It is ``engine.precheck``. Per task it keeps a ``LoopGuard`` and a
cursor into the task journal, and folds in only the events appended since the last
call (observe and precheck never call each other; the journal is the interface).

Invariants file location (first that applies):
  1. ``$BOSUN_INVARIANTS`` (a file path);
  2. ``.bosun/invariants.toml`` under the first directory of ``$BOSUN_ROOTS``
     (separated by ``;`` or the OS path separator);
  3. ``$BOSUN_HOME/invariants.toml``.
The file is re-read when its mtime, size or inode changes (checked on every precheck,
one ``stat``). A file that fails to parse leaves the last good rules in force; the
error is reported in every precheck answer until the file is fixed.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bosun.core.actions import canonical_args
from bosun.core.errors import BosunError, InvalidInput
from bosun.core.guard.invariants import RuleSet, parse_rules
from bosun.core.guard.loopguard import LoopGuard, LoopPolicy
from bosun.core.guard.precheck import check_tool_name, evaluate
from bosun.core.redact import Redactor, redact_value
from bosun.core.task.budget import context_tokens
from bosun.core.task.ledger import Ledger
from bosun.core.task.manifest import FIT_TOKENS as MANIFEST_TOKENS
from bosun.core.task.pressure import pressure
from bosun.core.task.replay import apply_event
from bosun.core.task.state import TaskState
from bosun.server.services.ledger import LedgerService
from bosun.server.services.tasks import TaskService, check_task_id

log = logging.getLogger("bosun.precheck")

if TYPE_CHECKING:
    from bosun.server.config import Config

MAX_TASKS = 256  # loop guards kept warm (LRU); an evicted task is rebuilt from its journal


class InvariantsFile:
    """The rules of one file, reloaded when it changes; the last good rules survive a bad edit."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rules = RuleSet(source=str(path))
        self.error: str | None = None
        self._stamp: tuple[int, int, int] | None = None
        self.loads = 0

    def current(self) -> RuleSet:
        """The rules in force, after re-reading the file if it changed."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            if self._stamp is not None:  # the file was removed: no rules
                self.rules, self.error, self._stamp = RuleSet(source=str(self.path)), None, None
            return self.rules
        except OSError as exc:
            self.error = f"{self.path}: cannot stat ({exc})"
            return self.rules
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp == self._stamp:
            return self.rules
        self._stamp = stamp
        try:
            text = self.path.read_text(encoding="utf-8")
            self.rules = parse_rules(text, str(self.path))
            self.error = None
            self.loads += 1
        except (OSError, UnicodeDecodeError) as exc:
            self.error = f"{self.path}: cannot read ({exc}); keeping the last good rules"
        except BosunError as exc:
            self.error = f"{exc}; keeping the last good rules ({len(self.rules.rules)})"
        return self.rules


@dataclass
class _TaskGuard:
    guard: LoopGuard
    state: TaskState
    ledger: Ledger = field(default_factory=Ledger)  # observe's token accounting, folded alongside
    cursor: int = 0  # last journal seq folded in


class PrecheckService:
    """Loop guards per task plus the invariants file; one per Engine."""

    def __init__(self, config: Config, tasks: TaskService, redactor: Redactor, ledger: LedgerService,
                 policy: LoopPolicy | None = None) -> None:
        self.config = config
        self.tasks = tasks
        self.ledger = ledger
        self.policy = policy or LoopPolicy()
        self.invariants = InvariantsFile(config.invariants_path)
        # observe hashes args after redaction; precheck must identify calls the same way
        self.redactor = redactor
        self._guards: OrderedDict[str, _TaskGuard] = OrderedDict()

    async def caught_up(self, task_id: str) -> _TaskGuard:
        """The task's state and loop guard, caught up with its journal in ONE query.

        The state is folded here with the same reducer TaskService uses, so a precheck
        reads the journal once (the events since the last precheck), not twice.
        """
        entry = self._guards.get(task_id)
        events = await self.tasks.events(task_id, entry.cursor if entry else 0)  # NotFound if unknown
        if entry is None:
            entry = _TaskGuard(LoopGuard(self.policy), TaskState(task_id=task_id))
            self._guards[task_id] = entry
            while len(self._guards) > MAX_TASKS:
                self._guards.popitem(last=False)
        self._guards.move_to_end(task_id)
        for ev in events:
            if ev.seq > entry.cursor:
                entry.state = apply_event(entry.state, ev)
                entry.guard.observe(ev.kind, ev.payload, ev.seq)
                entry.ledger.add_event(ev.kind, ev.payload)
                entry.cursor = ev.seq
        return entry

    async def check(self, task_id: str, tool: str, args: Any, seal: str | None = None) -> dict[str, Any]:
        """The precheck verdict: invariants, then budget, then loop guard, then duplicates."""
        tool = check_tool_name(tool)
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise InvalidInput("args", f"must be a JSON object, got {type(args).__name__}", '{"command": "pytest -q"}')
        canonical_args(args)  # refuses non-serialisable and enormous args before anything else
        task_id = check_task_id(task_id)
        entry = await self.caught_up(task_id)
        state = entry.state
        if state.closed:
            raise InvalidInput("task_id", f"task {task_id} is closed ({state.status})", "start a new task with plan")
        rules = self.invariants.current()
        led = entry.ledger
        spent = context_tokens(led.passed_through_tokens, led.stub_tokens, led.recalled_tokens, led.overhead_tokens)
        known = pressure(state, MANIFEST_TOKENS)["total"]["known"]
        return evaluate(tool, args, state, rules, entry.guard, seal, self.invariants.error,
                        guard_args=redact_value(args, self.redactor), spent_tokens=spent,
                        usd_per_mtok=self._price(), context_tokens=known,
                        prune_threshold=self.config.prune_threshold_tokens)

    def _price(self) -> float | None:
        """USD per million tokens of the configured model (the ledger's price table)."""
        return self.ledger.usd_per_mtok()

    def log_invariants(self) -> None:
        """Read the invariants file once at start, so a broken file is logged before the first call."""
        rules = self.invariants.current()
        if self.invariants.error:
            log.error("invariants: %s", self.invariants.error)
        elif rules.rules:
            log.info("invariants: %d rules from %s", len(rules.rules), self.invariants.path)
