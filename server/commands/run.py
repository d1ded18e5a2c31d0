"""``bosun run -- CMD ...``: run a command and keep its big output out of the agent's prompt.

    bosun run --task t_1a2b -- pytest -q
    bosun run --intent "why does test_parse fail" -- pytest -q tests/test_parse.py

The command inherits the working directory, the environment and stdin; its stdout and stderr
(merged, as an agent reads them) are written by the command itself straight into a spool file
under ``$BOSUN_HOME/spool`` (0600), so the output is never held in memory and never lost: if the
daemon is gone or dies mid-run, the spool stays and the output is still printed. The running
daemon (started as ``bosun stdio`` starts it when none answers) then observes the spool by name:
the output is scrubbed, stored and journaled in the task as a ``bash`` call with its exit code, so
precheck's duplicate and loop rules see it. Printed: the output itself when it is small, its
compressed view when that is cheaper, else the stub (ref, sizes, outline, recall calls; with
``--intent``, the lines that bear on it). The exit code is the command's; a command killed by a
signal kills this process with the same signal; SIGINT, SIGTERM, SIGHUP and SIGQUIT sent here
reach the command.

Every command an agent runs pays this process's start-up, so this module imports the standard library
and ``_daemon`` only. One function, ``main``, serves the console script (``bosun run``, handed its
arguments before the CLI parser is built), ``python -m bosun.server.commands.run`` and the form the
PreToolUse hook writes, ``python -S -P .../_run_script.py``: without ``site`` the interpreter starts in a
third of the time, and ``site`` is loaded only when bosun's own modules are needed (starting the daemon,
``--help``). The daemon's address is read and its connection opened while the command runs (not after).
An output of at most ``PRINT_FIRST_BYTES`` is printed at once and handed to the daemon by a detached
child, so the caller does not wait for the journal write either.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

if __package__:
    from bosun.server.commands import _daemon
else:  # run as a script's sibling under ``python -S -P`` (see _run_script.py)
    import _daemon  # type: ignore[no-redef]

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

CHUNK = 1 << 16
FALLBACK_PRINT_BYTES = 64 * 1024  # without a daemon: print at most this much (head and tail), say where the rest is
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
DAEMON_TIMEOUT_S = 30.0
IDLE_SOCKET_S = 1.0  # a socket connected while the command ran is used only if the command took less than this
# at most this many bytes are at most VIEW_MIN_TOKENS (40) estimated tokens (core/tokens.py costs a byte at
# most one token): observe passes such an output through whole, so it is printed before the daemon answers
PRINT_FIRST_BYTES = 40
MODES = ("cache_ttl", "conservative", "balanced", "aggressive")
NAME = "run"
HELP = "run a command; its output is stored in bosun and printed whole (small) or as a stub (large)"
EXAMPLE = "bosun run -- pytest -q"
_VALUED = ("--task", "--session", "--intent", "--mode", "--home")
_FLAGS = ("--shell", "--no-start")


class Options:
    """The parsed options (the same names argparse gives, so ``run`` takes either)."""

    def __init__(self) -> None:
        self.task: str | None = None
        self.session: str | None = None
        self.intent: str | None = None
        self.mode: str | None = None
        self.home: str | None = None
        self.shell = False
        self.no_start = False
        self.cmd: list[str] = []


def quick_parse(argv: list[str]) -> Options | None:
    """The options without argparse (~10 ms of imports); None for anything it does not know (argparse then
    parses, and reports the error or the help)."""
    opts = Options()
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            opts.cmd = argv[i + 1:]
            return opts
        name, eq, value = arg.partition("=")
        if name in _VALUED:
            if not eq:
                if i + 1 >= len(argv):
                    return None
                i += 1
                value = argv[i]
            if name == "--mode" and value not in MODES:
                return None
            setattr(opts, name[2:], value)
        elif arg in _FLAGS:
            setattr(opts, arg[2:].replace("-", "_"), True)
        elif arg.startswith("-"):
            return None
        else:
            opts.cmd = argv[i:]
            return opts
        i += 1
    return opts


def settings(args: Any) -> tuple[str, bool]:
    """BOSUN_HOME (or --home) and whether a daemon may be started (BOSUN_RUN_START, --no-start).

    Read straight from the environment, as ``Config`` reads them (a bad BOSUN_RUN_START raises the same
    ConfigError through ``Config``): the other BOSUN_* settings are the daemon's, not this command's."""
    start = os.environ.get("BOSUN_RUN_START", "on").strip().lower() or "on"
    if start not in ("on", "off", "1", "0"):
        _daemon.with_site()
        from bosun.server.config import Config

        Config.from_env()  # raises the ConfigError that names the variable and its choices
    return _daemon.home_dir(getattr(args, "home", None)), start in ("on", "1") and not args.no_start


def open_spool(home: str | Path) -> tuple[str, int]:
    """A fresh spool file (0600, in a 0700 directory): its name and a write descriptor."""
    spool_dir = f"{str(home).rstrip('/')}/spool"
    os.makedirs(spool_dir, mode=0o700, exist_ok=True)
    name = f"run-{os.getpid()}-{os.urandom(4).hex()}.out"
    fd = os.open(f"{spool_dir}/{name}", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    return name, fd


def run_command(cmd: list[str], spool_fd: int, meanwhile: Callable[[], Any] | None = None) -> int:
    """Run ``cmd`` with stdout and stderr written by the command itself into ``spool_fd``; the wait status as a
    returncode (negative: the signal that killed it). No pipe, no copy loop: the bytes land once, as they come.
    ``meanwhile`` runs while the command does (this process would only wait)."""
    actions = [(os.POSIX_SPAWN_DUP2, spool_fd, 1), (os.POSIX_SPAWN_DUP2, spool_fd, 2)]
    # Python ignores SIGPIPE and SIGXFSZ for itself; the command gets the defaults, as subprocess gives them
    defaults = [s for s in (getattr(signal, "SIGPIPE", None), getattr(signal, "SIGXFSZ", None)) if s is not None]
    pid = os.posix_spawnp(cmd[0], cmd, os.environ, file_actions=actions, setsigdef=defaults)
    previous = {}

    def forward(signum: int, _frame: Any) -> None:
        try:
            os.kill(pid, signum)
        except OSError:
            pass

    for sig in FORWARDED:
        try:
            previous[sig] = signal.signal(sig, forward)
        except (OSError, ValueError):
            pass
    try:
        if meanwhile is not None:
            meanwhile()
        _, status = os.waitpid(pid, 0)  # retried by Python after a forwarded signal (PEP 475)
        return os.waitstatus_to_exitcode(status)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def copy_out(path: str | Path, limit: int | None = None) -> None:
    """Print the spool to stdout in chunks (never read whole); past ``limit`` bytes, head and tail only."""
    out = sys.stdout.buffer
    size = os.stat(path).st_size
    with open(path, "rb") as fh:
        if limit is None or size <= limit:
            while block := fh.read(CHUNK):
                out.write(block)
        else:
            out.write(fh.read(limit // 2))
            out.write(f"\n[bosun run: {size - limit:,} bytes omitted; all of it is in {path}]\n".encode())
            fh.seek(size - limit // 2)
            out.write(fh.read())
    out.flush()


def _address(home: str) -> tuple[str, str | None]:
    """The daemon's /v1/observe URL and token, from ``daemon.json`` (OSError/ValueError/KeyError when none)."""
    url, token = _daemon.read_daemon(home)
    return _daemon.endpoint(url, "/v1/observe"), token


