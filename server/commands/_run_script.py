"""The entry the PreToolUse hook writes: ``python -S -P .../_run_script.py -- CMD`` runs ``bosun run``.

Python compiles a script on every start but loads an imported module's cached bytecode: this stub
imports ``run_fast`` from its own directory (appended to ``sys.path``, so the standard library still
wins over the ``select.py`` there), calls its ``main`` and, on the lean path (no ``site`` loaded),
exits without the interpreter's teardown once stdout and stderr are flushed.
"""

import sys

if __name__ == "__main__":
    sys.path.append(__file__.rpartition("/")[0])  # the script's own (absolute) path: no os.path needed
    from run_fast import main  # the path above is what makes it importable

    code = main()
    if "site" in sys.modules:  # bosun's own modules were needed (the daemon started, --help): exit as usual
        sys.exit(code)
    sys.stdout.flush()
    sys.stderr.flush()
    import posix

    posix._exit(code)  # nothing left to tear down: skip the interpreter's finalisation
