"""The entry the PreToolUse hook writes: ``python -S -P .../_run_script.py -- CMD`` runs ``bosun run``.

Python compiles a script on every start but loads an imported module's cached bytecode: this stub
imports ``run`` from its own directory (appended to ``sys.path`` with ``transport/``, where ``http_lite``
is, so the standard library still wins over the ``select.py`` there), calls ``main`` (the function
``bosun run`` calls) and, on the lean path (no ``site`` loaded), exits without the interpreter's
teardown once stdout and stderr are flushed.
"""

import os
import sys

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path += [here, os.path.join(os.path.dirname(here), "transport")]  # _daemon.script_path()
    from run import main  # the path above is what makes it importable

    code = main()
    if "site" in sys.modules:  # bosun's own modules were needed (the daemon started, --help): exit as usual
        sys.exit(code)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # nothing left to tear down: skip the interpreter's finalisation
