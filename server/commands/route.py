"""``bosun route "PROMPT"``: route one prompt from the shell (oiax's stdout adapter), ``--json`` for programs.

Through the running daemon when there is one (``$BOSUN_HOME/daemon.json``, ``POST /v1/route``: the
warm index answers in milliseconds), else in-process on a private Engine over ``--home`` (the
corpus is indexed first; embeddings are cached there, so the next run is faster). With
``--tools FILE`` (a JSON list of ``{name, description}``, an MCP ``tools/list`` answer, or
``{"tools": [...]}``) it runs the Tool Compass over those tools instead of the policies.

The module imports only the stdlib at load time; ``render_tools`` and ``load_tool_list`` are what
a hook needs to put the compass's recommendation into a prompt's context.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bosun.server.commands import config_of

NAME = "route"
HELP = "route one prompt: the policies (or, with --tools, the tools) that bear on it"
TOOLS_FILE = "tools.json"  # $BOSUN_HOME/tools.json: the harness's tool list, for the hook's compass
EXAMPLE = 'bosun route "drop the legacy column from the users table"'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("prompt", help='the request, as text ("-" reads stdin)')
    parser.add_argument("--json", action="store_true", help="print the route answer as JSON")
    parser.add_argument("--top-k", type=int, default=None, help="max hits (1-10; default 2, 3 with --tools)")
    parser.add_argument("--tools", help="JSON file of the harness's tools [{name, description}]: rank those")
    parser.add_argument("--save-tools", action="store_true",
                        help="also keep --tools as $BOSUN_HOME/tools.json, the list the hook's compass reads")
    parser.add_argument("--local", action="store_true", help="do not use a running daemon; route in-process")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the daemon (default 10)")
    parser.add_argument("--home", help="state directory (default $BOSUN_HOME or ~/.bosun)")


def load_tool_list(path: Path) -> list[Any]:
    """The tools in ``path``: a list, ``{"tools": [...]}`` (an MCP tools/list result); ValueError says what is wrong."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    if isinstance(data, dict) and isinstance(data.get("tools"), list):
        data = data["tools"]
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a list of {{name, description}} or {{\"tools\": [...]}}")
    return data


def render_hits(result: dict[str, Any]) -> str:
    """oiax's stdout adapter: one line per hit with its evidence; a line saying so when nothing applies."""
    hits = result.get("hits") or []
    what = "tools" if "tools" in result and "corpus_size" not in result else "policies"
    if not hits:
        lines = [f"no {what} apply (abstained)"]
    else:
        lines = []
        for hit in hits:
            why = "; ".join(str(w) for w in hit.get("why") or [])
            if hit.get("requires"):
                why += ("; " if why else "") + "read with: " + ", ".join(map(str, hit["requires"]))
            lines.append(f"{hit.get('name')}  {float(hit.get('score', 0.0)):.2f}" + (f"  ({why})" if why else ""))
    lines.extend(f"! {n}" for n in result.get("notices") or [])
    return "\n".join(lines)


def render_tools(result: dict[str, Any], limit: int = 512) -> str:
    """The compass's paragraph for a prompt's context (the UserPromptSubmit hook); '' when no tool fits."""
    hits = result.get("hits") or []
    if not hits:
        return ""
    text = "bosun tool compass: tools that fit this prompt: " + "; ".join(
        f"{h.get('name')}" + (f" ({h['why'][0]})" if h.get("why") else "") for h in hits)
    data = text.encode("utf-8")
    return text if len(data) <= limit else data[: limit - 3].decode("utf-8", "ignore").rstrip() + "..."


def compass_context(home: Path, prompt: str, timeout: float = 2.0) -> str:
    """For the UserPromptSubmit hook: the compass paragraph for ``prompt`` over ``home/tools.json``.

    Claude Code's hook input carries no tool list, so the harness's tools are kept in a file
    (``bosun route --save-tools FILE`` copies one there); '' when there is no file, no daemon, or no
    tool fits. Stdlib only, like the hook: the daemon does the ranking (one warm index per tool list).
    """
    path = home / TOOLS_FILE
    if not path.exists():
        return ""
    try:
        answer = via_daemon(home, {"prompt": prompt, "tools": load_tool_list(path)}, timeout)
    except ValueError:
        return ""
    return render_tools(answer) if answer else ""


def via_daemon(home: Path, body: dict[str, Any], timeout: float) -> dict[str, Any] | None:
    """The daemon's answer, or None when no daemon is reachable (then the caller routes in-process)."""
    from bosun.server.commands._daemon import endpoint, post_json, read_daemon

    try:
        url, token = read_daemon(str(home))
        url = endpoint(url, "/v1/route")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        status, payload = post_json(url, body, token, timeout)
    except (OSError, ValueError):
        return None
    try:
        answer = json.loads(payload.decode("utf-8"))
    except ValueError:
        return None
    if status == 400 and isinstance(answer, dict) and "error" in answer:
        raise ValueError(str(answer["error"]))  # the daemon refused the input: routing locally would too
    return answer if status == 200 and isinstance(answer, dict) else None


async def in_process(args: argparse.Namespace, prompt: str, tools: list[Any] | None) -> dict[str, Any]:
    from bosun.server.engine import Engine

    engine = Engine(config_of(args))
    await engine.open(watch_policies=False)
    try:
        if tools is not None:
            return await engine.compass.rank(prompt, tools, args.top_k)
        out = await engine.policies.route(prompt, args.top_k)
        out.pop("cached", None)
        return out
    finally:
        await engine.close()


def run(args: argparse.Namespace) -> int:
    import asyncio

    from bosun.core.errors import BosunError

    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    try:
        tools = load_tool_list(Path(args.tools).expanduser()) if args.tools else None
        if args.save_tools:
            if tools is None:
                raise ValueError("--save-tools needs --tools FILE")
            home = config_of(args).home
            home.mkdir(parents=True, exist_ok=True)
            (home / TOOLS_FILE).write_text(json.dumps(tools), encoding="utf-8")
        body: dict[str, Any] = {"prompt": prompt}
        if args.top_k is not None:
            body["top_k"] = args.top_k
        if tools is not None:
            body["tools"] = tools
        result = None if args.local else via_daemon(config_of(args).home, body, args.timeout)
        source = "daemon"
        if result is None:
            source = "in-process"
            result = asyncio.run(in_process(args, prompt, tools))
    except (BosunError, ValueError) as exc:
        print(f"bosun route: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(dict(result, via=source), indent=1))
    else:
        print(render_hits(result))
    return 0
