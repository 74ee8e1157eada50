"""``generate --ipus N`` made and written IPU by IPU (``by_ipu``, ``tilemem.load.pieces``).

The expectations are independent of the streamed path: the whole report made in memory by
the unstreamed path (``generate_report`` without ``by_ipu``, ordered by tile as
``save_report`` writes it), the interference union by ``symmetric_closure`` of all pairs, the
per-tile peak by a dense tiles x steps cumulative sum (the former algorithm), and the
generator's own checker and ``tilemem.check`` on the offsets written.
"""
from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from generate_checker import violations
from tilemem.check import check_allocation
from tilemem.cli import cli
from tilemem.generate import Levers, generate_report
from tilemem.load import load_report, save_report
from tilemem.load import pieces as pieces_mod
from tilemem.model import Csr, symmetric_closure
from tilemem.model.ipuview import ROW_COLUMNS, IpuPieces, order_by_tile

CASES = {
    "cnn": dict(preset="mk1", tiles=8, ipus=3, steps=300, seed=3,
                levers=Levers(half_partials=True, recompute="all")),
    "transformer": dict(preset="mk1", tiles=8, ipus=3, steps=400, seed=4, model="transformer",
                        always_live_state=True, levers=Levers(half_momentum=True)),
    "splits": dict(preset="mk1", tiles=8, steps=300, seed=3, splits=(3,)),
}
COLUMNS = (*ROW_COLUMNS, "name_offsets")


@pytest.fixture(scope="module", params=sorted(CASES))
def pair(request, tmp_path_factory):
    """(whole report as save_report orders it, the streamed file read back, the file)."""
    kw = CASES[request.param]
    whole = order_by_tile(generate_report(**kw))
    path = tmp_path_factory.mktemp(request.param) / "streamed.capnp"
    p = generate_report(**kw, by_ipu=True)
    assert isinstance(p, IpuPieces)
    save_report(p, path)
    return whole, load_report(path), path


def test_streamed_report_equals_the_whole_one_column_by_column(pair):
    whole, got, _ = pair
    assert got.target == whole.target and got.num_vars == whole.num_vars
    for c in COLUMNS:
        assert np.array_equal(np.asarray(getattr(got, c)), np.asarray(getattr(whole, c))), c
    assert bytes(got.name_blob) == bytes(whole.name_blob)
    assert [got.name(i) for i in range(0, got.num_vars, 97)] == \
        [whole.name(i) for i in range(0, whole.num_vars, 97)]
    for c in ("element_constraints", "region_constraints", "allocation_order",
              "interference"):
        assert getattr(got, c) == getattr(whole, c), c
    assert np.array_equal(got.class_steps, whole.class_steps)
    assert got.interference_dropped == whole.interference_dropped == -1


def test_streamed_file_is_the_whole_reports_file_byte_for_byte(pair, tmp_path):
    whole, _, path = pair
    save_report(whole, tmp_path / "whole.capnp")
    assert (tmp_path / "whole.capnp").read_bytes() == path.read_bytes()


def test_streamed_offsets_pass_both_checkers(pair):
    _, got, _ = pair
    assert violations(got) == []
    res = check_allocation(got)
    assert res.ok, [str(v) for v in res.violations[:5]]


def test_one_ipu_is_written_as_before(tmp_path):
    kw = dict(preset="mk1", tiles=8, steps=200, seed=5)
    save_report(generate_report(**kw), tmp_path / "a.capnp")
    save_report(generate_report(**kw, by_ipu=True), tmp_path / "b.capnp")
    assert (tmp_path / "a.capnp").read_bytes() == (tmp_path / "b.capnp").read_bytes()


