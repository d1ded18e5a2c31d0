"""The MCP protocol beyond tools: logging, completion, subscriptions, progress, the docs resource and
dispatch mode. Each module has one job and a ``register``/helper that ``server/app.py`` wires in."""
