"""Allocation checker: every rule fires and stays quiet on hand-made cases, the sweep agrees
with an all-pairs oracle written here, generated reports pass, and `tilemem check`'s exit codes."""
from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilemem.check import RULE_NAMES, check_allocation
from tilemem.cli import cli, main
from tilemem.errors import ReportError
from tilemem.generate import generate_report
from tilemem.load import save_report
from tilemem.model import Report
from tilemem.model.target import Target
from tilemem.rules import Rules

# 4 elements of 256 bytes; interleaved from 512; tileMemory 1024
SMALL = Target(num_tiles=2, tile_memory=1024, interleaved_memory_start=512,
               memory_element_offsets=np.array([0, 256, 512, 768]))


def rep(size, offset, *, eq_class=None, interference=None, alignment=None, tile=None,
        target=SMALL, first_id=10, **flags):
    n = len(size)
    return Report.from_columns(
        target=target, var_id=list(range(first_id, first_id + n)), tile=tile or [0] * n, size=size,
        alignment=alignment or [4] * n, offset=offset, category=["variable"] * n,
        eq_class=eq_class or list(range(n)),
        interference=interference if interference is not None else [[] for _ in range(n)],
        **flags)


def fired(r, offsets=None, rules=Rules()):
    res = check_allocation(r, offsets, rules)
    return {k for k, v in res.counts.items() if v}


# ---- each rule: fires / does not fire -----------------------------------------------------------

def test_overlap():
    # classes 0 and 1 interfere (listed one way only), class 2 interferes with nobody
    r = rep([16, 16, 16], [0, 8, 0], interference=[[1], [], []])
    res = check_allocation(r)
    assert res.counts["overlap"] == 1
    v = res.violations[0]
    assert (v.rule, v.tile, v.var_ids, v.addresses) == ("overlap", 0, (10, 11), ((0, 16), (8, 24)))
    assert "interfere" in v.detail and v.names == ("v10", "v11")
    assert fired(r, [0, 16, 0]) == set()              # touching is fine; class 2 may share
    # same class
    assert fired(rep([16, 16], [0, 12], eq_class=[0, 0], interference=[[]])) == {"overlap"}
    # always live conflicts with everything, even a class with no interference
    assert fired(rep([16, 16], [0, 12], always_live=[0, 1])) == {"overlap"}
    assert fired(rep([16, 16], [0, 16], always_live=[1, 1])) == set()
    # zero-size variables touch no byte
    assert fired(rep([16, 0], [0, 8], eq_class=[0, 0], interference=[[]])) == set()
    # other tiles do not conflict
    assert fired(rep([16, 16], [0, 0], always_live=[1, 1], tile=[0, 1])) == set()


def test_alignment():
    assert fired(rep([4], [2], alignment=[1])) == {"alignment"}      # at least 4
    assert fired(rep([4], [8], alignment=[16])) == {"alignment"}
    assert fired(rep([4], [32], alignment=[16])) == set()
    assert fired(rep([4], [1028], alignment=[8])) == {"alignment"}   # also in the overflow zone


def test_interleaved():
    assert fired(rep([32], [496], in_interleaved_mem=[True])) == {"interleaved", "region-span"}
    assert fired(rep([16], [480], in_interleaved_mem=[True])) == {"interleaved"}
    assert fired(rep([16], [512], in_interleaved_mem=[True])) == set()
    assert fired(rep([16], [2048], in_interleaved_mem=[True])) == set()   # overflow zone


def test_code():
    assert fired(rep([16], [500], executable=[True])) == {"code", "region-span"}
    assert fired(rep([16], [600], vertex_code=[True])) == {"code"}
    assert fired(rep([16], [496], executable=[True])) == set()      # ends exactly at 512
    assert fired(rep([0], [512], vertex_code=[True])) == set()


