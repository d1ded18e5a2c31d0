"""Harness vocabularies: what the edit, write, read and run tools of coding-agent harnesses do.

Every harness names its tools its own way (Claude Code ``Edit``/``Write``/``Read``/``Bash``,
SWE-agent and OpenHands ``str_replace_editor`` with a ``command`` sub-command, Codex
``apply_patch`` and an argv ``shell``, Cursor ``edit_file``/``run_terminal_cmd``, aider-style
whole-file writes). The loop guard must see an edit as an edit wherever it comes from: a
re-run after an unrecognised edit looks like a loop, and a guard that blocks progress gets
switched off. Invariants read the same answer for the paths a call touches.

``classify`` is the one place these names live; a tool it does not know is ``other`` and
keeps the generic rules (``is_mutating_tool``). Shell text is analysed by ``shell_effects``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bosun.core.actions import EDITOR_TOOLS, shell_command

EDIT_SUBCOMMANDS = frozenset({"create", "str_replace", "insert", "undo_edit", "write", "append", "delete"})
READ_SUBCOMMANDS = frozenset({"view", "read", "show"})
# tool name (lower case) -> the argument keys that name the file it writes, first present wins
_EDIT_TOOLS: dict[str, tuple[str, ...]] = {
    "edit": ("file_path", "path"), "multiedit": ("file_path", "path"), "write": ("file_path", "path"),  # Claude Code
    "notebookedit": ("notebook_path",),
    "edit_file": ("target_file", "path", "file_path"), "search_replace": ("file_path", "target_file", "path"),
    "delete_file": ("target_file", "path", "file_path"), "reapply": ("target_file",),  # Cursor
    # whole-file writes (aider's "whole" format as a tool, Cline, generic agents) and patch-style edits
    "write_file": ("path", "file_path", "filename", "file"), "create_file": ("path", "file_path", "filename", "file"),
    "write_to_file": ("path", "file_path", "filename"), "replace_in_file": ("path", "file_path"),
    "insert_content": ("path", "file_path"), "apply_diff": ("path", "file_path"), "str_replace": ("path", "file_path"),
    "edit_notebook": ("target_notebook", "path"), "replace_file": ("path", "file_path", "filename"),
}
_READ_TOOLS: dict[str, tuple[str, ...]] = {
    "read": ("file_path", "path"), "read_file": ("target_file", "path", "file_path"), "view_file": ("path", "file_path"),
    "open_file": ("path", "file_path"), "cat": ("path",), "notebookread": ("notebook_path",),
    "grep": ("path",), "glob": ("path",), "ls": ("path",), "list_dir": ("relative_workspace_path", "path"),
    "list_files": ("path",), "grep_search": (), "file_search": (), "codebase_search": (), "search_files": ("path",),
}
_PATCH_TOOLS = frozenset({"apply_patch", "patch", "apply_diff_patch"})
_PATCH_KEYS = ("input", "patch", "diff", "content")
# Codex's patch envelope and unified diffs: the files a patch writes
_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$|"
                         r"^\+\+\+ (?:b/)?(.+?)(?:\t.*)?$", re.M)


@dataclass(frozen=True, slots=True)
class ToolAction:
    """What a call does: ``edit`` writes ``paths`` (None: files it cannot name), ``read`` reads ``paths``
    (None: anything), ``run`` runs the shell ``command``; ``other`` is a tool no vocabulary knows."""

    kind: str
    paths: tuple[str, ...] | None = ()
    command: str | None = None


def patch_paths(text: str) -> tuple[str, ...] | None:
    """The files a patch (Codex ``*** Begin Patch`` envelope or a unified diff) writes; None if it names none."""
    found = [next(g for g in m.groups() if g) for m in _PATCH_FILE.finditer(text)]
    found = [p for p in found if p != "/dev/null"]
    return tuple(dict.fromkeys(found)) or None


def _named(args: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[str, ...] | None:
    for key in keys:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return (value.strip(),)
    return None


def classify(tool: str, args: Any) -> ToolAction:
    """The action of calling ``tool`` with ``args``, by the harness vocabularies above."""
    command = shell_command(tool, args)
    if command is not None:
        return ToolAction("run", None, command)
    name = tool.rsplit("__", 1)[-1].rsplit(".", 1)[-1].lower()  # mcp__server__tool, server.tool
    mapping = args if isinstance(args, Mapping) else {}
    if name in EDITOR_TOOLS:
        sub = str(mapping.get("command") or "").lower()
        path = _named(mapping, ("path", "file_path", "file"))
        if sub in READ_SUBCOMMANDS:
            return ToolAction("read", path)
        return ToolAction("edit", path)  # every other sub-command writes (an unknown one is counted as a write)
    if name in _PATCH_TOOLS:
        text = next((v for k in _PATCH_KEYS if isinstance(v := mapping.get(k), str)), None)
        if text is None and isinstance(args, str):
            text = args
        return ToolAction("edit", patch_paths(text) if text else None)
    if name in _EDIT_TOOLS:
        return ToolAction("edit", _named(mapping, _EDIT_TOOLS[name]))
    if name in _READ_TOOLS:
        return ToolAction("read", _named(mapping, _READ_TOOLS[name]) if _READ_TOOLS[name] else None)
    return ToolAction("other", None)
