"""The MCP surface, the Engine holding warm state, transports and the CLI."""
