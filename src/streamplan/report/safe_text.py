"""User strings on a terminal: printed as they are, never interpreted.

Model, graph, function and file names, error texts from a user's code: none may style the
terminal. rich would read ``[red]x[/red]`` in them as markup and ``:fire:`` as an emoji, and a
raw ANSI escape or a bidi override passes straight through to the terminal. The command
line's consoles turn markup and emoji codes off and show control characters as escapes
(``printable``); a line that styles itself with markup escapes what it quotes (``quoted``).
"""

from __future__ import annotations

import re

from rich.markup import escape

# C0 controls but tab and newline, DEL, C1 controls, the line and paragraph separators (a
# terminal may break a line there), and the bidi marks, embeddings and isolates
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with each control character shown as its escape (``\\x1b``), not acted on."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def quoted(text: object) -> str:
    """A user string to put inside a line printed with rich markup: shown as it is."""
    return escape(printable(str(text)))
