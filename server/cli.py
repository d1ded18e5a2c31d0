"""The ``bosun`` command line.

Imports stay inside the subcommands: ``bosun stdio`` and ``bosun hook`` must
start fast and never touch numpy or fastembed. ``bosun hook`` and ``bosun run``
run once per prompt and once per agent command: ``main`` hands them their
arguments before anything else is imported or parsed (``FAST_COMMANDS``), so the
console script starts them as leanly as ``python -m`` on their modules does. ``bosun stdio`` (the bridge)
and ``bosun stdio --standalone`` read their few arguments without that parser too; the standalone server
starts ``early_init`` (its first stdin line read, ``initialize`` answered with the SDK's recorded answer)
before the SDK's ~1 s import.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # `bosun stdio` (the bridge) starts here on every attach: typing and pathlib stay unimported
    import argparse
    from pathlib import Path
    from typing import Any

    from bosun.server.config import Config

# subcommands whose module's own ``main(argv)`` parses and runs them: no parser of every command built first
FAST_COMMANDS = {"hook": "bosun.server.commands.hook", "run": "bosun.server.commands.run"}


def config_of(args: argparse.Namespace) -> Config:
    from bosun.server.commands import config_of

    return config_of(args)


def _home(args: argparse.Namespace) -> Path:
    return config_of(args).home


def _home_unwritable(home: Path, *inside: Path) -> bool:
    """Print the one-line reason and return True when this process cannot write ``home``."""
    from bosun.server.home_check import home_problem

    problem = home_problem(home, inside)
    if problem:
        print(problem, file=sys.stderr)
    return problem is not None




def _add_home(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--home", help="state directory (default $BOSUN_HOME or ~/.bosun)")


def _add_policies(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--policies", action="append", default=None, metavar="DIR",
        help="a directory of governance documents (repeatable; default $BOSUN_POLICIES or the demo corpus)",
    )


def _add_database_url(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--database-url", metavar="URL",
                        help="postgresql://... shares the store between daemons (default $BOSUN_DATABASE_URL; "
                             "unset: SQLite in the home)")


ANNOUNCED = ("bosun.serve",)  # INFO records an operator sees without -v: where the daemon serves


def _logging(verbose: bool) -> None:
    """WARNING and up to stderr; INFO too with ``-v``. A library that turns its own logger to DEBUG (bm25s
    does, at import) is held to that floor as well, and the serving line is shown at INFO either way."""
    import logging

    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    floor = logging.INFO if verbose else logging.WARNING

    def shown(record: logging.LogRecord) -> bool:
        return record.levelno >= floor or (record.levelno >= logging.INFO and record.name in ANNOUNCED)

    for handler in logging.getLogger().handlers:
        handler.addFilter(shown)
    for name in ANNOUNCED:
        logging.getLogger(name).setLevel(logging.INFO)


def _quiet_blas() -> None:
    """One BLAS thread unless the operator says otherwise: set before numpy loads.

    bosun's matrix products are small; with default BLAS threads a 2,000 x 384
    product took 50-70 ms on a busy 2-core machine instead of ~0.1 ms.
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _prefetch_model(config: Config, handshake_recorded: bool = False) -> Any:
    """Start loading the embedding model on a thread now, before the server's imports, which run beside it:
    with ``BOSUN_MODEL_PREFETCH=on``, or ``auto`` (the default) when the handshake is answered from a record
    (``stdio --standalone``). Measured (bench/speed_all.py, an A/B of 12 starts): the model, and so the first
    ``route``, is ready ~0.25 s sooner, the first call that needs no model ~0.1-0.2 s later (the load's
    imports hold the GIL); where the SDK answers ``initialize`` (a daemon, a first standalone start) that
    answer would come later too, so those load it once the engine starts unless told. The Engine takes it
    through ``embedder_factory=prefetch.result``."""
    if not (config.model_prefetch or (config.model_prefetch_auto and handshake_recorded)):
        return None  # the Engine loads it once its lifespan starts
    import logging

    from bosun.server.background import Prefetch

    logging.getLogger("bosun.cli").info("model load started beside the imports (BOSUN_MODEL_PREFETCH=%s)",
                                        "on" if config.model_prefetch else "auto: the handshake is recorded")
    return Prefetch(_load_model, config, name="model-prefetch")