def _connect(url: str) -> Any:
    """A connection to the daemon, opened now (None when nothing listens there)."""
    try:
        return _daemon.connect(url, DAEMON_TIMEOUT_S)
    except OSError:
        return None


def _observe(url: str, token: str | None, body: dict[str, Any], sock: Any = None) -> dict[str, Any]:
    status, payload = _daemon.post_json(url, body, token, DAEMON_TIMEOUT_S, sock)
    answer = json.loads(payload)
    if status != 200 or not isinstance(answer, dict):
        raise DaemonError(str(answer.get("error") if isinstance(answer, dict) else answer), status)
    return answer


def daemon_observe(home: str | Path, body: dict[str, Any], start: bool = True, sock: Any = None) -> dict[str, Any]:
    """POST the spool to the running daemon's ``/v1/observe`` (over ``sock`` when one is connected already),
    starting the daemon if none answers."""
    try:
        return _observe(*_address(str(home)), body, sock)  # a DaemonError (bosun answered, and refused) is final
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if not start:
        raise DaemonError("no bosun daemon answers", 0)
    _daemon.with_site()
    from pathlib import Path

    from bosun.server.transport.bridge import DaemonUnavailable, ensure_daemon

    try:
        ensure_daemon(Path(home))
    except DaemonUnavailable as exc:
        raise DaemonError(str(exc), 0) from exc
    return _observe(*_address(str(home)), body)


