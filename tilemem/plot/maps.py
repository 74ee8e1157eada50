"""Pictures of tile memory (matplotlib, no pyplot: headless and deterministic).

- ``tile_map(report, tile)``: what to draw for one tile, as columns (one rectangle per
  variable: address range x lifetime in program steps when the report has a timeline, else x a
  *lane* that separates variables sharing bytes).
- ``draw_tile_map(ax, map)``: draws it. Rectangles are one ``PolyCollection`` per category
  (gid ``"vars:<category>"``), so thousands of variables stay one artist each and read back
  exactly; no per-variable labels.
- ``plot_tile(...)`` / ``plot_tiles(...)``: whole figures, saved atomically as PNG, SVG or PDF.

>>> from tilemem.model import Report
>>> r = Report.from_columns(var_id=[0, 1, 2], tile=[0, 0, 0], size=[64, 32, 32],
...     alignment=[4] * 3, offset=[0, 64, 64], category=["variable", "stack", "message"],
...     eq_class=[0, 1, 2], interference=[[1, 2], [], []],
...     class_steps=[[0, 4], [0, 2], [2, 4]])
>>> m = tile_map(r, 0)
>>> m.y_kind, m.x0.tolist(), m.x1.tolist(), m.y0.tolist(), m.y1.tolist()
('steps', [0, 64, 64], [64, 96, 96], [0.0, 0.0, 2.0], [4.0, 2.0, 4.0])
>>> _lanes(m.x0, m.x1).tolist()     # without a timeline: the two sharing [64, 96) get lanes
[0, 0, 1]
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..model import CATEGORIES, Report
from ..figures.memory import GAP_CAUSES, MemoryFigures, memory_figures, tile_histogram

FORMATS = ("png", "svg", "pdf")
LANE_HEIGHT = 0.8


#: A fixed colour per category: the common ones get clearly different hues.
CATEGORY_COLOURS = {
    "variable": "#1f77b4", "stack": "#ff7f0e", "vertexCode": "#2ca02c",
    "controlCode": "#d62728", "message": "#9467bd", "rearrangement": "#8c564b",
    "vertexFieldData": "#e377c2", "vertexInstanceState": "#bcbd22", "constant": "#17becf",
    "internalExchangeCode": "#7f7f7f", "hostExchangeCode": "#aec7e8",
    "copyDescriptor": "#ffbb78", "vectorListDescriptor": "#98df8a", "outputEdge": "#ff9896",
    "hostExchangePacketHeader": "#c5b0d5", "hostMessage": "#c49c94", "controlId": "#f7b6d2",
    "controlTable": "#dbdb8d", "globalExchangeCode": "#9edae5", "globalMessage": "#393b79",
    "globalExchangePacketHeader": "#637939", "instrumentationResults": "#8c6d31",
    "multiple": "#843c39", "sharedCodeStorage": "#7b4173", "sharedDataStorage": "#3182bd",
}


def category_colour(name: str):
    """The colour of a category (the same everywhere); unknown names get a stable grey-ish
    colour from their name."""
    if name in CATEGORY_COLOURS:
        return CATEGORY_COLOURS[name]
    import zlib

    from matplotlib import colormaps

    colours = colormaps["Set3"].colors
    return colours[zlib.crc32(name.encode()) % len(colours)]


GAP_COLOURS = {"alignment": "#f4a582", "elementConstraint": "#d6604d",
               "regionConstraint": "#b2182b", "interleavedBoundary": "#c7c7c7",
               "memoryEnd": "#8073ac", "fragmentation": "#fee090"}


def _darker(colour, factor: float = 0.65):
    from matplotlib.colors import to_rgb

    return tuple(c * factor for c in to_rgb(colour))


@dataclass(frozen=True)
class TileMap:
    """The rectangles of one tile: variable ``rows[i]`` covers addresses ``[x0, x1)`` and
    ``[y0, y1)`` on the y axis (program steps for ``y_kind == "steps"``; for ``"points"``,
    positions of an interval model of the interference found by ``tilemem.liveness.timeline``
    when the report has no steps; lane bands for ``"lanes"``). ``figures`` are the tile's memory figures for this allocation."""

    tile: int
    rows: np.ndarray
    x0: np.ndarray
    x1: np.ndarray
    y0: np.ndarray
    y1: np.ndarray
    category: np.ndarray
    y_kind: str
    figures: MemoryFigures
    label: str = ""

    @property
    def gaps(self):
        return self.figures.gap_list(self.tile)


