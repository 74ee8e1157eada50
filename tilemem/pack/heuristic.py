"""Fast packing heuristic: first fit / best fit over a few well-known orders, keep the best.

The orders are those of the greedy allocators of the ML compilers: decreasing size (XLA's
GlobalDecreasingSizeBestFit, TFLite's greedy-by-size), decreasing lifetime length (TFLite's
greedy-by-breadth) and start step when lifetimes are known, decreasing "conflict bytes" (the
bytes a variable can never share with: its own class, the classes it interferes with, the
always-live ones), and the most constrained variables first. Each is placed by the compiled
kernel in first-fit or best-fit mode (``heuristic_orders``), so every rule holds by
construction; the best result by the lexicographic objective
(``tilemem.pack.result.objective``) wins. Runs stop early when a result
meets the lower bound with nothing overflowed: no order can beat it.

>>> from tilemem.model import Report
>>> from tilemem.pack.problem import TileProblem
>>> r = Report.from_columns(var_id=[0, 1, 2], tile=[0, 0, 0], size=[4, 8, 4],
...     alignment=[4, 8, 4], offset=[0, 0, 0], category=["variable"] * 3,
...     eq_class=[0, 0, 0], interference=[[]])
>>> p = TileProblem.from_report(r, 0)
>>> off = heuristic_runs(p).offsets
>>> sorted(off.tolist()), objective(p, off)[1]   # no alignment hole: 16 bytes in 16
([0, 8, 12], 16)
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from .firstfit import complete_order, kernel_args, place
from .params import DEFAULT_PARAMS, SolverParams
from .problem import TileProblem
from .result import objective


def heuristic_orders(p: TileProblem, limit: int | None = None
                     ) -> list[tuple[str, np.ndarray, bool]]:
    """The candidate runs ``(name, order of local indices, best_fit)``, most promising first
    (the first ``limit`` of them: the first alone needs no conflict bytes, which cost a Mk2
    tile ~9 ms, a tenth of its set-up before the quick search).

    Every order places the always-live variables first (they conflict with everyone, so
    they are fixed reservations; placed last, small code variables found the
    non-interleaved region full), some also the variables with narrow windows (interleaved,
    code, lowest256KB). The list and its order were chosen on generated Mk1/Mk2 reports by
    greedy selection: these six reach within 0.3% of the best of 22 order/fit combinations.
    """
    n = p.n
    size = p.size.astype(np.int64)
    align = p.align.astype(np.int64)
    idx = np.arange(n)
    al = p.conflicts.always_live.astype(np.int64)
    narrow = ((p.hi - p.lo) < p.capacity).astype(np.int64)
    first_al = -al
    first_alw = -(2 * al + narrow)
    constrained = np.zeros(n, np.int64)
    for pairs in (p.element_pairs, p.region_pairs):
        constrained[np.asarray(pairs, np.int64).ravel()] = 1
    rank = -(constrained * 2 + narrow + al)
    runs = [("constrained", np.lexsort((idx, -size, rank, first_al)), False)]
    if limit is not None and limit <= 1:
        return runs[:limit]
    cb = p.conflicts.conflict_bytes(p.size)
    runs.append(("conflict-bytes", np.lexsort((idx, -size, -cb, first_alw)), True))
    if p.lifetimes is not None:
        start = p.lifetimes[:, 0].astype(np.int64)
        runs.append(("start", np.lexsort((idx, -size, start, first_alw)), True))
    runs.append(("size", np.lexsort((idx, -align, -size, first_al)), False))
    if p.lifetimes is not None:
        length = (p.lifetimes[:, 1] - p.lifetimes[:, 0]).astype(np.int64)
        runs.append(("lifetime", np.lexsort((idx, -size, -length, first_al)), True))
    runs.append(("conflict-bytes", np.lexsort((idx, -size, -cb, first_alw)), False))
    return runs[:limit]


@dataclass(frozen=True)
class HeuristicResult:
    """The best run: its offsets, name, order and placement mode (to improve on later)."""

    offsets: np.ndarray
    name: str
    order: np.ndarray
    best_fit: bool


def heuristic_runs(p: TileProblem, *, bound: int | None = None,
                   extra_orders: Iterable[np.ndarray] = (),
                   orders: int | None = None) -> HeuristicResult:
    """The best run over the candidate orders (see the module docstring), with how it was
    made.

    ``extra_orders`` are tried first, with first fit (e.g. the report's own allocation order,
    so the result is never worse than replaying it). ``orders``: only the first this many of
    ``heuristic_orders`` (default all).
    """
    if p.n == 0:
        return HeuristicResult(np.zeros(0, np.int64), "empty", np.zeros(0, np.int64), False)
    args = kernel_args(p)
    candidates = [(f"extra{i}", complete_order(p.n, o), False)
                  for i, o in enumerate(extra_orders)]
    candidates += heuristic_orders(p, orders)
    best = None
    best_key = None
    for name, order, bf in candidates:
        off = place(args, order, bf)
        key = objective(p, off)
        if best_key is None or key < best_key:
            best_key = key
            best = HeuristicResult(off, f"{name}/{'best' if bf else 'first'}-fit", order, bf)
        if bound is not None and key[0] == 0 and key[1] <= bound:
            break
    return best


def improve(p: TileProblem, start: HeuristicResult, *, time_limit: float,
            bound: int | None = None, seed: int = 0, max_iterations: int | None = None,
            params: SolverParams = DEFAULT_PARAMS) -> tuple[HeuristicResult, int]:
    """Local search over placement orders ("squeaky wheel"): move one to three of the
    variables that end highest (within 2% of the top, so the overflowed ones when the tile
    overflows; one move in four: any variables; ``SolverParams.local_search``) to a random earlier place in the order, place
    again, keep the new order when it is no worse. Every allocation is made by the kernel, so each is valid.

    Stops at ``time_limit`` seconds, after ``max_iterations`` (repeatable runs), or when the
    bound is met with nothing overflowed. Returns the best result and the iterations done.
    On generated Mk1/Mk2 tiles one second lowers the highest end address by 1-6%.
    """
    if p.n < 2:
        return start, 0
    args = kernel_args(p)
    rng = np.random.default_rng(seed)
    size = np.maximum(p.size, 1)
    band, anywhere, most = params.local_search
    order, bf = np.asarray(start.order, np.int64), start.best_fit
    off = np.asarray(start.offsets, np.int64)
    key = objective(p, off)
    best_key, best = key, start
    deadline = time.perf_counter() + time_limit
    it = 0
    while time.perf_counter() < deadline and (max_iterations is None or it < max_iterations):
        if bound is not None and best_key[0] == 0 and best_key[1] <= bound:
            break
        it += 1
        end = off + size
        top = int(end.max())
        critical = np.flatnonzero(end >= top - top // band)
        if rng.random() < anywhere:  # now and then any variable, to leave a local optimum
            critical = np.arange(p.n)
        moved = rng.choice(critical, size=min(int(rng.integers(1, most + 1)), len(critical)),
                           replace=False)
        new = order.copy()
        for v in moved:
            i = int(np.flatnonzero(new == v)[0])
            j = int(rng.integers(0, i + 1))
            new[j + 1:i + 1] = new[j:i]
            new[j] = v
        new_off = place(args, new, bf)
        new_key = objective(p, new_off)
        if new_key <= key:
            order, off, key = new, new_off, new_key
            if key < best_key:
                best_key = key
                best = HeuristicResult(off, f"{start.name}+improved", order, bf)
    return best, it
