"""``bosun hook settings``: the Claude Code settings that run bosun's two hooks, in their lean form.

The hook command in the settings is what every prompt and every Bash call pays for. The console
script (``bosun hook claude-code``) starts Python with ``site`` and the package finder; the lean
form runs this interpreter without them (``python -S -P .../_hook_script.py claude-code``), which
only this installation can spell out (its interpreter and its path), so it is printed here rather
than written by hand. ``--write FILE`` merges the hooks into a settings file, replacing bosun's
earlier entries and keeping every other hook.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

HOOK_TIMEOUT_S = 5
SCRIPT = "_hook_script.py"


def lean_command(harness: str, extra: list[str] | None = None) -> str:
    """The shell command that runs ``bosun hook HARNESS`` without ``site``, with this interpreter."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), SCRIPT)
    return shlex.join([sys.executable, "-S", "-P", script, harness, *(extra or [])])


def snippet(home: str | None = None, permission: str | None = None) -> dict[str, Any]:
    """The ``hooks`` block: UserPromptSubmit routes the prompt, PreToolUse (Bash) goes through bosun run."""
    extra = ["--home", str(Path(home).expanduser().resolve())] if home else []
    pretool_extra = [*extra, *(["--permission", permission] if permission else [])]
    return {"hooks": {
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": lean_command("claude-code", extra),
                                         "timeout": HOOK_TIMEOUT_S}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
                                                      "command": lean_command("claude-code-pretool", pretool_extra),
                                                      "timeout": HOOK_TIMEOUT_S}]}],
    }}


def is_bosun_hook(command: str) -> bool:
    return SCRIPT in command or "bosun hook claude-code" in command or "bosun.server.commands.hook" in command


def merge(settings: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    """``settings`` with bosun's hooks replaced by ``ours``; every other hook and setting kept."""
    merged = dict(settings)
    hooks = dict(merged.get("hooks") or {})
    for event, groups in ours["hooks"].items():
        kept = []
        for group in hooks.get(event) or []:
            inner = [h for h in group.get("hooks") or [] if not is_bosun_hook(str(h.get("command", "")))]
            if inner:
                kept.append({**group, "hooks": inner})
        hooks[event] = kept + groups
    merged["hooks"] = hooks
    return merged


def run_settings(args: argparse.Namespace) -> int:
    ours = snippet(getattr(args, "home", None), getattr(args, "permission", None))
    target = getattr(args, "write", None)
    if not target:
        print(json.dumps(ours, indent=2))
        return 0
    path = Path(target).expanduser()
    try:
        current = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError) as exc:
        print(f"bosun hook settings: cannot read {path}: {exc}; nothing written", file=sys.stderr)
        return 2
    if not isinstance(current, dict):
        print(f"bosun hook settings: {path} is not a JSON object; nothing written", file=sys.stderr)
        return 2
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(merge(current, ours), indent=2) + "\n")
    os.replace(tmp, path)
    print(f"bosun hook settings: the UserPromptSubmit and PreToolUse hooks are in {path}", file=sys.stderr)
    return 0
