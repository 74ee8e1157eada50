"""The solver: ``solve_search``, the exact search's API -- restarts over static orders, the
probe's short descents (the quick search's engine), the mirror (top-down) probe -- over a
``SearchRun`` per capacity. What a caller gets is a ``SearchResult``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from ..firstfit import first_fit
from ..guard import self_check
from ..mirror import mirror
from ..problem import TileProblem
from ..result import objective
from . import kernel as K
from .run import SearchRun
from .sweep import SearchModel, mirrored_model_of, model_of

#: Static orders tried in turn each round: MiniMalloc's three, then section total and width
#: with ties broken at random ("R", reseeded every round; the hint's order in the first round);
#: all after the deadline ("D": variables whose window closes first), which only matters when
#: windows differ.
DEFAULT_ORDERINGS = ("DWAT", "DTAW", "DTWA", "DTWR")
_CODES = {"W": K.KEY_W, "A": K.KEY_A, "T": K.KEY_T, "R": K.KEY_R, "D": K.KEY_D, "Z": K.KEY_Z,
          "Q": K.KEY_Q}


@dataclass(frozen=True)
class SearchResult:
    """``status``: "optimal" (``offsets`` place every variable below the capacity), "infeasible"
    (proved that none exists), "unknown" (time limit; ``offsets`` is None, or with ``probe``
    the best valid allocation its failed descents were completed to, above the capacity)."""

    offsets: np.ndarray | None
    status: str
    nodes: int
    seconds: float


def solve_search(problem: TileProblem, time_limit: float, hint: np.ndarray | None = None,
                 capacity: int | None = None, *,
                 orderings: tuple[str, ...] = DEFAULT_ORDERINGS, seed: int = 0,
                 randomized: bool = True, max_nodes: int | None = None,
                 probe: bool = False, enough: int | None = None,
                 mirrored: bool = False, repeat: bool = False,
                 partnerless: bool = False) -> SearchResult:
    """Place every variable of ``problem`` below ``capacity`` (default: tileMemory) with every
    rule respected, or prove it impossible, within ``time_limit`` seconds. A capacity past
    tileMemory opens the overflow zone: variables may then also go past tileMemory, where
    only alignment and no-overlap apply (never straddling it).

    ``orderings``: the static orders of each round, as letters (D end of the window
    ascending, then descending keys: W lifetime width, A area, T largest section total, Z
    size; R random, or ``hint``'s order by offset in the first round); every order ends with
    the canonical rank (``sweep._canonical_rank``). With ``randomized``, each round is followed by
    as many nodes of short restarts from perturbed orders (``_RandomRestarts``) and by the
    probe's short descents (``_Descents``: a quarter as many nodes, at least
    ``OPENING_DESCENTS`` of them after the first round). ``seed``
    makes the random orders repeatable. ``max_nodes``: stop after this many search nodes
    instead of at ``time_limit`` (the clock is then not read: the same call gives the same
    result on any machine, under any load). Repeated calls on the same problem object reuse its
    arrays (numba compiles once and caches). A ``hint`` (local offsets) that already places
    everything below ``capacity`` is returned as it is.

    ``probe``: look for a placement only, by short descents (``_probe``) until
    ``time_limit``; never proves anything, so "unknown" when none is found (with the best
    completion of a failed descent as ``offsets``: valid, but not below ``capacity``);
    ``enough``: an end address at which such a completion also ends the probe (nothing
    overflowed unless the capacity is past tileMemory).

    ``mirrored`` (with ``probe``): the probe runs on the problem with its addresses reversed
    below ``capacity`` (``tilemem.pack.mirror``: it fills memory from the top down) and its
    results are mapped back; it never proves anything ("infeasible" there is "unknown").

    ``repeat`` (with ``probe``): the caller has probed this capacity (and direction) before,
    from the same ``hint``: the probe's static orders, which depend only on the problem, the
    capacity and the hint, would repeat the same descents, so it goes straight to perturbed
    orders drawn from ``seed``.

    ``partnerless`` (with ``probe``): every other descent places, among the candidates of
    each height, the variables without an element partner first (``partnerless_order``).
    """
    t0 = time.perf_counter()
    deadline = t0 + max(float(time_limit), 0.0)
    cap = problem.capacity if capacity is None else int(capacity)
    if mirrored:
        if not probe:
            raise ValueError("mirrored is a way to probe: it needs probe=True")
        return _probe_mirrored(problem, cap, hint, seed, deadline, enough, t0, repeat,
                               partnerless)
    sm = model_of(problem)
    if hint is not None and len(hint) == sm.n:
        h = np.asarray(hint, np.int64)
        if self_check(problem, h, capacity=cap):
            return SearchResult(offsets=h.copy(), status="optimal", nodes=0,
                                seconds=time.perf_counter() - t0)
    run = SearchRun(sm, cap)
    if max_nodes is not None:
        run.node_cap = max(int(max_nodes), 1)
        deadline = float("inf")
    if run.verdict is not None:
        return _result(sm, run, run.verdict, 0, t0)
    rng = np.random.default_rng(seed)
    if probe:
        status, nodes, completed = _probe(problem, sm, run, hint, rng, deadline, enough,
                                          repeat=repeat, partnerless=partnerless)
        verdict = {K.FOUND: "optimal", K.INFEASIBLE: "infeasible"}.get(status, "unknown")
        res = _result(sm, run, verdict, nodes, t0)
        return res if verdict != "unknown" else replace(res, offsets=completed)
    nodes = 0
    limit = max(sm.n, 1)
    first = True
    canonical = sm.n - sm.rank  # the R key is descending: rank 0 first
    restarts = _RandomRestarts(sm, rng) if randomized else None
    # their own random orders: the complete rounds' restarts draw the same ones as without
    # them; the probe's orders the first round has run with the same keys are skipped
    # (an R order's key there is the hint's only when there is a hint)
    ran = {o for o in orderings if K.KEY_R not in _keys(o) or hint is not None}
    descents = (_Descents(sm, np.random.default_rng([seed, 1]), hint, skip=ran)
                if randomized else None)
    verdicts = {K.FOUND: "optimal", K.INFEASIBLE: "infeasible", K.PAUSED: "unknown"}
    while True:
        limit *= 2
        # random keys are drawn per canonical position: renumbering changes nothing
        random_key = rng.permutation(sm.n)[sm.rank]
        if first and hint is not None and len(hint) == sm.n:  # descending: lowest offset first
            random_key = -np.asarray(hint, np.int64)
        first = False
        spent = 0
        for name in orderings:
            heur = _static_order(run, name, random_key, canonical)
            run.reset()
            status = run.go(heur, limit, deadline)
            spent += run.nodes
            if status in verdicts:
                return _result(sm, run, verdicts[status], nodes + spent, t0)
        nodes += spent
        if restarts is not None:
            status, spent = restarts.run(run, spent, deadline)
            nodes += spent
            if status in verdicts:
                return _result(sm, run, verdicts[status], nodes, t0)
        if descents is not None:
            # after the first round (which decides the easy cases in a descent or two)
            # at least OPENING_DESCENTS of them
            budget = int(spent * ROUND_DESCENTS)
            if descents.i == 0:
                budget = max(budget, OPENING_DESCENTS * probe_limit(sm.n))
            status, spent = descents.run(run, budget, deadline)
            nodes += spent
            if status in verdicts:
                return _result(sm, run, verdicts[status], nodes, t0)
        if time.perf_counter() >= deadline or run.spent():
            return _result(sm, run, "unknown", nodes, t0)


def _static_order(run: "SearchRun", name: str, random_key, canonical) -> np.ndarray:
    """The keys of static order ``name`` (letters, see ``solve_search``), with ``run``'s R key
    set: ``random_key`` when the order uses R, else the canonical rank, which then ends the
    order as its last tie-break."""
    heur = _keys(name)
    run.random_key[:] = random_key if K.KEY_R in heur else canonical
    if K.KEY_R not in heur:
        heur.append(K.KEY_R)
    return np.array(heur, np.int64)


def _keys(name: str) -> list[int]:
    """The kernel's keys of static order ``name`` (its letters)."""
    return [_CODES[ch] for ch in name]


