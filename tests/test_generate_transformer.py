"""The second program family, ``--model transformer``: valid reports, and what the documents
imply for a transformer trained with Adam and gradient accumulation.

Validity is judged as for the first family (generate_checker.py, tilemem.check). The
liveness properties follow from 004 (classes are lifetimes, interference is overlap of
lifetimes, alwaysLive means in memory during the whole program) applied to a Repeat over
micro-batches and an If/Else on the loss scale, as the module docstring of
``tilemem.generate.transformer`` describes the program.
"""
import functools
import re

import numpy as np
import pytest
from click.testing import CliRunner

from generate_checker import tiles_over_memory, violations
from tilemem.check import check_allocation
from tilemem.cli import cli
from tilemem.generate import generate_report
from tilemem.load import load_report, save_report
from tilemem.load.validate import validate_report

TILES, STEPS = 24, 360      # two layers


@functools.lru_cache(maxsize=None)
def gen(preset="mk1", pressure=1.0, seed=1, ipus=1, always_live_state=False, steps=STEPS):
    return generate_report(preset, tiles=TILES, steps=steps, pressure=pressure, seed=seed,
                           ipus=ipus, model="transformer", always_live_state=always_live_state)


_CLASSES: dict = {}


def classes_by_name(r):
    """tensor name (without ``#tile``) -> its class (every part has the same one)."""
    if id(r) in _CLASSES:       # the reports are gen()'s, cached for the session
        return _CLASSES[id(r)]
    out = {}
    for row in range(r.num_vars):
        name = r.name(row).rpartition("#")[0]
        out.setdefault(name, set()).add(int(r.eq_class[row]))
    assert all(len(c) == 1 for c in out.values())
    _CLASSES[id(r)] = {k: next(iter(v)) for k, v in out.items()}
    return _CLASSES[id(r)]


def interferes(r, a, b):
    return b in r.interference.row(a).tolist() or a in r.interference.row(b).tolist()


# ---- validity ------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [dict(preset="mk1"), dict(preset="mk2"),
                                dict(preset="mk1", pressure=1.6),
                                dict(preset="mk2", pressure=0.5),
                                dict(preset="mk1", always_live_state=True),
                                dict(preset="mk1", ipus=2)])
def test_offsets_are_a_valid_allocation(kw):
    r = gen(**kw)
    validate_report(r)
    assert violations(r) == []
    res = check_allocation(r)
    assert res.ok, [str(v) for v in res.violations[:5]]


def test_pressure_decides_how_many_tiles_are_out_of_memory():
    assert len(tiles_over_memory(gen("mk2", 0.5))) == 0
    assert 1 <= len(tiles_over_memory(gen("mk1"))) <= 0.35 * TILES
    assert len(tiles_over_memory(gen("mk1", 1.6))) > 0.5 * TILES


def test_round_trips_through_json_and_capnp(tmp_path):
    r = gen()
    for ext in (".json", ".capnp"):
        p = tmp_path / f"t{ext}"
        save_report(r, p)
        assert load_report(p) == r


def test_deterministic_for_a_seed():
    a = generate_report("mk1", tiles=8, steps=250, seed=3, model="transformer")
    assert a == generate_report("mk1", tiles=8, steps=250, seed=3, model="transformer")
    assert a != generate_report("mk1", tiles=8, steps=250, seed=4, model="transformer")


# ---- the program ---------------------------------------------------------------------------
def test_names_and_fewer_distinct_layers_than_the_first_family():
    r = gen()
    names = set(classes_by_name(r))
    for n in ("layer1/attn/qkv/grad_accum", "layer0/mlp/fc1/adam/secondMoment",
              "layer0/attn/scores/out", "layer1/mlp/gelu/out", "embedding/tokens/weights",
              "loss/CrossEntropy/gradient"):
        assert n in names, n
    layers = {m.group(0) for n in names for m in [re.match(r"layer\d+", n)] if m}
    cnn = generate_report("mk1", tiles=TILES, steps=STEPS, seed=1)
    cnn_layers = {m.group(0) for i in range(cnn.num_vars)
                  for m in [re.match(r"layer\d+", cnn.name(i))] if m}
    assert len(layers) == 2 < len(cnn_layers)


def test_weights_moments_and_accumulators_are_mapped_alike():
    r = gen()
    rows = {}
    for row in range(r.num_vars):
        rows.setdefault(r.name(row).rpartition("#")[0], []).append(row)
    for p in ("layer0/attn/qkv", "layer1/mlp/fc2", "embedding/tokens"):
        w = rows[f"{p}/weights"]
        for other in ("adam/firstMoment", "adam/secondMoment", "grad_accum"):
            o = rows[f"{p}/{other}"]
            assert r.tile[o].tolist() == r.tile[w].tolist()
        # clones of the weight: float moments of half weights, twice the bytes on each tile
        assert np.array_equal(r.size[rows[f"{p}/adam/firstMoment"]], 2 * r.size[w])
    for p in ("layer0/attn/norm/gamma", "layer1/mlp/fc2/bias"):     # on a few tiles
        w = rows[f"{p}/weights"]
        assert 0 < len(w) < TILES // 2
        assert np.array_equal(r.size[rows[f"{p}/adam/secondMoment"]], 2 * r.size[w])
        assert r.tile[rows[f"{p}/grad_accum"]].tolist() == r.tile[w].tolist()


