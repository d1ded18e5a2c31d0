"""completion/complete: task ids, policy names and stored-ref prefixes complete; the unknown completes to nothing."""

from __future__ import annotations

from mcp import Client
from mcp.types import PromptReference, ResourceTemplateReference

from bosun.server.engine import Engine


async def _task(client: Client, objective: str) -> str:
    started = await client.call_tool("plan", {"mode": "start", "objective": objective, "steps": ["one"]})
    assert not started.is_error, started.content
    return str(started.structured_content["task_id"])  # type: ignore[index]


async def test_task_ids_complete_for_the_prompt_and_the_task_templates(client: Client) -> None:
    first, second = await _task(client, "ship it"), await _task(client, "write the notes")
    prompt = await client.complete(PromptReference(name="task-resume"), {"name": "task_id", "value": "t_"})
    assert {first, second} <= set(prompt.completion.values)
    narrowed = await client.complete(ResourceTemplateReference(uri="bosun://task/{task_id}/manifest"),
                                     {"name": "task_id", "value": first[:8]})
    assert first in narrowed.completion.values
    assert all(v.startswith(first[:8]) for v in narrowed.completion.values)
    none = await client.complete(PromptReference(name="task-resume"), {"name": "task_id", "value": "zz"})
    assert none.completion.values == []


async def test_policy_names_complete_by_prefix(client: Client, engine: Engine) -> None:
    names = sorted(p.name for p in (await engine.policies.ready()).index.policies)
    assert names, "the demo corpus serves policies"
    prefix = names[0][:3]
    got = await client.complete(ResourceTemplateReference(uri="bosun://policy/{name}"), {"name": "name", "value": prefix})
    assert got.completion.values == [n for n in names if n.lower().startswith(prefix.lower())]


async def test_ref_prefixes_complete_from_the_stored_payloads(client: Client, engine: Engine) -> None:
    stored = await engine.refs.put("".join(f"line {i}\n" for i in range(300)).encode())
    digest = stored.removeprefix("mem://").removeprefix("sha256:")
    template = ResourceTemplateReference(uri="bosun://ref/{sha256}")
    got = await client.complete(template, {"name": "sha256", "value": digest[:6]})
    assert digest in got.completion.values
    pasted = await client.complete(template, {"name": "sha256", "value": "mem://sha256:" + digest[:6]})
    assert digest in pasted.completion.values
    assert (await client.complete(template, {"name": "sha256", "value": "not-hex"})).completion.values == []


async def test_what_bosun_does_not_serve_completes_to_nothing(client: Client) -> None:
    # the conformance suite asks for its own fixture prompt: an empty answer, not an error
    got = await client.complete(PromptReference(name="test_prompt_with_arguments"), {"name": "arg1", "value": "par"})
    assert got.completion.values == []
    assert client.server_capabilities.completions is not None  # type: ignore[union-attr]