def _handshake_recorded() -> bool:
    """True when ``early_init`` holds the SDK's recorded ``initialize`` answers for this command line: the
    handshake is then answered from them at once, and nothing the host waits for is slowed down by a model
    load beside the imports (a host asking for a version without a record waits for the SDK, later)."""
    from bosun.server.transport import early_init

    early = early_init.active()
    return early is not None and bool(early.cache.get("answers"))


def _load_model(config: Config) -> Any:
    """``engine.default_embedder_factory``'s work, without importing the engine on the prefetch thread (the
    main thread imports it meanwhile)."""
    from bosun.server.model import ModelSpec, load_embedder

    spec = ModelSpec(threads=config.model_threads, model_dir=config.model_dir)
    if config.model_name:
        spec.name = config.model_name
    return load_embedder(config.home, spec)


def _exit_now(code: int = 0) -> None:
    """After serving: leave at once, with the logs flushed.

    By now the Engine has closed the stores (every call that returned is committed) and the
    transports have stopped. Ordinary interpreter shutdown would still wait for a library's
    idle worker (anyio keeps non-daemon threads for seconds), could abort on model inference
    running on a daemon thread, and spends about a second tearing down onnxruntime: none of
    it holds state worth waiting for.
    """
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def cmd_serve(args: argparse.Namespace) -> int:
    _quiet_blas()
    from pathlib import Path

    config = config_of(args)
    if args.host:
        config.host = args.host
    if args.port is not None:
        config.port = args.port
    if args.policies:
        config.policies = [Path(p).expanduser() for p in args.policies]
    db = config.db_path
    if _home_unwritable(config.home, db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        from bosun.server.home_check import EXIT_UNWRITABLE

        return EXIT_UNWRITABLE
    if args.workers != 1 and not os.environ.get("BOSUN_WORKER_FD"):  # a worker runs this same command
        from bosun.server.transport.workers import run_workers

        return run_workers(config, args.workers, args.stdio)
    prefetch = _prefetch_model(config)  # before the imports below: they run beside the model load
    import anyio

    from bosun.server.engine import Engine
    from bosun.server.transport.serve import ServeError, serve

    engine = Engine(config, embedder_factory=prefetch.result if prefetch is not None else None)
    try:
        anyio.run(lambda: serve(config, http=not args.no_http, stdio=args.stdio, engine=engine))
    except (ServeError, ValueError) as exc:
        print(f"bosun serve: {exc}", file=sys.stderr)
        _exit_now(2)  # at once: the model prefetch thread may be inside onnxruntime, which a normal exit aborts
    except KeyboardInterrupt:
        pass
    _exit_now()
    return 0


def cmd_stdio(args: argparse.Namespace) -> int:
    from pathlib import Path

    home = _home(args)
    extra: list[str] = []
    for p in args.policies or []:
        extra += ["--policies", str(Path(p).expanduser().resolve())]
    if args.standalone:
        _quiet_blas()
        config = config_of(args)
        if args.policies:
            config.policies = [Path(p).expanduser() for p in args.policies]
        prefetch = _prefetch_model(config, _handshake_recorded())  # first: the imports below run beside it
        import anyio

        from bosun.server.engine import Engine
        from bosun.server.transport.serve import serve

        engine = Engine(config, embedder_factory=prefetch.result if prefetch is not None else None)
        anyio.run(lambda: serve(config, http=False, stdio=True, write_daemon=False, engine=engine))
        _exit_now()
        return 0
    from bosun.server.transport.bridge import run_bridge

    return run_bridge(home, extra)


def cmd_provision(args: argparse.Namespace) -> int:
    from pathlib import Path

    from bosun.server.model import DEFAULT_MODEL, DEFAULT_MODEL_ID, default_model_dir
    from bosun.server.provision import provision

    home = _home(args)
    if args.judge:
        from bosun.server.provision import provision_judge

        report = provision_judge(args.judge, home, args.check)
        print(report.to_json() if args.json else f"{report.state}  {report.model}  {report.cache_dir}\n  {report.detail}")
        return report.exit_code
    name = args.model or DEFAULT_MODEL
    if args.cache_dir:
        cache = Path(args.cache_dir).expanduser()
    elif name in (DEFAULT_MODEL, DEFAULT_MODEL_ID):
        cache = default_model_dir(home)
    else:
        cache = home / "models" / name.replace("/", "--")
    if not args.check and _home_unwritable(home, cache):
        from bosun.server.home_check import EXIT_UNWRITABLE

        return EXIT_UNWRITABLE
    report = provision(args.model, cache, args.check)
    if args.json:
        print(report.to_json())
    else:
        print(f"{report.state}  {report.model}  {report.cache_dir}")
        print(f"  {report.detail}")
    return report.exit_code


def build_parser() -> argparse.ArgumentParser:
    import argparse
    import importlib

    import bosun
    from bosun.server.commands import command_modules, with_example

    parser = argparse.ArgumentParser(prog="bosun", description=bosun.__doc__.splitlines()[0] if bosun.__doc__ else None,
                                     **with_example("bosun serve    # then, in another shell: bosun run -- pytest -q"))
    parser.add_argument("--version", action="version", version=f"bosun {bosun.__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO to stderr")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("serve", help="run the daemon (streamable HTTP; --stdio adds stdio)",
                       **with_example("bosun serve --port 8790 --policies ./policies"))
    _add_home(p)
    _add_policies(p)
    p.add_argument("--host", help="bind address (default $BOSUN_HOST or 127.0.0.1; beyond loopback needs BOSUN_TOKEN)")
    p.add_argument("--port", type=int, help="port (default $BOSUN_PORT or 8790; 0 picks a free one)")
    p.add_argument("--stdio", action="store_true", help="also serve MCP on stdin/stdout; exit on stdin EOF")
    p.add_argument("--no-http", action="store_true", help="serve stdio only (with --stdio)")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="N daemon processes on this one port, each with its own model (N > 1 needs "
                        "BOSUN_DATABASE_URL; docs/scale.md)")
    _add_database_url(p)
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("stdio", help="what an mcpServers entry runs: relay stdio to the shared daemon",
                       **with_example('bosun stdio    # as an entry: {"command": "bosun", "args": ["stdio"]}'))
    _add_home(p)
    _add_policies(p)
    p.add_argument("--standalone", action="store_true", help="serve in this process instead of the daemon")
    _add_database_url(p)
    p.set_defaults(func=cmd_stdio)

    p = sub.add_parser("provision", help="check or establish the embedding model (PRESENT/FETCHABLE/UNAVAILABLE/MISMATCH)",
                       **with_example("bosun provision --check"))
    _add_home(p)
    p.add_argument("--check", action="store_true", help="report the state, change nothing")
    p.add_argument("--model", help="fastembed model name (default: the embedded all-MiniLM-L6-v2 int8)")
    p.add_argument("--cache-dir", help="model directory (default $BOSUN_HOME/models/<model>)")
    p.add_argument("--judge", metavar="NAME|PATH",
                   help="provision a cross-encoder judge instead: a local directory with model.onnx (+ tokenizer.json), "
                        "a fastembed cross-encoder name, or 'on' for the shipped one; then set BOSUN_JUDGE to it")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_provision)

    for dotted in command_modules():
        module = importlib.import_module(dotted)
        cp = sub.add_parser(module.NAME, help=module.HELP, **with_example(module.EXAMPLE))
        module.add_arguments(cp)
        cp.set_defaults(func=module.run)
    return parser


