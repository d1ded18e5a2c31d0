"""The architecture, enforced: imports point inward, one module imports fastembed."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = {"core": ROOT / "core", "store": ROOT / "store", "server": ROOT / "server"}
FORBIDDEN = {
    "core": ("bosun.store", "bosun.server", "mcp", "aiosqlite", "asyncio", "anyio", "sqlite3", "fastembed",
             "starlette", "uvicorn", "httpx"),
    "store": ("bosun.server", "mcp", "fastembed", "starlette", "uvicorn"),
    "server": (),
}


@functools.cache
def _tree(path: Path) -> ast.Module:
    """Each file parsed once per session (several tests walk every file)."""
    return ast.parse(path.read_text(), filename=str(path))


@functools.cache
def _imports(path: Path) -> list[str]:
    tree = _tree(path)
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _py_files(layer: str) -> list[Path]:
    return sorted(LAYERS[layer].rglob("*.py"))


def test_imports_point_inward() -> None:
    bad = []
    for layer, banned in FORBIDDEN.items():
        for path in _py_files(layer):
            for name in _imports(path):
                if any(name == b or name.startswith(b + ".") for b in banned):
                    bad.append(f"{path.relative_to(ROOT)} imports {name}")
                if name.split(".")[0] in ("core", "store", "server"):
                    bad.append(f"{path.relative_to(ROOT)} imports bare {name} (use bosun.{name})")
    assert not bad, "\n".join(bad)


def test_only_the_model_module_imports_fastembed() -> None:
    users = [
        str(p.relative_to(ROOT))
        for layer in LAYERS
        for p in _py_files(layer)
        if any(n == "fastembed" or n.startswith("fastembed.") for n in _imports(p))
    ]
    assert users == ["server/model.py"]


def test_the_light_entry_points_do_not_import_heavy_libraries() -> None:
    """`bosun stdio` (the bridge) must start fast: stdlib only beyond bosun itself."""
    heavy = ("numpy", "sklearn", "fastembed", "mcp", "onnxruntime", "bm25s", "aiosqlite", "uvicorn", "starlette")
    for rel in ("server/transport/bridge.py", "server/transport/daemon_file.py", "server/cli.py"):
        top_level = ast.parse((ROOT / rel).read_text()).body
        names: list[str] = []
        for node in top_level:
            if isinstance(node, ast.Import):
                names += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.append(node.module)
        assert not [n for n in names if n.split(".")[0] in heavy], (rel, names)


# -- wings: one per capability, on a small ground floor ------------------------------------
CORE_WINGS = ("routing", "audit", "selection", "task", "offload", "guard")
GROUND_FLOOR = ("embedding", "judge", "tokens", "errors", "redact", "text", "actions")
# guard decides whether an action may run from the task's budget and seal: the one arrow between wings
WING_MAY_IMPORT = {"guard": {"task"}}


def _core_target(name: str) -> str | None:
    """The wing (or ground-floor module) a ``bosun.core...`` import lands in."""
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["bosun", "core"] else None


def test_core_is_grouped_into_wings_on_a_ground_floor() -> None:
    top = {p.stem for p in (ROOT / "core").glob("*.py")} - {"__init__"}
    assert top <= set(GROUND_FLOOR), f"core modules outside any wing: {sorted(top - set(GROUND_FLOOR))}"
    dirs = {p.name for p in (ROOT / "core").iterdir() if (p / "__init__.py").exists()}
    assert dirs == set(CORE_WINGS)
    for wing in CORE_WINGS:
        doc = ast.get_docstring(ast.parse((ROOT / "core" / wing / "__init__.py").read_text()))
        assert doc and len(doc) > 40, f"core/{wing}/__init__.py must say what the wing decides"


def test_no_core_wing_reaches_into_another() -> None:
    bad = []
    for wing in CORE_WINGS:
        for path in sorted((ROOT / "core" / wing).rglob("*.py")):
            for name in _imports(path):
                target = _core_target(name)
                if target in CORE_WINGS and target != wing and target not in WING_MAY_IMPORT.get(wing, set()):
                    bad.append(f"{path.relative_to(ROOT)} imports {name}")
    for path in sorted((ROOT / "core").glob("*.py")):
        for name in _imports(path):
            if _core_target(name) in CORE_WINGS:
                bad.append(f"ground floor {path.relative_to(ROOT)} imports the wing module {name}")
    assert not bad, "\n".join(bad)


# -- the MCP surface: thin tool adapters over the Engine's services -------------------------
# the core wing each tool module may read constants or types from (never another wing's)
TOOL_WING = {"route": "routing", "audit": "audit", "select": "selection", "plan": "task", "checkpoint": "task",
             "observe": "offload", "recall": "offload", "precheck": "guard", "handoff": "guard"}
PRIVATE_SDK = ("_tool_manager", "_resource_manager", "_prompt_manager", "_lowlevel_server", "_mcp_server")


def test_tool_modules_are_thin_adapters() -> None:
    bad = []
    for path in sorted((ROOT / "server" / "tools").glob("*.py")):
        if path.stem == "__init__":
            continue
        for name in _imports(path):
            parts = name.split(".")
            if parts[:3] == ["bosun", "server", "tools"]:
                bad.append(f"{path.name} imports another tool module: {name}")
            elif parts[:2] == ["bosun", "core"] and len(parts) > 3 and parts[2] in CORE_WINGS \
                    and parts[2] != TOOL_WING[path.stem]:
                bad.append(f"{path.name} reaches into another wing's core: {name}")
            elif parts[:3] == ["bosun", "server", "app"]:
                bad.append(f"{path.name} imports the app (the Engine comes from Context[Engine]): {name}")
    assert not bad, "\n".join(bad)


def test_services_do_not_import_tools_and_the_server_uses_public_sdk_api_only() -> None:
    bad = []
    for path in sorted((ROOT / "server").rglob("*.py")):
        text = path.read_text()
        bad += [f"{path.relative_to(ROOT)} uses the SDK's private {attr}" for attr in PRIVATE_SDK if f".{attr}" in text]
        if "services" in path.parts:
            bad += [f"{path.relative_to(ROOT)} imports {n}" for n in _imports(path)
                    if n.startswith(("bosun.server.tools", "bosun.server.app", "mcp"))]
    assert not bad, "\n".join(bad)


def test_services_never_import_the_engine_that_composes_them() -> None:
    """Not even for a type (``services/ports.py`` holds the Protocols): the Engine is the one composition root."""
    bad = [f"{path.relative_to(ROOT)} imports {n}" for path in sorted((ROOT / "server" / "services").glob("*.py"))
           for n in _imports(path) if n == "bosun.server.engine" or n.startswith("bosun.server.engine.")]
    assert not bad, "\n".join(bad)
