"""The report generator: valid allocations, realism properties, determinism, pressure, CLI.

Validity is judged by a checker written for these tests (generate_checker.py) and by the
project's checker (tilemem.check), which share no code with the generator or the packers.
"""
import functools
import re

import numpy as np
import pytest
from click.testing import CliRunner

from generate_checker import tiles_over_memory, violations
from tilemem.check import check_allocation
from tilemem.cli import cli
from tilemem.load import load_report, save_report
from tilemem.generate import generate_report
from tilemem.generate.tiledata import SUMMARY_ALWAYS_LIVE
from tilemem.load.validate import validate_report

TILES, STEPS = 32, 120


@functools.lru_cache(maxsize=None)
def gen(preset="mk1", pressure=1.0, seed=1, tiles=TILES, steps=STEPS):
    return generate_report(preset, tiles=tiles, steps=steps, pressure=pressure, seed=seed)


def category_bytes(r, rows=None):
    rows = np.flatnonzero(r.allocated) if rows is None else rows
    sums = np.bincount(r.category[rows], weights=r.size[rows], minlength=len(r.categories))
    return {r.categories[i]: float(s) for i, s in enumerate(sums) if s}


# ---- validity -----------------------------------------------------------------------------
@pytest.mark.parametrize("preset,pressure", [("mk1", 1.0), ("mk2", 1.0), ("mk1", 1.6),
                                             ("mk2", 0.5)])
def test_offsets_are_a_valid_allocation(preset, pressure):
    r = gen(preset, pressure)
    validate_report(r)
    assert violations(r) == []
    res = check_allocation(r)
    assert res.ok, [str(v) for v in res.violations[:5]]


def test_overflowed_tiles_spill_wholly_past_tile_memory():
    r = gen("mk1", 1.6)
    tm = r.target.tile_memory
    over = r.offset + r.size > tm
    assert over.any()
    assert np.all(r.offset[over] >= tm)  # never straddling (the checker checks it too)


def test_allocation_order_lists_every_variable_once_and_first_fit_replays_it():
    from tilemem.pack.firstfit import first_fit
    from tilemem.pack.problem import TileProblem

    r = gen("mk2")
    order = r.allocation_order
    assert order.num_rows == r.num_tiles
    assert np.array_equal(np.sort(order.indices), np.arange(r.num_vars))
    assert np.all(r.tile[order.indices] == order.row_ids())
    for tile in (0, 7):
        p = TileProblem.from_report(r, tile)
        local = np.searchsorted(p.rows, order.row(tile))
        assert np.array_equal(first_fit(p, local), r.offset[p.rows])
    # Poplar-like order: code first, then the other always-live data
    rows = order.row(3)
    code = (r.executable | r.vertex_code)[rows]
    assert code[: code.sum()].all()
    assert r.always_live[rows][: r.always_live[rows].sum()].all()


def test_round_trips_through_json_and_capnp(tmp_path):
    r = gen("mk1")
    for ext in (".json", ".capnp"):
        p = tmp_path / f"g{ext}"
        save_report(r, p)
        assert load_report(p) == r


# ---- realism ------------------------------------------------------------------------------
def test_categories_of_the_graph_profile_are_present():
    r = gen("mk1")
    present = set(category_bytes(r))
    expected = set(SUMMARY_ALWAYS_LIVE) | {"variable", "message", "rearrangement", "controlId",
                                           "hostMessage", "outputEdge"}
    assert expected - {"vectorListDescriptor"} <= present


def test_always_live_bytes_in_the_profile_summary_proportions():
    r = gen("mk2", tiles=64)
    al = category_bytes(r, np.flatnonzero(r.always_live))
    total = sum(al.values())
    # 002: stack 64 % and vertex code 18 % of the always-live bytes (57 % / 16 % of all)
    assert 0.55 <= al["stack"] / total <= 0.72
    assert 0.12 <= al["vertexCode"] / total <= 0.24
    assert al["controlCode"] > al["internalExchangeCode"] > al["vertexInstanceState"]
    # and they are a small part of a full model's memory
    assert total < 0.15 * r.size.sum()


