"""Small helpers of every text view: bytes as Poplar prints them, short names, a table under
its title, and the console for text that has no width to fit."""
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


#: the width of a console that does not wrap: wider than any table the views print, so tables
#: keep their natural width (printed text is not wrapped at any width: ``soft_wrap``)
UNWRAPPED = 100_000


def unwrapped_console(file=None, record: bool = False):
    """A rich console that wraps nothing: for text piped to a file or a pager (the CLI) and
    for ``str()`` of the API's answers, where rich would otherwise break lines at 80 columns,
    inside phrases and numbers. Its ``soft_wrap`` tells the views there is no width to fit
    (``oom_panel``)."""
    from rich.console import Console

    return Console(file=file, record=record, highlight=False, width=UNWRAPPED, soft_wrap=True)


def titled(title: str, table):
    """``table`` under ``title`` on a line of its own, for ``console.print``. As the table's
    own title, rich would wrap the title at the table's width, inside the phrase; on its own
    line it wraps where the console's other text does (the terminal's width), or, piped, not
    at all (``tilemem.commands.options.console``)."""
    from rich.console import Group
    from rich.text import Text

    return Group(Text(title, style="table.title"), table)
