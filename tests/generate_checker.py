"""An allocation checker written for the generator's tests, independent of tilemem.pack.

It re-derives every placement rule from the documents (004, FACTS.md, tilemem.rules for the
inferred parameters only) and returns a list of violations, each naming tile, rule and vars.
"""
from __future__ import annotations

import numpy as np

from tilemem.rules import MIN_ALIGNMENT


def violations(r, limit: int = 20) -> list[str]:
    """Every broken rule of the report's own offsets (at most ``limit`` messages)."""
    t = r.target
    tm, ils = t.tile_memory, t.interleaved_memory_start
    starts = np.asarray(t.memory_element_offsets)
    out: list[str] = []
    a = r.allocated
    off, size = r.offset, np.maximum(r.size, 1)
    end = off + size
    over = off >= tm
    code = r.executable | r.vertex_code

    def report(mask, rule):
        for row in np.flatnonzero(mask & a)[:limit]:
            out.append(f"tile {r.tile[row]}: var {r.var_id[row]} {rule}")

    report(off % np.maximum(r.alignment, MIN_ALIGNMENT) != 0, "misaligned")
    report(~over & (end > tm), "straddles tileMemory")
    report(~over & r.in_interleaved_mem & (off < ils), "interleaved var below the region")
    report(~over & code & (end > ils), "code outside the non-interleaved region")
    report(~over & (off < ils) & (end > ils), "spans the region boundary")

    # class adjacency as a dense boolean matrix (the tests' reports have few classes)
    nc = r.num_classes
    adj = np.zeros((nc, nc), bool)
    adj[r.interference.row_ids(), r.interference.indices] = True
    adj |= adj.T
    np.fill_diagonal(adj, True)

    for tile in r.tiles_in_use().tolist():
        rows = r.tile_rows(tile)
        o = np.argsort(off[rows], kind="stable")
        rs = rows[o]
        s, e = off[rs], end[rs]
        hi = np.searchsorted(s, e, side="left")          # later-sorted vars starting before e
        cnt = np.maximum(hi - np.arange(len(rs)) - 1, 0)
        i = np.repeat(np.arange(len(rs)), cnt)
        first = np.zeros(len(rs) + 1, np.int64)
        np.cumsum(cnt, out=first[1:])
        j = i + 1 + (np.arange(len(i)) - first[i])
        # equal starts: also overlap the other way round (s[j] == s[i] handled: j > i)
        ri, rj = rs[i], rs[j]
        bad = (r.always_live[ri] | r.always_live[rj]
               | adj[r.eq_class[ri], r.eq_class[rj]])
        for x, y in zip(ri[bad][:limit].tolist(), rj[bad][:limit].tolist()):
            out.append(f"tile {tile}: conflicting vars {r.var_id[x]} and {r.var_id[y]} overlap")
    for name, csr, unit in (("element", r.element_constraints, "e"),
                            ("region", r.region_constraints, "r")):
        src = csr.row_ids()
        dst = csr.indices
        keep = ~over[src] & ~over[dst]
        src, dst = src[keep], dst[keep]
        if unit == "e":
            f0 = np.searchsorted(starts, off, side="right") - 1
            f1 = np.searchsorted(starts, end - 1, side="right") - 1
        else:
            f0 = (off >= ils).astype(int)
            f1 = (end - 1 >= ils).astype(int)
        disjoint = (f1[src] < f0[dst]) | (f1[dst] < f0[src])
        for x, y in zip(src[~disjoint][:limit].tolist(), dst[~disjoint][:limit].tolist()):
            out.append(f"tile {r.tile[x]}: {name} constraint {r.var_id[x]}-{r.var_id[y]} broken")
    return out[:limit] if limit else out


def tiles_over_memory(r) -> np.ndarray:
    """Tiles with a variable in the overflow zone (at or past tileMemory)."""
    a = r.allocated
    over = a & (r.offset + r.size > r.target.tile_memory)
    return np.unique(r.tile[over])
