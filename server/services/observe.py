"""ObserveService: observe a tool's outcome, keep big results out of the prompt, credit drops.

Ordering is the atomicity argument: a result's bytes are stored (and committed) BEFORE the
journal event that points at them is appended, so a process killed in between leaves at most
an unreferenced blob (harmless; identical bytes re-use it), never an event whose ref is
missing. A payload over the limit is refused before anything is written.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bosun.core.actions import (
    args_hash,
    canonical_args,
    clean_text,
    clean_value,
    shell_command,
    short_args,
)
from bosun.core.errors import InvalidInput, NotFound
from bosun.core.guard.shell_effects import analyse
from bosun.core.offload.compaction import ITEM_KEYS, ITEM_KINDS, plan_compaction
from bosun.core.offload.offload import (
    PruneMode,
    answer_tokens,
    get_mode,
    short_ref,
)
from bosun.core.offload.outline import OUTLINE_LITERALS, build_outline
from bosun.core.redact import Redactor, redact_value
from bosun.core.task.state import Event
from bosun.server.blob_file import put_file, sqlite_db
from bosun.server.offload_worker import run_worker
from bosun.server.services.files import FileService
from bosun.server.services.observe_shape import THREAD_ABOVE, Shaped, measure, shape, shape_is_light
from bosun.server.services.recall import RefResolver
from bosun.server.services.tasks import TaskService, check_task_id, check_text
from bosun.server.spooled_values import lookup
from bosun.store.refs import PendingPut, make_ref

if TYPE_CHECKING:
    from bosun.server.config import Config
    from bosun.server.services.ports import OpenStores

# bytes: above this, redaction, counting and the outline run on a worker thread too, so one agent's
# multi-megabyte output does not stall every other agent's calls (below it the hand-off costs more
# than it frees: a 1 MB observe takes a few ms)
OFF_LOOP_ABOVE = 2 * 1024 * 1024
FIND_NEEDLES_ABOVE = 16_384  # bytes: outputs whose outline may search bytes (Utf8Text) get its needles found too
COMPACT_EVERY = 8  # results between compaction checks
COMPACT_MIN_TOKENS = 500  # suggest compaction only when it would free at least this much
MEDIA_TEXT = "text/plain; charset=utf-8"
SPOOL_DIR = "spool"  # under BOSUN_HOME: where bosun run streams a command's output (0600 files)
SPOOL_NAME = re.compile(r"run-[A-Za-z0-9_-]{1,64}\.out")


SPOOL_MARKER = "\n[bosun run: {middle:,} bytes of the middle are not in this ref; " \
               "the spool file {name} under BOSUN_HOME holds every byte]\n"


def read_spool(path: Path, limit: int) -> tuple[str, int, bool]:
    """The spooled output as text, its size in bytes, and whether only its head and tail fit ``limit``."""
    with open(path, "rb") as fh:
        total = os.fstat(fh.fileno()).st_size
        if total <= limit:
            return fh.read().decode("utf-8", "replace"), total, False
        half = limit // 2 - 1024
        head = fh.read(half)
        fh.seek(total - half)
        tail = fh.read(half)
    marker = SPOOL_MARKER.format(middle=total - 2 * half, name=path.name).encode()
    return (head + marker + tail).decode("utf-8", "replace"), total, True


def spool_sources(path: Path, total: int, limit: int) -> tuple[list[dict[str, Any]], bool]:
    """What ``read_spool`` reads, as the offload worker's sources (the same text, never read here)."""
    if total <= limit:
        return [{"path": str(path), "start": 0, "length": total}], False
    half = limit // 2 - 1024
    marker = SPOOL_MARKER.format(middle=total - 2 * half, name=path.name)
    return [{"path": str(path), "start": 0, "length": half}, {"text": marker},
            {"path": str(path), "start": total - half, "length": half}], True


