"""bosun: a context governor for AI agent fleets.

The code lives in three layers installed under this namespace:
``bosun.core`` (pure logic), ``bosun.store`` (persistence) and
``bosun.server`` (the MCP surface, the Engine, the CLI). Beside them, for
applications: ``bosun.client`` (the daemon's tools as Python methods),
``bosun.ProvenanceMiddleware`` (dokis's filter-and-audit object) and
``bosun.adapters`` (LangChain, LlamaIndex).
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: `bosun stdio` imports this package on every attach, and typing costs ~8 ms

__version__ = "0.1.0"

__all__ = ["ComplianceViolation", "ProvenanceConfig", "ProvenanceMiddleware", "__version__"]

if TYPE_CHECKING:
    from typing import Any

    from bosun.middleware import ComplianceViolation, ProvenanceConfig, ProvenanceMiddleware

_LAZY = ("ComplianceViolation", "ProvenanceConfig", "ProvenanceMiddleware")


def __getattr__(name: str) -> Any:
    """``from bosun import ProvenanceMiddleware`` without importing the client for every ``bosun.*`` import."""
    if name in _LAZY:
        from bosun import middleware

        return getattr(middleware, name)
    raise AttributeError(f"module 'bosun' has no attribute {name!r}")
