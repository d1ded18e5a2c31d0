"""What the tool list costs every agent on every turn: estimated cl100k tokens per listed tool.

    python bench/tool_tokens.py            # all tools, as the daemon lists them
    BOSUN_TOOLS=dispatch python bench/tool_tokens.py

Each tool is measured as the JSON object a client receives in ``tools/list`` (name, description,
input schema, annotations), with bosun's own token estimate (``core/tokens.py``, fitted to
cl100k_base; the README quotes its error).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def listed_tools(wanted: list[str] | None = None) -> list[dict[str, Any]]:
    """The tools as ``tools/list`` sends them (JSON-ready dicts)."""
    from bosun.server.app import listed_tools as server_tools

    tools = server_tools(wanted or [])  # the very function create_server lists with (dispatch mode included)
    listed = []
    for t in tools:
        item: dict[str, Any] = {"name": t.name, "description": t.description, "inputSchema": t.parameters}
        if t.annotations is not None:
            item["annotations"] = t.annotations.model_dump(exclude_none=True, by_alias=True)
        listed.append(item)
    return listed


def tool_costs(wanted: list[str] | None = None) -> dict[str, int]:
    from bosun.core.tokens import estimate_tokens

    return {item["name"]: estimate_tokens(json.dumps(item, separators=(",", ":"))) for item in listed_tools(wanted)}


def main() -> int:
    wanted = [w for w in os.environ.get("BOSUN_TOOLS", "").split(",") if w.strip()] or None
    costs = tool_costs(wanted)
    for name, n in costs.items():
        print(f"{name:16s} {n:5d}")
    print(f"{'total':16s} {sum(costs.values()):5d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