def stdio_args(argv: list[str]) -> dict[str, Any] | None:
    """``bosun stdio [--home H] [--policies DIR]... [--standalone] [--database-url URL]`` read without the
    parser of every command (~60 ms of imports: every subcommand's module), as the full parser reads it:
    ``home`` (the raw value or None), ``policies`` (raw values or None), ``standalone``, ``database_url``;
    None for anything else (``--help``, a typo, a missing value), which the full parser handles."""
    parsed: dict[str, Any] = {"home": None, "policies": None, "standalone": False, "database_url": None}
    i = 0
    while i < len(argv):
        name, eq, value = argv[i].partition("=")
        if name == "--standalone" and not eq:
            parsed["standalone"] = True
            i += 1
            continue
        if name not in ("--home", "--policies", "--database-url"):
            return None
        if not eq:
            if i + 1 >= len(argv):
                return None
            i += 1
            value = argv[i]
        if name == "--policies":
            parsed["policies"] = [*(parsed["policies"] or []), value]
        else:
            parsed[name[2:].replace("-", "_")] = value
        i += 1
    return parsed


def _home_of(raw: str | None) -> str:
    """The home as Config reads it (``--home``, else $BOSUN_HOME, else ~/.bosun), with os.path only."""
    return os.path.expanduser(raw or os.environ.get("BOSUN_HOME", "").strip() or "~/.bosun")


