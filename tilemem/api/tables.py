"""What every answer of the API shares: its tables as pandas DataFrames or Arrow tables (both
optional libraries, imported when asked for) and its display in a notebook (the CLI's own
view, rendered to HTML)."""
from __future__ import annotations

import io

import numpy as np

from ..errors import ReportError

#: Width of the views rendered as HTML for notebooks: the tables of the text views fit it.
VIEW_WIDTH = 110


def need(module: str, extra: str):
    """Import the optional library ``module``, or say in one line how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ReportError(f"this needs {module}: pip install 'tilemem[{extra}]'") from None


def frame(columns: dict, index=None):
    """A pandas DataFrame of ``columns`` (name -> numpy column or list)."""
    pd = need("pandas", "tables")
    return pd.DataFrame(columns, index=index, copy=False)


def arrow(columns: dict):
    """A pyarrow Table of ``columns``; numeric numpy columns are shared, not copied."""
    pa = need("pyarrow", "tables")
    return pa.table({k: (v if isinstance(v, pa.Array) else pa.array(v))
                     for k, v in columns.items()})


def struct_columns(items: list, fields: tuple[str, ...]) -> dict:
    """Columns of the attributes ``fields`` of a list of per-tile results (a few thousand rows
    at most: one a tile, never one a variable)."""
    return {f: np.asarray([getattr(x, f) for x in items]) if items else np.zeros(0)
            for f in fields}


def render_html(draw) -> str:
    """HTML of what ``draw(console)`` prints on a rich console (the CLI's view, as a notebook
    shows it)."""
    from rich.console import Console

    c = Console(record=True, width=VIEW_WIDTH, file=io.StringIO(), highlight=False,
                force_terminal=False)
    draw(c)
    return c.export_html(inline_styles=True,
                         code_format="<pre style=\"font-family:monospace;font-size:12px;"
                                     "line-height:1.25\">{code}</pre>")


def render_text(draw) -> str:
    """What ``draw(console)`` prints, as plain text: as the CLI prints it to a file, each line
    whole (no width to wrap at: a terminal or an editor wraps it where it shows it)."""
    from ..text.common import unwrapped_console

    c = unwrapped_console(file=io.StringIO(), record=True)
    draw(c)
    return c.export_text()


class Table:
    """Mixin of the API's answers: ``to_frame()`` / ``to_arrow()`` over ``_columns()``, and
    ``_repr_html_`` / ``__str__`` over ``_view(console)`` (the CLI's view)."""

    def _columns(self) -> dict:
        raise NotImplementedError

    def _view(self, c) -> None:
        raise NotImplementedError

    def to_frame(self):
        """The answer's table (one row a tile) as a pandas DataFrame."""
        return frame(self._columns())

    def to_arrow(self):
        """The answer's table (one row a tile) as a pyarrow Table."""
        return arrow(self._columns())

    def _repr_html_(self) -> str:
        return render_html(self._view)

    def __str__(self) -> str:
        return render_text(self._view)
