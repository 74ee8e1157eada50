"""``tilemem report``: the memory part of Poplar's profile summary (002), plus gaps."""
from __future__ import annotations

import numpy as np

from ..figures.memory import (GAP_CAUSES, INTERLEAVED, NON_INTERLEAVED, OVERFLOWED,
                              MemoryFigures, tile_histogram)
from .common import human_bytes

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
        from ..figures.summary import dump_note

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
