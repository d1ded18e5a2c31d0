"""CLI subcommands beyond serve/stdio/provision: one module each.

A module defines ``NAME``, ``HELP`` and ``add_arguments(parser)`` and ``run(args) -> int``.
Keep imports inside ``run``: ``bosun hook`` must start without numpy or fastembed.
"""

from __future__ import annotations

COMMAND_MODULES: list[str] = ["bosun.server.commands.invariants", "bosun.server.commands.verify", "bosun.server.commands.observe", "bosun.server.commands.recall", "bosun.server.commands.select", "bosun.server.commands.audit", "bosun.server.commands.eval_route", "bosun.server.commands.hook", "bosun.server.commands.telemetry"]  # dotted module names, imported lazily by the CLI
