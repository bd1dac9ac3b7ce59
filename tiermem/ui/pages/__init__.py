"""The pages of ``tiermem ui``: one module per page, each a ``render(view)`` and its actions."""