def test_code_flags_and_regions():
    r = gen("mk1")
    names = np.array(r.categories)[r.category]
    code = np.isin(names, ["controlCode", "vertexCode", "internalExchangeCode",
                           "hostExchangeCode"])
    assert np.array_equal(r.executable, code)
    assert np.array_equal(r.vertex_code, names == "vertexCode")
    assert np.all(r.always_live[code])
    assert np.all(r.is_constant == (names == "constant"))
    assert not r.lowest_256kb.any()  # 004: "Not used. Always false."


def test_heavier_control_on_tile_zero():
    r = gen("mk1")
    names = np.array(r.categories)[r.category]
    cc = np.bincount(r.tile[names == "controlCode"], r.size[names == "controlCode"],
                     minlength=r.num_tiles)
    assert cc[0] > 2 * np.median(cc)


def test_alignments_and_interleaved_variables():
    r = gen("mk1")
    assert {4, 8, 16} <= set(np.unique(r.alignment).tolist())
    il = r.in_interleaved_mem
    assert 0.02 < il.mean() < 0.5
    assert np.all(r.alignment[il] == 16)
    assert not (il & r.always_live).any()


def test_element_constraints_join_fields_of_one_vertex_on_one_tile():
    r = gen("mk1")
    ec = r.element_constraints
    assert ec.nnz > 0.02 * r.num_vars
    src, dst = ec.row_ids(), ec.indices
    assert np.all(r.tile[src] == r.tile[dst])
    assert not np.any(src == dst)
    pairs = set(zip(src.tolist(), dst.tolist()))
    assert all((d, s) in pairs for s, d in pairs)           # listed both ways
    # the two fields belong to one layer's computation (same layer prefix) or the loss
    layer = re.compile(r"^(layer\d+|loss|input)")
    same = [layer.match(r.name(s)).group(1) == layer.match(r.name(d)).group(1)
            or "loss" in r.name(s) + r.name(d) for s, d in list(pairs)[:200]]
    assert np.mean(same) > 0.5
    rc = r.region_constraints
    assert 0 < rc.nnz < ec.nnz


def test_names_follow_poplar_with_the_tile_suffix():
    r = gen("mk1")
    for row in np.linspace(0, r.num_vars - 1, 300).astype(int).tolist():
        name = r.name(row)
        base, _, tile = name.rpartition("#")
        assert base and tile == str(r.tile[row]), name
    assert any(re.fullmatch(r"layer\d+/fwd/.+#\d+", r.name(i)) for i in range(r.num_vars))
    assert any(r.name(i).startswith("layer") and "/wu/weightsGrad#" in r.name(i)
               for i in range(r.num_vars))


def tensor_classes(r):
    """base name -> set of classes of its parts."""
    out = {}
    for row in range(r.num_vars):
        if not r.always_live[row]:
            out.setdefault(r.name(row).rpartition("#")[0], set()).add(int(r.eq_class[row]))
    return out


def test_parts_of_a_tensor_share_its_lifetime_class():
    r = gen("mk1")
    assert all(len(c) == 1 for c in tensor_classes(r).values())


def test_class_steps_are_hulls_and_interference_is_not_interval_overlap():
    r = gen("mk1")
    s = r.class_steps
    assert s.shape == (r.num_classes, 2) and np.all(s[:, 1] > s[:, 0])
    src, dst = r.interference.row_ids(), r.interference.indices
    # interfering classes always overlap in steps ...
    assert np.all(np.maximum(s[src, 0], s[dst, 0]) < np.minimum(s[src, 1], s[dst, 1]))
    # ... but some overlapping classes do not interfere: a weight gradient is live around the
    # If/Else and in the else-branch (the update), not in the then-branch's temporaries
    cls = tensor_classes(r)
    grad = next(iter(cls[next(k for k in cls if k.endswith("/wu/weightsGrad"))]))
    then = next(iter(cls["lossScaling/then/gradHistogram"]))
    assert max(s[grad, 0], s[then, 0]) < min(s[grad, 1], s[then, 1])
    assert then not in r.interference.row(grad).tolist()
    # a non-interval graph: weight gradients (pairwise interfering) + a then-temporary
    import networkx as nx

    g = nx.Graph()
    g.add_edges_from(zip(src.tolist(), dst.tolist()))
    n_overlap = sum(1 for a in range(r.num_classes) for b in range(a + 1, r.num_classes)
                    if max(s[a, 0], s[b, 0]) < min(s[a, 1], s[b, 1]))
    assert g.number_of_edges() < n_overlap


