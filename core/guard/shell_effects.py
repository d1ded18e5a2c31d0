"""What a shell command does to the world: writes files, or only reads and runs.

The loop guard must not call "run the tests again" a loop when the agent edited
a file in between. Shell agents (one bash command per step) edit with
``sed -i``, ``cat > file <<EOF``, ``patch``, ``git apply``, python scripts that
open files for writing, ``mv``/``cp``/``rm`` and installers. This module reads a
command and says whether it may change files (``writes``), which paths it names
as targets, and which program family it runs (``family``, used to group failures).

It errs toward "writes": a missed edit would make a legitimate re-run look like a
loop (a false block), while a spurious edit only costs a missed detection.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from bosun.core.actions import EDITOR_TOOLS
from bosun.core.guard.harness import READ_SUBCOMMANDS, patch_paths

_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
# output redirection to a file: `> f`, `>> f`, `2> f`, `&> f`; not `>&2`, `2>&1`, `/dev/null`
_REDIRECT = re.compile(r"(?:^|[^<>&0-9])(?:[0-9]|&)?>>?(?!&)\s*([^\s;&|<>()]+)")
_QUOTED = re.compile(r"'[^']*'|\"(?:[^\"\\\\]|\\\\.)*\"")
_PY_WRITES = re.compile(
    r"open\([^)]*['\"](?:w|a|x|r\+|wb|ab|w\+|a\+)['\"]"
    r"|mode\s*=\s*['\"][wax]"
    r"|\.write_text\(|\.write_bytes\(|\.write\("
    r"|os\.(?:remove|unlink|rename|replace|makedirs|mkdir|rmdir)\("
    r"|shutil\.(?:copy|copy2|copyfile|move|rmtree|copytree)\("
    r"|fileinput\.(?:input|FileInput)\([^)]*inplace"
    r"|subprocess\.|os\.system\("
    r"|call_command\('makemigrations|call_command\(\"makemigrations"
)
# programs that change files or installed state whatever their arguments
_WRITERS = frozenset(
    {
        "mv", "cp", "rm", "touch", "mkdir", "rmdir", "ln", "chmod", "chown", "truncate", "dd", "install",
        "patch", "tee", "unzip", "gunzip", "tar", "rsync", "black", "autopep8", "isort", "yapf",
        "2to3", "ruff-format", "apt", "apt-get", "npm", "yarn", "pnpm", "cargo", "go", "make", "cmake",
        "ed", "ex", "vi", "vim", "nano", "django-admin", "conda", "poetry", "uv", "pip", "pip3",
    }
)
_GIT_WRITES = frozenset(
    {"apply", "am", "checkout", "switch", "restore", "reset", "stash", "merge", "rebase", "cherry-pick",
     "revert", "commit", "pull", "clean", "rm", "mv", "init", "clone", "add"}
)
_TEST_WORDS = re.compile(r"\b(?:pytest|py\.test|unittest|runtests\.py|tox|nox|manage\.py\s+test|go\s+test|npm\s+test|cargo\s+test|make\s+test)\b")
_READERS = frozenset(
    {"cat", "head", "tail", "nl", "sed", "grep", "egrep", "fgrep", "rg", "ls", "wc", "awk", "find", "diff",
     "stat", "file", "less", "more", "tree", "sort", "uniq", "cut", "tr", "echo", "printf", "true", "pwd",
     "which", "du", "readlink", "realpath", "basename", "dirname", "od", "xxd", "hexdump", "md5sum", "sha256sum",
     "column", "fold", "tac", "rev", "jq", "comm", "cmp"}
)
# readers whose first operand is a script or pattern, not a file
_PATTERN_FIRST = frozenset({"grep", "egrep", "fgrep", "rg", "sed", "awk"})
_ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*$")
_WRAPPERS = frozenset({"sudo", "env", "time", "timeout", "nice", "nohup", "xargs", "command", "exec", "stdbuf"})


@dataclass(frozen=True)
class ShellEffect:
    """The effects of one shell command, as far as its text tells."""

    writes: bool
    targets: tuple[str, ...] | None = ()  # paths written; None = unknown (treat as "anything may have changed")
    reads: tuple[str, ...] | None = None  # paths the output depends on; None = unknown (depends on everything)
    family: str = ""
    runs_tests: bool = False
    scripts_run: tuple[str, ...] = ()
    created_scripts: dict[str, bool] = field(default_factory=dict)  # path -> does its body write files
    programs: tuple[str, ...] = ()  # the program of every segment ("python -m pytest" keeps its module)
    editor_writes: bool = False  # every write is an editor tool's (str_replace_editor, apply_patch): none if it failed


def _strip_heredocs(command: str) -> tuple[str, list[tuple[str, str]]]:
    """Remove heredoc bodies; return the command lines and (opening line, body) pairs."""
    lines = command.split("\n")
    out: list[str] = []
    docs: list[tuple[str, str]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        for match in _HEREDOC.finditer(line):
            delim = match.group(2)
            body: list[str] = []
            while i < len(lines) and lines[i].strip() != delim:
                body.append(lines[i])
                i += 1
            i += 1  # the delimiter line
            docs.append((line, "\n".join(body)))
    return "\n".join(out), docs


_TOKEN = re.compile(r"""'[^']*'?|"(?:[^"\\]|\\.)*"?|\\\n|\\.|\\$|>&|&>|&&|\|\||[;|&\n]|[^'"\\;|&\n>]+|>""", re.S)
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&", "\n"})


