"""What the HTML report shows, as compact columns: the data half of ``tilemem html``.

``page_data`` gathers, for a report and an allocation, everything the page draws, from the
same stages the static pictures use: ``MemoryFigures`` (figures stage) for the overview and
the gaps, ``TileMap`` (``tilemem.plot.maps``) for the rectangles of a tile, ``step_profile``
/ ``max_over_tiles`` (liveness stage) for live bytes over program steps, and the ``oom``
diagnosis for the verdict of out-of-memory tiles.

Size: the overview covers every tile (a few numbers each); full maps (one rectangle per
variable, with its name) only for the tiles that matter, chosen by ``choose_tiles`` under a
budget of variables. Columns travel as base64 little-endian typed arrays (``encode``), names
as one newline-joined string: ~70 bytes a variable instead of ~300 as JSON objects.

>>> encode(np.array([1, 2, 300]))
{'dtype': 'i4', 'b64': 'AQAAAAIAAAAsAQAA'}
>>> encode(np.array([3, 250]), small=True)['dtype']
'u1'
"""
from __future__ import annotations

import base64
from dataclasses import dataclass, field

import msgspec
import numpy as np

from ..model import FLAG_FIELDS, Report
from ..figures.memory import GAP_CAUSES, OVERFLOWED, REGIONS, MemoryFigures, memory_figures, tile_histogram
from .maps import CATEGORY_COLOURS, GAP_COLOURS, category_colour, tile_map

#: Tiles per IPU by tile memory (FACTS.md): used to mark IPU boundaries on multi-IPU reports
#: when the target does not say how many tiles an IPU has.
TILES_PER_IPU_BY_MEMORY = {262144: 1216, 638976: 1472}

#: Flags shown on hover, bit i of the ``flags`` column (report field names).
FLAGS = ("alwaysLive", "isConstant", "inInterleavedMem", "executable", "vertexCode",
         "lowest256KB")

#: Default budget of variables drawn in full maps (~70 bytes each in the page).
MAX_VARS = 250_000
#: How many of the fullest tiles (that are not out of memory) get a full map.
FULLEST = 8
#: What an embedded tile costs besides its variables, in variables' worth (~70 bytes each):
#: its gaps, figures and live-bytes profile, ~1.7 KB. Counted only when deciding whether every
#: tile fits, so a Pod of small tiles does not embed 23,552 maps (40 MB) because its
#: variables alone would fit the budget.
TILE_COST = 25
#: Largest variables listed as live at the peak.
PEAK_LIST = 50


def encode(a, small: bool = False) -> dict:
    """A numeric column as ``{"dtype": "i4" | "u1" | "f8", "b64": ...}`` (little endian)."""
    a = np.asarray(a)
    if a.dtype.kind in "biu" or (a.size and np.all(np.mod(a, 1) == 0)):
        lo, hi = (int(a.min()), int(a.max())) if a.size else (0, 0)
        if small and lo >= 0 and hi < 256:
            return {"dtype": "u1", "b64": base64.b64encode(a.astype("u1").tobytes()).decode()}
        if -(2 ** 31) <= lo and hi < 2 ** 31:
            return {"dtype": "i4", "b64": base64.b64encode(a.astype("<i4").tobytes()).decode()}
    return {"dtype": "f8", "b64": base64.b64encode(a.astype("<f8").tobytes()).decode()}


def ipu_boundaries(target) -> tuple[list[int], str]:
    """Tile numbers where a new IPU starts, and how that is known."""
    per = getattr(target, "tiles_per_ipu", None)
    how = "from the report"
    if not per:
        per = TILES_PER_IPU_BY_MEMORY.get(target.tile_memory)
        how = f"{per} tiles per IPU, inferred from tileMemory" if per else ""
    if not per or target.num_tiles <= per:
        return [], how
    return list(range(per, target.num_tiles, per)), how


@dataclass
class Included:
    tile: int
    why: list[str] = field(default_factory=list)


