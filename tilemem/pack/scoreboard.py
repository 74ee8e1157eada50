"""The scoreboard of a packing run: every tile's best result so far, and whether it is
finished with (decided here, ``Scoreboard.record``, by the one rule ``finished``).

>>> from tilemem.pack.result import TileResult
>>> def r(tile, gap, status="feasible", seconds=1.0):
...     return TileResult(tile=tile, method="quick", status=status, overflow_bytes=0,
...                       total_including_gaps=100, bound=100, bound_exact=True, gap=gap,
...                       seconds=seconds)
>>> b = Scoreboard(tile_memory=1000, goal="end", settle=0.001, adaptive=True)
>>> b.record(0, r(0, 0.02), None, pass_final=False)
>>> b.record(0, r(0, 0.0005, seconds=2.0), None, pass_final=False)  # within 0.1 %: finished
>>> b.is_final(0), b.result(0).seconds
(True, 3.0)
>>> b.record(1, r(1, 0.02), None, pass_final=False); b.is_final(1)
False
"""
from __future__ import annotations

from msgspec.structs import replace

from .journal import FINAL, FIRST
from .result import Goal, Status, gap_of


def may_fit(res, tile_memory: int) -> bool:
    """The tile overflows although its lower bound fits in memory."""
    return res.overflow_bytes > 0 and res.bound <= tile_memory


def finished(res, tile_memory: int, goal: str, settle: float | None) -> bool | None:
    """Is a tile finished with, whichever pass made ``res``? True: proven optimal; under
    ``Goal.FIT``, it fits, cannot fit (its bound is past tileMemory) or is proven not to;
    under ``Goal.END``, its end is within ``settle`` of its bound and it does not overflow
    where its bound fits. False: under ``Goal.FIT``, still undecided (no pass lets it go).
    None: the pass that made it decides.

    >>> from tilemem.pack.result import TileResult
    >>> def r(over=0, gap=0.005, bound=90, status="feasible", proven=None):
    ...     return TileResult(tile=0, method="quick", status=status, overflow_bytes=over,
    ...                       total_including_gaps=0, bound=bound, bound_exact=True, gap=gap,
    ...                       seconds=0.0, proven_on=proven)
    >>> [finished(x, 100, "end", 0.001) for x in (r(), r(gap=0.0005), r(status="optimal"),
    ...                                           r(over=4, gap=0.0005))]
    [None, True, True, None]
    >>> [finished(x, 100, "fit", 0.001) for x in (r(), r(over=4), r(over=4, bound=120),
    ...                                           r(over=4, proven=12))]
    [True, False, True, True]
    """
    if res.status == Status.OPTIMAL:
        return True
    if goal == Goal.FIT:
        return not may_fit(res, tile_memory) or res.proven_on is not None
    if settle is not None and res.gap <= settle and not may_fit(res, tile_memory):
        return True
    return None


class Scoreboard:
    """Each tile's latest result and local offsets (``done``), and the tiles finished with
    (``final``): no later pass takes them. ``adaptive`` (auto with a budget): ``finished``
    decides where it can; elsewhere the pass that made a result does (``pass_final``).
    ``journal``: every result is appended to it, as final or as a first pass."""

    def __init__(self, tile_memory: int, goal: str, settle: float | None, adaptive: bool,
                 journal=None, tiles=None):
        self.tile_memory, self.goal, self.settle = tile_memory, goal, settle
        self.adaptive, self.journal = adaptive, journal
        recorded = journal.records if journal is not None else {}
        keep = (lambda t: True) if tiles is None else set(tiles).__contains__
        self.final = {t: v for t, v in recorded.get(FINAL, {}).items() if keep(t)}
        self.done = {t: v for t, v in recorded.get(FIRST, {}).items() if keep(t)}
        self.done.update(self.final)
        self.resumed = set(self.final)   # not solved again at all

    def record(self, t: int, res, off, pass_final: bool) -> None:
        """Keep tile ``t``'s latest result (its seconds summed over the passes, the highest
        bound any of them proved) and journal it; final as ``finished`` says, else as
        ``pass_final``."""
        if t in self.done:
            prev = self.done[t][0]
            bound = max(res.bound, prev.bound)
            res = replace(res, seconds=res.seconds + prev.seconds, bound=bound,
                          gap=gap_of(res.total_including_gaps, bound),
                          bound_exact=res.bound_exact or prev.bound_exact)
        self.done[t] = (res, off)
        answered = (finished(res, self.tile_memory, self.goal, self.settle)
                    if self.adaptive else None)
        if answered if answered is not None else pass_final:
            self.final[t] = self.done[t]
        if self.journal is not None:
            self.journal.append(t, res, off, FINAL if t in self.final else FIRST)

    def result(self, t: int):
        return self.done[t][0]

    def offsets(self, t: int):
        return self.done[t][1]

    def is_final(self, t: int) -> bool:
        return t in self.final

    def all_answered(self, tiles) -> bool:
        """Every one of ``tiles`` finished by the rule, not merely by the passes running out."""
        return all(finished(self.result(t), self.tile_memory, self.goal, self.settle)
                   for t in tiles)