#: The static orders of ``_probe``'s first descents: the hint's order (by offset, ties by
#: section total and width), then orders that put the largest areas first and the longest
#: lives first by turns (which of the two families places a tile differs from tile to tile;
#: alternating finds one that works in the fewest descents).
PROBE_ORDERINGS = ("DTWR", "DAWT", "DW", "DTAW", "DTWA")


def partnerless_order(name: str) -> str:
    """Static order ``name`` with "the variables without an element partner first" (Q) as
    its first tie-break after the window's end (D).

    Why: the search places, at each height, the candidates in its static order; a variable
    placed there pushes each of its element partners past the end of that memory element.
    On tiles with hundreds of element pairs between variables with lifetimes, the usual
    orders end well above where the same search without the pairs ends (docs/benchmarks.md);
    placing the partnerless variables first at each height leaves the partnered ones for
    later, with more elements to choose from. It is not better everywhere (as the only orders
    of a first pass it is worse on typical tiles), so the exact stage runs it alongside
    the usual orders (``solve_search(partnerless=True)``), never instead of them.

    >>> partnerless_order("DTWR"), partnerless_order("DW")
    ('DQTWR', 'DQW')
    """
    return name[:1] + "Q" + name[1:] if name.startswith("D") else "Q" + name

#: ``solve_search``'s short descents (``_Descents``): at least this many after its first
#: complete round, then this share of each later round's nodes: without lifetimes, where the
#: orders' keys tie, they find packings the rounds alone take far longer to, at a small
#: cost where the rounds suffice (docs/benchmarks.md).
OPENING_DESCENTS = 16
ROUND_DESCENTS = 0.25


