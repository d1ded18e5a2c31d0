"""Every module of the three layers imports from the installed layout (bosun.core/.store/.server)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _modules() -> list[str]:
    names = []
    for layer in ("core", "store", "server"):
        for path in sorted((ROOT / layer).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            names.append(".".join(["bosun", *parts]))
    return names


@pytest.mark.parametrize("name", _modules())
def test_module_imports(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__file__ is not None and module.__doc__, f"{name} needs a docstring that says why it exists"


# -- nothing heavy before `initialize` is answered (issue 15) ------------------------------------
HEAVY = ("sklearn", "scipy", "fastembed", "onnxruntime", "bm25s", "tokenizers", "huggingface_hub")

# Runs in a fresh interpreter: the modules `bosun stdio --standalone` and `bosun serve` import, the
# real server over a real Engine (the model factory held back, so the background load cannot race
# the check), the lifespan entered and `initialize` answered through the SDK client; then it prints
# which heavy packages are loaded at that moment.
_PROBE = """
import asyncio, json, sys, threading
import bosun.server.cli, bosun.server.transport.serve, bosun.server.transport.stdio
from bosun.server.app import create_server
from bosun.server.config import Config
from bosun.server.engine import Engine
from bosun.core.embedding import HashEmbedder
from mcp import Client

release = threading.Event()

def held_model(_config):
    release.wait(30)
    return HashEmbedder(64)

async def main():
    engine = Engine(Config.from_env(home=__import__("pathlib").Path(sys.argv[1])), embedder_factory=held_model)
    async with Client(create_server(engine), mode="legacy") as client:
        assert client.server_info is not None  # `initialize` answered
        heavy = sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[2].split(",")))
        release.set()
    print(json.dumps(heavy))

asyncio.run(main())
"""


def test_initialize_is_answered_before_any_heavy_import(tmp_path: Path) -> None:
    """The process that answers ``initialize`` has not imported scikit-learn, scipy, fastembed, onnxruntime
    or bm25s by then: they load in the background after (issue 15: ``initialize`` within 1 s)."""
    import json
    import subprocess
    import sys

    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("BOSUN_")}
    done = subprocess.run([sys.executable, "-c", _PROBE, str(tmp_path / "home"), ",".join(HEAVY)],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_cli_and_hook_paths_import_no_heavy_module() -> None:
    """``bosun hook``, ``bosun run`` and ``bosun stdio`` (the bridge) start with the stdlib and bosun's own
    light modules only: not even numpy or the SDK."""
    import json
    import subprocess
    import sys

    probe = ("import json, sys\n"
             "import bosun.server.cli as cli\n"
             "cli.build_parser()\n"
             "import bosun.server.commands.hook, bosun.server.commands.run, bosun.server.commands.pretool\n"
             "import bosun.server.transport.bridge\n"
             "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & set(sys.argv[1].split(',')))))\n")
    heavy = (*HEAVY, "numpy", "mcp", "mcp_types", "pydantic", "anyio", "starlette", "uvicorn")
    done = subprocess.run([sys.executable, "-c", probe, ",".join(heavy)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_the_bridge_fast_path_reads_stdio_arguments_as_the_full_parser_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """``bosun stdio`` skips the parser of every command: the same home and daemon arguments, and anything it
    does not know (``--standalone``, ``--help``, a typo) still goes to the full parser."""
    from bosun.server.cli import bridge_args, build_parser

    monkeypatch.setenv("BOSUN_HOME", "/tmp/bosun-from-env")
    assert bridge_args([]) == ("/tmp/bosun-from-env", [])
    home, extra = bridge_args(["--policies", "docs", "--home=~/h"]) or (None, None)
    assert Path(str(home)) == Path("~/h").expanduser() and extra == ["--policies", str(Path("docs").resolve())]
    for other in (["--standalone"], ["--help"], ["--hom", "x"], ["--home"]):
        assert bridge_args(other) is None
    parsed = build_parser().parse_args(["stdio", "--home", "/h", "--policies", "docs"])
    assert parsed.home == "/h" and parsed.policies == ["docs"] and not parsed.standalone


def test_model_prefetch_switch_and_the_prefetch_hands_over_value_or_error() -> None:
    from bosun.server.background import Prefetch
    from bosun.server.cli import _prefetch_model
    from bosun.server.config import Config, ConfigError

    default, on, off = (Config.from_env(env) for env in ({}, {"BOSUN_MODEL_PREFETCH": "on"},
                                                          {"BOSUN_MODEL_PREFETCH": "off"}))
    assert (default.model_prefetch, default.model_prefetch_auto) == (False, True)  # auto
    assert (on.model_prefetch, on.model_prefetch_auto) == (True, False)
    assert (off.model_prefetch, off.model_prefetch_auto) == (False, False)
    # auto prefetches only where the handshake is answered from a record (stdio --standalone)
    assert _prefetch_model(default) is None and _prefetch_model(off, handshake_recorded=True) is None
    with pytest.raises(ConfigError, match="BOSUN_MODEL_PREFETCH"):
        Config.from_env({"BOSUN_MODEL_PREFETCH": "later"})
    assert Prefetch(lambda a, b: a + b, 2, 3).result(object()) == 5  # stands in for a factory: its argument ignored

    def fails() -> None:
        raise ValueError("no model here")

    with pytest.raises(ValueError, match="no model here"):
        Prefetch(fails).result()


_MODEL_PROBE = """
import json, sys
from pathlib import Path
from bosun.server.model import load_embedder
embedder = load_embedder(Path(sys.argv[1]))
texts = ["bosun", "roll back the production deploy", "x " * 700, "", "héllo wörld 漢字", "Deploy!!"]
vectors = embedder.embed(texts)
print(json.dumps({"fastembed": "fastembed" in sys.modules, "vectors": vectors.tolist()}))
"""


@pytest.mark.model
def test_the_default_model_loads_without_fastembed_and_embeds_as_fastembed_does(tmp_path: Path) -> None:
    """The default model runs on onnxruntime + tokenizers (``PooledOnnxModel``): fastembed is not imported, and
    the vectors are fastembed's own for the same model directory, bit for bit."""
    import json
    import subprocess
    import sys

    import numpy as np

    done = subprocess.run([sys.executable, "-c", _MODEL_PROBE, str(tmp_path)], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    assert probe["fastembed"] is False
    from fastembed import TextEmbedding

    from bosun.server.model import DEFAULT_MODEL, DEFAULT_MODEL_ID, PooledOnnxModel

    model_dir = tmp_path / "models" / DEFAULT_MODEL_ID
    reference = TextEmbedding(model_name=DEFAULT_MODEL, specific_model_path=str(model_dir), local_files_only=True,
                              threads=1)
    texts = ["bosun", "roll back the production deploy", "x " * 700, "", "héllo wörld 漢字", "Deploy!!"]
    model = PooledOnnxModel(model_dir)
    for batch in (1, 4, len(texts)):
        ours = np.vstack(list(model.embed(texts, batch_size=batch)))
        theirs = np.vstack(list(reference.embed(texts, batch_size=batch)))
        assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs)
    assert np.allclose(np.array(probe["vectors"], dtype=np.float32), theirs, atol=1e-6)  # l2-normalised again
