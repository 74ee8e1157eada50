"""``what-if``'s memory levers: the variables each finds (by structure, names only a hint),
checked on hand-built reports, and the estimate of every tile's maximum live bytes checked
against the program generated with the lever (``tilemem generate``'s same option) on small
cases, within the error each lever states."""
import functools
import json

import numpy as np
import pytest
from click.testing import CliRunner

import tilemem
from tilemem.cli import cli, main
from tilemem.figures.whatif.levers import first_order_rows, optimiser_state_rows, partials_rows
from tilemem.figures.whatif.edits import apply_edits, apply_recompute, lever_edits
from tilemem.generate import Levers, generate_report
from tilemem.liveness import max_live_all
from tilemem.load import save_report
from tilemem.model import Report

STEPS = {"cnn": 200, "transformer": 500}
SPLIT = {"cnn": (11,), "transformer": (1,)}


def hand_report(names, category, constraints, steps):
    """Five variables on one tile, all interfering, each its own class with these steps."""
    n = len(names)
    return Report.from_columns(
        var_id=range(n), tile=[0] * n, size=[64] * n, alignment=[4] * n, offset=[0] * n,
        category=category, eq_class=range(n),
        interference=[[j for j in range(n) if j != i] for i in range(n)],
        names=[f"{x}#0" for x in names], element_constraints=constraints,
        class_steps=np.array(steps))


def test_partials_are_told_by_lifetime_and_constraints_not_names():
    # 0: a weight (live throughout); 1: an exchange buffer; 2: short-lived data constrained
    # to it, with no telling name; 3: named partials but unconstrained (a reduction's);
    # 4: constrained to the buffer but long-lived (an activation kept for the backward)
    r = hand_report(["w", "conv/<message:anon>", "conv/out_sum", "norm/partials", "act"],
                    ["variable", "message", "variable", "variable", "variable"],
                    [[], [2, 4], [1], [], [1]],
                    [[0, 100], [10, 11], [11, 13], [20, 22], [11, 80]])
    assert partials_rows(r).tolist() == [2]


def test_optimiser_state_is_persistent_and_named_so():
    # 0, 1: live throughout (persistent); 2: a temporary named like a moment
    r = hand_report(["l0/weights", "l0/adam/firstMoment", "l0/adam/correctedFirstMoment",
                     "l0/adam/secondMoment", "x"],
                    ["variable"] * 5, [[]] * 5,
                    [[0, 100], [0, 100], [90, 92], [0, 100], [5, 50]])
    assert optimiser_state_rows(r).tolist() == [1, 3]
    assert first_order_rows(r).tolist() == [1]


@functools.lru_cache(maxsize=None)
def pair(model, pipelined, lever):
    gen = LEVERS[lever][0]
    kw = dict(tiles=12, steps=STEPS[model], seed=3, model=model, pressure=1.2,
              splits=SPLIT[model] if pipelined else None)
    return generate_report("mk1", **kw), generate_report("mk1", levers=Levers(**gen), **kw)


def bounds(r):
    return np.array([m.max_live_bytes for m in max_live_all(r, np.arange(r.num_tiles))])


#: lever -> (the generator's option, what-if's, the error stated for it: the largest
#: |estimate - compiled| / compiled of a tile; 0.1 %: rounding to whole elements). AMP and FP16 partials: a cnn weight update's
#: partials unconstrained on a tile are not found (a few %); RTS: the collectives' code and
#: buffers are not estimated (under by a few %).
LEVERS = {
    "amp": (dict(amp=(0.3,)), dict(amp="0.3"), {"cnn": 0.05, "transformer": 1e-3}),
    "half-partials": (dict(half_partials=True), dict(half_partials=True),
                      {"cnn": 0.05, "transformer": 1e-3}),
    "half-momentum": (dict(half_momentum=True), dict(half_momentum=True),
                      {"cnn": 1e-3, "transformer": 1e-3}),
    "rts": (dict(replicas=4, rts=True), dict(rts=4), {"cnn": 0.06, "transformer": 0.06}),
}


@pytest.mark.parametrize("lever", list(LEVERS))
@pytest.mark.parametrize("model", ["cnn", "transformer"])
@pytest.mark.parametrize("pipelined", [False, True])
def test_estimate_agrees_with_the_program_compiled_with_the_lever(lever, model, pipelined):
    base, compiled = pair(model, pipelined, lever)
    _, kw, error = LEVERS[lever]
    changed, applied = apply_edits(base, lever_edits(**kw))
    assert applied[0].variables > 0
    est, act = bounds(changed), bounds(compiled)
    assert np.abs(est - act).max() <= error[model] * act.max() + 1e-9
    # no wrong verdict where the compiled tile is further than the error from tileMemory
    tm = base.target.tile_memory
    far = np.abs(act - tm) > error[model] * tm
    assert ((est > tm) == (act > tm))[far].all()


