"""The plan that fits: the cheapest combination of memory levers that brings every tile that
needs less data under tileMemory by the bound (``tilemem oom``'s last next step).

Each lever (``PLAN_LEVERS``) is a ``tilemem what-if`` option with a stated cost, a *rank*
(1 cheapest): FP16 momentum and FP16 partials cost precision, a lower availableMemoryProportion
and recomputation cost cycles, offloading the optimiser state costs host I/O, sharding it
needs replicas (and sharding the weights too, exchange cycles: each pass all-gathers the
weights it reads), a smaller micro-batch costs throughput. A combination costs the sum of its
levers' ranks; the ranks are a default the user overrides (``prefer``: rank 0, tried first;
``avoid``: left out), not cycle counts. Combinations are tried cheapest first (fewer levers
first at equal cost; the optimiser state sharded with or without the weights, not both),
each by what-if's bound on the tiles that need less data; the first
that brings them all under tileMemory by more than its margin is the plan, which *fits*. The
margin (``tilemem.figures.config.margins``) is the measured under-estimate of the levers it
uses (``tilemem.rules.LEVER_ERRORS``), plus ``base_margin``, the error of the estimate the
plan starts from (a split's stage): a tile within it of tileMemory is *close*, and a plan
that leaves one so is *close*, not *fits*. When none fits within ``MAX_TRIES``, the plan is
the tried combination that leaves the fewest tiles over or close, with the bytes still to
free. A lever that changes nothing in the report (no variable it applies to) is not tried.
"""
from __future__ import annotations

import itertools
import time

import msgspec
import numpy as np

from ..errors import ReportError
from ..jit import compiled
from ..model import Report
from .config.margins import Verdict

#: (name, what it does, ``what_if`` keywords, its ``what-if`` option, rank, its cost).
PLAN_LEVERS = (
    ("half-momentum", "FP16 first-order momentum", dict(half_momentum=True),
     "--half-momentum", 1, "precision of the momentum"),
    ("half-partials", "FP16 partials", dict(half_partials=True), "--half-partials", 2,
     "precision of the partial sums"),
    ("amp", "availableMemoryProportion 0.3", dict(amp="0.3"), "--amp 0.3", 3,
     "cycles (matmuls and convolutions planned in less memory)"),
    ("recompute", "recompute every layer", dict(recompute="all"), "--recompute", 4,
     "cycles (the forward pass again in the backward)"),
    # the state off chip as config estimates it (what-if's ``offload-state``: each tile keeps
    # the state of the weight it updates, streamed in): offloading the names that match an
    # optimiser's left none for the update and took its temporaries too, so the plan could
    # say fits where the program compiled so does not
    ("offload", "optimiser state off chip", dict(offload_state=True),
     "--offload-optimiser-state", 5, "host I/O (streaming memory)"),
    ("rts", "optimiser state sharded over 4 replicas", dict(rts=4), "--rts 4", 6,
     "4 replicas (data parallel)"),
    ("rts-weights", "optimiser state and weights sharded over 4 replicas",
     dict(rts=4, rts_weights=True), "--rts 4 --rts-weights", 7,
     "4 replicas, and exchange cycles (each pass all-gathers the weights it reads)"),
    ("micro-batch", "half the micro-batch", dict(micro_batch=0.5), "--micro-batch 0.5", 8,
     "throughput (more gradient accumulation)"),
)
LEVER_NAMES = tuple(x[0] for x in PLAN_LEVERS)
#: Levers of which a combination takes one at most: sharding the weights shards the
#: optimiser state too (``--rts-weights`` is ``--rts`` and more).
EXCLUSIVE = (frozenset({"rts", "rts-weights"}),
             # not that they exclude each other: their estimate together runs under by more
             # than either's error (``tilemem.figures.config.search.NOT_TOGETHER``, which
             # ``config`` keeps apart too), so a plan of both could say fits falsely
             frozenset({"recompute", "offload"}))
#: Combinations tried at most (each is a bound over the tiles that need less data).
MAX_TRIES = 40
#: Seconds the search may take before it settles for the best tried.
MAX_SECONDS = 60.0


def compatible(names) -> bool:
    """Whether the levers ``names`` make a combination (``EXCLUSIVE``: one of each set).

    >>> compatible(["amp", "rts"]), compatible(["rts", "rts-weights"])
    (True, False)
    >>> compatible(["recompute", "offload"]), compatible(["recompute", "half-momentum"])
    (False, True)
    """
    return all(len(ex.intersection(names)) <= 1 for ex in EXCLUSIVE)


class Plan(msgspec.Struct, rename="camel"):
    """The cheapest combination found: its levers, cost (sum of ranks), the ``what-if``
    options that try it, how many of ``of_tiles`` tiles it leaves over tileMemory and the
    bytes still to free there, and how many combinations were tried; its ``verdict``
    (``Verdict``'s value: fits, close, cannot fit), its ``margin`` (a share of tileMemory:
    the levers' measured errors and ``base_margin``), the tiles under tileMemory but within
    the margin (``tiles_close``) and the levers' errors as said with the answer."""

    levers: list[str]
    costs: list[str]
    cost: int
    what_if: str
    tiles_left: int
    of_tiles: int
    bytes_to_free: int
    tried: int
    verdict: Verdict = Verdict.FITS
    margin: float = 0.0
    tiles_close: int = 0
    errors: list[str] = msgspec.field(default_factory=list)

    @property
    def fits(self) -> bool:
        """Whether every tile is under tileMemory by more than the margin."""
        return self.verdict == Verdict.FITS


