"""The generator compiles each memory lever (``tilemem.generate.levers``): the same program of
a seed, with what the lever changes and nothing else, judged against what the lever means
(Graphcore's memory guide, as the module docstring states it) and the checker."""
import functools

import numpy as np
import pytest
from click.testing import CliRunner

from tilemem.check import check_allocation
from tilemem.cli import cli
from tilemem.generate import Levers, Shape, generate_report

TILES = 12
STEPS = {"cnn": 120, "transformer": 500}     # 13 cnn layers, 3 transformer layers
SPLIT = {"cnn": (6,), "transformer": (1,)}


@functools.lru_cache(maxsize=None)
def gen(model="cnn", pipelined=False, **levers):
    amp = levers.pop("amp", None)
    lev = Levers(**{**levers, **({"amp": amp} if amp else {})})
    return generate_report("mk1", tiles=TILES, steps=STEPS[model], seed=2, model=model,
                           splits=SPLIT[model] if pipelined else None, levers=lev)


def base_names(r):
    return np.array([r.name(i).rpartition("#")[0] for i in range(r.num_vars)])


def by_tensor(r, test):
    """``{tensor name: bytes}`` of the tensors whose name passes ``test``."""
    names = base_names(r)
    out = {}
    for n, s in zip(names.tolist(), r.size.tolist()):
        if test(n):
            out[n] = out.get(n, 0) + s
    return out


def same_except(a, b, changed):
    """Both reports have the same variables, tiles and classes; sizes differ only where
    ``changed`` (a name test) says."""
    na, nb = base_names(a), base_names(b)
    assert (na == nb).all() and (a.tile == b.tile).all() and (a.eq_class == b.eq_class).all()
    differ = a.size != b.size
    hit = np.array([changed(n) for n in na.tolist()])
    assert not (differ & ~hit).any(), sorted(set(na[differ & ~hit].tolist()))[:5]
    return hit


@pytest.mark.parametrize("model", ["cnn", "transformer"])
@pytest.mark.parametrize("pipelined", [False, True])
def test_half_partials_halve_the_matmul_partials_only(model, pipelined):
    a, b = gen(model, pipelined), gen(model, pipelined, half_partials=True)
    conv = lambda n: n.endswith("/Conv_1/partials") or n.endswith("/cell/partials")  # noqa
    hit = same_except(a, b, conv)
    assert hit.any()
    assert (2 * b.size[hit] == a.size[hit]).all()     # the same elements in half the bytes
    assert check_allocation(b).ok


@pytest.mark.parametrize("model,name", [("cnn", "/momentum"), ("transformer", "/firstMoment")])
def test_half_momentum_halves_the_first_order_momentum_only(model, name):
    a, b = gen(model), gen(model, half_momentum=True)
    hit = same_except(a, b, lambda n: n.endswith(name))
    assert hit.any() and (2 * b.size[hit] == a.size[hit]).all()
    assert check_allocation(b).ok


@pytest.mark.parametrize("model", ["cnn", "transformer"])
def test_amp_per_stage_scales_each_stage_own_partials(model):
    a = gen(model, True)
    b = gen(model, True, amp=(0.3, 0.6))          # half of the default on stage 0 only
    conv = lambda n: n.endswith("/Conv_1/partials") or n.endswith("/cell/partials")  # noqa
    hit = same_except(a, b, conv)
    ipu = a.tile // a.target.tiles_per_ipu
    on0, on1 = hit & (ipu == 0), hit & (ipu == 1)
    assert on0.any() and on1.any()
    assert (b.size[on1] == a.size[on1]).all()
    # 0.3 / 0.6 of the elements (each tensor rounded to whole elements and grains)
    assert b.size[on0].sum() == pytest.approx(0.5 * a.size[on0].sum(), rel=0.02)


@pytest.mark.parametrize("model,state", [("cnn", ("/momentum",)),
                                         ("transformer", ("/firstMoment", "/secondMoment"))])