def tile_map(r: Report, tile: int, offsets: np.ndarray | None = None, *,
             figures: MemoryFigures | None = None, label: str = "") -> TileMap:
    """What ``draw_tile_map`` draws for ``tile`` under ``offsets`` (default: the report's)."""
    off = r.offset if offsets is None else np.asarray(offsets, np.int64)
    rows = r.tile_rows(tile)
    rows = rows[r.size[rows] > 0]
    x0 = off[rows]
    x1 = x0 + r.size[rows]
    steps = _class_steps(r, tile)
    if steps is not None and len(rows):
        life = steps[r.eq_class[rows]].astype(float)
        known = life[:, 1] > life[:, 0]
        first = life[known, 0].min() if known.any() else 0.0
        last = life[known, 1].max() if known.any() else 1.0
        # always-live variables (and classes without steps) are live over the whole run
        whole = r.always_live[rows] | ~known
        y0 = np.where(whole, first, life[:, 0])
        y1 = np.where(whole, last, life[:, 1])
        # without equivalenceClassSteps the liveness stage orders classes from the
        # interference alone: positions, not the program's own steps
        kind = "steps" if r.class_steps is not None else "points"
    else:
        lane = _lanes(x0, x1)
        y0 = lane.astype(float)
        y1 = y0 + LANE_HEIGHT
        kind = "lanes"
    if figures is None:
        figures = memory_figures(r, off, tiles=[tile])
    return TileMap(tile=int(tile), rows=rows, x0=x0, x1=x1, y0=y0, y1=y1,
                   category=r.category[rows].astype(np.int64), y_kind=kind, figures=figures,
                   label=label)


def _class_steps(r: Report, tile: int):
    """``(num_classes, 2)`` [start, end) steps of every class, or ``None``."""
    from ..liveness import timeline

    return timeline(r, tile)