def probe_limit(n: int) -> int:
    """Nodes (and tries, ``layout.R_TRY_LIMIT``) of one of ``_probe``'s descents on
    ``n`` variables: a descent plus ~6% of backtracking."""
    return n + n // 16 + 64


def _probe(p: TileProblem, sm: "SearchModel", run: "SearchRun", hint, rng, deadline: float,
           enough: int | None = None, to_p=None, repeat: bool = False,
           partnerless: bool = False) -> tuple[int, int, np.ndarray | None]:
    """Short descents, each from another static order, until one places everything, the
    deadline passes or a failed descent's completion ends at or below ``enough``:
    ``(status, nodes, completed)``, status FOUND or ABORTED (or INFEASIBLE when a descent
    happened to exhaust the space); ``completed``: the best of the failed descents' partial
    placements completed by first fit (``_completion``), or None.

    Why: at a capacity a little above the optimum, a descent either places the tile with
    hardly any backtracking (about ``n`` nodes) or goes wrong early and then does not get
    out in any time worth waiting (a successful descent takes hardly more than ``n`` nodes;
    a failing one given twice that costs as much as many successful ones). Run times that
    heavy-tailed are what restarts are for (Gomes, Selman & Kautz 1998): cut every descent
    at ``probe_limit`` nodes and tries and change the order instead (then completed by
    first fit: ``_completion``). The orders: ``PROBE_ORDERINGS`` (the hint's first), then
    the perturbed orders of ``_RandomRestarts`` (where the first orders fail, another
    within a few descents mostly succeeds). ``repeat``: the static orders ran before at
    this capacity from this hint, so only perturbed ones.
    ``partnerless``: every other descent with ``partnerless_order``.
    """
    nodes = 0
    descents = _Descents(sm, rng, hint, skip=PROBE_ORDERINGS if repeat else frozenset(),
                         partnerless=partnerless)
    limit = descents.limit
    run.try_limit = limit  # a descent gone wrong tries many candidates a node: cut it too
    completed, best = None, None
    while True:
        if descents.i >= len(descents.orders) and time.perf_counter() >= deadline:
            break
        heur = descents.next_order(run)
        run.reset()
        status = run.go(heur, limit, deadline)
        nodes += run.nodes
        if status in (K.FOUND, K.INFEASIBLE) or run.spent():
            return status, nodes, completed
        if status == K.ABORTED:
            partial = run.state.off if to_p is None else to_p(run.state.off)
            off = _completion(p, partial)
            key = objective(p, off)
            if best is None or key < best:
                completed, best = off, key
                if enough is not None and key[1] <= enough and (key[0] == 0 or run.zone):
                    break
        if time.perf_counter() >= deadline:
            break
    return K.ABORTED, nodes, completed


