"""``bosun run``'s own path: spawn the command into a spool, print, hand the spool to the daemon.

An agent pays this process's start-up on every shell command, so this module and ``_lean`` are all
the common path loads: the PreToolUse hook runs ``python -S -P .../_run_script.py -- CMD`` (no
``site``), and nothing here imports ``json``, ``socket`` or ``signal`` (``re`` and ``enum`` behind
them cost ~10 ms each quiet, 25-50 ms loaded), nor ``os`` (~2-3 ms of CPU): ``_signal``, ``_json``,
``_socket`` and ``posix`` do the same work. ``run.py`` holds the rest of the command (argparse,
``--help``); bosun's other modules load only to start the daemon or to report a bad setting.

The daemon's address is read and its socket connected while the command runs (not after), and
the script exits with ``posix._exit`` once its output is flushed (no interpreter teardown).
"""

from __future__ import annotations

import _signal
import posix
import sys
import time

if __package__:
    from bosun.server.commands import _lean
else:  # run as a script's sibling under ``python -S -P`` (see _run_script.py)
    import _lean  # type: ignore[no-redef]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

CHUNK = 1 << 16
FALLBACK_PRINT_BYTES = 64 * 1024  # without a daemon: print at most this much (head and tail), say where the rest is
FORWARDED = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP, _signal.SIGQUIT)
DAEMON_TIMEOUT_S = 30.0
IDLE_SOCKET_S = 1.0  # a socket connected while the command ran is used only if the command took less than this
# at most this many bytes are at most VIEW_MIN_TOKENS (40) estimated tokens (core/tokens.py costs a byte at
# most one token): observe passes such an output through whole, so it is printed before the daemon answers
PRINT_FIRST_BYTES = 40
MODES = ("cache_ttl", "conservative", "balanced", "aggressive")
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
    start = _lean.env("BOSUN_RUN_START", "on").strip().lower() or "on"
    if start not in ("on", "off", "1", "0"):
        _lean.with_site()
        from bosun.server.config import Config

        Config.from_env()  # raises the ConfigError that names the variable and its choices
    return _lean.home_dir(getattr(args, "home", None)), start in ("on", "1") and not args.no_start


def open_spool(home: str | Path) -> tuple[str, int]:
    """A fresh spool file (0600, in a 0700 directory): its name and a write descriptor."""
    spool_dir = f"{str(home).rstrip('/')}/spool"
    try:
        posix.mkdir(spool_dir, 0o700)
    except FileExistsError:
        pass
    except FileNotFoundError:  # the home itself is new: create its parents as os.makedirs does
        import os

        os.makedirs(spool_dir, mode=0o700, exist_ok=True)
    name = f"run-{posix.getpid()}-{posix.urandom(4).hex()}.out"
    fd = posix.open(f"{spool_dir}/{name}", posix.O_WRONLY | posix.O_CREAT | posix.O_EXCL | posix.O_CLOEXEC, 0o600)
    return name, fd


def run_command(cmd: list[str], spool_fd: int, meanwhile: Callable[[], Any] | None = None) -> int:
    """Run ``cmd`` with stdout and stderr written by the command itself into ``spool_fd``; the wait status as a
    returncode (negative: the signal that killed it). No pipe, no copy loop: the bytes land once, as they come.
    ``meanwhile`` runs while the command does (this process would only wait)."""
    actions = [(posix.POSIX_SPAWN_DUP2, spool_fd, 1), (posix.POSIX_SPAWN_DUP2, spool_fd, 2)]
    # Python ignores SIGPIPE and SIGXFSZ for itself; the command gets the defaults, as subprocess gives them
    defaults = [s for s in (getattr(_signal, "SIGPIPE", None), getattr(_signal, "SIGXFSZ", None)) if s is not None]
    pid = posix.posix_spawnp(cmd[0], cmd, posix.environ, file_actions=actions, setsigdef=defaults)
    previous = {}

    def forward(signum: int, _frame: Any) -> None:
        try:
            posix.kill(pid, signum)
        except OSError:
            pass

    for sig in FORWARDED:
        try:
            previous[sig] = _signal.signal(sig, forward)
        except (OSError, ValueError):
            pass
    try:
        if meanwhile is not None:
            meanwhile()
        _, status = posix.waitpid(pid, 0)  # retried by Python after a forwarded signal (PEP 475)
        return posix.waitstatus_to_exitcode(status)
    finally:
        for sig, handler in previous.items():
            _signal.signal(sig, handler)


def copy_out(path: str | Path, limit: int | None = None) -> None:
    """Print the spool to stdout in chunks (never read whole); past ``limit`` bytes, head and tail only."""
    out = sys.stdout.buffer
    size = posix.stat(path).st_size
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


