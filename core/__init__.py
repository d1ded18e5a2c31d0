"""Pure domain logic: no I/O, no asyncio, no MCP, no SQLite."""