def _segments(text: str) -> list[str]:
    """Split a command line at ``; && || | & newline`` outside quotes (sed scripts and python -c stay whole)."""
    out: list[str] = []
    buf: list[str] = []
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token == "\\\n":  # a line continuation joins lines
            continue
        if token in _SEPARATORS:
            out.append("".join(buf))
            buf = []
        else:
            buf.append(token)
    out.append("".join(buf))
    return [seg for seg in out if seg.strip()]


_WORD = re.compile(r"""(?:'[^']*'?|"(?:[^"\\]|\\.)*"?|\\.?|[^\s'"\\])+""", re.S)
_UNQUOTE = re.compile(r"""'([^']*)'?|"((?:[^"\\]|\\.)*)"?|\\(.?)""", re.S)
_DQ_ESCAPE = re.compile(r"""\\([\\"$`])""")


def _unquote(match: re.Match[str]) -> str:
    if match.group(1) is not None:
        return match.group(1)
    if match.group(2) is not None:
        return _DQ_ESCAPE.sub(r"\1", match.group(2))
    return match.group(3) or ""


def _words(segment: str) -> list[str]:
    """Shell words with quotes removed (a fast, forgiving shlex.split: unclosed quotes run to the end)."""
    return [_UNQUOTE.sub(_unquote, w) for w in _WORD.findall(segment)]


def _program(words: list[str]) -> tuple[str, list[str]]:
    """The program a segment runs (skipping env assignments and wrappers) and its arguments."""
    i = 0
    while i < len(words) and (_ENV_ASSIGN.match(words[i]) or words[i] in _WRAPPERS or (words[i].startswith("-") and i > 0 and words[i - 1] in _WRAPPERS)):
        i += 1
    if i >= len(words):
        return "", []
    prog = words[i].rsplit("/", 1)[-1]
    return prog, words[i + 1 :]


def _operands(args: list[str]) -> list[str]:
    """Non-option arguments (after ``--`` everything is an operand)."""
    out: list[str] = []
    rest = False
    for a in args:
        if rest or not a.startswith("-") or a == "-":
            out.append(a)
        elif a == "--":
            rest = True
    return out