def test_region_span_is_inferred_and_switchable():
    r = rep([32], [496])
    res = check_allocation(r)
    assert not res.ok and res.violations[0].inferred and res.counts["region-span"] == 1
    off = check_allocation(r, rules=Rules(no_region_span=False))
    assert off.ok and "region-span" not in off.counts
    assert off.waived_counts == {"region-span": 1} and off.waived[0].rule == "region-span"
    assert fired(rep([32], [480])) == set()


def test_element():
    pair = dict(element_constraints=[[11], []])        # var 10 vs var 11
    assert fired(rep([16, 16], [0, 64], **pair)) == {"element"}         # both element 0
    assert fired(rep([16, 16], [0, 256], **pair)) == set()
    # a variable spanning elements 0 and 1 touches both
    assert fired(rep([32, 16], [240, 300], **pair)) == {"element"}
    assert fired(rep([32, 16], [240, 512], **pair)) == set()
    # zero-size or overflowed variables touch no element
    assert fired(rep([0, 16], [16, 64], **pair)) == set()
    assert fired(rep([16, 16], [1024, 64], **pair)) == set()


def test_region():
    pair = dict(region_constraints=[[], [10]])
    assert fired(rep([16, 16], [0, 300], **pair)) == {"region"}
    assert fired(rep([16, 16], [0, 600], **pair)) == set()
    assert fired(rep([16, 16], [600, 900], **pair)) == {"region"}
    # a variable spanning both regions meets any constrained partner
    assert fired(rep([32, 16], [496, 700], **pair)) == {"region", "region-span"}
    assert fired(rep([32, 16], [496, 700], **pair),
                 rules=Rules(no_region_span=False)) == {"region"}


def test_lowest_256kb():
    rules = Rules(lowest_256kb_limit=512)
    assert fired(rep([16], [504], lowest_256kb=[True]), rules=rules) == {"lowest256KB",
                                                                            "region-span"}
    assert fired(rep([16], [600], lowest_256kb=[True]), rules=rules) == {"lowest256KB"}
    assert fired(rep([16], [496], lowest_256kb=[True]), rules=rules) == set()
    assert fired(rep([16], [600], lowest_256kb=[False]), rules=rules) == set()
    # default limit 262144 on a Mk2-sized tile
    big = Target(1, 638976, 212992, np.array([0, 212992]))
    assert fired(rep([16], [262136], lowest_256kb=[True], target=big)) == {"lowest256KB"}
    assert fired(rep([16], [262128], lowest_256kb=[True], target=big)) == set()


def test_capacity_and_overflow():
    r = rep([32], [1008])                                # straddles tileMemory 1024
    res = check_allocation(r)
    assert fired(r) == {"capacity"} and res.overflow_bytes.tolist() == [16, 0]
    # wholly in the overflow zone: reported, not a violation; the excess of the highest end
    r = rep([64, 64, 32], [1024, 1056, 1024], eq_class=[0, 1, 2], interference=[[], [], []],
            tile=[0, 0, 1])
    res = check_allocation(r)
    assert res.ok and res.overflow_bytes.tolist() == [96, 32]
    assert res.overflowed_tiles().tolist() == [0, 1]
    # ... but conflicting variables may not overlap there either
    r = rep([64, 64], [1024, 1056], always_live=[1, 0])
    assert fired(r) == {"overlap"}
    assert check_allocation(rep([16], [0])).overflow_bytes.tolist() == [0, 0]
    # gaps in the zone count (the excess past tileMemory, not the bytes covered there)
    r = rep([16, 16], [1024, 1096], eq_class=[0, 0], interference=[[]])
    assert check_allocation(r).overflow_bytes.tolist() == [88, 0]


def test_limit_counts_everything():
    n = 30
    r = rep([16] * n, [2] * n)
    res = check_allocation(r, limit=5)
    assert res.counts["alignment"] == n and len(res.violations) == 5
    assert res.counts["overlap"] == 0                    # all different, non-interfering classes
    r = rep([16] * n, [0] * n, always_live=[1] * n)
    res = check_allocation(r, limit=3)
    assert res.counts["overlap"] == n * (n - 1) // 2 and len(res.violations) == 3