def test_recomputation_agrees_with_the_program_compiled_so():
    """Every layer recomputed, on one IPU: stated error 2 % (the forward copies are kept to
    the end of their layer's forward; the replay's own temporaries are not estimated)."""
    kw = dict(tiles=12, steps=740, seed=3, model="transformer", pressure=1.2)
    base = generate_report("mk1", **kw)
    compiled = generate_report("mk1", levers=Levers(recompute="all"), **kw)
    edits = lever_edits(recompute=True)
    changed, applied, rows = apply_recompute(base, edits)
    # a recomputed copy of each recomputed variable (and of each temporary the replay
    # makes again, which what it matched leaves out), on its tile
    assert len(rows) > applied[0].variables > 0
    assert changed.num_vars == base.num_vars + len(rows)
    assert (changed.tile[base.num_vars:] == base.tile[rows]).all()
    est, act, before = bounds(changed), bounds(compiled), bounds(base)
    assert (act < before).all()                     # recomputation frees memory here ...
    assert np.abs(est - act).max() <= 0.02 * act.max()   # ... and the estimate sees it


def test_amp_per_ipu_on_a_pipelined_report():
    kw = dict(tiles=12, steps=STEPS["transformer"], seed=3, model="transformer",
              splits=(1,))
    base = generate_report("mk1", **kw)
    compiled = generate_report("mk1", levers=Levers(amp=(0.2, 0.6)), **kw)
    changed, _ = apply_edits(base, lever_edits(amp="0.2,0.6"))
    assert (bounds(changed) == bounds(compiled)).all()


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    p = tmp_path_factory.mktemp("levers") / "t.capnp"
    save_report(generate_report("mk1", tiles=8, steps=500, seed=1, model="transformer"), p)
    return p