def _git_path_operands(sub: str, args: list[str]) -> list[str] | None:
    """Files named by ``git checkout/restore [--] <paths>``; None when it may switch branches or touch anything."""
    if sub not in {"checkout", "restore"}:
        return None
    rest = args[args.index(sub) + 1 :]
    if "--" in rest:
        rest = rest[rest.index("--") + 1 :]
        operands = [a for a in rest if a]
    else:
        if any(a.startswith("-") for a in rest):
            return None
        operands = rest
        # without "--", only names that look like files (a path or an extension) are files, not branches
        if not operands or not all("/" in a or "." in a.rsplit("/", 1)[-1] for a in operands):
            return None
    if not operands or any(ch in a for a in operands for ch in "*?[$`") or any(a in {".", "./"} for a in operands):
        return None
    return operands


def normalise_path(path: str) -> str:
    """A comparable form: no leading ``./``, no trailing slash (``.`` stays ``.``)."""
    while path.startswith("./"):
        path = path[2:]
    path = path.rstrip("/") or "/"
    return path or "."


def paths_overlap(a: str, b: str) -> bool:
    """Whether a change to one path may change what reading the other shows.

    ``.`` overlaps everything; a directory overlaps what is under it; relative and
    absolute spellings of the same file overlap by suffix (``/testbed/x/y.py`` and ``x/y.py``).
    """
    if a == "." or b == "." or a == b:
        return True
    if a.startswith(b + "/") or b.startswith(a + "/"):
        return True
    return a.endswith("/" + b) or b.endswith("/" + a)


_SOURCE_EXT = frozenset(
    {"py", "pyi", "pyx", "pxd", "rst", "md", "cfg", "toml", "ini", "c", "h", "cc", "cpp", "hpp", "js", "ts", "tsx",
     "jsx", "java", "go", "rs", "rb", "php", "sh", "yml", "yaml", "in", "css", "scss", "sql", "r", "jl", "kt",
     "swift", "m", "scala", "cs", "lua", "pl", "txt"}
)
_BUILD_PARTS = frozenset({"_build", "build", "dist", "__pycache__", ".pytest_cache", "node_modules", "out", "tmp",
                          ".tox", ".mypy_cache", "htmlcov", "site-packages", "target"})


def is_source_path(path: str) -> bool:
    """A source file that running programs does not rewrite (outputs, caches and directories are volatile).

    Programs the agent runs (tests, builds, reproduction scripts) write outputs, caches and
    build directories; they do not edit source files unless the command shows it.
    """
    parts = normalise_path(path).split("/")
    if any(part in _BUILD_PARTS for part in parts):
        return False
    name = parts[-1]
    if "." not in name.strip("."):
        return False  # a directory (or an extension-less file we cannot judge)
    ext = name.rsplit(".", 1)[-1].lower()
    return ext in _SOURCE_EXT and not name.lower().endswith(("output.txt", ".log.txt", "out.txt"))


_NO_FAMILY = frozenset({"cd", "pushd", "popd", "export", "source", ".", "set", "unset", "ulimit", "umask"})


def _kind(prog: str, args: list[str]) -> str:
    """A command's family, for grouping failures: the program, with what it runs when that is the program's
    real identity (``python -m pytest``, ``python repro.py``, ``str_replace_editor str_replace``), so a
    reproduction script failing is not counted with the test runner failing, nor ``cd dir && ...`` with all."""
    if _is_python(prog):
        if args[:1] == ["-m"] and len(args) > 1:
            return f"python -m {args[1]}"
        if "-c" in args:
            return "python -c"
        script = next((a for a in args if not a.startswith("-")), "")
        return f"python {script.rsplit('/', 1)[-1]}" if script else "python"
    if prog in EDITOR_TOOLS and args:
        return f"{prog} {args[0]}"
    return prog


def _is_python(prog: str) -> bool:
    return prog.startswith("python")


_CACHE_MAX_CHARS = 16_384
_cache: dict[str, ShellEffect] = {}


