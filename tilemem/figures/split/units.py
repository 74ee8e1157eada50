"""The units a split moves whole: a report's layers in program order, recovered from the
tensor names, or where they come alive, or the classes' order (``tilemem.figures.split.estimate``'s
step 1).

>>> from tilemem.generate import generate_report
>>> from tilemem.model.names import tensor_codes
>>> r = generate_report("mk1", tiles=8, steps=60, seed=1)
>>> codes, names = tensor_codes(r)
>>> u = program_units(r, np.flatnonzero(~r.always_live), None, codes, names)
>>> u.source, u.labels[:2]
('layer names', ['layer0', 'layer1'])
"""
from __future__ import annotations

import re

import msgspec
import numpy as np

from ...model import Report

#: Groups of classes when a report has no usable names.
CLASS_GROUPS = 64


class Units(msgspec.Struct):
    """The units a split moves whole, in program order: ``labels``; ``of_row``: each row's
    unit (``-1``: none); ``source``: what they were made of."""

    labels: list
    of_row: np.ndarray
    source: str


_NUMBERED = re.compile(r"^(.*?\d+)(?:/|$)")


def _natural(label: str):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", label)]


def program_units(r: Report, model_rows: np.ndarray, start: np.ndarray | None,
                  codes: np.ndarray, names: list) -> Units:
    """The units of ``r`` (see the module docstring); ``model_rows``: the rows that may
    belong to one; ``start``: every row's class start step (``None`` without steps);
    ``codes``, ``names``: every row's tensor (``tilemem.model.names.tensor_codes``)."""
    n_rows = r.num_vars
    numbered = [(_NUMBERED.match(n) or [None, None])[1] for n in names]
    present = np.unique(codes[model_rows]).tolist()
    found = {numbered[c] for c in present if numbered[c]}
    # layers are a numbered sequence (layer0, layer1, ...): a numbered prefix alone of its
    # stem (an operation's instance, head/logits/Conv_1) is not a layer
    stems: dict = {}
    for k in found:
        stems.setdefault(k.rstrip("0123456789"), set()).add(k)
    layers = {k for ks in stems.values() if len(ks) >= 2 for k in ks}
    numbered = [k if k in layers else None for k in numbered]
    labels = sorted(layers, key=_natural)
    model_bytes = r.size[model_rows].sum()
    if len(labels) >= 2:
        idx = {k: i for i, k in enumerate(labels)}
        code_unit = np.array([idx.get(k, -1) if k else -1 for k in numbered], np.int64)
        of_row = code_unit[codes]
        covered = r.size[model_rows][of_row[model_rows] >= 0].sum()
        if covered >= 0.5 * model_bytes:
            return Units(labels, of_row, "layer names")
    model = np.zeros(n_rows, bool)
    model[model_rows] = True
    first = [n.split("/", 1)[0] for n in names]
    keys = sorted(set(np.array(first, object)[np.unique(codes[model_rows])].tolist()))
    where = start if start is not None else r.eq_class
    if len(keys) >= 2:
        idx = {k: i for i, k in enumerate(keys)}
        of_row = np.array([idx.get(k, -1) for k in first], np.int64)[codes]
        of_row[~model] = -1
        pos = np.full(len(keys), np.iinfo(np.int64).max)
        np.minimum.at(pos, of_row[model_rows], where[model_rows])
        order = np.argsort(pos, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        of_row = np.where(of_row >= 0, rank[np.maximum(of_row, 0)], -1)
        return Units([keys[i] for i in order], of_row, "tensor name prefixes (no layer numbers)")
    # program order of classes, in groups of about equal bytes
    cls = r.eq_class[model_rows]
    c_pos = np.full(max(r.num_classes, 1), np.iinfo(np.int64).max)
    np.minimum.at(c_pos, cls, where[model_rows])
    c_bytes = np.bincount(cls, r.size[model_rows], minlength=len(c_pos))
    order = np.argsort(c_pos, kind="stable")
    cum = np.cumsum(c_bytes[order]) / max(c_bytes.sum(), 1)
    groups = min(CLASS_GROUPS, int((c_bytes > 0).sum()))
    group_of = np.empty(len(c_pos), np.int64)
    group_of[order] = np.minimum((cum * groups).astype(np.int64), groups - 1)
    _, group_of = np.unique(group_of, return_inverse=True)
    of_row = np.full(n_rows, -1, np.int64)
    of_row[model_rows] = group_of[cls]
    k = int(of_row.max()) + 1
    return Units([f"classes#{i}" for i in range(k)], of_row,
                 "program order of classes (no tensor names to group)")