class DaemonError(RuntimeError):
    """The daemon could not be reached, or refused the spool; ``status`` is its HTTP status (0: none)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def render(answer: dict[str, Any]) -> str | None:
    """What the agent reads instead of the output; None when the output itself should be printed."""
    if not answer.get("offloaded"):
        return None
    if "view" in answer:
        return f"{answer['view']}\n[bosun: {answer.get('note')}; full output: bosun recall {answer['ref']}]\n"
    shown = {k: v for k, v in answer.items() if k not in ("task_id", "compact")}
    return json.dumps(shown, separators=(",", ":"), ensure_ascii=False) + "\n"


def exit_like(returncode: int) -> int:
    """The command's exit: its code, or (killed by a signal) the same signal on this process."""
    if returncode >= 0:
        return returncode
    sig = -returncode
    try:
        signal.signal(sig, signal.SIG_DFL)
        sys.stdout.flush()
        os.kill(os.getpid(), sig)
    except (OSError, ValueError):
        pass
    return 128 + sig


def _direct(cmd: list[str]) -> int:
    """Run the command untouched (no spool, no bosun): what happens when bosun cannot take part."""
    try:
        pid = os.posix_spawnp(cmd[0], cmd, os.environ)
        return exit_like(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    except OSError as err:
        print(f"bosun run: {err}", file=sys.stderr)
        return 127


def _record_detached(url: str, token: str | None, body: dict[str, Any], sock: Any, path: str) -> None:
    """Hand a small output to the daemon from a child of this process, which the caller does not wait for.

    The output is already printed and the daemon's answer cannot change it, so the caller gets its exit
    code at once; the child (its own session, no terminal, stdio on /dev/null) posts the spool and removes
    it once the daemon has it. A failure leaves the spool in place, as it does in the foreground."""
    try:
        pid = os.fork()
    except OSError:
        pid = -1
    if pid != 0:
        if pid < 0:  # no fork: record in the foreground
            try:
                if "partial" not in _observe(url, token, body, sock):
                    os.unlink(path)
            except (DaemonError, OSError, ValueError):
                pass
        else:
            sock.close()
        return
    try:  # the child
        os.setsid()
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        if "partial" not in _observe(url, token, body, sock):
            os.unlink(path)
    except BaseException:  # the child must never return into the caller's code
        pass
    os._exit(0)


class _Daemon:
    """The daemon's address and a connected socket, found while the command runs (the process only waits then)."""

    def __init__(self, home: str) -> None:
        self.home = home
        self.url = ""
        self.token: str | None = None
        self.sock: Any = None
        self.connected_at = 0.0

    def prepare(self) -> None:
        try:
            self.url, self.token = _address(self.home)
        except (OSError, ValueError, KeyError, TypeError):
            return
        self.sock = _connect(self.url)
        self.connected_at = time.monotonic()

    def fresh_socket(self) -> Any:
        """The socket prepared during the command, if the command was short (a long-idle connection may have been
        closed by the server: then a new one); None when no daemon listens."""
        if self.sock is not None and time.monotonic() - self.connected_at > IDLE_SOCKET_S:
            self.sock.close()
            self.sock = _connect(self.url)
        sock, self.sock = self.sock, None
        return sock

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def run(args: Any) -> int:
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        print("bosun run: no command given (bosun run -- CMD ...)", file=sys.stderr)
        return 2
    if args.shell:
        cmd = ["/bin/sh", "-c", " ".join(cmd)]
    try:
        home, may_start = settings(args)
    except Exception as exc:  # a bad BOSUN_* value: say so, and still run the command
        print(f"bosun run: {exc}; running the command directly", file=sys.stderr)
        return _direct(cmd)
    try:
        name, spool_fd = open_spool(home)
    except OSError as exc:  # no spool, no bosun: the command still runs, untouched
        print(f"bosun run: cannot spool under {home} ({exc}); running the command directly", file=sys.stderr)
        return _direct(cmd)
    path = f"{home.rstrip('/')}/spool/{name}"
    daemon = _Daemon(home)
    try:
        try:
            code = run_command(cmd, spool_fd, daemon.prepare)
        except OSError as exc:  # not found, not executable: as a shell reports it
            os.write(spool_fd, f"bosun run: {cmd[0]}: {exc.strerror}\n".encode())
            code = 127 if isinstance(exc, FileNotFoundError) else 126
        size = os.fstat(spool_fd).st_size
    finally:
        os.close(spool_fd)
    shown = " ".join(cmd[2:] if args.shell else cmd)
    body = {"task": args.task or os.environ.get("BOSUN_TASK") or None,
            "session": args.session or os.environ.get("BOSUN_RUN_SESSION") or os.getcwd(),
            "command": shown, "spool": name, "exit_code": code if code >= 0 else 128 - code,
            "intent": args.intent, "mode": args.mode}
    sock = daemon.fresh_socket()
    if size <= PRINT_FIRST_BYTES and sock is not None:  # a daemon listens: print now, record unwaited
        copy_out(path)
        _record_detached(daemon.url, daemon.token, body, sock, path)
        return exit_like(code)
    try:
        answer = daemon_observe(home, body, may_start, sock)
    except (DaemonError, OSError, ValueError) as exc:  # the output is never lost: print it, keep the spool
        copy_out(path, FALLBACK_PRINT_BYTES)
        print(f"bosun run: not recorded ({exc}); the output stays in {path}", file=sys.stderr)
        return exit_like(code)
    finally:
        daemon.close()
    text = render(answer)
    if text is None:
        copy_out(path)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    if "partial" not in answer:
        try:
            os.unlink(path)
        except OSError:
            pass
    return exit_like(code)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    import argparse

    parser.add_argument("--task", default=None, help="task id to journal the command in (default $BOSUN_TASK)")
    parser.add_argument("--session", default=None,
                        help="without a task: a key naming this shell session's task (default: the directory)")
    parser.add_argument("--intent", default=None, help="what you need from the output: its lines come back too")
    parser.add_argument("--mode", choices=list(MODES),
                        help="pruning mode for this output (default: the task's, else BOSUN_PRUNE_MODE)")
    parser.add_argument("--shell", action="store_true", help="run the one argument through /bin/sh -c")
    parser.add_argument("--no-start", action="store_true",
                        help="never start a daemon (also BOSUN_RUN_START=0): print the output, keep the spool")
    parser.add_argument("--home", help="state directory (default $BOSUN_HOME or ~/.bosun)")
    parser.add_argument("cmd", nargs=argparse.REMAINDER, help="-- the command and its arguments")


def main(argv: list[str] | None = None) -> int:
    """Every form of ``bosun run`` (see the module's docstring); anything ``quick_parse`` does not take
    (``--help``, a typo) goes to argparse, which needs bosun's modules."""
    argv = sys.argv[1:] if argv is None else argv
    return run(_daemon.parse_args(argv, quick_parse, "bosun run", EXAMPLE, add_arguments))


if __name__ == "__main__":
    sys.exit(main())
