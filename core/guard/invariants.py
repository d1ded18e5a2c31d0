"""Invariants: project guard rails in TOML, checked before an action runs (OSIRIS section 8).

A rule::

    [[invariant]]
    id = "tests-before-commit"                  # unique, required
    when = { tool = "git.commit" }              # what it applies to (all given keys must match)
    require = { state = "tests_passed" }        # what must hold; no require = always fires
    verdict = "block"                           # block (default) | warn
    message = "Cannot commit while tests are failing"   # required

``when`` keys:
  * ``tool``: tool name or glob (``git.*``, ``mcp__github__*``); a list means any of them;
  * ``path_glob``: glob over the paths the call touches (a list means any); ``tests/**`` also
    matches ``/repo/tests/x.py``. Paths come from path-like arguments (``path``, ``file``,
    ``file_path``, ``paths`` ...) and, for shell commands, from what the command writes;
  * ``access``: ``write`` (default: only calls that change the path: shell writes, mutating
    tools such as ``write_file``/``edit_file``) or ``any`` (reads count too);
  * ``args``: ``{name = "glob"}`` over argument values (``"re:<regex>"`` for a regex), e.g.
    ``args = { command = "git commit*" }``.

``require`` keys (all given must hold): ``state`` (a task flag that must be truthy, or equal
``value`` when given), ``step`` (a plan step that must be completed).

A malformed file is an error naming the line and the field; the server keeps the last
good rules (see ``server/tools/precheck.py``).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bosun.core.errors import InvalidInput
from bosun.core.guard.globs import GlobError, compile_glob, glob_match, path_match
from bosun.core.guard.harness import classify
from bosun.core.guard.loopguard import is_mutating_tool
from bosun.core.guard.shell_effects import analyse

VERDICTS = ("block", "warn")
ACCESS = ("write", "any")
_RULE_KEYS = {"id", "when", "require", "verdict", "message"}
_WHEN_KEYS = {"tool", "path_glob", "access", "args"}
_REQUIRE_KEYS = {"state", "value", "step"}
_PATH_KEYS = ("path", "paths", "file", "files", "file_path", "filepath", "filename", "target", "target_file",
              "dest", "destination", "source", "src", "dir", "directory", "notebook_path", "relative_path")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")


class InvariantError(InvalidInput):
    """A rule file problem: names the file, the line and the field."""

    def __init__(self, source: str, line: int | None, field_name: str, problem: str) -> None:
        where = f"{source}:{line}" if line else source
        self.line = line
        super().__init__(f"{where}: {field_name}", problem)


@dataclass(frozen=True)
class Rule:
    """One validated invariant."""

    id: str
    message: str
    verdict: str = "block"
    tools: tuple[str, ...] = ()
    path_globs: tuple[str, ...] = ()
    access: str = "write"
    arg_patterns: tuple[tuple[str, str], ...] = ()
    require_state: str | None = None
    require_value: Any = None
    has_value: bool = False
    require_step: str | None = None
    line: int = 0

    def to_toml_dict(self) -> dict[str, Any]:
        """The rule as a TOML table (what ``bosun invariants add`` appends)."""
        when: dict[str, Any] = {}
        if self.tools:
            when["tool"] = self.tools[0] if len(self.tools) == 1 else list(self.tools)
        if self.path_globs:
            when["path_glob"] = self.path_globs[0] if len(self.path_globs) == 1 else list(self.path_globs)
            when["access"] = self.access
        if self.arg_patterns:
            when["args"] = dict(self.arg_patterns)
        out: dict[str, Any] = {"id": self.id, "when": when}
        require: dict[str, Any] = {}
        if self.require_state:
            require["state"] = self.require_state
            if self.has_value:
                require["value"] = self.require_value
        if self.require_step:
            require["step"] = self.require_step
        if require:
            out["require"] = require
        out["verdict"] = self.verdict
        out["message"] = self.message
        return out


@dataclass(frozen=True)
class Hit:
    """A rule that fired for a proposed call."""

    rule: Rule
    reason: str

    def to_dict(self) -> dict[str, Any]:
        out = {"source": "invariant", "id": self.rule.id, "verdict": self.rule.verdict, "reason": self.reason}
        if self.rule.verdict == "block":
            out["required_action"] = self.required_action()
        return out

    def required_action(self) -> str:
        r = self.rule
        if r.require_state:
            want = f"= {r.require_value!r}" if r.has_value else "true"
            return f"make task state '{r.require_state}' {want} first (e.g. run the tests and report with observe)"
        if r.require_step:
            return f"complete plan step '{r.require_step}' first"
        return "do not run this action; ask for explicit approval or choose another action"


@dataclass
class RuleSet:
    """Validated rules of one file."""

    rules: list[Rule] = field(default_factory=list)
    source: str = ""

    def evaluate(self, tool: str, args: Any, flags: Mapping[str, Any], completed: Sequence[str]) -> list[Hit]:
        """The rules that fire for ``tool(args)`` given the task's flags and completed steps."""
        hits: list[Hit] = []
        touched: tuple[list[str], list[str]] | None = None
        for rule in self.rules:
            if rule.tools and not any(glob_match(t, tool) for t in rule.tools):
                continue
            if rule.arg_patterns and not _args_match(rule.arg_patterns, args):
                continue
            matched_path = None
            if rule.path_globs:
                if touched is None:
                    touched = touched_paths(tool, args)
                candidates = touched[0] if rule.access == "write" else touched[0] + touched[1]
                matched_path = next((p for p in candidates if any(path_match(g, p) for g in rule.path_globs)), None)
                if matched_path is None:
                    continue
            unmet = _unmet(rule, flags, completed)
            if unmet is None and (rule.require_state or rule.require_step):
                continue
            what = f"path {matched_path!r}" if matched_path else f"tool {tool!r}"
            reason = f"{rule.message} [{rule.id}: {what}" + (f"; {unmet}]" if unmet else "]")
            hits.append(Hit(rule, reason))
        hits.sort(key=lambda h: 0 if h.rule.verdict == "block" else 1)
        return hits


