"""bosun: a context governor for AI agent fleets.

The code lives in three layers installed under this namespace:
``bosun.core`` (pure logic), ``bosun.store`` (persistence) and
``bosun.server`` (the MCP surface, the Engine, the CLI).
"""

__version__ = "0.1.0"
