"""The descent orders of the search: which static orders its rounds and probes try
(``DEFAULT_ORDERINGS``, ``PROBE_ORDERINGS``, ``partnerless_order``), the perturbed orders of
its restarts (``RandomRestarts``) and the short descents (``Descents``), shared by the whole
tile's search (``solver``) and the search on part of a tile (``restrict``), which therefore
import this module and not each other.
"""
from __future__ import annotations

import time

import numpy as np

from ..params import DEFAULT_PARAMS, SolverParams
from . import kernel as K
from .run import SearchRun
from .sweep import SearchModel

#: Static orders tried in turn each round: MiniMalloc's three, then section total and width
#: with ties broken at random ("R", reseeded every round; the hint's order in the first round);
#: all after the deadline ("D": variables whose window closes first), which only matters when
#: windows differ.
DEFAULT_ORDERINGS = ("DWAT", "DTAW", "DTWA", "DTWR")
CODES = {"W": K.KEY_W, "A": K.KEY_A, "T": K.KEY_T, "R": K.KEY_R, "D": K.KEY_D, "Z": K.KEY_Z,
          "Q": K.KEY_Q}


def static_order(run: "SearchRun", name: str, random_key, canonical) -> np.ndarray:
    """The keys of static order ``name`` (letters, see ``solve_search``), with ``run``'s R key
    set: ``random_key`` when the order uses R, else the canonical rank, which then ends the
    order as its last tie-break."""
    heur = order_keys(name)
    run.random_key[:] = random_key if K.KEY_R in heur else canonical
    if K.KEY_R not in heur:
        heur.append(K.KEY_R)
    return np.array(heur, np.int64)


def order_keys(name: str) -> list[int]:
    """The kernel's keys of static order ``name`` (its letters)."""
    return [CODES[ch] for ch in name]


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

def probe_limit(n: int, params: SolverParams = DEFAULT_PARAMS) -> int:
    """Nodes (and tries, ``layout.R_TRY_LIMIT``) of one of ``_probe``'s descents on
    ``n`` variables: a descent plus a little backtracking (``SolverParams.descents``: 1/16
    of ``n`` and 64).

    >>> probe_limit(160)
    234
    """
    _, _, part, more = params.descents
    return n + n // part + more


class RandomRestarts:
    """Short restarts from perturbed orders, their node limits following Luby's sequence
    (``SolverParams.restarts``: a base per variable x 1, 1, 2, 1, 1, 2, 4, ...: within a log factor of the best fixed limit for a run
    time distribution nobody knows; Luby, Sinclair & Zuckerman 1993).

    Why: a static order either leads the search straight to a packing or into a subtree it
    does not leave for millions of nodes, and which one is a matter of fine detail. The width
    key is the lifetime when lifetimes are known, but only the number of sections spanned when
    they come from interference -- the same ranking give or take near-ties, which is enough to
    turn one case into the other. So each restart perturbs width and area by random factors
    (log-normal, the restarts' noise) and sorts by one or the other first (MiniMalloc's WAT / AWT), or
    by largest section total first; the noise is drawn per canonical position, so it does not
    depend on how the problem is numbered.
    """

    def __init__(self, sm: SearchModel, rng, params: SolverParams = DEFAULT_PARAMS):
        self.sm = sm
        self.rng = rng
        base, self.sigma = params.restarts
        self.base = base * max(sm.n, 1)
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
            status = run.go(heur, self.base * luby(self.i), deadline)
            spent += run.nodes
            if status != K.ABORTED:
                return status, spent
        return K.ABORTED, spent


class Descents:
    """``_probe``'s short descents inside the complete search: ``PROBE_ORDERINGS`` (the
    hint's order first), then perturbed orders, each cut at ``probe_limit`` nodes and tries.

    Why: without lifetimes the static orders' keys tie often (the width is the number of
    sections spanned), and which tie-break leads straight to a packing is a matter of fine
    detail (MiniMalloc-like instance g4 of ``benchmarks/minimalloc.py``: DWAT with its
    lifetimes places it in one descent, from its interference only DW does and DWAT does not
    in 2 M nodes). A descent that goes wrong early costs a complete round its whole node
    limit, a short one about ``n`` nodes. So after the first round (which decides easy cases
    in a descent or two) at least ``SolverParams.descents[0]`` of them, after each later
    one a ``descents[1]`` share of its nodes (Gomes, Selman & Kautz 1998: run times this
    heavy-tailed are what restarts are for). They never prove anything.
    """

    def __init__(self, sm: SearchModel, rng, hint=None, skip=frozenset(),
                 partnerless: bool = False, params: SolverParams = DEFAULT_PARAMS):
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
        self.restarts = RandomRestarts(sm, rng, params)
        self.canonical = sm.n - sm.rank
        self.hinted = self.canonical  # the hint's order as an R key (lowest offset first)
        if hint is not None and len(hint) == sm.n:
            self.hinted = -np.asarray(hint, np.int64)
        self.limit = probe_limit(sm.n, params)
        self.i = 0

    def next_order(self, run: "SearchRun") -> np.ndarray:
        """The next descent's static order (its keys; ``run``'s R key set for it)."""
        self.i += 1
        if self.i <= len(self.orders):
            return static_order(run, self.orders[self.i - 1], self.hinted, self.canonical)
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


def luby(i: int) -> int:
    """The ``i``-th term (from 1) of Luby's sequence 1, 1, 2, 1, 1, 2, 4, 1, ...

    >>> [luby(i) for i in range(1, 16)]
    [1, 1, 2, 1, 1, 2, 4, 1, 1, 2, 1, 1, 2, 4, 8]
    """
    while True:
        k = i.bit_length()
        if i == (1 << k) - 1:
            return 1 << (k - 1)
        i -= (1 << (k - 1)) - 1
