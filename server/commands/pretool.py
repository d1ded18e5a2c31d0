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

It never blocks: any failure (bad JSON, an unexpected shape, anything raised) exits 0 with no
output, and the original command runs unchanged. Stdlib only, no daemon call: it decides from
the command text alone in a few milliseconds.
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
    session = event.get("session_id")
    new = rewrite(command, session if isinstance(session, str) and session else None, runner())
    out: dict[str, Any] = {"hookEventName": "PreToolUse", "updatedInput": {**tool_input, "command": new}}
    if permission:
        out["permissionDecision"] = permission
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
