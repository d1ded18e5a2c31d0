"""One module per tool family; each exposes ``register(mcp)``.

Add a module here to put its tools, resources and prompts on the server. A module
may also define ``async def on_open(engine)``: it runs once, right after the Engine
opens (load a corpus, start a file watcher); keep it fast and put its warm state in
``engine.extensions[<name>]`` (an object there with ``aclose()`` is closed with the Engine).
"""

from __future__ import annotations

from types import ModuleType

from bosun.server.tools import audit as audit_tool
from bosun.server.tools import checkpoint, handoff, observe, plan, precheck, recall
from bosun.server.tools import route as route_tool
from bosun.server.tools import select as select_tool

TOOL_MODULES: list[ModuleType] = [recall, plan, precheck, handoff, observe, checkpoint, select_tool, route_tool, audit_tool]
