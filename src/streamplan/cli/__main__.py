"""``python -m streamplan.cli``: the command line."""

from streamplan.cli import program

program()
