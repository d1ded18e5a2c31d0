"""stdout stays pure JSON-RPC even when the host closes stdin while the model is still loading.

Found with the npm launcher: a host that connects, lists tools and leaves at once made the
process exit while the background model load was importing fastembed; huggingface_hub then
print()ed "Error importing ...: can't register atexit after shutdown" to the real stdout.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}


@pytest.mark.parametrize("args", [["stdio", "--standalone"], ["serve", "--stdio", "--port", "0"]])
def test_stdout_is_only_jsonrpc_after_early_eof(tmp_path: Path, args: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bosun", *args, "--home", str(tmp_path / "home")],
        input=json.dumps(INIT) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert lines, result.stderr[-2000:]
    for line in lines:
        message = json.loads(line)  # a stray print() here fails the test
        assert message.get("jsonrpc") == "2.0", line
    assert json.loads(lines[0])["id"] == 1
    assert result.returncode == 0, result.stderr[-2000:]
