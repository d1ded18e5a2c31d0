"""The MCP tools, one module per tool family: each a thin adapter over one Engine service.

A tool module defines its tools as async functions marked ``@tool(ANNOTATIONS)``
(``server/surface.py``) that take ``ctx: Context[Engine]``, parse their arguments, call one
service method on ``ctx.request_context.lifespan_context`` and return a dict; it lists them in
``TOOLS``. A module with resources, prompts or HTTP routes also defines
``register(mcp, engine)``. To add a tool: write the service method, the marked function, add
it to ``TOOLS`` and the module to ``TOOL_MODULES`` below.
"""

from __future__ import annotations

from types import ModuleType

from bosun.server.tools import audit as audit_tool
from bosun.server.tools import checkpoint, handoff, observe, plan, precheck, recall
from bosun.server.tools import route as route_tool
from bosun.server.tools import select as select_tool

TOOL_MODULES: list[ModuleType] = [recall, plan, precheck, handoff, observe, checkpoint, select_tool, route_tool, audit_tool]
