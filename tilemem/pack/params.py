"""The tuning values of the packer's solvers in one frozen object (``SolverParams``), in the
spirit of MiniMalloc's ``SolverParams``: the portfolio (``solve_tile``) and every move it runs
(the quick search, a fresh start, the neighbourhoods, CP-SAT, the search's descents) take it
as ``params`` and hand it down; the plan's own knobs are its ``Policy`` (``tilemem.pack.plan``).
What each value was measured on is in docs/tuning.md and docs/benchmarks.md.

A value that two moves shared for one job is one field (``descents``: the short descents a
stage runs before it gives up or goes on; ``fit_share``: the share of a tile's time that
asks whether it fits), and the numbers of one job are one field (``probe``, ``exact_split``);
a value that follows from another is derived where it is used (the fresh start steps down
``step / 2`` at a time, from ``2 * NEAR``, where a carried allocation also counts as near;
it gets ``hint_orders - 1`` of the heuristic's orders; the fit question tries each high
variable ``2 * tries`` times). Not tuning, so not here: ``quick.NEAR``, the goal (within 1 %
of the bound, what the project measures), and the measured rates that turn a deterministic
run's time limit into work (``portfolio.SEARCH_NODE_VARIABLES_PER_SECOND``,
``LOCAL_SEARCH_MOVES_PER_SECOND``, ``cpsat.DETERMINISTIC_UNITS_PER_SECOND``).

>>> SolverParams().big_tile, SolverParams(big_tile=1).big_tile
(1000, 1)
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SolverParams:
    """Every tuning value of the search and the portfolio (the module docstring)."""

    #: From this many variables on, the exact portfolio gives a tile the search's descents
    #: and neighbourhoods instead of the local search, the bisection and CP-SAT on the whole
    #: tile (CP-SAT's model is too large there and the bisection's probes end "unknown").
    big_tile: int = 1000
    #: The share of a tile's time that goes to "does it fit?" when it overflows although its
    #: bound fits: the big tiles' descents, the small tiles' search at tileMemory, CP-SAT's
    #: overflow phase (the rest is for the end address).
    fit_share: float = 0.5
    #: A big tile's share of its exact time for a fresh start and the search's descents (the
    #: rest to neighbourhoods, which seldom improve on them).
    quick_share: float = 0.9
    #: A small tile's exact time, in turn: the probe at the bound (a proof on exact fits) and
    #: the local search, of what is left; the bisection, up to this share of the whole, its
    #: first probe and each later one these shares of what it has left.
    exact_split: tuple[float, float, float, float, float] = (0.2, 0.4, 0.8, 0.5, 0.35)
    #: Where the quick search probes first, as a share of ``NEAR``: a little below it, since a
    #: stalled probe's completion lands a little above its cap.
    aim: float = 0.8
    #: After a placed probe, the next cap this share of the way from its end to the bound.
    step: float = 0.5
    #: A probe's time: at most these parts of what is left, bottom-up then top-down (a stalled
    #: one must leave time for the other direction and a looser cap), and at most this many
    #: seconds (about ten descents of a Mk2 tile: a cap that many do not place seldom gives
    #: way with more).
    probe: tuple[float, float, float] = (0.5, 0.85, 0.3)
    #: A fresh start: the noise on each log size of its first fit by size (neighbouring
    #: tiles hold nearly the same problem, and the same start would give them the same
    #: descents), and each of its probes' share of its time at most.
    fresh: tuple[float, float] = (0.1, 0.2)
    #: The heuristic's orders tried before the quick search (its first order is within a few
    #: tenths of a percent of the best of all; the others cost a tenth of a tile's time).
    hint_orders: int = 1
    #: The search's short descents: how many a stage runs first (the complete search after
    #: its first round) or at most (a neighbourhood, before it is given up), and the share of
    #: each later round's nodes the complete search gives them (without lifetimes, where the
    #: orders' keys tie, they find packings the rounds take far longer to).
    descents: tuple[int, float] = (16, 0.25)
    #: Variables freed per neighbourhood at first and the seconds it gets, by solver (the
    #: search's descents, CP-SAT); each high variable's tries before a cap is eased.
    neighbourhood: tuple[tuple[str, int, float], ...] = (("search", 100, 0.05),
                                                         ("cp-sat", 120, 0.25))
    tries: int = 2
    #: Seconds (at most) for a proof that a tile whose live data fits cannot fit.
    proof_seconds: float = 2.0
    #: Past this many interval references in no-overlap cliques CP-SAT is not tried: building
    #: and presolving such a model takes longer than the time limits it would get.
    max_clique_entries: int = 250_000

    def free(self, solver: str) -> int:
        """Variables freed per neighbourhood at first by ``solver``."""
        return next(n for s, n, _ in self.neighbourhood if s == solver)

    def neighbourhood_seconds(self, solver: str) -> float:
        """Seconds a neighbourhood gets from ``solver`` (at most)."""
        return next(t for s, _, t in self.neighbourhood if s == solver)


#: The defaults every entry point takes when given no ``params``.
DEFAULT_PARAMS = SolverParams()
