"""Issue 14, item 8: every tool fuzzed through one real MCP session (hypothesis, bounded, derandomized).

Properties, for any arguments: the call returns (no exception, no JSON-RPC error for a well-formed
call), an error never carries internal exception text or a traceback (an ``internal error`` is
itself a failure: a crash that input can provoke), and an unknown argument is always refused by
name. The examples are derandomized, so CI sees the same calls on every run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from bosun.core.embedding import HashEmbedder
from bosun.server.app import create_server
from bosun.server.config import Config
from bosun.server.engine import Engine

EXAMPLES = 120  # per tool group; the whole file runs in a few seconds on a loaded 2-core machine

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40),
                         st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=40))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)), max_leaves=12)


class Session:
    """One open client on a portal thread, shared by every example (one server, one store)."""

    def __init__(self, portal: BlockingPortal, client: Client, schemas: dict[str, dict[str, Any]], task_id: str,
                 ref: str) -> None:
        self.portal, self.client, self.schemas, self.task_id, self.ref = portal, client, schemas, task_id, ref

    def call(self, name: str, args: dict[str, Any]) -> Any:
        return self.portal.call(self.client.call_tool, name, args)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    base = tmp_path_factory.mktemp("fuzz")
    (base / "root").mkdir()
    (base / "root" / "notes.txt").write_text("a file under the root\n")
    engine = Engine(Config(home=base / "home", policies=[], roots=[base / "root"]),
                    embedder_factory=lambda _c: HashEmbedder(64))
    with start_blocking_portal() as portal:
        cm = portal.wrap_async_context_manager(Client(create_server(engine)))
        client = cm.__enter__()
        try:
            tools = portal.call(client.list_tools).tools
            schemas = {t.name: t.input_schema for t in tools}
            started = portal.call(client.call_tool, "plan", {"mode": "start", "objective": "fuzz", "steps": ["a"]})
            task_id = started.structured_content["task_id"]
            observed = portal.call(client.call_tool, "observe", {
                "task_id": task_id, "kind": "result", "tool": "t",
                "result": "".join(f"row {i}\n" for i in range(400))})
            yield Session(portal, client, schemas, task_id, observed.structured_content["ref"])
        finally:
            cm.__exit__(None, None, None)


def _value_for(prop: dict[str, Any], session: Session, name: str) -> st.SearchStrategy[Any]:
    """A value of the declared shape (so calls get past validation); ``calls`` mixes in anything."""
    if "enum" in prop:
        typed: st.SearchStrategy[Any] = st.sampled_from(prop["enum"])
    elif name == "task_id":
        typed = st.sampled_from([session.task_id, "t_000000000000", ""])
    elif name == "ref":
        typed = st.sampled_from([session.ref, session.ref[:20], "mem://sha256:" + "0" * 64])
    elif prop.get("type") == "integer":
        typed = st.integers(prop.get("minimum", -5), 10_000)
    elif prop.get("type") == "number":
        typed = st.floats(prop.get("minimum", -2.0), prop.get("maximum", 2.0))
    elif prop.get("type") == "boolean":
        typed = st.booleans()
    elif prop.get("type") == "array":
        typed = st.lists(st.text(max_size=30), max_size=3)
    elif prop.get("type") == "string":
        typed = st.text(max_size=60)
    else:
        typed = json_values
    return typed


@st.composite
def calls(draw: st.DrawFn, session: Session, tools: tuple[str, ...]) -> tuple[str, dict[str, Any], str | None]:
    name = draw(st.sampled_from(tools))
    schema = session.schemas[name]
    props: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    args = {}
    for key, prop in props.items():
        if key in required or draw(st.integers(0, 3)) == 0:
            junk = draw(st.integers(0, 9)) == 0  # one value in ten: any JSON at all
            args[key] = draw(json_values if junk else _value_for(prop, session, key))
    unknown = None
    if draw(st.integers(0, 9)) == 0:
        unknown = draw(st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12)
                       .filter(lambda k: k not in props))
        args[unknown] = draw(json_scalars)
    return name, args, unknown


OUTCOMES: dict[str, int] = {}


def _check(session: Session, name: str, args: dict[str, Any], unknown: str | None) -> None:
    result = session.call(name, args)  # a JSON-RPC error would raise here: none is expected
    key = f"{name}:{'error' if result.is_error else 'ok'}"
    OUTCOMES[key] = OUTCOMES.get(key, 0) + 1
    text = "".join(getattr(c, "text", "") for c in result.content)
    if unknown is not None:
        assert result.is_error and unknown in text, (name, args, text)
    if result.is_error:
        assert "Traceback" not in text and "internal error" not in text, (name, json.dumps(args)[:300], text)
        assert "pydantic" not in text and "https://errors" not in text, text


GROUPS = {
    "state": ("plan", "checkpoint", "handoff", "observe"),
    "read": ("recall", "precheck", "select_context"),
    "knowledge": ("route", "get_policy", "audit", "filter_sources"),
}


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_every_tool_survives_generated_calls(session: Session, group: str) -> None:
    tools = tuple(t for t in GROUPS[group] if t in session.schemas)
    assert tools

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
    @given(call=calls(session, tools))
    def run(call: tuple[str, dict[str, Any], str | None]) -> None:
        _check(session, *call)

    run()


def test_every_listed_tool_is_fuzzed(session: Session) -> None:
    assert set(session.schemas) == {t for group in GROUPS.values() for t in group}


def test_the_fuzzing_reaches_past_validation() -> None:
    """Runs after the groups: some generated calls of most tools succeeded, so the logic behind
    validation was exercised too, not only the argument checks."""
    if not OUTCOMES:
        pytest.skip("run with the fuzz tests")
    succeeded = {k.split(":")[0] for k, n in OUTCOMES.items() if k.endswith(":ok") and n}
    assert len(succeeded) >= 5, OUTCOMES
