"""A large synthetic report, fast to make: for loader tests and benchmarks (not realistic).

Realistic reports come from ``tilemem.generate``; this one only needs the right shape and
size: ``num_vars`` variables over ``num_tiles`` Mk1 tiles, classes with interference lists,
element constraints and a full allocation order.
"""
from __future__ import annotations

import numpy as np

from tilemem.model import CATEGORIES, Csr, Report, symmetric_closure
from tilemem.model.target import MK1


def synthetic_report(num_vars: int, num_tiles: int = 1216, num_classes: int = 2000,
                     degree: int = 30, seed: int = 0) -> Report:
    rng = np.random.default_rng(seed)
    tile = np.sort(rng.integers(0, num_tiles, num_vars))
    src = np.repeat(np.arange(num_classes), degree)
    dst = rng.integers(0, num_classes, num_classes * degree)
    names = [f"layer{i % 97}/fwd/activations#{t}" for i, t in enumerate(tile.tolist())]
    ec_src = np.arange(0, num_vars - 1, 7)
    ec_src = ec_src[tile[ec_src] == tile[ec_src + 1]]
    ec = Csr.from_pairs(num_vars, np.concatenate([ec_src, ec_src + 1]),
                        np.concatenate([ec_src + 1, ec_src]))
    order = Csr.from_pairs(num_tiles, tile, np.arange(num_vars))
    return Report.from_columns(
        target=MK1.with_tiles(num_tiles), var_id=np.arange(num_vars), tile=tile,
        size=rng.integers(1, 512, num_vars) * 4, alignment=rng.choice([4, 8, 16], num_vars),
        offset=rng.integers(0, 32768, num_vars) * 4,
        category=rng.integers(0, len(CATEGORIES), num_vars).astype(np.int16),
        eq_class=rng.integers(0, num_classes, num_vars), names=names,
        always_live=rng.random(num_vars) < 0.2, in_interleaved_mem=rng.random(num_vars) < 0.1,
        interference=symmetric_closure(num_classes, src, dst), element_constraints=ec,
        allocation_order=order)
