"""The names packing speaks in: methods (what a user asks for), passes (what one call of
``solve_tile`` is asked to do), stages (what made a tile's allocation), statuses (how good
it is known to be) and how one search ended (``SearchStatus``). A light module: the CLI
reads ``METHODS`` from it for ``--method`` without importing the packers.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Label(str, Enum):
    """A string enum that prints, formats and reprs as its value, as the plain string did (so
    JSON, tables, f-strings and doctests are unchanged), while code names the cases it
    handles."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    def __repr__(self) -> str:
        return repr(self.value)


class Method(Label):
    """``--method``: what the user asks ``allocate`` for."""

    AUTO = "auto"
    EXACT = "exact"
    HEURISTIC = "heuristic"
    REPLAY = "replay"


#: Every ``--method``, in the order the help lists them.
METHODS = tuple(m.value for m in Method)


class Pass(Label):
    """What one call of ``solve_tile`` is asked to do: a method, or one of ``auto``'s passes
    (``quick``: the quick search as low as it gets; ``near``: the quick search stopped within
    1 % of the bound; ``fit``: the exact portfolio stopped once the tile fits; ``carry``: a
    similar tile's allocation carried over where it is better, no search). Passes are
    internal: a result says which ``Stage`` made its allocation."""

    REPLAY = "replay"
    HEURISTIC = "heuristic"
    QUICK = "quick"
    NEAR = "near"
    FIT = "fit"
    CARRY = "carry"
    AUTO = "auto"
    EXACT = "exact"


class Stage(Label):
    """What made a tile's allocation (``TileResult.method``, "method" in the JSON): replay,
    the heuristic, the quick search, or the exact portfolio."""

    REPLAY = "replay"
    HEURISTIC = "heuristic"
    QUICK = "quick"
    EXACT = "exact"
    #: the report's own offsets, kept: the budget ran out before the tile was visited
    REPORT = "report"


class Verdict(Label):
    """Would an allocation of the tile fit? (``tilemem.pack.proof.fit_verdict``; a proof on
    part of the tile reads "cannot fit: proven on N variables", with ``PROVEN``.)"""

    FITS = "fits"
    LIVE_DATA = "cannot fit: live data"
    UNDECIDED = "undecided"


#: The verdict of a tile proven not to fit on ``N`` of its variables.
PROVEN = "cannot fit: proven on {:,} variables"


class Status(Label):
    """How good a tile's allocation is known to be."""

    OPTIMAL = "optimal"     # proven, on overflow and totalIncludingGaps
    FEASIBLE = "feasible"   # valid, not proven optimal (a limit stopped the proof)
    HEURISTIC = "heuristic"  # the heuristic's allocation
    REPLAY = "replay"       # the replayed order
    REPORT = "report"       # the report's own offsets, as they were


class SearchStatus(Label):
    """How one run of the exact search (``tilemem.pack.search``) or of CP-SAT
    (``tilemem.pack.cpsat``) ended: a search's outcome on its capacity, not a tile's status
    (``Status``), which is what the tile's kept allocation is known to be."""

    #: the search: everything placed below the capacity; CP-SAT: the objective proven
    OPTIMAL = "optimal"
    #: CP-SAT: a valid allocation, not proven optimal
    FEASIBLE = "feasible"
    #: proven: no allocation exists below the capacity
    INFEASIBLE = "infeasible"
    #: a limit stopped it before either
    UNKNOWN = "unknown"
    #: a probe of the portfolio's bisection: a placement below the cap, checked and kept
    FOUND = "found"
    #: CP-SAT rejected its model
    INVALID = "invalid"


class Goal(Label):
    """The question a run of ``auto`` answers for each tile: ``end``, how low its end
    address can go (``tilemem alloc``); ``fit``, whether it fits at all (``tilemem oom``):
    a tile is answered once an allocation of it fits, or once it is known not to."""

    END = "end"
    FIT = "fit"


@dataclass(frozen=True)
class Defaults:
    """What a run of the packer gets when its caller says nothing: each stated once, read by
    the API's functions, the CLI's options (``tilemem.commands.options.packing_options``)
    and ``Policy``. Here, in this light module, so the CLI's help reads them without
    importing the packers."""

    #: ``alloc``'s whole run: a full Mk2 IPU (1,472 tiles) in a few minutes on 2 cores
    alloc_budget: float = 240.0
    #: the re-pack of the out-of-memory tiles (``oom``, ``what-if``, ``diagnose``): they are
    #: fewer than a report's tiles, and the answer is whether each fits
    repack_budget: float = 180.0
    #: the HTML page's re-pack: a page is written in about a minute
    page_budget: float = 60.0
    #: a slice of exact work on a tile (a cap; ``Policy.time_limit``)
    time_limit: float = 10.0
    #: the HTML page's seconds a tile (bound and re-pack): many tiles, a quick page
    page_time_limit: float = 2.0


#: The defaults every caller of the packer reads.
DEFAULTS = Defaults()
