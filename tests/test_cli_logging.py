"""What reaches stderr: WARNING and up, the serving line at INFO, INFO with ``-v``; a library's DEBUG never."""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import logging, sys
from bosun.server.cli import _logging
_logging(sys.argv[1] == "-v")
third = logging.getLogger("bm25s")
third.setLevel(logging.DEBUG)  # what bm25s does at import
third.debug("bm25s debug line")
logging.getLogger("bosun.serve").info("bosun serving http://127.0.0.1:1/mcp (listening on 0.0.0.0:1)")
logging.getLogger("bosun.engine").info("engine info line")
logging.getLogger("bosun.engine").warning("engine warning line")
"""


@pytest.mark.parametrize("verbose", [False, True])
def test_stderr_carries_the_serving_line_and_no_library_debug(verbose: bool) -> None:
    res = subprocess.run([sys.executable, "-c", SCRIPT, "-v" if verbose else "-"], capture_output=True, text=True,
                         timeout=60, check=True)
    err = res.stderr
    assert "INFO bosun.serve: bosun serving" in err and "listening on 0.0.0.0:1" in err
    assert "engine warning line" in err
    assert ("engine info line" in err) == verbose
    assert "bm25s debug line" not in err  # -v means INFO; a library that sets DEBUG on itself is held to it
