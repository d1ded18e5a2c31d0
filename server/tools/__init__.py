"""One module per tool family; each exposes ``register(mcp)``.

Add a module here to put its tools, resources and prompts on the server.
"""

from __future__ import annotations

from types import ModuleType

from bosun.server.tools import recall

TOOL_MODULES: list[ModuleType] = [recall]
