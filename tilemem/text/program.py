"""``tilemem oom``'s first screen: the answer for the whole program (``ProgramSummary``), then
one line per out-of-memory tile."""
from __future__ import annotations

from rich.markup import escape

from ..figures.program import ProgramSummary, verdict_of
from ..figures.verdicts import OomVerdict
from .common import human_bytes, short, titled

#: Rows of the tile table beyond which only the worst are listed (the JSON has them all).
TILE_ROWS = 30

#: Short words for a tile's verdict in the tile table.
VERDICT_WORDS = {"reduceData": "reduce data", "provenNoFit": "proven no fit",
                 "repackFits": "fits re-packed",
                 "undecided": "undecided", "notRepacked": "not re-packed"}

VERDICT_LINES = {
    "reduceData": "cannot fit as they are: the live data alone exceeds tileMemory (reduce data)",
    "provenNoFit": "cannot fit although their live data does: proven under the placement rules",
    "repackFits": "fit once re-packed: a better allocation alone fits them",
    "undecided": "undecided: the live data fits, but no allocation found fits",
    "notRepacked": "live data fits; re-packing not run (--no-repack): a better allocation may fit",
}


def program_view(c, name: str, s: ProgramSummary, report_arg: str = "REPORT") -> None:
    """The program's verdict in one screen: counts by verdict, bytes to free, the tensors
    live at most peaks, the plan that fits, the ranked next steps."""
    from rich.table import Column, Table

    tm = s.tile_memory
    dump = (f" ({s.tiles_in_dump:,} of {s.num_tiles:,} tiles in the dump)"
            if s.tiles_in_dump < s.num_tiles else "")
    name = escape(name)
    if s.edits:   # a what-if: the report's offsets no longer say which tiles fit
        c.print(f"[bold]{name}: {s.out_of_memory:,} of {s.tiles_in_dump:,} tiles in question"
                f"[/bold] (out of memory in the report, or live data over tileMemory after "
                f"the change; tileMemory {tm:,} B){dump}")
    else:
        c.print(f"[bold]{name}: {s.out_of_memory:,} of {s.tiles_in_dump:,} tiles out of "
                f"memory[/bold] with the report's offsets (tileMemory {tm:,} B){dump}")
    for v, n in s.verdicts.items():
        if n:
            line = VERDICT_LINES[v]
            if s.edits and v == OomVerdict.NOT_REPACKED:
                line = "live data fits: they fit by the bound (--repack: does an allocation?)"
            c.print(f"  {n:>6,} {line}")
    if s.reduce_data_before is not None:
        c.print(f"  tiles that need less data: {s.reduce_data_before:,} before the change, "
                f"{s.verdicts[OomVerdict.REDUCE_DATA]:,} after")
    f = s.bytes_to_free
    if f.tiles:
        c.print(f"  bytes to free on the {f.tiles:,} tiles that need less data: "
                f"{human_bytes(f.total)} in all; worst tile {f.worst_tile} {f.worst:,} B; "
                f"median {f.median:,} B, 90th percentile {f.p90:,} B")
    if s.tiles_that_fit_after is not None:
        c.print(f"  after re-packing: {s.tiles_that_fit_after:,} tiles fit "
                f"({s.tiles_that_fit_before:,} with the report's offsets); overflowed bytes "
                f"{s.overflow_bytes_after:,} ({s.overflow_bytes_before:,} with the report's)")
    for a in s.edits:
        c.print(f"  what-if: {escape(a.edit)}: {a.tensors:,} tensor(s), {a.variables:,} variables, "
                f"{a.bytes_before:,} B -> {a.bytes_after:,} B")
    for text in s.assumptions:
        c.print(f"  [dim]assumes {text}[/dim]")
    if s.top_tensors:
        t = Table("tensor", Column("tiles", justify="right"),
                  Column("bytes there", justify="right"), "", "layer",
                  Column("tiles", justify="right"), Column("bytes there", justify="right"),
                  box=None, padding=(0, 1), pad_edge=False)
        for i in range(max(len(s.top_tensors), len(s.top_layers))):
            a = s.top_tensors[i] if i < len(s.top_tensors) else None
            b = s.top_layers[i] if i < len(s.top_layers) else None
            t.add_row(escape(short(a.name, 40)) if a else "", f"{a.tiles:,}" if a else "",
                      f"{a.bytes:,}" if a else "", "",
                      escape(short(b.name, 28)) if b else "", f"{b.tiles:,}" if b else "",
                      f"{b.bytes:,}" if b else "")
        c.print(titled("Live at the most peaks: tensors (names without #tile) and layers "
                       "(name prefixes)", t))
    # the plan first: users read the top, and it answers the question the steps part
    plan_view(c, s, report_arg)
    if s.next_steps:
        of = s.next_steps[0].of_tiles
        c.print(f"[bold]Next steps[/bold]: how many of the {of:,} tiles that need less data "
                "each brings under tileMemory by the bound")
        for k, st in enumerate(s.next_steps, 1):
            c.print(f"  {k}. {escape(st.action)}: {st.tiles_fixed:,} tile(s), "
                    f"{human_bytes(st.bytes)} less there")
            cmd, _, rest = st.command.partition(" ")
            line = (f"tilemem {cmd} {report_arg} {rest}" if st.command
                    else f"tilemem what-if {report_arg} {st.what_if}")
            c.print(f"     [dim]{escape(line)}[/dim]", soft_wrap=True)


