"""``python -m bosun`` runs the CLI."""

from bosun.server.cli import main

if __name__ == "__main__":
    main()