def test_bad_offsets():
    r = rep([16, 16], [0, 16])
    with pytest.raises(ReportError, match="2 variables"):
        check_allocation(r, [0])
    with pytest.raises(ReportError, match="negative"):
        check_allocation(r, [0, -4])
    # unallocated variables are ignored
    r = rep([16, 16], [0, 0], always_live=[1, 1], allocated=[True, False])
    assert check_allocation(r).ok


# ---- the sweep against an all-pairs oracle ------------------------------------------------------

def oracle(r: Report, rules=Rules()):
    """Violation counts per rule from the definitions, all pairs, plain Python."""
    t = r.target
    tm, ils = t.tile_memory, t.interleaved_memory_start
    elems = t.memory_element_offsets.tolist() + [tm]
    listed = {(a, b) for a in range(r.num_classes) for b in r.interference.row(a).tolist()}
    counts = dict.fromkeys(RULE_NAMES, 0)
    rows = [i for i in range(r.num_vars) if r.allocated[i]]
    s = {i: int(r.offset[i]) for i in rows}
    e = {i: int(r.offset[i] + r.size[i]) for i in rows}
    mem = {i: s[i] < tm for i in rows}

    def touched(i, bounds):
        if not mem[i] or e[i] == s[i]:
            return set()
        return {k for k in range(len(bounds) - 1)
                if s[i] < bounds[k + 1] and bounds[k] < min(e[i], tm)}

    for i in rows:
        counts["alignment"] += s[i] % max(int(r.alignment[i]), 4) != 0
        if mem[i]:
            counts["capacity"] += e[i] > tm
            counts["interleaved"] += bool(r.in_interleaved_mem[i]) and s[i] < ils
            counts["code"] += bool(r.executable[i] or r.vertex_code[i]) and e[i] > ils
            counts["region-span"] += s[i] < ils < e[i]
            counts["lowest256KB"] += bool(r.lowest_256kb[i]) and e[i] > rules.lowest_256kb_limit
    for i, j in itertools.combinations(rows, 2):
        if r.tile[i] != r.tile[j]:
            continue
        ci, cj = int(r.eq_class[i]), int(r.eq_class[j])
        conflict = (r.always_live[i] or r.always_live[j] or ci == cj or (ci, cj) in listed
                    or (cj, ci) in listed)
        counts["overlap"] += bool(conflict and max(s[i], s[j]) < min(e[i], e[j]))
    for rule, csr, bounds in (("element", r.element_constraints, elems),
                              ("region", r.region_constraints, [0, ils, tm])):
        pairs = {(min(a, b), max(a, b)) for a in rows for b in csr.row(a).tolist() if a != b}
        counts[rule] = sum(bool(touched(a, bounds) & touched(b, bounds)) for a, b in pairs)
    return counts


@st.composite
def random_reports(draw):
    n = draw(st.integers(1, 14))
    k = draw(st.integers(1, 5))
    lists = [draw(st.lists(st.integers(0, k - 1), max_size=3)) for _ in range(k)]
    flags = {f: draw(st.lists(st.booleans(), min_size=n, max_size=n))
             for f in ("always_live", "in_interleaved_mem", "executable", "lowest_256kb")}
    ec = [draw(st.lists(st.integers(0, n - 1), max_size=2)) for _ in range(n)]
    rc = [draw(st.lists(st.integers(0, n - 1), max_size=1)) for _ in range(n)]
    tile = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    # constraints only between variables of one tile (the loader guarantees it)
    ec = [[10 + j for j in lst if tile[j] == tile[i]] for i, lst in enumerate(ec)]
    rc = [[10 + j for j in lst if tile[j] == tile[i]] for i, lst in enumerate(rc)]
    return rep(draw(st.lists(st.integers(0, 300), min_size=n, max_size=n)),
               [4 * x for x in draw(st.lists(st.integers(0, 300), min_size=n, max_size=n))],
               eq_class=draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n)),
               interference=lists, tile=tile,
               alignment=draw(st.lists(st.sampled_from([1, 4, 8, 16]), min_size=n, max_size=n)),
               element_constraints=ec, region_constraints=rc, **flags)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_reports())
