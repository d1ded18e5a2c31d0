"""``bosun hook claude-code-pretool``: a Claude Code PreToolUse hook that sends Bash commands through ``bosun run``.

Claude Code runs it before each tool call with the call as JSON on stdin. For a ``Bash`` call it
answers ``hookSpecificOutput.updatedInput`` with the command rewritten to
``python -S -P .../bosun/server/commands/_run_script.py --session SESSION -- bash -c 'ORIGINAL'`` (a command
that is a plain argv, ``pytest -q tests/unit`` say, runs without the ``bash -c``), so a big output
reaches the agent as a stub, a noisy one as its compressed view, a small one unchanged, and
every command lands in the session's task (precheck sees it). Left alone (no output, the call
runs as it was):

- anything that is not a plain foreground Bash call (other tools, ``run_in_background``);
- commands that change the shell's own state (``cd``, ``export``, ``source``, ``alias`` ...): in a
  child ``bash -c`` the change would be lost;
- interactive commands (editors, pagers, REPLs, ``ssh``, ``top``, ``tail -f``, ``git add -p``...);
- commands that already go through bosun; very short commands (their output is small).

Permissions (Claude Code 2.1.197's contract, read in its bundled code): ``updatedInput`` alone is
applied, and Claude Code then runs its permission check on the *rewritten* command, so a rule
written for the original (``Bash(npm test:*)`` allow, ``Bash(rm:*)`` deny) no longer matches it.
The hook therefore never changes whether a call prompts or is refused: a command that a Bash
``deny`` or ``ask`` rule in the settings files may cover is left alone; in ``bypassPermissions``
mode the rest is rewritten with no decision (nothing prompts there); otherwise only a command an
``allow`` rule covers is rewritten, with ``permissionDecision: "allow"`` (Claude Code would have run
it unasked), and anything else is left alone for Claude Code to check as written.
``--permission ask|allow`` rewrites every eligible command with that decision instead.

It never blocks: any failure (bad JSON, an unexpected shape, anything raised) exits 0 with no
output, and the original command runs unchanged. Stdlib only, no daemon call: it decides from
the command text and the settings files in a few milliseconds.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

MIN_CHARS = 6  # "ls", "pwd", "git st": shorter commands are left alone
# builtins whose effect is on the shell itself: lost in a child shell
SHELL_STATE = frozenset(["cd", "pushd", "popd", "export", "unset", "source", ".", "alias", "unalias", "set",
                         "shopt", "ulimit", "umask", "exec", "eval", "declare", "typeset", "readonly",
                         "local", "trap", "hash", "enable", "builtin", "exit", "logout", "fg", "bg", "wait",
                         "disown", "jobs"])
INTERACTIVE = frozenset(["vi", "vim", "nvim", "nano", "emacs", "pico", "ed", "less", "more", "most", "man",
                         "top", "htop", "btop", "watch", "ssh", "telnet", "ftp", "sftp", "screen", "tmux",
                         "mysql", "psql", "sqlite3", "redis-cli", "mongo", "irb", "ipython", "bpython",
                         "ghci", "node-repl", "passwd", "sudo", "su", "login", "fzf", "tig", "mc", "nnn"])
REPLS = frozenset(["python", "python3", "node", "bash", "sh", "zsh", "ruby", "perl", "php", "R", "lua"])
# bash's builtins and keywords (`compgen -b -k`): such a command word needs bash even when it is a plain argv
BASH_WORDS = frozenset([
    ".", ":", "[", "alias", "bg", "bind", "break", "builtin", "caller", "cd", "command", "compgen",
    "complete", "compopt", "continue", "declare", "dirs", "disown", "echo", "enable", "eval", "exec",
    "exit", "export", "false", "fc", "fg", "getopts", "hash", "help", "history", "jobs", "kill", "let",
    "local", "logout", "mapfile", "popd", "printf", "pushd", "pwd", "read", "readarray", "readonly",
    "return", "set", "shift", "shopt", "source", "suspend", "test", "times", "trap", "true", "type",
    "typeset", "ulimit", "umask", "unalias", "unset", "wait", "if", "then", "else", "elif", "fi", "case",
    "esac", "for", "select", "while", "until", "do", "done", "in", "function", "time", "{", "}", "!", "[[",
    "]]", "coproc",
])
# words bash passes on unchanged, split by blanks: no quotes, expansions, globs, redirections, newlines,
# separators or comments
PLAIN_COMMAND = re.compile(r"[A-Za-z0-9_@%+=:,./-]+(?:[ \t]+[A-Za-z0-9_@%+=:,./-]+)*")
SEGMENT = re.compile(r"&&|\|\||[;|&\n()]")
INTERACTIVE_FLAGS = re.compile(
    r"\bgit\s+(?:add|checkout|reset|restore|stash)\s+(?:[^|;&]*\s)?-(?:p|-patch|i|-interactive)\b|"
    r"\bgit\s+rebase\s+(?:[^|;&]*\s)?-(?:i|-interactive)\b|\bgit\s+commit\b(?![^|;&]*\s-(?:[a-z]*m|-message|F|-file))|"
    r"\btail\s+(?:[^|;&]*\s)?-[a-zA-Z]*[fF]\b|\bdocker\s+(?:run|exec)\s+(?:[^|;&]*\s)?-[a-z]*[it]|"
    r"\bkubectl\s+exec\s+(?:[^|;&]*\s)?-[a-z]*[it]|\bjournalctl\s+(?:[^|;&]*\s)?-f\b")


def _words(segment: str) -> list[str]:
    try:
        return shlex.split(segment, comments=True)
    except ValueError:
        return segment.split()


def _first_command(words: list[str]) -> str:
    """The command word of a segment, past ``VAR=x`` assignments, ``time``/``env``/``nohup``/``command``."""
    for w in words:
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", w) or w in ("time", "env", "nohup", "command", "!", "{"):
            continue
        return w.rsplit("/", 1)[-1]
    return ""


def leave_alone(command: str) -> str | None:
    """Why ``command`` must run as it is (None when it can go through bosun run)."""
    text = command.strip()
    if len(text) < MIN_CHARS:
        return "short"
    if re.search(r"(?:^|[\s|;&(])(?:bosun|bosun-mcp)\s+(?:run|observe|recall)\b|bosun\.server\.commands\.run|"
                 r"/server/commands/(?:_run_script|run)\.py\b", text):
        return "already bosun"
    if INTERACTIVE_FLAGS.search(text):
        return "interactive"
    for segment in SEGMENT.split(text):
        words = _words(segment)
        first = _first_command(words)
        if not first:
            continue
        if first in SHELL_STATE:
            return "shell state"
        if first in INTERACTIVE:
            return "interactive"
        if first in REPLS and len([w for w in words if not w.startswith("-")]) == 1 and "<<" not in text:
            return "interactive"  # a bare interpreter is a REPL
    return None


def plain_argv(command: str) -> list[str] | None:
    """The words of ``command`` when bash would run them as one plain argv (no shell syntax at all, the first
    word an executable rather than a builtin or an assignment); None when it needs bash."""
    if not PLAIN_COMMAND.fullmatch(command.strip(" \t")):
        return None
    words = command.split()
    if words[0] in BASH_WORDS or "=" in words[0]:
        return None
    return words


def rewrite(command: str, session: str | None, runner: list[str]) -> str:
    """The command that runs ``command`` through bosun run: as its argv when it is a plain one (no shell to
    start), else in a child bash (pipes, heredocs, globs kept)."""
    parts = list(runner)
    if session:
        parts += ["--session", f"claude-code:{session}"]
    argv = plain_argv(command)
    parts += ["--", *argv] if argv is not None else ["--", "bash", "-c", command]
    return " ".join(shlex.quote(p) for p in parts)


def runner() -> list[str]:
    """How the rewritten command starts bosun run: this interpreter without ``site`` (``-S``: a third of the
    start-up; run.py loads it only if it must start the daemon) on the ``_run_script.py`` stub, and ``-P`` so
    the script's directory (which holds a ``select.py``) is not put first on ``sys.path``."""
    import os

    return [sys.executable, "-S", "-P", os.path.join(os.path.dirname(os.path.abspath(__file__)), "_run_script.py")]


