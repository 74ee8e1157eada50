"""``tilemem alloc``: the JSON document of an allocation run and its table."""
from __future__ import annotations

import msgspec
from msgspec.structs import replace

from ..pack.kinds import Goal
from ..pack.result import TileResult
from .common import titled


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
    #: of the unreached tiles, those still above 1 % of their bound
    unreached_above_one_percent: int = 0
    #: of the unreached tiles, those no search reached (they keep the heuristic's allocation)
    unsearched: int = 0
    #: of the tiles that overflow: would an allocation fit? (``tilemem.pack.proof``)
    cannot_fit_live_data: int = 0
    cannot_fit_proven: int = 0
    undecided: int = 0
    #: where the run's time went: each pass's label, wall seconds and tiles
    passes: list[dict] = []
    #: seconds of the budget left when every tile was finished (``Allocation.ended_early``)
    ended_early: float | None = None
    goal: str = "end"
    settle: float | None = None
    #: tiles the budget did not reach: they keep the report's offsets; of them, those that
    #: decide whether the program fits (out of memory with those offsets, or a bound within
    #: 2 % of tileMemory), which the visits take first
    kept_report: int = 0
    kept_report_deciding: int = 0
    #: wall seconds: the run (set-up to last result: what ``budget`` bounds) and its set-up;
    #: apart from it, reading the report, checking its own offsets (``tilesThatFitBefore``)
    #: and writing the output
    budget: float | None = None
    run_seconds: float = 0.0
    set_up_seconds: float = 0.0
    load_seconds: float | None = None
    check_seconds: float | None = None
    write_seconds: float | None = None


class AllocationDocument(msgspec.Struct):
    tiles: list[TileResult]
    summary: AllocationSummary


