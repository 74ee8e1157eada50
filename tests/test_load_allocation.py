"""Allocation files (tilemem.load.allocation): the offset column of another report of the same
variables, matched by var id, and a clear error naming the first variable that differs."""
import numpy as np
import pytest

from tilemem.errors import ReportError
from tilemem.generate import generate_report
from tilemem.load.allocation import offsets_from_allocation
from tilemem.model import Report
from tilemem.model.target import Target

SMALL = Target(num_tiles=2, tile_memory=1024, interleaved_memory_start=512,
               memory_element_offsets=np.array([0, 256, 512, 768]))


def rep(size, offset, *, tile=None, first_id=10):
    n = len(size)
    return Report.from_columns(
        target=SMALL, var_id=list(range(first_id, first_id + n)), tile=tile or [0] * n,
        size=size, alignment=[4] * n, offset=offset, category=["variable"] * n,
        eq_class=list(range(n)), interference=[[] for _ in range(n)])


def test_offsets_from_allocation():
    r = generate_report("mk1", tiles=12, steps=120, seed=5)
    other = r.with_offsets(r.offset + 4)
    assert np.array_equal(offsets_from_allocation(r, other)[r.allocated], r.offset[r.allocated] + 4)
    small = rep([16], [0], first_id=10**9)
    with pytest.raises(ReportError, match="no variable with this id"):
        offsets_from_allocation(small, r)
    with pytest.raises(ReportError, match="does not allocate"):
        offsets_from_allocation(rep([16], [0]), rep([16, 16], [0, 16]))
    with pytest.raises(ReportError, match="another tile"):
        offsets_from_allocation(rep([16], [0]), rep([16], [0], tile=[1]))