def choose_tiles(fig: MemoryFigures, r: Report, requested=None, *, changed=None,
                 fullest: int = FULLEST, max_vars: int = MAX_VARS):
    """The tiles that get a full map, with why, and what was left out for the budget.

    Order: tiles asked for (always, whatever the budget), out-of-memory tiles worst first,
    the ``fullest`` fullest other tiles, then tiles whose allocation changed most
    (``changed``: tiles, most changed first). A tile joins while the variables of the tiles
    chosen so far stay within ``max_vars``.

    >>> from tilemem.model import Report
    >>> from tilemem.model.target import Target
    >>> t = Target(num_tiles=4, tile_memory=100, interleaved_memory_start=50,
    ...            memory_element_offsets=np.array([0, 50]))
    >>> r = Report.from_columns(target=t, var_id=range(4), tile=[0, 1, 2, 3],
    ...     size=[120, 90, 30, 60], alignment=[4] * 4, offset=[0] * 4,
    ...     category=["variable"] * 4, eq_class=range(4), interference=[[]] * 4)
    >>> chosen, left = choose_tiles(memory_figures(r), r, [2], fullest=1)
    >>> [(c.tile, c.why) for c in chosen], left
    ([(2, ['asked for']), (0, ['out of memory']), (1, ['fullest']), (3, ['all tiles fit'])], {})
    >>> chosen, left = choose_tiles(memory_figures(r), r, [2], fullest=1, max_vars=2)
    >>> [(c.tile, c.why) for c in chosen], left
    ([(2, ['asked for']), (0, ['out of memory'])], {'fullest': 1})
    """
    counts = np.bincount(r.tile[r.allocated], minlength=r.num_tiles)
    chosen: dict[int, Included] = {}
    left: dict[str, int] = {}
    total = 0

    def add(t: int, why: str, force: bool = False) -> None:
        nonlocal total
        if t in chosen:
            if why not in chosen[t].why:
                chosen[t].why.append(why)
            return
        if not force and total + counts[t] > max_vars:
            left[why] = left.get(why, 0) + 1
            return
        chosen[t] = Included(t, [why])
        total += int(counts[t])

    for t in ([] if requested is None else np.asarray(requested).tolist()):
        add(int(t), "asked for", force=True)
    oom = fig.out_of_memory()
    for t in oom.tolist():
        add(t, "out of memory")
    used = np.flatnonzero(counts > 0)
    rest = used[~np.isin(used, oom)]
    for t in rest[np.argsort(-fig.highest_end[rest], kind="stable")][:fullest].tolist():
        add(t, "fullest")
    for t in ([] if changed is None else list(changed)[:fullest]):
        add(int(t), "changed most")
    if counts.sum() + TILE_COST * len(used) <= max_vars:   # a small report: every tile fits
        for t in used.tolist():
            if t not in chosen:
                add(t, "all tiles fit")
    return list(chosen.values()), left


def _flags(r: Report, rows: np.ndarray) -> np.ndarray:
    by_field = {v: k for k, v in FLAG_FIELDS.items()}
    out = np.zeros(len(rows), np.int64)
    for bit, name in enumerate(FLAGS):
        out |= getattr(r, by_field[name])[rows].astype(np.int64) << bit
    return out


def _gaps(fig: MemoryFigures, tile: int) -> dict:
    g = fig.gaps
    sel = g.tile == tile
    return {"start": g.start[sel].tolist(), "end": g.end[sel].tolist(),
            "cause": g.cause[sel].tolist()}


def _tile_figures(fig: MemoryFigures, tile: int) -> dict:
    b = fig.by_tile
    return {k: int(v[tile]) for k, v in b.items()} | {
        "gapBytes": fig.gaps.bytes_by_cause(fig.num_tiles)[:, tile].tolist()}