def _unmet(rule: Rule, flags: Mapping[str, Any], completed: Sequence[str]) -> str | None:
    """Why the rule's requirement does not hold, or None when it holds."""
    if rule.require_state:
        have = flags.get(rule.require_state)
        if rule.has_value:
            if have != rule.require_value:
                return f"requires {rule.require_state} = {rule.require_value!r}, task has {have!r}"
        elif not have:
            return f"requires {rule.require_state}, task has {have!r}"
    if rule.require_step and rule.require_step not in completed:
        return f"requires plan step {rule.require_step!r} completed"
    return None


def _args_match(patterns: tuple[tuple[str, str], ...], args: Any) -> bool:
    if not isinstance(args, Mapping):
        return False
    for name, pattern in patterns:
        if name not in args:
            return False
        value = args[name]
        text = value if isinstance(value, str) else str(value)
        if pattern.startswith("re:"):
            if not re.search(pattern[3:], text):
                return False
        elif not glob_match(pattern, text):
            return False
    return True


def touched_paths(tool: str, args: Any) -> tuple[list[str], list[str]]:
    """(paths written, paths read) by a call, as far as its arguments tell (the harness vocabularies first:
    ``MultiEdit`` writes, ``str_replace_editor view`` reads, ``apply_patch`` writes the files its patch names)."""
    action = classify(tool, args)
    if action.kind == "run" and action.command is not None:
        effect = analyse(action.command)
        writes = list(effect.targets or ())
        return writes, list(effect.reads or ())
    if action.kind == "edit" and action.paths:
        return list(action.paths), []
    if action.kind == "read" and action.paths:
        return [], list(action.paths)
    named: list[str] = []
    if isinstance(args, Mapping):
        for key in _PATH_KEYS:
            value = args.get(key)
            if isinstance(value, str) and value:
                named.append(value)
            elif isinstance(value, list):
                named.extend(v for v in value if isinstance(v, str) and v)
    if action.kind == "edit" or (action.kind == "other" and is_mutating_tool(tool)):
        return named, []
    return [], named


# ---------------------------------------------------------------- parsing and validation
def _line_of(text: str, index: int, field_name: str | None) -> int | None:
    """1-based line of ``field_name`` inside the ``index``-th ``[[invariant]]`` table (or of its header)."""
    lines = text.splitlines()
    headers = [i for i, ln in enumerate(lines) if re.match(r"\s*\[\[\s*invariant\s*\]\]", ln)]
    if index >= len(headers):
        return None
    start = headers[index]
    end = headers[index + 1] if index + 1 < len(headers) else len(lines)
    if field_name:
        key = field_name.split(".")[0]
        for i in range(start, end):
            if re.match(rf"\s*{re.escape(key)}\s*=", lines[i]) or re.match(rf"\s*\[\s*invariant\.{re.escape(key)}\s*\]", lines[i]):
                return i + 1
    return start + 1


