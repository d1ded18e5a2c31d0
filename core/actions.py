"""How bosun names an action: canonical arguments, their hash, the shell command, an error's signature.

The journal (observe) records calls in these forms and the loop guard (precheck) recognises
repeats by them, so both must compute them the same way: this module is the one definition.
Caller text is cleaned (lone surrogates) and cut before it is journaled.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from bosun.core.errors import InvalidInput

MAX_ARGS_BYTES = 256_000  # a proposed call's canonical args beyond this are refused (field "args")

SHELL_TOOLS = frozenset({"bash", "shell", "sh", "zsh", "run", "run_command", "execute", "exec", "terminal",
                         "run_shell", "execute_command", "run_terminal_cmd", "cmd", "powershell"})
_SHELL_ARG_KEYS = ("command", "cmd", "script", "input")
_HEX = re.compile(r"0x[0-9a-fA-F]+|\b[0-9a-f]{12,}\b")
_NUM = re.compile(r"\d+(?:\.\d+)?")
_SPACE = re.compile(r"\s+")
_EXC_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failure|Warning)\b.*)$", re.MULTILINE)
ARG_TEXT_CHARS = 400  # each string in the journaled args is cut to this many characters


def canonical_args(args: Any) -> str:
    """Stable JSON of ``args`` (sorted keys, no spaces): the same call always gives the same text."""
    try:
        text = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput("args", f"not JSON-serialisable ({exc})", "a JSON object of strings, numbers, lists, objects") from exc
    if len(text.encode("utf-8")) > MAX_ARGS_BYTES:
        raise InvalidInput("args", f"too large ({len(text.encode('utf-8'))} bytes of JSON)", f"at most {MAX_ARGS_BYTES} bytes; pass a ref instead of the content")
    return text


def args_hash(args: Any) -> str:
    """sha256 hex of the canonical args (what observe records as ``args_hash``)."""
    return hashlib.sha256(canonical_args(args).encode("utf-8")).hexdigest()


def error_signature(text: str) -> str:
    """A short, stable signature of how a call ended: its last lines, numbers and hex masked.

    An error is what a failed call *ends* with: the exception line when it is among the
    last three non-empty lines (a traceback), else those last three lines. Two runs failing
    "the same way" share it even when line numbers, addresses or timings differ; quoted
    names are kept, so different missing modules differ. A warning printed first and
    followed by real output (a non-zero exit of a linter or a test run) does not define it.
    """
    if not text or not text.strip():
        return ""
    tail = [ln.strip() for ln in text.strip().splitlines() if ln.strip()][-3:]
    exc = [ln for ln in tail if _EXC_LINE.match(ln)]
    line = exc[-1] if exc else " | ".join(tail)
    line = _HEX.sub("<hex>", line)
    line = _NUM.sub("<n>", line)
    return _SPACE.sub(" ", line)[:160]


def shell_command(tool: str, args: Any) -> str | None:
    """The command text when ``tool`` is a shell tool, else None."""
    if isinstance(args, str):
        return args if tool.lower() in SHELL_TOOLS else None
    if not isinstance(args, Mapping):
        return None
    for key in _SHELL_ARG_KEYS:
        value = args.get(key)
        if isinstance(value, str) and (tool.lower() in SHELL_TOOLS or key in ("command", "cmd")):
            return value
    return None


def clean_text(text: str) -> str:
    """Lone UTF-16 surrogates (a JSON ``"\\ud800"``) cannot be UTF-8: they become U+FFFD, never an error."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def clean_value(value: Any) -> Any:
    """``clean_text`` through a JSON value (keys too)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(str(k)): clean_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_value(v) for v in value]
    return value


def short_args(args: Any) -> Any:
    """Args with long strings cut: enough for the loop guard and a human, never a payload."""
    if isinstance(args, str):
        return args if len(args) <= ARG_TEXT_CHARS else args[:ARG_TEXT_CHARS] + "…"
    if isinstance(args, dict):
        return {k: short_args(v) for k, v in args.items()}
    if isinstance(args, list):
        return [short_args(v) for v in args[:50]]
    return args
