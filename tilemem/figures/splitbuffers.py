"""The buffers a pipelined program adds to a stage (the activations sent to the next stage,
the gradients back, the stash), as classes of the report: ``with_buffers``. Used by
``tilemem.figures.split`` to estimate a stage with them.
"""
from __future__ import annotations

import numpy as np

from ..model import Report
from ..model.interference import tile_interference


def with_buffers(r: Report, bufs: list, orig: Report) -> Report:
    """``r`` with, for each ``(rows, start, end)`` of ``bufs``, copies of ``rows`` in a new
    class live over ``[start, end)``: it interferes with every class whose steps overlap
    that interval (the steps' hull: a superset of the program's interference); ``orig``:
    the report the rows are copied from (``r`` may have them off their tiles)."""
    from dataclasses import replace

    from ..model import Csr, symmetric_closure

    if not bufs:
        return r
    C = r.num_classes
    rows = np.concatenate([b[0] for b in bufs])
    new_cls = np.repeat(np.arange(C, C + len(bufs)), [len(b[0]) for b in bufs])
    span = np.array([[b[1], b[2]] for b in bufs], np.int64)
    steps = np.concatenate([r.class_steps, span])
    inter = tile_interference(r)
    src, dst = [inter.row_ids()], [inter.indices]
    for k, (a, b) in enumerate(span.tolist()):
        hit = np.flatnonzero((steps[:, 0] < b) & (steps[:, 1] > a))
        hit = hit[hit != C + k]
        src.append(np.full(len(hit), C + k))
        dst.append(hit)
    inter = symmetric_closure(C + len(bufs), np.concatenate(src), np.concatenate(dst))
    k = len(rows)

    def cat(col, src=None):
        return np.concatenate([col, (col if src is None else src)[rows]])

    def grow(csr):
        return Csr(np.concatenate([csr.indptr, np.full(k, csr.indptr[-1])]), csr.indices)

    return replace(
        r, var_id=np.concatenate([r.var_id, r.var_id.max() + 1 + np.arange(k)]),
        tile=cat(r.tile, orig.tile), size=cat(r.size, orig.size), alignment=cat(r.alignment),
        offset=cat(r.offset, orig.offset),
        category=cat(r.category), eq_class=np.concatenate([r.eq_class, new_cls]),
        allocated=np.concatenate([r.allocated, np.ones(k, bool)]),
        is_constant=cat(r.is_constant),
        always_live=np.concatenate([r.always_live, np.zeros(k, bool)]),
        executable=cat(r.executable), vertex_code=cat(r.vertex_code),
        lowest_256kb=cat(r.lowest_256kb), in_interleaved_mem=cat(r.in_interleaved_mem),
        name_offsets=np.concatenate([r.name_offsets, np.full(k, r.name_offsets[-1])]),
        element_constraints=grow(r.element_constraints),
        region_constraints=grow(r.region_constraints), interference=inter,
        class_steps=steps, _tile_index=None, _cache={})