def _lanes(x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
    """Lowest free lane for each interval in address order (interval partitioning): variables
    that share bytes never share a lane; most variables share none and stay in lane 0."""
    lane = np.zeros(len(x0), np.int64)
    order = np.lexsort((-x1, x0))
    busy: list[tuple[int, int]] = []     # (end, lane) of intervals still open
    free: list[int] = []
    used = 0
    for i in order.tolist():
        s = int(x0[i])
        while busy and busy[0][0] <= s:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            k = heapq.heappop(free)
        else:
            k, used = used, used + 1
        lane[i] = k
        heapq.heappush(busy, (int(x1[i]), k))
    return lane


# ---- drawing ---------------------------------------------------------------------------------
def kib_label(x, _pos=None) -> str:
    """An axis tick in KiB (``12K``): the maps' and the live-bytes pictures'."""
    return f"{x / 1024:,.0f}K" if x else "0"


def address_axis(ax, xmax) -> None:
    """Ticks every power-of-two KiB (at most ~12), labelled in KiB."""
    from matplotlib.ticker import FuncFormatter, MultipleLocator

    step = 1024
    while xmax / step > 12:
        step *= 2
    ax.xaxis.set_major_locator(MultipleLocator(step))
    ax.xaxis.set_major_formatter(FuncFormatter(kib_label))


def x_limit(maps: list[TileMap]) -> int:
    """Right end of the address axis: tileMemory, or past the highest end when overflowed."""
    tm = maps[0].figures.target.tile_memory
    top = max(int(m.figures.highest_end[m.tile]) for m in maps)
    return tm if top <= tm else int(top + 0.02 * tm)


def draw_tile_map(ax, m: TileMap, strip_ax=None, *, categories=CATEGORIES, xmax=None,
                  legend: bool = True) -> dict:
    """Draw ``m`` on ``ax`` (and its gaps on ``strip_ax``); returns the artists by role."""
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    f = m.figures
    t = f.target
    tm, ils = t.tile_memory, t.interleaved_memory_start
    xmax = xmax or x_limit([m])
    artists: dict = {"vars": {}}
    ybottom = float(m.y0.min()) if len(m.y0) else 0.0
    ytop = float(m.y1.max()) if len(m.y1) else 1.0
    if ytop <= ybottom:
        ytop = ybottom + 1
    # memory elements and the region boundary, behind everything
    for e in t.memory_element_offsets[1:]:
        if e != ils:
            ax.axvline(e, color="#d0d0d0", lw=0.6, ls=":", zorder=0)
    ax.axvline(ils, color="#404040", lw=1.0, zorder=0)
    ax.axvline(tm, color="#b2182b", lw=1.2, zorder=0)
    if xmax > tm:
        artists["overflow"] = ax.axvspan(tm, xmax, color="#d6604d", alpha=0.15, lw=0, zorder=0)
        ax.text(tm + (xmax - tm) / 2, 1.0, "overflow", transform=ax.get_xaxis_transform(),
                ha="center", va="bottom", fontsize=8, color="#b2182b")
    for x, name in ((ils / 2, "non-interleaved"), ((ils + tm) / 2, "interleaved")):
        ax.text(x, 1.0, name, transform=ax.get_xaxis_transform(), ha="center", va="bottom",
                fontsize=8, color="#404040")
    ax.text(ils, 1.0, f" {ils:,}", transform=ax.get_xaxis_transform(), ha="left",
            va="bottom", fontsize=7, color="#404040")
    # one collection per category, biggest first in the legend
    handles = []
    present = np.unique(m.category)
    # bytes after overlapping: variables of a category that share bytes count them once
    bytes_of = {int(c): _covered(m.x0[m.category == c], m.x1[m.category == c]) for c in present}
    for c in sorted(bytes_of, key=lambda c: (-bytes_of[c], c)):
        sel = m.category == c
        x0, x1, y0, y1 = m.x0[sel], m.x1[sel], m.y0[sel], m.y1[sel]
        verts = np.stack([np.stack([x0, y0], 1), np.stack([x1, y0], 1),
                          np.stack([x1, y1], 1), np.stack([x0, y1], 1)], 1).astype(float)
        name = categories[c] if c < len(categories) else f"category {c}"
        colour = category_colour(name)
        # a thin darker edge separates neighbours and keeps sub-pixel variables visible
        pc = PolyCollection(verts, facecolors=[colour], edgecolors=[_darker(colour)],
                            linewidths=0.25, gid=f"vars:{name}", zorder=2)
        ax.add_collection(pc)
        artists["vars"][name] = pc
        handles.append(Patch(color=colour, label=f"{name} ({bytes_of[c]:,} B)"))
    ax.set_xlim(0, xmax)
    if m.y_kind in ("steps", "points"):
        ax.set_ylim(ytop, ybottom)     # time runs downwards, like an execution trace
        ax.set_ylabel("program step" if m.y_kind == "steps"
                      else "program point (from interference)")
    else:
        ax.set_ylim(ytop + (1 - LANE_HEIGHT), ybottom - (1 - LANE_HEIGHT))
        ax.set_ylabel("lane (variables sharing bytes)")
        if ytop - ybottom <= 12:
            ax.set_yticks(np.arange(int(ybottom), int(np.ceil(ytop))) + LANE_HEIGHT / 2,
                          [str(i) for i in range(int(ybottom), int(np.ceil(ytop)))])
    address_axis(ax, xmax)
    fig = f.by_tile
    i = m.tile
    over = int(fig["totalIncludingGaps"][i]) - tm
    title = (f"{m.label + ': ' if m.label else ''}tile {i}: {int(fig['total'][i]):,} B used, "
             f"{int(fig['totalIncludingGaps'][i]):,} B including gaps of {tm:,}")
    if over > 0:
        title += f" — OUT OF MEMORY by {over:,} B"
    ax.set_title(title, fontsize=10, color="#b2182b" if over > 0 else "black", loc="left",
                 pad=14)
    if legend and handles:
        artists["legend"] = ax.legend(handles=handles[:14], loc="upper left",
                                      bbox_to_anchor=(1.005, 1.0), fontsize=7, frameon=False,
                                      title="category (bytes after overlapping)",
                                      title_fontsize=8)
    if strip_ax is not None:
        artists["gaps"] = _draw_gap_strip(strip_ax, m, xmax)
    return artists


def _covered(x0: np.ndarray, x1: np.ndarray) -> int:
    """Bytes covered by the intervals ``[x0, x1)`` (shared bytes once)."""
    if not len(x0):
        return 0
    o = np.argsort(x0, kind="stable")
    s, e = x0[o], x1[o]
    reach = np.r_[s[0], np.maximum.accumulate(e)[:-1]]
    return int(np.maximum(0, e - np.maximum(s, reach)).sum())


def _draw_gap_strip(ax, m: TileMap, xmax) -> dict:
    """Coverage (grey) and gaps coloured by likely cause, on a thin axis under the map."""
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    f = m.figures
    t = f.target
    g = f.gaps
    sel = g.tile == m.tile
    out = {}
    order = np.argsort(m.x0)
    if len(order):
        ax.broken_barh(list(zip(m.x0[order].tolist(), (m.x1 - m.x0)[order].tolist())), (0, 1),
                       facecolors="#4d4d4d", edgecolors="#4d4d4d", linewidth=0.3, zorder=1)
    handles = []
    for k, cause in enumerate(GAP_CAUSES):
        s = sel & (g.cause == k)
        if not s.any():
            continue
        x0, x1 = g.start[s].astype(float), g.end[s].astype(float)
        verts = np.stack([np.stack([x0, np.zeros_like(x0)], 1), np.stack([x1, 0 * x0], 1),
                          np.stack([x1, 0 * x0 + 1], 1), np.stack([x0, 0 * x0 + 1], 1)], 1)
        pc = PolyCollection(verts, facecolors=[GAP_COLOURS[cause]],
                            edgecolors=[GAP_COLOURS[cause]], linewidths=0.3,
                            gid=f"gaps:{cause}", zorder=2)
        ax.add_collection(pc)
        out[cause] = pc
        handles.append(Patch(color=GAP_COLOURS[cause],
                             label=f"{cause} ({int((g.end[s] - g.start[s]).sum()):,} B)"))
    ax.axvline(t.interleaved_memory_start, color="#404040", lw=1.0)
    ax.axvline(t.tile_memory, color="#b2182b", lw=1.2)
    ax.set_xlim(0, xmax)
    ax.set_ylim(0, 1)
    ax.set_yticks([])
    ax.set_ylabel("gaps", rotation=0, ha="right", va="center", fontsize=8)
    ax.set_xlabel("address (bytes)")
    if handles:
        out["legend"] = ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.6),
                                  fontsize=7, frameon=False, title="gap cause",
                                  title_fontsize=8)
    return out


