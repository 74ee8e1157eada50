"""``tilemem alloc``: the JSON document of an allocation run and its table."""
from __future__ import annotations

import msgspec
from msgspec.structs import replace

from ..pack.result import TileResult


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
    #: of the tiles that overflow: would an allocation fit? (``tilemem.pack.proof``)
    cannot_fit_live_data: int = 0
    cannot_fit_proven: int = 0
    undecided: int = 0
    #: where the run's time went: each pass's label, wall seconds and tiles
    passes: list[dict] = []


class AllocationDocument(msgspec.Struct):
    tiles: list[TileResult]
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
        # seconds to 0.1 ms: what a person reads, and what the JSON always carried
        tiles=[replace(t, seconds=round(t.seconds, 4)) for t in result.tiles],
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
        from ..figures.summary import dump_note

        c.print(dump_note(s.tiles_in_dump, s.num_tiles))
    c.print(f"tiles that fit: {s.tiles_that_fit_before:,} of {len(doc.tiles):,} with the "
            f"report's offsets (within memory and accepted by the checker), "
            f"{s.tiles_that_fit_after:,} after; overflowed bytes "
            f"{s.overflow_bytes:,}; proven optimal {s.optimal:,}; gap to the bound: median "
            f"{100 * s.median_gap:.2f}%, 95th percentile {100 * s.p95_gap:.2f}%, worst "
            f"{100 * s.max_gap:.2f}%; {100 * s.within_one_percent:.1f}% of tiles within 1%")
    over = s.cannot_fit_live_data + s.cannot_fit_proven + s.undecided
    if over:
        c.print(f"of the {over:,} tile(s) that overflow: {s.cannot_fit_live_data:,} cannot fit "
                f"(live data above tileMemory), {s.cannot_fit_proven:,} proven not to fit "
                f"(live data fits, the placement rules do not), {s.undecided:,} undecided "
                f"(live data fits; no fitting allocation found, none proven impossible)")
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
