"""The scoreboard of a packing run: every tile's best result so far, and whether it is
finished with, decided by the one rule ``finished`` (``Scoreboard.record`` asks it for every
result). The planner (``tilemem.pack.run.plan.Planner``) reads its records, keeping no copy.

>>> from tilemem.pack.result import TileResult
>>> def r(tile, gap, status="feasible", seconds=1.0):
...     return TileResult(tile=tile, method="quick", status=status, overflow_bytes=0,
...                       total_including_gaps=100, bound=100, bound_exact=True, gap=gap,
...                       seconds=seconds)
>>> b = Scoreboard(Question(Goal.END, 0.001), tile_memory=1000)
>>> b.record(0, r(0, 0.02), None)
>>> b.record(0, r(0, 0.0005, seconds=2.0), None)  # within 0.1 %: finished
>>> b.is_final(0), b.result(0).seconds
(True, 3.0)
>>> b.record(1, r(1, 0.02), None); b.is_final(1)
False
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from msgspec.structs import replace

from .journal import FINAL, FIRST
from ..kinds import Goal, Method, Pass, Status
from ..result import gap_of


def may_fit(res, tile_memory: int) -> bool:
    """The tile overflows although its lower bound fits in memory."""
    return res.overflow_bytes > 0 and res.bound <= tile_memory


@dataclass(frozen=True)
class Question:
    """What a run asks of every tile, which decides when one is finished (``finished``).

    ``planned`` (``auto`` with a quick search, the plan of ``tilemem.pack.run.plan``): the
    tile's own question, ``goal`` (``Goal.END``: its end within ``settle`` of its bound;
    ``Goal.FIT``: whether it fits). Otherwise ``method``'s fixed passes: a tile is finished
    once the method's last pass has run on it."""

    goal: Goal
    settle: float | None
    method: Method = Method.AUTO
    planned: bool = True


class TileAt(NamedTuple):
    """What ``finished`` reads of a tile besides its result: its tileMemory, and the pass
    that made the result (``made_by``; None where no pass of the method ran: under the
    plan, the report's offsets kept, or a slice the budget stopped, ``TileResult.spent``)."""

    memory: int
    made_by: Pass | None = None


def finished(tile: TileAt, res, question: Question) -> bool:
    """Is a tile finished with (no later pass or slice takes it)? Total: every result is
    answered here, and only here.

    Under the plan: proven optimal; under ``Goal.FIT``, it fits, cannot fit (its bound is
    past tileMemory) or is proven not to; under ``Goal.END``, its end is within ``settle``
    of its bound and it does not overflow where its bound fits. Without the plan: the
    method's last pass made it (replay, heuristic, exact; ``auto``'s exact portfolio), or,
    under ``auto``, it is proven optimal or still overflows after the pass that runs the
    exact portfolio until it fits (``Pass.FIT``: the rest would only repeat it).

    >>> from tilemem.pack.result import TileResult
    >>> def r(over=0, gap=0.005, bound=90, status="feasible", proven=None):
    ...     return TileResult(tile=0, method="quick", status=status, overflow_bytes=over,
    ...                       total_including_gaps=0, bound=bound, bound_exact=True, gap=gap,
    ...                       seconds=0.0, proven_on=proven)
    >>> end, fit = Question(Goal.END, 0.001), Question(Goal.FIT, 0.001)
    >>> [finished(TileAt(100), x, end) for x in (r(), r(gap=0.0005), r(status="optimal"),
    ...                                          r(over=4, gap=0.0005))]
    [False, True, True, False]
    >>> [finished(TileAt(100), x, fit) for x in (r(), r(over=4), r(over=4, bound=120),
    ...                                          r(over=4, proven=12))]
    [True, False, True, True]
    >>> exact = Question(Goal.END, 0.001, Method.EXACT, planned=False)
    >>> [finished(TileAt(100, p), r(status="optimal"), exact)
    ...  for p in (Pass.HEURISTIC, Pass.EXACT, None)]
    [False, True, False]
    >>> auto = Question(Goal.END, 0.001, Method.AUTO, planned=False)
    >>> [finished(TileAt(100, p), x, auto) for p, x in ((Pass.HEURISTIC, r()),
    ...     (Pass.HEURISTIC, r(status="optimal")), (Pass.FIT, r()), (Pass.FIT, r(over=4)),
    ...     (Pass.AUTO, r()))]
    [False, True, False, True, True]
    """
    optimal = res.status == Status.OPTIMAL
    if not question.planned:
        method = question.method
        return (tile.made_by == Pass(method)
                or (method == Method.AUTO
                    and (optimal or (tile.made_by == Pass.FIT and res.overflow_bytes > 0))))
    if optimal:
        return True
    if question.goal == Goal.FIT:
        return not may_fit(res, tile.memory) or res.proven_on is not None
    return (question.settle is not None and res.gap <= question.settle
            and not may_fit(res, tile.memory))


class Scoreboard:
    """Each tile's latest result and local offsets (``done``), and the tiles finished with
    (``final``, as ``finished`` says for ``question``): no later pass takes them.
    ``journal``: every result is appended to it, as final or as a first pass."""

    def __init__(self, question: Question, tile_memory: int, journal=None, tiles=None):
        self.question, self.tile_memory, self.journal = question, tile_memory, journal
        recorded = journal.records if journal is not None else {}
        keep = (lambda t: True) if tiles is None else set(tiles).__contains__
        self.final = {t: v for t, v in recorded.get(FINAL, {}).items() if keep(t)}
        self.done = {t: v for t, v in recorded.get(FIRST, {}).items() if keep(t)}
        self.done.update(self.final)
        self.resumed = set(self.final)   # not solved again at all

    def record(self, t: int, res, off, made_by: Pass | None = None,
               journaled: bool = True) -> None:
        """Keep tile ``t``'s latest result (its seconds summed over the passes, the highest
        bound any of them proved), made by the pass ``made_by``, and journal it (unless not
        ``journaled``); final as ``finished`` says."""
        if t in self.done:
            prev = self.done[t][0]
            bound = max(res.bound, prev.bound)
            res = replace(res, seconds=res.seconds + prev.seconds, bound=bound,
                          gap=gap_of(res.total_including_gaps, bound),
                          bound_exact=res.bound_exact or prev.bound_exact)
        self.keep(t, res, off, made_by)
        if self.journal is not None and journaled:
            self.journal.append(t, res, off, FINAL if t in self.final else FIRST)

    def keep(self, t: int, res, off, made_by: Pass | None = None) -> None:
        """Keep ``res`` as tile ``t``'s record as it is (``record`` merges it with the one
        before first; a planner fed results by hand keeps them so), final as ``finished``
        says; a tile once finished stays finished (its results only get better)."""
        self.done[t] = (res, off)
        at = TileAt(self.tile_memory, None if res.spent else made_by)
        if finished(at, res, self.question):
            self.final[t] = self.done[t]

    def result(self, t: int):
        return self.done[t][0]

    def offsets(self, t: int):
        return self.done[t][1]

    def is_final(self, t: int) -> bool:
        return t in self.final

    def all_final(self, tiles) -> bool:
        """Every one of ``tiles`` finished."""
        return all(t in self.final for t in tiles)
