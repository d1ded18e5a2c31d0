"""The entry the Claude Code settings run: ``python -S -P .../_hook_script.py claude-code`` (or
``claude-code-pretool``) runs ``bosun hook`` without ``site``.

``site`` (with the editable install's finder) is about a third of a fresh Python's start-up, and
the console script ``bosun`` pays it on every prompt. This stub imports ``hook`` from its own
directory (appended to ``sys.path`` with ``transport/``, where ``http_lite`` is, so the standard library
still wins over the ``select.py`` there; imported, its cached bytecode is used) and calls ``main``, the
function ``bosun hook`` calls.
"""

import os
import sys

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path += [here, os.path.join(os.path.dirname(here), "transport")]  # _daemon.script_path()
    from hook import main  # the path above is what makes it importable

    sys.exit(main())
