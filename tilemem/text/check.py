"""``tilemem check``: the checker's verdict as text."""
from __future__ import annotations


def check_text(r, name: str, allocation, res) -> str:
    """The checker's verdict: violations by rule (documented, then inferred), waived findings,
    overflow per tile, and one closing line."""
    from ..check import INFERRED

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