def _probe_mirrored(p: TileProblem, cap: int, hint, seed: int, deadline: float,
                    enough: int | None, t0: float, repeat: bool = False,
                    partnerless: bool = False) -> SearchResult:
    """``solve_search(probe=True, mirrored=True)``: ``_probe`` on ``p``'s mirror below
    ``cap``, its results as ``p``'s offsets; "optimal" or "unknown" (see
    ``tilemem.pack.mirror``: the mirror's verdicts prove nothing about ``p``)."""
    m = mirror(p, cap)
    if m is None:
        return SearchResult(offsets=None, status="unknown", nodes=0,
                            seconds=time.perf_counter() - t0)
    sm = mirrored_model_of(p, m.problem)   # the same mirrored problem for every cap
    run = SearchRun(sm, m.top, floor=m.floor)
    if run.verdict is not None:
        offsets = m.to_original(run.offsets()) if run.verdict == "optimal" else None
        return SearchResult(offsets=offsets, status="optimal" if offsets is not None
                            else "unknown", nodes=0, seconds=time.perf_counter() - t0)
    h = m.from_original(hint) if hint is not None and len(hint) == sm.n else None
    status, nodes, completed = _probe(p, sm, run, h, np.random.default_rng(seed), deadline,
                                      enough, to_p=m.to_original, repeat=repeat,
                                      partnerless=partnerless)
    if status == K.FOUND:
        # pressed down again: packed from the top, it need not start at 0 (first fit in
        # offset order moves nothing up, see _completion)
        off = m.to_original(run.offsets())
        return SearchResult(offsets=first_fit(p, np.argsort(off, kind="stable")),
                            status="optimal", nodes=nodes, seconds=time.perf_counter() - t0)
    return SearchResult(offsets=completed, status="unknown", nodes=nodes,
                        seconds=time.perf_counter() - t0)


def _completion(p: TileProblem, partial: np.ndarray) -> np.ndarray:
    """A valid allocation from an aborted descent's ``partial`` placement (-1: unplaced):
    first fit of the placed variables in offset order, then of the rest, largest first.

    Why: a descent that fails at a cap just above the optimum has mostly got stuck near
    the top with a few variables left, and first fit tucks them into the holes below or
    just over the cap: an allocation a little above the cap for milliseconds, where the
    descent found none. The placed variables keep their places or go lower: each one's
    offset in the descent stays legal, as everything first fit placed before it went there
    or lower and, if it interacts with it, lay below it in the descent.
    """
    placed = np.flatnonzero(partial >= 0)
    rest = np.flatnonzero(partial < 0)
    order = np.concatenate([placed[np.argsort(partial[placed], kind="stable")],
                            rest[np.argsort(-p.size[rest], kind="stable")]])
    return first_fit(p, order)


