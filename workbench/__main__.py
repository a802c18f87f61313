"""``python -m workbench``: the GUI with no arguments, a subcommand otherwise."""

from workbench.cli import run

run()
