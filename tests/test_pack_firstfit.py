"""first_fit: hand-computed placements, and the independent checker on random reports."""
from dataclasses import replace

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pack_oracle import small_reports, violations
from tilemem.model import Report
from tilemem.model.target import Target
from tilemem.pack.firstfit import complete_order, first_fit
from tilemem.pack.problem import TileProblem
from tilemem.rules import Rules

# 64 bytes: non-interleaved elements [0,16) [16,32), interleaved elements [32,48) [48,64)
TINY = Target(1, 64, 32, np.array([0, 16, 32, 48]))


def tiny(size, cls, inter, **kw):
    n = len(size)
    kw.setdefault("alignment", [4] * n)
    return Report.from_columns(target=kw.pop("target", TINY), var_id=list(range(n)),
                               tile=[0] * n, size=size, offset=[0] * n,
                               category=["variable"] * n, eq_class=cls, interference=inter,
                               **kw)


def ff(r, order=None, **kw):
    rules = kw.pop("rules", Rules())
    return first_fit(TileProblem.from_report(r, 0, rules), order, **kw).tolist()


def test_alignment_leaves_a_gap():
    r = tiny([6, 8], [0, 0], [[]], alignment=[4, 16])
    assert ff(r) == [0, 16]


def test_non_conflicting_variables_share_addresses():
    r = tiny([6, 8, 4], [0, 1, 2], [[1], [0], []])
    assert ff(r) == [0, 8, 0]  # class 2 interferes with nobody


def test_element_constraint_pushes_to_the_next_element():
    # var 1 does not conflict with var 0 but must touch none of var 0's elements
    r = tiny([8, 4], [0, 1], [[], []], element_constraints=[[1], []])
    assert ff(r) == [0, 16]
    # var 0 spans elements 0 and 1 -> var 1 goes to element 2 (and may then span into 3)
    r = tiny([20, 4], [0, 1], [[], []], element_constraints=[[], [0]])
    assert ff(r) == [0, 32]


def test_region_constraint_moves_to_the_other_region():
    r = tiny([8, 4], [0, 1], [[], []], region_constraints=[[1], []])
    assert ff(r) == [0, 32]
    # the interleaved one first: the other can only go below 32
    r = tiny([8, 4], [0, 1], [[], []], region_constraints=[[1], []],
             in_interleaved_mem=[True, False])
    assert ff(r) == [32, 0]


def test_no_region_span_and_its_switch():
    r = tiny([24, 16], [0, 0], [[]])
    assert ff(r) == [0, 32]                                   # [24, 40) would span 32
    assert ff(r, rules=Rules(no_region_span=False)) == [0, 24]


def test_windows_interleaved_and_code():
    r = tiny([8, 8, 8], [0, 0, 0], [[]], in_interleaved_mem=[True, False, False],
             executable=[False, False, True])
    assert ff(r) == [32, 0, 8]


def test_overflow_spill_goes_past_tile_memory():
    # 48 always-live bytes, then two 32-byte vars that conflict with each other
    r = tiny([48, 32, 32, 8], [0, 1, 1, 2], [[], [], []], always_live=[1, 0, 0, 0],
             target=Target(1, 64, 64, np.array([0, 16, 32, 48])))  # no interleaved region
    off = ff(r)
    assert off[0] == 0
    assert off[1] == 64 and off[2] == 96   # lowest free addresses in the overflow zone
    assert off[3] == 48                    # still fits in memory, beside the always-live var
    # a code variable that cannot fit below 32 overflows even though 32..63 is free
    r = tiny([24, 16], [0, 0], [[]], executable=[False, True])
    assert ff(r) == [0, 64]


def test_overflowed_non_conflicting_vars_share_the_zone():
    r = tiny([60, 40, 40], [0, 1, 2], [[1, 2], [0], [0]])
    assert ff(r, rules=Rules(no_region_span=False)) == [0, 64, 64]


