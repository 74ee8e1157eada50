"""``tilemem split`` names what is live at each stage's peak (``figures.split.peaks``): a
hand-computed case, a small decoder whose head stage must name its logits (checked against
the stage's own report by its steps and interference, not the liveness code), and the
text and JSON that show it."""
from __future__ import annotations

import functools
import json

import numpy as np
import pytest
from click.testing import CliRunner

from test_split import HAND, interval_report
from tilemem.cli import cli
from tilemem.figures.split.estimate import SplitModel
from tilemem.figures.split.peaks import TOP, stage_peak, with_peak_tensors
from tilemem.figures.split.search import best_split
from tilemem.generate import generate_report
from tilemem.generate.transformershape import Shape
from tilemem.load import save_report
from tilemem.model.names import base_name
from tilemem.rules import INFERRED_PIPELINE_BUFFER_PREFIX as PIPE


def named(peak):
    return {t.name: (t.bytes, t.variables) for t in peak.tensors}


def test_hand_computed_peaks_name_the_pipeline_buffers():
    m = SplitModel(interval_report(HAND))
    # stage 1 (layer2) at step 3: its weight and activation, the receive buffer and the copy
    # of layer1/a (two variables of one tensor: one entry), the stack: 737 in all
    p = stage_peak(m, 1, 2, 3, 2, 0)
    assert p.live_bytes == 30 + 300 + 200 + 200 + 7 and p.exact
    assert named(p) == {PIPE + "layer1/a": (400, 2), "layer2/a": (300, 1),
                        "layer2/w": (30, 1), "stack": (7, 1)}
    assert [t.name for t in p.tensors][:2] == [PIPE + "layer1/a", "layer2/a"]
    # stage 0 (layers 0-1) at step 2: w0, w1, a0, a1 and a1's send buffer, the stack: the
    # five largest (a tie of 200 bytes in name order), the stack left out
    p = stage_peak(m, 0, 0, 2, 2, 0)
    assert p.live_bytes == 10 + 20 + 100 + 200 + 200 + 7
    assert [(t.name, t.bytes) for t in p.tensors] == [
        ("layer1/a", 200), (PIPE + "layer1/a", 200), ("layer0/a", 100), ("layer1/w", 20),
        ("layer0/w", 10)]
    assert len(p.tensors) == TOP


def live_together(rep, p) -> bool:
    """Whether some step of ``rep`` has each of ``p``'s tensors live on ``p.tile`` with
    exactly its bytes, their classes interfering pairwise (by the steps and the relation
    of ``rep``, not by the liveness code)."""
    on = np.flatnonzero(rep.tile == p.tile)
    base = np.array([base_name(rep.name(int(k))) for k in on])
    want = {x.name: x.bytes for x in p.tensors}
    on, base = on[np.isin(base, list(want))], base[np.isin(base, list(want))]
    steps = rep.class_steps[rep.eq_class[on]]
    adj = rep.interference
    for t in np.unique(steps[:, 0]).tolist():
        live = rep.always_live[on] | ((steps[:, 0] <= t) & (t < steps[:, 1]))
        got = {k: int(rep.size[on[live & (base == k)]].sum()) for k in want}
        if got != want:
            continue
        cls = np.unique(rep.eq_class[on[live & ~rep.always_live[on]]]).tolist()
        if all(set(cls) - {c} <= set(adj.indices[adj.indptr[c]:adj.indptr[c + 1]].tolist())
               for c in cls):
            return True
    return False


DECODER = Shape(layers=4, hidden=64, heads=2, seq_len=256, vocab=4000, head="lm",
                embed_norm=False, positions=256)


@functools.lru_cache(maxsize=None)
def decoder():
    return generate_report("mk1", tiles=16, model="transformer", shape=DECODER, seed=1)


