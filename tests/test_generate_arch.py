"""``generate --arch``, ``--config``, stages of the embedding alone, the tied head's stage and
serialisation, against independent expectations: parameter counts summed from the program's
weight tensors, the published counts, layer placement read back from the report, bad
configuration files drawn to break one rule each."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cli_in_process import error_lines, run_cli
from tilemem.generate.archs import ARCHS, PUBLISHED, arch_shape, parameters
from tilemem.generate.ipuconfig import (from_ipu_config, parse_ipu_config, stage_layers,
                                        to_ipu_config, IpuConfig)
from tilemem.generate.transformer import build_transformer
from tilemem.levers import Levers
from tilemem.load import load_report

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("name", ARCHS)
def test_parameter_count_is_within_one_percent_of_the_published(name):
    n = parameters(arch_shape(name))
    assert abs(n - PUBLISHED[name][0]) <= 0.01 * PUBLISHED[name][0]


@pytest.mark.parametrize("name", [a for a in ARCHS if a != "resnet50"])
def test_the_program_trains_the_parameters_it_counts(name):
    # the weight tensors the builder makes, summed in elements (bpt is in hidden^2 halves)
    s = arch_shape(name)
    p = build_transformer(np.random.default_rng(0), 100, shape=s)
    elems = sum(t.bpt for t in p.tensors if t.name.endswith("/weights")) * s.hidden ** 2
    assert round(elems) == s.parameters()


def test_hand_counted_gpt2_and_bert_base():
    # GPT-2: wte 50257x768, wpe 1024x768, 12 x (ln 2x1536, qkv 768x2304+2304, proj
    # 768x768+768, fc 768x3072+3072, proj 3072x768+768), ln_f 1536
    layer = 2 * 1536 + 768 * 2304 + 2304 + 768 * 768 + 768 + 768 * 3072 + 3072 + 3072 * 768 + 768
    assert parameters(arch_shape("gpt2")) == 50257 * 768 + 1024 * 768 + 12 * layer + 1536
    bert = 30522 * 768 + 512 * 768 + 2 * 768 + 1536 + 12 * layer + 768 * 768 + 768 + 1536 + 30522
    assert parameters(arch_shape("bert-base")) == bert


def _layers_by_ipu(report, num_layers):
    ipu = report.target.ipu_of(report.tile)
    out = []
    for i in range(num_layers):
        v = [k for k in range(report.num_vars) if report.name(k).startswith(f"layer{i}/mlp/fc1/weights#")]
        out.append(sorted(set(ipu[v].tolist())))
    return out


@pytest.mark.parametrize("arch, cfg", [("bert-large", "ipu_config_bert_large_4ipu.json"),
                                       ("gpt2-medium", "ipu_config_gpt2_medium_8ipu.json")])
def test_example_configs_compile_with_their_stages(tmp_path, arch, cfg):
    path = EXAMPLES / cfg
    out = tmp_path / "r.json"
    code, so, err = run_cli(["generate", "--arch", arch, "--config", path, "--preset", "mk2",
                             "--tiles", "8", "--seq-len", "128", "-o", out])
    assert code == 0, err
    r = load_report(out)
    lpi = json.loads(path.read_text())["layers_per_ipu"]
    assert r.target.num_ipus == len(lpi)
    expect = [[k] for k, n in enumerate(lpi) for _ in range(n)]
    assert _layers_by_ipu(r, sum(lpi)) == expect
    # the embedding on the first IPU; optimum-graphcore's tied head there too
    names = {r.name(k).split("#")[0]: int(r.target.ipu_of(r.tile[k])) for k in range(r.num_vars)
             if r.name(k).startswith(("embedding/tokens/weights#", "head/norm/gamma/weights#"))}
    assert set(names.values()) == {0}


GOOD = {"layers_per_ipu": [0, 6, 6], "ipus_per_replica": 3}
#: (what it breaks, the key the message names): each differs from GOOD in one rule
BAD = [
    ({"layers_per_ipu": "0,6,6"}, "layers_per_ipu"),
    ({"layers_per_ipu": []}, "layers_per_ipu"),
    ({"layers_per_ipu": [0, 6.5, 5.5]}, "layers_per_ipu"),
    ({"layers_per_ipu": [0, -2, 14]}, "layers_per_ipu"),
    ({"layers_per_ipu": [0, 6]}, "layers_per_ipu"),
    ({"layers_per_ipu": [0, 6, 6, 0], "ipus_per_replica": 4}, "layers_per_ipu"),
    ({"layers_per_ipu": [0, 7, 6]}, "layers_per_ipu"),
    ({"layers_per_ipu": [0, 5, 6]}, "layers_per_ipu"),
    ({"layers_per_ipu": [0, 12, -1]}, "layers_per_ipu"),
    ({"layers_per_ipu": [4, 0, 8]}, "layers_per_ipu"),
    ({"layers_per_ipu": [0, "6", 6]}, "layers_per_ipu"),
    ({"layers_per_ipu": [0, True, 11]}, "layers_per_ipu"),
    ({"layers_per_ipu": None}, "layers_per_ipu"),
    ({"ipus_per_replica": 0}, "ipus_per_replica"),
    ({"ipus_per_replica": -3}, "ipus_per_replica"),
    ({"ipus_per_replica": 3.0}, "ipus_per_replica"),
    ({"ipus_per_replica": "3"}, "ipus_per_replica"),
    ({"matmul_proportion": -0.2}, "matmul_proportion"),
    ({"matmul_proportion": 0}, "matmul_proportion"),
    ({"matmul_proportion": 1.5}, "matmul_proportion"),
    ({"matmul_proportion": [0.2, 0.3]}, "matmul_proportion"),
    ({"matmul_proportion": []}, "matmul_proportion"),
    ({"matmul_proportion": "0.2"}, "matmul_proportion"),
    ({"matmul_proportion": [0.2, None, 0.3]}, "matmul_proportion"),
    ({"recompute_checkpoint_every_layer": "yes"}, "recompute_checkpoint_every_layer"),
    ({"optimizer_state_offchip": 1}, "optimizer_state_offchip"),
    ({"replicated_tensor_sharding": "true"}, "replicated_tensor_sharding"),
    ({"replicated_tensor_sharding": True}, "replicated_tensor_sharding"),
    ({"replication_factor": 0}, "replication_factor"),
    ({"replication_factor": 2.5}, "replication_factor"),
    ({"replication_factor": {"pod16": 4}}, "replication_factor"),
    ({"enable_half_partials": None}, "enable_half_partials"),
    ({"enable_half_first_order_momentum": "no"}, "enable_half_first_order_momentum"),
    ({"embedding_serialization_factor": 0}, "embedding_serialization_factor"),
    ({"embedding_serialization_factor": 1.5}, "embedding_serialization_factor"),
    ({"embedding_serialization_factor": 40000}, "embedding_serialization_factor"),
]


@pytest.mark.parametrize("change, key", BAD, ids=[f"{i}-{k}" for i, (_, k) in enumerate(BAD)])
def test_a_bad_config_is_one_line_naming_its_key_and_exit_2(tmp_path, change, key):
    path = tmp_path / "ipu_config.json"
    path.write_text(json.dumps({**GOOD, **change}))
    code, _, err = run_cli(["generate", "--arch", "bert-base", "--config", path, "--tiles", "4",
                            "-o", tmp_path / "r.json"])
    lines = error_lines(err)
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith(f"tilemem: error: {path}: {key}:"), lines[0]
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("text", ["", "{", "[1, 2]", "null"])
def test_a_config_that_is_no_json_object_is_one_line(tmp_path, text):
    path = tmp_path / "ipu_config.json"
    path.write_text(text)
    code, _, err = run_cli(["generate", "--arch", "bert-base", "--config", path, "--tiles", "4",
                            "-o", tmp_path / "r.json"])
    lines = error_lines(err)
    assert code == 2 and len(lines) == 1 and lines[0].startswith(f"tilemem: error: {path}: ")


def test_an_unknown_key_is_a_warning_naming_it():
    with pytest.warns(UserWarning, match="layers_per_gpu"):
        parse_ipu_config({**GOOD, "layers_per_gpu": [1]})


def test_wildcards_share_what_is_left_the_first_taking_the_remainder():
    cfg = IpuConfig(layers_per_ipu=(2, -1, -1, -1), ipus_per_replica=4)
    assert stage_layers(cfg, 24) == [2, 8, 7, 7]
    assert stage_layers(IpuConfig(ipus_per_replica=4), 24) == [6, 6, 6, 6]


@pytest.mark.parametrize("levers, splits", [
    (Levers(), (0, 6)), (Levers(amp=(0.1, 0.2, 0.3), half_partials=True), (4, 8)),
    (Levers(replicas=4, rts=True, recompute="all", offload_state=True, serialise=4), (3,)),
    (Levers(half_momentum=True), ())])
def test_ipu_config_round_trips(levers, splits):
    d = json.loads(json.dumps(to_ipu_config(levers, splits, 12)))
    assert from_ipu_config(parse_ipu_config(d), 12, vocab=30522) == (levers, splits)


def test_a_first_stage_of_the_embedding_alone_and_the_head_on_it():
    p = build_transformer(np.random.default_rng(0), 100, shape=arch_shape("gpt2", seq_len=64),
                          ipus=3, splits=(0, 6), head_stage="first")
    ipu = {t.name: t.ipu for t in p.tensors}
    assert {ipu[f"layer{i}/mlp/fc1/weights"] for i in range(6)} == {1}
    assert ipu["embedding/tokens/weights"] == ipu["head/norm/gamma/weights"] == 0
    last = build_transformer(np.random.default_rng(0), 100, shape=arch_shape("gpt2", seq_len=64),
                             ipus=3, splits=(0, 6))
    assert {t.ipu for t in last.tensors if t.name == "head/norm/gamma/weights"} == {2}


def test_a_decoder_computes_logits_at_every_position():
    s = arch_shape("gpt2", seq_len=256, micro_batch=2)
    p = build_transformer(np.random.default_rng(0), 100, shape=s)
    logits = next(t for t in p.tensors if t.name == "head/logits/out")
    assert round(logits.bpt * s.hidden ** 2) == 2 * 256 * 50257    # halves: tokens x vocab
    e = arch_shape("bert-base", seq_len=256, micro_batch=2)
    enc = build_transformer(np.random.default_rng(0), 100, shape=e)
    logits = next(t for t in enc.tensors if t.name == "head/logits/out")
    assert logits.bpt * e.hidden ** 2 == pytest.approx(0.15 * 2 * 256 * 30522)


def test_serialised_head_has_n_slices_of_partials_each_a_share():
    s = arch_shape("gpt2", seq_len=128)
    one = build_transformer(np.random.default_rng(0), 100, shape=s)
    four = build_transformer(np.random.default_rng(0), 100, shape=s, levers=Levers(serialise=4))
    whole = next(t.bpt for t in one.tensors if t.name == "head/logits/Conv_1/partials")
    parts = [t.bpt for t in four.tensors
             if t.name.startswith("head/logits/slice") and t.name.endswith("partials")]
    assert len(parts) == 4 and all(x == pytest.approx(whole / 4) for x in parts)
    upd = [t.bpt for t in four.tensors if t.name.startswith("embedding/tokens/adam/slice")
           and t.name.endswith("/update")]
    full = next(t.bpt for t in one.tensors if t.name == "embedding/tokens/adam/update")
    assert len(upd) == 4 and sum(upd) == pytest.approx(full)


def test_splits_from_zero_accepted_by_the_cli(tmp_path):
    code, out, err = run_cli(["generate", "--arch", "gpt2", "--seq-len", "64", "--splits", "0,6",
                              "--tiles", "4", "-o", tmp_path / "r.json"])
    assert code == 0, err
    assert "124,439,808 parameters" in out


def test_one_spelling_of_the_levers_in_generate_and_what_if():
    import click
    from tilemem.cli import cli

    def names(cmd):
        command = cli.get_command(click.Context(cli), cmd)
        return {o for p in command.params if not getattr(p, "hidden", False) for o in p.opts}
    levers = {"--amp", "--half-partials", "--half-momentum", "--rts", "--rts-weights",
              "--offload-optimiser-state", "--recompute", "--recompute-at", "--serialise"}
    assert levers <= names("generate") and levers <= names("what-if")


@pytest.mark.parametrize("old, new", [
    (["--available-memory-proportion", "0.3,0.6"], ["--amp", "0.3,0.6"]),
    (["--replicas", "4", "--rts", "--rts-weights"], ["--rts", "4", "--rts-weights"]),
])
def test_the_former_generate_spellings_give_the_same_levers(old, new):
    from click.testing import CliRunner
    from tilemem.commands import options

    got = []
    real = options.levers_of

    def spy(*a, **k):
        got.append(real(*a, **k))
        return got[-1]
    import unittest.mock as um
    with um.patch.object(options, "levers_of", spy):
        from tilemem.cli import cli
        for args in (old, new):
            CliRunner().invoke(cli, ["generate", "--tiles", "4", "--ipus", "2", "--steps", "60",
                                     "-o", "/nonexistent/dir/x.json", *args])
    assert len(got) == 2 and got[0] == got[1]
