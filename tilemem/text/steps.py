"""``tilemem liveness --steps``: live bytes over program steps, as text and JSON."""
from __future__ import annotations

import numpy as np


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

    from ..liveness import live_rows_at, max_over_tiles, step_profile
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
    from ..liveness import step_profile

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
    from ..liveness import max_over_tiles, step_profile

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