def plan_view(c, s: ProgramSummary, report_arg: str = "REPORT") -> None:
    """The plan that fits (``tilemem.figures.plan``): the cheapest combination of levers,
    what each costs, what it leaves, and the command that tries it."""
    p = s.plan
    if p is None:
        return
    if p.fits:
        head = (f"[bold]Plan that fits[/bold]: every one of the {p.of_tiles:,} tiles that need "
                f"less data under tileMemory by the bound, by more than the levers' error "
                f"({100 * p.margin:.1f} % of tileMemory), at cost {p.cost} (sum of ranks; "
                f"{p.tried} combination(s) tried, cheapest first)")
    elif p.tiles_left == 0:
        head = (f"[bold]Plan that may fit (close)[/bold]: every one of the {p.of_tiles:,} tiles "
                f"that need less data under tileMemory by the bound, but {p.tiles_close:,} by "
                f"less than the levers' error ({100 * p.margin:.1f} % of tileMemory): compile "
                f"it to know (cost {p.cost}; {p.tried} tried)")
    else:
        head = (f"[bold]Plan that fits best[/bold]: no combination of levers tried brings "
                f"every tile under tileMemory; this one leaves {p.tiles_left:,} of "
                f"{p.of_tiles:,} tiles over, {human_bytes(p.bytes_to_free)} still to free "
                f"there (cost {p.cost}; {p.tried} tried)")
    c.print(head)
    for lever, cost in zip(p.levers, p.costs):
        c.print(f"  - {escape(lever)} [dim]({escape(cost)})[/dim]")
    for e in p.errors:
        c.print(f"     [dim]error: {escape(e)}[/dim]", soft_wrap=True)
    c.print(f"     [dim]{escape(f'tilemem what-if {report_arg} {p.what_if}')}[/dim]",
            soft_wrap=True)
    c.print("     [dim]ranks: --prefer LEVER tries it first, --avoid LEVER leaves it out[/dim]")


def tile_table(c, diagnoses: list, rows: int = TILE_ROWS) -> None:
    """One line per out-of-memory tile, worst first: excess, verdict, bound, re-pack."""
    from rich.table import Column, Table

    if not diagnoses:
        return
    shown = diagnoses[:rows]
    more = len(diagnoses) - len(shown)
    t = Table(Column("tile", justify="right"), Column("excess", justify="right"), "verdict",
              Column("max live", justify="right"), Column("re-pack end", justify="right"),
              "re-pack", box=None, padding=(0, 1), pad_edge=False)
    for d in shown:
        rp = d.repack
        t.add_row(str(d.tile), f"{d.excess:,}", VERDICT_WORDS[verdict_of(d.verdict_code)],
                  f"{d.max_live_bytes:,}" + ("" if d.bound_exact else "*"),
                  f"{rp.total_including_gaps:,}" if rp else "",
                  f"{rp.method} ({rp.status})" if rp else "")
    c.print(titled("Out-of-memory tiles, worst first"
                   + (f" (the {len(shown)} worst of {len(diagnoses):,}; --json has all)"
                      if more else ""), t))
