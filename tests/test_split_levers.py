"""``split`` on a pipelined report says, per stage, the levers that stage needs: oom's plan
that fits run on the stage's own tiles. Checked against the what-if of those levers run on
its own (every tile of the stage that needed less data searched again on the changed report),
in the text and the JSON."""
import json

import numpy as np

import tilemem
from tilemem.api.program import levers_of
from tilemem.cli import main
from tilemem.figures.plan import PLAN_LEVERS
from tilemem.generate import generate_report
from tilemem.liveness import max_live_all
from tilemem.load import save_report

KEYWORDS = {x[1]: x[2] for x in PLAN_LEVERS}


def test_each_stage_names_the_levers_that_bring_its_tiles_under_tile_memory(tmp_path, capsys):
    r = generate_report("mk1", tiles=12, steps=500, seed=2, model="transformer",
                        splits=(1,), pressure=2.2)
    tm, T = r.target.tile_memory, r.target.tiles_per_ipu
    bound = np.array([m.max_live_bytes for m in max_live_all(r)])
    a = tilemem.split(r).answer
    assert len(a.stages) == 2
    for s in a.stages:
        need = s.ipu * T + np.flatnonzero(bound[s.ipu * T:(s.ipu + 1) * T] > tm)
        if not len(need):
            assert s.levers is None
            continue
        p = s.levers
        assert p is not None and p.of_tiles == len(need) and p.levers
        kw = {}
        for lever in p.levers:
            kw.update(KEYWORDS[lever])
        edits = tilemem.Edits(offload=kw.pop("offload", ()),
                              micro_batch=kw.pop("micro_batch", None))
        levers, amp_was = levers_of(**kw)
        changed = tilemem.what_if(r, edits, levers=levers, amp_was=amp_was).report
        after = np.array([m.max_live_bytes for m in max_live_all(changed, need)])
        assert int((after > tm).sum()) == p.tiles_left
        assert int((after - tm)[after > tm].sum()) == p.bytes_to_free
    assert any(s.levers is not None for s in a.stages)
    path = tmp_path / "p.capnp"
    save_report(r, path)
    assert main(["split", str(path)]) == 0
    out = capsys.readouterr().out
    assert "levers each stage needs" in out
    for s in a.stages:
        if s.levers is not None:
            assert f"IPU {s.ipu}: {' + '.join(s.levers.levers)}" in out
            assert f"what-if {s.levers.what_if}" in out
    assert main(["split", str(path), "--json"]) == 0
    stages = json.loads(capsys.readouterr().out)["stages"]
    got = [None if x["levers"] is None else x["levers"]["whatIf"] for x in stages]
    assert got == [None if s.levers is None else s.levers.what_if for s in a.stages]


#: the plan's levers as the generator's compile options
COMPILED = {"half-momentum": dict(half_momentum=True), "half-partials": dict(half_partials=True),
            "amp": dict(amp=(0.3,)), "recompute": dict(recompute="all"),
            "offload": dict(offload_state=True), "rts": dict(replicas=4, rts=True),
            "rts-weights": dict(replicas=4, rts=True, rts_weights=True)}
LABELS = {x[1]: x[0] for x in PLAN_LEVERS}


def test_an_estimated_splits_stage_names_levers_that_fit_it_compiled(tmp_path, capsys):
    """One IPU's report split over two by the estimate: a stage over tileMemory names the
    levers it needs (the plan on the stage's own report as recompiled, with its buffers and
    stash); the program compiled with that split and those levers fits the stage's tiles by
    the bound, and without them does not; a stage that fits names none."""
    from tilemem.generate import Levers

    kw = dict(tiles=12, steps=500, seed=2, model="transformer", pressure=2.2)
    r = generate_report("mk1", **kw)
    tm, T = r.target.tile_memory, r.target.ipu_tiles
    a = tilemem.split(r, ipus=2).answer
    assert any(s.max_live_bytes > tm for s in a.stages)
    for s in a.stages:
        if s.max_live_bytes <= tm:
            assert s.levers is None
            continue
        p = s.levers
        assert p is not None and p.levers and p.tiles_left == 0
        opts = {}
        for lever in p.levers:
            opts.update(COMPILED[LABELS[lever]])
        tiles = np.arange(s.ipu * T, (s.ipu + 1) * T)
        for levers, fits in ((Levers(**opts), True), (Levers(), False)):
            c = generate_report("mk1", splits=tuple(a.split_indices), levers=levers, **kw)
            worst = max(m.max_live_bytes for m in max_live_all(c, tiles))
            assert (worst <= tm) == fits, (p.levers, worst)
    path = tmp_path / "one.capnp"
    save_report(r, path)
    assert main(["split", str(path), "--ipus", "2"]) == 0
    out = capsys.readouterr().out
    assert "levers each stage needs, by its estimate" in out
    for s in a.stages:
        if s.levers is not None:
            assert f"IPU {s.ipu}: {' + '.join(s.levers.levers)}" in out


def _compiled_stage_worst(kw, a, s, p):
    """The worst tile of stage ``s`` in the program compiled with ``a``'s split and plan
    ``p``'s levers (the generator's default stash for the family); ``None`` when a lever has
    no compile option (the drawn models have no micro-batch to halve)."""
    from tilemem.generate import Levers

    if any(LABELS[x] not in COMPILED for x in p.levers):
        return None
    opts = {}
    for lever in p.levers:
        opts.update(COMPILED[LABELS[lever]])
    c = generate_report("mk1", splits=tuple(a.split_indices), levers=Levers(**opts), **kw)
    T = c.target.ipu_tiles
    return max(m.max_live_bytes for m in max_live_all(c, np.arange(s.ipu * T, (s.ipu + 1) * T)))


def test_no_stage_levers_that_fit_leave_a_tile_over_when_compiled():
    """Over seeds and both families, every stage whose levers *fit* (split's default reading
    of the stash; the program compiled as the generator pipelines it: the transformer keeps
    its activations, the cnn its stage input) fits compiled with those levers; enough of them
    are compiled for the check to mean something."""
    compiled = 0
    for model in ("transformer", "cnn"):
        for seed in (1, 2, 3, 4, 5):
            kw = dict(tiles=12, steps=500, seed=seed, model=model, pressure=2.2)
            r = generate_report("mk1", **kw)
            tm = r.target.tile_memory
            a = tilemem.split(r, ipus=2).answer
            for s in a.stages:
                if s.levers is None or not s.levers.fits:
                    continue
                worst = _compiled_stage_worst(kw, a, s, s.levers)
                if worst is None:
                    continue
                compiled += 1
                assert worst <= tm, (model, seed, s.ipu, s.levers.levers, worst)
    assert compiled >= 10