def test_counts_equal_all_pairs_oracle(r):
    rules = Rules(lowest_256kb_limit=640)
    res = check_allocation(r, rules=rules)
    assert res.counts == oracle(r, rules)
    assert len(res.violations) == res.num_violations
    # every violation counted once, on the tile of its variables
    assert int(res.tile_violations.sum()) == res.num_violations
    on_tile = np.bincount([v.tile for v in res.violations], minlength=r.num_tiles)
    assert res.tile_violations.tolist() == on_tile.tolist()
    # overflow: how far the highest byte used on the tile passes tileMemory (1024)
    highest = [1024] * r.num_tiles
    for i in range(r.num_vars):
        if r.size[i]:
            highest[r.tile[i]] = max(highest[r.tile[i]], int(r.offset[i] + r.size[i]))
    assert res.overflow_bytes.tolist() == [h - 1024 for h in highest]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_reports(), st.integers(0, 3))
def test_the_sparse_sweep_finds_what_the_dense_one_does(r, limit):
    """Past ``DENSE_CLASSES`` classes the sweep searches each class's listed pairs instead of
    the dense matrix: the same counts, per-tile counts and violations (pairs, reasons, the
    first ``limit`` of them), and the oracle's counts."""
    import importlib

    check = importlib.import_module("tilemem.check")   # the module (tilemem.check is the API's)
    dense = check_allocation(r, limit=limit)
    saved = check.DENSE_CLASSES
    check.DENSE_CLASSES = 0
    try:
        sparse = check_allocation(r, limit=limit)
    finally:
        check.DENSE_CLASSES = saved
    assert sparse.counts == dense.counts == oracle(r)
    assert sparse.tile_violations.tolist() == dense.tile_violations.tolist()
    assert [str(v) for v in sparse.violations] == [str(v) for v in dense.violations]


def test_overlap_reasons_are_told_per_pair():
    """The first violations of the overlap sweep, each pair with its reason: an alwaysLive
    variable over two others, two of one class, two of interfering classes; a pair of
    non-interfering classes sharing bytes is allowed."""
    #  var (id - 10):   0   1   2   3   4    5    6
    r = rep([64, 16, 16, 16, 16, 16, 16], [0, 0, 32, 96, 96, 128, 128],
            eq_class=[0, 1, 1, 2, 3, 2, 4], interference=[[], [], [3], [2], []],
            always_live=[1, 0, 0, 0, 0, 0, 0])
    res = check_allocation(r)
    found = sorted((v.var_ids, v.detail.split(",")[0]) for v in res.violations)
    assert found == [((10, 11), "var 10 is alwaysLive"), ((10, 12), "var 10 is alwaysLive"),
                     ((13, 14), "classes 2 and 3 interfere")]
    assert res.tile_violations.tolist()[0] == 3
    r2 = rep([16, 16], [0, 8], eq_class=[1, 1], interference=[[], []])
    assert [v.detail.split(",")[0] for v in check_allocation(r2).violations] == \
        ["same equivalence class 1"]


# ---- generated reports are valid; other allocations; the command ---------------------------------

@pytest.fixture(scope="module")
def generated():
    return generate_report("mk1", tiles=12, steps=120, seed=5)


@pytest.mark.parametrize("preset,seed", [("mk1", 1), ("mk2", 2)])
def test_generated_reports_pass(preset, seed):
    r = generate_report(preset, tiles=8, steps=100, seed=seed, pressure=1.3)
    res = check_allocation(r)
    assert res.ok, [str(v) for v in res.violations[:5]]
    assert res.overflow_bytes.sum() > 0                  # pressure 1.3 overflows some tiles


