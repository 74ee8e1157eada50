"""Every text view of tilemem: what the commands print for people, and ``human_bytes``.

The stages return data (``Info``, ``MemoryFigures``, ``MaxLive``, ``Allocation``,
``CheckResult``, ``TileDiagnosis``); the views here turn it into text, or into rich tables
printed on the console the caller passes (the commands make it: ``tilemem.commands.options``).
Here too are the JSON documents of ``tilemem liveness`` and ``tilemem alloc`` (typed msgspec
structs, keys in camel case), whose stages return plain results; the other stages' results are
their own JSON. Nothing here imports click: the CLI is the only layer that does.
"""
from __future__ import annotations

import msgspec
import numpy as np

from .figures.memory import (GAP_CAUSES, INTERLEAVED, NON_INTERLEAVED, OVERFLOWED,
                             MemoryFigures, tile_histogram)
from .figures.oom import TileDiagnosis
from .figures.summary import Info


def human_bytes(n: int) -> str:
    """``1,234,567 (1.2 M)``-style bytes, as in Poplar's profile summary.

    >>> human_bytes(131608)
    '131,608 (128.5 K)'
    """
    value = float(n)
    for unit in ("", "K", "M", "G", "T"):
        if abs(value) < 1024 or unit == "T":
            break
        value /= 1024
    return f"{n:,}" if unit == "" else f"{n:,} ({value:.1f} {unit})"


# ---- tilemem info --------------------------------------------------------------------------
def info_view(c, name: str, d: Info) -> None:
    """The summary of a report: geometry, tiles, variables, bytes by category, fullest tiles."""
    from rich.table import Column, Table

    t = d.target
    c.print(f"[bold]{name}[/bold]")
    ipus = f" on {t.num_ipus} IPUs of {t.tiles_per_ipu:,}" if t.num_ipus > 1 else ""
    from .figures.summary import dump_note

    partial = dump_note(d.tiles_in_use, t.num_tiles)
    c.print(f"  tiles: {t.num_tiles:,}{ipus} ({d.tiles_in_use:,} in use), "
            f"tileMemory {human_bytes(t.tile_memory)}, interleaved from "
            f"{t.interleaved_memory_start:,}, {t.memory_elements} memory elements")
    c.print(f"  variables: {d.variables:,} allocated"
            + (f" (+{d.unallocated_variables:,} unallocated)" if d.unallocated_variables else "")
            + f", {d.interleaved_variables:,} interleaved; classes: "
            f"{d.equivalence_classes:,}; interference edges: {d.interference_edges:,}")
    c.print(f"  constraints: {d.element_constraints:,} element, {d.region_constraints:,} "
            f"region; class steps: {'yes' if d.class_steps else 'no'}")
    if partial:
        c.print(f"  {partial}")
    c.print(f"  bytes: {human_bytes(d.total_bytes_after_overlapping)} after overlapping "
            f"(report's offsets; sum of sizes {d.total_bytes:,} (before overlapping): "
            f"variables that share memory count once each), always-live "
            f"{human_bytes(d.always_live_bytes)}; tiles over memory (report's offsets): "
            f"{d.tiles_over_memory:,}")
    cats = Table("category", Column("sum of sizes", justify="right"),
                 title="Bytes by category (sum of sizes, before overlapping)",
                 title_justify="left")
    for cat, b in d.bytes_by_category.items():
        cats.add_row(cat, f"{b:,}")
    c.print(cats)
    multi = t.num_ipus > 1
    tiles = Table(Column("tile", justify="right"),
                  *([Column("IPU", justify="right")] if multi else []),
                  Column("after overlapping", justify="right"),
                  Column("sum of sizes", justify="right"),
                  Column("highest end", justify="right"), "out of memory",
                  title=f"The {len(d.top_tiles)} tiles with most bytes (after overlapping: "
                        "bytes shared by variables counted once)", title_justify="left")
    for row in d.top_tiles:
        tiles.add_row(str(row.tile), *([str(row.ipu)] if multi else []),
                      f"{row.bytes:,}", f"{row.sum_of_sizes:,}", f"{row.highest_end:,}",
                      "yes" if row.out_of_memory else "")
    c.print(tiles)