def test_state_lives_throughout_and_interferes_with_everything():
    r = gen()
    cls = classes_by_name(r)
    s = r.class_steps
    w = cls["layer0/attn/qkv/weights"]
    assert cls["layer0/attn/qkv/adam/firstMoment"] == w == cls["embedding/tokens/weights"]
    assert s[w, 0] == 0 and s[w, 1] == s[:, 1].max()
    assert all(interferes(r, w, c) for c in range(r.num_classes) if c != w)
    assert not r.always_live[r.eq_class == w].any()


def test_always_live_reading_marks_weights_and_optimiser_state():
    r, plain = gen(always_live_state=True), gen()
    names = [r.name(i).rpartition("#")[0] for i in range(r.num_vars)]
    state = np.array([bool(re.search(r"/(weights|adam/(first|second)Moment|lossScale|"
                                     r"stepCount)$", n)) for n in names])
    accum = np.array([n.endswith("/grad_accum") for n in names])
    assert state.any() and r.always_live[state].all()
    assert not r.always_live[accum].any()
    model = ~np.isin(np.array(r.categories)[r.category], ["variable"]) | state
    assert not r.always_live[~model].any()          # activations and temporaries are not
    # the same program, sizes, classes and offsets; only the flag differs
    assert np.array_equal(r.size, plain.size) and np.array_equal(r.eq_class, plain.eq_class)
    assert np.array_equal(r.always_live, plain.always_live | state)
    assert np.array_equal(r.offset, plain.offset)


def test_accumulators_are_live_over_every_micro_batch_but_not_the_then_branch():
    r = gen()
    cls = classes_by_name(r)
    s = r.class_steps
    accums = sorted({c for n, c in cls.items() if n.endswith("/grad_accum")})
    # the micro-batch loop: from the token stream copy to the embedding's gradient update
    first = s[cls["input/tokens/<hostMessage>"], 0]
    last = s[cls["embedding/norm/bwd/gradIn"], 1]
    body = [c for n, c in cls.items() if first <= s[c, 0] and s[c, 1] <= last
            and not n.endswith("/grad_accum")]
    assert len(body) > 50
    then = cls["lossScaling/then/gradHistogram"]
    for a in accums:
        assert s[a, 0] < first and s[a, 1] > last
        assert all(interferes(r, a, c) for c in body)
        assert not interferes(r, a, then)


def test_activations_are_not_carried_to_the_next_micro_batch():
    r = gen()
    cls = classes_by_name(r)
    s = r.class_steps
    start = cls["input/tokens/<hostMessage>"]      # the first steps of every iteration
    for n in ("layer0/attn/qkv/out", "layer1/attn/scores/out", "layer0/mlp/gelu/out",
              "layer1/mlp/residual/out", "loss/CrossEntropy/gradient"):
        c = cls[n]
        assert s[c, 0] > s[start, 1] - 1 and not interferes(r, c, start), n
    # forward activations are kept for the backward pass: live past the loss
    loss = cls["loss/CrossEntropy/gradient"]
    assert interferes(r, cls["layer0/attn/qkv/out"], loss)


def test_update_temporaries_share_a_class_and_memory_across_weights():
    r = gen()
    cls = classes_by_name(r)
    a = "layer0/attn/qkv/adam/"
    assert cls[a + "correctedFirstMoment"] == cls[a + "correctedSecondMoment"]
    b = cls["layer1/mlp/fc1/adam/update"]
    assert not interferes(r, cls[a + "update"], b)
    assert not interferes(r, cls[a + "update"], cls["lossScaling/then/gradHistogram"])
    assert interferes(r, cls[a + "update"], cls["layer1/mlp/fc1/grad_accum"])


def test_pipelined_layers_stay_on_their_ipu_and_stash():
    r = gen(ipus=2)
    assert r.target.num_ipus == 2
    ipu = r.target.ipu_of(r.tile)
    names = [r.name(i).rpartition("#")[0] for i in range(r.num_vars)]
    for i, n in enumerate(names):
        m = re.match(r"layer(\d+)/", n)
        if m:
            assert ipu[i] == int(m.group(1)), n      # two layers, one per IPU
    cls = classes_by_name(r)
    stash = cls["pipeline/stage0/stash"]
    assert all(interferes(r, stash, cls[n]) for n in ("input/tokens/<hostMessage>",
                                                      "layer0/attn/qkv/out"))
    assert any("globalMessage" == r.categories[c] for c in np.unique(r.category))


# ---- CLI -----------------------------------------------------------------------------------
def test_cli_generate_transformer(tmp_path):
    out = tmp_path / "t.capnp"
    runner = CliRunner()
    args = ["generate", "--model", "transformer", "--preset", "mk2", "--tiles", "12",
            "--steps", "250", "--seed", "2", "-o", str(out)]
    res = runner.invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert load_report(out) == generate_report("mk2", tiles=12, steps=250, seed=2,
                                               model="transformer")
    # the cnn family takes the other reading too (its persistent tensors marked)
    res = runner.invoke(cli, ["generate", "--always-live-state", "--tiles", "4", "-o",
                              str(tmp_path / "c.json")])
    assert res.exit_code == 0, res.output
    marked, plain = load_report(tmp_path / "c.json"), generate_report("mk1", tiles=4)
    assert marked.always_live.sum() > plain.always_live.sum()
    assert np.array_equal(marked.size, plain.size)
    with pytest.raises(ValueError, match="model"):
        generate_report("mk1", tiles=4, model="rnn")
