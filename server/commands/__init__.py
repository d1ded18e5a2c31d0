"""CLI subcommands beyond serve/stdio/provision: one module each.

A module defines ``NAME``, ``HELP`` and ``add_arguments(parser)`` and ``run(args) -> int``.
Keep imports inside ``run``: ``bosun hook`` must start without numpy or fastembed.
"""

from __future__ import annotations

COMMAND_MODULES: list[str] = ["bosun.server.commands.invariants", "bosun.server.commands.verify", "bosun.server.commands.select"]  # dotted module names, imported lazily by the CLI
