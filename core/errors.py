"""Domain errors. The server layer turns these into MCP ToolErrors.

Every error names the field at fault and what would be accepted, in one form
(``<field>: <what is wrong>; accepted: ...``), because the caller is usually a model
that has to fix its own call.
"""

from __future__ import annotations


class BosunError(Exception):
    """Base class of every error bosun reports to a caller."""


class InvalidInput(BosunError):
    """A caller-supplied value is wrong: names the field and the fix."""

    def __init__(self, field: str, problem: str, accepted: str | None = None) -> None:
        self.field = field
        self.problem = problem
        self.accepted = accepted
        text = f"{field}: {problem}"
        if accepted:
            text += f"; accepted: {accepted}"
        super().__init__(text)


# the argument that names each kind of thing, when the caller does not say (a tool error starts with its field)
_FIELD_OF = {"task": "task_id", "handoff": "handoff_id", "ref": "ref", "policy": "name"}


class NotFound(BosunError):
    """A named thing (ref, task, policy) does not exist: ``<field>: <kind> not found: <key>; <hint>``."""

    def __init__(self, kind: str, key: str, hint: str | None = None, field: str | None = None) -> None:
        self.kind = kind
        self.key = key
        self.field = field or _FIELD_OF.get(kind)
        text = f"{kind} not found: {key}"
        if self.field:
            text = f"{self.field}: {text}"
        if hint:
            text += f"; {hint}"
        super().__init__(text)


class IntegrityError(BosunError):
    """Stored bytes no longer match their content address: never return them."""


class Conflict(BosunError):
    """An update was based on a stale version of shared state."""


class StorageError(BosunError):
    """The database could not finish an operation (busy past the timeout, disk full, I/O error).

    ``retry_safe`` says whether the failed operation left nothing behind, so calling again cannot
    apply anything twice (a failed statement is rolled back whole)."""

    def __init__(self, operation: str, cause: str, retry_safe: bool, advice: str) -> None:
        self.operation = operation
        self.cause = cause
        self.retry_safe = retry_safe
        applied = "nothing was applied; retrying is safe" if retry_safe else "the outcome is unknown; check first"
        super().__init__(f"storage: could not {operation} ({cause}); {applied}; {advice}")
