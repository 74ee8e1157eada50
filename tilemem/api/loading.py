"""``tilemem.load`` and ``tilemem.Report``: a report as the API hands it out, the model's
columns with a way to a file, to a table and to a notebook."""
from __future__ import annotations

import numpy as np

from .. import model
from .tables import arrow, frame, need, render_html, render_text

#: The columns of ``Report.variables()`` besides ``name`` and ``category``, in order.
COLUMNS = ("var_id", "tile", "size", "alignment", "offset", "eq_class", "allocated",
           "is_constant", "always_live", "executable", "vertex_code", "lowest_256kb",
           "in_interleaved_mem")


class Report(model.Report):
    """A lowered-variables report: one row a variable, the columns as numpy arrays
    (``tilemem.model.Report``), and the target's geometry in ``target``.

    Every function of ``tilemem`` takes one; ``tilemem.load`` gives one.

    Example
    -------
    >>> import tilemem
    >>> r = tilemem.load("examples/mk1-small.json")
    >>> r.num_vars, r.num_tiles
    (14405, 32)
    >>> r.variables().loc[0, ["name", "tile", "size", "category"]].astype(str).tolist()
    ['lossScaling/lossScale#0', '0', '4', 'variable']
    """

    @classmethod
    def of(cls, r: model.Report, source: str | None = None) -> "Report":
        """``r`` as an API report (the same columns, not copied, and the file it was read
        from, ``file``). ``source``: what views call it (default: its file's path)."""
        if not isinstance(r, cls):
            made = cls(**{f: getattr(r, f) for f in model.Report.__dataclass_fields__
                          if not f.startswith("_")})
            if r.file is not None:   # the same report: still that file's
                object.__setattr__(made, "file", r.file)
            r = made
        if source is not None:
            object.__setattr__(r, "_source", str(source))
        return r

    @property
    def source(self) -> str:
        """What views call the report: the path it was loaded from as given, or the name
        ``Report.of`` gave it (``"report"`` when it was made in memory). The file itself,
        with its format, is ``file`` (a ``tilemem.ReportSource``; None once the report is
        changed)."""
        name = getattr(self, "_source", None)
        if name is None and self.file is not None:
            name = self.file.path
        return "report" if name is None else name

    def save(self, path) -> None:
        """Write the report to ``path`` as JSON or capnp (by extension), atomically.

        Parameters
        ----------
        path : str or path-like
            ``.json`` or ``.capnp``.

        Example
        -------
        >>> import os, tempfile, tilemem
        >>> r = tilemem.load("examples/mk1-small.json")
        >>> p = os.path.join(tempfile.mkdtemp(), "r.capnp")
        >>> r.save(p); tilemem.load(p) == r
        True
        """
        from ..load import save_report

        save_report(self, path)

    def _variable_columns(self, rows, names: bool) -> dict:
        take = (lambda a: a) if rows is None else (lambda a: a[rows])
        cols = {c: take(getattr(self, c)) for c in COLUMNS}
        pd = need("pandas", "tables")
        cols["category"] = pd.Categorical.from_codes(
            take(self.category).astype(np.int32), categories=list(self.categories))
        if names:
            cols["name"] = self._names(rows)
        return cols

    def _names(self, rows):
        """The names column: Arrow strings over the report's own name bytes where pyarrow is
        installed (no Python string a variable), else Python strings."""
        try:
            out = self._arrow_names(rows)
        except ImportError:
            return np.asarray(self.names(rows), dtype=object)
        import pandas as pd

        return pd.arrays.ArrowExtensionArray(out)

    def _arrow_names(self, rows):
        import pyarrow as pa

        whole = pa.LargeStringArray.from_buffers(
            self.num_vars, pa.py_buffer(np.ascontiguousarray(self.name_offsets, np.int64)),
            pa.py_buffer(self.name_blob))
        return whole if rows is None else whole.take(pa.array(np.asarray(rows, np.int64)))

    def variables(self, rows=None, *, names: bool = True):
        """The variables as a pandas DataFrame, one row a variable in report order.

        Parameters
        ----------
        rows : array of int, optional
            Only these rows (default: every variable).
        names : bool
            Include the ``name`` column (the slowest to build without pyarrow).

        Returns
        -------
        pandas.DataFrame
            Indexed by row. Columns ``var_id, tile, size, alignment, offset, eq_class``, the flags
            (``allocated, is_constant, always_live, ...``), ``category`` (categorical) and
            ``name``. For a variable with ``allocated`` false the other columns mean nothing
            (-1 / False), as in the report.

        Example
        -------
        >>> import tilemem
        >>> v = tilemem.load("examples/mk1-small.json").variables()
        >>> int(v[v.tile == 3]["size"].sum()) > 0, len(v)
        (True, 14405)
        """
        # the index is the report's row: a selection keeps the rows' numbers
        return frame(self._variable_columns(rows, names),
                     index=None if rows is None else np.asarray(rows, np.int64))

    def to_arrow(self, *, names: bool = True):
        """The variables as a pyarrow Table (numeric columns shared with the report).

        Example
        -------
        >>> import tilemem
        >>> tilemem.load("examples/mk1-small.json").to_arrow().num_rows
        14405
        """
        pa = need("pyarrow", "tables")
        cols = {c: getattr(self, c) for c in COLUMNS}
        cols["category"] = pa.DictionaryArray.from_arrays(
            self.category.astype(np.int32), list(self.categories))
        if names:
            cols["name"] = self._arrow_names(None)
        return arrow(cols)

    def _view(self, c) -> None:
        from ..figures.summary import info
        from ..text import info_view

        info_view(c, self.source, info(self, top=5))

    def _repr_html_(self) -> str:
        return render_html(self._view)

    def __str__(self) -> str:
        return render_text(self._view)

    __hash__ = None


def load(path) -> Report:
    """Read a lowered-variables report (Poplar's JSON or tilemem's capnp, told by content).

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    Report

    Raises
    ------
    tilemem.ReportError
        The file is not a valid report: one line naming the file, the field and the record
        (what ``tilemem`` prints after ``tilemem: error:``).

    Example
    -------
    >>> import tilemem
    >>> tilemem.load("examples/mk1-small.capnp") == tilemem.load("examples/mk1-small.json")
    True
    """
    from ..load import load_report

    return Report.of(load_report(path), source=path)
