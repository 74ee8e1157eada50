"""``split`` on a pipelined report says, per stage, the levers that stage needs: oom's plan
that fits run on the stage's own tiles. Checked against the what-if of those levers run on
its own (every tile of the stage that needed less data searched again on the changed report),
in the text and the JSON."""
import json

import numpy as np

import tilemem
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
        if "offload" in kw:
            kw["offload"] = [kw["offload"]]
        changed = tilemem.what_if(r, **kw).report
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
