"""CLI subcommands beyond serve/stdio/provision: one module each.

A module defines ``NAME``, ``HELP`` and ``add_arguments(parser)`` and ``run(args) -> int``;
``config_of(args)`` is the process's ``Config`` (every ``BOSUN_*`` parsed once by the CLI,
``--home`` applied). Keep imports inside ``run``: ``bosun hook`` must start without numpy
or fastembed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bosun.server.config import Config


def config_of(args: argparse.Namespace) -> Config:
    """The command's configuration (set by ``bosun.server.cli.main``; parsed here when called directly)."""
    config = getattr(args, "bosun_config", None)
    if not isinstance(config, Config):
        home = getattr(args, "home", None)
        config = Config.from_env(home=Path(home).expanduser() if home else None)
        args.bosun_config = config
    return config

COMMAND_MODULES: list[str] = ["bosun.server.commands.invariants", "bosun.server.commands.verify", "bosun.server.commands.observe", "bosun.server.commands.recall", "bosun.server.commands.select", "bosun.server.commands.audit", "bosun.server.commands.eval_route", "bosun.server.commands.hook", "bosun.server.commands.telemetry"]  # dotted module names, imported lazily by the CLI
