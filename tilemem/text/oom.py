"""``tilemem oom``: one screen per out-of-memory tile, or where the fullest tile stands."""
from __future__ import annotations

import numpy as np
from rich.markup import escape

from ..figures.memory import GAP_CAUSES, MemoryFigures
from ..figures.oom import TileDiagnosis
from .common import short


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
    from ..figures.summary import dump_note

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
             "repackOverflows": "bold yellow", "provenNoFit": "bold red"}.get(d.verdict_code, "bold")
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
        pv.add_row(str(v["var"]),
                   escape(short(v["name"], 36)) + (" *" if v["alwaysLive"] else ""),
                   v["category"], str(v["class"]), f"{v['size']:,}")
    pc = Table("class", "vars", "bytes", "largest", title="Largest classes at the peak",
               title_justify="left", box=None, pad_edge=False)
    for c in d.peak_classes[:6]:
        pc.add_row(str(c["class"]), str(c["vars"]), f"{c['bytes']:,}",
                   escape(short(c["largest"], 28)))
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

    rows = [head, *([steps] if d.next_steps else []), pv]
    if console.width >= 120:     # two tables a row on a wide terminal, else one
        for a, b in ((pc, cat), (gaps, reg)):
            g = Table.grid(padding=(0, 4))
            g.add_row(a, b)
            rows.append(g)
    else:
        rows.extend((pc, cat, gaps, reg))
    where = f"tile {d.tile}" + (f" (IPU {d.ipu})" if d.ipu is not None else "")
    title = f"[bold]{where}[/bold]: out of memory by {d.excess:,} B"
    if console.soft_wrap:
        # no width to fit (piped): a box would be as wide as the longest line, so a heading
        # and the parts one after another, each line no longer than what it says
        console.print(title)
        for row in rows:
            console.print()
            console.print(row)
        console.print()
        return
    body = Table.grid(padding=(1, 0))
    for row in rows:
        body.add_row(row)
    console.print(Panel(body, title=title, title_align="left"))

