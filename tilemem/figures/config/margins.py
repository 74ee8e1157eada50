"""Margins: a configuration *fits* only if every tile stays under tileMemory by more than the
measured error of what estimated it.

Each memory lever's estimate (``tilemem what-if``'s edits) was measured against the program
compiled with the lever (``benchmarks/levers.py``): the error kept here is a high percentile
of its *under*-estimates on tiles near tileMemory, as a share of tileMemory
(``tilemem.rules.LEVER_ERRORS``, each entry with the command that measured it). A
configuration's margin is the sum of the errors of the levers it uses, plus the split's own
error when the program is split over several IPUs (``tilemem.rules.SPLIT_CLOSE_MARGIN``).
Within the margin below tileMemory the verdict is *close*, not *fits*.

>>> [judge(b, 1000, 0.05) == v for b, v in ((900, Verdict.FITS), (960, Verdict.CLOSE),
...                                          (1001, Verdict.CANNOT_FIT))]
[True, True, True]
>>> round(lever_margin(["half-momentum", "offload"]), 4) == round(
...     LEVER_ERRORS["half-momentum"][0] + LEVER_ERRORS["offload"][0], 4)
True
"""
from __future__ import annotations

from ..verdicts import FitVerdict, fit_verdict
from ...rules import LEVER_ERRORS, SPLIT_CLOSE_MARGIN, SPLIT_CLOSE_MARGIN_NO_STEPS

__all__ = ["Verdict", "judge", "lever_margin", "split_margin", "LEVER_ERRORS",
           "margin_lines"]


#: The verdicts (``tilemem.figures.verdicts.FitVerdict``: split's too): under tileMemory by
#: more than the margin, within it, or over tileMemory by the estimate.
Verdict = FitVerdict


def lever_margin(levers) -> float:
    """The summed error (share of tileMemory) of the levers named ``levers``
    (``LEVER_ERRORS``' keys; names not in it add nothing: a lever with no estimate to be
    wrong, the split's own margin is ``split_margin``)."""
    return float(sum(LEVER_ERRORS[x][0] for x in set(levers) if x in LEVER_ERRORS))


def split_margin(ipus: int, steps: bool = True) -> float:
    """The split estimate's error (share of tileMemory): none on one IPU (the report itself),
    else ``SPLIT_CLOSE_MARGIN`` (``SPLIT_CLOSE_MARGIN_NO_STEPS`` without class steps)."""
    if ipus <= 1:
        return 0.0
    return SPLIT_CLOSE_MARGIN if steps else SPLIT_CLOSE_MARGIN_NO_STEPS


#: ``FITS`` when ``max_live`` plus ``margin`` (a share of tileMemory) stays under
#: ``tile_memory``; ``CLOSE`` when only ``max_live`` does; else ``CANNOT_FIT``: the one rule
#: split's stages are judged by too (``tilemem.figures.verdicts.fit_verdict``).
judge = fit_verdict


def margin_lines(levers=None) -> list[str]:
    """One line a lever (those named, or all): its error and how it was measured."""
    names = sorted(LEVER_ERRORS) if levers is None else [x for x in levers if x in LEVER_ERRORS]
    return [f"{x}: under by up to {100 * LEVER_ERRORS[x][0]:.2f} % of tileMemory "
            f"({LEVER_ERRORS[x][1]})" for x in names]
