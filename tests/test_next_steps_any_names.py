"""oom's next steps hold on any naming and marking: each step's count is what `tilemem
what-if` with the step's options gives, on a report whose weights and optimiser state are
alwaysLive and on one whose names no framework word matches; the micro-batch leaves
persistent state and tensors of its shape (weight gradients) alone, whatever their names;
a split that fits is a ranked step naming `tilemem split`."""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from tilemem.cli import main
from tilemem.figures.whatif.batch import micro_batch_rows
from tilemem.generate import generate_report
from tilemem.load import save_report
from tilemem.model import encode_names
from tilemem.model.names import base_name


def run(capsys, *args):
    rc = main([str(a) for a in args])
    out = capsys.readouterr()
    return rc, out.out


def renamed(r):
    """Every path component replaced by a token of its own (no framework word left), the
    ``#tile`` suffixes kept."""
    tokens: dict[str, str] = {}
    names = []
    for i in range(r.num_vars):
        n = r.name(i)
        base = base_name(n)
        tail = n[len(base):]
        names.append("/".join(tokens.setdefault(p, f"q{len(tokens)}")
                              for p in base.split("/")) + tail)
    blob, offsets = encode_names(names)
    return replace(r, name_blob=blob, name_offsets=offsets, _cache={})


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    d = tmp_path_factory.mktemp("steps")
    state = generate_report("mk1", tiles=16, steps=300, seed=2, pressure=1.3,
                            always_live_state=True)
    plain = generate_report("mk1", tiles=16, steps=300, seed=2, pressure=1.3)
    out = {}
    for key, r in (("state", state), ("anon", renamed(plain))):
        out[key] = d / f"{key}.capnp"
        save_report(r, out[key])
    return out, state, plain


def test_micro_batch_leaves_parameter_shaped_tensors_alone(reports):
    _, state, plain = reports
    rows = micro_batch_rows(plain)
    names = {base_name(plain.name(i)) for i in rows.tolist()}
    assert names and not any(n.endswith(("/weights", "/momentum", "/weightsGrad"))
                             for n in names)
    assert any(n.endswith("/activations") or n.endswith("/out") for n in names)
    # the same rows whatever the names, and whatever the marking of persistent state
    assert np.array_equal(micro_batch_rows(renamed(plain)), rows)
    assert np.array_equal(micro_batch_rows(state), rows)


@pytest.mark.parametrize("model, splits, steps", [("cnn", (22,), 400),
                                                  ("transformer", (2,), 740)])
def test_micro_batch_scales_a_pipelines_buffers_not_a_weight_it_sends(model, splits, steps):
    # the generated pipeline's stash is live over the whole program (the cnn updates its
    # weights between micro-batches), yet it holds micro-batches, as do the copies between
    # stages; the transformer's tied embedding sent to the head's stage is a weight
    r = generate_report("mk1", tiles=16, steps=steps, seed=1, model=model, splits=splits)
    scaled = np.zeros(r.num_vars, bool)
    scaled[micro_batch_rows(r)] = True
    kinds = {"stash": [], "copy": [], "tied": []}
    for i in np.flatnonzero(r.allocated).tolist():
        n = base_name(r.name(i))
        if n.startswith("pipeline/tied/"):
            kinds["tied"].append(scaled[i])
        elif n.startswith("pipeline/") and n.endswith("/stash"):
            kinds["stash"].append(scaled[i])
        elif n.startswith("pipeline/"):
            kinds["copy"].append(scaled[i])
    assert kinds["stash"] and all(kinds["stash"])
    assert kinds["copy"] and all(kinds["copy"])
    assert (model == "cnn") == (not kinds["tied"])   # only the transformer ties its head
    assert not any(kinds["tied"])


@pytest.mark.parametrize("key", ["state", "anon"])
def test_every_step_count_is_the_what_ifs(reports, capsys, key):
    paths, _, _ = reports
    p = paths[key]
    rc, out = run(capsys, "oom", p, "--no-repack", "--json")
    assert rc == 0
    s = json.loads(out)["summary"]
    need = s["verdicts"]["reduceData"]
    assert need >= 1 and s["nextSteps"]
    actions = " | ".join(x["action"] for x in s["nextSteps"])
    if key == "state":   # alwaysLive optimiser state is a candidate like any other
        assert "optimiser state" in actions
        # (halving the micro-batch is a step only where it brings a tile under: a smaller
        # tensor keeps its bytes a tile on its first tiles, where the heaviest tiles often
        # are, by the tile mapping's rule; which rows it shrinks is tested above)
        assert "micro-batch" in actions
    for step in s["nextSteps"]:
        if step["command"]:
            assert step["command"].startswith("split --ipus ")
            rc, out = run(capsys, "split", p, *step["command"].split()[1:], "--json")
            a = json.loads(out)
            assert rc == 0 and a["fits"] and step["tilesFixed"] == step["ofTiles"]
            continue
        opt, _, arg = step["whatIf"].partition(" ")
        rc, out = run(capsys, "what-if", p, opt, arg.strip("'"), "--json")
        w = json.loads(out)["summary"]
        assert w["verdicts"]["reduceData"] == need - step["tilesFixed"], step


def test_recomputation_is_offered_only_where_what_if_can_answer_it():
    """A layer's step offers recomputation beside offloading only when the report has the
    class steps ``what-if --recompute`` changes (without them it refuses)."""
    from dataclasses import replace

    import tilemem

    r = generate_report("mk1", tiles=16, steps=300, seed=4, pressure=1.3)

    def layer_steps(report):
        d = tilemem.diagnose(report, repack=False, detail=tilemem.Detail(plan=False))
        return [s.action for s in d.summary.next_steps if s.action.startswith("offload layer")
                and s.action.split()[1].endswith("/*")]
    with_steps = layer_steps(r)
    assert with_steps and all(a.endswith(" (or recompute it)") for a in with_steps)
    without = layer_steps(replace(r, class_steps=None, _cache={}))
    assert without == [a.removesuffix(" (or recompute it)") for a in with_steps]
