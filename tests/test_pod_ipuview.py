"""Rows ordered by (IPU, tile) and one IPU of a report as a view (tilemem.model.ipuview).

Expectations: the ordered report is the same report (every variable's fields, names,
constraints and allocation order, matched by var id, not by row); an IPU's view holds exactly
the allocated variables whose tile is on that IPU, by the tile column; its columns share memory
with the report's; the order check agrees with a plain sort check on random columns.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tilemem.generate import generate_report
from tilemem.load import load_report, save_report
from tilemem.model import Report
from tilemem.model import _tileorder
from tilemem.model._tileorder import ordered as _ordered
from tilemem.model.ipuview import ipu_bounds, ipu_parts, ipu_view, order_by_tile, tile_ordered

PER_IPU = 12


@pytest.fixture(scope="module")
def two_ipus():
    return generate_report("mk1", tiles=PER_IPU, steps=80, seed=3, ipus=2)


def by_var(r: Report, rows=None):
    """Every variable as a tuple of its fields, keyed by var id (row order left out)."""
    rows = range(r.num_vars) if rows is None else rows
    vid = r.var_id
    out = {}
    for i in rows:
        cons = tuple(sorted(int(vid[j]) for j in r.element_constraints.row(i)))
        reg = tuple(sorted(int(vid[j]) for j in r.region_constraints.row(i)))
        out[int(vid[i])] = (int(r.tile[i]), int(r.size[i]), int(r.offset[i]),
                            int(r.eq_class[i]), bool(r.allocated[i]), bool(r.always_live[i]),
                            r.category_name(i), r.name(i), cons, reg)
    return out


def shuffled(r: Report, seed=0) -> Report:
    """The same report with its rows in a random order (var ids travel with the rows)."""
    from tilemem.model.ipuview import _take

    perm = np.random.default_rng(seed).permutation(r.num_vars)
    return _take(r, perm)


def orders(r: Report):
    return [r.var_id[r.allocation_order.row(t)].tolist() for t in range(r.num_tiles)]


def test_ordered_report_is_the_same_report(two_ipus):
    mixed = shuffled(two_ipus)
    assert not tile_ordered(mixed)
    o = order_by_tile(mixed)
    assert tile_ordered(o)
    assert by_var(o) == by_var(two_ipus)
    assert orders(o) == orders(two_ipus)
    assert np.all(np.diff(o.tile) >= 0)
    # stable: within a tile the rows keep the order they had
    for t in (0, 5, PER_IPU + 1):
        rows_before = np.flatnonzero(mixed.tile == t)
        assert o.var_id[o.tile == t].tolist() == mixed.var_id[rows_before].tolist()


def test_views_hold_each_ipus_variables_without_copies(two_ipus):
    r = order_by_tile(shuffled(two_ipus, 1))
    b = ipu_bounds(r)
    assert b[0] == 0 and b[-1] == int(r.allocated.sum()) and len(b) == 3
    seen = {}
    for k in range(2):
        v = ipu_view(r, k)
        expected = np.flatnonzero(r.allocated & (r.tile // PER_IPU == k))
        assert sorted(v.var_id.tolist()) == sorted(r.var_id[expected].tolist())
        assert np.shares_memory(v.size, r.size) and np.shares_memory(v.tile, r.tile)
        assert np.shares_memory(v.name_offsets, r.name_offsets)
        assert by_var(v) == by_var(r, expected)
        # allocation order: this IPU's tiles as in the report, the other IPU's empty
        mine = range(k * PER_IPU, (k + 1) * PER_IPU)
        for t in range(r.num_tiles):
            want = orders(r)[t] if t in mine else []
            assert v.var_id[v.allocation_order.row(t)].tolist() == want
        seen.update(by_var(v))
    assert len(seen) == int(r.allocated.sum())


def test_parts_of_an_unordered_report_are_the_same_as_the_views(two_ipus):
    mixed = shuffled(two_ipus, 2)
    ordered = order_by_tile(mixed)
    for (k, a), (j, b) in zip(ipu_parts(mixed), ipu_parts(ordered)):
        assert k == j and by_var(a) == by_var(b) and orders(a) == orders(b)


def same_result(a, b):
    assert a.counts == b.counts and a.waived_counts == b.waived_counts
    assert a.violations == b.violations and a.waived == b.waived
    assert np.array_equal(a.overflow_bytes, b.overflow_bytes)
    assert np.array_equal(a.tile_violations, b.tile_violations)


@pytest.mark.parametrize("limit", [3, 1000])
def test_check_ipu_by_ipu_finds_what_the_whole_check_finds(two_ipus, limit):
    """Every rule is within a tile: checked IPU by IPU (views, or gathered parts of an
    unordered report) the result is the whole report's, violations in the same order."""
    from tilemem.check import check_allocation
    from tilemem.rules import Rules

    r = order_by_tile(two_ipus)
    rng = np.random.default_rng(5)
    # offsets that break rules: every kind of violation on both IPUs
    bad = np.where(r.allocated, rng.integers(0, r.target.tile_memory + 4096, r.num_vars), -1)
    for off in (None, bad):
        for rules in (Rules(), Rules(no_region_span=False)):
            whole = check_allocation(r, off, rules, limit=limit, by_ipu=False)
            same_result(check_allocation(r, off, rules, limit=limit, by_ipu=True), whole)
    assert not check_allocation(r, bad, by_ipu=False).ok   # the case is not a trivial one
    assert check_allocation(r, bad, by_ipu=False).tile_violations[PER_IPU:].sum() > 0
    mixed = shuffled(r, 4)
    perm_off = np.empty(r.num_vars, np.int64)
    perm_off[mixed.rows_of_vars(r.var_id)] = bad
    a = check_allocation(mixed, perm_off, limit=10 ** 6, by_ipu=True)
    b = check_allocation(r, bad, limit=10 ** 6, by_ipu=False)
    def found(res):   # pairs found in either order when rows tie
        return sorted((v.rule, v.tile, tuple(sorted(v.var_ids))) for v in res.violations)
    assert a.counts == b.counts and found(a) == found(b)
    assert np.array_equal(a.tile_violations, b.tile_violations)