def power_of_two_locator(vmax):
    """Ticks at a power of two of KiB, a handful up to ``vmax``."""
    from matplotlib.ticker import MultipleLocator

    step = 1024
    while vmax / step > 10:
        step *= 2
    return MultipleLocator(step)


def new_figure(width, height):
    """A matplotlib figure of the pictures' size and resolution (no pyplot state)."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=110, layout="constrained")


def plot_tile(r: Report, tile: int, offsets: np.ndarray | None = None, *,
              compare: np.ndarray | None = None, compare_label: str = "re-run",
              label: str | None = None):
    """The memory map of ``tile``: ``(figure, [TileMap, ...])``. With ``compare`` (another
    offset column) the two allocations are drawn one above the other on the same scales."""
    maps = [tile_map(r, tile, offsets, label=label if label is not None
                     else ("report's allocation" if compare is not None else ""))]
    if compare is not None:
        maps.append(tile_map(r, tile, compare, label=compare_label))
    fig = new_figure(13, 4.2 * len(maps) + 0.6)
    ratios = []
    for _ in maps:
        ratios += [12, 1]
    axes = fig.subplots(2 * len(maps), 1, sharex=True, gridspec_kw={"height_ratios": ratios})
    xmax = x_limit(maps)
    for k, m in enumerate(maps):
        ax, strip = axes[2 * k], axes[2 * k + 1]
        draw_tile_map(ax, m, strip, categories=r.categories, xmax=xmax)
        address_axis(strip, xmax)
    if len(maps) == 2:   # the same y scale for both
        lo = min(a.get_ylim()[1] for a in axes[::2])
        hi = max(a.get_ylim()[0] for a in axes[::2])
        for a in axes[::2]:
            a.set_ylim(hi, lo)
    return fig, maps


def plot_tiles(f: MemoryFigures):
    """Memory per tile (including and excluding gaps) against tileMemory, and the histogram
    of tiles by memory used: ``(figure, data)`` where ``data`` holds what was drawn."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    t = f.target
    tm = t.tile_memory
    total, incl = f.total, f.highest_end
    tiles = np.arange(f.num_tiles)
    fig = new_figure(13, 7.5)
    top, bottom = fig.subplots(2, 1, gridspec_kw={"height_ratios": [3, 2]})
    edges_t = np.arange(f.num_tiles + 1) - 0.5
    top.stairs(incl, edges_t, fill=True, color="#9ecae1", lw=0, label="including gaps",
               gid="includingGaps")
    top.stairs(total, edges_t, fill=True, color="#2171b5", lw=0, label="excluding gaps",
               gid="excludingGaps")
    top.axhline(tm, color="#b2182b", lw=1.2, label=f"tileMemory ({tm:,} B)")
    oom = f.out_of_memory()
    if len(oom):
        top.scatter(oom, incl[oom], s=10, color="#b2182b", zorder=3,
                    label=f"out of memory ({len(oom):,} tiles)", gid="outOfMemory")
    top.set_xlim(-0.5, f.num_tiles - 0.5)
    ymax = max(tm, int(incl.max()) if len(incl) else 0)
    top.set_ylim(0, ymax * 1.05)
    top.yaxis.set_major_formatter(FuncFormatter(kib_label))
    top.yaxis.set_major_locator(power_of_two_locator(ymax))
    top.xaxis.set_major_locator(MaxNLocator(integer=True))
    top.set_xlabel("tile")
    top.set_ylabel("memory")
    used = f.dump_tiles()
    if f.partial:
        # tiles the report holds no variables of: not in the dump, neither empty nor fitting
        absent = np.ones(f.num_tiles, bool)
        absent[used] = False
        top.bar(tiles[absent], ymax * 1.05, width=1.0, color="#e0e0e0", lw=0, zorder=0,
                label=f"not in the dump ({int(absent.sum()):,} tiles)", gid="notInDump")
    imax = int(used[np.argmax(incl[used])]) if len(used) else 0
    where = (f"{len(used):,} of {f.num_tiles:,} tiles in the dump (partial report)"
             if f.partial else f"{f.num_tiles:,} tiles")
    top.set_title(f"{where}: maximum {int(incl[imax]):,} B including gaps on "
                  f"tile {imax}; {len(oom):,} tile(s) out of memory", loc="left", fontsize=10)
    top.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False, ncol=4)

    span = ((int(total[used].min()), int(incl[used].max())) if len(used) else (0, 0))
    edges, counts = tile_histogram(total[used], span=span)
    _, counts_i = tile_histogram(incl[used], span=span)
    bottom.bar(edges[:-1], counts, width=np.diff(edges), align="edge", color="#2171b5",
               label="excluding gaps", gid="histogramExcludingGaps")
    bottom.stairs(counts_i, edges, color="#6baed6", lw=1.5, label="including gaps",
                  gid="histogramIncludingGaps")
    if edges[-1] > tm:
        bottom.axvspan(tm, edges[-1], color="#d6604d", alpha=0.15, lw=0)
        bottom.axvline(tm, color="#b2182b", lw=1.2, label=f"tileMemory ({tm:,} B)")
    bottom.set_xlim(edges[0], edges[-1])
    address_axis(bottom, edges[-1] - edges[0])
    bottom.yaxis.set_major_locator(MaxNLocator(integer=True))
    bottom.set_xlabel("memory used per tile")
    bottom.set_ylabel("tiles")
    bottom.set_title((f"Tiles in the dump ({len(used):,} of {f.num_tiles:,})" if f.partial
                      else f"Tiles in use ({len(used):,})") + " by memory used",
                     loc="left", fontsize=10)
    bottom.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False,
                  ncol=3)
    data = {"tiles": tiles, "total": total, "totalIncludingGaps": incl, "outOfMemory": oom,
            "histogram": (edges, counts), "histogramIncludingGaps": (edges, counts_i),
            "inDump": used}
    return fig, data


def picture_format(path) -> str:
    """``png``, ``svg`` or ``pdf`` from the extension; ``ReportError`` otherwise."""
    from ..errors import ReportError

    fmt = Path(path).suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ReportError(f"unknown picture format {fmt!r}: use .png, .svg or .pdf",
                          path=str(path))
    return fmt


def save_figure(fig, path) -> None:
    """Write ``fig`` atomically; the format comes from the extension (png, svg or pdf).
    Metadata that changes between runs (dates, versions, ids) is left out."""
    import matplotlib

    from ..load import atomic_write

    fmt = picture_format(path)
    metadata = {"png": {"Software": None}, "svg": {"Date": None, "Creator": None},
                "pdf": {"CreationDate": None, "Creator": None, "Producer": None}}[fmt]
    with matplotlib.rc_context({"svg.hashsalt": "tilemem", "svg.fonttype": "path"}):
        with atomic_write(path) as fh:
            fig.savefig(fh, format=fmt, metadata=metadata)