def test_order_is_respected_and_completed():
    r = tiny([8, 8, 8], [0, 0, 0], [[]])
    assert ff(r, np.array([2, 0])) == [8, 16, 0]
    assert complete_order(4, np.array([3, 1, 3])).tolist() == [3, 1, 0, 2]


def test_best_fit_differs_from_first_fit():
    # class 1 (conflicts with class 0 only) carves holes into class 0's row:
    # A [0,8), H1 [8,24), B [24,28), H2 [28,32), C [32,40). X (class 2) conflicts with class 0
    # only, so its free gaps are [8,24) (16 bytes), [28,32) (4 bytes) and [40,64).
    size = [8, 16, 4, 4, 8, 4]
    cls = [0, 1, 0, 1, 0, 2]
    r = tiny(size, cls, [[1, 2], [0], [0]])
    assert ff(r) == [0, 8, 24, 28, 32, 8]                  # first fit: lowest hole
    assert ff(r, best_fit=True) == [0, 8, 24, 28, 32, 28]  # best fit: the tightest hole
    # with only the open top gap left, best fit takes its lowest address
    r = tiny([8, 8, 4], [0, 0, 1], [[1], [0]])
    assert ff(r, best_fit=True) == [0, 8, 16]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_reports(max_vars=10, tiles=2), st.booleans(), st.booleans(), st.randoms())
def test_every_placement_passes_the_checker(r, best, span, rnd):
    rules = Rules(no_region_span=span, lowest_256kb_limit=rnd.choice([262144, 48, 100]))
    off = r.offset.copy()
    for tile in range(r.num_tiles):
        p = TileProblem.from_report(r, tile, rules)
        order = np.arange(p.n)
        rnd.shuffle(order)
        off[p.rows] = first_fit(p, order, best_fit=best)
    assert violations(r, off, no_region_span=span, limit_256kb=rules.lowest_256kb_limit) == []


@settings(max_examples=100, deadline=None)
@given(small_reports(max_vars=8))
def test_first_fit_takes_the_lowest_legal_address(r):
    # brute force: the first variable in the order goes to the lowest address any single
    # variable may take under the checker; then each next one likewise given the previous
    # (the addresses its alignment allows: the checker refuses the others, a misaligned
    # answer of first fit then fails the assertion)
    p = TileProblem.from_report(r, 0)
    off = first_fit(p)
    col = r.offset.copy()
    col[:] = 1 << 40  # not yet placed: far away, in its own overflow slot
    for k, i in enumerate(p.rows):
        col[p.rows[k + 1:]] = (1 << 40) + np.arange(len(p.rows) - k - 1) * (1 << 30)
        for a in range(0, int(off[k]) + 1, max(int(r.alignment[i]), 4)):
            col[i] = a
            if not violations(r, col):
                break
        assert a == off[k], f"var {k}: lowest legal address {a}, first_fit gave {off[k]}"
        col[i] = off[k]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_reports(max_vars=12, tiles=3), st.booleans(),
       st.lists(st.integers(0, 11), max_size=24))
def test_replaying_every_tile_at_once_is_first_fit_tile_by_tile(r, span, picks):
    """``replay_first_fit``, one compiled pass over the report, against ``first_fit`` on each
    tile's own problem, in orders that repeat and miss variables."""
    from tilemem.model import Csr
    from tilemem.pack.replay import replay_first_fit

    picks = [i for i in picks if i < r.num_vars]
    lists = [[i for i in picks if r.tile[i] == t] for t in range(r.num_tiles)]
    r = replace(r, allocation_order=Csr.from_lengths([len(x) for x in lists],
                                                     [i for x in lists for i in x]))
    rules = Rules(no_region_span=span)
    want = np.zeros(r.num_vars, np.int64)
    for t in r.tiles_in_use().tolist():
        p = TileProblem.from_report(r, t, rules)
        want[p.rows] = first_fit(p, np.searchsorted(p.rows, r.allocation_order.row(t)))
    assert replay_first_fit(r, rules).tolist() == want.tolist()