def test_repeat_loops_keep_values_live_for_the_whole_body():
    r = gen("mk1")
    cls = tensor_classes(r)
    s = r.class_steps
    state = next(k for k in cls if k.endswith("/fwd/state"))          # recurrent state
    cell_tmp = state.rsplit("/", 1)[0] + "/cell/partials"
    st, tmp = s[next(iter(cls[state]))], s[next(iter(cls[cell_tmp]))]
    assert st[0] < tmp[0] and st[1] > tmp[1]        # live before, during and after the cell
    # the loss scale is defined before the training loop and lives to the loop's end
    ls = s[next(iter(cls["lossScaling/lossScale"]))]
    loss_out = s[next(iter(cls["loss/value"]))]
    assert ls[0] == 0 and ls[1] >= loss_out[1] - 1


def test_exchange_buffers_are_short_lived():
    r = gen("mk1")
    cls = tensor_classes(r)
    s = r.class_steps
    msg = [s[c].tolist() for k, cs in cls.items() if "<message:anon>" in k for c in cs]
    assert len(msg) > 10
    assert np.median([b - a for a, b in msg]) <= 2


# ---- pressure, determinism ----------------------------------------------------------------
def test_pressure_decides_how_many_tiles_are_out_of_memory():
    low, mid, high = (len(tiles_over_memory(gen("mk1", p))) for p in (0.5, 1.0, 1.6))
    assert low == 0
    assert 1 <= mid <= 0.35 * TILES        # default: most fit, a few over
    assert high > 0.5 * TILES
    assert len(tiles_over_memory(gen("mk2", 0.5))) == 0
    assert len(tiles_over_memory(gen("mk2", 1.6))) > 0.5 * TILES


def test_deterministic_for_a_seed():
    a = generate_report("mk1", tiles=8, steps=60, seed=3)
    b = generate_report("mk1", tiles=8, steps=60, seed=3)
    c = generate_report("mk1", tiles=8, steps=60, seed=4)
    assert a == b
    assert a != c


def test_tiles_and_steps_scale_the_report():
    small = gen("mk1", tiles=8, steps=60)
    assert small.num_tiles == 8 and small.tiles_in_use().tolist() == list(range(8))
    assert gen("mk1").num_vars > 2 * small.num_vars
    assert int(small.class_steps[:, 1].max()) < int(gen("mk1").class_steps[:, 1].max())


def test_bad_arguments():
    with pytest.raises(ValueError, match="preset"):
        generate_report("mk3", tiles=4)
    with pytest.raises(ValueError, match="pressure"):
        generate_report("mk1", tiles=4, pressure=0)


# ---- CLI ----------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", ["mk1", "mk2"])
def test_cli_generate_then_info(tmp_path, preset):
    out = tmp_path / f"g.{'json' if preset == 'mk1' else 'capnp'}"
    runner = CliRunner()
    res = runner.invoke(cli, ["generate", "--preset", preset, "--tiles", "12", "--steps", "60",
                              "--seed", "1", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "out of memory" in " ".join(res.output.split())   # the console may wrap the line
    r = load_report(out)
    assert r == generate_report(preset, tiles=12, steps=60, seed=1)
    res = runner.invoke(cli, ["info", str(out)])
    assert res.exit_code == 0, res.output


def test_cli_generate_refuses_unknown_extension(tmp_path):
    from tilemem.cli import main

    assert main(["generate", "--tiles", "4", "-o", str(tmp_path / "g.txt")]) == 2
    assert not (tmp_path / "g.txt").exists()


def test_the_example_report_is_valid_and_mid_size():
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "mk1-small.json"
    r = load_report(path)
    assert r == load_report(path.with_suffix(".capnp"))
    assert violations(r) == [] and check_allocation(r).ok
    assert r.num_tiles == 32 and r.num_vars / r.num_tiles > 300
    assert 1 <= len(tiles_over_memory(r)) <= 5
    assert path.stat().st_size < 10_000_000
