"""Proofs that an out-of-memory tile cannot fit (``tilemem.pack.proof``), checked by brute
force: whenever a proof is claimed, no allocation of the tile (nor of the subset it was
proven on) fits, by the test oracle's own enumeration of every placement."""
from __future__ import annotations

import numpy as np
from hypothesis import given

from pack_oracle import TINY_GEOMETRY, brute_force, examples, small_reports
from test_pack_search import brute_force_fits
from tilemem.model import Report
from tilemem.pack.portfolio import solve_tile
from tilemem.pack.problem import TileProblem
from tilemem.pack.proof import _subsets, prove_no_fit, restrict


@examples(80)
@given(small_reports(max_vars=6, geometry=TINY_GEOMETRY))
def test_every_claimed_proof_holds_by_brute_force(r):
    p = TileProblem.from_report(r, 0)
    proven_on = prove_no_fit(p, time_limit=2)
    if proven_on is not None:
        assert not brute_force_fits(r, p.rules, r.target.tile_memory), \
            "a proof was claimed but an allocation fits"


@examples(40)
@given(small_reports(max_vars=6, geometry=TINY_GEOMETRY))
def test_the_first_subset_is_a_clique_of_live_variables(r):
    p = TileProblem.from_report(r, 0)
    for subset in _subsets(p):
        q = restrict(p, subset)
        assert all(q.conflicts.conflicts(i, j) for i in range(q.n) for j in range(i))
        assert np.all(p.size[subset] > 0)
        break


def test_an_alignment_proof_and_the_verdict_it_gives():
    # two conflicting 20-byte variables aligned to 16 in 48 bytes with interleaved memory
    # from 32: 40 live bytes fit, but the second cannot start below 32 (no overlap, no
    # region span), so it ends at 52: proven on those two
    r = Report.from_columns(target=TINY_GEOMETRY, var_id=range(3), tile=[0] * 3,
                            size=[20, 20, 4], alignment=[16, 16, 4], offset=[0] * 3,
                            category=["variable"] * 3, eq_class=[0, 1, 2],
                            interference=[[1], [0], []])
    assert brute_force(r)[0] > 0
    p = TileProblem.from_report(r, 0)
    assert prove_no_fit(p, time_limit=5) == 2
    res, _ = solve_tile(p, "fit", time_limit=1)
    assert res.overflow_bytes > 0
    assert res.verdict == "cannot fit: proven on 2 variables"


def test_verdicts_of_tiles_that_fit_and_of_too_much_live_data():
    def tile(sizes):
        n = len(sizes)
        r = Report.from_columns(target=TINY_GEOMETRY, var_id=range(n), tile=[0] * n,
                                size=sizes, alignment=[4] * n, offset=[0] * n,
                                category=["variable"] * n, eq_class=[0] * n,
                                interference=[[]])
        return TileProblem.from_report(r, 0)

    assert solve_tile(tile([8, 8]), "fit", time_limit=2)[0].verdict == "fits"
    assert solve_tile(tile([16, 16, 20]), "fit", time_limit=2)[0].verdict == \
        "cannot fit: live data"


def test_the_gap_is_to_the_best_bound_proven():
    # two conflicting 20-byte variables aligned to 16: 40 live bytes, but the second starts
    # at 32 at the lowest, so no allocation ends below 52. The exact portfolio proves it
    # (the search finds nothing below 52) and reports 52 as the bound: gap 0, optimal.
    from tilemem.model.target import Target

    r = Report.from_columns(target=Target(1, 256, 128, np.array([0, 128])), var_id=range(2),
                            tile=[0, 0], size=[20, 20], alignment=[16, 16], offset=[0, 0],
                            category=["variable"] * 2, eq_class=[0, 1],
                            interference=[[1], [0]])
    p = TileProblem.from_report(r, 0)
    res, off = solve_tile(p, "exact", time_limit=1, bound=(40, True))
    assert res.total_including_gaps == 52 == brute_force(r)[1]
    assert (res.status, res.bound, res.gap) == ("optimal", 52, 0.0)


def test_interleaved_data_past_its_region_is_a_proof_on_its_variables():
    # interleaved region [32, 48): two interleaved 12-byte variables live together need 24
    # bytes there; the tile's live data (28 bytes) fits its 48. "Proven on 2 variables" (the
    # clique), not "live data": the live data fits, the rules do not let it be placed
    r = Report.from_columns(target=TINY_GEOMETRY, var_id=range(3), tile=[0] * 3,
                            size=[12, 12, 4], alignment=[4] * 3, offset=[0] * 3,
                            category=["variable"] * 3, eq_class=[0, 1, 2],
                            interference=[[1], [0], []], in_interleaved_mem=[1, 1, 0])
    assert not brute_force_fits(r, TileProblem.from_report(r, 0).rules, 48)
    for method in ("quick", "fit"):
        res, _ = solve_tile(TileProblem.from_report(r, 0), method, time_limit=0.5,
                            bound=(28, True))
        assert res.overflow_bytes > 0
        assert res.verdict == "cannot fit: proven on 2 variables", (method, res.verdict)


@examples(60)
@given(small_reports(max_vars=6, geometry=TINY_GEOMETRY))
def test_every_verdict_of_a_proof_holds_by_brute_force(r):
    # whatever gave it (the interleaved clique, the search exhausting every capacity, a
    # proof on part of the tile), "cannot fit" is true of the tile. A quarter of a second:
    # the search decides six variables in microseconds, and a tile that overflows spends
    # the local search's share of it all
    p = TileProblem.from_report(r, 0)
    for method in ("quick", "fit"):
        res, _ = solve_tile(p, method, time_limit=0.25)
        if res.verdict.startswith("cannot fit"):
            assert not brute_force_fits(r, p.rules, r.target.tile_memory), res.verdict
