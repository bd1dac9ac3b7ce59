"""``python -m tiermem``: the ``tiermem`` command (what ``tiermem setup`` writes when no ``tiermem``
script is beside the running Python)."""

from tiermem.cli.main import main

if __name__ == "__main__":
    main()