def test_api_and_json_say_what_each_lever_assumes(small):
    r = tilemem.load(small)
    w = tilemem.what_if(r, levers=tilemem.Levers(amp=(0.3,), half_partials=True,
                                                 half_momentum=True, replicas=2, rts=True))
    kinds = [a.edit for a in w.edits]
    assert len(kinds) == 4 and all(a.variables > 0 for a in w.edits)
    text = " ".join(w.summary.assumptions)
    for opt in ("--amp", "--half-partials", "--half-momentum", "--rts 2"):
        assert opt in text
    res = CliRunner().invoke(cli, ["what-if", str(small), "--half-momentum", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["summary"]["edits"][0]["edit"] == "FP16 first-order momentum"
    assert any("--half-momentum" in a for a in doc["summary"]["assumptions"])
    res = CliRunner().invoke(cli, ["what-if", str(small), "--rts", "4"])
    assert res.exit_code == 0 and "assumes --rts 4" in " ".join(res.output.split())


@pytest.mark.parametrize("args,field", [
    (["--amp", "0"], "--amp"), (["--amp", "0.3,x"], "--amp"), (["--amp", "1.5"], "--amp"),
    (["--amp", "0.3,0.4"], "--amp"),            # two values for a one-IPU report
    (["--amp-was", "0.5"], "--amp-was"), (["--amp", "0.3", "--amp-was", "2"], "--amp-was"),
    (["--rts", "1"], "--rts"), (["--rts", "x"], "--rts"),
    (["--recompute-at", "1,x"], "--recompute-at"), (["--recompute-at", "99"], "--recompute-at"),
    (["--recompute", "--recompute-at", "1"], "--recompute-at"),
])
def test_bad_lever_values_are_one_line_exit_2(small, args, field, capsys):
    rc = main(["what-if", str(small), *args])
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = [x for x in err.splitlines() if x.strip()]
    assert field in err and "Traceback" not in err
    assert len(lines) == 1, err


def test_recompute_needs_class_steps(tmp_path, capsys):
    from dataclasses import replace

    r = generate_report("mk1", tiles=8, steps=500, seed=1, model="transformer")
    p = tmp_path / "nosteps.capnp"
    save_report(replace(r, class_steps=None), p)
    assert main(["what-if", str(p), "--recompute"]) == 2
    err = capsys.readouterr().err
    assert "equivalenceClassSteps" in err and len(err.strip().splitlines()) == 1


def test_amp_per_ipu_where_the_report_does_not_record_tiles_per_ipu(monkeypatch):
    """Poplar's reports leave tilesPerIPU out: the levers take the IPU size the report's
    target infers (``rules.inferred_tiles_per_ipu``), as every other reader does, not the
    whole report as one IPU."""
    import dataclasses

    import tilemem.rules as rules

    kw = dict(tiles=12, steps=STEPS["transformer"], seed=3, model="transformer",
              splits=(1,))
    base = generate_report("mk1", **kw)
    tpi = base.target.tiles_per_ipu
    assert base.num_tiles == 2 * tpi
    compiled = generate_report("mk1", levers=Levers(amp=(0.2, 0.6)), **kw)
    # a target of this tile memory is taken as IPUs of ``tpi`` tiles (a stand-in for the
    # full IPU sizes the rule knows)
    monkeypatch.setitem(rules.INFERRED_TILES_PER_IPU, int(base.target.tile_memory), tpi)
    silent = dataclasses.replace(base, target=dataclasses.replace(base.target,
                                                                  tiles_per_ipu=None))
    assert silent.target.num_ipus == 2
    changed, _ = apply_edits(silent, lever_edits(amp="0.2,0.6"))
    assert (bounds(changed) == bounds(compiled)).all()


def _micro_batch_by_definition(r):
    """``micro_batch_rows`` from the module docstring of ``tilemem.figures.whatif.batch``, a row at
    a time in plain Python (the reference for its compiled passes)."""
    from tilemem.figures.whatif.batch import (PER_SAMPLE_CATEGORIES, PERSISTENT_SLACK,
                                       SHAPE_TOLERANCE)

    rows = range(r.num_vars)
    model = [i for i in rows if r.allocated[i] and r.category_name(i) == "variable"
             and not r.always_live[i]]
    s = {i: int(r.class_steps[r.eq_class[i], 0]) for i in model}
    e = {i: int(r.class_steps[r.eq_class[i], 1]) for i in model}
    first, last = min(s.values()), max(e.values())
    slack = PERSISTENT_SLACK * (last - first)
    persistent = {i for i in rows if r.allocated[i] and r.category_name(i) == "variable"
                  and (r.always_live[i] or (s[i] <= first + slack and e[i] >= last - slack))}

    def tensor(i):
        head, sep, tail = r.name(i).rpartition("#")
        return head if sep and tail.isdigit() else r.name(i)

    tiles, total = {}, {}
    for i in rows:
        if r.allocated[i]:
            tiles.setdefault(tensor(i), []).append(int(r.tile[i]))
            total[tensor(i)] = total.get(tensor(i), 0) + int(r.size[i])
    pers = {tensor(i) for i in persistent}
    shape = {n: (min(t), len(t)) for n, t in tiles.items()}
    shaped = {n for n in tiles if n in pers or any(
        shape[p] == shape[n] and abs(total[n] - total[p]) <= SHAPE_TOLERANCE * total[p]
        for p in pers)}
    return [i for i in rows if r.allocated[i] and not r.always_live[i]
            and r.category_name(i) in PER_SAMPLE_CATEGORIES and tensor(i) not in shaped]


@pytest.mark.parametrize("model,seed", [("cnn", 1), ("transformer", 2), ("cnn", 3)])
def test_micro_batch_rows_are_those_of_the_definition(model, seed):
    """What a smaller micro-batch shrinks (``tilemem.figures.whatif.batch``, compiled passes over
    the rows) against the docstring's criterion a row at a time, on generated reports with
    class steps, and a hand case (a weight's accumulator on its tiles is not scaled)."""
    from tilemem.figures.whatif.batch import micro_batch_rows

    r = generate_report("mk1", tiles=6, steps=STEPS[model] // 2, seed=seed, model=model)
    assert r.has_class_steps
    want = _micro_batch_by_definition(r)
    assert 0 < len(want) < r.num_vars
    assert micro_batch_rows(r).tolist() == want
    h = Report.from_columns(
        var_id=range(5), tile=[0, 1, 0, 1, 0], size=[40, 40, 40, 40, 8], alignment=[4] * 5,
        offset=[0] * 5, category=["variable"] * 4 + ["message"], eq_class=[0, 0, 1, 1, 2],
        interference=[[1, 2], [0, 2], [0, 1]], names=["w#0", "w#1", "acc#0", "acc#1", "x#0"],
        class_steps=np.array([[0, 10], [3, 8], [4, 6]]))
    assert micro_batch_rows(h).tolist() == _micro_batch_by_definition(h) == [4]
