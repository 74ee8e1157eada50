"""Out-of-memory diagnosis: why a tile does not fit, and whether a better allocation would.

For every tile whose allocation passes tileMemory (worst first):

- ``excess``: the highest end address minus tileMemory;
- the bound: the tile's maximum live bytes, always-live bytes included
  (``tilemem.liveness``): no allocation can use less memory than that. When the search for it
  runs out of time, ``maxLiveBytes`` is the best found (still a valid lower bound) and
  ``maxLiveUpperBytes`` an upper bound;
- the verdict (``VERDICTS``): the live data alone does not fit -> the program must hold less
  data on the tile; otherwise the packer (``tilemem.pack.driver.allocate``) re-packs the tile,
  and either fits or still overflows, the difference between its highest end and the bound
  being what gaps and placement rules cost;
- the peak live set: its largest variables and classes, and its bytes by category;
- the bytes lost in gaps by likely cause (alignment, element and region constraints, the
  interleaved split, ...) in the report's allocation and in the re-pack (``tilemem.report``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from .model import Report
from .report import GAP_CAUSES, INTERLEAVED, NON_INTERLEAVED, MemoryFigures, memory_figures

#: verdict code -> template of the sentence shown to users
VERDICTS = {
    "reduceData": "live data alone exceeds memory by {over:,} bytes: reduce data",
    "repackFits": "live data fits: re-packing fits ({free:,} bytes to spare)",
    "repackOverflows": ("live data fits: re-packing still overflows by {over:,} bytes "
                        "(gaps and constraints cost {cost:,})"),
    "notRepacked": ("live data fits with {free:,} bytes to spare; re-packing was not tried "
                    "({why})"),
}


@dataclass
class TileDiagnosis:
    """What ``tilemem oom`` says about one out-of-memory tile (JSON: ``to_json``)."""

    tile: int
    tile_memory: int
    highest_end: int
    excess: int
    max_live_bytes: int
    max_live_upper_bytes: int
    always_live_bytes: int
    bound_exact: bool
    verdict_code: str
    verdict: str
    repack: dict | None
    peak_vars: list[dict]
    peak_classes: list[dict]
    peak_by_category: dict[str, int]
    regions: dict
    gap_bytes: dict[str, int]
    repack_gap_bytes: dict[str, int] | None = None
    peak_var_count: int = 0
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        d = asdict(self)
        keys = {"tile_memory": "tileMemory", "highest_end": "highestEnd",
                "max_live_bytes": "maxLiveBytes", "max_live_upper_bytes": "maxLiveUpperBytes",
                "always_live_bytes": "alwaysLiveBytes",
                "bound_exact": "boundExact", "verdict_code": "verdictCode",
                "peak_vars": "peakVars", "peak_classes": "peakClasses",
                "peak_by_category": "peakByCategory", "gap_bytes": "gapBytes",
                "repack_gap_bytes": "repackGapBytes", "peak_var_count": "peakVarCount"}
        return {keys.get(k, k): v for k, v in d.items()}


def diagnose(r: Report, tiles=None, *, offsets: np.ndarray | None = None,
             time_limit: float = 10.0, top: int = 10, repack: bool = True,
             method: str = "auto",
             figures: MemoryFigures | None = None, progress=None) -> list[TileDiagnosis]:
    """Diagnose the out-of-memory tiles of ``offsets`` (default: the report's allocation),
    worst first; ``tiles`` restricts the search. ``progress(tile)`` is called per tile."""
    fig = figures if figures is not None else memory_figures(r, offsets)
    oom = fig.out_of_memory()
    if tiles is not None:
        oom = oom[np.isin(oom, np.asarray(tiles, np.int64))]
    tm = r.target.tile_memory
    bounds = _bounds(r, oom, time_limit, progress)
    # re-pack every tile whose live data fits, in one packer call
    fits = [t for t in oom.tolist() if bounds[t].max_live_bytes <= tm]
    packed, pack_fig, why, why_not = {}, None, None, {}
    if fits and repack:
        try:
            from .pack.driver import allocate
        except ImportError:
            why = "no packer in this installation"
        else:
            a = allocate(r, method=method, tiles=fits, time_limit=time_limit)
            offsets_new = np.asarray(a.offsets, np.int64)
            rejected = _rejected_by_checker(r, offsets_new, fits)
            packed = {int(res.tile): res for res in a.tiles if int(res.tile) not in rejected}
            why_not = {t: f"the re-pack failed the checker: {v}" for t, v in rejected.items()}
            pack_fig = memory_figures(r, offsets_new, tiles=fits)
    elif fits:
        why = "re-packing turned off"
    out = []
    for t in oom.tolist():
        out.append(_diagnose_tile(r, t, fig, bounds[t], packed.get(t), pack_fig,
                                  why_not.get(t, why), top))
    return out


def _rejected_by_checker(r: Report, offsets: np.ndarray, tiles) -> dict[int, str]:
    """Tiles whose re-pack breaks a placement rule (``tilemem.check``, which shares no code
    with the packers), with the first violation: their re-pack is not trusted."""
    from dataclasses import replace

    try:
        from .check import check_allocation
    except ImportError:
        return {}
    # only the re-packed tiles: the others keep the report's offsets, which are not on trial
    sub = replace(r, allocated=r.allocated & np.isin(r.tile, tiles), _tile_index=None)
    res = check_allocation(sub, offsets, limit=1 << 20)
    out: dict[int, str] = {}
    for v in res.violations:
        out.setdefault(int(v.tile), str(v))
    return out


def _bounds(r: Report, tiles: np.ndarray, time_limit: float, progress) -> dict:
    """``MaxLive`` of every tile: all at once when the liveness stage offers it (its time
    limit is shared by all tiles, so it gets ``time_limit`` per tile)."""
    if not len(tiles):
        return {}
    from . import liveness

    if hasattr(liveness, "max_live_all"):
        found = liveness.max_live_all(r, tiles, time_limit=time_limit * len(tiles))
        if progress is not None:
            for t in tiles.tolist():
                progress(t)
        return {int(m.tile): m for m in found}
    out = {}
    for t in tiles.tolist():
        out[t] = liveness.max_live(r, t, time_limit=time_limit)
        if progress is not None:
            progress(t)
    return out


def _diagnose_tile(r: Report, t: int, fig: MemoryFigures, ml, res, pack_fig, why,
                   top) -> TileDiagnosis:
    tm = r.target.tile_memory
    high = int(fig.highest_end[t])
    bound = int(ml.max_live_bytes)
    repack = None
    notes = []
    upper = int(getattr(ml, "upper_bound_bytes", bound))
    if not ml.exact:
        notes.append(f"maximum live bytes not proven within the time limit: between "
                     f"{bound:,} and {upper:,}")
    if bound > tm:
        code = "reduceData"
        verdict = VERDICTS[code].format(over=bound - tm)
    elif res is None:
        code = "notRepacked"
        verdict = VERDICTS[code].format(free=tm - bound, why=why or "no result")
    else:
        used = int(res.total_including_gaps)
        repack = {"method": str(res.method), "status": str(res.status),
                  "overflowBytes": int(res.overflow_bytes), "totalIncludingGaps": used,
                  "costOverBound": used - bound}
        if int(res.overflow_bytes) == 0 and used <= tm:
            code = "repackFits"
            verdict = VERDICTS[code].format(free=tm - used)
        else:
            code = "repackOverflows"
            verdict = VERDICTS[code].format(over=max(used - tm, int(res.overflow_bytes)),
                                            cost=used - bound)
            if str(res.status) != "optimal":
                verdict += f" - {res.status}, not proven optimal: a better packing may fit"
    rows = np.asarray(ml.peak_rows, np.int64)
    order = rows[np.argsort(-r.size[rows], kind="stable")]
    peak_vars = [{"var": int(r.var_id[i]), "name": r.name(int(i)), "size": int(r.size[i]),
                  "category": r.category_name(int(i)), "class": int(r.eq_class[i]),
                  "alwaysLive": bool(r.always_live[i])} for i in order[:top]]
    classes, inverse = np.unique(r.eq_class[rows], return_inverse=True)
    cbytes = np.bincount(inverse, weights=r.size[rows], minlength=len(classes)).astype(np.int64)
    ccount = np.bincount(inverse, minlength=len(classes))
    corder = np.argsort(-cbytes, kind="stable")[:top]
    peak_classes = []
    for k in corder.tolist():
        members = rows[inverse == k]
        biggest = members[np.argmax(r.size[members])]
        peak_classes.append({"class": int(classes[k]), "bytes": int(cbytes[k]),
                             "vars": int(ccount[k]), "largest": r.name(int(biggest))})
    cat = np.bincount(r.category[rows], weights=r.size[rows], minlength=len(r.categories))
    peak_by_category = {r.categories[c]: int(cat[c]) for c in np.argsort(-cat, kind="stable")
                        if cat[c]}

    def gap_bytes(f):
        g = f.gaps
        sel = g.tile == t
        b = np.bincount(g.cause[sel], weights=g.size[sel], minlength=len(GAP_CAUSES))
        return {name: int(b[i]) for i, name in enumerate(GAP_CAUSES)}

    ils = r.target.interleaved_memory_start
    regions = {
        "nonInterleaved": {"capacity": ils, "used": int(fig.region_bytes[NON_INTERLEAVED, t]),
                           "includingGaps": int(fig.region_including_gaps[NON_INTERLEAVED, t])},
        "interleaved": {"capacity": tm - ils, "used": int(fig.region_bytes[INTERLEAVED, t]),
                        "includingGaps": int(fig.region_including_gaps[INTERLEAVED, t])},
        "overflowed": {"used": int(fig.region_bytes[2, t]),
                       "includingGaps": int(fig.region_including_gaps[2, t])},
    }
    return TileDiagnosis(
        tile=t, tile_memory=tm, highest_end=high, excess=high - tm, max_live_bytes=bound,
        max_live_upper_bytes=upper,
        always_live_bytes=int(ml.always_live_bytes), bound_exact=bool(ml.exact),
        verdict_code=code, verdict=verdict, repack=repack, peak_vars=peak_vars,
        peak_classes=peak_classes, peak_by_category=peak_by_category, regions=regions,
        gap_bytes=gap_bytes(fig),
        repack_gap_bytes=gap_bytes(pack_fig) if (pack_fig is not None and res is not None)
        else None, peak_var_count=len(rows), notes=notes)


def render(d: TileDiagnosis, console) -> None:
    """One screen about one tile (rich)."""
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    tm = d.tile_memory
    head = Text()
    head.append(f"highest end {d.highest_end:,} B of tileMemory {tm:,} B: ")
    head.append(f"{d.excess:,} B over\n", style="bold red")
    head.append(f"maximum live bytes {d.max_live_bytes:,} B "
                f"({'exact' if d.bound_exact else 'best found, not proven'}; always-live "
                f"{d.always_live_bytes:,} B, {d.peak_var_count:,} variables live at the peak)\n")
    style = {"reduceData": "bold red", "repackFits": "bold green",
             "repackOverflows": "bold yellow"}.get(d.verdict_code, "bold")
    head.append(d.verdict, style=style)
    if d.repack:
        head.append(f"\nre-pack: {d.repack['method']} ({d.repack['status']}), highest end "
                    f"{d.repack['totalIncludingGaps']:,} B")
    for n in d.notes:
        head.append(f"\nnote: {n}", style="dim")

    pv = Table("var", "name", "category", "class", "bytes", title="Largest live at the peak",
               title_justify="left", box=None, pad_edge=False)
    for v in d.peak_vars:
        pv.add_row(str(v["var"]), _short(v["name"], 36) + (" *" if v["alwaysLive"] else ""),
                   v["category"], str(v["class"]), f"{v['size']:,}")
    pc = Table("class", "vars", "bytes", "largest", title="Largest classes at the peak",
               title_justify="left", box=None, pad_edge=False)
    for c in d.peak_classes[:6]:
        pc.add_row(str(c["class"]), str(c["vars"]), f"{c['bytes']:,}", _short(c["largest"], 28))
    cat = Table("category", "bytes", title="Peak by category", title_justify="left", box=None,
                pad_edge=False, min_width=30)
    for name, b in list(d.peak_by_category.items())[:8]:
        cat.add_row(name, f"{b:,}")
    gaps = Table("gap cause", "report", *(["re-pack"] if d.repack_gap_bytes else []),
                 title="Bytes lost in gaps", title_justify="left", box=None, pad_edge=False)
    for name in GAP_CAUSES:
        a = d.gap_bytes[name]
        b = d.repack_gap_bytes[name] if d.repack_gap_bytes else None
        if a or b:
            gaps.add_row(name, f"{a:,}", *([f"{b:,}"] if d.repack_gap_bytes else []))
    reg = Table("region", "used", "incl. gaps", "capacity", title="Regions (report)",
                title_justify="left", box=None, pad_edge=False)
    for name, v in d.regions.items():
        reg.add_row(name, f"{v['used']:,}", f"{v['includingGaps']:,}",
                    f"{v['capacity']:,}" if "capacity" in v else "")
    for table in (pv, pc, cat, gaps, reg):    # numbers right-aligned
        for col in table.columns:
            if col.header in ("bytes", "vars", "class", "var", "report", "re-pack", "used",
                              "incl. gaps", "capacity"):
                col.justify = "right"

    body = Table.grid(padding=(1, 0))
    body.add_row(head)
    body.add_row(pv)
    if console.width >= 120:     # two tables a row on a wide terminal, else one
        for a, b in ((pc, cat), (gaps, reg)):
            g = Table.grid(padding=(0, 4))
            g.add_row(a, b)
            body.add_row(g)
    else:
        for table in (pc, cat, gaps, reg):
            body.add_row(table)
    console.print(Panel(body, title=f"[bold]tile {d.tile}[/bold]: out of memory by "
                        f"{d.excess:,} B", title_align="left"))


def _short(s: str, n: int) -> str:
    return s if len(s) <= n else "…" + s[-(n - 1):]