# ---- tilemem report: the memory part of the profile summary --------------------------------
#: Names of the categories in the profile summary (002 prints the ones it shows this way;
#: the rest follow the same style).
DISPLAY_NAMES = {
    "constant": "Constants", "controlCode": "Control Code", "controlId": "Control IDs",
    "controlTable": "Control Table", "copyDescriptor": "Copy Descriptors",
    "globalExchangeCode": "Global Exchange Code",
    "globalExchangePacketHeader": "Global Exchange Packet Headers",
    "globalMessage": "Global Exchange Message Buffers", "hostExchangeCode": "Host Exchange Code",
    "hostExchangePacketHeader": "Host Exchange Packet Headers",
    "hostMessage": "Host Exchange Message Buffers",
    "instrumentationResults": "Instrumentation Results",
    "internalExchangeCode": "Internal Exchange Code",
    "message": "Internal Exchange Message Buffers", "multiple": "Multiple Categories",
    "outputEdge": "Output Edges", "rearrangement": "Data Rearrangement Buffers",
    "sharedCodeStorage": "Shared Code Storage", "sharedDataStorage": "Shared Data Storage",
    "stack": "Stack", "variable": "Variables", "vectorListDescriptor": "VectorList Descriptors",
    "vertexCode": "Vertex Code", "vertexFieldData": "Vertex Field Data",
    "vertexInstanceState": "Vertex Instances",
}
GAP_DISPLAY_NAMES = {
    "alignment": "Alignment", "elementConstraint": "Element Constraints",
    "regionConstraint": "Region Constraints", "interleavedBoundary": "Interleaved Boundary",
    "memoryEnd": "End Of Memory", "fragmentation": "Fragmentation",
}




