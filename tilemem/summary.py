"""Whole-report figures for ``tilemem info`` (column arithmetic only)."""
from __future__ import annotations

import numpy as np

from .model import Report


def bytes_per_tile(r: Report) -> np.ndarray:
    """Sum of variable sizes on every tile (no overlap, no gaps)."""
    a = r.allocated
    return np.bincount(r.tile[a], weights=r.size[a], minlength=r.num_tiles).astype(np.int64)


def highest_end_per_tile(r: Report) -> np.ndarray:
    """Highest end address (offset + size) of the report's own allocation on every tile."""
    a = r.allocated
    out = np.zeros(r.num_tiles, np.int64)
    np.maximum.at(out, r.tile[a], r.offset[a] + r.size[a])
    return out


def bytes_by_category(r: Report) -> dict[str, int]:
    a = r.allocated
    sums = np.bincount(r.category[a], weights=r.size[a], minlength=len(r.categories))
    return {r.categories[i]: int(s) for i, s in enumerate(sums) if s}


def info(r: Report, top: int = 5) -> dict:
    """Everything ``tilemem info`` shows, as plain data.

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=[0, 1], tile=[0, 0], size=[16, 300000],
    ...     alignment=[4, 4], offset=[0, 16], category=["variable", "stack"], eq_class=[0, 0],
    ...     interference=[[]])
    >>> d = info(r)
    >>> d["variables"], d["tilesOverMemory"], d["topTiles"][0]["highestEnd"]
    (2, 1, 300016)
    """
    t = r.target
    per_tile = bytes_per_tile(r)
    ends = highest_end_per_tile(r)
    k = min(top, r.num_tiles)
    top_tiles = np.argsort(-per_tile, kind="stable")[:k]
    a = r.allocated
    return {
        "target": {
            "numTiles": t.num_tiles, "tileMemory": t.tile_memory,
            "interleavedMemoryStart": t.interleaved_memory_start,
            "memoryElements": t.num_elements,
            "memoryElementOffsets": t.memory_element_offsets.tolist(),
            "supervisorInstrFetchDelay": t.supervisor_instr_fetch_delay,
            "tilesPerIPU": t.ipu_tiles, "numIPUs": t.num_ipus,
        },
        "tilesInUse": int(len(r.tiles_in_use())),
        "variables": int(a.sum()),
        "unallocatedVariables": int((~a).sum()),
        "equivalenceClasses": r.num_classes,
        "interferenceEdges": r.num_interference_edges,
        "elementConstraints": int(r.element_constraints.nnz),
        "regionConstraints": int(r.region_constraints.nnz),
        "interleavedVariables": int((a & r.in_interleaved_mem).sum()),
        "alwaysLiveBytes": int(r.size[a & r.always_live].sum()),
        "totalBytes": int(r.size[a].sum()),
        "classSteps": r.class_steps is not None,
        "tilesOverMemory": int((ends > t.tile_memory).sum()),
        "bytesByCategory": dict(sorted(bytes_by_category(r).items(), key=lambda kv: -kv[1])),
        "topTiles": [{"tile": int(i), "bytes": int(per_tile[i]), "highestEnd": int(ends[i]),
                      "outOfMemory": bool(ends[i] > t.tile_memory),
                      **({"ipu": int(t.ipu_of(i))} if t.num_ipus > 1 else {})}
                     for i in top_tiles],
    }
