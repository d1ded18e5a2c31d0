"""The entry the Claude Code settings run: ``python -S -P .../_hook_script.py claude-code`` (or
``claude-code-pretool``) runs ``bosun hook`` without ``site``.

``site`` (with the editable install's finder) is about a third of a fresh Python's start-up, and
the console script ``bosun`` pays it on every prompt. This stub imports ``hook_fast`` from its own
directory (appended to ``sys.path``, so the standard library still wins over the ``select.py``
there; imported, its cached bytecode is used) and calls its ``main``.
"""

import os
import sys

if __name__ == "__main__":
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))
    from hook_fast import main  # the path above is what makes it importable

    sys.exit(main())
