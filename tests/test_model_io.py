"""The model, the JSON and capnp readers/writers: hand-made cases and round trips."""
import json
from pathlib import Path

import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilemem.figures.summary import info
from tilemem.load import capnpio, load_report, save_report
from tilemem.model import CATEGORIES, Report
from tilemem.model.target import MK1, MK2, Target

EXAMPLES = Path(__file__).parents[1] / "examples"
SEED = EXAMPLES / "seed.json"


def test_seed_fields_as_written():
    r = load_report(SEED)
    row = int(r.rows_of_vars([0])[0])
    assert (r.tile[row], r.size[row], r.alignment[row], r.offset[row]) == (0, 16, 8, 352)
    assert r.name(row) == "v1#0" and r.category_name(row) == "variable"
    assert r.eq_class[row] == 21 and not r.always_live[row]
    assert r.num_classes == 36 and r.num_tiles == 2
    code = int(r.rows_of_vars([9])[0])
    assert r.executable[code] and r.vertex_code[code] and r.always_live[code]


def test_interference_is_symmetric_closure_without_self_entries():
    r = load_report(SEED)
    assert 0 not in r.interference.row(0).tolist()          # doc's self entry dropped
    assert 1 in r.interference.row(13).tolist()             # 1 -> 13 only in the doc
    assert 13 in r.interference.row(1).tolist()
    assert 0 in r.interference.row(31).tolist() and 1 not in r.interference.row(31).tolist()
    # the relation is symmetric: (a, b) present iff (b, a) present
    a = r.interference.row_ids()
    b = r.interference.indices
    fwd = set(zip(a.tolist(), b.tolist()))
    assert fwd == {(y, x) for x, y in fwd}


def test_allocation_order_and_tile_views():
    r = load_report(SEED)
    order0 = r.var_id[r.allocation_order.row(0)].tolist()
    assert order0 == [2517, 9, 6, 1301, 1242, 6257, 6258, 0]
    assert sorted(r.var_id[r.tile_rows(1)].tolist()) == sorted(
        [2519, 11, 1270, 8, 1303, 1271, 1272, 6253, 6254])
    ec = r.element_constraints
    row = int(r.rows_of_vars([1242])[0])
    assert r.var_id[ec.row(row)].tolist() == [6257]


def test_target_geometry_by_hand():
    t = MK1
    assert t.element_of(0) == 0 and t.element_of(16383) == 0 and t.element_of(16384) == 1
    assert t.element_of(262143) == 11  # the last element runs to tileMemory
    assert (t.element_of(131000), t.element_of(131100 - 1)) == (7, 8)   # [131000, 131100)
    assert t.interleaved_memory_start == 131072 and t.tile_memory == 262144
    assert MK2.tile_memory == 638976 and MK2.num_tiles == 1472
    assert MK2.element_ends[-1] == 638976 and MK2.interleaved_memory_start <= 212992


def test_unknown_category_is_kept():
    r = Report.from_columns(var_id=[0, 1], tile=[0, 0], size=[4, 4], alignment=[4, 4],
                            offset=[0, 4], category=["stack", "brandNewThing"],
                            eq_class=[0, 0], interference=[[]])
    assert r.categories[:len(CATEGORIES)] == CATEGORIES
    assert r.category_name(1) == "brandNewThing"


def roundtrip_json_capnp_json(r: Report, tmp_path) -> tuple[bytes, bytes]:
    save_report(r, tmp_path / "a.json")
    a = (tmp_path / "a.json").read_bytes()
    save_report(load_report(tmp_path / "a.json"), tmp_path / "b.capnp")
    save_report(load_report(tmp_path / "b.capnp"), tmp_path / "c.json")
    return a, (tmp_path / "c.json").read_bytes()


#: the example reports (examples/ also holds ipu_config.json files, which are not reports)
REPORTS = sorted(p for p in EXAMPLES.glob("*.json") if not p.name.startswith("ipu_config"))


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.name)
def test_examples_roundtrip_lossless(path, tmp_path):
    r = load_report(path)
    save_report(r, tmp_path / "x.capnp")
    r2 = load_report(tmp_path / "x.capnp")
    assert r2 == r
    a, c = roundtrip_json_capnp_json(r, tmp_path)
    assert a == c
    # the JSON we write keeps the doc's shape: same keys as the input's vars
    src = json.loads(path.read_text())
    out = json.loads(a)
    assert [v["var"] for v in out["vars"]] == [v["var"] for v in src["vars"]]
    assert set(out["vars"][0]["info"]) >= {"allocated", "tile", "name", "sizeBytes",
                                           "alignment", "offset", "category", "isConstant",
                                           "alwaysLive", "executable", "vertexCode",
                                           "lowest256KB", "equivalenceClass", "inInterleavedMem"}
    assert out["allocationOrderByTile"] == src["allocationOrderByTile"]


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.capnp")), ids=lambda p: p.name)
def test_capnp_examples_match_their_json(path):
    twin = path.with_suffix(".json")
    if not twin.exists():
        pytest.skip(f"{path.name} has no JSON twin")
    assert load_report(path) == load_report(twin)


def test_capnp_columns_in_chunks(tmp_path, monkeypatch):
    """Columns longer than one chunk are split on write and joined on read."""
    monkeypatch.setattr(capnpio, "CHUNK_BYTES", 24)
    r = load_report(SEED)
    save_report(r, tmp_path / "s.capnp")
    msg = capnpio.schema().Report.from_bytes((tmp_path / "s.capnp").read_bytes()).__enter__()
    assert len(msg.sizeBytes.chunks) > 1
    assert load_report(tmp_path / "s.capnp") == r