def test_cli_streams_a_pod_capnp_and_says_so(tmp_path):
    out = tmp_path / "r.capnp"
    res = CliRunner().invoke(cli, ["generate", "--tiles", "8", "--ipus", "3", "--steps", "300",
                                   "--seed", "3", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "IPU by IPU" in res.output
    whole = order_by_tile(generate_report("mk1", tiles=8, ipus=3, steps=300, seed=3))
    got = load_report(out)
    assert f"{whole.num_vars:,} variables" in res.output
    assert np.array_equal(got.offset, whole.offset) and got.interference == whole.interference
    assert not [p for p in tmp_path.iterdir() if p.name != "r.capnp"]   # spool removed


def test_interference_merge_in_many_blocks_is_the_union(tmp_path, monkeypatch):
    """Pieces sharing classes, merged a few keys at a time: the symmetric union."""
    rng = np.random.default_rng(0)
    r = generate_report("mk1", tiles=4, ipus=2, steps=120, seed=1)
    K = r.num_classes
    pairs = []
    csrs = []
    for _ in range(3):
        a, b = rng.integers(0, K, 300), rng.integers(0, K, 300)
        pairs.append((a, b))
        csrs.append(symmetric_closure(K, a, b))
    monkeypatch.setattr(pieces_mod, "MERGE_KEYS", 7)
    spool = pieces_mod._Spool(tmp_path)
    names = []
    for i, c in enumerate(csrs):
        spool.append(f"k{i}", c.row_ids() * K + c.indices)
        names.append(f"k{i}")
    got = pieces_mod._merged_interference(spool, names, K)
    want = symmetric_closure(K, np.concatenate([a for a, _ in pairs]),
                             np.concatenate([b for _, b in pairs]))
    spool.close()
    assert Csr(np.asarray(got.indptr), np.asarray(got.indices)) == want


def test_pieces_out_of_ipu_order_are_refused(tmp_path):
    p = generate_report("mk1", tiles=4, ipus=2, steps=120, seed=1, by_ipu=True)
    backwards = list(p.pieces)[::-1]
    from dataclasses import replace

    with pytest.raises(ValueError, match="IPU by IPU"):
        save_report(replace(p, pieces=iter(backwards)), tmp_path / "x.capnp")
    assert not (tmp_path / "x.capnp").exists()


def _dense_peak(asm, tile, size, cls):
    """The former algorithm: a dense tiles x steps difference array, summed along steps."""
    T, S1 = asm.t.num_tiles, asm.num_steps + 1
    nseg = np.diff(asm.seg_ptr)[cls]
    idx = np.repeat(np.arange(len(cls)), nseg)
    first = np.zeros(len(cls) + 1, np.int64)
    np.cumsum(nseg, out=first[1:])
    seg = asm.seg_ptr[cls][idx] + (np.arange(len(idx)) - first[idx])
    w = size[idx].astype(float)
    diff = (np.bincount(tile[idx] * S1 + asm.seg_start[seg], w, minlength=T * S1)
            - np.bincount(tile[idx] * S1 + asm.seg_end[seg], w, minlength=T * S1))
    return np.cumsum(diff.reshape(T, S1), axis=1).max(axis=1)


@pytest.mark.parametrize("model", ["cnn", "transformer"])
def test_peak_from_events_is_the_dense_peak_to_the_bit(model):
    from tilemem.generate import _Assembler
    from tilemem.generate.program import build_program
    from tilemem.generate.transformer import build_transformer
    from tilemem.model.target import PRESETS

    rng = np.random.default_rng(7)
    ipus, tpi = 2, 16
    build = build_program if model == "cnn" else build_transformer
    prog = build(rng, 400 if model == "cnn" else 500, ipus=ipus)
    asm = _Assembler(prog, PRESETS["mk1"].with_tiles(ipus * tpi, tiles_per_ipu=tpi), rng)
    owner, tile, size = asm.parts(1.0)
    cls = asm.tensor_class[owner]
    want = _dense_peak(asm, tile, size, cls)
    assert np.array_equal(asm.peak(tile, size, cls), want)
    # IPU by IPU, each on its own tiles
    for k in range(ipus):
        o, t, s = asm.parts(1.0, k)
        got = asm.peak(t, s, asm.tensor_class[o], (k * tpi, tpi))
        assert np.array_equal(got, want[k * tpi:(k + 1) * tpi])
    # a tile with nothing live, and one whose first part starts at step 0
    keep = tile != 3
    assert asm.peak(tile[keep], size[keep], cls[keep])[3] == 0.0