def test_breaking_a_generated_allocation(generated):
    r = generated
    off = r.offset.copy()
    rows = r.tile_rows(4)
    a, b = rows[~r.always_live[rows]][:2]
    off[b] = off[a]                                    # same tile: a copy of a's place
    res = check_allocation(r, off)
    assert not res.ok
    assert any(v.rule in ("overlap", "alignment") and r.var_id[b] in v.var_ids
               for v in res.violations)


def test_check_command(tmp_path, generated):
    p = tmp_path / "g.json"
    save_report(generated, p)
    run = CliRunner().invoke(cli, ["check", str(p)])
    assert run.exit_code == 0 and "valid allocation" in run.output, run.output
    off = generated.offset.copy()
    off[generated.tile_rows(2)[0]] += 2
    bad = tmp_path / "bad.json"
    save_report(generated.with_offsets(off), bad)
    run = CliRunner().invoke(cli, ["check", str(p), "--allocation", str(bad), "--json"])
    assert run.exit_code == 1
    d = json.loads(run.output)
    assert d["ok"] is False and d["counts"]["alignment"] >= 1
    v = next(x for x in d["violations"] if x["rule"] == "alignment")
    assert set(v) >= {"rule", "tile", "vars", "names", "addresses", "message"}
    with pytest.raises(SystemExit) as e:              # exit status 1 from the real entry point
        main(["check", str(p), "--allocation", str(bad)])
    assert e.value.code == 1
    other = tmp_path / "other.json"
    save_report(rep([16], [0]), other)
    assert main(["check", str(p), "--allocation", str(other)]) == 2
    assert main(["check", str(tmp_path / "missing.json")]) == 2
    # the inferred rule can be waived
    span = tmp_path / "span.json"
    save_report(rep([32], [496]), span)
    assert CliRunner().invoke(cli, ["check", str(span)]).exit_code == 1
    run = CliRunner().invoke(cli, ["check", str(span), "--no-region-span-rule"])
    assert run.exit_code == 0 and "waived" in run.output


# ---- one definition of overflowed bytes: alloc and check agree ---------------------------------

@pytest.fixture(scope="module")
def tight_allocation(tmp_path_factory):
    """A tight report (pressure 1.5: six of eight tiles cannot fit) re-packed by `tilemem alloc
    -o`; returns (report path, allocation path, alloc's JSON)."""
    d = tmp_path_factory.mktemp("tight")
    src, out = d / "tight.json", d / "alloc.json"
    save_report(generate_report("mk1", tiles=8, steps=100, seed=1, pressure=1.5), src)
    run = CliRunner().invoke(cli, ["alloc", str(src), "--method", "heuristic", "--workers", "1",
                                   "-o", str(out), "--json"])
    assert run.exit_code == 0, run.output
    return src, out, json.loads(run.output)


def _check_overflow(src, out) -> dict[int, int]:
    run = CliRunner().invoke(cli, ["check", str(src), "--allocation", str(out), "--json"])
    assert run.exit_code == 0, run.output
    return {t["tile"]: t["bytes"] for t in json.loads(run.output)["overflow"]["tiles"]}


def test_check_overflow_is_the_excess_of_the_highest_end(tight_allocation):
    from tilemem.load import load_report

    src, out, _ = tight_allocation
    r = load_report(out)
    highest = {}
    for i in np.flatnonzero(r.allocated & (r.size > 0)).tolist():
        t = int(r.tile[i])
        highest[t] = max(highest.get(t, 0), int(r.offset[i] + r.size[i]))
    want = {t: h - r.target.tile_memory for t, h in highest.items()
            if h > r.target.tile_memory}
    assert len(want) >= 3                                # the test needs overflowing tiles
    assert _check_overflow(src, out) == want


def test_alloc_and_check_report_the_same_overflow(tight_allocation):
    src, out, doc = tight_allocation
    from_alloc = {t["tile"]: t["overflowBytes"] for t in doc["tiles"] if t["overflowBytes"]}
    assert from_alloc == _check_overflow(src, out)
    assert doc["summary"]["overflowBytes"] == sum(from_alloc.values())