def analyse(command: str, known_scripts: Mapping[str, bool] | None = None) -> ShellEffect:
    """Effects of ``command``. ``known_scripts`` maps scripts this task wrote to "their body writes files".

    The command's own effects are computed once (small LRU cache: precheck analyses the same
    command for invariants and the loop guard); running a known file-writing script is
    applied on top.
    """
    base = _cache.get(command)
    if base is None:
        base = _analyse(command)
        if len(command) <= _CACHE_MAX_CHARS:
            _cache[command] = base
            if len(_cache) > 256:
                del _cache[next(iter(_cache))]
    if not known_scripts or base.targets is None:
        return base
    runs_writer = any(known_scripts.get(s) or known_scripts.get(s.lstrip("./")) for s in base.scripts_run
                      if s not in base.created_scripts)
    if not runs_writer:
        return base
    return ShellEffect(writes=True, targets=None, reads=None, family=base.family, runs_tests=base.runs_tests,
                       scripts_run=base.scripts_run, created_scripts=base.created_scripts, programs=base.programs)


def _analyse(command: str) -> ShellEffect:
    known: dict[str, bool] = {}
    text, docs = _strip_heredocs(command)
    writes = False
    targets: list[str] = []
    unknown_targets = False
    reads: list[str] = []
    unknown_reads = False
    scripts: list[str] = []
    created: dict[str, bool] = {}
    families: list[str] = []
    kind = ""  # the family: what the first segment that runs something runs (see _kind)
    for target in _REDIRECT.findall(_QUOTED.sub("''", text)):
        if target.startswith("/dev/") or target.startswith("&"):
            continue
        writes = True
        targets.append(target)
    # a file written by redirection may be a script run later; its body is unknown unless a heredoc gave it
    for target in targets:
        if target.endswith((".py", ".sh")) or "." not in target.rsplit("/", 1)[-1]:
            created[normalise_path(target)] = True
    # a heredoc feeding a file (cat > f <<EOF): remember whether the script it creates writes files
    for opening, body in docs:
        redirected = [t for t in _REDIRECT.findall(_QUOTED.sub("''", opening)) if not t.startswith("/dev/")]
        for path in redirected:
            appended = ">>" in opening
            body_writes = bool(_PY_WRITES.search(body))
            created[normalise_path(path)] = body_writes or (appended and known.get(normalise_path(path), False))
        first = _program(_words(opening.split("<<", 1)[0]))[0]
        if _is_python(first) and _PY_WRITES.search(body):
            writes = True
            unknown_targets = True
    first_segment = True
    known = {**known, **created}
    editor = False  # an editor tool writes (kept apart: a failed editor call wrote nothing)
    for opening, body in docs:  # Codex through a shell: apply_patch <<'EOF' ... EOF
        if _program(_words(opening.split("<<", 1)[0]))[0] == "apply_patch":
            editor = True
            named = patch_paths(body)
            targets.extend(named or ())
            unknown_targets = unknown_targets or named is None
    for segment in _segments(text):
        words = _words(segment.strip())
        if not words:
            continue
        prog, args = _program(words)
        if not prog or prog.startswith("#"):
            continue
        families.append(f"{prog} -m {args[1]}" if _is_python(prog) and args[:1] == ["-m"] and len(args) > 1 else prog)
        was_first, first_segment = first_segment, False
        if not kind and prog not in _NO_FAMILY:
            kind = _kind(prog, args)
        if prog in EDITOR_TOOLS:  # SWE-agent runs its editor as a program: str_replace_editor <sub> <path> ...
            sub, path = [*args, "", ""][:2]
            if sub in READ_SUBCOMMANDS:
                reads.append(path or ".")
                continue
            editor = True
            if path and not path.startswith("-"):
                targets.append(path)
            else:
                unknown_targets = True
            continue
        if prog == "apply_patch":
            if "<<" not in segment:  # a heredoc body was read above
                editor = True
                named = patch_paths("\n".join(args))
                targets.extend(named or ())
                unknown_targets = unknown_targets or named is None
            continue
        if prog in {"cd", "pushd", "popd", "export", "source", "."}:
            unknown_targets = unknown_reads = True  # the working directory or environment changed
            continue
        if prog == "find" and any(a in {"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint"} for a in args):
            writes = unknown_targets = True  # find -delete / -exec rm ...: changes files we cannot name
            unknown_reads = True
            continue
        if prog in _READERS and not (prog == "sed" and any(a.startswith("-i") or a.startswith("--in-place") for a in args)):
            operands = [a for a in _operands(args) if a not in {"-"}]
            if prog in _PATTERN_FIRST and operands and not any(a in {"-e", "-f"} for a in args):
                operands = operands[1:]
            if prog in {"echo", "printf", "true", "pwd", "which", "basename", "dirname"}:
                continue
            if operands:
                reads.extend(operands)
            elif was_first or prog in {"ls", "find", "tree", "du"}:
                reads.append(".")  # reads the working directory (or recursive grep): depends on everything
            continue
        unknown_reads = True
        if prog in _WRITERS:
            if prog in {"pip", "pip3"}:
                if any(a in {"install", "uninstall"} for a in args):
                    writes = unknown_targets = True
            elif prog in {"go", "cargo", "npm", "yarn", "pnpm", "make"}:
                if not any(a == "test" for a in args):
                    writes = unknown_targets = True
            elif prog in {"mv", "cp", "rm", "touch", "mkdir", "rmdir", "ln", "chmod", "chown", "truncate", "tee"}:
                writes = True
                operands = _operands(args)
                if prog == "cp" and len(operands) >= 2:
                    operands = operands[-1:]
                targets.extend(operands)
                if not operands or any(ch in "".join(operands) for ch in "*?[$`"):
                    unknown_targets = True
            elif prog == "tar":
                if any("x" in a for a in args if a.startswith("-") or a[:1].isalpha()):
                    writes = unknown_targets = True
            else:
                writes = unknown_targets = True
        elif prog == "git":
            sub = next((a for a in args if not a.startswith("-")), "")
            if sub in _GIT_WRITES:
                writes = True
                files = _git_path_operands(sub, args)
                if files is None:
                    unknown_targets = True
                else:
                    targets.extend(files)
        elif prog in {"sed", "perl", "ruby"}:
            if any(a == "-i" or (a.startswith("-") and not a.startswith("--") and "i" in a) or a.startswith("--in-place") for a in args):
                writes = True
                last = args[-1:] if args and not args[-1].startswith("-") else []
                targets.extend(last)
                if not last or any(ch in last[0] for ch in "*?[$`"):
                    unknown_targets = True
        elif _is_python(prog):
            if "-c" in args:
                code = args[args.index("-c") + 1] if args.index("-c") + 1 < len(args) else ""
                if _PY_WRITES.search(code):
                    writes = True
                    unknown_targets = True
            elif args and args[0] == "-m":
                mod = args[1] if len(args) > 1 else ""
                if mod in {"pip", "black", "isort", "autopep8", "lib2to3"}:
                    writes = writes or mod != "pip" or any(a in {"install", "uninstall"} for a in args)
            else:
                script = next((a for a in args if not a.startswith("-")), "")
                if script and script != "-":
                    scripts.append(script)
                    if script.endswith("setup.py") or (script.endswith("manage.py") and any(
                        a in {"migrate", "makemigrations", "collectstatic"} for a in args
                    )) or known.get(script) or known.get(script.lstrip("./")):
                        writes = True
                        unknown_targets = True
        elif prog.startswith("./") or prog.endswith(".sh"):
            scripts.append(prog)
            if known.get(prog) or known.get(prog.lstrip("./")):
                writes = True
                unknown_targets = True
    family = kind or (families[0].split(" ", 1)[0] if families else "")
    editor_writes = editor and not writes
    writes = writes or editor
    if any(ch in t for t in targets for ch in "*?[$`"):
        unknown_targets = True
    return ShellEffect(
        writes=writes,
        targets=None if unknown_targets else tuple(dict.fromkeys(normalise_path(t) for t in targets)),
        reads=None if unknown_reads or writes else tuple(dict.fromkeys(normalise_path(r) for r in reads)),
        family=family,
        runs_tests=bool(_TEST_WORDS.search(text)),
        scripts_run=tuple(scripts),
        created_scripts=created,
        programs=tuple(families),
        editor_writes=editor_writes,
    )