def alloc_json(method: str, result, fit_before: int, output=None,
               dump: tuple[int, int] | None = None, times: dict | None = None
               ) -> AllocationDocument:
    """The JSON of ``tilemem alloc``: every ``TileResult`` of ``result`` (an ``Allocation``)
    and its summary, with how many tiles fit with the report's offsets (``fit_before``: the
    checker accepts them, ``tilemem.figures.summary.tiles_fitting``) and with the new ones.
    ``dump``: (tiles in the dump, numTiles) of the report; a tile with no variables (not in
    the dump of a partial report) does not count as fitting. ``times``: the summary's
    ``budget`` and the seconds outside the run (``loadSeconds``, ``checkSeconds``,
    ``writeSeconds``), where known."""
    partial = dump is not None and dump[0] < dump[1]
    summary = {**result.summary(), **(times or {}), "method": method,
               "tilesThatFitBefore": fit_before,
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
    """The program's verdict first (how many tiles fit, before and after; how close to their
    bounds; of those that overflow, which could fit), as ``tilemem oom`` opens with its; then
    one row per tile (method, status, overflow, totalIncludingGaps, bound, gap), the worst
    ones on a whole IPU; then what the run did not do, and the legend."""
    from rich import box
    from rich.table import Table

    s = doc.summary
    c.print(f"[bold]{name}[/bold]: tiles that fit: {s.tiles_that_fit_before:,} of "
            f"{len(doc.tiles):,} with the report's offsets (within memory and accepted by the "
            f"checker), {s.tiles_that_fit_after:,} after; overflowed bytes "
            f"{s.overflow_bytes:,}; {_share(s.within_one_percent)} of tiles within 1% of "
            f"their bound; gap to the bound: median {100 * s.median_gap:.2f}%, 95th "
            f"percentile {100 * s.p95_gap:.2f}%, worst {100 * s.max_gap:.2f}%; proven "
            f"optimal {s.optimal:,}")
    over = s.cannot_fit_live_data + s.cannot_fit_proven + s.undecided
    if over:
        c.print(f"of the {over:,} tile(s) that overflow: {s.cannot_fit_live_data:,} cannot fit "
                f"(live data above tileMemory), {s.cannot_fit_proven:,} proven not to fit "
                f"(live data fits, the placement rules do not), {s.undecided:,} undecided "
                f"(live data fits; no fitting allocation found, none proven impossible)")
    if s.tiles_in_dump is not None:
        from ..figures.summary import dump_note

        c.print(dump_note(s.tiles_in_dump, s.num_tiles))
    table = Table("tile", "vars", "method", "status", "overflow", "total", "bound", "gap",
                  "secs", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in table.columns:
        col.no_wrap = True
    for col in table.columns[4:]:
        col.justify = "right"
    table.columns[1].justify = "right"
    title = f"{name}: allocation ({s.method})"
    shown = doc.tiles
    if len(shown) > MAX_ROWS:   # a whole IPU: the tiles a user looks at first
        shown = sorted(shown, key=lambda t: (-t.overflow_bytes, -t.gap, t.tile))[:MAX_ROWS // 2]
        title += f", the {len(shown)} worst of {len(doc.tiles):,} tiles (--json: all)"
    for t in shown:
        table.add_row(str(t.tile), f"{t.num_vars:,}", t.method, t.status,
                      f"{t.overflow_bytes:,}", f"{t.total_including_gaps:,}",
                      f"{t.bound:,}" + ("" if t.bound_exact else "*"), f"{100 * t.gap:.2f}%",
                      f"{t.seconds:.2f}")
    c.print(titled(title, table))
    if s.ended_early is not None:
        c.print(ended_early_text(s))
    if s.kept_report:
        c.print(kept_report_text(s))
    if s.unreached:
        c.print(unreached_text(s))
    if s.from_journal:
        c.print(f"{s.from_journal:,} tile problem(s) taken from the journal of the "
                f"interrupted run")
    c.print("total = totalIncludingGaps (highest end address); bound = maximum live bytes, "
            "or interleaved start + heaviest interleaved-only clique where higher, with the "
            "padding their alignments force"
            + (" (* a lower bound, not proven maximum)"
               if not all(t.bound_exact for t in doc.tiles) else "")
            + "; feasible = time limit hit, not proven optimal")
    if s.run_seconds:
        c.print(times_text(s))
    if s.output is not None:
        c.print(f"wrote {s.output}")


def _share(x: float) -> str:
    """A share as a percentage, to two decimals but for all (a target such as 99.5 % must not
    be met by rounding: 99.46 % is not 99.5 %).

    >>> _share(1.0), _share(0.99456), _share(0.0)
    ('100%', '99.46%', '0.00%')
    """
    return "100%" if x >= 1.0 else f"{100 * x:.2f}%"


def ended_early_text(s: AllocationSummary) -> str:
    """Why the run ended before its budget: nothing left that a user would notice.

    >>> s = AllocationSummary(method="auto", tiles=3, tiles_that_fit=3, overflow_bytes=0,
    ...     optimal=1, mean_gap=0, median_gap=0, p95_gap=0, max_gap=0.0008,
    ...     within_one_percent=1.0, seconds=1.0, from_journal=0, unreached=0,
    ...     tiles_that_fit_before=3, tiles_that_fit_after=3, ended_early=17.5, settle=0.001)
    >>> print(ended_early_text(s))
    ended with 17.5 s of the budget left: every tile ends within 0.1% of its bound or is proven optimal (1 proven), below what more time would change that matters
    >>> print(ended_early_text(replace(s, goal="fit", settle=None)))
    ended with 17.5 s of the budget left: every tile's question is answered (it fits, or cannot fit, or is proven not to)
    """
    head = f"ended with {s.ended_early:,.1f} s of the budget left: "
    if s.goal == Goal.FIT:
        return head + "every tile's question is answered (it fits, or cannot fit, or is proven not to)"
    return (head + f"every tile ends within {100 * (s.settle or 0):g}% of its bound or is "
            f"proven optimal ({s.optimal:,} proven), below what more time would change that "
            f"matters")


def unreached_text(s: AllocationSummary) -> str:
    """What the run's budget left undone: tiles not finished that no revisit reached (after
    its visit, ``tilemem.pack.run.plan``). The revisits take the tiles above 1 % of their bound
    first where they promise the most: "not reached" is a shortfall only for those, so the
    two kinds are told apart.

    >>> from msgspec.structs import replace
    >>> s = AllocationSummary("auto", tiles=3, tiles_that_fit=3, overflow_bytes=0, optimal=0,
    ...     mean_gap=0, median_gap=0, p95_gap=0, max_gap=0.02, within_one_percent=2 / 3, seconds=1,
    ...     from_journal=0, unreached=2, tiles_that_fit_before=3, tiles_that_fit_after=3)
    >>> print(unreached_text(s))
    every tile above 1% of its bound was revisited; the run's budget (--budget) ran out before 2 other(s) were: they keep their visit's allocation
    >>> print(unreached_text(replace(s, unreached_above_one_percent=1)))
    1 tile(s) above 1% of their bound not revisited before the run's budget (--budget) ran out, and 1 within 1% not lowered further: they keep their visit's allocation
    >>> print(unreached_text(replace(s, within_one_percent=1.0)))
    every tile ends within 1% of its bound; the run's budget (--budget) ran out before 2 of them were lowered further: they keep their visit's allocation
    """
    far = s.unreached_above_one_percent
    rest = s.unreached - far
    if far:
        text = (f"{far:,} tile(s) above 1% of their bound not revisited before the run's "
                f"budget (--budget) ran out"
                + (f", and {rest:,} within 1% not lowered further" if rest else ""))
    elif round(s.within_one_percent * s.tiles) >= s.tiles:
        text = ("every tile ends within 1% of its bound; the run's budget (--budget) ran out "
                f"before {rest:,} of them were lowered further")
    else:
        text = ("every tile above 1% of its bound was revisited; the run's budget "
                f"(--budget) ran out before {rest:,} other(s) were")
    text += ": they keep their visit's allocation"
    if s.unsearched:
        text += f", or for {s.unsearched:,} the heuristic's (no search reached them)"
    return text


def kept_report_text(s: AllocationSummary) -> str:
    """The tiles the run's budget did not reach, and whether those that decide whether the
    program fits were among them (the visits take those first).

    >>> s = AllocationSummary("auto", tiles=30, tiles_that_fit=28, overflow_bytes=9,
    ...     optimal=0, mean_gap=0, median_gap=0, p95_gap=0, max_gap=0.02,
    ...     within_one_percent=0.5, seconds=1, from_journal=0, unreached=0,
    ...     tiles_that_fit_before=27, tiles_that_fit_after=28, kept_report=12)
    >>> print(kept_report_text(s))
    12 tile(s) not visited before the run's budget (--budget) ran out keep the report's offsets; every tile that decides whether the program fits (out of memory with the report's offsets, or a bound within 2% of tileMemory) was visited first
    >>> print(kept_report_text(replace(s, kept_report_deciding=3)))
    12 tile(s) not visited before the run's budget (--budget) ran out keep the report's offsets, 3 of them tiles that decide whether the program fits (out of memory with the report's offsets, or a bound within 2% of tileMemory): a larger budget would visit them
    """
    head = (f"{s.kept_report:,} tile(s) not visited before the run's budget (--budget) ran "
            f"out keep the report's offsets")
    why = "(out of memory with the report's offsets, or a bound within 2% of tileMemory)"
    if s.kept_report_deciding:
        return (f"{head}, {s.kept_report_deciding:,} of them tiles that decide whether the "
                f"program fits {why}: a larger budget would visit them")
    return f"{head}; every tile that decides whether the program fits {why} was visited first"


def times_text(s: AllocationSummary) -> str:
    """Where the wall time went: the run (what ``--budget`` bounds) and, apart from it,
    reading the report, checking its own offsets and writing the output.

    >>> s = AllocationSummary("auto", tiles=3, tiles_that_fit=3, overflow_bytes=0,
    ...     optimal=0, mean_gap=0, median_gap=0, p95_gap=0, max_gap=0.0,
    ...     within_one_percent=1.0, seconds=1, from_journal=0, unreached=0,
    ...     tiles_that_fit_before=3, tiles_that_fit_after=3, budget=240.0,
    ...     run_seconds=236.04, set_up_seconds=10.2, load_seconds=21.0, check_seconds=9.5,
    ...     write_seconds=30.25, passes=[{"pass": "maximum live bytes", "seconds": 60.1,
    ...     "tiles": 8}, {"pass": "visits: the heuristic, then the quick search",
    ...     "seconds": 160.0, "tiles": 3}])
    >>> print(times_text(s))
    time: the run 236.0 s of its budget of 240 s (set-up 10.2 s, maximum live bytes 60.1 s, visits 160.0 s); apart from it, reading the report 21.0 s, checking its offsets 9.5 s, writing the output 30.2 s
    """
    parts = [f"set-up {s.set_up_seconds:.1f} s"] + [
        f"{p['pass'].split(':')[0]} {p['seconds']:.1f} s" for p in s.passes]
    text = (f"time: the run {s.run_seconds:.1f} s"
            + (f" of its budget of {s.budget:g} s" if s.budget is not None else "")
            + f" ({', '.join(parts)})")
    apart = [f"{what} {sec:.1f} s" for what, sec in (
        ("reading the report", s.load_seconds), ("checking its offsets", s.check_seconds),
        ("writing the output", s.write_seconds)) if sec is not None]
    return text + (f"; apart from it, {', '.join(apart)}" if apart else "")
