"""The ``tiermem`` command line: each command translates arguments and errors into one library call."""