def summary_text(fig: MemoryFigures, top: int = 5) -> str:
    """The memory part of Poplar's profile summary (002) for this allocation, plus gaps."""
    def b(n) -> str:
        return f"{int(n):,} B"

    def row(label, value, indent, width=46):
        return f"{' ' * indent}{label:<{width - indent}}{b(value):>16}"

    rb = fig.region_bytes.sum(axis=1)
    lines = ["Memory Usage:",
             row("Including Gaps:", fig.highest_end.sum(), 4),
             "    Excluding Gaps:",
             "      By Memory Region:",
             row("Non-interleaved:", rb[NON_INTERLEAVED], 8),
             row("Interleaved:", rb[INTERLEAVED], 8),
             row("Overflowed:", rb[OVERFLOWED], 8),
             row("Total:", rb.sum(), 6),
             "      By Data Type:"]
    for title, arr in (("Not Overlapped", fig.non_overlapped), ("Overlapped", fig.overlapped)):
        per_cat = arr.sum(axis=(1, 2))
        lines.append(f"        {title}")
        for c in np.argsort(-per_cat, kind="stable"):
            if per_cat[c]:
                name = fig.categories[c]
                lines.append(row(DISPLAY_NAMES.get(name, name) + ":", per_cat[c], 12))
        lines.append(row("Total:", per_cat.sum(), 10))
    lines.append(row("Total After Overlapping:", fig.after_overlapping.sum(), 10))
    by_cause = fig.gaps.bytes_by_cause(fig.num_tiles).sum(axis=1)
    lines.append("      Gaps By Likely Cause:")
    for i, name in enumerate(GAP_CAUSES):
        if by_cause[i]:
            lines.append(row(GAP_DISPLAY_NAMES[name] + ":", by_cause[i], 8))
    lines.append(row("Total:", by_cause.sum(), 6))

    used = fig.dump_tiles()
    total = fig.total
    if fig.partial:
        from .figures.summary import dump_note

        lines += ["", f"  By Tile (Excluding Gaps): {dump_note(len(used), fig.num_tiles)}"]
    else:
        lines += ["", f"  By Tile (Excluding Gaps): {len(used):,} tile(s) in use of "
                      f"{fig.num_tiles:,}"]
    if len(used):
        edges, counts = tile_histogram(total[used])
        lines.append(f"    {'Range (KB) Histogram (Excluding Gaps)':<52}Count (tiles)")
        peak = max(int(counts.max()), 1)
        for lo, hi, n in zip(edges[:-1] // 1024, edges[1:] // 1024, counts):
            bar = "*" * (-(-40 * int(n) // peak))
            lines.append(f"    {lo:>5} - {hi:>4} {bar:<40}{int(n):>7}")
        lines.append("")
        ti = int(used[np.argmax(fig.highest_end[used])])
        te = int(used[np.argmax(total[used])])
        lines.append(f"    Maximum (Including Gaps): {human_bytes(int(fig.highest_end[ti]))} "
                     f"on {fig.target.tile_label(ti)}")
        lines.append(f"    Maximum (Excluding Gaps): {human_bytes(int(total[te]))} on "
                     f"{fig.target.tile_label(te)}")
    oom = fig.out_of_memory()
    lines.append(f"    {len(oom):,} tile(s) out of memory")
    if len(oom):
        tm = fig.target.tile_memory
        lines.append(f"    Largest out of memory (tileMemory {tm:,} B):")
        for t in oom[:top]:
            ipu = f" (IPU {int(t) // fig.target.ipu_tiles})" if fig.target.num_ipus > 1 else ""
            lines.append(f"      tile {int(t):>5}{ipu}: {int(fig.highest_end[t]):>12,} B including "
                         f"gaps ({int(fig.highest_end[t]) - tm:,} B over), "
                         f"{int(total[t]):,} B excluding gaps")
    return "\n".join(lines)


# ---- tilemem liveness ----------------------------------------------------------------------
class PeakVar(msgspec.Struct):
    var: int
    name: str
    bytes: int
    cls: int = msgspec.field(name="class")


class TileLiveness(msgspec.Struct, rename="camel"):
    """One tile of ``tilemem liveness --json`` (a ``MaxLive`` with the names of its peak)."""

    tile: int
    always_live_bytes: int
    max_live_bytes: int
    exact: bool
    upper_bound_bytes: int
    method: str
    always_live_vars: int
    peak_vars: list[PeakVar]


class LivenessDocument(msgspec.Struct):
    tiles: list[TileLiveness]


def liveness_json(r, found) -> LivenessDocument:
    """The JSON of ``tilemem liveness``: per ``MaxLive`` its figures and the variables live at
    the peak (always-live ones only counted)."""
    tiles = []
    for m in found:
        al = r.always_live[m.peak_rows]
        rows = m.peak_rows[~al]
        tiles.append(TileLiveness(
            tile=m.tile, always_live_bytes=m.always_live_bytes, max_live_bytes=m.max_live_bytes,
            exact=m.exact, upper_bound_bytes=m.upper_bound_bytes, method=m.method,
            always_live_vars=int(al.sum()),
            peak_vars=[PeakVar(int(r.var_id[x]), r.name(x), int(r.size[x]), int(r.eq_class[x]))
                       for x in rows.tolist()]))
    return LivenessDocument(tiles)


def base_name(name: str) -> str:
    """A variable's name without Poplar's ``#tile`` suffix (004: "may have a suffix of the
    form #n").

    >>> base_name("layer1/weights#12"), base_name("a#b")
    ('layer1/weights', 'a#b')
    """
    head, sep, tail = name.rpartition("#")
    return head if sep and tail.isdigit() else name


def _by_name(r, rows):
    """``{name without #tile: bytes}`` of the rows, heaviest first."""
    if not len(rows):
        return []
    names = np.asarray([base_name(r.name(x)) for x in rows.tolist()], dtype=object)
    uniq, inv = np.unique(names, return_inverse=True)
    sums = np.bincount(inv, weights=r.size[rows], minlength=len(uniq))
    return sorted(zip(uniq.tolist(), (int(s) for s in sums)), key=lambda kv: (-kv[1], kv[0]))


def liveness_view(c, r, name: str, tiles, found, top: int, all_tiles: bool) -> None:
    """The "Variable Storage Liveness" part of Poplar's profile summary, for ``tiles``."""
    from rich.padding import Padding
    from rich.table import Column, Table

    def indented(table, left=6):
        c.print(Padding(table, (0, 0, 0, left), expand=False))

    tm = r.target.tile_memory
    c.print(f"[bold]{name}[/bold]")
    if all_tiles:
        where = "All tiles"
    elif len(tiles) == 1:
        where = f"Tile {tiles[0]}"
    else:
        where = f"{len(tiles)} tiles"
    c.print(f"  Variable Storage Liveness: {where}")
    if not found:
        c.print("    no allocated variables")
        return
    sel = np.zeros(r.num_tiles, bool)
    sel[tiles] = True
    al_rows = np.flatnonzero(r.allocated & r.always_live & sel[np.where(r.allocated, r.tile, 0)])
    c.print(f"    Always-live bytes: {int(r.size[al_rows].sum()):,}")
    named = _by_name(r, al_rows)
    t = Table(Column("Always-live variables", style=None), Column("bytes", justify="right"),
              box=None, padding=(0, 2), pad_edge=False)
    for var, b in named[:top]:
        t.add_row(var, f"{b:,}")
    if len(named) > top:
        t.add_row(f"... {len(named) - top:,} more names", "")
    indented(t)
    peak = max(found, key=lambda m: (m.max_live_bytes, -m.tile))
    c.print(f"    Maximum live bytes (including always-live): {human_bytes(peak.max_live_bytes)}"
            f" on tile {peak.tile}" + ("" if peak.exact else
                                       f" (not proven: at most {peak.upper_bound_bytes:,})"))
    inexact = [m for m in found if not m.exact]
    if len(found) > 1:
        tab = Table(Column("tile", justify="right"), Column("always-live", justify="right"),
                    Column("max live", justify="right"), Column("of tileMemory", justify="right"),
                    Column("exact"), box=None, padding=(0, 2), pad_edge=False)
        for m in sorted(found, key=lambda m: (-m.max_live_bytes, m.tile))[:top]:
            tab.add_row(str(m.tile), f"{m.always_live_bytes:,}", f"{m.max_live_bytes:,}",
                        f"{100 * m.max_live_bytes / tm:.1f} %",
                        "yes" if m.exact else f"no (<= {m.upper_bound_bytes:,})")
        c.print(f"    The {min(top, len(found))} tiles with the highest maximum live bytes:")
        indented(tab)
        over = sum(m.max_live_bytes > tm for m in found)
        c.print(f"    Tiles whose maximum live bytes exceed tileMemory ({tm:,}): {over:,}"
                + (" (no allocation can fit them)" if over else ""))
    c.print(f"    Peak on tile {peak.tile} ({peak.method}):")
    rows = peak.peak_rows[~r.always_live[peak.peak_rows]]
    c.print(f"      Live Bytes (excluding always-live): {peak.peak_bytes:,}")
    live = _by_name(r, rows)
    t = Table(Column("Live Vars (excluding always-live)"), Column("bytes", justify="right"),
              box=None, padding=(0, 2), pad_edge=False)
    for var, b in live[:top]:
        t.add_row(var, f"{b:,}")
    if len(live) > top:
        t.add_row(f"... {len(live) - top:,} more names", "")
    indented(t, 8)
    if inexact:
        c.print(f"    Not proven within the time limit on {len(inexact):,} tile(s): their figure "
                "is the heaviest live set found (a valid lower bound); see the upper bounds.")


# ---- tilemem alloc -------------------------------------------------------------------------
class TileAllocation(msgspec.Struct, rename="camel", omit_defaults=True):
    """One tile of ``tilemem alloc --json``: a ``TileResult`` (``placedAsReport`` only for
    replay, ``note`` only when there is one)."""

    tile: int
    method: str
    status: str
    overflow_bytes: int
    total_including_gaps: int
    bound: int
    bound_exact: bool
    gap: float
    seconds: float
    num_vars: int = msgspec.field(name="variables")
    placed_as_report: int | None = None
    note: str = ""

    def __post_init__(self):
        self.seconds = round(self.seconds, 4)


class AllocationSummary(msgspec.Struct, rename="camel", omit_defaults=True):
    method: str
    tiles: int
    tiles_that_fit: int
    overflow_bytes: int
    optimal: int
    mean_gap: float
    median_gap: float
    p95_gap: float
    max_gap: float
    within_one_percent: float
    seconds: float
    from_journal: int
    unreached: int
    tiles_that_fit_before: int
    tiles_that_fit_after: int
    output: str | None = None
    #: on a partial report only: tiles with variables in the report, and its numTiles
    tiles_in_dump: int | None = None
    num_tiles: int | None = None
    #: tiles neither the exact stage nor the quick search reached (kept the first pass's)
    unsearched: int = 0


class AllocationDocument(msgspec.Struct):
    tiles: list[TileAllocation]
    summary: AllocationSummary


def alloc_json(method: str, result, fit_before: int, output=None,
               dump: tuple[int, int] | None = None) -> AllocationDocument:
    """The JSON of ``tilemem alloc``: every ``TileResult`` of ``result`` (an ``Allocation``)
    and its summary, with how many tiles fit with the report's offsets (``fit_before``: the
    checker accepts them, ``tilemem.figures.summary.tiles_fitting``) and with the new ones.
    ``dump``: (tiles in the dump, numTiles) of the report; a tile with no variables (not in
    the dump of a partial report) does not count as fitting."""
    partial = dump is not None and dump[0] < dump[1]
    summary = {**result.summary(), "method": method, "tilesThatFitBefore": fit_before,
               "tilesThatFitAfter": sum(t.fits and t.num_vars > 0 for t in result.tiles),
               "output": None if output is None else str(output),
               "tilesInDump": dump[0] if partial else None,
               "numTiles": dump[1] if partial else None}
    return AllocationDocument(
        tiles=[msgspec.convert(t, TileAllocation, from_attributes=True) for t in result.tiles],
        summary=msgspec.convert(summary, AllocationSummary))


#: Rows of ``alloc_view``'s table beyond which it shows only the worst half of this.
MAX_ROWS = 60


def alloc_view(c, name: str, doc: AllocationDocument) -> None:
    """One row per tile (method, status, overflow, totalIncludingGaps, bound, gap), then how
    many tiles fit before and after."""
    from rich import box
    from rich.table import Table

    s = doc.summary
    table = Table("tile", "vars", "method", "status", "overflow", "total", "bound", "gap",
                  "secs", title=f"{name}: allocation ({s.method})", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in table.columns:
        col.no_wrap = True
    for col in table.columns[4:]:
        col.justify = "right"
    table.columns[1].justify = "right"
    shown = doc.tiles
    if len(shown) > MAX_ROWS:   # a whole IPU: the tiles a user looks at first
        shown = sorted(shown, key=lambda t: (-t.overflow_bytes, -t.gap, t.tile))[:MAX_ROWS // 2]
        table.title += f", the {len(shown)} worst of {len(doc.tiles):,} tiles (--json: all)"
    for t in shown:
        table.add_row(str(t.tile), f"{t.num_vars:,}", t.method, t.status,
                      f"{t.overflow_bytes:,}", f"{t.total_including_gaps:,}",
                      f"{t.bound:,}" + ("" if t.bound_exact else "*"), f"{100 * t.gap:.2f}%",
                      f"{t.seconds:.2f}")
    c.print(table)
    if s.tiles_in_dump is not None:
        from .figures.summary import dump_note

        c.print(dump_note(s.tiles_in_dump, s.num_tiles))
    c.print(f"tiles that fit: {s.tiles_that_fit_before:,} of {len(doc.tiles):,} with the "
            f"report's offsets (within memory and accepted by the checker), "
            f"{s.tiles_that_fit_after:,} after; overflowed bytes "
            f"{s.overflow_bytes:,}; proven optimal {s.optimal:,}; gap to the bound: median "
            f"{100 * s.median_gap:.2f}%, 95th percentile {100 * s.p95_gap:.2f}%, worst "
            f"{100 * s.max_gap:.2f}%; {100 * s.within_one_percent:.1f}% of tiles within 1%")
    if s.unreached:
        c.print(f"{s.unreached:,} tile(s) not reached by the exact stage before the run's "
                f"budget ran out (--budget): they keep the quick search's allocation"
                + (f", or for {s.unsearched:,} the first pass's (no search reached them)"
                   if s.unsearched else ""))
    if s.from_journal:
        c.print(f"{s.from_journal:,} tile problem(s) taken from the journal of the "
                f"interrupted run")
    c.print("total = totalIncludingGaps (highest end address); bound = maximum live bytes, "
            "or interleaved start + heaviest interleaved-only clique where higher"
            + (" (* a lower bound, not proven maximum)"
               if not all(t.bound_exact for t in doc.tiles) else "")
            + "; feasible = time limit hit, not proven optimal")
    if s.output is not None:
        c.print(f"wrote {s.output}")


# ---- tilemem check -------------------------------------------------------------------------
def check_text(r, name: str, allocation, res) -> str:
    """The checker's verdict: violations by rule (documented, then inferred), waived findings,
    overflow per tile, and one closing line."""
    from .check import INFERRED

    lines = []
    what = f"{name}" + (f" (allocation {allocation})" if allocation else "")
    n = int(r.allocated.sum())
    tiles = len(r.tiles_in_use())
    documented = [k for k in res.counts if k not in INFERRED]
    for title, names in (("rules", documented),
                         ("inferred rules", [k for k in res.counts if k in INFERRED])):
        bad = [k for k in names if res.counts[k]]
        if not bad:
            continue
        lines.append(f"{title}:")
        for k in bad:
            lines.append(f"  {k}: {res.counts[k]:,} violation(s)")
            shown = [v for v in res.violations if v.rule == k]
            for v in shown:
                lines.append(f"    {v}")
            if res.counts[k] > len(shown):
                lines.append(f"    ... {res.counts[k] - len(shown):,} more")
    for k, count in res.waived_counts.items():
        if count:
            lines.append(f"waived (inferred rule switched off): {k}: {count:,} finding(s)")
            for v in [v for v in res.waived if v.rule == k]:
                lines.append(f"    {v}")
    over = res.overflowed_tiles()
    if len(over):
        worst = over[res.overflow_bytes[over].argsort()[::-1][:5]]
        lines.append(f"overflow: {int(res.overflow_bytes.sum()):,} bytes past tileMemory on "
                     f"{len(over):,} tile(s) (reported, not a rule violation); most on tile(s) "
                     + ", ".join(f"{t} ({res.overflow_bytes[t]:,} B)" for t in worst.tolist()))
    if res.ok:
        lines.append(f"{what}: valid allocation ({n:,} variables on {tiles:,} tiles)")
    else:
        lines.append(f"{what}: INVALID: {res.num_violations:,} violation(s)")
    return "\n".join(lines)


# ---- tilemem oom ---------------------------------------------------------------------------
def oom_view(c, name: str, found: list[TileDiagnosis], fig: MemoryFigures,
             tiles=None) -> None:
    """One screen per out-of-memory tile, worst first; or where the fullest tile stands.
    ``tiles``: the tiles asked for (``None``: all)."""
    c.print(no_oom_text(fig, tiles) if not found else
            f"[bold]{len(found):,} tile(s) out of memory[/bold] in {name}, worst first")
    for d in found:
        oom_panel(d, c)


def no_oom_text(fig: MemoryFigures, tiles=None) -> str:
    """What ``tilemem oom`` says when none of ``tiles`` (``None``: all) is out of memory:
    the fullest of them, and the out-of-memory tiles elsewhere, without contradiction."""
    from .figures.summary import dump_note

    tm = fig.target.tile_memory
    present = fig.highest_end > 0 if fig.in_dump is None else fig.in_dump
    if tiles is None:
        asked = np.flatnonzero(present)
        what = "No tile is out of memory"
    else:
        asked = np.asarray(tiles, np.int64)
        shown = ", ".join(str(t) for t in asked[:5].tolist()) + (", ..." if len(asked) > 5 else "")
        what = f"None of the tiles asked for ({shown}) is out of memory"
        asked = asked[present[asked]]
    if not len(asked):
        text = f"{what}: none of them is in the report's dump (no variables)."
    else:
        i = int(asked[np.argmax(fig.highest_end[asked])])
        text = (f"{what}; the fullest of them is tile {i} with {int(fig.highest_end[i]):,} B "
                f"including gaps of {tm:,} B.")
    oom = fig.out_of_memory()
    if tiles is not None and len(oom):
        text += (f" {len(oom):,} tile(s) out of memory elsewhere, worst tile {int(oom[0])} "
                 f"({int(fig.highest_end[oom[0]]) - tm:,} B over).")
    partial = dump_note(int(present.sum()), fig.num_tiles)
    return text + (f" {partial}." if partial else "")


def oom_panel(d: TileDiagnosis, console) -> None:
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
    if d.peak_steps:
        first, end = d.peak_steps
        head.append(f"peak at program step {first:,}"
                    + (f" (live together over steps {first:,}-{end - 1:,})" if end - 1 > first
                       else "") + "\n")
    style = {"reduceData": "bold red", "repackFits": "bold green",
             "repackOverflows": "bold yellow"}.get(d.verdict_code, "bold")
    head.append(d.verdict, style=style)
    if d.repack:
        head.append(f"\nre-pack: {d.repack.method} ({d.repack.status}), highest end "
                    f"{d.repack.total_including_gaps:,} B")
    for n in d.notes:
        head.append(f"\nnote: {n}", style="dim")
    steps = Text()
    if d.next_steps:
        steps.append("Next steps", style="bold")
        for k, line in enumerate(d.next_steps):
            steps.append(f"\n{'-' if k else '>'} {line}")

    starred = any(v["alwaysLive"] for v in d.peak_vars)
    pv = Table("var", "name", "category", "class", "bytes", title="Largest live at the peak",
               title_justify="left", box=None, pad_edge=False,
               caption=("* always live (alwaysLive): live for the whole program, it shares "
                        "its bytes with no other variable") if starred else None,
               caption_justify="left")
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
    if d.next_steps:
        body.add_row(steps)
    body.add_row(pv)
    if console.width >= 120:     # two tables a row on a wide terminal, else one
        for a, b in ((pc, cat), (gaps, reg)):
            g = Table.grid(padding=(0, 4))
            g.add_row(a, b)
            body.add_row(g)
    else:
        for table in (pc, cat, gaps, reg):
            body.add_row(table)
    where = f"tile {d.tile}" + (f" (IPU {d.ipu})" if d.ipu is not None else "")
    console.print(Panel(body, title=f"[bold]{where}[/bold]: out of memory by "
                        f"{d.excess:,} B", title_align="left"))


def _short(s: str, n: int) -> str:
    return s if len(s) <= n else "…" + s[-(n - 1):]


# ---- tilemem liveness --steps ----------------------------------------------------------------
#: At most this many rows in the text view; longer curves are shown as the maximum per bin.
STEP_ROWS = 40
BAR = 30
SOURCE = {"steps": "from equivalenceClassSteps",
          "points": "reconstructed from the interference: program points in an order "
                    "consistent with it, not the program's own steps"}
UNAVAILABLE = ("unavailable: the report has no equivalenceClassSteps and the interference of "
               "this tile has no interval model, so no order of program steps can be drawn "
               "without inventing one")


def binned(start: np.ndarray, live: np.ndarray, rows: int = STEP_ROWS):
    """``[(first, last, max live bytes)]``: the segments themselves when few, else ``rows``
    bins of equal width (the maximum in each, so the peak survives binning)."""
    if len(start) <= 1:
        return []
    ends = np.r_[start[1:] - 1]
    segs = list(zip(start[:-1].tolist(), ends.tolist(), live[:-1].tolist()))
    if len(segs) <= rows:
        return segs
    lo, hi = int(start[0]), int(start[-1])
    edges = np.unique(np.linspace(lo, hi, rows + 1).round().astype(np.int64))
    out = []
    for a, b in zip(edges[:-1].tolist(), edges[1:].tolist()):
        # the segments that cover any step of [a, b): the one holding a, and those starting in
        first = np.searchsorted(start, a, side="right") - 1
        last = np.searchsorted(start, b, side="left")
        out.append((a, b - 1, int(live[max(first, 0):max(last, first + 1)].max())))
    return out


def _bar(value: int, peak: int) -> str:
    n = 0 if peak <= 0 else round(BAR * value / peak)
    return "█" * n


def steps_view(c, r, report, tiles, all_tiles: bool) -> None:
    """``tilemem liveness --steps``: live bytes over program steps as text, on console ``c``."""
    from rich.table import Column, Table

    from .liveness import live_rows_at, max_over_tiles, step_profile
    c.print(f"[bold]{report}[/bold]")
    tm = r.target.tile_memory
    if len(tiles) == 1:
        t = int(tiles[0])
        p = step_profile(r, t)
        c.print(f"  Live bytes over program steps: tile {t}")
        if p is None:
            c.print(f"    {UNAVAILABLE}")
            return
        c.print(f"    ({SOURCE[p.kind]})")
        unit = "program step" if p.kind == "steps" else "program point"
        if not len(p.start):
            c.print(f"    no variable with a lifetime; always-live {p.always_live_bytes:,} B")
            return
        lo, hi = p.peak_steps
        live = live_rows_at(r, t, lo)
        span = f"{unit}s {lo:,}-{hi - 1:,}" if hi - 1 > lo else f"{unit} {lo:,} only"
        c.print(f"    always-live {p.always_live_bytes:,} B (the floor); peak at {unit} "
                f"{lo:,}: {p.peak_bytes:,} B ({100 * p.peak_bytes / tm:.1f} % of tileMemory), "
                f"{span}, {len(live):,} variables live")
        if len(p.unplaced_rows):
            c.print(f"    {len(p.unplaced_rows):,} variable(s) whose class has no steps are on "
                    "no step")
        rows, who = binned(p.start, p.live_bytes), None
    else:
        found = max_over_tiles(r, tiles)
        where = "all tiles" if all_tiles else f"{len(tiles):,} tiles"
        c.print(f"  Live bytes over program steps: maximum over {where}")
        if found is None:
            _per_tile_peaks(c, r, tiles)
            return
        start, best, who_all = found
        c.print(f"    ({SOURCE['steps']})")
        if not len(start):
            c.print("    no variable with a lifetime")
            return
        k = int(np.argmax(best))
        c.print(f"    peak at program step {int(start[k]):,}: {int(best[k]):,} B on tile "
                f"{int(who_all[k])} ({100 * int(best[k]) / tm:.1f} % of tileMemory)")
        rows = binned(start, best)
        unit = "program step"
        who = (start, who_all, best)
    peak = max(v for _, _, v in rows) if rows else 0
    table = Table(Column(unit + "s", justify="right"), Column("live bytes", justify="right"),
                  *([Column("tile", justify="right")] if who else []), Column(""),
                  box=None, padding=(0, 2), pad_edge=False)
    marked = False
    for a, b, v in rows:
        extra = []
        if who:
            s, w, bst = who
            i = np.searchsorted(s, a, side="right") - 1
            j = np.searchsorted(s, b, side="right")
            seg = np.arange(max(i, 0), max(j, i + 1))
            extra = [str(int(w[seg[np.argmax(bst[seg])]]))]
        mark = ""
        if v == peak and not marked:
            mark, marked = " ◀ peak", True
        table.add_row(f"{a:,}" if a == b else f"{a:,}-{b:,}", f"{v:,}", *extra,
                      _bar(v, peak) + mark)
    from rich.padding import Padding

    c.print(Padding(table, (0, 0, 0, 4), expand=False))


def _per_tile_peaks(c, r, tiles) -> None:
    from .liveness import step_profile

    c.print("    no equivalenceClassSteps: each tile's order is reconstructed from its own "
            "interference, so there is no maximum over tiles; the peak of each tile:")
    for t in tiles.tolist():
        p = step_profile(r, t)
        if p is None:
            c.print(f"    tile {t}: {UNAVAILABLE}")
        elif len(p.start):
            c.print(f"    tile {t}: peak at program point {p.peak_step:,} (reconstructed): "
                    f"{p.peak_bytes:,} B")


def steps_json(r, tiles, tile_json: list[dict]) -> dict:
    """Adds ``steps`` to every tile's JSON and returns ``{"maxOverTiles": ...}``."""
    from .liveness import max_over_tiles, step_profile

    for d in tile_json:
        p = step_profile(r, d["tile"])
        d["steps"] = None if p is None else {
            "kind": p.kind, "start": p.start.tolist(), "liveBytes": p.live_bytes.tolist(),
            "alwaysLiveBytes": p.always_live_bytes, "peakStep": p.peak_step,
            "peakBytes": p.peak_bytes}
    found = max_over_tiles(r, tiles)
    if found is None:
        return {"maxOverTiles": None}
    start, best, who = found
    return {"maxOverTiles": {"start": start.tolist(), "liveBytes": best.tolist(),
                             "tile": who.tolist()}}
