"""The tuning values of the packer's solvers in one frozen object (``SolverParams``), in the
spirit of MiniMalloc's ``SolverParams``: the portfolio (``solve_tile``) and every move it runs
(the quick search, a fresh start, the neighbourhoods, CP-SAT, the search's descents and
restarts, the local search, the proof) take it as ``params`` and hand it down; the plan's own
knobs are its ``Policy`` (``tilemem.pack.run.plan``). What each value was measured on is in
docs/tuning.md and docs/benchmarks.md.

One field a job: the numbers of one job are one field (``probe``, ``exact_split``,
``fresh``, ...), read by position where it is used; a value that two moves shared for one
job is one field (``descents``: the short descents a stage runs before it gives up or goes
on; ``fit_share``: the share of a tile's time that asks whether it fits); a value that
follows from another is derived where it is used (the fresh start steps down ``step / 2``
at a time, from ``2 * NEAR``, where a carried allocation also counts as near; it gets
``hint_orders - 1`` of the heuristic's orders; the fit question tries each high variable
``2 * tries`` times). Not tuning, so not here: ``quick.NEAR``, the goal (within 1 % of the
bound, what the project measures), and the measured rates that turn a deterministic run's
time limit into work (``portfolio.SEARCH_NODE_VARIABLES_PER_SECOND``,
``LOCAL_SEARCH_MOVES_PER_SECOND``, ``cpsat.DETERMINISTIC_UNITS_PER_SECOND``).

>>> SolverParams().big_tile, SolverParams(too_large=(1, 250_000)).big_tile
(1000, 1)
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SolverParams:
    """Every tuning value of the search and the portfolio (the module docstring)."""

    #: When a tile is too large for the whole tile's exact models, by variables and by
    #: interval references in CP-SAT's no-overlap cliques: from the first on, the exact
    #: portfolio gives it the search's descents and neighbourhoods instead of the local
    #: search, the bisection and CP-SAT (CP-SAT's model is too large there, the bisection's
    #: probes end "unknown"); past the second CP-SAT is not tried (building and presolving
    #: such a model takes longer than the time limits it would get).
    too_large: tuple[int, int] = (1000, 250_000)
    #: The share of a tile's time that goes to "does it fit?" when it overflows although its
    #: bound fits: the big tiles' descents, the small tiles' search at tileMemory, CP-SAT's
    #: overflow phase (the rest is for the end address).
    fit_share: float = 0.5
    #: A small tile's exact time, in turn: the probe at the bound (a proof on exact fits) and
    #: the local search, of what is left; the bisection, up to this share of the whole, its
    #: first probe and each later one these shares of what it has left.
    exact_split: tuple[float, float, float, float, float] = (0.2, 0.4, 0.8, 0.5, 0.35)
    #: The quick search's caps: the first ``aim`` of ``NEAR`` above the bound (a little below
    #: it, since a stalled probe's completion lands a little above its cap); after a placed
    #: probe, the next ``step`` of the way from its end to the bound.
    caps: tuple[float, float] = (0.8, 0.5)
    #: A probe's time: at most these parts of what is left, bottom-up then top-down (a stalled
    #: one must leave time for the other direction and a looser cap), and at most this many
    #: seconds (about ten descents of a Mk2 tile: a cap that many do not place seldom gives
    #: way with more).
    probe: tuple[float, float, float] = (0.5, 0.85, 0.3)
    #: A big tile's fresh start: its share of the tile's exact time, with the search's
    #: descents after it (the rest to neighbourhoods, which seldom improve on them); the
    #: noise on each log size of its first fit by size (neighbouring tiles hold nearly the
    #: same problem, and the same start would give them the same descents); each of its
    #: probes' share of its time at most.
    fresh: tuple[float, float, float] = (0.9, 0.1, 0.2)
    #: The heuristic's orders tried before the quick search (its first order is within a few
    #: tenths of a percent of the best of all; the others cost a tenth of a tile's time).
    hint_orders: int = 1
    #: The search's short descents: how many a stage runs first (the complete search after
    #: its first round) or at most (a neighbourhood, before it is given up), the share of
    #: each later round's nodes the complete search gives them (without lifetimes, where the
    #: orders' keys tie, they find packings the rounds take far longer to), and each one's
    #: nodes past ``n``: ``n`` over this plus this (a descent that goes right hardly
    #: backtracks; one that goes wrong is cut before it costs many).
    descents: tuple[int, float, int, int] = (16, 0.25, 16, 64)
    #: The search's restarts from perturbed orders: a restart's node limit per variable
    #: (times Luby's sequence), and the log-normal noise on the width and area keys of a
    #: perturbed order (the descents' and a neighbourhood's orders past the static ones too):
    #: enough to reorder near-ties, not to lose the order's sense.
    restarts: tuple[int, float] = (8, 0.3)
    #: Variables freed per neighbourhood at first and the seconds it gets, by solver (the
    #: search's descents, CP-SAT); the first names the solvers.
    neighbourhood: tuple[tuple[str, int, float], ...] = (("search", 100, 0.05),
                                                         ("cp-sat", 120, 0.25))
    #: How the neighbourhoods' cap eases: it steps down this part (1/n) of the gap at first;
    #: each high variable's neighbourhood is tried this many times before the step halves,
    #: growing this much (variables freed and seconds) after each failure.
    ease: tuple[int, int, float] = (8, 2, 1.6)
    #: A proof that a tile whose live data fits cannot fit: its seconds at most, and each of
    #: its subsets' searches this share of its time (at least this many seconds).
    proof: tuple[float, float, float] = (2.0, 0.25, 0.2)
    #: The local search's moves: the variables ending within this part (1/n) of the top are
    #: the critical ones; this share of moves takes any variable instead (to leave a local
    #: optimum); a move shifts one to this many of them.
    local_search: tuple[int, float, int] = (50, 0.25, 3)

    @property
    def big_tile(self) -> int:
        """Variables from which a tile is too large for the whole tile's exact models."""
        return self.too_large[0]

    @property
    def max_clique_entries(self) -> int:
        """Interval references in no-overlap cliques past which CP-SAT is not tried."""
        return self.too_large[1]

    @property
    def solvers(self) -> tuple[str, ...]:
        """The neighbourhoods' solvers, by name."""
        return tuple(s for s, _, _ in self.neighbourhood)

    def free(self, solver: str) -> int:
        """Variables freed per neighbourhood at first by ``solver``."""
        return next(n for s, n, _ in self.neighbourhood if s == solver)

    def neighbourhood_seconds(self, solver: str) -> float:
        """Seconds a neighbourhood gets from ``solver`` (at most)."""
        return next(t for s, _, t in self.neighbourhood if s == solver)


#: The defaults every entry point takes when given no ``params``.
DEFAULT_PARAMS = SolverParams()
