"""Real MCP calls from the host to a bosun container, over streamable HTTP with the bearer token.

Run by bench/docker_check.sh with the repo venv's python:

    python bench/docker_mcp.py URL write STATE   # tools/list, route, plan, a 40 KB observe, recall
    python bench/docker_mcp.py URL verify STATE  # the task and the offloaded bytes are still there

The token comes from $BOSUN_TOKEN (the same env file the container was started with). ``write``
saves the task id, the ref and the payload's sha256 in STATE; ``verify`` reads them back after a
restart, a new container or a kill. Prints one JSON line; exits 1 on any failed expectation.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

PAYLOAD = "".join(f"tests/test_sidecar.py::test_case_{i:04d} PASSED [{i % 100:3d}%]\n" for i in range(780)) + (
    "FAILED tests/test_sidecar.py::test_bind_mount - PermissionError\n1 failed, 780 passed\n"
)


def _structured(result: Any) -> dict[str, Any]:
    if result.is_error:
        raise AssertionError(result.content[0].text if result.content else "tool error")
    return dict(result.structured_content or json.loads(result.content[0].text))


async def _recall_all(client: Client, ref: str) -> str:
    """The offloaded text, exactly: raw in pages until the server says there is no more."""
    raw = _structured(await client.call_tool("recall", {"ref": ref, "op": "raw", "max_tokens": 1_000_000}))
    text = raw.get("text", raw.get("content"))
    if not isinstance(text, str):
        raise AssertionError(f"recall raw returned no text: {sorted(raw)}")
    return text


async def write(url: str, token: str, state: Path) -> dict[str, Any]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            routed = _structured(await client.call_tool("route", {"prompt": "how do I rotate a leaked API key"}))
            task = _structured(await client.call_tool("plan", {
                "mode": "start", "objective": "check the docker sidecar", "steps": ["build", "run", "verify"]}))
            observed = _structured(await client.call_tool("observe", {
                "task_id": task["task_id"], "kind": "result", "tool": "bash", "args": {"cmd": "pytest"},
                "result": PAYLOAD}))
            if not observed.get("offloaded"):
                raise AssertionError(f"a {len(PAYLOAD)} byte result was not offloaded: {observed}")
            back = await _recall_all(client, observed["ref"])
    digest = hashlib.sha256(PAYLOAD.encode()).hexdigest()
    state.write_text(json.dumps({"task_id": task["task_id"], "ref": observed["ref"], "sha256": digest}))
    return {"tools": len(tools), "route_keys": sorted(routed)[:4], "observe_bytes": len(PAYLOAD.encode()),
            "recall_identical": back == PAYLOAD}


async def verify(url: str, token: str, state: Path) -> dict[str, Any]:
    saved = json.loads(state.read_text())
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            status = _structured(await client.call_tool("plan", {"mode": "status", "task_id": saved["task_id"]}))
            back = await _recall_all(client, saved["ref"])
    return {"task_found": "check the docker sidecar" in json.dumps(status),
            "recall_identical": hashlib.sha256(back.encode()).hexdigest() == saved["sha256"]}


def main() -> int:
    url, mode, state = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    token = os.environ["BOSUN_TOKEN"]
    try:
        out = anyio.run(write if mode == "write" else verify, url, token, state)
    except Exception as exc:  # one line for the table, not a traceback
        print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}))
        return 1
    ok = all(v for k, v in out.items() if isinstance(v, bool))
    print(json.dumps({"ok": ok, **out}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