def tile_entry(r: Report, tile: int, fig: MemoryFigures, offsets=None, *,
               compare=None, fig_b: MemoryFigures | None = None) -> dict:
    """One tile's map, gaps, figures and liveness, as the page reads them."""
    from ..liveness import live_rows_at, step_profile

    m = tile_map(r, tile, offsets, figures=fig)
    rows = m.rows
    names = "\n".join(r.name(int(i)).replace("\n", " ") for i in rows)
    y0, y1 = m.y0, m.y1
    e = {
        "tile": int(tile), "kind": m.y_kind, "n": int(len(rows)),
        "x0": encode(m.x0), "size": encode(m.x1 - m.x0), "y0": encode(np.floor(y0)),
        "y1": encode(np.ceil(y1) if m.y_kind != "lanes" else np.floor(y0)),
        "var": encode(r.var_id[rows]), "align": encode(r.alignment[rows]),
        "cat": encode(m.category, small=True), "cls": encode(r.eq_class[rows]),
        "flags": encode(_flags(r, rows), small=True), "names": names,
        "gaps": _gaps(fig, tile), "figures": _tile_figures(fig, tile),
    }
    if compare is not None:
        e["x0b"] = encode(np.asarray(compare, np.int64)[rows])
        e["gapsB"] = _gaps(fig_b, tile)
        e["figuresB"] = _tile_figures(fig_b, tile)
    p = step_profile(r, tile) if m.y_kind != "lanes" else None
    if p is None:
        e["live"] = None
        return e
    local = {int(x): k for k, x in enumerate(rows.tolist())}
    peak = {}
    if len(p.start):
        lo, hi = p.peak_steps
        live = live_rows_at(r, tile, lo)
        live = live[r.size[live] > 0]
        order = live[np.argsort(-r.size[live], kind="stable")]
        peak = {"step": lo, "end": hi, "count": int(len(live)),
                "alwaysLive": int(r.always_live[live].sum()),
                "rows": [local[int(x)] for x in order[:PEAK_LIST].tolist()]}
    e["live"] = {"kind": p.kind, "start": encode(p.start), "bytes": encode(p.live_bytes),
                 "floor": p.always_live_bytes, "peakBytes": p.peak_bytes, "peak": peak,
                 "unplaced": int(len(p.unplaced_rows))}
    return e


def _diagnoses(r: Report, tiles, offsets, fig, time_limit, repack, method, progress,
               budget) -> tuple[dict | None, dict]:
    """The program summary of every out-of-memory tile (``None`` when none is), and
    ``{tile: oom diagnosis JSON}`` for those among ``tiles``."""
    from ..figures.oom import diagnose_program
    from ..figures.verdicts import OomVerdict

    if not len(fig.out_of_memory()):
        return None, {}
    from ..figures.plan import plan_that_fits

    summary, found, _ = diagnose_program(r, offsets=offsets, time_limit=time_limit, top=15,
                                      repack=repack, method=method, figures=fig,
                                      progress=progress, budget=budget)
    # the plan that fits, as ``tilemem oom`` ends its next steps (the same tiles' class
    # graphs, taken apart once for both)
    summary.plan = plan_that_fits(
        r, [d.tile for d in found if d.verdict_code == OomVerdict.REDUCE_DATA],
        time_limit=time_limit)
    keep = set(int(t) for t in tiles)
    return (msgspec.to_builtins(summary),
            {d.tile: msgspec.to_builtins(d) for d in found if d.tile in keep})


