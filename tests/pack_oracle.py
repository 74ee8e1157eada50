"""Test helpers for the packers: an independent allocation checker, a brute-force optimum and
random small reports.

The checker and the brute force are written from the rules in FACTS.md / 004 directly, pair by
pair, and share no code with ``tilemem.pack`` (nor with ``tilemem.check``), so they can catch
the packers' mistakes. A zero-size variable is treated as occupying its first byte (the
strictest reading).
"""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from tilemem.check import check_allocation
from tilemem.model import Report
from tilemem.model.target import Target

OVERFLOW_HINT = "offset at or past tileMemory"

#: A geometry small enough for ``brute_force``: elements [0, 16), [16, 32), [32, 48);
#: interleaved from 32.
TINY_GEOMETRY = Target(1, 48, 32, np.array([0, 16, 32]))


def violations(r: Report, offsets, tiles=None, no_region_span: bool = True,
               limit_256kb: int = 262144) -> list[str]:
    """Every broken rule of ``offsets`` (the full column) on ``tiles`` (default: all)."""
    off = np.asarray(offsets, np.int64)
    t = r.target
    tm, ils = t.tile_memory, t.interleaved_memory_start
    starts = list(t.memory_element_offsets.tolist())

    def elements(o, s):
        if o >= tm:
            return set()
        last = o + max(s, 1) - 1
        return {i for i, st_ in enumerate(starts) if st_ <= last and
                (i + 1 == len(starts) or starts[i + 1] > o)}

    def regions(o, s):
        if o >= tm:
            return set()
        end = o + max(s, 1)
        out = set()
        if o < ils:
            out.add(0)
        if end > ils:
            out.add(1)
        return out

    inter = [set(r.interference.row(c).tolist()) for c in range(r.num_classes)]
    bad = []
    tiles = range(t.num_tiles) if tiles is None else tiles
    for tile in tiles:
        rows = [i for i in range(r.num_vars) if r.allocated[i] and r.tile[i] == tile]
        for i in rows:
            o, s = int(off[i]), int(r.size[i])
            al = max(int(r.alignment[i]), 4)
            end = o + max(s, 1)
            if o < 0:
                bad.append(f"row {i}: negative offset")
                continue
            if o % al:
                bad.append(f"row {i}: offset {o} not aligned to {al}")
            if o >= tm:
                continue  # overflowed: only alignment and no-overlap apply
            if end > tm:
                bad.append(f"row {i}: [{o},{end}) crosses tileMemory")
            if r.in_interleaved_mem[i] and o < ils:
                bad.append(f"row {i}: interleaved var below {ils}")
            if (r.executable[i] or r.vertex_code[i]) and end > ils:
                bad.append(f"row {i}: code in interleaved memory")
            if r.lowest_256kb[i] and end > limit_256kb:
                bad.append(f"row {i}: lowest256KB var ends at {end}")
            if no_region_span and o < ils < end:
                bad.append(f"row {i}: spans the region boundary")
        for a in rows:
            for b in rows:
                if a >= b:
                    continue
                ca, cb = int(r.eq_class[a]), int(r.eq_class[b])
                conflict = (r.always_live[a] or r.always_live[b] or ca == cb
                            or cb in inter[ca] or ca in inter[cb])
                oa, ob = int(off[a]), int(off[b])
                ea, eb = oa + max(int(r.size[a]), 1), ob + max(int(r.size[b]), 1)
                if conflict and oa < eb and ob < ea:
                    bad.append(f"rows {a},{b}: conflicting vars overlap")
        for csr, touched, what in ((r.element_constraints, elements, "element"),
                                   (r.region_constraints, regions, "region")):
            for a in rows:
                for b in csr.row(a).tolist():
                    if touched(int(off[a]), int(r.size[a])) & touched(int(off[b]),
                                                                      int(r.size[b])):
                        bad.append(f"rows {a},{b}: {what} constraint broken")
    return bad


def passes_both_checkers(r: Report, off) -> None:
    """Assert that ``off`` passes this module's checker and ``tilemem.check`` (both written
    apart from the packers)."""
    assert violations(r, off) == []
    res = check_allocation(r, off)
    assert res.ok, [v.to_json() for v in res.violations][:3]


