"""The units ``tilemem config`` splits: the report's layers (``tilemem.figures.split``'s units)
and, when the program has a part before its first layer that holds parameters (a language
model's embedding), that part as a unit of its own, so that a stage may hold it and no layer,
as published pipelined configurations do (``layers_per_ipu: [0, 8, 8, 8]``).

``split``'s model puts such a part with the first layer (the unit before it comes alive); so
it is told here from that model -- the tensors of no layer that go with the first and
come alive before the first layer's first per-sample tensor, grouped by their names' first
component, a group holding a persistent tensor (a parameter) -- and the model is made again
from the report with the units numbered in their names (``unit0/`` before the part's,
``unitK/`` before layer ``K - 1``'s). Names are read by the levers by what they end with or
contain, and by the layers' numbers: a stage's checkpoints (``recompute-at``) are numbered so,
and told back in layers (``to_layer``).

>>> import numpy as np
>>> from tilemem.model import Report
>>> r = Report.from_columns(var_id=range(3), tile=[0, 0, 1], size=[4, 8, 16],
...     alignment=[4] * 3, offset=[0] * 3, category=["variable"] * 3, eq_class=[0, 1, 2],
...     interference=[[], [], []], names=["embedding/w#0", "layer0/x#0", "head/y#1"])
>>> s = renamed(r, np.array([-1, 0, -1]), np.array([True, False, False]), lead=1)
>>> s.name(0), s.name(1), s.name(2)
('unit0/embedding/w#0', 'unit1/layer0/x#0', 'head/y#1')
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from ...jit import njit

from ...model import Report
from ...model.frozen import frozen


@dataclass
class ConfigUnits:
    """The split model ``m`` (``SplitModel``) config searches with; ``lead``: units before
    the first layer (0 or 1: the part before it, split off); ``labels``: each unit's label,
    as said (the report's layer labels, the part's name first)."""

    m: object
    lead: int
    labels: list

    def layers(self, i: int, j: int) -> int:
        """The layers among units ``[i, j)``."""
        return (j - i) - max(0, min(j, self.lead) - i)

    def to_layer(self, cut: int) -> int:
        """The layer a stage starting at unit ``cut`` starts at (the generator's split)."""
        return cut - self.lead


def config_units(r: Report) -> ConfigUnits:
    """The units of ``r`` (see the module docstring)."""
    from ..split.estimate import SplitModel
    from ...model.names import tensor_codes

    m = SplitModel(r, "activations")
    if m.start is None or m.units.source != "layer names" or m.pos is None:
        return ConfigUnits(m, 0, list(m.units.labels))
    rr = m.r
    u = m.units.of_row
    codes, names = tensor_codes(rr)
    first = np.array([n.split("/", 1)[0] for n in names], object)
    group = first[codes]
    cand = (u < 0) & (m.anchor == 0) & rr.allocated
    before = cand & m.per_sample & (m.start < m.pos[0])
    groups = set(group[before].tolist())
    if not groups:
        return ConfigUnits(m, 0, list(m.units.labels))
    part = cand & np.isin(group, list(groups))
    if not (part & m.persistent).any():   # no parameters: no stage of its own
        return ConfigUnits(m, 0, list(m.units.labels))
    out = renamed(r, u, part, lead=1)
    m2 = SplitModel(out, "activations")
    if m2.L != m.L + 1:   # not told apart as asked: the layers alone
        return ConfigUnits(m, 0, list(m.units.labels))
    label = "/".join(sorted(groups))
    return ConfigUnits(m2, 1, [label] + list(m.units.labels))


def renamed(r: Report, unit: np.ndarray, part: np.ndarray, lead: int) -> Report:
    """``r`` with each row of layer ``k`` (``unit``) named under ``unit{k + lead}/`` and each
    row of ``part`` under ``unit0/``; the others as they were."""
    pre = np.where(part, 0, np.where(unit >= 0, unit + lead, -1)).astype(np.int64)
    k = int(pre.max()) + 1
    prefixes = [f"unit{i}/".encode() for i in range(k)]
    plen = np.array([len(p) for p in prefixes] or [0], np.int64)
    pblob = np.frombuffer(b"".join(prefixes), np.uint8) if prefixes else np.zeros(0, np.uint8)
    poff = np.concatenate([[0], np.cumsum(plen)]).astype(np.int64)
    off = np.asarray(r.name_offsets, np.int64)
    blob = np.frombuffer(r.name_blob, np.uint8) if isinstance(r.name_blob, (bytes, bytearray)) \
        else np.asarray(r.name_blob, np.uint8)
    new_blob, new_off = _prefixed(frozen(blob, np.uint8), frozen(off, np.int64),
                                  frozen(pre, np.int64), frozen(pblob, np.uint8),
                                  frozen(poff, np.int64))
    out = replace(r, name_blob=new_blob, name_offsets=new_off, _cache={})
    for key in ("sorted_interference", "class_intervals"):   # not on names
        if key in r._cache:
            out._cache[key] = r._cache[key]
    return out


@njit(cache=True)
def _prefixed(blob, off, pre, pblob, poff):
    n = len(off) - 1
    lens = np.empty(n, np.int64)
    for i in range(n):
        lens[i] = off[i + 1] - off[i] + (poff[pre[i] + 1] - poff[pre[i]] if pre[i] >= 0 else 0)
    new_off = np.zeros(n + 1, np.int64)
    for i in range(n):
        new_off[i + 1] = new_off[i] + lens[i]
    out = np.empty(new_off[n], np.uint8)
    for i in range(n):
        at = new_off[i]
        if pre[i] >= 0:
            for b in range(poff[pre[i]], poff[pre[i] + 1]):
                out[at] = pblob[b]
                at += 1
        for b in range(off[i], off[i + 1]):
            out[at] = blob[b]
            at += 1
    return out, new_off