def settings_files(cwd: str | None) -> list[str]:
    """The settings files whose permission rules Claude Code applies to a call: managed, user, project, local."""
    import os

    files = ["/etc/claude-code/managed-settings.json", os.path.expanduser("~/.claude/settings.json")]
    for root in dict.fromkeys(r for r in (os.environ.get("CLAUDE_PROJECT_DIR"), cwd) if r):
        files += [os.path.join(root, ".claude", "settings.json"), os.path.join(root, ".claude", "settings.local.json")]
    return files


def bash_rules(files: list[str]) -> dict[str, list[str]]:
    """The Bash rule contents under ``permissions.allow/deny/ask`` ("*" for a whole-tool ``Bash`` rule).

    A file that cannot be read or parsed counts as a deny of everything: the hook then leaves every
    command for Claude Code to check as written, which is never less safe than rewriting it."""
    rules: dict[str, list[str]] = {"allow": [], "deny": [], "ask": []}
    for path in files:
        try:
            with open(path, encoding="utf-8") as fh:
                settings = json.load(fh)
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            rules["deny"].append("*")
            continue
        perms = settings.get("permissions") if isinstance(settings, dict) else None
        if not isinstance(perms, dict):
            continue
        for kind, found_rules in rules.items():
            listed = perms.get(kind)
            for rule in listed if isinstance(listed, list) else []:
                found = re.fullmatch(r"\s*Bash\s*(?:\((.*)\))?\s*", str(rule), re.S)
                if found:
                    found_rules.append(found.group(1) if found.group(1) else "*")
    return rules


