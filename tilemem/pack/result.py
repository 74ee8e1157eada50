"""What packing returns: the per-tile objective, per-tile results and the whole allocation.

Objective of a tile, compared lexicographically (smaller is better):
``(overflowed bytes, totalIncludingGaps, high-water mark of region 0, of region 1)`` where
totalIncludingGaps is the highest end address of any variable (past ``tileMemory`` when the
tile overflows) and a region's high-water mark is the highest end of the variables placed in
it (0 when none).

>>> from tilemem.model import Report
>>> from tilemem.pack.problem import TileProblem
>>> r = Report.from_columns(var_id=[0, 1], tile=[0, 0], size=[8, 100], alignment=[4, 4],
...     offset=[0, 0], category=["variable"] * 2, eq_class=[0, 1], interference=[[], []])
>>> p = TileProblem.from_report(r, 0)
>>> objective(p, np.array([0, 131072]))
(0, 131172, 8, 131172)
>>> objective(p, np.array([0, 262144]))
(100, 262244, 8, 0)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import msgspec
import numpy as np

from ..rules import overflow_bytes
from .kinds import Stage, Status, Verdict
from .problem import TileProblem


def objective(p: TileProblem, offsets: np.ndarray) -> tuple[int, int, int, int]:
    """The lexicographic objective of local ``offsets`` (see the module docstring)."""
    off = np.asarray(offsets, np.int64)
    if p.n == 0:
        return (0, 0, 0, 0)
    end = off + p.size
    tm, ils = p.capacity, p.target.interleaved_memory_start
    over = off >= tm
    in0 = ~over & (off < ils)
    in1 = ~over & (off >= ils)
    # overflowed bytes as the checker counts them: the excess of the highest end past
    # tileMemory (one definition, ``tilemem.rules.overflow_bytes``)
    excess = int(overflow_bytes(np.zeros(p.n, np.int64), off, p.size, tm, 1)[0])
    return (excess, int(end.max()),
            int(end[in0].max()) if in0.any() else 0, int(end[in1].max()) if in1.any() else 0)


class TileResult(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    """How one tile was packed.

    ``status``: "optimal" (proven, on overflow and totalIncludingGaps), "feasible" (a valid
    allocation not proven optimal), "heuristic" (the heuristic's allocation) or "replay" (the
    replayed order).
    ``bound``: a lower bound on totalIncludingGaps of any allocation with nothing overflowed:
    the tile's maximum live bytes, or a variable's window start plus its size, or
    interleavedMemoryStart plus the heaviest interleaved-only clique, whichever is highest,
    the cliques with the padding their alignments force (``tilemem.pack.bounds``);
    ``bound_exact`` says the maximum live bytes are proven (not just a clique found).
    ``gap = (totalIncludingGaps - bound) / bound``.
    ``placed_as_report``: for ``replay``, how many variables got the report's own offset.
    ``verdict``: would an allocation of the tile fit? "fits", "cannot fit: live data",
    "cannot fit: proven on N variables" or "undecided" (``tilemem.pack.proof``);
    ``proven_on``: that N (the variables of the subset proven not to fit), else None.
    ``failed``: the moves that raised an exception on this tile (``"search"``, ``"cp-sat"``,
    ``"carry"``, ...): each cost only itself, the tile keeping its best valid allocation.
    ``spent``: the run's budget was spent before this tile's slice could run (it keeps its
    result so far, or the report's own offsets when no visit reached it): what the driver
    reads, where ``note`` says the same for people. Code reads the typed fields, never
    ``note``.

    It is also one tile of ``tilemem alloc --json`` (keys in camel case, ``num_vars`` as
    "variables", ``placedAsReport`` only for replay, ``note`` only when there is one): the
    document is defined here once. Change a field with ``msgspec.structs.replace``.
    """

    tile: int
    method: Stage
    status: Status
    overflow_bytes: int
    total_including_gaps: int
    bound: int
    bound_exact: bool
    gap: float
    seconds: float
    num_vars: int = msgspec.field(default=0, name="variables")
    placed_as_report: int | None = None
    note: str = ""
    verdict: str = ""
    proven_on: int | None = None
    spent: bool = False
    failed: tuple[str, ...] = ()

    @property
    def fits(self) -> bool:
        return self.overflow_bytes == 0


class PassTime(NamedTuple):
    """One pass of a run: its label, wall seconds and tasks (tiles)."""

    label: str
    seconds: float
    tiles: int


@dataclass(frozen=True)
class Allocation:
    """A whole report's new allocation: the full offset column and one result per tile.
    ``from_journal``: distinct tile problems taken from a resumed run's journal rather than
    solved again; ``unreached``: tiles not finished that no revisit reached before the run's
    budget ran out (they keep their visit's valid allocation, ``tilemem.pack.run.plan``);
    ``unreached_far``: those of them still above 1 % of their bound (a shortfall: the rest
    would only have been lowered further); ``unsearched``: those of them no search reached
    either (they keep the heuristic's)."""

    offsets: np.ndarray
    tiles: list[TileResult] = field(default_factory=list)
    from_journal: int = 0
    unreached: int = 0
    unreached_far: int = 0
    unsearched: int = 0
    #: tiles the budget did not reach (not visited): they keep the report's own offsets; of
    #: them, those that decide whether the program fits (out of memory with those offsets,
    #: or a bound within 2 % of tileMemory), which the visits take first
    kept_report: int = 0
    kept_report_deciding: int = 0
    passes: list[PassTime] = field(default_factory=list)
    #: wall seconds of the run, from its set-up to its last result (the budget's span), and
    #: of its set-up before the first pass (``passes`` say where the rest went)
    run_seconds: float = 0.0
    set_up: float = 0.0
    #: seconds of the budget left when the run ended because every tile was finished
    #: (within the settle gap of its bound, proven optimal, or its fit question answered);
    #: None when the run took its whole budget, or had none
    ended_early: float | None = None
    #: what the run finished each tile on: "end" or "fit" (``Goal``), and the settle gap
    goal: str = "end"
    settle: float | None = None

    def summary(self) -> dict:
        t = self.tiles
        gaps = np.array([r.gap for r in t], np.float64)
        q = (lambda p: float(np.quantile(gaps, p)) if len(gaps) else 0.0)
        return {"tiles": len(t), "tilesThatFit": sum(r.fits for r in t),
                "overflowBytes": sum(r.overflow_bytes for r in t),
                "optimal": sum(r.status == Status.OPTIMAL for r in t),
                # would an allocation fit? counted over the tiles that overflow
                "cannotFitLiveData": sum(r.verdict == Verdict.LIVE_DATA for r in t),
                "cannotFitProven": sum(r.overflow_bytes > 0 and r.proven_on is not None
                                       for r in t),
                "undecided": sum(r.verdict == Verdict.UNDECIDED for r in t),
                "meanGap": float(gaps.mean()) if len(t) else 0.0,
                "medianGap": q(0.5), "p95Gap": q(0.95), "maxGap": q(1.0),
                # the share the issue tracker asks about: end within 1 % of the lower bound
                "withinOnePercent": float(np.mean(gaps <= 0.01)) if len(t) else 1.0,
                "seconds": round(sum(r.seconds for r in t), 3),
                "fromJournal": self.from_journal, "unreached": self.unreached,
                "unreachedAboveOnePercent": self.unreached_far,
                "unsearched": self.unsearched,
                "keptReport": self.kept_report,
                "keptReportDeciding": self.kept_report_deciding,
                "endedEarly": self.ended_early, "goal": str(self.goal), "settle": self.settle,
                "runSeconds": self.run_seconds, "setUpSeconds": self.set_up,
                "passes": [{"pass": x.label, "seconds": x.seconds, "tiles": x.tiles}
                           for x in self.passes]}


def joined_note(*notes: str, sep: str = "; ") -> str:
    """Notes for people, the empty ones left out, in one sentence list: the slices of a
    tile's run by ``"; "``, the moves of one slice (the portfolio's) by ``","``.

    >>> joined_note("", "carried over from tile 3", "run budget spent before this slice")
    'carried over from tile 3; run budget spent before this slice'
    >>> joined_note("first/first-fit", "", "quick search +12:optimal", sep=",")
    'first/first-fit,quick search +12:optimal'
    """
    return sep.join(n for n in notes if n)


def gap_of(total: int, bound: int) -> float:
    """Relative distance of ``total`` above ``bound`` (0 when the bound is met)."""
    return max(total - bound, 0) / bound if bound > 0 else 0.0
