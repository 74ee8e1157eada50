"""The lower bounds (``tilemem.pack.bounds``) never exceed an optimum found independently:
by brute force (``pack_oracle.brute_force``), by hand, or CP-SAT's proven optimum."""
import numpy as np
from hypothesis import given

from pack_oracle import TINY_GEOMETRY, brute_force, examples, small_reports
from tilemem.model import Report
from tilemem.pack.bounds import region_bound, simple_bound
from tilemem.pack.cpsat import solve_cpsat
from tilemem.pack.problem import TileProblem


@examples(150)
@given(small_reports(max_vars=4, max_classes=3, geometry=TINY_GEOMETRY))
def test_region_bound_never_exceeds_the_brute_force_optimum(r):
    over, end = brute_force(r)
    if over == 0:  # the bound speaks of allocations with nothing overflowed
        assert region_bound(TileProblem.from_report(r, 0)) <= end


def test_region_bound_by_hand():
    # two conflicting interleaved 8-byte vars (region [32, 48)) and one of another class that
    # conflicts with neither: the bound is 32 + 16; without conflict it is 32 + 8
    kw = dict(target=TINY_GEOMETRY, var_id=[0, 1, 2], tile=[0] * 3, size=[8, 8, 12],
              alignment=[4] * 3, offset=[0] * 3, category=["variable"] * 3,
              in_interleaved_mem=[1, 1, 1])
    r = Report.from_columns(eq_class=[0, 1, 2], interference=[[1], [], []], **kw)
    assert region_bound(TileProblem.from_report(r, 0)) == 32 + 16
    r = Report.from_columns(eq_class=[0, 1, 2], interference=[[], [], []], **kw)
    assert region_bound(TileProblem.from_report(r, 0)) == 32 + 12
    r = Report.from_columns(eq_class=[0, 1, 2], interference=[[], [], []],
                            always_live=[0, 1, 0], **kw)
    assert region_bound(TileProblem.from_report(r, 0)) == 32 + 20


def test_simple_bound_is_a_lower_bound():
    rng = np.random.default_rng(5)
    for _ in range(20):
        n, k = 10, 5
        r = Report.from_columns(var_id=range(n), tile=[0] * n,
                                size=rng.integers(1, 40, n) * 4, alignment=[4] * n,
                                offset=[0] * n, category=["variable"] * n,
                                eq_class=rng.integers(0, k, n),
                                interference=[sorted(set(rng.integers(0, k, 2).tolist()))
                                              for _ in range(k)])
        p = TileProblem.from_report(r, 0)
        res = solve_cpsat(p, time_limit=10)
        assert res.status == "optimal"
        assert simple_bound(p)[0] <= int((res.offsets + p.size).max())