@pytest.mark.parametrize("pipelined", [False, True])
def test_rts_keeps_one_replicas_shard_of_the_state_spread_over_the_ipu(model, state,
                                                                        pipelined):
    a, b = gen(model, pipelined), gen(model, pipelined, replicas=4, rts=True)
    sa = by_tensor(a, lambda n: n.endswith(state))
    sb = by_tensor(b, lambda n: n.endswith(state))
    assert sa.keys() == sb.keys() and sa
    assert sum(sb.values()) == pytest.approx(sum(sa.values()) / 4, rel=0.03)
    weights = lambda n: n.endswith("/weights")  # noqa: E731
    assert by_tensor(a, weights) == by_tensor(b, weights)          # the weights stay whole
    names = base_names(b)
    big = max(sb, key=sb.get)
    rows = np.flatnonzero(names == big)
    rows_a = np.flatnonzero(base_names(a) == big)
    # a flat shard mapped linearly: at least as many tiles as the state mapped like its weight
    assert len(rows) >= min(len(rows_a), TILES // 2)
    assert any(n.endswith("/rts/gradShard") for n in names.tolist())
    assert check_allocation(b).ok


def hull(r, name):
    rows = np.flatnonzero(base_names(r) == name)
    return r.class_steps[r.eq_class[rows[0]]]


@pytest.mark.parametrize("pipelined", [False, True])
def test_recomputation_keeps_only_checkpoints_for_the_backward(pipelined):
    a, b = gen("transformer", pipelined), gen("transformer", pipelined, recompute="all")
    assert check_allocation(b).ok
    names = set(base_names(b).tolist())
    inner = "layer1/mlp/gelu/out"          # an activation inside a layer: not a checkpoint
    again = "layer1/recompute/mlp/gelu/out"
    assert again in names and again not in set(base_names(a).tolist())
    # the forward's copy dies before the recomputed one is born, and before the backward
    # starts; without recomputation it lives on into the backward
    bwd = "layer1/mlp/fc2/bwd/gradIn"
    assert hull(b, inner)[1] <= hull(b, again)[0] < hull(b, bwd)[0]
    assert hull(b, inner)[1] <= hull(b, bwd)[0] and hull(a, inner)[1] > hull(a, bwd)[0]
    # the checkpoint (layer 1's input: layer 0's output, or its copy on the next IPU) is
    # kept until the recomputation
    ckpt = "pipeline/fwd/stage0to1/out" if pipelined else "layer0/mlp/residual/out"
    assert hull(b, ckpt)[1] > hull(b, again)[0]
    if pipelined:   # the stage stashes its checkpoints only
        stash = lambda n: n.startswith("pipeline/stage0/stash")  # noqa: E731
        assert 0 < sum(by_tensor(b, stash).values()) < sum(by_tensor(a, stash).values()) / 3


def test_recomputation_at_checkpoints_replays_segments():
    a = gen("cnn", recompute="all")
    b = gen("cnn", recompute=(6,))
    # every layer replayed in both; with checkpoints 0 and 6 only, layer 3's input (a
    # recomputed tensor) is not the forward's: the forward's layer-2 output dies early
    names_b = set(base_names(b).tolist())
    assert any(n.startswith("layer3/recompute/") for n in names_b)
    assert check_allocation(b).ok and check_allocation(a).ok
    # the same program otherwise: the same tensors outside the recomputed copies
    plain = lambda r: {n for n in base_names(r).tolist() if "/recompute/" not in n}  # noqa
    assert plain(a) == plain(b) == plain(gen("cnn"))


def test_a_named_transformer_shape_is_in_real_bytes():
    s = Shape(layers=2, hidden=256, heads=4, seq_len=64, vocab=1000, micro_batch=2)
    r = generate_report("mk1", tiles=16, seed=1, model="transformer", shape=s)
    t = by_tensor(r, lambda n: n.startswith("layer"))
    assert t["layer0/attn/qkv/weights"] == 3 * 256 * 256 * 2      # 3 hidden^2 halves
    assert t["layer1/mlp/fc1/weights"] == 4 * 256 * 256 * 2
    assert t["layer0/attn/qkv/adam/firstMoment"] == 3 * 256 * 256 * 4
    assert by_tensor(r, lambda n: n == "embedding/tokens/weights")[
        "embedding/tokens/weights"] == 1000 * 256 * 2
    # scores: micro-batch x heads x seq x seq halves
    assert t["layer0/attn/scores/out"] == 2 * 4 * 64 * 64 * 2
    assert not any(n.startswith("layer2/") for n in t)
    assert check_allocation(r).ok


@pytest.mark.parametrize("args,hint", [
    (["--available-memory-proportion", "0.6,x"], "--available-memory-proportion"),
    (["--available-memory-proportion", "1.5"], "--available-memory-proportion"),
    (["--rts"], "--rts"),
    (["--recompute-at", "3,x"], "--recompute-at"),
    (["--recompute-at", "99"], "--recompute-at"),
    (["--model", "transformer", "--layers", "2"], "--hidden"),
    (["--layers", "2", "--hidden", "64", "--heads", "4", "--seq-len", "8", "--vocab", "50"],
     "--layers"),
    (["--ipus", "2", "--available-memory-proportion", "0.3,0.4,0.5"],
     "--available-memory-proportion"),
])
def test_bad_lever_values_are_one_line_exit_2(args, hint, tmp_path):
    res = CliRunner().invoke(cli, ["generate", "--tiles", "4", "--steps", "60",
                                   "-o", str(tmp_path / "x.json"), *args])
    assert res.exit_code == 2, res.output
    assert hint in res.output and "Traceback" not in res.output
    assert not (tmp_path / "x.json").exists()