def page_data(r: Report, *, offsets=None, compare=None, compare_label: str = "allocation",
              requested=None, title: str = "", fullest: int = FULLEST,
              max_vars: int = MAX_VARS, time_limit: float = 2.0, repack: bool = True,
              method: str = "auto", progress=None, budget: float | None = None,
              against: Report | None = None, against_label: str = "other",
              config=None) -> dict:
    """Everything the page shows (see the module docstring). ``offsets``: the allocation
    shown (default the report's); ``compare``: another offset column for the Compare view;
    ``against``: another compilation of the program (``tilemem diff``'s comparison and both
    tile profiles). ``progress(stage: str)`` is called as the work goes."""
    from ..liveness import max_over_tiles

    say = progress or (lambda stage: None)
    t = r.target
    say("memory figures")
    fig = memory_figures(r, offsets)
    fig_b = changed = None
    if compare is not None:
        fig_b = memory_figures(r, compare)
        delta = fig_b.highest_end - fig.highest_end
        over_a, over_b = fig.region_bytes[OVERFLOWED], fig_b.region_bytes[OVERFLOWED]
        moved = np.flatnonzero((delta != 0) | (over_a != over_b))
        changed = moved[np.argsort(-np.abs(delta[moved]), kind="stable")]
    chosen, left = choose_tiles(fig, r, requested, changed=changed, fullest=fullest,
                                max_vars=max_vars)
    boundaries, ipu_how = ipu_boundaries(t)
    cats = list(r.categories)
    data: dict = {
        "title": title,
        "target": {"numTiles": t.num_tiles, "tileMemory": t.tile_memory,
                   "interleavedMemoryStart": t.interleaved_memory_start,
                   "elements": t.memory_element_offsets.tolist(),
                   "ipuBoundaries": boundaries, "ipuHow": ipu_how},
        "categories": cats, "categoryColours": [_hex(category_colour(c)) for c in cats],
        "gapCauses": list(GAP_CAUSES), "gapColours": [GAP_COLOURS[c] for c in GAP_CAUSES],
        "flags": list(FLAGS),
        "timeline": ("steps" if r.class_steps is not None else "interference"),
        "included": [{"tile": c.tile, "why": c.why} for c in chosen], "leftOut": left,
        "outOfMemory": fig.out_of_memory().tolist(),
        "compareLabel": compare_label if compare is not None else None,
    }
    say("out-of-memory diagnosis")
    program, diag = _diagnoses(r, [c.tile for c in chosen], offsets, fig, time_limit, repack,
                               method, None, budget)
    if program is not None and config is not None:
        # the whole configuration that fits (``tilemem config``), asked for
        from ..figures.config.answer import configure

        say("the configuration that fits")
        program["config"] = msgspec.to_builtins(configure(r, config))
    data["program"] = program
    say("tile maps and liveness")
    tiles = {}
    for c in chosen:
        e = tile_entry(r, c.tile, fig, offsets, compare=compare, fig_b=fig_b)
        e["why"] = c.why
        e["oom"] = diag.get(c.tile)
        tiles[str(c.tile)] = e
    data["tiles"] = tiles
    say("maximum over tiles")
    mot = max_over_tiles(r)
    data["maxOverTiles"] = None if mot is None else {
        "start": encode(mot[0]), "bytes": encode(mot[1]), "tile": encode(mot[2])}
    if compare is not None:
        a, b = fig.highest_end, fig_b.highest_end
        oa, ob = fig.region_bytes[OVERFLOWED], fig_b.region_bytes[OVERFLOWED]
        data["compare"] = {
            "changed": [{"tile": int(k), "endA": int(a[k]), "endB": int(b[k]),
                         "overA": int(oa[k]), "overB": int(ob[k])} for k in changed.tolist()],
            "fitA": int((a <= t.tile_memory).sum()), "fitB": int((b <= t.tile_memory).sum())}
    fig_other = None
    if against is not None:
        from ..figures.diff import compare as compare_reports

        say("comparing the two compilations")
        fig_o = memory_figures(against)
        d = compare_reports(r, against, names=(title or "this report", against_label),
                            used=(fig.highest_end, fig_o.highest_end))
        data["against"] = msgspec.to_builtins(d)
        fig_other = fig_o if d.tiles_compared else None
    return {"data": data, "figures": fig, "figuresB": fig_b, "figuresOther": fig_other}


def overview_columns(fig: MemoryFigures) -> dict:
    """Per-tile columns of the overview chart (numpy, for the plotting library)."""
    tm = fig.target.tile_memory
    incl, total = fig.highest_end, fig.total
    return {"tile": np.arange(fig.num_tiles), "incl": incl, "total": total,
            "over": np.maximum(incl - tm, 0), "gaps": incl - total,
            "nonInterleaved": fig.region_bytes[0], "interleaved": fig.region_bytes[1],
            "overflowed": fig.region_bytes[OVERFLOWED]}


def histogram_columns(fig: MemoryFigures) -> dict:
    incl, total = fig.highest_end, fig.total
    used = fig.dump_tiles()      # a partial report's missing tiles are not empty tiles
    span = (int(total[used].min()), int(incl[used].max())) if len(used) else (0, 0)
    edges, counts = tile_histogram(total[used], span=span)
    _, counts_i = tile_histogram(incl[used], span=span)
    return {"left": edges[:-1], "right": edges[1:], "excl": counts, "incl": counts_i}


def totals_table(fig: MemoryFigures) -> list[dict]:
    """Bytes by category and region over all tiles, largest first (then the totals)."""
    per = (fig.non_overlapped + fig.overlapped).sum(axis=2)       # (categories, regions)
    rows = []
    for c in np.argsort(-per.sum(axis=1), kind="stable").tolist():
        if per[c].sum() == 0:
            continue
        rows.append({"name": fig.categories[c],
                     **{REGIONS[k]: int(per[c, k]) for k in range(3)},
                     "total": int(per[c].sum())})
    return rows


def _hex(colour) -> str:
    if isinstance(colour, str):
        return colour
    from matplotlib.colors import to_hex

    return to_hex(colour)


__all__ = ["page_data", "choose_tiles", "tile_entry", "encode", "ipu_boundaries",
           "overview_columns", "histogram_columns", "totals_table", "CATEGORY_COLOURS"]