def _test_outcome(facts: dict[str, Any], kind: str) -> bool | None:
    """tests_passed from a test run's outline facts (None when the outcome is unknown)."""
    if kind != "test":
        return None
    if isinstance(facts.get("tests_passed"), bool):  # read from the runner's own summary (core/offload/testrun.py)
        return bool(facts["tests_passed"])
    summary = str(facts.get("summary") or "")
    low = summary.lower()
    if facts.get("failures") or "failed" in low or "error" in low:
        return False
    if ("passed" in low or low.endswith(": ok")) and "failed" not in low:
        return True
    return None


VIEW_TASKS = 64  # tasks whose compaction view is kept warm


@dataclass
class _CompactionView:
    seq: int = 0
    last_activity: float = 0.0
    events: list[Event] = field(default_factory=list)


class ObserveService:
    """observe(kind=result|failure|dropped|decision|constraint|head|contract) for every task."""

    def __init__(self, config: Config, stores: OpenStores, tasks: TaskService, redactor: Redactor,
                 refs: RefResolver, files: FileService) -> None:
        self.config = config
        self.stores = stores
        self.tasks = tasks
        self.files = files
        self.redactor = redactor
        self.resolver = refs
        self.default_mode = get_mode(config.prune_mode).name
        self._views: dict[str, _CompactionView] = {}

    async def run(self, task_id: str, kind: str, tool: str | None = None, args: Any = None, result: Any = None,
                  seal: str | None = None, path: str | None = None, text: str | None = None,
                  refs: list[str] | None = None, mode: str | None = None, offload: bool | None = None,
                  agent: str | None = None, intent: str | None = None) -> dict[str, Any]:
        """One observe call, by kind; ``drift`` joins the answer (lean when the seal is intact)."""
        task_id = check_task_id(task_id)
        drift = await self.tasks.check_seal(task_id, seal) if seal else None
        if kind in ("result", "failure"):
            out = await self.observe_output(task_id, kind == "failure", tool, args, result, mode, offload, agent,
                                            intent=intent)
        elif kind == "dropped":
            out = await self.drop(task_id, list(refs or []) + ([result] if result else []), agent)
        elif kind == "file":
            if path is None:
                raise InvalidInput("path", "kind='file' needs the path of the file read")
            out = await self.files.observe_file(task_id, path, agent)
        else:
            out = await self.observe_text(task_id, kind, text if text is not None else result, agent)
        if drift is not None:  # the full block only when something drifted
            out["drift"] = "ok" if drift.get("verdict") == "ok" else drift
        return out

    # -- observe: result / failure --------------------------------------------------------
    async def observe_output(
        self,
        task_id: str,
        failed: bool,
        tool: str | None,
        args: Any,
        result: Any,
        mode: str | None = None,
        offload: bool | None = None,
        agent: str | None = None,
        intent: str | None = None,
        exit_code: int | None = None,
    ) -> dict[str, Any]:
        """Log a tool result (or failure); offload it behind a stub when that saves tokens.

        ``intent`` (what the agent wants from the output): an offloaded answer also carries the lines
        that bear on it (``focus``). ``exit_code``: journaled with the result (``bosun run``).
        """
        if intent is not None and not isinstance(intent, str):
            raise InvalidInput("intent", "must be text", "e.g. 'why does test_parse fail'")
        if not isinstance(tool, str) or not tool.strip():
            raise InvalidInput("tool", "must name the tool that produced the result", "e.g. 'bash', 'read_file'")
        if result is None:
            raise InvalidInput("result", "is required for kind='result'/'failure'", "the tool's output text")
        spooled = lookup(result)
        if spooled is not None:  # a huge result the HTTP guard decoded into a file (transport/big_call.py)
            spooled.acquire()
            try:
                source = {"path": str(spooled.path), "start": 0, "length": spooled.size}
                return await self.observe_files(task_id, failed, tool, args, [source], spooled.size, mode, offload,
                                                agent, intent, exit_code)
            finally:
                spooled.release()
        if not isinstance(result, str):  # structured output (API tools): stored as its JSON text
            try:
                result = json.dumps(result, ensure_ascii=False, indent=1, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise InvalidInput("result", f"is not text or JSON ({exc})", "the tool's output text") from exc
        try:
            raw = result.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: U+FFFD instead of an error
            result = clean_text(result)
            raw = result.encode("utf-8")
        raw_size = len(raw)
        prune, tool, red_args, a_hash = await self._prepare(task_id, raw_size, tool, args, mode)
        # a large output's outline needles are found by redaction's scan of the bytes too (one pass)
        needles = OUTLINE_LITERALS if raw_size > FIND_NEEDLES_ABOVE else ()
        if raw_size > OFF_LOOP_ABOVE:
            data, redactions, found = await asyncio.to_thread(self.redactor.redact_bytes_finding, raw, needles)
        else:
            data, redactions, found = self.redactor.redact_bytes_finding(raw, needles)
        # the bytes are hashed and stored on the blob writer's thread while this one builds the
        # answer; awaited below, before the journal event that points at them
        stored = self.stores.refs.put_soon(data, MEDIA_TEXT)
        try:
            return await self._observed(task_id, failed, tool, red_args, a_hash, result, data, redactions,
                                        stored, prune, offload, agent,
                                        self.redactor.scrub(clean_text(intent)) if intent else None, exit_code,
                                        found if needles else None)
        finally:
            if not stored.done():  # an error before the await: let the write finish, never orphan it
                await stored.settle()

    async def _prepare(self, task_id: str, nbytes: int, tool: Any, args: Any,
                       mode: str | None) -> tuple[PruneMode, str, Any, str]:
        """What both observe paths check and scrub before the output: its size against the limit, the task's
        prune mode, the tool name and arguments redacted, their hash (and the arguments' size check)."""
        limit = self.config.max_payload_bytes
        if nbytes > limit:
            raise InvalidInput("result", f"is {nbytes} bytes; the limit is {limit} (BOSUN_MAX_PAYLOAD_BYTES)",
                               "split the output, or observe a file with kind='file'")
        state = await self.tasks.get(task_id)
        prune = get_mode(mode or str(state.flags.get("prune_mode") or state.budget.get("prune_mode") or self.default_mode))
        red_args = redact_value(clean_value(args), self.redactor)
        canonical_args(red_args)  # size check of the args (InvalidInput on overflow)
        return prune, self.redactor.scrub(clean_text(tool)), red_args, args_hash(red_args)

    async def observe_files(self, task_id: str, failed: bool, tool: str, args: Any, sources: list[dict[str, Any]],
                            nbytes: int, mode: str | None = None, offload: bool | None = None,
                            agent: str | None = None, intent: str | None = None,
                            exit_code: int | None = None) -> dict[str, Any]:
        """``observe_output`` of an output held in files (``sources``: ranges of files and literal text, about
        ``nbytes`` bytes), never in this process: a child process scrubs, hashes, counts, outlines and shapes
        it (``server/offload_worker.py``), the scrubbed file is stored in chunks, then the journal as usual."""
        prune, tool, red_args, a_hash = await self._prepare(task_id, nbytes, tool, args, mode)
        cfg = self.config
        spool = cfg.home / SPOOL_DIR
        spool.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=spool, prefix="scrubbed-")  # 0600
        os.close(fd)
        scrubbed = Path(name)
        try:
            got = await run_worker({
                "sources": sources, "out": name, "redact_disable": cfg.redact_disable,
                "redact_extra": cfg.redact_extra, "prune": prune.name,
                "command": shell_command(tool, red_args) if red_args is not None else None,
                "offload": offload, "intent": self.redactor.scrub(clean_text(intent)) if intent else None,
                "failed": failed, "sqlite_db": sqlite_db(self.stores.refs), "media_type": MEDIA_TEXT})
            if got.get("stored"):  # the worker stored it (SQLite): committed before the event points at it
                ref = make_ref(str(got["digest"]))
            else:
                ref = await put_file(self.stores.refs, scrubbed, str(got["digest"]), MEDIA_TEXT)
        finally:
            scrubbed.unlink(missing_ok=True)
        return await self._journal(task_id, failed, tool, red_args, a_hash, int(got["nbytes"]), ref,
                                   int(got["tokens"]), Shaped(**got["shaped"]), dict(got["redactions"]), prune,
                                   agent, exit_code)

    async def _observed(
        self,
        task_id: str,
        failed: bool,
        tool: str,
        red_args: Any,
        a_hash: str,
        result: str,
        data: bytes,
        redactions: dict[str, int],
        stored: PendingPut,
        prune: PruneMode,
        offload: bool | None,
        agent: str | None,
        intent: str | None = None,
        exit_code: int | None = None,
        found: dict[bytes, list[int]] | None = None,
    ) -> dict[str, Any]:
        """The rest of ``observe_output``: outline and stub while ``stored`` completes, then the journal
        (``found``: the outline needles' positions in ``data``, from redaction's scan)."""
        command = shell_command(tool, red_args) if red_args is not None else None
        text = data.decode("utf-8", "replace") if redactions else result
        if len(data) > OFF_LOOP_ABOVE:
            measured = await asyncio.to_thread(measure, text, data, redactions, prune, command, offload, failed,
                                               build_outline, found)
        else:
            measured = measure(text, data, redactions, prune, command, offload, failed, build_outline, found)
        ref = await stored.ref()  # committed before the event that points at it
        digest = ref.rsplit(":", 1)[1]
        if len(data) <= OFF_LOOP_ABOVE and shape_is_light(text, measured, offload, intent):
            shaped = shape(text, len(data), digest, measured, redactions, offload, intent, failed)
        else:
            shaped = await self._cpu(len(text), shape, text, len(data), digest, measured, redactions, offload,
                                     intent, failed)
        return await self._journal(task_id, failed, tool, red_args, a_hash, len(data), ref, measured.tokens,
                                   shaped, redactions, prune, agent, exit_code)

    async def _journal(self, task_id: str, failed: bool, tool: str, red_args: Any, a_hash: str, nbytes: int,
                       ref: str, tokens: int, shaped: Shaped, redactions: dict[str, int], prune: PruneMode,
                       agent: str | None, exit_code: int | None) -> dict[str, Any]:
        """Journal an observed output (its bytes stored at ``ref`` already) and answer with ``shaped``."""
        digest = ref.rsplit(":", 1)[1]
        answer = shaped.answer
        payload: dict[str, Any] = {
            "tool": tool, "args_hash": a_hash, "args": short_args(red_args), "sha256": digest, "bytes": nbytes,
            "tokens": tokens, "ref": ref if shaped.offloaded else None, "stored_ref": ref,
            "offloaded": shaped.offloaded, "stub_tokens": shaped.stub_tokens, "response_tokens": shaped.response_tokens,
            "mode": prune.name, "reason": shaped.reason, "content_kind": shaped.outline_kind,
            "redactions": redactions or None,
        }
        if exit_code is not None:
            payload["exit_code"] = exit_code
        events: list[tuple[str, dict[str, Any]]] = []
        if failed:
            payload["error_signature"] = shaped.error_signature
            payload["error"] = shaped.error
            events.append(("tool_failure", payload))
        else:
            payload["result_signature"] = digest[:16]
            events.append(("tool_result", payload))
        outcome = _test_outcome(shaped.facts, shaped.outline_kind or "")
        if outcome is None and failed:  # a test command that failed before its runner summarised (a collection
            command = shell_command(tool, red_args) if red_args is not None else None  # error): not passing
            if command is not None and analyse(command).runs_tests:
                outcome = False
        if outcome is not None:
            events.append(("state_flag", {"name": "tests_passed", "value": outcome, "source": "observe"}))
        # every value above is bosun's own, or came out of the redactor (tool, args, text)
        state = await self.tasks.append_many(task_id, events, agent=agent, scrubbed=True)
        hint = await self._compaction_hint(state, prune)
        if hint is not None:
            answer["compact"] = hint
        return answer

    async def _cpu(self, size: int, fn: Any, *args: Any) -> Any:
        """``fn(*args)``, on a worker thread when the output is large (the event loop serves others)."""
        if size > THREAD_ABOVE:
            return await asyncio.to_thread(fn, *args)
        return fn(*args)

    async def _compaction_hint(self, state: Any, prune: Any) -> dict[str, int] | None:
        """Every ``COMPACT_EVERY`` results, whether ``checkpoint(mode="compact")`` would now free enough.

        The answer then carries ``"compact": {"items", "frees"}`` (~12 tokens): the cue for the
        harness or agent to move cold history out (the replay bench follows it).
        """
        seen = state.event_counts.get("tool_result", 0) + state.event_counts.get("tool_failure", 0)
        if seen == 0 or seen % COMPACT_EVERY:
            return None
        view = await self._compaction_view(state.task_id)
        plan = plan_compaction(view.events, prune, "compact", time.time(), last_activity=view.last_activity)
        frees = plan.freed_tokens - plan.digest_tokens - plan.refill_tokens
        if frees < COMPACT_MIN_TOKENS:
            return None
        return {"items": len(plan.items), "frees": frees}

    async def _compaction_view(self, task_id: str) -> _CompactionView:
        """What a compaction plan reads of a task's journal, loaded incrementally.

        The hint runs every ``COMPACT_EVERY`` results; reading the whole journal each time made
        it grow with the task (22 ms at 2,000 results). Only the events after the last one seen
        are read; the view keeps the kinds the plan reads, with just the fields it reads.
        """
        view = self._views.pop(task_id, None) or _CompactionView()
        self._views[task_id] = view  # most recently used last
        while len(self._views) > VIEW_TASKS:
            self._views.pop(next(iter(self._views)))
        for ev in await self.tasks.events(task_id, since_seq=view.seq):
            if ev.seq <= view.seq:  # a concurrent call for the same task read it first
                continue
            view.seq = ev.seq
            view.last_activity = max(view.last_activity, ev.created_at)
            if ev.kind in ITEM_KINDS:
                kept = {k: ev.payload[k] for k in ITEM_KEYS if k in ev.payload}
                if not isinstance(kept.get("args"), str):
                    kept.pop("args", None)
                view.events.append(Event(task_id, ev.seq, ev.kind, kept, None, ev.created_at))
        return view

    # -- bosun run: a command's output spooled to a file under BOSUN_HOME ---------------------
    async def observe_spool(self, task_id: str | None, session: Any, command: Any, spool: Any,
                            exit_code: Any, intent: Any = None, mode: Any = None) -> dict[str, Any]:
        """Observe the output ``bosun run`` spooled to ``$BOSUN_HOME/spool/<spool>``.

        The command is journaled as a ``bash`` call (``args.command``, so precheck's duplicate and
        loop rules see it) with its exit code; a non-zero exit is a ``tool_failure``. Without a task
        id, ``session`` names one (created on first use: one task per shell session or directory).
        An output over ``BOSUN_MAX_PAYLOAD_BYTES`` is observed as its head and tail around a marker
        line (the answer says ``partial``); the spool file then stays, holding every byte.
        """
        if not isinstance(spool, str) or not SPOOL_NAME.fullmatch(spool):
            raise InvalidInput("spool", "must be a spool file name bosun run made", "e.g. run-1234-abcd.out")
        if not isinstance(command, str) or not command.strip():
            raise InvalidInput("command", "must be the command that ran")
        if not isinstance(exit_code, int) or isinstance(exit_code, bool):
            raise InvalidInput("exit_code", "must be an integer")
        if intent is not None and not isinstance(intent, str):
            raise InvalidInput("intent", "must be text")
        if mode is not None and not isinstance(mode, str):
            raise InvalidInput("mode", "must be a pruning mode name")
        if task_id is None:
            task_id = await self._session_task(session)
        path = self.config.home / SPOOL_DIR / spool
        limit = self.config.max_payload_bytes
        big = self.config.big_observe_bytes
        total = (await asyncio.to_thread(os.stat, path)).st_size
        if big and total > big:  # never read into the daemon: scrubbed and outlined in a child process
            sources, partial = spool_sources(path, total, limit)
            nbytes = sum(int(s["length"]) if "path" in s else len(str(s["text"]).encode()) for s in sources)
            answer = await self.observe_files(task_id, exit_code != 0, "bash", {"command": command}, sources,
                                              nbytes, mode, intent=intent, exit_code=exit_code)
        else:
            text, total, partial = await asyncio.to_thread(read_spool, path, limit)
            answer = await self.observe_output(task_id, exit_code != 0, "bash", {"command": command}, text, mode,
                                               intent=intent, exit_code=exit_code)
        answer["task_id"] = task_id
        if partial:
            answer["partial"] = {"bytes": total, "spool": spool}
        return answer

    async def _session_task(self, session: Any) -> str:
        """The task of a shell session (or directory): ``run-<hash>``, started the first time it is seen."""
        import hashlib

        key = session if isinstance(session, str) and session.strip() else "default"
        task_id = "run-" + hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()[:12]
        try:
            await self.tasks.get(task_id)  # cached after the first call: no journal read
        except NotFound:
            try:
                await self.tasks.start(objective="commands run through bosun run", task_id=task_id)
            except InvalidInput:  # started concurrently by another run of the same session
                pass
        return task_id

    # -- drop receipts ---------------------------------------------------------------------
    async def drop(self, task_id: str, refs: list[str], agent: str | None = None) -> dict[str, Any]:
        """Credit the savings of payloads the agent confirms it evicted from its prompt."""
        if not refs:
            raise InvalidInput("result", "kind='dropped' needs the ref(s) the agent evicted",
                               "result='mem://sha256:…' or refs=[...]")
        events = await self.tasks.events(task_id)
        known: dict[str, int] = {}
        dropped: set[str] = set()
        for ev in events:
            p = ev.payload
            if ev.kind in ("tool_result", "tool_failure", "file_read"):
                for key in ("ref", "stored_ref"):
                    r = p.get(key)
                    if isinstance(r, str):
                        known[r] = int(p.get("tokens") or 0)
            elif ev.kind == "dropped" and isinstance(p.get("ref"), str):
                dropped.add(p["ref"])
        new: list[tuple[str, dict[str, Any]]] = []
        credited = 0
        already: list[str] = []
        for i, r in enumerate(refs):
            full = make_ref(await self.resolver.resolve(r, f"refs[{i}]"))
            if full not in known:
                raise InvalidInput(f"refs[{i}]", f"{r} was not observed in task {task_id}",
                                   "a ref returned by observe for this task")
            if full in dropped or any(full == e[1]["ref"] for e in new):
                already.append(short_ref(full.rsplit(":", 1)[1]))
                continue
            new.append(("dropped", {"ref": full, "tokens": known[full]}))
            credited += known[full]
        answer: dict[str, Any] = {"credited_tokens": credited, "dropped": len(new)}
        if already:
            answer["already_dropped"] = already
        if new:
            share = answer_tokens(answer) // len(new) + 1
            for _, p in new:
                p["response_tokens"] = share
            state = await self.tasks.append_many(task_id, new, agent=agent)
            answer["version"] = state.version
        return answer

    # -- decisions, constraints, head ------------------------------------------------------
    async def observe_text(self, task_id: str, kind: str, text: str | None, agent: str | None = None) -> dict[str, Any]:
        if isinstance(text, str):
            text = clean_text(text)
        if kind in ("head", "contract"):
            if not isinstance(text, str) or not text.strip():
                raise InvalidInput("text", f"kind='{kind}' needs the text of the {kind}")
            return await self.tasks.record_head(task_id, kind, self.redactor.scrub(text), agent=agent)
        body = check_text("text", self.redactor.scrub(text) if isinstance(text, str) else text)
        event = "decision_added" if kind == "decision" else "constraint_added"
        state = await self.tasks.append(task_id, event, {"text": body}, agent=agent)
        return {"recorded": event, "version": state.version, "seal": "sha256:" + state.seal}
