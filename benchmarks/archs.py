"""``tilemem generate --arch NAME`` for every named architecture: its parameter count beside
the published one, the bytes of its weights, optimiser state (Adam's moments, FP32) and
gradient accumulators (FP32), and of a micro-batch's activations, and the time and peak
memory to generate its report on one whole Mk2 IPU (1472 tiles), each in a process of its
own (``/usr/bin/time -v``).

    python benchmarks/archs.py [--archs bert-base,gpt2] [--preset mk2] [--no-generate]

Bytes are the program's tensors in real bytes (``Tensor.bpt`` times hidden^2 halves), before
mapping: weights (``*/weights``), optimiser state (``*/adam/*Moment``), accumulators
(``*/grad_accum``), and activations: the forward pass's tensors of one micro-batch (what a
layer writes before the loss; its partial sums and exchange buffers left out), the
micro-batch given by ``--micro-batch`` (the shape's sequence: ``generate``'s default).
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def program_bytes(name: str, micro_batch: int = 1) -> dict:
    from tilemem.generate.archs import arch_shape, parameters
    from tilemem.generate.program import build_program
    from tilemem.generate.transformer import build_transformer
    from tilemem.generate.transformershape import Shape
    from tilemem.generate.cnnshape import UNIT

    s = arch_shape(name, micro_batch=micro_batch)
    if isinstance(s, Shape):
        p = build_transformer(np.random.default_rng(0), 100, shape=s)
        unit = 2 * s.hidden ** 2
    else:
        p = build_program(np.random.default_rng(0), 100, shape=s)
        unit = UNIT
    loss = next(t.define for t in p.tensors if t.name.startswith("loss/CrossEntropy")) \
        if isinstance(s, Shape) else None
    out = dict(params=parameters(s), weights=0, state=0, accum=0, acts=0)
    for t in p.tensors:
        b = t.bpt * unit
        if t.name.endswith("/weights"):
            out["weights"] += b
        elif re.search(r"/adam/(first|second)Moment$|/momentum$", t.name):
            out["state"] += b
        elif t.name.endswith("grad_accum"):
            out["accum"] += b
        elif (t.category == "variable" and t.role != "partials" and t.define >= 0
              and (loss is None or t.define < loss) and t.name.startswith(("layer", "embedding/", "head/"))
              and "/Norm/partials" not in t.name and "/adam/" not in t.name):
            out["acts"] += b
    return out


def generate_time(name: str, preset: str) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.capnp")
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        t = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "tilemem", "generate",
                            "--arch", name, "--preset", preset, "-o", out],
                           env=env, capture_output=True, text=True)
        dt = time.perf_counter() - t
        m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
        return dt, (int(m.group(1)) * 1024 if m else -1)


def main(argv=None) -> int:
    from tilemem.generate.archs import ARCHS, PUBLISHED

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--archs", default=",".join(ARCHS))
    ap.add_argument("--preset", default="mk2")
    ap.add_argument("--micro-batch", type=int, default=1)
    ap.add_argument("--no-generate", action="store_true")
    a = ap.parse_args(argv)
    print("| arch | parameters | published | off by | weights | Adam state | accumulators "
          "| activations / micro-batch | generate s | peak RSS |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in a.archs.split(","):
        b = program_bytes(name, a.micro_batch)
        pub = PUBLISHED[name][0]
        gt, rss = (0.0, -1) if a.no_generate else generate_time(name, a.preset)
        mb = lambda x: f"{x / 2 ** 20:,.0f} MiB"
        print(f"| {name} | {b['params']:,} | {pub / 1e6:g}M | {(b['params'] - pub) / pub:+.2%} "
              f"| {mb(b['weights'])} | {mb(b['state'])} | {mb(b['accum'])} | {mb(b['acts'])} "
              f"| {gt:.1f} | {rss / 2 ** 30:.2f} GiB |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
