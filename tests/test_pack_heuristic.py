"""The heuristic and its local search: valid, never worse than their start, repeatable."""
import numpy as np
from hypothesis import HealthCheck, given, settings

from pack_oracle import objective as oracle_objective
from pack_oracle import small_reports, violations
from tilemem.model import Report
from tilemem.model.target import Target
from tilemem.pack.firstfit import first_fit
from tilemem.pack.heuristic import heuristic_orders, heuristic_runs, improve
from tilemem.pack.problem import TileProblem
from tilemem.pack.result import objective


def placed(r, p, off):
    col = r.offset.copy()
    col[p.rows] = off
    return col


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_reports(max_vars=10))
def test_heuristic_beats_each_of_its_runs_and_improve_keeps_validity(r):
    p = TileProblem.from_report(r, 0)
    h = heuristic_runs(p)
    runs = heuristic_orders(p)
    for _, order, bf in runs:
        assert objective(p, h.offsets) <= objective(p, first_fit(p, order, best_fit=bf))
    # the first few alone (what the quick search starts from) are the same runs
    for k in (1, 2):
        firsts = heuristic_orders(p, k)
        assert [(n, o.tolist(), b) for n, o, b in firsts] == \
            [(n, o.tolist(), b) for n, o, b in runs[:k]]
    better, _ = improve(p, h, time_limit=5, max_iterations=30, seed=1)
    col = placed(r, p, better.offsets)
    assert violations(r, col) == []
    assert objective(p, better.offsets) <= objective(p, h.offsets)
    # the objective the packers compute is the one the checker's columns give
    assert objective(p, better.offsets)[:2] == oracle_objective(r, col, 0)


def test_always_live_code_goes_first():
    # region 0 is [0, 64). Code C (24 bytes, 16-aligned, always live) and data A (40 bytes)
    # fit there only as C [0,24) A [24,64); by decreasing size A takes [0,40) first and C,
    # aligned to 48, no longer fits. B (40 bytes, conflicts with A) goes to region 1.
    t = Target(1, 128, 64, np.array([0, 64]))
    r = Report.from_columns(target=t, var_id=range(3), tile=[0] * 3, size=[40, 40, 24],
                            alignment=[4, 4, 16], offset=[0] * 3, category=["variable"] * 3,
                            eq_class=[0, 0, 1], interference=[[], []],
                            always_live=[0, 0, 1], executable=[0, 0, 1])
    p = TileProblem.from_report(r, 0)
    assert objective(p, first_fit(p, np.array([0, 1, 2])))[0] == 24  # size order overflows C
    off = heuristic_runs(p).offsets
    assert objective(p, off)[:2] == (0, 104)
    assert off.tolist() == [24, 64, 0] and violations(r, placed(r, p, off)) == []


def test_improve_is_repeatable_and_finds_the_exact_fit():
    # six lifetimes packed into their maximum live bytes (32): 83% of the 720 orders
    # overflow under first fit, the identity order among them
    lo, up = [1, 3, 1, 2, 0, 1], [4, 5, 4, 4, 2, 3]
    inter = [[j for j in range(6) if j != i and lo[i] < up[j] and lo[j] < up[i]]
             for i in range(6)]
    t = Target(1, 32, 32, np.array([0]))
    r = Report.from_columns(target=t, var_id=range(6), tile=[0] * 6, size=[8, 12, 4, 8, 12, 4],
                            alignment=[4] * 6, offset=[0] * 6, category=["variable"] * 6,
                            eq_class=range(6), interference=inter)
    p = TileProblem.from_report(r, 0)
    from tilemem.pack.heuristic import HeuristicResult

    order = np.arange(6)
    start = HeuristicResult(first_fit(p, order), "identity", order, False)
    assert objective(p, start.offsets)[0] > 0
    a, _ = improve(p, start, time_limit=30, max_iterations=300, seed=7)
    b, _ = improve(p, start, time_limit=30, max_iterations=300, seed=7)
    assert a.offsets.tolist() == b.offsets.tolist()
    assert objective(p, a.offsets)[:2] == (0, 32)
    assert violations(r, placed(r, p, a.offsets)) == []
