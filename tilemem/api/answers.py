"""``tilemem.liveness``, ``tilemem.check``, ``tilemem.report`` and ``tilemem.diff``: the
answers about one allocation of one report, each a small object with its table
(``to_frame()``), its JSON (``to_json()``, the CLI's document) and its view in a notebook."""
from __future__ import annotations

import numpy as np

from ..rules import DEFAULT_RULES
from .loading import Report
from .tables import Table, frame, struct_columns


def offset_column(report, offsets) -> np.ndarray | None:
    """An offset column from what a user has at hand: ``None`` (the report's own), an
    ``Allocation``, another report of the same variables, or an array."""
    if offsets is None:
        return None
    if hasattr(offsets, "offsets"):          # an Allocation
        return np.asarray(offsets.offsets, np.int64)
    if hasattr(offsets, "offset"):           # a report of the same variables
        from ..load.allocation import offsets_from_allocation

        return offsets_from_allocation(report, offsets, getattr(offsets, "_source", None))
    return np.asarray(offsets, np.int64)


def nothing_to_analyse(r) -> str | None:
    """The sentence said when ``r`` has no allocated variable, else ``None``.

    Example
    -------
    >>> from tilemem.model import Report
    >>> nothing_to_analyse(Report.from_columns(var_id=[4], tile=[0], size=[8], alignment=[4],
    ...     offset=[0], category=["variable"], eq_class=[0], interference=[[]],
    ...     allocated=[False]))
    'nothing to analyse: the report has no allocated variables (1 unallocated)'
    """
    if r.allocated.any():
        return None
    unallocated = f" ({r.num_vars:,} unallocated)" if r.num_vars else ""
    return f"nothing to analyse: the report has no allocated variables{unallocated}"


class Liveness(Table):
    """What ``tilemem.liveness`` finds: per tile a ``tilemem.liveness.MaxLive`` in ``tiles``
    (always-live bytes, maximum live bytes, whether proven, the rows live at the peak)."""

    _FIELDS = ("tile", "always_live_bytes", "max_live_bytes", "upper_bound_bytes", "exact",
               "method")

    def __init__(self, report, asked, tiles: list, all_tiles: bool):
        self.report, self.asked, self.tiles, self.all_tiles = report, asked, tiles, all_tiles

    def worst_tile(self) -> int | None:
        """The tile with the most maximum live bytes (``None`` when no tile was analysed)."""
        if not self.tiles:
            return None
        return int(max(self.tiles, key=lambda m: (m.max_live_bytes, -m.tile)).tile)

    def peak(self, tile: int | None = None):
        """The variables live at the peak of ``tile`` (default: the worst tile) as a DataFrame
        (``Report.variables()``'s columns; always-live ones included, see ``always_live``)."""
        tile = self.worst_tile() if tile is None else int(tile)
        found = [m for m in self.tiles if m.tile == tile]
        if not found:
            raise KeyError(f"tile {tile} was not analysed")
        return self.report.variables(found[0].peak_rows)

    def _columns(self) -> dict:
        cols = struct_columns(self.tiles, self._FIELDS)
        al = self.report.always_live
        cols["peak_vars"] = np.asarray([int((~al[m.peak_rows]).sum()) for m in self.tiles],
                                       np.int64)
        return cols

    def to_json(self):
        """``tilemem liveness --json``'s document."""
        from ..text import liveness_json

        return liveness_json(self.report, self.tiles)

    def _view(self, c, top: int = 10) -> None:
        from ..text import liveness_view

        name = getattr(self.report, "source", "report")
        if not self.tiles:
            why = nothing_to_analyse(self.report) or "no allocated variables on these tiles"
            c.print(f"{name}: {why}", markup=False)
        else:
            liveness_view(c, self.report, name, self.asked, self.tiles, top, self.all_tiles)