def bridge_args(argv: list[str]) -> tuple[str, list[str]] | None:
    """``bosun stdio [--home H] [--policies DIR]...`` read without the parser of every command: the home and
    the daemon's extra arguments, as ``cmd_stdio`` makes them; None for anything else (``--standalone``,
    ``--help``, an error), which the full parser handles. Paths are strings (``os.path``: no pathlib here)."""
    parsed = stdio_args(argv)
    if parsed is None or parsed["standalone"] or parsed["database_url"] is not None:
        return None
    extra: list[str] = []
    for value in parsed["policies"] or []:
        extra += ["--policies", os.path.realpath(os.path.expanduser(value))]  # as Path.resolve()
    return _home_of(parsed["home"]), extra


def _standalone_args(argv: list[str]) -> Any:
    """``[-v] stdio ... --standalone``: the namespace the full parser would give, or None."""
    verbose = False
    while argv and argv[0] in ("-v", "--verbose"):
        verbose, argv = True, argv[1:]
    if not argv or argv[0] != "stdio":
        return None
    parsed = stdio_args(argv[1:])
    if parsed is None or not parsed["standalone"]:
        return None
    from types import SimpleNamespace

    return SimpleNamespace(command="stdio", verbose=verbose, func=cmd_stdio, **parsed)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in FAST_COMMANDS:
        import importlib

        sys.exit(importlib.import_module(FAST_COMMANDS[argv[0]]).main(argv[1:]))
    bridged = bridge_args(argv[1:]) if argv and argv[0] == "stdio" else None
    if bridged is not None:  # what an mcpServers entry runs: straight to the stdlib relay
        from bosun.server.transport.bridge import run_bridge

        sys.exit(run_bridge(*bridged))
    args = _standalone_args(argv)
    if args is not None:  # `bosun stdio --standalone`: read stdin (and answer initialize) while the SDK loads
        from bosun.server.transport import early_init

        early_init.start(_home_of(args.home), argv)
    else:
        args = build_parser().parse_args(argv)
    _run(args)


def _run(args: Any) -> None:
    """Everything ``main`` does after parsing: logging, the configuration, the subcommand."""
    from pathlib import Path

    from bosun.server.config import Config, ConfigError

    _logging(args.verbose)
    if getattr(args, "database_url", None):  # through the environment: a daemon the bridge starts inherits it
        os.environ["BOSUN_DATABASE_URL"] = args.database_url
    try:
        args.bosun_config = Config.from_env(home=Path(args.home).expanduser() if getattr(args, "home", None) else None)
    except ConfigError as exc:
        print(f"bosun: {exc}", file=sys.stderr)
        sys.exit(2)
    sys.exit(args.func(args))


def mcp_entry() -> None:
    """``bosun-mcp``: the stdio entry point that ``uvx bosun-mcp`` runs."""
    main(["stdio", *sys.argv[1:]])
