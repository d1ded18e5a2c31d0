"""``bosun run -- CMD ...``: run a command and keep its big output out of the agent's prompt.

    bosun run --task t_1a2b -- pytest -q
    bosun run --intent "why does test_parse fail" -- pytest -q tests/test_parse.py

The command inherits the working directory, the environment and stdin; its stdout and stderr
(merged, as an agent reads them) stream into a spool file under ``$BOSUN_HOME/spool`` (0600) as
they arrive, so the output is never held in memory twice and never lost: if the daemon is gone
or dies mid-run, the spool stays and the output is still printed. The running daemon (started as
``bosun stdio`` starts it when none answers) then observes the spool by name: the output is
scrubbed, stored and journaled in the task as a ``bash`` call with its exit code, so precheck's
duplicate and loop rules see it. Printed: the output itself when it is small, its compressed view
when that is cheaper, else the stub (ref, sizes, outline, recall calls; with ``--intent``, the
lines that bear on it). The exit code is the command's; a command killed by a signal kills this
process with the same signal; SIGINT, SIGTERM, SIGHUP and SIGQUIT sent here reach the command.

Stdlib only at import time: every command pays this process's start-up.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

NAME = "run"
HELP = "run a command; its output is stored in bosun and printed whole (small) or as a stub (large)"

CHUNK = 1 << 16
FALLBACK_PRINT_BYTES = 64 * 1024  # without a daemon: print at most this much (head and tail), say where the rest is
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
DAEMON_TIMEOUT_S = 30.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", default=None, help="task id to journal the command in (default $BOSUN_TASK)")
    parser.add_argument("--session", default=None,
                        help="without a task: a key naming this shell session's task (default: the directory)")
    parser.add_argument("--intent", default=None, help="what you need from the output: its lines come back too")
    parser.add_argument("--mode", choices=["cache_ttl", "conservative", "balanced", "aggressive"],
                        help="pruning mode for this output (default: the task's, else BOSUN_PRUNE_MODE)")
    parser.add_argument("--shell", action="store_true", help="run the one argument through /bin/sh -c")
    parser.add_argument("--no-start", action="store_true",
                        help="never start a daemon (also BOSUN_RUN_START=0): print the output, keep the spool")
    parser.add_argument("--home", help="state directory (default $BOSUN_HOME or ~/.bosun)")
    parser.add_argument("cmd", nargs=argparse.REMAINDER, help="-- the command and its arguments")


def settings(args: argparse.Namespace) -> tuple[Path, bool]:
    """BOSUN_HOME (or --home) and whether a daemon may be started (BOSUN_RUN_START, --no-start)."""
    from bosun.server.commands import config_of

    config = config_of(args)
    return config.home, config.run_start and not args.no_start


def open_spool(home: Path) -> tuple[str, int]:
    """A fresh spool file (0600, in a 0700 directory): its name and a write descriptor."""
    spool_dir = home / "spool"
    spool_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    name = f"run-{os.getpid()}-{os.urandom(4).hex()}.out"
    fd = os.open(spool_dir / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    return name, fd


def run_command(cmd: list[str], spool_fd: int) -> int:
    """Run ``cmd`` with its merged output streamed into ``spool_fd``; the wait status as a returncode."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    previous = {}

    def forward(signum: int, _frame: Any) -> None:
        try:
            proc.send_signal(signum)
        except OSError:
            pass

    for sig in FORWARDED:
        try:
            previous[sig] = signal.signal(sig, forward)
        except (OSError, ValueError):
            pass
    try:
        assert proc.stdout is not None
        out_fd = proc.stdout.fileno()
        while True:
            try:
                block = os.read(out_fd, CHUNK)
            except InterruptedError:
                continue
            if not block:
                break
            view = memoryview(block)
            while view:
                view = view[os.write(spool_fd, view):]
        return proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def copy_out(path: Path, limit: int | None = None) -> None:
    """Print the spool to stdout in chunks (never read whole); past ``limit`` bytes, head and tail only."""
    out = sys.stdout.buffer
    size = path.stat().st_size
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


def daemon_observe(home: Path, body: dict[str, Any], start: bool = True) -> dict[str, Any]:
    """POST the spool to the running daemon's ``/v1/observe``, starting the daemon if none answers."""
    from bosun.server.commands.hook import post_json, route_url

    def attempt() -> dict[str, Any]:
        info = json.loads((home / "daemon.json").read_text())
        url = route_url(str(info["url"])).replace("/v1/route", "/v1/observe")
        status, payload = post_json(url, body, info.get("token"), DAEMON_TIMEOUT_S)
        answer = json.loads(payload.decode("utf-8"))
        if status != 200 or not isinstance(answer, dict):
            raise DaemonError(str(answer.get("error") if isinstance(answer, dict) else answer), status)
        return answer

    try:
        return attempt()  # a DaemonError (bosun answered, and refused) is not fixed by a restart
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if not start:
        raise DaemonError("no bosun daemon answers", 0)
    from bosun.server.transport.bridge import DaemonUnavailable, ensure_daemon

    try:
        ensure_daemon(home)
    except DaemonUnavailable as exc:
        raise DaemonError(str(exc), 0) from exc
    return attempt()


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


def run(args: argparse.Namespace) -> int:
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
        return exit_like(subprocess.call(cmd))
    try:
        name, spool_fd = open_spool(home)
    except OSError as exc:  # no spool, no bosun: the command still runs, untouched
        print(f"bosun run: cannot spool under {home} ({exc}); running the command directly", file=sys.stderr)
        try:
            return exit_like(subprocess.call(cmd))
        except OSError as err:
            print(f"bosun run: {err}", file=sys.stderr)
            return 127
    path = home / "spool" / name
    try:
        try:
            code = run_command(cmd, spool_fd)
        except OSError as exc:  # not found, not executable: as a shell reports it
            os.write(spool_fd, f"bosun run: {cmd[0]}: {exc.strerror}\n".encode())
            code = 127 if isinstance(exc, FileNotFoundError) else 126
    finally:
        os.close(spool_fd)
    shown = " ".join(cmd[2:] if args.shell else cmd)
    body = {"task": args.task or os.environ.get("BOSUN_TASK") or None,
            "session": args.session or os.environ.get("BOSUN_RUN_SESSION") or os.getcwd(),
            "command": shown, "spool": name, "exit_code": code if code >= 0 else 128 - code,
            "intent": args.intent, "mode": args.mode}
    try:
        answer = daemon_observe(home, body, may_start)
    except (DaemonError, OSError, ValueError) as exc:  # the output is never lost: print it, keep the spool
        copy_out(path, FALLBACK_PRINT_BYTES)
        print(f"bosun run: not recorded ({exc}); the output stays in {path}", file=sys.stderr)
        return exit_like(code)
    text = render(answer)
    if text is None:
        copy_out(path)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    if "partial" not in answer:
        try:
            path.unlink()
        except OSError:
            pass
    return exit_like(code)


def main(argv: list[str] | None = None) -> int:
    """``python -m bosun.server.commands.run -- CMD``: the same without building the whole CLI."""
    parser = argparse.ArgumentParser(prog="bosun run")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