def _daemon(home: str) -> tuple[str, str | None]:
    """The daemon's /v1/observe URL and token, from ``daemon.json`` (OSError/ValueError/KeyError when none)."""
    url, token = _lean.read_daemon(home)
    return _lean.endpoint(url, "/v1/observe"), token


def _connect(url: str) -> Any:
    """A socket connected to the daemon (None for https, or when nothing listens there)."""
    try:
        return _lean.url_socket(url, DAEMON_TIMEOUT_S)
    except OSError:
        return None


def _observe(url: str, token: str | None, body: dict[str, Any], sock: Any = None) -> dict[str, Any]:
    status, payload = _lean.post_json(url, body, token, DAEMON_TIMEOUT_S, sock)
    answer = _lean.loads(payload)
    if status != 200 or not isinstance(answer, dict):
        raise DaemonError(str(answer.get("error") if isinstance(answer, dict) else answer), status)
    return answer


def daemon_observe(home: str | Path, body: dict[str, Any], start: bool = True, sock: Any = None) -> dict[str, Any]:
    """POST the spool to the running daemon's ``/v1/observe`` (over ``sock`` when one is connected already),
    starting the daemon if none answers."""
    try:
        return _observe(*_daemon(str(home)), body, sock)  # a DaemonError (bosun answered, and refused) is final
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if not start:
        raise DaemonError("no bosun daemon answers", 0)
    _lean.with_site()
    from pathlib import Path

    from bosun.server.transport.bridge import DaemonUnavailable, ensure_daemon

    try:
        ensure_daemon(Path(home))
    except DaemonUnavailable as exc:
        raise DaemonError(str(exc), 0) from exc
    return _observe(*_daemon(str(home)), body)


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
    return _lean.dumps(shown, compact=True, ensure_ascii=False) + "\n"


def exit_like(returncode: int) -> int:
    """The command's exit: its code, or (killed by a signal) the same signal on this process."""
    if returncode >= 0:
        return returncode
    sig = -returncode
    try:
        _signal.signal(sig, _signal.SIG_DFL)
        sys.stdout.flush()
        posix.kill(posix.getpid(), sig)
    except (OSError, ValueError):
        pass
    return 128 + sig


def _direct(cmd: list[str]) -> int:
    """Run the command untouched (no spool, no bosun): what happens when bosun cannot take part."""
    try:
        pid = posix.posix_spawnp(cmd[0], cmd, posix.environ)
        return exit_like(posix.waitstatus_to_exitcode(posix.waitpid(pid, 0)[1]))
    except OSError as err:
        print(f"bosun run: {err}", file=sys.stderr)
        return 127


def _record_detached(url: str, token: str | None, body: dict[str, Any], sock: Any, path: str) -> None:
    """Hand a small output to the daemon from a child of this process, which the caller does not wait for.

    The output is already printed and the daemon's answer cannot change it, so the caller gets its exit
    code at once; the child (its own session, no terminal, stdio on /dev/null) posts the spool and removes
    it once the daemon has it. A failure leaves the spool in place, as it does in the foreground."""
    try:
        pid = posix.fork()
    except OSError:
        pid = -1
    if pid != 0:
        if pid < 0:  # no fork: record in the foreground
            try:
                if "partial" not in _observe(url, token, body, sock):
                    posix.unlink(path)
            except (DaemonError, OSError, ValueError):
                pass
        else:
            sock.close()
        return
    try:  # the child
        posix.setsid()
        null = posix.open("/dev/null", posix.O_RDWR)
        for fd in (0, 1, 2):
            posix.dup2(null, fd)
        if "partial" not in _observe(url, token, body, sock):
            posix.unlink(path)
    except BaseException:  # the child must never return into the caller's code
        pass
    posix._exit(0)


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
            self.url, self.token = _daemon(self.home)
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
            posix.write(spool_fd, f"bosun run: {cmd[0]}: {exc.strerror}\n".encode())
            code = 127 if isinstance(exc, FileNotFoundError) else 126
        size = posix.fstat(spool_fd).st_size
    finally:
        posix.close(spool_fd)
    shown = " ".join(cmd[2:] if args.shell else cmd)
    body = {"task": args.task or _lean.env("BOSUN_TASK") or None,
            "session": args.session or _lean.env("BOSUN_RUN_SESSION") or posix.getcwd(),
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
            posix.unlink(path)
        except OSError:
            pass
    return exit_like(code)


def main(argv: list[str] | None = None) -> int:
    """``python -S -P .../_run_script.py -- CMD``: ``bosun run`` without the CLI; anything the quick parser
    does not know (``--help``, a typo) goes to argparse in run.py."""
    argv = sys.argv[1:] if argv is None else argv
    opts = quick_parse(argv)
    if opts is not None:
        return run(opts)
    _lean.with_site()
    from bosun.server.commands.run import parse_full

    return run(parse_full(argv))
