"""``python -m lantern.cli``: the CLI itself (``python -m lantern`` runs the agents' hooks without it)."""

from lantern.cli import main

if __name__ == "__main__":
    main()
