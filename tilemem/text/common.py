"""Small helpers of every text view: bytes as Poplar prints them, short names, and a table
under its title."""
from __future__ import annotations

def human_bytes(n: int) -> str:
    """``1,234,567 (1.2 M)``-style bytes, as in Poplar's profile summary.

    >>> human_bytes(131608)
    '131,608 (128.5 K)'
    """
    value = float(n)
    for unit in ("", "K", "M", "G", "T"):
        if abs(value) < 1024 or unit == "T":
            break
        value /= 1024
    return f"{n:,}" if unit == "" else f"{n:,} ({value:.1f} {unit})"



def short(s: str, n: int) -> str:
    """``s`` cut to ``n`` characters from the left (names end with what tells them apart).

    >>> short("layer1/weights", 8)
    '…weights'
    """
    return s if len(s) <= n else "…" + s[-(n - 1):]


def titled(title: str, table):
    """``table`` under ``title`` on a line of its own, for ``console.print``. As the table's
    own title, rich would wrap the title at the table's width, inside the phrase; on its own
    line it wraps where the console's other text does (the terminal's width), or, piped, not
    at all (``tilemem.commands.options.console``)."""
    from rich.console import Group
    from rich.text import Text

    return Group(Text(title, style="table.title"), table)
