"""Two compilations of one program compared (``tilemem diff``): what changed, where, and by
how much.

The two reports hold different variables (another compile option, another batch size), so
they are compared by what both have: tiles (when the targets agree), categories, and tensors
by name without Poplar's ``#tile`` suffix (and their layer prefixes). Per tile: memory used
(highest end, bytes excluding gaps) and maximum live bytes; the tiles that went out of memory
and those that came back; per category and per tensor, the bytes before and after, the
largest growths and shrinkages; and the tensors whose growth on the newly out-of-memory tiles
did it (their bytes on those tiles, summed, before and after).

>>> from tilemem.model import Report
>>> def rep(big):
...     return Report.from_columns(var_id=[0, 1], tile=[0, 0], size=[big, 8],
...         alignment=[4, 4], offset=[0, big], category=["variable"] * 2, eq_class=[0, 1],
...         interference=[[1], [0]], names=["l1/acts#0", "l1/w#0"])
>>> d = compare(rep(64), rep(128))
>>> d.total.delta, d.tensors_grown[0].name, d.tensors_grown[0].delta
(64, 'l1/acts', 64)
"""
from __future__ import annotations

import msgspec
import numpy as np

from ..model import Report
from ..model.names import tensor_codes


class Change(msgspec.Struct, rename="camel"):
    """Bytes of one thing (a tensor, a layer, a category, a tile) before and after."""

    name: str
    before: int
    after: int
    delta: int


class TileChange(msgspec.Struct, rename="camel"):
    tile: int
    used_before: int
    used_after: int
    max_live_before: int
    max_live_after: int


class Comparison(msgspec.Struct, rename="camel"):
    """``tilemem diff``'s answer (and its JSON)."""

    before: str
    after: str
    #: what could not be compared, in one line ("" when everything was)
    left_out: str
    total: Change
    tiles_compared: bool
    out_of_memory_before: int
    out_of_memory_after: int
    gained: list[int]
    lost: list[int]
    max_live_total: Change | None
    tiles_grown: list[TileChange]
    categories: list[Change]
    tensors_grown: list[Change]
    tensors_shrunk: list[Change]
    layers_grown: list[Change]
    layers_shrunk: list[Change]
    #: the tensors whose bytes grew most on the tiles that went out of memory
    cause_of_gained: list[Change]


def _sums(labels: list[str], codes: np.ndarray, weights: np.ndarray) -> dict[str, int]:
    b = np.bincount(codes, weights=weights, minlength=len(labels)).astype(np.int64)
    return {labels[i]: int(b[i]) for i in np.flatnonzero(b).tolist()}


def _changes(a: dict[str, int], b: dict[str, int]) -> list[Change]:
    return [Change(k, a.get(k, 0), b.get(k, 0), b.get(k, 0) - a.get(k, 0))
            for k in sorted(set(a) | set(b))]


def _by_tensor(r: Report, rows: np.ndarray) -> dict[str, int]:
    codes, names = tensor_codes(r, rows)
    return _sums(names, codes, r.size[rows])


def _by_layer(by_tensor: dict[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, b in by_tensor.items():
        parts = name.split("/")
        for i in range(1, len(parts)):
            key = "/".join(parts[:i])
            out[key] = out.get(key, 0) + b
    return out


def _ranked(changes: list[Change], top: int, grown: bool) -> list[Change]:
    sel = [c for c in changes if (c.delta > 0 if grown else c.delta < 0)]
    sel.sort(key=lambda c: (-abs(c.delta), c.name))
    return sel[:top]


def compare(before: Report, after: Report, *, names=("BEFORE", "AFTER"), top: int = 10,
            max_live: tuple | None = None, used: tuple | None = None) -> Comparison:
    """Compare two reports of one program (see the module docstring). ``max_live``:
    ``(before, after)`` per-tile maximum live bytes when the caller has them (computed here
    otherwise, when the tiles can be compared); ``used``: ``(before, after)`` per-tile
    highest ends (default: from the reports' offsets)."""
    from .memory import memory_figures

    ta, tb = before.target, after.target
    same_tiles = (ta.num_tiles == tb.num_tiles and ta.tile_memory == tb.tile_memory)
    left_out = "" if same_tiles else (
        f"per-tile comparison left out: {names[0]} has {ta.num_tiles:,} tiles of "
        f"{ta.tile_memory:,} B, {names[1]} {tb.num_tiles:,} of {tb.tile_memory:,} B "
        "(totals, categories and tensors are compared)")
    ra, rb = np.flatnonzero(before.allocated), np.flatnonzero(after.allocated)
    ta_t, tb_t = _by_tensor(before, ra), _by_tensor(after, rb)
    tensors = _changes(ta_t, tb_t)
    layers = _changes(_by_layer(ta_t), _by_layer(tb_t))
    cats = _changes(
        _sums(list(before.categories), before.category[ra], before.size[ra]),
        _sums(list(after.categories), after.category[rb], after.size[rb]))
    cats.sort(key=lambda c: (-abs(c.delta), c.name))
    total = Change("all tiles", int(before.size[ra].sum()), int(after.size[rb].sum()), 0)
    total.delta = total.after - total.before
    ua = used[0] if used else memory_figures(before).highest_end
    ub = used[1] if used else memory_figures(after).highest_end
    oom_a = np.flatnonzero(ua > ta.tile_memory)
    oom_b = np.flatnonzero(ub > tb.tile_memory)
    gained, lost, grown, ml_total, cause = [], [], [], None, []
    if same_tiles:
        gained = np.setdiff1d(oom_b, oom_a).tolist()
        lost = np.setdiff1d(oom_a, oom_b).tolist()
        if max_live is None:
            from ..liveness import max_live_all

            max_live = tuple(np.array([m.max_live_bytes for m in max_live_all(x)], np.int64)
                             for x in (before, after))
        mla, mlb = max_live
        ml_total = Change("maximum live bytes, summed over tiles", int(mla.sum()),
                          int(mlb.sum()), int(mlb.sum() - mla.sum()))
        d = (ub - ua).astype(np.int64)
        for t in np.lexsort((np.arange(len(d)), -d))[:top].tolist():
            if d[t] > 0:
                grown.append(TileChange(t, int(ua[t]), int(ub[t]), int(mla[t]), int(mlb[t])))
        if gained:
            on = np.asarray(gained, np.int64)
            rows_a = ra[np.isin(before.tile[ra], on)]
            rows_b = rb[np.isin(after.tile[rb], on)]
            cause = _ranked(_changes(_by_tensor(before, rows_a), _by_tensor(after, rows_b)),
                            top, grown=True)
    return Comparison(
        before=names[0], after=names[1], left_out=left_out, total=total,
        tiles_compared=same_tiles, out_of_memory_before=len(oom_a),
        out_of_memory_after=len(oom_b), gained=gained, lost=lost, max_live_total=ml_total,
        tiles_grown=grown, categories=[c for c in cats if c.delta][:top],
        tensors_grown=_ranked(tensors, top, True), tensors_shrunk=_ranked(tensors, top, False),
        layers_grown=_ranked(layers, top, True), layers_shrunk=_ranked(layers, top, False),
        cause_of_gained=cause)