def may_cover(rule: str, command: str) -> bool:
    """Whether a deny/ask rule could apply to ``command`` (over-matching is the safe side): any literal piece
    of it appears in the command text."""
    pieces = [p.strip() for p in re.split(r":?\*", rule) if p.strip()]
    return not pieces or any(p in command for p in pieces)


def allows(rule: str, command: str) -> bool:
    """Whether an allow rule certainly covers ``command`` (under-matching is the safe side): one simple command
    (no separators, pipes or substitutions), matched as Claude Code matches it: ``prefix:*`` by its words,
    ``*`` as any text, otherwise exactly."""
    text = command.strip()
    if re.search(r"[;&|\n`]|\$\(|<\(|>\(", text):
        return False
    if rule == "*":
        return True
    if rule.endswith(":*"):
        prefix = rule[:-2].strip()
        return bool(prefix) and (text == prefix or text.startswith(prefix + " "))
    if "*" in rule:
        return re.fullmatch(".*".join(re.escape(p) for p in rule.split("*")), text, re.S) is not None
    return text == rule.strip()


def permission_for(event: dict[str, Any], command: str, forced: str | None) -> tuple[bool, str | None]:
    """(rewrite?, the permission decision to send) so that rewriting never changes whether a call prompts."""
    cwd = event.get("cwd")
    rules = bash_rules(settings_files(cwd if isinstance(cwd, str) else None))
    if any(may_cover(r, command) for r in rules["deny"] + rules["ask"]):
        return False, None  # Claude Code must see the original to apply these
    if forced:
        return True, forced
    if event.get("permission_mode") == "bypassPermissions":
        return True, None
    if any(allows(r, command) for r in rules["allow"]):
        return True, "allow"
    return False, None  # it would prompt (or be auto-approved by Claude Code's own judgement): leave it be


def decide(event: Any, permission: str | None = None) -> dict[str, Any] | None:
    """The hook's answer for one PreToolUse event; None to leave the call unchanged."""
    if not isinstance(event, dict) or event.get("tool_name") != "Bash":
        return None
    tool_input = event.get("tool_input")
    if not isinstance(tool_input, dict) or tool_input.get("run_in_background"):
        return None
    command = tool_input.get("command")
    if not isinstance(command, str) or leave_alone(command) is not None:
        return None
    rewrite_it, decision = permission_for(event, command, permission)
    if not rewrite_it:
        return None
    session = event.get("session_id")
    new = rewrite(command, session if isinstance(session, str) and session else None, runner())
    out: dict[str, Any] = {"hookEventName": "PreToolUse", "updatedInput": {**tool_input, "command": new}}
    if decision:
        out["permissionDecision"] = decision
        out["permissionDecisionReason"] = "bosun run keeps a large output out of the context"
    return {"hookSpecificOutput": out}


def run_pretool(args: argparse.Namespace) -> int:
    """Read one PreToolUse event, print the rewrite or nothing; always exit 0 (never blocks)."""
    try:
        raw = sys.stdin.buffer.read()
        answer = decide(json.loads(raw.decode("utf-8")) if raw.strip() else None, getattr(args, "permission", None))
        if answer is not None:
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()
    except Exception:  # the original command runs unchanged
        return 0
    return 0
