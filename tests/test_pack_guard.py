"""The packers' guard (``tilemem.pack.guard``) against the independent checker of
``pack_oracle`` (written from the rules, sharing no code with the packers)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pack_oracle import small_reports, violations
import importlib

# the stage module (``tilemem.liveness`` as an attribute is the API's function)
liveness = importlib.import_module("tilemem.liveness")
from tilemem.pack.firstfit import first_fit
from tilemem.pack.guard import self_check
from tilemem.pack.problem import TileProblem
from tilemem.pack.search import solve_search


@settings(max_examples=150, deadline=None)
@given(small_reports(max_vars=7), st.randoms(use_true_random=False))
def test_self_check_agrees_with_the_independent_checker(r, rnd):
    p = TileProblem.from_report(r, 0)
    tm = r.target.tile_memory
    off = np.array([rnd.choice([0, 4, 8, 12, 16, 32, 40, tm, tm + 16, rnd.randrange(0, tm + 64)])
                    for _ in range(p.n)], np.int64)
    col = r.offset.copy()
    col[p.rows] = off
    assert self_check(p, off) == (violations(r, col) == [])


@settings(max_examples=150, deadline=None)
@given(small_reports(max_vars=7), st.randoms(use_true_random=False))
def test_packers_past_the_dense_limit(r, rnd):
    """Past the dense class-matrix limit (set to 0 here) the compiled conflict test searches
    the class rows instead: first fit and the search still place validly, and the guard
    still agrees with the independent checker."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(liveness.conflicts, "DENSE_MAX", 0)
        p = TileProblem.from_report(r, 0)
        assert p.conflicts.class_matrix is None
        col = r.offset.copy()
        col[p.rows] = first_fit(p)
        assert violations(r, col) == []
        res = solve_search(p, time_limit=10)
        if res.status == "optimal":
            col[p.rows] = res.offsets
            assert violations(r, col) == []
        tm = r.target.tile_memory
        off = np.array([rnd.choice([0, 4, 8, 16, 32, tm, rnd.randrange(0, tm + 64)])
                        for _ in range(p.n)], np.int64)
        col[p.rows] = off
        assert self_check(p, off) == (violations(r, col) == [])