def check_names(prefer=(), avoid=()) -> None:
    """``ReportError`` (one line) for a lever name that is not one of ``LEVER_NAMES``."""
    for opt, names in (("--prefer", prefer), ("--avoid", avoid)):
        for n in names:
            if n not in LEVER_NAMES:
                raise ReportError(f"{opt}: {n!r} is not a lever: use one of "
                                  f"{', '.join(LEVER_NAMES)}", field=opt)


def combination_edits(combo) -> list:
    """The what-if edits of a combination of ``PLAN_LEVERS`` entries (their keywords
    together, as ``tilemem what-if`` takes them)."""
    from .whatif.edits import parse_edits

    kw: dict = {}
    for x in combo:
        for k, v in x[2].items():
            kw[k] = [v] if k == "offload" else v
    return parse_edits(kw.pop("offload", ()), (), kw.pop("micro_batch", None), **kw)


@compiled()   # the combinations tried are bounded by the clock (MAX_SECONDS; ``tilemem.jit``)
def plan_that_fits(r: Report, need: np.ndarray, prefer=(), avoid=(),
                   time_limit: float = 10.0, base_margin: float = 0.0) -> Plan | None:
    """The plan for the tiles ``need`` (those whose live data exceeds tileMemory); ``None``
    when there are none or no lever applies. See the module docstring."""
    from .config.margins import lever_margin, margin_lines
    from .whatif.bounds import whatif_bounds

    check_names(prefer, avoid)
    need = np.asarray(need, np.int64)
    if not len(need):
        return None
    tm = r.target.tile_memory
    levers = [x for x in PLAN_LEVERS if x[0] not in set(avoid)]
    rank = {x[0]: (0 if x[0] in set(prefer) else x[4]) for x in levers}

    # every combination re-weights the same tiles' class graphs, taken apart once
    bounds = whatif_bounds(r, need, time_limit)

    def bound(combo):
        return bounds.of_edits(combination_edits(combo))[0]

    # alone, a lever that changes nothing is not tried (told by what it matches, without its
    # bound: a lever's bound is only computed when a combination with it is tried); in a
    # combination one may leave another nothing to change (the optimiser state offloaded is
    # not then in FP16). What a lever matches is asked only when a combination with it is
    # next (at Pod scale a lever's rows are a pass over every row, and the cheapest
    # combination often fits): the combinations tried are those of the useful levers alone,
    # in the same order, whichever levers were asked.
    combos = [c for k in range(1, len(levers) + 1) for c in itertools.combinations(levers, k)
              if compatible([x[0] for x in c])]
    # stable: the useful levers' combinations keep the order they have among all of them
    combos.sort(key=lambda c: (sum(rank[x[0]] for x in c), len(c)))
    known: dict[str, bool] = {}
    asking = [0.0]   # seconds spent asking (not the search's: its clock starts after them)

    def useful(x) -> bool:
        if x[0] not in known:
            t = time.monotonic()
            try:
                known[x[0]] = all(a.variables > 0 for a in bounds.matched(combination_edits([x])))
            except ReportError:
                known[x[0]] = False
            asking[0] += time.monotonic() - t
        return known[x[0]]

    def usable(c) -> bool:
        return all(useful(x) for x in c)

    def tried_in_order():
        """``(index in combos, combination)``: the useful combinations, cheapest first, the
        first ``MAX_TRIES - 1`` of them and then, when there are more, the last of all (the
        combination of every lever: the most any can do)."""
        n = 0
        for i, c in enumerate(combos):
            if not usable(c):
                continue
            if n == MAX_TRIES - 1:
                j = max(k for k in range(i, len(combos)) if usable(combos[k]))
                yield j, combos[j]
                return
            n += 1
            yield i, c

    def is_last(i) -> bool:   # no useful combination after combos[i]
        return not any(usable(combos[k]) for k in range(i + 1, len(combos)))

    best, tried, t0 = None, 0, time.monotonic()
    for i, c in tried_in_order():
        if tried and time.monotonic() - t0 - asking[0] > MAX_SECONDS and not is_last(i):
            continue
        b = bound(c)
        tried += 1
        margin = base_margin + lever_margin(x[0] for x in c)
        # a tile within the levers' error of tileMemory may be over it when compiled
        under = int(np.floor(tm * (1 - margin)))
        over, near = b > tm, b > under
        left, close = int(over.sum()), int((near & ~over).sum())
        free = int((b[over] - tm).sum())
        short = int((b[near] - under).sum())   # bytes to free for the margin too
        if best is None or (left + close, left, short) < best[1:4]:
            best = (c, left + close, left, short, free, close, margin)
        if left + close == 0:
            break
    if best is None:   # no lever applies
        return None
    c, _, left, _, free, close, margin = best
    verdict = (Verdict.CANNOT_FIT if left else Verdict.CLOSE if close else Verdict.FITS)
    return Plan(levers=[x[1] for x in c], costs=[f"{x[0]}: rank {rank[x[0]]}, {x[5]}" for x in c],
                cost=int(sum(rank[x[0]] for x in c)), what_if=" ".join(x[3] for x in c),
                tiles_left=left, of_tiles=len(need), bytes_to_free=free, tried=tried,
                verdict=verdict, margin=round(margin, 5), tiles_close=close,
                errors=margin_lines([x[0] for x in c]))