def examples(n: int):
    """Hypothesis settings for ``n`` examples of a packer test (no deadline: compiling)."""
    return settings(max_examples=n, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def objective(r: Report, offsets, tile: int) -> tuple[int, int]:
    """(overflowed bytes, highest end address) of one tile, from the columns directly.
    Overflowed bytes are the excess of the highest end past tileMemory (FACTS.md), counted
    over the variables that hold a byte."""
    rows = [i for i in range(r.num_vars) if r.allocated[i] and r.tile[i] == tile]
    off = np.asarray(offsets, np.int64)
    top = max((int(off[i] + r.size[i]) for i in rows), default=0)
    held = max((int(off[i] + r.size[i]) for i in rows if r.size[i] > 0), default=0)
    return max(0, held - r.target.tile_memory), top


@st.composite
def small_reports(draw, max_vars: int = 9, tiles: int = 1, max_classes: int = 4,
                  geometry=None) -> Report:
    """Random small reports on tiny geometries, with every kind of rule."""
    if geometry is None:
        unit = draw(st.sampled_from([16, 32, 64]))
        n_non = draw(st.integers(1, 4))
        n_int = draw(st.integers(0, 3))
        starts = [i * unit for i in range(n_non)] + [n_non * unit + i * 2 * unit
                                                     for i in range(n_int)]
        tm = n_non * unit + n_int * 2 * unit
        target = Target(tiles, tm, n_non * unit, np.array(starts))
    else:
        target = geometry.with_tiles(tiles)
    n = draw(st.integers(1, max_vars))
    k = draw(st.integers(1, max_classes))
    tm = target.tile_memory
    size = draw(st.lists(st.integers(0, max(tm // 3, 8)), min_size=n, max_size=n))
    align = draw(st.lists(st.sampled_from([1, 2, 4, 8, 16, 32]), min_size=n, max_size=n))
    cls = draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n))
    tile = draw(st.lists(st.integers(0, tiles - 1), min_size=n, max_size=n))
    flags = st.lists(st.booleans(), min_size=n, max_size=n)

    def rare():
        return st.lists(st.sampled_from([False] * 4 + [True]), min_size=n, max_size=n)

    inter = [sorted(draw(st.sets(st.integers(0, k - 1), max_size=k))) for _ in range(k)]
    always = draw(rare())
    interleaved = draw(rare())
    code = draw(rare())
    low = draw(rare())
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=4))
    rpairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)),
                           max_size=2))

    def cons(ps):
        out = [[] for _ in range(n)]
        for a, b in ps:
            if a != b and tile[a] == tile[b]:
                out[a].append(b)
        return out

    order = [[i for i in draw(st.permutations(range(n))) if tile[i] == t] for t in range(tiles)]
    del flags
    return Report.from_columns(
        target=target, var_id=list(range(n)), tile=tile, size=size, alignment=align,
        offset=[0] * n, category=["variable"] * n, eq_class=cls, interference=inter,
        always_live=always, in_interleaved_mem=interleaved, executable=code,
        lowest_256kb=low, element_constraints=cons(pairs), region_constraints=cons(rpairs),
        allocation_order=order)


def brute_force(r: Report, tile: int = 0) -> tuple[int, int]:
    """The least (overflowed bytes, highest end) over every allocation of a tiny tile.

    Enumerates each variable's aligned addresses in memory and in the overflow zone up to
    the sum of sizes and alignments past it (an optimal overflow packing never goes higher),
    depth first, keeping only partial assignments the rules allow, pair by pair. A partial
    assignment whose (overflowed bytes, highest end) is already no better than the best
    complete one is not extended: placing more variables never lowers either.
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
    element_partners = {i: set(r.element_constraints.row(i).tolist()) for i in rows}
    region_partners = {i: set(r.region_constraints.row(i).tolist()) for i in rows}

    def pair_rules(i, j):
        """Which rules hold between rows ``i`` (the earlier) and ``j``: (conflict, element
        constraint, region constraint)."""
        ci, cj = int(r.eq_class[i]), int(r.eq_class[j])
        conflict = bool(r.always_live[i] or r.always_live[j] or ci == cj or cj in inter[ci])
        return (conflict, j in element_partners[i] or i in element_partners[j],
                j in region_partners[i] or i in region_partners[j])

    cands = {i: [o for o in range(0, top, align[i]) if legal(i, o)] for i in rows}
    in_elements = {(i, o): touched(i, o, elements) for i in rows for o in cands[i]}
    in_regions = {(i, o): touched(i, o, regions) for i in rows for o in cands[i]}

    def compatible(i, oi, j, oj, rules):
        conflict, element, region = rules
        if conflict and oi < oj + size[j] and oj < oi + size[i]:
            return False
        if element and in_elements[i, oi] & in_elements[j, oj]:
            return False
        if region and in_regions[i, oi] & in_regions[j, oj]:
            return False
        return True

    rules = {(i, j): pair_rules(i, j) for k, i in enumerate(rows) for j in rows[k + 1:]}
    # the rules are pairwise: for each earlier row's offset, the later row's offsets it
    # allows (computed once, where a partial assignment first needs them)
    allowed: dict[tuple[int, int, int], set[int]] = {}

    def allows(i, oi, j):
        key = (i, oi, j)
        if key not in allowed:
            allowed[key] = {oj for oj in cands[j] if compatible(i, oi, j, oj, rules[i, j])}
        return allowed[key]

    sizes = {i: int(r.size[i]) for i in rows}
    best = None
    chosen: list[int] = []

    def extend(k: int, held: int, end: int) -> None:
        # held: the highest end of a variable that holds a byte; end: of any variable
        nonlocal best
        key = (max(0, held - tm), end)   # overflowed bytes: held past tileMemory (FACTS.md)
        if best is not None and key >= best:
            return   # both only grow as variables are added
        if k == len(rows):
            best = key
            return
        i = rows[k]
        ok = set(cands[i])
        for m in range(k):
            ok &= allows(rows[m], chosen[m], i)
            if not ok:
                return
        for o in sorted(ok):
            chosen.append(o)
            e = o + sizes[i]
            extend(k + 1, max(held, e) if sizes[i] > 0 else held, max(end, e))
            chosen.pop()

    extend(0, 0, 0)
    return best