def _strings(value: Any, where: str, fail: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        fail(where, "must be a non-empty string or a list of non-empty strings")
    return tuple(value)


def parse_rules(text: str, source: str = "invariants.toml") -> RuleSet:
    """Parse and validate a rule file's text; InvariantError names the line and the field."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise InvariantError(source, int(m.group(1)) if m else None, "toml", f"not valid TOML: {exc}") from exc
    extra = set(data) - {"invariant"}
    if extra:
        raise InvariantError(source, None, sorted(extra)[0], "unknown top-level key; rules go in [[invariant]] tables")
    raw = data.get("invariant", [])
    if not isinstance(raw, list):
        raise InvariantError(source, None, "invariant", "must be an array of tables: write [[invariant]]")
    rules: list[Rule] = []
    seen: dict[str, int] = {}
    for index, table in enumerate(raw):
        rules.append(_parse_rule(text, source, index, table, seen))
    return RuleSet(rules, source)


def _parse_rule(text: str, source: str, index: int, table: Any, seen: dict[str, int]) -> Rule:
    def fail(field_name: str, problem: str) -> Any:
        raise InvariantError(source, _line_of(text, index, field_name), f"invariant[{index}].{field_name}", problem)

    if not isinstance(table, dict):
        fail("", "must be a table")
    unknown = set(table) - _RULE_KEYS
    if unknown:
        fail(sorted(unknown)[0], f"unknown key (known: {', '.join(sorted(_RULE_KEYS))})")
    rid = table.get("id")
    if not isinstance(rid, str) or not _ID.match(rid):
        fail("id", "required: a short name of letters, digits, '-', '_', '.', ':' (e.g. \"tests-before-commit\")")
    if rid in seen:
        fail("id", f"duplicate id {rid!r} (first at line {seen[rid]})")
    line = _line_of(text, index, None) or 0
    seen[rid] = line
    message = table.get("message")
    if not isinstance(message, str) or not message.strip():
        fail("message", "required: the text the agent sees when the rule fires")
    verdict = table.get("verdict", "block")
    if verdict not in VERDICTS:
        fail("verdict", f"must be one of {', '.join(VERDICTS)}, got {verdict!r}")
    when = _subtable(table, "when", _WHEN_KEYS, 'when = { tool = "git.commit" }', fail)
    if not when:
        fail("when", "must name at least one of tool, path_glob, args (a rule that matches everything is a mistake)")
    tools: tuple[str, ...] = ()
    globs: tuple[str, ...] = ()
    if "tool" in when:
        tools = _strings(when["tool"], "when.tool", fail)
        for t in tools:
            _glob_ok(t, "when.tool", fail)
    if "path_glob" in when:
        globs = _strings(when["path_glob"], "when.path_glob", fail)
        for g in globs:
            _glob_ok(g, "when.path_glob", fail)
    access = when.get("access", "write")
    if access not in ACCESS:
        fail("when.access", f"must be one of {', '.join(ACCESS)}, got {access!r}")
    arg_patterns: list[tuple[str, str]] = []
    if "args" in when:
        if not isinstance(when["args"], dict) or not when["args"]:
            fail("when.args", "must be a table of argument name = glob (or \"re:<regex>\")")
        for name, pattern in when["args"].items():
            if not isinstance(pattern, str) or not pattern:
                fail(f"when.args.{name}", "must be a glob string or \"re:<regex>\"")
            if pattern.startswith("re:"):
                try:
                    re.compile(pattern[3:])
                except re.error as exc:
                    fail(f"when.args.{name}", f"invalid regex {pattern[3:]!r}: {exc}")
            else:
                _glob_ok(pattern, f"when.args.{name}", fail)
            arg_patterns.append((str(name), pattern))
    require = _subtable(table, "require", _REQUIRE_KEYS, 'require = { state = "tests_passed" }', fail)
    state = require.get("state")
    if state is not None and (not isinstance(state, str) or not state):
        fail("require.state", "must be a flag name such as \"tests_passed\"")
    if "value" in require and state is None:
        fail("require.value", "needs require.state (the flag whose value is required)")
    step = require.get("step")
    if step is not None and (not isinstance(step, str) or not step.strip()):
        fail("require.step", "must be the text of a plan step")
    return Rule(
        id=rid, message=message.strip(), verdict=verdict, tools=tools, path_globs=globs, access=access,
        arg_patterns=tuple(arg_patterns), require_state=state, require_value=require.get("value"),
        has_value="value" in require, require_step=step.strip() if isinstance(step, str) else None, line=line,
    )


def _subtable(table: Mapping[str, Any], key: str, known: frozenset[str] | set[str], example: str,
              fail: Any) -> dict[str, Any]:
    """``table[key]`` as a table of known keys (empty when absent); ``fail`` names the field otherwise."""
    sub = table.get(key, {})
    if not isinstance(sub, dict):
        fail(key, f"must be a table, e.g. {example}")
    unknown = set(sub) - known
    if unknown:
        fail(f"{key}.{sorted(unknown)[0]}", f"unknown key (known: {', '.join(sorted(known))})")
    return sub


def _glob_ok(pattern: str, where: str, fail: Any) -> None:
    try:
        compile_glob(pattern)
    except GlobError as exc:
        fail(where, f"invalid glob {pattern!r}: {exc}")