def liveness(report, tiles=None, *, time_limit: float = 10.0, progress: bool = False) -> Liveness:
    """Always-live bytes, maximum live bytes and the peak live set of each tile.

    The maximum live bytes of a tile are its always-live bytes plus the heaviest set of
    variables live together: no allocation of the tile can use fewer bytes.

    Parameters
    ----------
    report : Report
    tiles : list of int, optional
        Default: every tile with an allocated variable.
    time_limit : float
        Seconds for the exact search on tiles whose class graph is not chordal (all tiles
        together); a tile it does not finish has ``exact`` false.
    progress : bool
        Show a progress bar.

    Returns
    -------
    Liveness
        ``to_frame()``: one row a tile; ``peak(tile)``: the variables live at its peak.

    Example
    -------
    >>> import tilemem
    >>> r = tilemem.load("examples/mk1-small.json")
    >>> live = tilemem.liveness(r, tiles=[0, 1])
    >>> live.to_frame()[["tile", "exact"]].values.tolist()
    [[0, True], [1, True]]
    >>> int(live.peak(0)["size"].sum()) == live.tiles[0].max_live_bytes
    True
    """
    from ..liveness import max_live_all

    asked = report.tiles_in_use() if tiles is None else np.asarray(tiles, np.int64)
    found = max_live_all(report, asked, time_limit=time_limit, progress=progress) \
        if len(asked) else []   # no tile in use: nothing to analyse
    return Liveness(Report.of(report), asked, found, all_tiles=tiles is None)


class Check(Table):
    """What ``tilemem.check`` finds: ``ok``, the violations by rule (``result``, a
    ``tilemem.check.CheckResult``) and per tile its violations and overflow."""

    def __init__(self, report, result, offsets):
        self.report, self.result, self.offsets = report, result, offsets

    @property
    def ok(self) -> bool:
        """No rule is broken (bytes past tileMemory are overflow, not a violation)."""
        return self.result.ok

    def violations(self):
        """The violations listed (up to ``limit`` a rule) as a DataFrame."""
        v = list(self.result.violations)
        return frame({"rule": [x.rule for x in v], "tile": [x.tile for x in v],
                      "vars": [list(x.var_ids) for x in v], "names": [list(x.names) for x in v],
                      "message": [x.detail for x in v]})

    def _columns(self) -> dict:
        n = self.report.num_tiles
        tv = self.result.tile_violations
        return {"tile": np.arange(n, dtype=np.int64),
                "violations": np.zeros(n, np.int64) if tv is None else tv,
                "overflow_bytes": self.result.overflow_bytes}

    def to_json(self, report: str | None = None, allocation: str | None = None):
        """``tilemem check --json``'s document."""
        return self.result.to_json(report=report, allocation=allocation)

    def _view(self, c) -> None:
        from ..text import check_text

        c.print(check_text(self.report, getattr(self.report, "source", "report"), None,
                           self.result), markup=False)


def check(report, offsets=None, *, rules=DEFAULT_RULES, limit: int = 20) -> Check:
    """Check an allocation against every placement rule (the independent rulebook).

    Parameters
    ----------
    report : Report
    offsets : Allocation, Report or array of int, optional
        The allocation to check (default: the report's own offsets).
    rules : tilemem.rules.Rules
        Which inferred rules apply.
    limit : int
        How many violations of each rule to describe (all are counted).

    Returns
    -------
    Check
        ``ok``; ``violations()``; ``to_frame()``: per tile, violations and overflow bytes.

    Example
    -------
    >>> import tilemem
    >>> r = tilemem.load("examples/mk1-small.json")
    >>> tilemem.check(r).ok
    True
    >>> bad = r.offset.copy(); bad[r.tile_rows(0)] = 0      # every variable at address 0
    >>> c = tilemem.check(r, bad)
    >>> c.ok, int(c.to_frame().loc[0, "violations"]) > 0
    (False, True)
    """
    from ..check import check_allocation

    off = offset_column(report, offsets)
    return Check(Report.of(report), check_allocation(report, off, rules, limit=limit), off)


