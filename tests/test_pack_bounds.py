"""The lower bounds (``tilemem.pack.bounds``) never exceed an optimum found independently:
by brute force (``pack_oracle.brute_force``), by hand, or CP-SAT's proven optimum."""
from itertools import permutations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from pack_oracle import TINY_GEOMETRY, brute_force, examples, small_reports
from tilemem.model import Report
from tilemem.pack.bounds import alignment_padding, region_bound, simple_bound, tile_bounds
from tilemem.pack.cpsat import solve_cpsat
from tilemem.pack.problem import TileProblem


# the region bound and the padded peak bound on the same drawn reports: one brute force
# (most of an example's time) for both
@examples(150)
@given(small_reports(max_vars=4, max_classes=3, geometry=TINY_GEOMETRY))
def test_region_and_padded_peak_bounds_never_exceed_the_brute_force_optimum(r):
    over, end = brute_force(r)
    b = tile_bounds(r, [0])[0]
    assert b.bytes <= b.padded
    if over == 0:  # the bounds speak of allocations with nothing overflowed
        assert region_bound(TileProblem.from_report(r, 0)) <= end
        assert b.padded <= end


def _least_stack_end(size, align) -> int:
    """The least end of pairwise conflicting variables: they lie one above another, so over
    every order, each at the lowest aligned offset at or above the end of the one below (a
    zero-size one takes no byte: the most lenient reading, the one a bound must survive)."""
    best = None
    for order in permutations(range(len(size))):
        top = 0
        for i in order:
            top = -(-top // align[i]) * align[i] + size[i]
        best = top if best is None else min(best, top)
    return best


@examples(300)
@given(st.lists(st.tuples(st.integers(0, 40), st.sampled_from([4, 8, 16, 32])),
                min_size=1, max_size=6))
def test_alignment_padding_never_exceeds_the_least_stack(items):
    size = [s for s, _ in items]
    align = [a for _, a in items]
    assert _least_stack_end(size, align) >= sum(size) + alignment_padding(size, align)


def test_alignment_padding_by_hand():
    # four 16-aligned variables of 24 bytes: at 0, 32, 64, 96, three gaps of 8 (the top one
    # needs none); an 8-aligned 8-byte one fills one of them; sizes of 8 mod 16 aligned to 8
    # need nothing
    assert alignment_padding([24] * 4, [16] * 4) == 24 == _least_stack_end([24] * 4, [16] * 4) - 96
    assert alignment_padding([24] * 4 + [8], [16] * 4 + [8]) == 16
    assert alignment_padding([24] * 4, [8] * 4) == 0
    # mod 8 and mod 16 at once: the larger of the two, not their sum (one gap serves both)
    assert alignment_padding([20, 20, 20], [16, 16, 16]) == 24 == \
        _least_stack_end([20, 20, 20], [16, 16, 16]) - 60


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


def test_live_data_that_fits_but_not_with_its_padding_is_proven_not_to_fit():
    # three pairwise conflicting 20-byte variables aligned to 16 on a 64-byte tile: their 60
    # live bytes fit, but each but the highest leaves 12 bytes before the next (0, 32, 64):
    # no allocation fits, and the verdict says it is proven on those 3 variables
    from tilemem.model.target import Target
    from tilemem.pack.run.driver import RunOptions, allocate
    from tilemem.pack.run.plan import Policy

    t = Target(1, 64, 32, np.array([0, 16, 32, 48]))
    # (and a fourth, live with none of them: the proof is on the three, not the tile)
    r = Report.from_columns(target=t, var_id=range(4), tile=[0] * 4, size=[20] * 3 + [4],
                            alignment=[16] * 3 + [4], offset=[0] * 4, category=["variable"] * 4,
                            eq_class=[0, 1, 2, 3], interference=[[1, 2], [0, 2], [0, 1], []])
    b = tile_bounds(r, [0])[0]
    assert (b.bytes, b.padded, b.padded_vars) == (60, 84, 3)
    res = allocate(r, policy=Policy(time_limit=1.0), run=RunOptions(workers=1)).tiles[0]
    assert res.overflow_bytes > 0 and res.verdict == "cannot fit: proven on 3 variables"
    assert res.bound == 84
