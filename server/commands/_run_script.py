"""The entry the PreToolUse hook writes: ``python -S -P .../_run_script.py -- CMD`` runs ``bosun run``.

Python compiles a script on every start but loads an imported module's cached bytecode: this stub
imports ``run_fast`` from its own directory (appended to ``sys.path``, so the standard library still
wins over the ``select.py`` there) and calls its ``main``.
"""

import os
import sys

if __name__ == "__main__":
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))
    from run_fast import main  # the path above is what makes it importable

    sys.exit(main())