def test_saved_reports_come_back_ordered(tmp_path, two_ipus):
    mixed = shuffled(two_ipus, 3)
    for ext in (".json", ".capnp"):
        p = tmp_path / f"r{ext}"
        save_report(mixed, p)
        back = load_report(p)
        assert tile_ordered(back)
        assert by_var(back) == by_var(two_ipus) and orders(back) == orders(two_ipus)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 5)), max_size=40),
       st.integers(1, 7))
def test_order_check_agrees_with_a_sort(rows, block):
    allocated = np.array([a for a, _ in rows], bool)
    tile = np.array([t if a else -1 for a, t in rows], np.int64)
    key = np.where(allocated, tile, 1 << 40)
    expected = bool(np.all(np.diff(key) >= 0)) if len(rows) else True
    old = _tileorder.BLOCK
    _tileorder.BLOCK = block
    try:
        assert _ordered(tile, allocated) == expected
    finally:
        _tileorder.BLOCK = old


def test_tile_rows_of_an_ordered_report_are_ranges_and_the_same_rows(two_ipus, monkeypatch):
    import dataclasses

    import tilemem.model as model

    r = order_by_tile(shuffled(two_ipus, 6))
    fresh = lambda: dataclasses.replace(r, _tile_index=None, _cache={})  # noqa: E731
    monkeypatch.setattr(model, "_ORDERED_INDEX_FROM", 10 ** 12)   # the index of every row
    indexed = fresh()
    want = [indexed.tile_rows(t).tolist() for t in range(r.num_tiles)]
    monkeypatch.setattr(model, "_ORDERED_INDEX_FROM", 0)          # ranges
    ranged = fresh()
    assert [ranged.tile_rows(t).tolist() for t in range(r.num_tiles)] == want
    assert ranged._tile_index[1] is None
    assert ranged.tiles_in_use().tolist() == indexed.tiles_in_use().tolist()
    # every reader of the tile index takes both kinds: the live bytes over steps the same
    from tilemem.liveness.steps import max_over_tiles

    assert r.class_steps is not None
    assert ([a.tolist() for a in max_over_tiles(ranged)]
            == [a.tolist() for a in max_over_tiles(indexed)])
    # and by the tile column itself
    for t in range(r.num_tiles):
        assert want[t] == np.flatnonzero(r.allocated & (r.tile == t)).tolist()
    mixed = dataclasses.replace(shuffled(two_ipus, 7), _tile_index=None, _cache={})
    mixed.tile_rows(0)
    assert mixed._tile_index[1] is not None   # not ordered: the index, as before


def test_tensor_codes_read_in_blocks_are_the_whole_reading(monkeypatch):
    """Names read a block of rows at a time (Pod scale) give the codes of one pass: the
    same first-seen numbering, for all rows, scattered rows, and a mapped file's view."""
    from dataclasses import replace

    from tilemem.model import names as N

    names = ["w#0", "w#1", "x", "a/b#3", "a/b#x", "ü/v#12"] * 7
    n = len(names)
    r = Report.from_columns(var_id=range(n), tile=[0] * n, size=[4] * n, alignment=[4] * n,
                            offset=[0] * n, category=["variable"] * n, eq_class=[0] * n,
                            interference=[[]], names=names)

    def by_hand(rows):
        ids = {}
        base = [nm.rpartition("#")[0] if nm.rpartition("#")[2].isdigit() else nm
                for nm in names]
        return [ids.setdefault(base[i], len(ids)) for i in rows], list(ids)

    monkeypatch.setattr(N, "NAME_BLOCK", 4)
    view = replace(r, name_blob=np.frombuffer(r.name_blob, np.uint8))
    for rows in (np.arange(n), np.array([41, 0, 17, 2, 40, 3, 9])):
        for rep in (r, view):
            codes, got = N._tensor_codes(rep, rows)
            assert (codes.tolist(), got) == by_hand(rows.tolist())


def test_memory_figures_ipu_by_ipu_are_the_whole_reports(two_ipus):
    """The memory figures of an ordered report over several IPUs are computed IPU by IPU;
    every figure, category and hole is what one pass over the whole report gives, for the
    report's offsets and for others."""
    from tilemem.figures import memory

    r = order_by_tile(two_ipus)
    rng = np.random.default_rng(3)
    other = np.where(r.allocated, rng.integers(0, r.target.tile_memory, r.num_vars), -1)
    for off in (None, other):
        split = memory.memory_figures(r, off)
        whole, _ = memory._memory_figures(r, off, None, False)
        assert split.categories == whole.categories
        for f in ("region_bytes", "region_including_gaps", "highest_end", "non_overlapped",
                  "overlapped", "after_overlapping", "in_dump"):
            assert np.array_equal(getattr(split, f), getattr(whole, f)), f
        for f in ("tile", "region", "start", "end", "cause"):
            assert np.array_equal(getattr(split.gaps, f), getattr(whole.gaps, f)), f
        assert split.highest_end[PER_IPU:].any()   # both IPUs hold data
