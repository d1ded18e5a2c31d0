"""``handoff``: executable delegation contracts between agents (create, accept, complete, status).

The parent creates a contract (objective, input refs, inherited constraints, acceptance
checks, budget); a child accepts it once and completes it with a structured result,
which is checked against the contract and folded back into the parent's journal and seal.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from bosun.core.errors import InvalidInput
from bosun.core.task.seal import verdict as seal_verdict
from bosun.server.errors import tool_errors
from bosun.server.services.handoff import handoff_of
from bosun.server.services.tasks import tasks_of

HandoffMode = Literal["create", "accept", "complete", "status"]


def register(mcp: MCPServer[Any]) -> None:
    from bosun.server.app import engine_of

    @mcp.tool(structured_output=True)
    @tool_errors
    async def handoff(
        task_id: Annotated[str, Field(description="the parent task")],
        mode: HandoffMode,
        ctx: Context[Any],
        handoff_id: Annotated[str | None, Field(description="accept/complete/status")] = None,
        objective: Annotated[str | None, Field(description="create: what the child must achieve")] = None,
        inputs: Annotated[list[str] | None, Field(description="create: refs the child needs")] = None,
        constraints: Annotated[list[str] | None, Field(description="create: extra to the inherited ones")] = None,
        checks: Annotated[list[dict[str, Any]] | None,
                          Field(description="create: [{field, op: present|equals|not_equals|min|max|matches|"
                                            "nonempty|contains|is_ref, value}]")] = None,
        budget: Annotated[dict[str, Any] | None, Field(description="create: {tokens, cost_usd}")] = None,
        to_agent: Annotated[str | None, Field(description="create: only this agent may accept")] = None,
        agent: Annotated[str | None, Field(description="your agent name (accept/complete)")] = None,
        result: Annotated[dict[str, Any] | None, Field(description="complete: your structured result")] = None,
        seal: Annotated[str | None, Field(description="your last SEAL: drift is reported against it")] = None,
    ) -> dict[str, Any]:
        """Delegate with a checked contract: create | accept | complete (result checked, folded into the parent) | status."""
        engine = engine_of(ctx)
        svc = handoff_of(engine)
        if mode == "create":
            if objective is None:
                raise InvalidInput("objective", "is required to create a handoff")
            out = await svc.create(task_id, objective, inputs, constraints, checks, budget, to_agent, agent)
        elif mode == "accept":
            out = await svc.accept(task_id, handoff_id, agent)
        elif mode == "complete":
            if result is None:
                raise InvalidInput("result", "is required to complete a handoff", "a JSON object the checks run on")
            out = await svc.complete(task_id, handoff_id, agent, result)
        else:
            out = await svc.status(task_id, handoff_id)
        state = await tasks_of(engine).get(task_id)
        drift = seal_verdict(state, seal)
        out["drift"] = drift if seal is not None else {"seal": drift["seal"], "version": drift["version"]}
        return out