class _RandomRestarts:
    """Short restarts from perturbed orders, their node limits following Luby's sequence
    (``base`` x 1, 1, 2, 1, 1, 2, 4, ...: within a log factor of the best fixed limit for a run
    time distribution nobody knows; Luby, Sinclair & Zuckerman 1993).

    Why: a static order either leads the search straight to a packing or into a subtree it
    does not leave for millions of nodes, and which one is a matter of fine detail. The width
    key is the lifetime when lifetimes are known, but only the number of sections spanned when
    they come from interference -- the same ranking give or take near-ties, which is enough to
    turn one case into the other. So each restart perturbs width and area by random factors
    (log-normal, ``sigma``) and sorts by one or the other first (MiniMalloc's WAT / AWT), or
    by largest section total first; the noise is drawn per canonical position, so it does not
    depend on how the problem is numbered.
    """

    def __init__(self, sm: SearchModel, rng, base: int = 8, sigma: float = 0.3):
        self.sm = sm
        self.rng = rng
        self.base = base * max(sm.n, 1)
        self.sigma = sigma
        self.i = 0
        self.log_w = np.log(np.maximum(sm.width, 1).astype(np.float64))
        self.log_z = np.log(np.maximum(sm.size, 1).astype(np.float64))

    def key(self, partnerless: bool = False):
        """One perturbed order as an R key (descending) and the letters to use it with
        (with ``partnerless``, Q after D: ``partnerless_order``)."""
        sm, rng = self.sm, self.rng
        noise = rng.standard_normal((2, sm.n))[:, sm.rank]
        w = self.log_w + self.sigma * noise[0]
        a = w + self.log_z + self.sigma * noise[1]
        first = rng.integers(3)
        order = np.lexsort((sm.rank, -a, -w) if first == 0 else (sm.rank, -w, -a))
        key = np.empty(sm.n, np.int64)
        key[order] = np.arange(sm.n, 0, -1)
        heur = [K.KEY_D, K.KEY_T, K.KEY_R] if first == 2 else [K.KEY_D, K.KEY_R]
        if partnerless:
            heur.insert(1, K.KEY_Q)
        return key, np.array(heur, np.int64)

    def run(self, run: "SearchRun", budget: int, deadline: float):
        """Restarts until ``budget`` nodes are spent: ``(status, nodes)``, status ABORTED
        when none decided."""
        spent = 0
        while spent < budget:
            self.i += 1
            key, heur = self.key()
            run.random_key[:] = key
            run.reset()
            status = run.go(heur, self.base * _luby(self.i), deadline)
            spent += run.nodes
            if status != K.ABORTED:
                return status, spent
        return K.ABORTED, spent


