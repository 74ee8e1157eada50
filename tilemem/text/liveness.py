"""``tilemem liveness``: the "Variable Storage Liveness" part of the profile summary, and
its JSON document."""
from __future__ import annotations

import msgspec
import numpy as np

from ..model.names import base_name
from .common import human_bytes


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
