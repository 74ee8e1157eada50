"""``tilemem.split``: where to split the program over IPUs (``tilemem split``)."""
from __future__ import annotations

import numpy as np

from ..errors import ReportError
from .tables import Table


class Split(Table):
    """A split of the program into pipeline stages (``answer``, a
    ``tilemem.figures.split.estimate.SplitAnswer``): one row a stage in its table."""

    _FIELDS = ("ipu", "first_unit", "last_unit", "units", "worst_tile", "max_live_bytes",
               "always_live_bytes", "buffer_bytes", "verdict")

    def __init__(self, answer, source: str = "report", asked: int | None = None):
        self.answer, self.source, self.asked = answer, source, asked

    @property
    def fits(self) -> bool:
        return self.answer.fits

    @property
    def split_points(self) -> list[str]:
        return self.answer.split_points

    def _columns(self) -> dict:
        st = self.answer.stages
        out = {f: np.asarray([getattr(s, f) for s in st]) for f in self._FIELDS}
        # the tensors live at the worst tile's peak, largest first ("" when not computed)
        out["peak_tensors"] = np.asarray(
            ["; ".join(f"{t.name} {t.bytes}" for t in s.peak.tensors) if s.peak else ""
             for s in st], dtype=object)
        return out

    def to_json(self):
        """``tilemem split --json``'s document."""
        return self.answer

    def _view(self, c) -> None:
        from ..text.split import split_view

        c.print(split_view(self.answer, self.source, None, self.asked), markup=False)


def split(report, ipus: int | None = None, stash: str = "inputs",
          stash_mapping: str | None = None) -> Split:
    """Where to split the program over IPUs: pipeline stages that fit.

    The contiguous split of the report's layers, in program order, into ``ipus`` stages that
    minimises the worst stage's maximum live bytes, each stage estimated as recompiled on its
    own IPU (by the bound), with the buffers pipelining adds; every assumption is in
    ``answer.assumptions``. A report already pipelined is answered per IPU.

    Parameters
    ----------
    report : Report
    ipus : int, optional
        Stages, one an IPU (default: the fewest on which every stage fits).
    stash : {"inputs", "activations"}
        What a stage keeps for the micro-batches in flight: its input (the backward
        recomputes the activations; the default) or every activation of its layers still
        live when it hands over (no recomputation). A framework option the report cannot
        tell.
    stash_mapping : {"like", "linear"}, optional
        How the framework lays the stash out over a stage's tiles: like the tensors it keeps
        (the default, ``tilemem.rules.INFERRED_STASH_MAPPING``) or spread evenly over the
        IPU. The report cannot tell; on a one-layer stage the two differ by up to a fifth.

    Returns
    -------
    Split
        ``split_points`` (the first layer of each stage after the first), ``fits``, one
        row a stage in ``to_frame()`` (``peak_tensors``: the largest tensors live at its
        worst tile's peak and their bytes there, ``Stage.peak``); ``to_json()`` is
        ``tilemem split --json``'s document.

    Raises
    ------
    ReportError
        ``ipus`` below 1, below the IPUs the report is already split over, or above its
        layers; a report with nothing to split.

    Example
    -------
    >>> import tilemem
    >>> s = tilemem.split(tilemem.load("examples/mk1-small.json"), ipus=2)
    >>> len(s.answer.stages), len(s.split_points)
    (2, 1)
    """
    from ..figures.split.estimate import SplitModel
    from ..figures.split.search import (best_split, current_split, fewest_ipus,
                                       with_stage_levers)
    from ..figures.split.peaks import with_peak_tensors
    from .answers import nothing_to_analyse

    path = getattr(report, "source", None)
    if ipus is not None and ipus < 1:
        raise ReportError(f"--ipus {ipus}: a split needs at least one IPU", path=path,
                          field="--ipus")
    empty = nothing_to_analyse(report)
    if empty:
        raise ReportError(empty, path=path, field="vars")
    try:
        m = (SplitModel(report, stash) if stash_mapping is None
             else SplitModel(report, stash, stash_mapping))
        have = m.source_ipus
        if ipus is not None and ipus < have:
            raise ReportError(f"--ipus {ipus}: the report is already split over {have} IPUs "
                              f"(tilesPerIPU {report.target.ipu_tiles}); ask for {have} or "
                              f"more", field="--ipus")
        if ipus is not None and ipus > m.L:
            raise ReportError(f"--ipus {ipus} is more IPUs than the {m.L} units "
                              f"({m.units.source}) to split", field="--ipus")
        if have > 1 and ipus in (None, have):
            a = current_split(m, report)
        elif ipus is None:
            a = with_stage_levers(m, fewest_ipus(m))
        else:
            a = with_stage_levers(m, best_split(m, ipus))
        a = with_peak_tensors(m, a)
    except ReportError as e:
        if e.path is None:
            e.path = path
        raise
    return Split(a, str(path or "report"), ipus)
