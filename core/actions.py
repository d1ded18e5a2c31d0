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
                         "run_shell", "execute_command", "run_terminal_cmd", "cmd", "powershell", "execute_bash",
                         "local_shell", "exec_command", "run_in_terminal", "container.exec"})
# editor tools whose ``command`` argument is a sub-command (view, create, str_replace ...), never shell text:
# SWE-agent's and OpenHands' str_replace_editor, Anthropic's text editor tool
EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool", "text_editor", "file_editor"})
_SHELL_ARG_KEYS = ("command", "cmd", "script", "input")
_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
_SAFE_WORD = re.compile(r"^[\w@%+=:,./-]+$")
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
    tail = _last_lines(text.strip(), 3)
    exc = [ln for ln in tail if _EXC_LINE.match(ln)]
    line = exc[-1] if exc else " | ".join(tail)
    cut = _SAFE_CUT.search(line, _SIGNATURE_READS, 4 * _SIGNATURE_READS) if len(line) > _SIGNATURE_READS else None
    if cut is not None:  # a long line (a minified JSON document): its signature is read from its start
        short = _signature_of(line[: cut.start()])
        if len(short) >= _SIGNATURE_CHARS:
            return short[:_SIGNATURE_CHARS]
    return _signature_of(line)[:_SIGNATURE_CHARS]


_SIGNATURE_CHARS = 160
_SIGNATURE_READS = 2048  # characters of a long line masked first; more only when they give too short a signature
# a character no mask's match can hold or border on but a number's "." (not a word character or white space):
# the masks of a line cut before it are the first part of the whole line's masks (12.5 and 12 both mask as <n>);
# looked for in the 6,144 characters after the first 2,048 only (none there: the whole line is masked)
_SAFE_CUT = re.compile(r"[^\w\s]")


def _signature_of(line: str) -> str:
    """``line`` with hex and numbers masked and white space runs made one space."""
    return _SPACE.sub(" ", _NUM.sub("<n>", _HEX.sub("<hex>", line)))


# white space holding a line break (every break ``splitlines`` knows is white space): one newline leaves the
# stripped non-empty lines as they were
_BLANK_BREAKS = re.compile(r"\s*[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]\s*")


def _last_lines(text: str, n: int) -> list[str]:
    """The last ``n`` non-empty lines of ``text``, stripped, as ``splitlines`` cuts them, read from a suffix
    of the text that grows until it holds one more (its first line may be a part): not every line of a
    megabyte that ends in blank lines."""
    size = 4096
    while True:
        piece = text[-size:]
        if piece.count("\n") > len(piece) // 8:  # many (blank?) lines: the white space around breaks goes first
            piece = _BLANK_BREAKS.sub("\n", piece)
        lines = list(filter(None, map(str.strip, piece.splitlines())))
        if size >= len(text) or len(lines) > n:
            return lines[-n:]
        size *= 4


def shell_command(tool: str, args: Any) -> str | None:
    """The command text when ``tool`` is a shell tool, else None.

    An argv list (Codex's ``shell``: ``["bash", "-lc", "ls"]``) gives its script, or its words
    joined as a shell would read them; an editor tool's ``command`` is a sub-command, not shell text.
    """
    name = tool.rsplit("__", 1)[-1].lower()
    if isinstance(args, str):
        return args if name in SHELL_TOOLS else None
    if not isinstance(args, Mapping) or name in EDITOR_TOOLS:
        return None
    for key in _SHELL_ARG_KEYS:
        value = args.get(key)
        if not (name in SHELL_TOOLS or key in ("command", "cmd")):
            continue
        if isinstance(value, str):
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return _argv_text(value)
    return None


def _argv_text(argv: list[str]) -> str:
    """The shell text of an argv list: ``bash -lc SCRIPT`` is its script; other words are quoted as needed."""
    if len(argv) >= 3 and argv[0].rsplit("/", 1)[-1] in _SHELLS and argv[1] in ("-c", "-lc", "-ic", "-xc"):
        return argv[2]
    return " ".join(w if _SAFE_WORD.match(w) else "'" + w.replace("'", "'\\''") + "'" for w in argv)


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
