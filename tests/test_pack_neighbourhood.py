"""The neighbourhood stage (``tilemem.pack.neighbourhood``) against independent expectations:
the test oracle's checker and ``tilemem.check`` on every result, a brute force over the freed
variables' addresses for whether a neighbourhood can be placed below its cap, and hand-made
tiles whose answer is known."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pack_oracle import (TINY_GEOMETRY, examples, objective, passes_both_checkers,
                         small_reports, violations)
from tilemem.model import Report
from tilemem.pack.firstfit import first_fit
from tilemem.pack.neighbourhood import (SOLVERS, improve_by_neighbourhoods, neighbourhood_of,
                                        solve_neighbourhood)
from tilemem.pack.problem import TileProblem


def _placeable(r: Report, column: np.ndarray, free: list[int], cap: int,
               zero_as_byte: bool = False) -> bool:
    """Brute force: can the rows ``free`` move to aligned addresses ending at or below
    ``cap`` (everything else where ``column`` has it) with no rule broken?"""
    # a zero-size variable ends where it starts (the end address counts it so), so it may
    # sit at the cap itself; the checker says whether that address is legal. The search
    # reads it as one byte below any capacity (``zero_as_byte``), as it does on whole tiles.
    choices = [range(0, cap - max(int(r.size[i]), int(zero_as_byte)) + 1,
                     max(int(r.alignment[i]), 4)) for i in free]
    for combo in itertools.product(*choices):
        trial = column.copy()
        trial[free] = combo
        if violations(r, trial) == []:
            return True
    return False


@pytest.mark.parametrize("solver", SOLVERS)
@examples(60)
@given(small_reports(max_vars=6, geometry=TINY_GEOMETRY), st.data())
def test_a_neighbourhood_is_placed_exactly_when_brute_force_can(solver, r, data):
    # the search is complete on a neighbourhood (its fixed variables are holes in the free
    # ones' domains, and a left-justified placement still sits at each one's lowest legal
    # offset); on three freed variables its first descent exhausts the space. Caps past
    # tileMemory (48) open the overflow zone, where fixed variables keep their bytes.
    p = TileProblem.from_report(r, 0)
    start = first_fit(p)
    if violations(r, _column(r, p, start)):
        return  # the oracle's strictest reading of a rule the packers read alike
    k = data.draw(st.integers(1, min(3, p.n)))
    free = sorted(data.draw(st.permutations(range(p.n)))[:k])
    cap = data.draw(st.sampled_from([16, 24, 32, 40, 48, 56, 64]))
    if cap > p.capacity and np.all(start < p.capacity):
        start = start.copy()   # something fixed past tileMemory, for the zone's sake
        start[int(np.argmax(p.size))] = p.capacity
        if violations(r, _column(r, p, start)):
            return
    got = solve_neighbourhood(p, start, np.array(free), cap, time_limit=5, solver=solver)
    column = _column(r, p, start)
    expected = _placeable(r, column, [int(p.rows[i]) for i in free], cap,
                          zero_as_byte=solver == "search")
    assert (got is not None) == expected
    if got is not None:
        passes_both_checkers(r, _column(r, p, got))
        kept = np.setdiff1d(np.arange(p.n), free)
        assert np.array_equal(got[kept], start[kept])          # the rest stays put
        assert int((got[free] + p.size[free]).max()) <= cap     # the freed end below the cap


@pytest.mark.parametrize("solver", SOLVERS)
@examples(40)
@given(small_reports(max_vars=8))
def test_improving_never_breaks_a_rule_nor_makes_things_worse(solver, r):
    p = TileProblem.from_report(r, 0)
    start = first_fit(p)
    res = improve_by_neighbourhoods(p, start, bound=0, time_limit=0.5, solver=solver)
    passes_both_checkers(r, _column(r, p, res.offsets))
    assert objective(r, _column(r, p, res.offsets), 0) <= objective(r, _column(r, p, start), 0)


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_freed_variable_goes_into_the_hole_below_a_fixed_one(solver):
    # var 0 fixed at 16; var 1 conflicts with it and with var 2 (var 2 not with var 0);
    # var 1 at 32 and var 2 at 0 are freed, to end by 32: var 1 must take the hole below
    # var 0 (its domain is [0, 0]) and var 2 move up beside var 0. (A search that took the
    # fixed variables as placed ones below the free ones would start var 1 above var 0.)
    r = Report.from_columns(var_id=range(3), tile=[0] * 3, size=[16, 16, 16],
                            alignment=[16] * 3, offset=[0] * 3, category=["variable"] * 3,
                            eq_class=[0, 1, 2], interference=[[1], [0, 2], [1]])
    p = TileProblem.from_report(r, 0)
    got = solve_neighbourhood(p, np.array([16, 32, 0]), np.array([1, 2]), 32, time_limit=5,
                              solver=solver)
    passes_both_checkers(r, _column(r, p, got))
    assert got.tolist() == [16, 0, 16]


def _seven_zero_size_variables() -> Report:
    """Seven zero-size variables on one tile (tileMemory 64, interleaved from 32, elements
    [0, 16), [16, 32), [32, 64)), one region constraint (4 and 2): the case on which
    OR-Tools 9.15's presolve raised ``IndexError: absl::btree_map::at`` from the
    neighbourhood's CP-SAT model with its hints (found by hypothesis). Any two of the three
    classes interfere, so all seven conflict pairwise; 0, 3, 4 and 5 are interleaved, 1 is
    code."""
    from tilemem.model.target import Target

    n = 7
    return Report.from_columns(
        target=Target(1, 64, 32, np.array([0, 16, 32])), var_id=range(n), tile=[0] * n,
        size=[0] * n, alignment=[8, 8, 2, 8, 2, 8, 1], offset=[0] * n,
        category=["variable"] * n, eq_class=[1, 0, 2, 0, 2, 1, 2],
        interference=[[1], [], [0, 1]],
        always_live=[0, 0, 1, 1, 0, 0, 0], in_interleaved_mem=[1, 0, 0, 1, 1, 1, 0],
        executable=[0, 1, 0, 0, 0, 0, 0], region_constraints=[[], [], [], [], [2], [], []])


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("cap,placeable", [(68, True), (60, True), (40, False)])
def test_seven_zero_size_variables_are_placed_or_refused_without_an_error(solver, cap,
                                                                          placeable):
    # the packers read a zero-size variable as one byte (the guard's strictest reading), so
    # the seven need seven bytes apart; the four interleaved ones need 32 and above, three
    # of them aligned to 8 and one to 4 (2 read as the least alignment, 4): 32, 40, 48 and
    # 36, the highest ending at 49. So a cap of 40 places nothing and 60 or more does.
    r = _seven_zero_size_variables()
    p = TileProblem.from_report(r, 0)
    start = np.array([48, 8, 20, 56, 76, 32, 16])    # valid; 4 past tileMemory
    passes_both_checkers(r, _column(r, p, start))
    got = solve_neighbourhood(p, start, np.arange(p.n), cap, time_limit=5, solver=solver)
    assert (got is not None) == placeable
    if got is not None:
        passes_both_checkers(r, _column(r, p, got))
        assert int((got + p.size).max()) <= cap


@pytest.mark.parametrize("solver", SOLVERS)
def test_seven_zero_size_variables_are_improved_without_an_error(solver):
    r = _seven_zero_size_variables()
    p = TileProblem.from_report(r, 0)
    start = np.array([48, 8, 20, 56, 76, 32, 16])
    res = improve_by_neighbourhoods(p, start, bound=0, time_limit=1.0, solver=solver)
    passes_both_checkers(r, _column(r, p, res.offsets))
    assert objective(r, _column(r, p, res.offsets), 0) <= objective(r, start, 0)
    assert not np.any(res.offsets >= p.capacity)   # 4 brought into memory


def test_an_overflowing_tile_is_brought_to_fit():
    # tileMemory 48 and three conflicting variables of 16: they fit only side by side; the
    # start puts one in the overflow zone
    r = Report.from_columns(target=TINY_GEOMETRY, var_id=range(3), tile=[0] * 3,
                            size=[16] * 3, alignment=[16] * 3, offset=[0] * 3,
                            category=["variable"] * 3, eq_class=[0, 1, 2],
                            interference=[[1, 2], [0, 2], [0, 1]])
    p = TileProblem.from_report(r, 0)
    res = improve_by_neighbourhoods(p, np.array([0, 16, 48]), bound=48, time_limit=5)
    passes_both_checkers(r, _column(r, p, res.offsets))
    assert sorted(res.offsets.tolist()) == [0, 16, 32]


def test_the_end_comes_down_to_the_bound_on_a_chain():
    # a chain of classes 0-1-2-3-4 (each conflicts with its neighbours): two rows of
    # 8 bytes suffice, so the end can come down from 40 to 16
    n = 5
    inter = [[j for j in (i - 1, i + 1) if 0 <= j < n] for i in range(n)]
    r = Report.from_columns(var_id=range(n), tile=[0] * n, size=[8] * n, alignment=[4] * n,
                            offset=[0] * n, category=["variable"] * n, eq_class=range(n),
                            interference=inter)
    p = TileProblem.from_report(r, 0)
    res = improve_by_neighbourhoods(p, np.arange(n) * 8, bound=16, time_limit=5)
    passes_both_checkers(r, _column(r, p, res.offsets))
    assert int((res.offsets + p.size).max()) == 16


def test_a_neighbourhood_is_the_variable_and_its_highest_conflicts():
    r = Report.from_columns(var_id=range(5), tile=[0] * 5, size=[8] * 5, alignment=[4] * 5,
                            offset=[0] * 5, category=["variable"] * 5,
                            eq_class=[0, 1, 2, 3, 4], interference=[[1, 2, 3], [0], [0], [0], []],
                            always_live=[0, 0, 0, 0, 1])
    p = TileProblem.from_report(r, 0)
    assert p.conflicts.conflicting_with(0).tolist() == [1, 2, 3, 4]   # var 4 always live
    assert p.conflicts.conflicting_with(1).tolist() == [0, 4]
    off = np.array([0, 40, 8, 24, 16])
    assert neighbourhood_of(p, off, 0, 3).tolist() == [0, 1, 3]   # the two ending highest


def _column(r: Report, p: TileProblem, local: np.ndarray) -> np.ndarray:
    out = np.zeros(r.num_vars, np.int64)
    out[p.rows] = local
    return out
