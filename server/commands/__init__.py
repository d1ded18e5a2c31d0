"""CLI subcommands beyond serve/stdio/provision: one module each.

A module defines ``NAME``, ``HELP``, ``EXAMPLE`` (one command line, shown at the end of its
``--help``), ``add_arguments(parser)`` and ``run(args) -> int``;
``config_of(args)`` is the process's ``Config`` (every ``BOSUN_*`` parsed once by the CLI,
``--home`` applied). Keep imports inside ``run``: ``bosun hook`` must start without numpy
or fastembed.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the config module (dataclasses, inspect) loads only for commands that read it
    from bosun.server.config import Config


def config_of(args: argparse.Namespace) -> Config:
    """The command's configuration (set by ``bosun.server.cli.main``; parsed here when called directly)."""
    from bosun.server.config import Config

    config = getattr(args, "bosun_config", None)
    if not isinstance(config, Config):
        home = getattr(args, "home", None)
        config = Config.from_env(home=Path(home).expanduser() if home else None)
        args.bosun_config = config
    return config

def with_example(example: str) -> dict[str, Any]:
    """``ArgumentParser`` keywords that end a command's ``--help`` with one example line, kept as written."""
    return {"epilog": f"example:\n  {example}", "formatter_class": argparse.RawDescriptionHelpFormatter}


def command_modules() -> list[str]:
    """Every module of this package that defines a subcommand (``NAME``), found without importing any.

    A new command is a new module here: nothing else to register (several people add
    commands at once; a shared list was a merge point)."""
    import pkgutil

    names = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        spec = info.module_finder.find_spec(f"{__name__}.{info.name}", None)  # type: ignore[call-arg]
        origin = getattr(spec, "origin", None) if spec is not None else None
        if origin and _defines_name(Path(origin)):
            names.append(f"{__name__}.{info.name}")
    return sorted(names)


def _defines_name(path: Path) -> bool:
    try:
        return any(line.startswith("NAME = ") or line.startswith("NAME: str = ")
                   for line in path.read_text(encoding="utf-8").splitlines())
    except OSError:
        return False
