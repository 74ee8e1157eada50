"""The verdicts the figures speak in, as enums: code names the cases it handles, while JSON,
tables and f-strings read the same strings as before (``Label``: a ``str`` that prints as its
value).

- ``FitVerdict``: does an estimate fit tileMemory? (a pipeline stage of ``tilemem split``;
  any estimate of a worst tile against tileMemory: ``fit_verdict``).
- ``OomVerdict``: why an out-of-memory tile does not fit (a tile diagnosis' ``verdictCode``,
  ``tilemem.figures.oom``) and the program summary's counts of them
  (``tilemem.figures.program``).

>>> [fit_verdict(b, 1000, 0.02) for b in (900, 990, 1001)]
['fits', 'close', 'cannot fit']
>>> FitVerdict("close") is FitVerdict.CLOSE, f"{OomVerdict.REDUCE_DATA}"
(True, 'reduceData')
"""
from __future__ import annotations

from ..pack.kinds import Label

__all__ = ["FitVerdict", "OomVerdict", "PROGRAM_VERDICTS", "fit_verdict"]


class FitVerdict(Label):
    """An estimated worst tile against tileMemory."""

    #: below tileMemory by more than the estimate's error
    FITS = "fits"
    #: below tileMemory, but within the estimate's error of it: it may not fit
    CLOSE = "close"
    #: above tileMemory
    CANNOT_FIT = "cannot fit"


def fit_verdict(max_live: int, tile_memory: int, margin: float) -> FitVerdict:
    """The verdict of an estimated worst tile of ``max_live`` bytes, ``margin``: the
    estimate's error as a share of tileMemory (``CLOSE`` within it below tileMemory)."""
    if max_live > tile_memory:
        return FitVerdict.CANNOT_FIT
    return FitVerdict.CLOSE if max_live > tile_memory * (1 - margin) else FitVerdict.FITS


class OomVerdict(Label):
    """Why an out-of-memory tile does not fit, as its diagnosis says it
    (``TileDiagnosis.verdict_code``), and the program summary's verdicts (``UNDECIDED``
    there is the tile's ``REPACK_OVERFLOWS``)."""

    #: the live data alone exceeds tileMemory: data must go
    REDUCE_DATA = "reduceData"
    #: the live data fits, but no allocation does: proven on part of the tile
    PROVEN_NO_FIT = "provenNoFit"
    #: a re-pack fits it
    REPACK_FITS = "repackFits"
    #: the live data fits; the re-pack found no allocation that does
    REPACK_OVERFLOWS = "repackOverflows"
    #: the program summary's name for REPACK_OVERFLOWS
    UNDECIDED = "undecided"
    #: the live data fits; re-packing was not tried
    NOT_REPACKED = "notRepacked"


#: The program summary's verdicts, in its order.
PROGRAM_VERDICTS = (OomVerdict.REDUCE_DATA, OomVerdict.PROVEN_NO_FIT, OomVerdict.REPACK_FITS,
                    OomVerdict.UNDECIDED, OomVerdict.NOT_REPACKED)