def test_capnp_columns_are_views_of_the_file(tmp_path):
    r = load_report(SEED)
    save_report(r, tmp_path / "s.capnp")
    r2 = load_report(tmp_path / "s.capnp")
    assert not r2.size.flags.owndata and not r2.size.flags.writeable


def test_info_on_tile_over_capacity():
    r = Report.from_columns(target=MK1.with_tiles(3), var_id=[0, 1, 2], tile=[0, 2, 2],
                            size=[16, 200000, 100000], alignment=[4, 4, 4],
                            offset=[0, 0, 200000], category=["variable", "stack", "variable"],
                            eq_class=[0, 0, 0], interference=[[]])
    d = msgspec.to_builtins(info(r))      # as in the JSON of `tilemem info`
    assert d["tilesOverMemory"] == 1
    assert d["topTiles"][0] == {"tile": 2, "bytes": 300000, "highestEnd": 300000,
                                "outOfMemory": True, "sumOfSizes": 300000}
    assert d["bytesByCategory"] == {"stack": 200000, "variable": 100016}


# ---- hypothesis: random reports survive JSON -> capnp -> JSON ------------------------------

@st.composite
def reports(draw):
    num_tiles = draw(st.integers(1, 4))
    n = draw(st.integers(0, 25))
    num_classes = draw(st.integers(1, 6))
    ids = draw(st.lists(st.integers(0, 10_000), min_size=n, max_size=n, unique=True))
    tile = draw(st.lists(st.integers(0, num_tiles - 1), min_size=n, max_size=n))
    allocated = draw(st.lists(st.booleans().map(lambda b: b or True) if n else st.just(True),
                              min_size=n, max_size=n))
    allocated = [a if draw(st.integers(0, 9)) else False for a in allocated]
    cats = st.sampled_from(list(CATEGORIES[:5]) + ["zzNew", "é-cat"])
    inter = [draw(st.lists(st.integers(0, num_classes - 1), max_size=4))
             for _ in range(num_classes)]
    by_tile = {}
    for i in range(n):
        if allocated[i]:
            by_tile.setdefault(tile[i], []).append(ids[i])
    ec = []
    for i in range(n):
        same = by_tile.get(tile[i], []) if allocated[i] else []
        ec.append(draw(st.lists(st.sampled_from(same), max_size=2)) if same else [])
    order = [draw(st.permutations(by_tile.get(t, []))) for t in range(num_tiles)]
    steps = None
    if draw(st.booleans()):
        starts = draw(st.lists(st.integers(0, 50), min_size=num_classes, max_size=num_classes))
        steps = [[s, s + draw(st.integers(0, 9))] for s in starts]
    flags = {k: draw(st.lists(st.booleans(), min_size=n, max_size=n))
             for k in ("is_constant", "always_live", "executable", "vertex_code",
                       "lowest_256kb", "in_interleaved_mem")}
    r = Report.from_columns(
        target=Target(num_tiles, 4096, draw(st.sampled_from([0, 1024, 4096])), [0, 1024, 2048]),
        var_id=ids, tile=tile, allocated=allocated,
        size=draw(st.lists(st.integers(0, 5000), min_size=n, max_size=n)),
        alignment=draw(st.lists(st.sampled_from([1, 2, 4, 8, 16, 64]), min_size=n, max_size=n)),
        offset=draw(st.lists(st.integers(0, 5000), min_size=n, max_size=n)),
        category=[draw(cats) for _ in range(n)] if n else [],
        eq_class=draw(st.lists(st.integers(0, num_classes - 1), min_size=n, max_size=n)),
        interference=inter,
        names=draw(st.lists(st.text(max_size=8), min_size=n, max_size=n)),
        element_constraints=ec, region_constraints=[list(reversed(x)) for x in ec],
        allocation_order=order, class_steps=steps, **flags)
    # unallocated rows carry no fields in the file: normalise them as the reader does
    a = r.allocated
    cols = dict(tile=np.where(a, r.tile, -1), size=np.where(a, r.size, -1),
                alignment=np.where(a, r.alignment, -1), offset=np.where(a, r.offset, -1),
                eq_class=np.where(a, r.eq_class, -1))
    return r, cols


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(reports())
def test_random_reports_roundtrip(tmp_path, rc):
    r, expected_cols = rc
    save_report(r, tmp_path / "a.json")
    r1 = load_report(tmp_path / "a.json")
    save_report(r1, tmp_path / "b.capnp")
    r2 = load_report(tmp_path / "b.capnp")
    save_report(r2, tmp_path / "c.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "c.json").read_bytes()
    assert r2 == r1
    for k, v in expected_cols.items():
        assert np.array_equal(getattr(r1, k), v), k
    a = r.allocated
    assert r1.names([i for i in range(r.num_vars) if a[i]]) == \
        r.names([i for i in range(r.num_vars) if a[i]])
    assert r1.interference == r.interference
    assert r1.allocation_order == r.allocation_order
    assert r1.element_constraints == r.element_constraints
    if r.class_steps is None:
        assert r1.class_steps is None
    else:
        assert np.array_equal(r1.class_steps, r.class_steps)


def test_saved_files_get_ordinary_permissions(tmp_path):
    import os
    import stat

    save_report(load_report(SEED), tmp_path / "x.json")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(os.stat(tmp_path / "x.json").st_mode) == 0o666 & ~mask


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=40))))
def test_symmetric_closure_against_brute_force(case):
    """Each row: every other end of a pair that names it, either way, sorted, once."""
    from tilemem.model import symmetric_closure

    n, pairs = case
    src = np.array([a for a, _ in pairs], np.int64)
    dst = np.array([b for _, b in pairs], np.int64)
    want = [sorted({b for a, b in pairs if a == i != b} | {a for a, b in pairs if b == i != a})
            for i in range(n)]
    assert symmetric_closure(n, src, dst).to_lists() == want
