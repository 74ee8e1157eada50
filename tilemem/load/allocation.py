"""Allocation files: the offset column of another report of the same variables (what
``tilemem alloc -o`` writes), for every command that takes ``--allocation``."""
from __future__ import annotations

import numpy as np

from ..errors import ReportError
from . import load_report
from ..model import Report


def offsets_from_file(r: Report, path) -> np.ndarray:
    """The offset column of an allocation file: a report (.json/.capnp) of the same variables,
    such as ``tilemem alloc`` writes (matched by var id; ``ReportError`` when they differ)."""
    return offsets_from_allocation(r, load_report(path), path)


def offsets_from_allocation(r: Report, other: Report, path=None) -> np.ndarray:
    """The offset column (rows of ``r``) of ``other``, a report of the same variables.

    Both must allocate exactly the same var ids, each on the same tile with the same size;
    otherwise ``ReportError`` names the first variable that differs.
    """
    def fail(message, row, rep):
        raise ReportError(message, path=None if path is None else str(path),
                          field="vars[].var", var=int(rep.var_id[row]),
                          tile=int(rep.tile[row]) if rep.allocated[row] else None)

    orow = other.rows_of_vars(r.var_id)
    mine = np.flatnonzero(r.allocated)
    missing = mine[(orow[mine] < 0)]
    if len(missing):
        fail("the allocation has no variable with this id", int(missing[0]), r)
    o = orow[mine]
    bad = mine[~other.allocated[o]]
    if len(bad):
        fail("the allocation leaves this variable unallocated", int(bad[0]), r)
    bad = mine[(other.tile[o] != r.tile[mine]) | (other.size[o] != r.size[mine])]
    if len(bad):
        fail("the allocation has this variable on another tile or with another size",
             int(bad[0]), r)
    extra = np.setdiff1d(other.var_id[other.allocated], r.var_id[mine])
    if len(extra):
        fail("the allocation has a variable the report does not allocate",
             int(other.rows_of_vars([extra[0]])[0]), other)
    out = np.full(r.num_vars, -1, np.int64)
    out[mine] = other.offset[o]
    return out