class Figures(Table):
    """The graph profile's memory figures (``figures``, a ``tilemem.figures.memory.
    MemoryFigures``): per tile bytes used with and without gaps, by region and category."""

    def __init__(self, report, figures):
        self.report, self.figures = report, figures

    def out_of_memory(self) -> np.ndarray:
        """The tiles whose allocation ends past tileMemory."""
        return self.figures.out_of_memory()

    def _columns(self) -> dict:
        by = self.figures.by_tile
        return {"tile": np.arange(self.figures.num_tiles, dtype=np.int64), **by}

    def to_json(self, holes: bool = True):
        """``tilemem report --json``'s document (``holes``: with the list of gaps)."""
        return self.figures.to_json(holes=holes)

    def _view(self, c) -> None:
        from ..text import summary_text

        c.print(getattr(self.report, "source", "report"), markup=False)
        if nothing_to_analyse(self.report):
            c.print(f"  {nothing_to_analyse(self.report)}", markup=False)
        c.print(summary_text(self.figures), markup=False)


def report(report, offsets=None) -> Figures:
    """The memory figures of an allocation, in the graph profile's format.

    Parameters
    ----------
    report : Report
    offsets : Allocation, Report or array of int, optional
        Default: the report's own offsets.

    Returns
    -------
    Figures
        ``to_frame()``: one row a tile (bytes including and excluding gaps, by region);
        ``out_of_memory()``; ``to_json()``.

    Example
    -------
    >>> import tilemem
    >>> f = tilemem.report(tilemem.load("examples/mk1-small.json"))
    >>> len(f.to_frame()), f.out_of_memory().tolist()
    (32, [0, 1, 2])
    """
    from ..figures.memory import memory_figures

    return Figures(Report.of(report), memory_figures(report, offset_column(report, offsets)))


class Diff(Table):
    """Two compilations compared (``comparison``, a ``tilemem.figures.diff.Comparison``)."""

    _LISTS = ("categories", "tensors_grown", "tensors_shrunk", "layers_grown", "layers_shrunk",
              "cause_of_gained")

    def __init__(self, comparison):
        self.comparison = comparison

    def _columns(self) -> dict:
        d = self.comparison
        rows = [("total", d.total)] + [(k, x) for k in self._LISTS for x in getattr(d, k)]
        return {"kind": [k for k, _ in rows], "name": [x.name for _, x in rows],
                "before": np.asarray([x.before for _, x in rows], np.int64),
                "after": np.asarray([x.after for _, x in rows], np.int64),
                "delta": np.asarray([x.delta for _, x in rows], np.int64)}

    def to_json(self):
        """``tilemem diff --json``'s document."""
        return self.comparison

    def _view(self, c) -> None:
        from ..text.diff import diff_view

        diff_view(c, self.comparison)


def diff(before, after, *, top: int = 10, names=None) -> Diff:
    """Compare two compilations of one program, matched by tile, category and name.

    Parameters
    ----------
    before, after : Report
    top : int
        How many tensors, layers, categories and tiles to list.
    names : (str, str), optional
        How to call them (default: the files they were loaded from).

    Returns
    -------
    Diff
        ``comparison``; ``to_frame()``: one row a change (kind, name, before, after, delta).

    Example
    -------
    >>> import tilemem
    >>> r = tilemem.load("examples/mk1-small.json")
    >>> d = tilemem.diff(r, tilemem.what_if(r, tilemem.Edits(scale={"*": 2})).report)
    >>> t = d.to_frame().set_index("kind").loc["total"]
    >>> int(t["after"]) == 2 * int(t["before"])
    True
    """
    from ..figures.diff import compare

    if names is None:
        names = (getattr(before, "source", "before"), getattr(after, "source", "after"))
    return Diff(compare(before, after, names=tuple(str(n) for n in names), top=top))