class _Descents:
    """``_probe``'s short descents inside the complete search: ``PROBE_ORDERINGS`` (the
    hint's order first), then perturbed orders, each cut at ``probe_limit`` nodes and tries.

    Why: without lifetimes the static orders' keys tie often (the width is the number of
    sections spanned), and which tie-break leads straight to a packing is a matter of fine
    detail (MiniMalloc-like instance g4 of ``benchmarks/minimalloc.py``: DWAT with its
    lifetimes places it in one descent, from its interference only DW does and DWAT does not
    in 2 M nodes). A descent that goes wrong early costs a complete round its whole node
    limit, a short one about ``n`` nodes. So after the first round (which decides easy cases
    in a descent or two) at least ``OPENING_DESCENTS`` of them, after each later one a
    ``ROUND_DESCENTS`` share of its nodes (Gomes, Selman & Kautz 1998: run times this
    heavy-tailed are what restarts are for). They never prove anything.
    """

    def __init__(self, sm: SearchModel, rng, hint=None, skip=frozenset(),
                 partnerless: bool = False):
        # ``skip``: probe orders not to run: inside the complete search, the ones its first
        # round ran with the same keys and at least as many nodes once n >= 68 (below that
        # a descent may go a few nodes further, which the later rounds go far beyond); in a
        # repeated probe (``solve_search(repeat=True)``), all of them
        self.orders = [o for o in PROBE_ORDERINGS if o not in skip]
        # with ``partnerless`` (and element pairs to tell apart), every other descent places
        # the variables without an element partner first at each height (``partnerless_order``)
        self.partnerless = partnerless and bool(np.any(sm.has_elem))
        if self.partnerless:
            self.orders = [o for name in self.orders for o in (name, partnerless_order(name))]
        self.restarts = _RandomRestarts(sm, rng)
        self.canonical = sm.n - sm.rank
        self.hinted = self.canonical  # the hint's order as an R key (lowest offset first)
        if hint is not None and len(hint) == sm.n:
            self.hinted = -np.asarray(hint, np.int64)
        self.limit = probe_limit(sm.n)
        self.i = 0

    def next_order(self, run: "SearchRun") -> np.ndarray:
        """The next descent's static order (its keys; ``run``'s R key set for it)."""
        self.i += 1
        if self.i <= len(self.orders):
            return _static_order(run, self.orders[self.i - 1], self.hinted, self.canonical)
        key, heur = self.restarts.key(partnerless=self.partnerless and self.i % 2 == 0)
        run.random_key[:] = key
        return heur

    def run(self, run: "SearchRun", budget: int, deadline: float):
        """Descents until ``budget`` nodes are spent: ``(status, nodes)``, status FOUND (or
        INFEASIBLE, when one exhausted the space), else ABORTED."""
        spent = 0
        run.try_limit = self.limit
        try:
            while spent < budget and time.perf_counter() < deadline and not run.spent():
                heur = self.next_order(run)
                run.reset()
                status = run.go(heur, self.limit, deadline)
                spent += run.nodes
                if status in (K.FOUND, K.INFEASIBLE):
                    return status, spent
        finally:
            run.try_limit = K.INF
        return K.ABORTED, spent


def _luby(i: int) -> int:
    """The ``i``-th term (from 1) of Luby's sequence 1, 1, 2, 1, 1, 2, 4, 1, ...

    >>> [_luby(i) for i in range(1, 16)]
    [1, 1, 2, 1, 1, 2, 4, 1, 1, 2, 1, 1, 2, 4, 8]
    """
    while True:
        k = i.bit_length()
        if i == (1 << k) - 1:
            return 1 << (k - 1)
        i -= (1 << (k - 1)) - 1


def warm_up(whole: bool = True, part: bool = True) -> None:
    """Compile the search's kernels (or load them from numba's cache) on a tiny problem, e.g.
    before forking workers or timing: ``whole``, the search on a whole tile; ``part``, its
    version with domains (the search on part of a tile). Two processes may compile one each
    at once (the test suite does)."""
    from ...model import Report
    from ...model.target import Target

    r = Report.from_columns(target=Target(1, 64, 32, np.array([0, 16, 32, 48])),
                            var_id=[0, 1, 2], tile=[0] * 3, size=[8, 8, 4], alignment=[4] * 3,
                            offset=[0] * 3, category=["variable"] * 3, eq_class=[0, 0, 1],
                            interference=[[], []], element_constraints=[[2], [], []],
                            region_constraints=[[], [2], []], executable=[True, False, False])
    p = TileProblem.from_report(r, 0)
    if whole:
        solve_search(p, time_limit=60, hint=np.zeros(3, np.int64))
    if part:
        # the kernel with domains (neighbourhoods; always its version with a zone,
        # SearchRun): compiled on first use it cost each worker of a run a minute or more of
        # its budget
        from .restrict import solve_restricted

        solve_restricted(p, np.array([0, 8, 64]), np.array([2]), 64, time_limit=60)


def _result(sm, run, status, nodes, t0) -> SearchResult:
    offsets = None
    if status == "optimal":
        offsets = run.offsets()
    return SearchResult(offsets=offsets, status=status, nodes=nodes,
                        seconds=time.perf_counter() - t0)