@pytest.mark.parametrize("n", [2, 3])
def test_decoder_head_stage_names_its_logits_live_at_the_peak(n):
    r = decoder()
    m = SplitModel(r)
    a = with_peak_tensors(m, best_split(m, n))
    b = [0] + a.split_indices + [m.L]
    last = a.stages[-1]     # the head goes with the last layer: the last stage holds it
    assert last.last_unit == f"layer{DECODER.layers - 1}"
    names = [t.name for t in last.peak.tensors]
    assert "head/logits/out" in names
    # its bytes there: the logits' variables on that tile in the report itself (a unit's
    # tensor keeps its size in its stage), over all tiles seq x vocab halves
    t = last.worst_tile
    logits = np.array([base_name(r.name(k)) == "head/logits/out" for k in range(r.num_vars)])
    assert int(r.size[logits].sum()) == 2 * DECODER.seq_len * DECODER.vocab
    got = next(x for x in last.peak.tensors if x.name == "head/logits/out")
    assert got.bytes == int(r.size[logits & (r.tile == t)].sum())
    for s, st in enumerate(a.stages):
        p = st.peak
        assert p.tile == st.worst_tile and 0 < len(p.tensors) <= TOP
        # the stage's own report (all its tiles, as the levers read it): a step at which
        # every named tensor has exactly its bytes live on the tile, in classes pairwise
        # interfering by the report's relation (always-live data live at every step)
        full = m.stage_report(s, b[s], b[s + 1], n)
        assert live_together(full, p)
        # bytes: no more than the peak, which is the stage estimate's tile's (within the
        # estimate's own way of adding the stash) and no more than the tile holds
        total = sum(x.bytes for x in p.tensors)
        assert total <= p.live_bytes <= int(full.size[full.tile == p.tile].sum())
        assert p.live_bytes <= st.max_live_bytes * 1.02


def test_linear_stash_and_no_steps_still_name_the_peak():
    r = decoder()
    m = SplitModel(r, stash_mapping="linear")
    a = with_peak_tensors(m, best_split(m, 3))
    b = [0] + a.split_indices + [m.L]
    for s, st in enumerate(a.stages):   # the stash spread over the IPU: named by its bytes
        p = st.peak
        on = m.stash_tiles(s, b[s], b[s + 1], 3)[p.tile]
        assert sum(t.bytes for t in p.tensors) <= p.live_bytes
        assert all(t.bytes == on for t in p.tensors if t.name == PIPE + "stash")
    from dataclasses import replace

    bare = replace(r, class_steps=None, _cache={})
    m = SplitModel(bare)
    a = with_peak_tensors(m, best_split(m, 2))
    for st in a.stages:
        assert st.peak.tensors and sum(t.bytes for t in st.peak.tensors) <= st.peak.live_bytes


@pytest.fixture(scope="module")
def decoder_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("peaks") / "d.json"
    save_report(decoder(), str(path))
    return str(path)


def test_text_and_json_show_the_peaks(decoder_file):
    res = CliRunner().invoke(cli, ["split", decoder_file, "--ipus", "2"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    at = lines.index(next(x for x in lines if x.startswith("  largest live at each stage")))
    block = lines[at:lines.index("", at)]
    assert all(len(x) <= 160 for x in block)
    assert block[1].startswith("  - IPU 0, tile ") and any(
        x.startswith("  - IPU 1, tile ") for x in block)
    assert "head/logits/out" in "\n".join(block[block.index(next(
        x for x in block if x.startswith("  - IPU 1"))):])
    res = CliRunner().invoke(cli, ["split", decoder_file, "--ipus", "2", "--json"])
    doc = json.loads(res.output)
    peak = doc["stages"][1]["peak"]
    assert peak["tile"] == doc["stages"][1]["worstTile"]
    assert "head/logits/out" in [t["name"] for t in peak["tensors"]]
    assert {"name", "category", "bytes", "variables"} <= set(peak["tensors"][0])


def test_api_table_and_view_name_the_peaks():
    import tilemem

    s = tilemem.split(decoder(), ipus=2)
    col = s._columns()["peak_tensors"]       # to_frame's column, without pandas
    assert len(col) == 2 and col[1].startswith(s.answer.stages[1].peak.tensors[0].name + " ")
    assert "head/logits/out" in col[1]
    assert "largest live at each stage's peak" in str(s)
