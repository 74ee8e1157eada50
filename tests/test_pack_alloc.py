"""The packing driver and its methods against independent expectations.

- every method's allocation passes the independent checker (``pack_oracle.violations``);
- exact is never worse than the heuristic, the heuristic never worse than replay;
- exact equals a brute-force optimum (written here, by enumeration) on tiny tiles;
- a bad solver result is rejected by the guard (``tilemem.pack.guard``; its agreement with
  the independent checker is tested in ``test_pack_guard``).
"""
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pack_oracle import objective as oracle_objective
from pack_oracle import small_reports, violations
from tilemem.check import check_allocation
from tilemem.model import Report
from tilemem.pack import alloc as alloc_mod
from tilemem.pack import heuristic as heuristic_mod
from tilemem.pack.alloc import allocate, region_bound, simple_bound, solve_tile
from tilemem.pack.cpsat import conflict_cliques, solve_cpsat
from tilemem.pack.guard import self_check
from tilemem.pack.problem import TileProblem
from tilemem.target import Target



def examples(n):
    return settings(max_examples=n, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def passes_both_checkers(r, off):
    """The test's own checker and ``tilemem.check`` (written apart from the packers)."""
    assert violations(r, off) == []
    res = check_allocation(r, off)
    assert res.ok, [v.to_json() for v in res.violations][:3]


def keys(r, off):
    return [oracle_objective(r, off, t) for t in range(r.num_tiles)]


@examples(1000)
@given(small_reports(max_vars=10, tiles=2))
def test_replay_and_heuristic_pass_the_checker(r):
    rep = allocate(r, method="replay", workers=1)
    heu = allocate(r, method="heuristic", workers=1)
    passes_both_checkers(r, rep.offsets)
    passes_both_checkers(r, heu.offsets)
    for k_rep, k_heu in zip(keys(r, rep.offsets), keys(r, heu.offsets)):
        assert k_heu <= k_rep  # replay's order is one of the heuristic's candidates
    for res in heu.tiles:
        over, total = oracle_objective(r, heu.offsets, res.tile)
        assert (res.overflow_bytes, res.total_including_gaps) == (over, total)
        if res.status == "optimal":  # claimed by the bound: the bound must be met
            assert over == 0 and total <= res.bound


@examples(200)
@given(small_reports(max_vars=9, tiles=2), st.sampled_from(["auto", "exact"]))
def test_exact_passes_the_checker_and_beats_the_heuristic(r, method):
    heu = allocate(r, method="heuristic", workers=1)
    ex = allocate(r, method=method, workers=1, time_limit=5, deterministic=True)
    passes_both_checkers(r, ex.offsets)
    for k_heu, k_ex in zip(keys(r, heu.offsets), keys(r, ex.offsets)):
        assert k_ex <= k_heu


def brute_force(r: Report, tile: int = 0) -> tuple[int, int]:
    """The least (overflowed bytes, highest end) over every allocation of a tiny tile.

    Enumerates each variable's aligned addresses in memory and in the overflow zone up to
    the sum of sizes and alignments past it (an optimal overflow packing never goes higher),
    keeping only partial assignments the rules allow, pair by pair.
    """
    t = r.target
    tm, ils = t.tile_memory, t.interleaved_memory_start
    starts = t.memory_element_offsets.tolist()
    rows = [i for i in range(r.num_vars) if r.allocated[i] and r.tile[i] == tile]
    size = {i: max(int(r.size[i]), 1) for i in rows}
    align = {i: max(int(r.alignment[i]), 4) for i in rows}
    top = tm + sum(size[i] + align[i] for i in rows)

    def legal(i, o):
        e = o + size[i]
        if o >= tm:
            return True
        if e > tm or (r.in_interleaved_mem[i] and o < ils):
            return False
        if (r.executable[i] or r.vertex_code[i]) and e > ils:
            return False
        if r.lowest_256kb[i] and e > 262144:
            return False
        return not (o < ils < e)

    def touched(i, o, zones):
        if o >= tm:
            return set()
        e = o + size[i]
        return {z for z, (zs, ze) in enumerate(zones) if zs < e and o < ze}

    elements = list(zip(starts, starts[1:] + [tm]))
    regions = [(0, ils), (ils, tm)]
    inter = [set(r.interference.row(c).tolist()) for c in range(r.num_classes)]

    def compatible(i, oi, j, oj):
        ci, cj = int(r.eq_class[i]), int(r.eq_class[j])
        conflict = r.always_live[i] or r.always_live[j] or ci == cj or cj in inter[ci]
        if conflict and oi < oj + size[j] and oj < oi + size[i]:
            return False
        if j in r.element_constraints.row(i).tolist() or i in r.element_constraints.row(
                j).tolist():
            if touched(i, oi, elements) & touched(j, oj, elements):
                return False
        if j in r.region_constraints.row(i).tolist() or i in r.region_constraints.row(
                j).tolist():
            if touched(i, oi, regions) & touched(j, oj, regions):
                return False
        return True

    cands = {i: [o for o in range(0, top, align[i]) if legal(i, o)] for i in rows}
    best = None
    partial = [()]
    for k, i in enumerate(rows):
        nxt = []
        for prefix in partial:
            for o in cands[i]:
                if all(compatible(rows[m], prefix[m], i, o) for m in range(k)):
                    nxt.append(prefix + (o,))
        partial = nxt
    for full in partial:
        over = sum(int(r.size[i]) for i, o in zip(rows, full) if o >= tm)
        end = max((o + int(r.size[i]) for i, o in zip(rows, full)), default=0)
        if best is None or (over, end) < best:
            best = (over, end)
    return best


TINY_GEOMETRY = Target(1, 48, 32, np.array([0, 16, 32]))


@examples(120)
@given(small_reports(max_vars=4, max_classes=3, geometry=TINY_GEOMETRY))
def test_exact_matches_brute_force(r):
    ex = allocate(r, method="exact", workers=1, time_limit=20, deterministic=True)
    passes_both_checkers(r, ex.offsets)
    assert ex.tiles[0].status == "optimal", ex.tiles[0].note
    assert oracle_objective(r, ex.offsets, 0) == brute_force(r)


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


def test_brute_force_on_a_hand_computed_case():
    # 3 mutually conflicting 16-byte vars in 48 bytes, one must be interleaved (>= 32):
    # optimum packs all three exactly, end 48.
    r = Report.from_columns(target=TINY_GEOMETRY, var_id=[0, 1, 2], tile=[0] * 3,
                            size=[16] * 3, alignment=[4] * 3, offset=[0] * 3,
                            category=["variable"] * 3, eq_class=[0] * 3, interference=[[]],
                            in_interleaved_mem=[1, 0, 0])
    assert brute_force(r) == (0, 48)
    # an element constraint between the two non-interleaved vars: elements [0,16), [16,32)
    # still allow it; a region constraint between them does not -> 16 bytes overflow
    r2 = Report.from_columns(target=TINY_GEOMETRY, var_id=[0, 1, 2], tile=[0] * 3,
                             size=[16] * 3, alignment=[4] * 3, offset=[0] * 3,
                             category=["variable"] * 3, eq_class=[0] * 3, interference=[[]],
                             in_interleaved_mem=[1, 0, 0], region_constraints=[[], [2], []])
    assert brute_force(r2) == (16, 64)
    ex = allocate(r2, method="exact", workers=1, time_limit=10)
    assert oracle_objective(r2, ex.offsets, 0) == (16, 64)
    assert ex.tiles[0].status == "optimal"


def test_bad_solver_results_are_rejected(monkeypatch):
    # a fake exact search that returns an overlapping allocation: the driver must drop it
    from types import SimpleNamespace

    r = Report.from_columns(var_id=[0, 1, 2], tile=[0] * 3, size=[100, 100, 100],
                            alignment=[4] * 3, offset=[0] * 3, category=["variable"] * 3,
                            eq_class=[0, 1, 2], interference=[[1], [0, 2], [1]])
    p = TileProblem.from_report(r, 0)

    def bad_search(problem, time_limit, hint=None, capacity=None):
        return SimpleNamespace(offsets=np.zeros(problem.n, np.int64), status="optimal")

    monkeypatch.setattr(alloc_mod, "_search_function", lambda: bad_search)
    # no local search: the search's answer (then CP-SAT's) is what this test is about
    monkeypatch.setattr(heuristic_mod, "improve", lambda p, start, **kw: (start, 0))
    hint = np.array([0, 100, 200])  # valid, but 100 bytes above the bound
    assert self_check(p, hint)
    res, off = solve_tile(p, "auto", hint=hint, time_limit=5, bound=(200, True))
    assert "rejected" in res.note
    col = r.offset.copy()
    col[p.rows] = off
    assert violations(r, col) == []
    assert res.total_including_gaps == 200 and res.status == "optimal"  # CP-SAT's answer


def test_search_result_is_used_when_valid(monkeypatch):
    # exact fit that greedy orders miss; a fake search that knows the answer
    from types import SimpleNamespace

    geometry = Target(1, 64, 64, np.array([0]))
    # lifetimes: a[0,2) b[1,3) c[2,4) d[0,4); sizes chosen so only one layout fits in 64
    r = Report.from_columns(target=geometry, var_id=range(4), tile=[0] * 4,
                            size=[24, 16, 24, 24], alignment=[4] * 4, offset=[0] * 4,
                            category=["variable"] * 4, eq_class=[0, 1, 2, 3],
                            interference=[[1, 3], [0, 2, 3], [1, 3], [0, 1, 2]])
    p = TileProblem.from_report(r, 0)
    answer = np.array([40, 24, 40, 0])
    assert self_check(p, answer)
    calls = []

    def search(problem, time_limit, hint=None, capacity=None):
        calls.append(hint is not None)
        return SimpleNamespace(offsets=answer.copy(), status="optimal")

    monkeypatch.setattr(alloc_mod, "_search_function", lambda: search)
    # start from a valid allocation that overflows d, as a weak heuristic might
    hint = np.array([0, 24, 0, 64])
    assert self_check(p, hint)
    res, off = solve_tile(p, "auto", hint=hint, time_limit=5, bound=(64, True))
    assert calls == [True]
    assert res.status == "optimal" and res.total_including_gaps == 64
    assert off.tolist() == answer.tolist()


def test_conflict_cliques_cover_every_conflicting_pair():
    rng = np.random.default_rng(3)
    for _ in range(30):
        n, k = 12, 6
        cls = rng.integers(0, k, n)
        inter = [sorted(set(rng.integers(0, k, 3).tolist())) for _ in range(k)]
        r = Report.from_columns(var_id=range(n), tile=[0] * n, size=[4] * n,
                                alignment=[4] * n, offset=[0] * n,
                                category=["variable"] * n, eq_class=cls, interference=inter,
                                always_live=rng.random(n) < 0.15)
        p = TileProblem.from_report(r, 0)
        cliques = conflict_cliques(p)
        covered = {(int(a), int(b)) for c in cliques for a, b in itertools.combinations(c, 2)}
        for a, b in itertools.combinations(range(n), 2):
            if p.conflicts.conflicts(a, b):
                assert (a, b) in covered
        for c in cliques:  # and a clique is a clique
            for a, b in itertools.combinations(c.tolist(), 2):
                assert p.conflicts.conflicts(a, b)


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


def test_identical_tiles_are_solved_once():
    n = 6
    r = Report.from_columns(target=Target(3, 256, 128, np.array([0, 64, 128, 192])),
                            var_id=range(3 * n), tile=[0] * n + [1] * n + [2] * n,
                            size=[16, 24, 8, 40, 4, 12] * 3, alignment=[4] * (3 * n),
                            offset=[0] * (3 * n), category=["variable"] * (3 * n),
                            eq_class=[0, 1, 2, 0, 1, 2] * 3,
                            interference=[[1], [0, 2], [1]],
                            allocation_order=[list(range(t * n, t * n + n)) for t in range(3)])
    a = allocate(r, method="heuristic", workers=1)
    assert [t.note for t in a.tiles][1:] == ["same problem as tile 0"] * 2
    assert a.offsets[:n].tolist() == a.offsets[n:2 * n].tolist() == a.offsets[2 * n:].tolist()
    assert violations(r, a.offsets) == []


@pytest.mark.parametrize("method", ["replay", "heuristic", "auto"])
def test_process_pool_gives_the_same_offsets(method):
    rng = np.random.default_rng(0)
    n, tiles = 60, 4
    r = Report.from_columns(target=Target(tiles, 1024, 512, np.array([0, 256, 512, 768])),
                            var_id=range(n), tile=rng.integers(0, tiles, n),
                            size=rng.integers(1, 30, n) * 4,
                            alignment=rng.choice([4, 8, 16], n), offset=[0] * n,
                            category=["variable"] * n, eq_class=rng.integers(0, 8, n),
                            interference=[sorted(set(rng.integers(0, 8, 3).tolist()))
                                          for _ in range(8)],
                            in_interleaved_mem=rng.random(n) < 0.3)
    one = allocate(r, method=method, workers=1, time_limit=2, deterministic=True)
    two = allocate(r, method=method, workers=2, time_limit=2, deterministic=True)
    assert violations(r, two.offsets) == []
    if method != "auto":  # the exact part may stop at different points under load
        assert one.offsets.tolist() == two.offsets.tolist()


def test_generated_report_heuristic_never_overflows_more_than_replay():
    """A generated Mk1 report with tiles out of memory: per tile, the heuristic (and auto)
    overflows no more than replaying the report's own order, and everything checks."""
    from tilemem.generate import generate_report

    r = generate_report("mk1", tiles=8, steps=300, pressure=1.3, seed=1)
    rep = allocate(r, method="replay", workers=1)
    heu = allocate(r, method="heuristic", workers=2, verify=True)
    auto = allocate(r, method="auto", workers=2, time_limit=1, verify=True)
    assert rep.summary()["tilesThatFit"] < len(rep.tiles)  # some tiles really are full
    assert check_allocation(r, rep.offsets).ok
    for a, b, c in zip(rep.tiles, heu.tiles, auto.tiles):
        assert a.tile == b.tile == c.tile
        assert c.overflow_bytes <= b.overflow_bytes <= a.overflow_bytes
        assert (c.overflow_bytes, c.total_including_gaps) <= (b.overflow_bytes,
                                                             b.total_including_gaps)


def test_cpsat_skipped_when_too_large_keeps_a_valid_allocation(monkeypatch):
    from tilemem.pack import cpsat as cpsat_mod

    monkeypatch.setattr(cpsat_mod, "MAX_CLIQUE_ENTRIES", 0)
    monkeypatch.setattr(alloc_mod, "_search_function", lambda: None)
    r = Report.from_columns(var_id=range(4), tile=[0] * 4, size=[40, 30, 20, 10],
                            alignment=[4] * 4, offset=[0] * 4, category=["variable"] * 4,
                            eq_class=[0, 1, 2, 3], interference=[[1, 2], [0, 3], [0], [1]])
    p = TileProblem.from_report(r, 0)
    res = solve_cpsat(p, hint=np.array([0, 40, 40, 0]), time_limit=5)
    assert res.status == "unknown" and "too large" in res.note
    assert res.offsets.tolist() == [0, 40, 40, 0]
    out = allocate(r, method="exact", workers=1, time_limit=2)
    passes_both_checkers(r, out.offsets)
    assert "skipped" in out.tiles[0].note or out.tiles[0].status == "optimal"
